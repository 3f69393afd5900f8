"""``culturelens``: one console script, one verb per job.

Heavy imports (torch, datasets, gradio) happen inside the verbs that need them, and a verb's options are added
only when it is chosen (``_Verbs``), so ``culturelens --help`` lists the verbs at once. Every verb that may reach
the Hugging Face Hub first checks within seconds that it can (``hub_reachable``); when it cannot, the verb works
offline, from local files and the cache (``HF_HUB_OFFLINE=1``), instead of retrying the Hub for half a minute.
A user's mistake is one sentence on stderr and exit status 2 (``benchmark.errors.CultureLensError``, whatever verb
raises it); any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmark import __version__
from benchmark.errors import CultureLensError, OutputExists

DEFAULT_STORE = ".culturelens"
EXIT_ERROR = 2  # a user error (argparse uses 2 for a bad command line too); 1 is a check that failed
TRUE_VALUES = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true in HF_HUB_OFFLINE


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples kept as written; an option's default shown unless it is None or False, or its help already
    says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class _Verbs(argparse._SubParsersAction):
    """Sub-commands whose options are added when one is chosen, so that listing them imports nothing their
    options need (``culturelens --help`` must not load torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.options: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def __call__(self, parser, namespace, values, option_string=None):
        add_options = self.options.pop(values[0], None)
        if add_options is not None and values[0] in self._name_parser_map:
            add_options(self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Verbs)


def _hub_offline_requested() -> bool:
    """Whether offline mode is on: ``HF_HUB_OFFLINE``, as huggingface_hub read it when it was imported (it reads
    the variable once), else as it will read it."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        return bool(constants.HF_HUB_OFFLINE)
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in TRUE_VALUES


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub (``HF_ENDPOINT``, default huggingface.co) answers an HTTP request within about
    ``timeout`` seconds, through the proxy the environment names if any (a proxy that lets only some hosts
    through fails here as it would later); False at once when ``HF_HUB_OFFLINE`` is set."""
    import urllib.error
    import urllib.request

    if _hub_offline_requested():
        return False
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    try:
        opener = urllib.request.build_opener()  # reads the proxy settings now (urlopen's opener keeps its first)
        with opener.open(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout) as response:
            return response.status < 400
    except urllib.error.HTTPError as error:
        return error.code < 400
    except (OSError, ValueError):  # refused, timed out, no such host, a proxy's refusal, a malformed endpoint
        return False


def offline_unless_hub_reachable(environ: dict | os._Environ = os.environ) -> bool:
    """Check the Hub once; when it cannot be reached, set ``HF_HUB_OFFLINE=1`` in ``environ`` (this process's
    environment, or a child's) and say so in one line. Returns whether the work goes offline."""
    if _hub_offline_requested():
        return True
    if hub_reachable():
        return False
    print("the Hugging Face Hub cannot be reached: working offline, from local files and the Hugging Face cache "
          "only (HF_HUB_OFFLINE=1)", file=sys.stderr)
    environ["HF_HUB_OFFLINE"] = "1"
    if environ is os.environ:  # libraries imported already read the variable once, at import
        for module, names in (("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
                              ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))):
            if module in sys.modules:
                for name in names:
                    setattr(sys.modules[module], name, True)
    return True


def _quiet_datasets() -> None:
    """Our verbs show their own progress; the datasets library's per-call bars would only add noise."""
    import datasets

    datasets.disable_progress_bars()


def _add_backbone_options(parser: argparse.ArgumentParser) -> None:
    from benchmark.encoders.spec import ENV_BACKBONES

    group = parser.add_argument_group("backbones")
    group.add_argument("--backbones", default=os.environ.get(ENV_BACKBONES),
                       help=f"JSON file pointing backbone ids at local weights or adding ids (env {ENV_BACKBONES})")
    group.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    group.add_argument("--batch-size", type=int, default=32, help="images per forward pass")
    group.add_argument("--num-workers", type=int, default=None,
                       help="DataLoader processes decoding images (default: one per core on a GPU, one per 4 cores "
                            "on a CPU, none on fewer)")


def _add_metric_options(parser: argparse.ArgumentParser) -> None:
    from benchmark.metrics import ENV_W1KP_CALIBRATION

    group = parser.add_argument_group("metrics")
    group.add_argument("--tracks", nargs="+", default=None, help="tracks to score (default: every track that can run)")
    group.add_argument("--clip-backbone", default="clip-vit-b-32",
                       help="backbone id for prompt-image alignment and recognition (CRA, artifacts, countries)")
    group.add_argument("--quality-backbone", default="hpsv2",
                       help="backbone id of the quality scorer (HPS v2: awareness realism, diversity's s)")
    group.add_argument("--crt-variant", choices=["paper", "authors_code"], default="paper",
                       help="CRT protocol: the paper's, or the authors' code's (>= 0.70 still / 0.75 moving, CLIP "
                            "ViT-B/16, DINOv2 token mean, W//4 grid cuts); the options below override it")
    group.add_argument("--cra-backbone", default=None,
                       help="backbone id for CRT recognition (default: --clip-backbone; authors_code: clip-vit-b-16)")
    group.add_argument("--vr-backbone", default=None,
                       help="backbone id for visual reuse patches (default: dinov2-base; authors_code: "
                            "dinov2-base-mean-floor; the CRT paper used DINOv3: dinov3-vitb16)")
    group.add_argument("--tau", type=float, default=None,
                       help="recognition threshold (CRT Eq. 1; default 0.7), of moving references too unless "
                            "--tau-moving")
    group.add_argument("--tau-moving", type=float, default=None,
                       help="recognition threshold of moving references (default 0.7; authors_code 0.75)")
    group.add_argument("--crt-comparison", choices=[">", ">="], default=None,
                       help="recognised iff s > tau (paper) or s >= tau (authors_code)")
    group.add_argument("--tau-patch", type=float, default=0.6, help="patch reuse threshold (CRT Eq. 2)")
    group.add_argument("--w1kp-calibration", default=None,
                       help=f"W1KP distance calibration: .npz (cdf_x, cdf_y) or the authors' cdf-xy.pt, path or URL "
                            f"(env {ENV_W1KP_CALIBRATION})")
    group.add_argument("--w1kp-backbone", default="dreamsim", help="backbone id whose features W1KP compares")
    group.add_argument("--w1kp-variant", choices=["paper", "authors_code"], default="paper",
                       help="the paper's definitions, or the authors' code (F of the mean distance > 1e-4, "
                            "W1KP_k = 1 - F(E[min d]))")
    group.add_argument("--artifact-index", default=None,
                       help="diversity: folder from `culturelens artifact-index` (env CULTURELENS_ARTIFACT_INDEX)")
    group.add_argument("--diversity-tagger", default="index",
                       help="diversity: 'index' = nearest artifact name by CLIP cosine; or a Hub id/folder of a VLM "
                            "that picks among the index's top 5, as CUBE App. H.2")
    group.add_argument("--vendi-q", type=float, default=1.0, help="diversity: order q of the Vendi score")
    group.add_argument("--diversity-n", type=int, default=8, help="diversity: images per score (N)")
    group.add_argument("--diversity-sampling", choices=["seed_batches", "random"], default="seed_batches",
                       help="diversity: the paper's consecutive seed batches, or random sets")
    group.add_argument("--diversity-draws", type=int, default=50, help="diversity: random sets per prompt")
    group.add_argument("--relevance-kb", default=None,
                       help="relevance: folder from `culturelens kb-index` (env CULTURELENS_RELEVANCE_KB)")
    group.add_argument("--relevance-judge", default="Qwen/Qwen2.5-VL-7B-Instruct",
                       help="relevance: VLM judge (Hub id or folder), or 'probe' for the CLIP-probe baseline")
    group.add_argument("--relevance-k", type=int, default=20, help="relevance: KB images pooled for linking")
    group.add_argument("--relevance-linking", choices=["first_with_page", "top"], default="first_with_page",
                       help="relevance: best-ranked candidate with a Wikipedia page (authors' code), or the top "
                            "candidate whatever its page (the judge then reads its description)")
    group.add_argument("--relevance-label-case", choices=["as_given", "capitalize"], default="as_given",
                       help="relevance: label as given, or str.capitalize()d as in the authors' code")
    group.add_argument("--relevance-text-chars", type=int, default=None,
                       help="relevance: cut the Wikipedia text to N characters (authors' code: 15000; default whole)")


def _metrics(args: argparse.Namespace):
    """The metrics the options choose, and those unavailable with the reason; CultureLensError when a chosen
    track cannot run at all or the backbones file is wrong."""
    from benchmark.metrics import MetricSettings, build, select

    registry = _registry(args)
    metrics, unavailable = build(MetricSettings(
        clip_backbone=args.clip_backbone, quality_backbone=args.quality_backbone, vr_backbone=args.vr_backbone,
        tau=args.tau, tau_patch=args.tau_patch, w1kp_calibration=args.w1kp_calibration,
        crt_variant=args.crt_variant, cra_backbone=args.cra_backbone, tau_moving=args.tau_moving,
        crt_comparison=args.crt_comparison,
        w1kp_backbone=args.w1kp_backbone, w1kp_variant=args.w1kp_variant, artifact_index=args.artifact_index,
        diversity_tagger=args.diversity_tagger,
        vendi_q=args.vendi_q, diversity_n=args.diversity_n, diversity_draws=args.diversity_draws,
        diversity_sampling=args.diversity_sampling, relevance_kb=args.relevance_kb,
        relevance_judge=args.relevance_judge, relevance_k=args.relevance_k,
        relevance_linking=args.relevance_linking, relevance_label_case=args.relevance_label_case,
        relevance_text_chars=args.relevance_text_chars), registry, args.tracks)
    try:
        return select(metrics, unavailable, args.tracks)
    except ValueError as error:  # select's one refusal: no metric of a track named in --tracks can run
        raise CultureLensError(str(error)) from None


def _registry(args: argparse.Namespace):
    """The backbone registry with ``--backbones``; BackbonesFileError when that file cannot be read as one."""
    from benchmark.encoders.spec import load_registry

    return load_registry(args.backbones)


# --- data -------------------------------------------------------------------------------------
def cmd_data_build(args: argparse.Namespace) -> int:
    from benchmark.datasets import cube_1k

    _quiet_datasets()
    summary = cube_1k.build(args.source, Path(args.out), repo=args.repo)
    print(f"built cube-1k: {summary['prompts']} prompts ({summary['records']} upstream records; the demo config "
          f"{cube_1k.CONFIG_DEMO}: {summary['demo_prompts']}) in {summary['out']}")
    for code, count in summary["defects"].items():
        if count:
            print(f"  defect {code}: {count} record(s)")
    print(f'load it with: datasets.load_dataset("{summary["out"]}", "{cube_1k.CONFIG}")')
    return 0


def cmd_build_iconic(args: argparse.Namespace) -> int:
    from benchmark.datasets import iconic_references as iconic
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import BackboneUnavailable

    _quiet_datasets()
    if args.from_sparql:
        Path(args.images).mkdir(parents=True, exist_ok=True)
        count = iconic.fetch_from_wikidata(Path(args.records), Path(args.images))
        print(f"fetched {count} references from Wikidata into {args.records} and {args.images}")
    try:
        backbone = None if args.no_prune else load_backbone(args.prune_backbone, _registry(args), args.device)
    except BackboneUnavailable as error:
        raise CultureLensError(f"{error} (or pass --no-prune)") from None
    summary = iconic.build(Path(args.records), Path(args.images), Path(args.out), ner_model=args.ner,
                           prune_backbone=backbone, repo=args.repo)
    print(f"built iconic-references: {summary['kept']} of {summary['records']} references kept "
          f"({summary['images']} images, {summary['pruned']} pruned) in {summary['out']}")
    for reason, count in summary["removed"].items():
        print(f"  removed by {reason}: {count}")
    return 0


def cmd_data_push(args: argparse.Namespace) -> int:
    from benchmark.datasets.hub_layout import push_folder

    url = push_folder(Path(args.dir), args.repo, token=args.token, private=args.private)
    print(f"published {args.dir} to {url}")
    return 0


# --- submissions ------------------------------------------------------------------------------
def cmd_schema(args: argparse.Namespace) -> int:
    from benchmark.submission import json_schema

    text = json_schema()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _default_cube_source() -> str:
    """``--cube-source``'s default, as the Makefile chooses: the authors' file next to this checkout
    (``../shared/data/cube/cube_1k.json``) when present, else its public URL."""
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE

    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "cube" / "cube_1k.json"
    return str(shared) if shared.is_file() else DEFAULT_SOURCE


def _hub_has_dataset(repo: str) -> bool:
    """Whether the Hub (reachable: the verb checked it first) says dataset ``repo`` exists; False offline."""
    if _hub_offline_requested():
        return False
    from huggingface_hub import HfApi

    try:
        return HfApi().repo_exists(repo, repo_type="dataset")
    except Exception:  # noqa: BLE001 - a proxy, a timeout, an outage: all mean the repo cannot be reached
        return False


def _build_default_dataset(datasets_root: Path, source: str) -> Path | None:
    """Make sure the default dataset (CUBE-1K) can be loaded, as `make run` does: when neither a local copy under
    ``datasets_root`` nor the Hub repo is reachable, build it there from ``source``, saying so in one line (and
    rebuild a local copy made before the demo config existed).

    Returns the local folder when one exists afterwards, None when the Hub repo serves it; CultureLensError
    when the build fails.
    """
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    folder = local_folder(datasets_root, cube_1k.HUB_REPO)
    if cube_1k.has_every_config(folder):
        return folder
    if (folder / "README.md").exists():
        print(f"{folder} is an older build without the {cube_1k.CONFIG_DEMO} config: rebuilding it from {source}",
              file=sys.stderr)
    elif _hub_has_dataset(cube_1k.HUB_REPO):
        return None
    else:
        print(f"{cube_1k.HUB_REPO} is neither in {datasets_root} nor reachable on the Hub: building it from {source} "
              f"into {folder}", file=sys.stderr)
    try:
        cube_1k.build(source, folder)
    except (cube_1k.CubeSourceError, OutputExists) as error:
        raise CultureLensError(f"cannot build the default dataset {cube_1k.HUB_REPO}: {error}") from None
    return folder


def _limits(args: argparse.Namespace):
    """The upload limits ``--limit`` and ``CULTURELENS_LIMITS`` set (``leaderboard.operator_settings``);
    SettingError when one cannot be read."""
    from leaderboard import operator_settings

    return operator_settings.limits(args.limit)


def _quota(args: argparse.Namespace, *, public: bool) -> dict:
    """``Store``'s quota keywords from ``--quota``, ``--quota-hours``, ``--attempt-quota`` and the environment;
    SettingError when one cannot be read."""
    from leaderboard import operator_settings

    return operator_settings.quota(public=public, submissions=args.quota, hours=args.quota_hours,
                                   attempts=args.attempt_quota)


def cmd_validate(args: argparse.Namespace) -> int:
    import functools

    from benchmark.datasets.prompts import load_prompts_for
    from benchmark.progress import Bars
    from benchmark.submission import stage

    _quiet_datasets()
    limits = _limits(args)
    _build_default_dataset(Path(args.store) / "datasets", args.cube_source)
    staging = Path(tempfile.mkdtemp(prefix="culturelens-validate-"))
    bars = Bars(unit="img")
    loader = functools.partial(load_prompts_for, datasets_root=Path(args.store) / "datasets")
    try:
        report = stage(Path(args.path), staging, loader, limits, progress=bars.stage("checking images"))
    finally:
        bars.close()
        shutil.rmtree(staging, ignore_errors=True)  # validate never keeps anything
    print(report.text())
    return 0 if report.ok else 1


def cmd_submit(args: argparse.Namespace) -> int:
    from benchmark.progress import Bars
    from leaderboard.store import Store

    _quiet_datasets()
    # Whoever runs this holds the store's disk: the operator, held to a quota only when one is set.
    store = Store(Path(args.store), _limits(args), **_quota(args, public=False))
    _build_default_dataset(store.datasets, args.cube_source)
    bars = Bars(unit="img")
    try:  # PermissionDenied over the quota, ServerFault when the server cannot store it: both user errors
        outcome = store.submit(Path(args.path), args.owner, bars.stage("checking images"))
    finally:
        bars.close()
    print(outcome.report.text())
    if outcome.job is None:
        return 1
    print(f"queued as {outcome.job.id}")
    if args.wait:
        try:
            job = store.queue.wait(outcome.job.id, timeout=args.timeout)
        except TimeoutError as error:
            raise CultureLensError(f"{error}; it stays queued (see the Queue tab or run `culturelens worker`)"
                                   ) from None
        print(f"{job.id}: {job.state}: {job.error or job.message}")
        return 0 if job.state == "FINISHED" else 1
    return 0


# --- serving ----------------------------------------------------------------------------------
def cmd_worker(args: argparse.Namespace) -> int:
    from benchmark.reproduce import settings_record
    from leaderboard import worker
    from leaderboard.store import Store

    _quiet_datasets()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    if args.supervised:
        worker.stop_when_parent_dies()
    registry = _registry(args)
    metrics, unavailable = _metrics(args)
    return worker.main(Store(Path(args.store)), registry, metrics, unavailable, once=args.once,
                       batch_size=args.batch_size, num_workers=args.num_workers, device=args.device,
                       lease_seconds=args.lease_seconds, id=args.supervised, settings=settings_record(args))


def cmd_score(args: argparse.Namespace) -> int:
    from benchmark import scoring
    from benchmark.reproduce import settings_record

    _quiet_datasets()
    # Before any relaunch: one process builds, the shards find the local copy.
    _build_default_dataset(Path(args.store) / "datasets", args.cube_source)
    if args.num_processes > 1 and not scoring.launched_by_accelerate():
        return scoring.relaunch_with_accelerate(args.num_processes, sys.argv[1:])
    registry = _registry(args)
    metrics, unavailable = _metrics(args)
    return scoring.main(Path(args.submission), Path(args.out), registry=registry, metrics=metrics,
                        unavailable=unavailable, store=Path(args.store),
                        cache=Path(args.cache) if args.cache else None, device=args.device,
                        batch_size=args.batch_size, num_workers=args.num_workers, settings=settings_record(args))


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Redo the scoring RESULT's run.json records and print the largest difference per metric: 0 when every
    difference is within --tolerance, 1 when one is not, 2 when the result cannot be reproduced as asked."""
    from benchmark import reproduce

    _quiet_datasets()
    return reproduce.main(args.result, store=Path(args.store), submission=args.submission,
                          backbones=args.backbones, device=args.device, batch_size=args.batch_size,
                          num_workers=args.num_workers, tolerance=args.tolerance, use_cache=args.use_cache)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from benchmark import calibrate

    _quiet_datasets()
    return calibrate.main(Path(args.sample), Path(args.out), backbone_id=args.backbone, registry=_registry(args),
                          datasets_root=Path(args.store) / "datasets", device=args.device,
                          batch_size=args.batch_size, num_workers=args.num_workers, cdf=args.cdf)


def cmd_compare(args: argparse.Namespace) -> int:
    from benchmark import compare

    return compare.main([Path(r) for r in args.results], [Path(p) for p in args.perturbed] if args.perturbed else None,
                        args.metrics)


def cmd_generate(args: argparse.Namespace) -> int:
    from benchmark.datasets.cube_1k import HUB_REPO
    from benchmark.generation import command

    _quiet_datasets()
    if args.dataset == HUB_REPO:
        folder = _build_default_dataset(Path(DEFAULT_STORE) / "datasets", args.cube_source)
        if folder is not None:
            args.dataset, args.dataset_repo = str(folder), HUB_REPO
    return command.main(args)


def _ensure_default_dataset(store, source: str | None) -> None:
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    folder = local_folder(store.datasets, cube_1k.HUB_REPO)
    if cube_1k.has_every_config(folder) or not source:
        return
    try:
        summary = cube_1k.build(source, folder)
        print(f"built the default dataset {cube_1k.HUB_REPO}: {summary['prompts']} prompts in {folder}")
    except (cube_1k.CubeSourceError, OutputExists) as error:
        print(f"warning: the default dataset is not built ({error}); the app runs without it", file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> int:
    from leaderboard import operator_settings, quarantine
    from leaderboard.app import build_app, launch_options
    from leaderboard.store import Store
    from leaderboard.supervisor import Supervisor

    _quiet_datasets()
    # Off a Space there is no sign-in: on loopback the one user is the operator at this machine; reachable from
    # other machines, every visitor acts as --user, and the quota bounds the work they can ask for.
    public = not operator_settings.is_loopback(args.host)
    store = Store(Path(args.store), _limits(args), **_quota(args, public=public))
    if store.rebuilt:
        print(store.rebuilt, file=sys.stderr)
    store.seed_reported()
    for name in store.sweep_staging():
        print(f"removed staging/{name}, left by an upload the app was validating when it stopped")
    _ensure_default_dataset(store, args.cube_source)
    print(f"submissions as {args.user}: {store.quota_note}", file=sys.stderr)
    mirror = _hub_mirror(store, args)
    supervisor = None
    if not args.no_worker:
        argv = ["--backbones", args.backbones] if args.backbones else []
        # Unreachable, the Hub client retries every weights file for ~25 s: the worker would take minutes to say
        # it cannot load them. Offline mode reads the local cache only, and fails at once if it must. Only the
        # worker goes offline: the app's Hub mirror keeps trying, and recovers when the network does.
        env = dict(os.environ)
        offline_unless_hub_reachable(env)
        # Restarted when it dies, reaped, and stopped when serve dies (see leaderboard.supervisor).
        supervisor = Supervisor([sys.executable, "-m", "benchmark.cli", "worker", "--store", str(store.root), *argv],
                                store.queue, env=env)
        supervisor.start()
    try:
        app = build_app(store, owner=args.user)
        if note := quarantine.note(store.quarantined()):  # building the catalog quarantines damaged results
            print(note, file=sys.stderr)
        # SIGTERM (a service manager, a test) must still stop the worker: run the `finally` below.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        app.queue(default_concurrency_limit=8).launch(server_name=args.host, server_port=args.port,
                                                      **launch_options(store))
    finally:
        if supervisor is not None:
            supervisor.stop()
        if mirror is not None:
            mirror.stop()
    return 0


def _hub_mirror(store, args: argparse.Namespace):
    """With --hub-results / --hub-requests: restore from the repos, then keep pushing to them (SyncError for a
    malformed repo id)."""
    from leaderboard import hub_sync

    mirror, lines = hub_sync.start(store, {"results": args.hub_results, "requests": args.hub_requests},
                                   interval=args.hub_interval)
    for line in lines:
        print(line, file=sys.stderr)
    return mirror


# --- options of each verb, added when it is chosen ------------------------------------------------
def _add_cube_source_option(parser: argparse.ArgumentParser, where: str) -> None:
    """``--cube-source``: where the default dataset is built from when neither a local copy nor the Hub has it."""
    parser.add_argument("--cube-source", default=_default_cube_source(),
                        help=f"the authors' cube_1k.json (path or URL) to build the default dataset from, {where}, "
                             "when neither a local copy nor the Hub repo is reachable")


def _add_limit_option(parser: argparse.ArgumentParser) -> None:
    from leaderboard.operator_settings import ENV_LIMITS, describe_limits

    parser.add_argument("--limit", action="append", default=None, metavar="NAME=VALUE",
                        help=f"change an upload limit (repeatable; env {ENV_LIMITS}=NAME=VALUE,...); names and "
                             f"defaults: {describe_limits()}")


def _add_quota_options(parser: argparse.ArgumentParser, who: str) -> None:
    from leaderboard import operator_settings as o

    group = parser.add_argument_group("quota", f"{who} A number, or '{o.NO_LIMIT}' for no limit.")
    group.add_argument("--quota", default=None, metavar="N",
                       help=f"accepted submissions (re-runs included) per user and window (env {o.ENV_QUOTA})")
    group.add_argument("--attempt-quota", default=None, metavar="N",
                       help=f"uploads sent for validation, rejected ones included, per user and window "
                            f"(env {o.ENV_ATTEMPT_QUOTA})")
    group.add_argument("--quota-hours", default=None, metavar="H",
                       help=f"the window in hours (env {o.ENV_QUOTA_HOURS}; default {o.QUOTA_HOURS:g})")


def _options_cube_1k(p: argparse.ArgumentParser) -> None:
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE, HUB_REPO

    p.add_argument("--source", default=DEFAULT_SOURCE, help="authors' JSON: path or http(s) URL")
    p.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    p.add_argument("--repo", default=HUB_REPO, help="Hub repo id the card's load snippets name")
    p.set_defaults(run=cmd_data_build)


def _options_iconic(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True, help="JSON Lines, one reference per line (see README)")
    p.add_argument("--images", required=True, help="folder holding the images the records name")
    p.add_argument("--from-sparql", action="store_true",
                   help="first fill --records and --images from Wikidata and Commons (needs network)")
    p.add_argument("--ner", default=None, help="token-classification model (Hub id or folder) for the named-entity "
                                               "title filter; without it the filter is off")
    p.add_argument("--prune-backbone", default="clip-vit-b-32", help="backbone id for pruning depictions")
    p.add_argument("--no-prune", action="store_true", help="keep every depiction of moving references")
    p.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    p.add_argument("--repo", default="culturelens/iconic-references", help="Hub repo id for the card")
    _add_backbone_options(p)
    p.set_defaults(run=cmd_build_iconic, hub=True)


def _options_push(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="folder made by `culturelens data build`")
    p.add_argument("--repo", required=True, help="Hub dataset repo, ORG/NAME")
    p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
    p.add_argument("--private", action="store_true", help="create the repo as private")
    p.set_defaults(run=cmd_data_push)


def _options_schema(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="write to this file instead of stdout")
    p.set_defaults(run=cmd_schema)


def _options_data(data: argparse.ArgumentParser, verb) -> None:
    data_verbs = data.add_subparsers(dest="data_verb", required=True, metavar="ACTION")
    verb("build", "build a dataset folder laid out like its Hub repo (Parquet + card)",
         "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", data_verbs,
         options=lambda p: _options_build(p, verb))
    verb("push", "publish a built dataset folder to the Hugging Face Hub (a maintainer publishes the default dataset "
                 "with `data build cube-1k --out DIR`, then `data push DIR --repo culturelens/cube-1k`; until then "
                 "every verb that needs it builds it locally from --cube-source)",
         "culturelens data build cube-1k --out data/cube-1k && culturelens data push data/cube-1k "
         "--repo culturelens/cube-1k", data_verbs, options=_options_push)


def _options_build(build: argparse.ArgumentParser, verb) -> None:
    from benchmark import track_commands

    datasets_ = build.add_subparsers(dest="name", required=True, metavar="DATASET")
    verb("cube-1k", "CUBE-1K prompts from the authors' JSON, checked and cleaned, with its demo config",
         "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", datasets_,
         options=_options_cube_1k)
    verb("iconic-references", "iconic references (titles + reference images) for the iconicity track",
         "culturelens data build iconic-references --records refs.jsonl --images refs/ --out data/iconic", datasets_,
         options=_options_iconic)
    track_commands.register_builders(datasets_, verb)


def _options_generate(p: argparse.ArgumentParser) -> None:
    from benchmark.datasets.cube_1k import HUB_REPO
    from benchmark.generation.command import add_arguments

    add_arguments(p)
    _add_cube_source_option(p, f"(into {DEFAULT_STORE}/datasets) when --dataset is {HUB_REPO}")
    p.set_defaults(run=cmd_generate, hub=True)


def _options_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="submission folder or .zip")
    p.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store (its datasets/ holds local datasets)")
    _add_cube_source_option(p, "into the store")
    _add_limit_option(p)
    p.set_defaults(run=cmd_validate, hub=True)


def _options_submit(p: argparse.ArgumentParser) -> None:
    _options_validate(p)
    p.add_argument("--owner", default=os.environ.get("USER", "local"), help="who submits")
    p.add_argument("--wait", action="store_true", help="wait until a worker has scored it")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait with --wait")
    _add_quota_options(p, "You hold the store's disk, so no quota applies unless you set one here or in the "
                          "environment.")
    p.set_defaults(run=cmd_submit, hub=True)


def _options_worker(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store")
    p.add_argument("--once", action="store_true", help="exit when the queue is empty")
    p.add_argument("--lease-seconds", type=float, default=60, help="a job silent this long is taken over")
    p.add_argument("--supervised", metavar="ID", default=None,
                   help=argparse.SUPPRESS)  # set by `culturelens serve`: worker id; stop when stdin closes
    _add_backbone_options(p)
    _add_metric_options(p)
    p.set_defaults(run=cmd_worker, hub=True)


def _options_score(p: argparse.ArgumentParser) -> None:
    p.add_argument("submission", help="submission folder or .zip")
    p.add_argument("--out", required=True, help="folder for submission/, results/ (and the cache by default)")
    p.add_argument("--store", default=DEFAULT_STORE, help="store whose datasets/ holds local datasets")
    p.add_argument("--cache", default=None, help="embedding cache file (default: OUT/cache.sqlite)")
    p.add_argument("--num-processes", type=int, default=1,
                   help="shard images over this many processes with `accelerate launch`")
    _add_cube_source_option(p, "into the store")
    _add_backbone_options(p)
    _add_metric_options(p)
    p.set_defaults(run=cmd_score, hub=True)


def _options_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", help="results folders (with per_image.parquet), one per model")
    p.add_argument("--perturbed", nargs="+", default=None,
                   help="the same models' results on a perturbed config, in the same order")
    p.add_argument("--metrics", nargs="+", default=None, help="metrics to test (default: all shared)")
    p.set_defaults(run=cmd_compare)


def _options_reproduce(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="results folder (STORE/results/ID, or OUT/results/STAMP of `culturelens score`), "
                                  "or a submission id of --store")
    p.add_argument("--store", default=DEFAULT_STORE,
                   help="store of a submission id; its datasets/ holds the datasets of a `score` output")
    p.add_argument("--submission", default=None,
                   help="the validated submission folder (default: STORE/submissions/ID, or OUT/submission next to "
                        "a `score` output)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="largest absolute difference still counted as equal (exit 1 beyond it)")
    p.add_argument("--use-cache", action="store_true",
                   help="reuse the store's (or the `score` output's) embedding cache instead of a fresh one")
    _add_backbone_options(p)
    p.set_defaults(run=cmd_reproduce, batch_size=None, hub=True)  # None: the batch size the result records


def _options_calibrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("sample", help="a submission (folder or .zip) with several seeds per prompt")
    p.add_argument("--backbone", required=True, help="backbone id whose distances to calibrate")
    p.add_argument("--out", required=True, help="the .npz to write (cdf_x, cdf_y)")
    p.add_argument("--cdf", choices=["empirical", "authors_code"], default="empirical",
                   help="F(x) = share of the sample <= x, or the authors' compute_cdf (sample padded with 0 and 1, "
                        "i / (N + 2))")
    p.add_argument("--store", default=DEFAULT_STORE, help="store whose datasets/ holds local datasets")
    _add_backbone_options(p)
    p.set_defaults(run=cmd_calibrate, hub=True)


def _options_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store (created if missing)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; any other than loopback opens the app, without sign-in, to other "
                        "machines (see SECURITY.md)")
    p.add_argument("--port", type=int, default=7860, help="port to listen on")
    p.add_argument("--user", default=os.environ.get("USER", "local"), help="local user submissions are owned by")
    p.add_argument("--no-worker", action="store_true", help="do not start a local worker")
    p.add_argument("--cube-source", default=None,
                   help="build the default CUBE-1K dataset from this JSON (path or URL) if the store lacks it")
    p.add_argument("--backbones", default=None, help="backbones JSON file passed to the worker")
    p.add_argument("--hub-requests", default=None,
                   help="Hub dataset repo mirroring the queue and submitted files (pulled at start, then pushed)")
    p.add_argument("--hub-results", default=None,
                   help="Hub dataset repo mirroring the results (pulled at start, then pushed)")
    p.add_argument("--hub-interval", type=float, default=60, help="seconds between pushes to the Hub repos")
    _add_limit_option(p)
    _add_quota_options(p, "Bound to loopback (the default) the one user is you, the operator: no quota unless you "
                          "set one. With any other --host every visitor acts as --user and the quota defaults to 5 "
                          "accepted submissions and 20 uploads per user and 24 h.")
    p.set_defaults(run=cmd_serve)


# --- parser -----------------------------------------------------------------------------------
EPILOG = """example:
  culturelens data build cube-1k --out data/cube-1k
  culturelens validate submissions/example && culturelens submit submissions/example --wait
  culturelens serve

exit status: 0 done; 1 a check said no (a submission rejected, a job failed, a result not reproduced within
--tolerance); 2 an error, said in one sentence on stderr.

environment: HF_HUB_OFFLINE=1 (work from local files and the cache; set for you when the Hub cannot be
reached), CULTURELENS_BACKBONES, CULTURELENS_QUOTA, CULTURELENS_QUOTA_HOURS, CULTURELENS_ATTEMPT_QUOTA,
CULTURELENS_LIMITS (see each verb's --help)."""


def parser() -> argparse.ArgumentParser:
    """The command line. Each verb's options are added only when that verb is chosen (``_Verbs``)."""
    root = _Parser(prog="culturelens", formatter_class=_Formatter, epilog=EPILOG,
                   description="CultureLens: benchmark and leaderboard for the cultural competence of text-to-image "
                               "models.")
    root.add_argument("--version", action="version", version=f"culturelens {__version__}")
    verbs = root.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help: str, example: str, parent=verbs, options=None) -> argparse.ArgumentParser:
        """A documented sub-command; ``options(parser)`` adds its options when it is chosen."""
        sub = parent.add_parser(name, help=help, description=help, formatter_class=_Formatter,
                                epilog=f"example:\n  {example}")
        if options is not None:
            parent.options[name] = options
        return sub

    verb("data", "build and publish datasets", "culturelens data build cube-1k --out data/cube-1k",
         options=lambda p: _options_data(p, verb))
    verb("schema", "print the submission manifest's JSON Schema",
         "culturelens schema --out submissions/manifest.schema.json",
         options=_options_schema)
    verb("generate", "generate a submission with a diffusers pipeline (presets, seeds, resume)",
         "culturelens generate --preset sdxl --dataset culturelens/cube-1k --images-per-prompt 10 --out subs/sdxl",
         options=_options_generate)
    verb("validate", "check a submission (folder or .zip) without storing it",
         f"culturelens validate submissions/example --store {DEFAULT_STORE}", options=_options_validate)
    verb("submit", "validate a submission and queue it for scoring",
         f"culturelens submit submissions/example --store {DEFAULT_STORE} --wait", options=_options_submit)
    verb("worker", "score queued submissions (run next to the app, or on a GPU machine)",
         f"culturelens worker --store {DEFAULT_STORE}", options=_options_worker)
    verb("score", "score a submission outside the leaderboard and write its results as Parquet",
         "culturelens score my_submission.zip --out results/ --tracks awareness", options=_options_score)
    verb("compare", "paired tests between models, VR@k, and deltas under prompt perturbations",
         "culturelens compare runs/sdxl/results/X runs/sd3/results/Y --metrics crt vr", options=_options_compare)
    verb("reproduce", "re-run the scoring a result's run.json records (settings, backbones, dataset, seeds) on its "
                      "stored submission and print the largest difference per metric",
         f"culturelens reproduce SUBMISSION_ID --store {DEFAULT_STORE}", options=_options_reproduce)
    verb("calibrate", "fit a W1KP distance calibration for a backbone from a reference sample",
         "culturelens calibrate reference_sample/ --backbone dinov2-base --out dinov2-w1kp.npz",
         options=_options_calibrate)
    verb("serve", "run the leaderboard app and a local worker",
         f"culturelens serve --store {DEFAULT_STORE} --port 7860", options=_options_serve)
    from benchmark import track_commands
    from leaderboard import hub_commands

    track_commands.register(verbs, verb, _add_backbone_options)
    hub_commands.register(verbs, verb, DEFAULT_STORE)
    return root


def run(args: argparse.Namespace) -> int:
    """Run the verb ``args`` chose (``args.run``) and return its exit status. A user error
    (``CultureLensError``, from the verb or anything it calls) is printed as one line, ``error: <message>``, and
    gives status 2; any other exception is a bug and propagates with its traceback."""
    try:
        if getattr(args, "hub", False):  # the verb may load datasets or weights from the Hub
            offline_unless_hub_reachable()
        return args.run(args)
    except CultureLensError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    """The ``culturelens`` console script: parse ``argv`` (default: the process's arguments) and ``run`` it."""
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

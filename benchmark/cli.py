"""``culturelens``: one console script, one verb per job.

Heavy imports (torch, gradio) happen inside the verbs that need them, so
``culturelens --help`` and ``culturelens validate`` start quickly.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from benchmark import __version__
from benchmark.progress import Bars

DEFAULT_STORE = ".culturelens"


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def _quiet_datasets() -> None:
    """Our verbs show their own progress; the datasets library's per-call bars would only add noise."""
    import datasets

    datasets.disable_progress_bars()


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _add_backbone_options(parser: argparse.ArgumentParser) -> None:
    from benchmark.encoders.spec import ENV_BACKBONES

    group = parser.add_argument_group("backbones")
    group.add_argument("--backbones", default=os.environ.get(ENV_BACKBONES),
                       help=f"JSON file pointing backbone ids at local weights or adding ids (env {ENV_BACKBONES})")
    group.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    group.add_argument("--batch-size", type=int, default=32, help="images per forward pass")
    group.add_argument("--num-workers", type=int, default=0, help="DataLoader processes decoding images")


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
    from benchmark.metrics import MetricSettings, build, select

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
        relevance_text_chars=args.relevance_text_chars), _registry(args), args.tracks)
    return select(metrics, unavailable, args.tracks)


def _registry(args: argparse.Namespace):
    from benchmark.encoders.spec import load_registry

    return load_registry(args.backbones)


# --- data -------------------------------------------------------------------------------------
def cmd_data_build(args: argparse.Namespace) -> int:
    from benchmark.datasets import cube_1k

    _quiet_datasets()
    try:
        summary = cube_1k.build(args.source, Path(args.out), repo=args.repo)
    except (cube_1k.SourceError, FileExistsError) as error:
        return _fail(str(error))
    print(f"built cube-1k: {summary['prompts']} prompts ({summary['records']} upstream records) in {summary['out']}")
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
    try:
        if args.from_sparql:
            Path(args.images).mkdir(parents=True, exist_ok=True)
            count = iconic.fetch_from_wikidata(Path(args.records), Path(args.images))
            print(f"fetched {count} references from Wikidata into {args.records} and {args.images}")
        backbone = None if args.no_prune else load_backbone(args.prune_backbone, _registry(args), args.device)
        summary = iconic.build(Path(args.records), Path(args.images), Path(args.out), ner_model=args.ner,
                               prune_backbone=backbone, repo=args.repo)
    except (iconic.RecordsError, BackboneUnavailable, FileExistsError, ValueError, OSError) as error:
        hint = " (or pass --no-prune)" if isinstance(error, BackboneUnavailable) else ""
        return _fail(f"{error}{hint}")
    print(f"built iconic-references: {summary['kept']} of {summary['records']} references kept "
          f"({summary['images']} images, {summary['pruned']} pruned) in {summary['out']}")
    for reason, count in summary["removed"].items():
        print(f"  removed by {reason}: {count}")
    return 0


def cmd_data_push(args: argparse.Namespace) -> int:
    from benchmark.datasets.hub_layout import PushError, push_folder

    try:
        url = push_folder(Path(args.dir), args.repo, token=args.token, private=args.private)
    except PushError as error:
        return _fail(str(error))
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
    """Whether the Hub can be reached and says dataset ``repo`` exists (False offline or on any Hub error)."""
    if not hub_reachable():
        return False
    from huggingface_hub import HfApi

    try:
        return HfApi().repo_exists(repo, repo_type="dataset")
    except Exception:  # noqa: BLE001 - offline mode, a proxy, a timeout: all mean the repo cannot be reached
        return False


def _build_default_dataset(datasets_root: Path, source: str) -> Path | None:
    """Make sure the default dataset (CUBE-1K) can be loaded, as `make run` does: when neither a local copy under
    ``datasets_root`` nor the Hub repo is reachable, build it there from ``source``, saying so in one line.

    Returns the local folder when one exists afterwards, None when the Hub repo serves it; raises ValueError
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
    except (cube_1k.SourceError, FileExistsError) as error:
        raise ValueError(f"cannot build the default dataset {cube_1k.HUB_REPO}: {error}") from None
    return folder


def _add_cube_source_option(parser: argparse.ArgumentParser, where: str) -> None:
    """``--cube-source``: where the default dataset is built from when neither a local copy nor the Hub has it."""
    parser.add_argument("--cube-source", default=_default_cube_source(),
                        help=f"the authors' cube_1k.json (path or URL) to build the default dataset from, {where}, "
                             "when neither a local copy nor the Hub repo is reachable")


def cmd_validate(args: argparse.Namespace) -> int:
    import functools

    from benchmark.datasets.prompts import load_prompts_for
    from benchmark.submission import stage

    _quiet_datasets()
    try:
        _build_default_dataset(Path(args.store) / "datasets", args.cube_source)
    except ValueError as error:
        return _fail(str(error))
    staging = Path(tempfile.mkdtemp(prefix="culturelens-validate-"))
    bars = Bars(unit="img")
    loader = functools.partial(load_prompts_for, datasets_root=Path(args.store) / "datasets")
    try:
        report = stage(Path(args.path), staging, loader, progress=bars.stage("checking images"))
    finally:
        bars.close()
        shutil.rmtree(staging, ignore_errors=True)  # validate never keeps anything
    print(report.text())
    return 0 if report.ok else 1


def cmd_submit(args: argparse.Namespace) -> int:
    from benchmark.submission import ServerFault
    from leaderboard.store import PermissionDenied, Store

    _quiet_datasets()
    store = Store(Path(args.store))
    try:
        _build_default_dataset(store.datasets, args.cube_source)
    except ValueError as error:
        return _fail(str(error))
    bars = Bars(unit="img")
    try:
        outcome = store.submit(Path(args.path), args.owner, bars.stage("checking images"))
    except (PermissionDenied, ServerFault) as error:  # over the quota; the server could not store it
        return _fail(str(error))
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
            return _fail(f"{error}; it stays queued (see the Queue tab or run `culturelens worker`)")
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
    try:
        registry = _registry(args)
        metrics, unavailable = _metrics(args)
    except ValueError as error:
        return _fail(str(error))
    return worker.main(Store(Path(args.store)), registry, metrics, unavailable, once=args.once,
                       batch_size=args.batch_size, num_workers=args.num_workers, device=args.device,
                       lease_seconds=args.lease_seconds, id=args.supervised, settings=settings_record(args))


def cmd_score(args: argparse.Namespace) -> int:
    from benchmark import scoring
    from benchmark.reproduce import settings_record

    _quiet_datasets()
    try:  # before any relaunch: one process builds, the shards find the local copy
        _build_default_dataset(Path(args.store) / "datasets", args.cube_source)
    except ValueError as error:
        return _fail(str(error))
    if args.num_processes > 1 and not scoring.launched_by_accelerate():
        return scoring.relaunch_with_accelerate(args.num_processes, sys.argv[1:])
    try:
        registry = _registry(args)
        metrics, unavailable = _metrics(args)
    except ValueError as error:
        return _fail(str(error))
    return scoring.main(Path(args.submission), Path(args.out), registry=registry, metrics=metrics,
                        unavailable=unavailable, store=Path(args.store),
                        cache=Path(args.cache) if args.cache else None, device=args.device,
                        batch_size=args.batch_size, num_workers=args.num_workers, settings=settings_record(args))


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Redo the scoring RESULT's run.json records and print the largest difference per metric: 0 when every
    difference is within --tolerance, 1 when one is not, 2 when the result cannot be reproduced as asked."""
    from benchmark import reproduce

    _quiet_datasets()
    try:
        return reproduce.main(args.result, store=Path(args.store), submission=args.submission,
                              backbones=args.backbones, device=args.device, batch_size=args.batch_size,
                              num_workers=args.num_workers, tolerance=args.tolerance, use_cache=args.use_cache)
    except reproduce.ReproduceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def cmd_calibrate(args: argparse.Namespace) -> int:
    from benchmark import calibrate

    _quiet_datasets()
    try:
        registry = _registry(args)
    except ValueError as error:
        return _fail(str(error))
    return calibrate.main(Path(args.sample), Path(args.out), backbone_id=args.backbone, registry=registry,
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
        try:
            folder = _build_default_dataset(Path(DEFAULT_STORE) / "datasets", args.cube_source)
        except ValueError as error:
            return _fail(str(error))
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
    except (cube_1k.SourceError, FileExistsError) as error:
        print(f"warning: the default dataset is not built ({error}); the app runs without it", file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> int:
    from leaderboard import quarantine
    from leaderboard.app import build_app, launch_options
    from leaderboard.store import Store
    from leaderboard.supervisor import Supervisor

    _quiet_datasets()
    store = Store(Path(args.store))
    if store.rebuilt:
        print(store.rebuilt, file=sys.stderr)
    store.seed_reported()
    for name in store.sweep_staging():
        print(f"removed staging/{name}, left by an upload the app was validating when it stopped")
    _ensure_default_dataset(store, args.cube_source)
    try:
        mirror = _hub_mirror(store, args)
    except ValueError as error:  # a malformed repo id
        return _fail(str(error))
    supervisor = None
    if not args.no_worker:
        argv = ["--backbones", args.backbones] if args.backbones else []
        env = dict(os.environ)
        if not hub_reachable():
            # Unreachable, the Hub client retries every weights file for ~25 s: the worker would take minutes to
            # say it cannot load them. Offline mode reads the local cache only, and fails at once if it must.
            print("the Hugging Face Hub cannot be reached: the worker loads weights from the local cache only "
                  "(HF_HUB_OFFLINE=1)", file=sys.stderr)
            env["HF_HUB_OFFLINE"] = "1"
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


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub (``HF_ENDPOINT``, default huggingface.co) opens within ``timeout``;
    False at once when ``HF_HUB_OFFLINE`` is set, and True (not probed) behind a proxy, which a direct
    connection would not go through."""
    import socket
    import urllib.parse
    import urllib.request

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    if urllib.request.getproxies():
        return True
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
        with socket.create_connection((endpoint.hostname or "", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _hub_mirror(store, args: argparse.Namespace):
    """With --hub-results / --hub-requests: restore from the repos, then keep pushing to them."""
    from leaderboard import hub_sync

    mirror, lines = hub_sync.start(store, {"results": args.hub_results, "requests": args.hub_requests},
                                   interval=args.hub_interval)
    for line in lines:
        print(line, file=sys.stderr)
    return mirror


# --- parser -----------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="culturelens", formatter_class=_Formatter,
        description="CultureLens: benchmark and leaderboard for the cultural competence of text-to-image models.",
        epilog="example:\n  culturelens data build cube-1k --out data/cube-1k\n  culturelens serve")
    root.add_argument("--version", action="version", version=f"culturelens {__version__}")
    verbs = root.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help: str, example: str, parent=verbs) -> argparse.ArgumentParser:
        return parent.add_parser(name, help=help, description=help, formatter_class=_Formatter,
                                 epilog=f"example:\n  {example}")

    data = verb("data", "build and publish datasets", "culturelens data build cube-1k --out data/cube-1k")
    data_verbs = data.add_subparsers(dest="data_verb", required=True, metavar="ACTION")
    build = verb("build", "build a dataset folder laid out like its Hub repo (Parquet + card)",
                 "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", data_verbs)
    datasets_ = build.add_subparsers(dest="name", required=True, metavar="DATASET")
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE, HUB_REPO

    cube = verb("cube-1k", "CUBE-1K prompts from the authors' JSON, checked and cleaned",
                "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", datasets_)
    cube.add_argument("--source", default=DEFAULT_SOURCE, help="authors' JSON: path or http(s) URL")
    cube.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    cube.add_argument("--repo", default=HUB_REPO, help="Hub repo id the card's load snippets name")
    cube.set_defaults(run=cmd_data_build)
    iconic = verb("iconic-references", "iconic references (titles + reference images) for the iconicity track",
                  "culturelens data build iconic-references --records refs.jsonl --images refs/ --out data/iconic",
                  datasets_)
    iconic.add_argument("--records", required=True, help="JSON Lines, one reference per line (see README)")
    iconic.add_argument("--images", required=True, help="folder holding the images the records name")
    iconic.add_argument("--from-sparql", action="store_true",
                        help="first fill --records and --images from Wikidata and Commons (needs network)")
    iconic.add_argument("--ner", default=None, help="token-classification model (Hub id or folder) for the "
                                                    "named-entity title filter; without it the filter is off")
    iconic.add_argument("--prune-backbone", default="clip-vit-b-32", help="backbone id for pruning depictions")
    iconic.add_argument("--no-prune", action="store_true", help="keep every depiction of moving references")
    iconic.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    iconic.add_argument("--repo", default="culturelens/iconic-references", help="Hub repo id for the card")
    _add_backbone_options(iconic)
    iconic.set_defaults(run=cmd_build_iconic)
    push = verb("push", "publish a built dataset folder to the Hugging Face Hub (a maintainer publishes the default "
                        f"dataset with `data build cube-1k --out DIR`, then `data push DIR --repo {HUB_REPO}`; until "
                        "then every verb that needs it builds it locally from --cube-source)",
                "culturelens data build cube-1k --out data/cube-1k && culturelens data push data/cube-1k "
                f"--repo {HUB_REPO}", data_verbs)
    push.add_argument("dir", help="folder made by `culturelens data build`")
    push.add_argument("--repo", required=True, help="Hub dataset repo, ORG/NAME")
    push.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.set_defaults(run=cmd_data_push)

    schema = verb("schema", "print the submission manifest's JSON Schema",
                  "culturelens schema --out submissions/manifest.schema.json")
    schema.add_argument("--out", default=None, help="write to this file instead of stdout")
    schema.set_defaults(run=cmd_schema)

    generate = verb("generate", "generate a submission with a diffusers pipeline (presets, seeds, resume)",
                    "culturelens generate --preset sdxl --dataset culturelens/cube-1k --images-per-prompt 10 "
                    "--out subs/sdxl")
    from benchmark.generation.command import add_arguments

    add_arguments(generate)
    _add_cube_source_option(generate, f"(into {DEFAULT_STORE}/datasets) when --dataset is {HUB_REPO}")
    generate.set_defaults(run=cmd_generate)

    for name, help_text, run in (("validate", "check a submission (folder or .zip) without storing it", cmd_validate),
                                 ("submit", "validate a submission and queue it for scoring", cmd_submit)):
        p = verb(name, help_text, f"culturelens {name} my_submission.zip --store {DEFAULT_STORE}")
        p.add_argument("path", help="submission folder or .zip")
        p.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store (its datasets/ holds local datasets)")
        _add_cube_source_option(p, "into the store")
        if name == "submit":
            p.add_argument("--owner", default=os.environ.get("USER", "local"), help="who submits")
            p.add_argument("--wait", action="store_true", help="wait until a worker has scored it")
            p.add_argument("--timeout", type=float, default=3600, help="seconds to wait with --wait")
        p.set_defaults(run=run)

    work = verb("worker", "score queued submissions (run next to the app, or on a GPU machine)",
                f"culturelens worker --store {DEFAULT_STORE}")
    work.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store")
    work.add_argument("--once", action="store_true", help="exit when the queue is empty")
    work.add_argument("--lease-seconds", type=float, default=60, help="a job silent this long is taken over")
    work.add_argument("--supervised", metavar="ID", default=None,
                      help=argparse.SUPPRESS)  # set by `culturelens serve`: worker id; stop when stdin closes
    _add_backbone_options(work)
    _add_metric_options(work)
    work.set_defaults(run=cmd_worker)

    score = verb("score", "score a submission outside the leaderboard and write its results as Parquet",
                 "culturelens score my_submission.zip --out results/ --tracks awareness")
    score.add_argument("submission", help="submission folder or .zip")
    score.add_argument("--out", required=True, help="folder for submission/, results/ (and the cache by default)")
    score.add_argument("--store", default=DEFAULT_STORE, help="store whose datasets/ holds local datasets")
    score.add_argument("--cache", default=None, help="embedding cache file (default: OUT/cache.sqlite)")
    score.add_argument("--num-processes", type=int, default=1,
                       help="shard images over this many processes with `accelerate launch`")
    _add_cube_source_option(score, "into the store")
    _add_backbone_options(score)
    _add_metric_options(score)
    score.set_defaults(run=cmd_score)

    compare = verb("compare", "paired tests between models, VR@k, and deltas under prompt perturbations",
                   "culturelens compare runs/sdxl/results/X runs/sd3/results/Y --metrics crt vr")
    compare.add_argument("results", nargs="+", help="results folders (with per_image.parquet), one per model")
    compare.add_argument("--perturbed", nargs="+", default=None,
                         help="the same models' results on a perturbed config, in the same order")
    compare.add_argument("--metrics", nargs="+", default=None, help="metrics to test (default: all shared)")
    compare.set_defaults(run=cmd_compare)

    reproduce = verb("reproduce", "re-run the scoring a result's run.json records (settings, backbones, dataset, "
                                  "seeds) on its stored submission and print the largest difference per metric",
                     f"culturelens reproduce SUBMISSION_ID --store {DEFAULT_STORE}")
    reproduce.add_argument("result", help="results folder (STORE/results/ID, or OUT/results/STAMP of `culturelens "
                                          "score`), or a submission id of --store")
    reproduce.add_argument("--store", default=DEFAULT_STORE,
                           help="store of a submission id; its datasets/ holds the datasets of a `score` output")
    reproduce.add_argument("--submission", default=None,
                           help="the validated submission folder (default: STORE/submissions/ID, or OUT/submission "
                                "next to a `score` output)")
    reproduce.add_argument("--tolerance", type=float, default=0.0,
                           help="largest absolute difference still counted as equal (exit 1 beyond it)")
    reproduce.add_argument("--use-cache", action="store_true",
                           help="reuse the store's (or the `score` output's) embedding cache instead of a fresh one")
    _add_backbone_options(reproduce)
    reproduce.set_defaults(run=cmd_reproduce, batch_size=None)  # None: the batch size the result records

    calibrate = verb("calibrate", "fit a W1KP distance calibration for a backbone from a reference sample",
                     "culturelens calibrate reference_sample/ --backbone dinov2-base --out dinov2-w1kp.npz")
    calibrate.add_argument("sample", help="a submission (folder or .zip) with several seeds per prompt")
    calibrate.add_argument("--backbone", required=True, help="backbone id whose distances to calibrate")
    calibrate.add_argument("--out", required=True, help="the .npz to write (cdf_x, cdf_y)")
    calibrate.add_argument("--cdf", choices=["empirical", "authors_code"], default="empirical",
                           help="F(x) = share of the sample <= x, or the authors' compute_cdf (sample padded with "
                                "0 and 1, i / (N + 2))")
    calibrate.add_argument("--store", default=DEFAULT_STORE, help="store whose datasets/ holds local datasets")
    _add_backbone_options(calibrate)
    calibrate.set_defaults(run=cmd_calibrate)

    serve = verb("serve", "run the leaderboard app and a local worker",
                 f"culturelens serve --store {DEFAULT_STORE} --port 7860")
    serve.add_argument("--store", default=DEFAULT_STORE, help="leaderboard store (created if missing)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=7860, help="port to listen on")
    serve.add_argument("--user", default=os.environ.get("USER", "local"), help="local user submissions are owned by")
    serve.add_argument("--no-worker", action="store_true", help="do not start a local worker")
    serve.add_argument("--cube-source", default=None,
                       help="build the default CUBE-1K dataset from this JSON (path or URL) if the store lacks it")
    serve.add_argument("--backbones", default=None, help="backbones JSON file passed to the worker")
    serve.add_argument("--hub-requests", default=None,
                       help="Hub dataset repo mirroring the queue and submitted files (pulled at start, then pushed)")
    serve.add_argument("--hub-results", default=None,
                       help="Hub dataset repo mirroring the results (pulled at start, then pushed)")
    serve.add_argument("--hub-interval", type=float, default=60, help="seconds between pushes to the Hub repos")
    serve.set_defaults(run=cmd_serve)
    from benchmark import track_commands
    from leaderboard import hub_commands

    track_commands.register(verbs, datasets_, verb, _add_backbone_options)
    hub_commands.register(verbs, verb, DEFAULT_STORE)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""``culturelens generate``, ``validate`` and ``submit``: make a submission, check it, queue it."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmark.errors import CultureLensError
from benchmark.progress import quiet_datasets
from benchmark.track import Verb
from culturelens import options
from leaderboard import operator_settings
from leaderboard.operator_settings import STORE


def generate(args: argparse.Namespace) -> int:
    from benchmark.datasets.cube_1k import HUB_REPO
    from benchmark.generation import command
    from benchmark.suite import SUITE_REPO
    from leaderboard.served_suite import remembered

    quiet_datasets()
    root = options.store(args)
    if args.suite is not None:
        from benchmark.generation.suite import refuse_fixed_options

        refuse_fixed_options(args)  # the quickest mistake first, before any dataset is looked for
        args.suite = args.suite or remembered(root) or SUITE_REPO  # bare --suite: the one this store serves
        ref = _suite_to_generate(args.suite, args.parts, root / "datasets", options.cube_source(args))
        code = command.main(args, suite=ref)
    else:
        if args.dataset == HUB_REPO:
            folder = options.build_default_dataset(root / "datasets", options.cube_source(args))
            if folder is not None:
                args.dataset, args.dataset_repo = str(folder), HUB_REPO
        code = command.main(args)
    if code == 0:
        print(f"next: {next_command(args)}")
    return code


def next_command(args: argparse.Namespace) -> str:
    """The command that submits what ``generate`` made, on the store ``generate`` read (``--store``, else its
    default, named: a `submit` elsewhere would queue it where no worker may look); ``--suite`` named only where
    that store does not serve that suite already (``served_suite.remembered``)."""
    import shlex

    from benchmark.suite import SUITE_REPO
    from leaderboard.served_suite import remembered

    root = options.store(args)
    words = ["culturelens", "submit", str(args.out), "--store", str(root)]
    if args.suite:
        served = remembered(root)
        given = str(Path(args.suite).resolve()) if Path(args.suite).is_dir() else args.suite
        if given != (served or SUITE_REPO):
            words += ["--suite", str(args.suite)]
    return shlex.join([*words, "--wait"])


MADE_HERE = ("cube-1k", "cube-diversity")
"""The parts whose datasets a store builds itself where neither it nor the Hub has them: CUBE-1K from the authors'
file (``--cube-source``), the diversity prompts from this package."""


def _suite(ref: str | None, store_datasets: Path, cube_source: str):
    """The suite ``--suite`` names (``benchmark.suite_assets.open_suite``); without a suite folder, the datasets a
    store builds itself (``MADE_HERE``) are built into the store as for any submission."""
    from benchmark.suite_assets import open_suite

    suite = open_suite(ref, store_datasets)
    if suite.assets is None:
        options.build_default_dataset(store_datasets, cube_source)
        options.build_diversity_dataset(store_datasets)
    return suite


def _suite_to_generate(ref: str, parts: list[str] | None, store_datasets: Path, cube_source: str):
    """The suite ``generate --suite`` makes images for, once every part asked for (``parts``, else all) is known
    to have its dataset: in the suite folder ``ref`` names, or, for a suite on the Hub or the package's definition,
    in the store (``store_datasets``), on the Hub, or made here (``MADE_HERE``). A part without one is refused
    before anything is written (no dataset built into the store, no image made), naming what gives it."""
    from benchmark.suite_assets import open_suite
    from leaderboard.served_suite import DEFAULT_FOLDER, ServedSuite

    opened = open_suite(ref, store_datasets)
    suite = opened.suite
    wanted = [suite.part(name) for name in parts] if parts else list(suite.parts)
    local = Path(ref).is_dir()
    if local:
        lacking = [p.name for p in wanted if opened.assets.dataset(p.name) is None]
    else:
        from culturelens.hub_access import hub_has_dataset

        lacking = [p.name for p in wanted if p.name not in MADE_HERE and not ServedSuite.serves(p, store_datasets)
                   and not hub_has_dataset(p.dataset.repo)]
    if lacking:
        its = "their datasets" if len(lacking) > 1 else "its dataset"
        if local:
            where = f"{ref} holds no dataset for {'them' if len(lacking) > 1 else 'it'} (not built there)"
            fix = (f"build {'them' if len(lacking) > 1 else 'it'} there: `{opened.assets.command(lacking)}`"
                   f"{opened.assets.weights_note(lacking)}")
        else:
            where = f"neither {store_datasets} nor the Hub holds {its}"
            fix = (f"build the suite where the public sources answer (`culturelens suite build --out "
                   f"{DEFAULT_FOLDER}`) and generate from that folder (`--suite {DEFAULT_FOLDER}`)")
        others = [p.name for p in wanted if p.name not in lacking]
        rest = f", or generate the other parts alone (`--parts {' '.join(others)}`)" if others else ""
        raise CultureLensError(f"cannot generate {_parts(lacking)} of {suite.name}: {where}; {fix}{rest}. Nothing "
                               "was written.")
    if not local:
        if "cube-1k" in (p.name for p in wanted):
            options.build_default_dataset(store_datasets, cube_source)
        if "cube-diversity" in (p.name for p in wanted):
            options.build_diversity_dataset(store_datasets)
    return opened


def _parts(names: list[str]) -> str:
    """"part X" or "parts X, Y"."""
    return f"part{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _served(store_root: Path, upload: Path) -> str | None:
    """For a suite upload given no ``--suite``: the suite the store's service serves (``served_suite.remembered``),
    else None (the default suite)."""
    from benchmark.submission.suite import is_suite_upload
    from leaderboard.served_suite import remembered

    return remembered(store_root) if is_suite_upload(upload) else None


def validate(args: argparse.Namespace) -> int:
    import functools

    from benchmark.datasets.prompts import load_prompts_for
    from benchmark.progress import Bars
    from benchmark.submission.suite import is_suite_upload, stage
    from benchmark.suite import SUITE_V1

    quiet_datasets()
    limits = options.limits(args)
    store_datasets = options.store(args) / "datasets"
    named = options.suite(args) or _served(options.store(args), Path(args.path))
    against = f"the store {options.store(args)}"
    if named or is_suite_upload(Path(args.path)):
        ref = _suite(named, store_datasets, options.cube_source(args))
        suite, datasets_root = ref.suite, ref.datasets_root
        if ref.assets is not None and Path(named).is_dir():
            against = f"the suite folder {named}"
    else:
        options.build_default_dataset(store_datasets, options.cube_source(args))
        suite, datasets_root = SUITE_V1, store_datasets
    staging = Path(tempfile.mkdtemp(prefix="culturelens-validate-"))
    bars = Bars(unit="img")
    loader = functools.partial(load_prompts_for, datasets_root=datasets_root)
    try:
        report = stage(Path(args.path), staging, suite, loader, limits, progress=bars)
    finally:
        bars.close()
        shutil.rmtree(staging, ignore_errors=True)  # validate never keeps anything
    print(report.text())
    for line in next_steps(report, "validate", args.path, against):
        print(line)
    return 0 if report.ok else 1


def next_steps(report, verb: str, path: str, against: str) -> list[str]:
    """What to do next about a rejected upload, for the folder ``path`` as given to ``culturelens VERB``: the
    submission folder meant, where ``path`` is a folder above or below one (``layout.submission_folders_near``);
    and where a submission (or a suite submission's part) answers only some prompts of the set it was checked
    against (those ``against`` holds: a store's, a suite folder's), that set and how to check it against the
    store or suite it was made for."""
    from benchmark.layout import submission_folders_near

    if report.ok:
        return []
    near = submission_folders_near(Path(path))
    if near:
        meant = " or ".join(f"`culturelens {verb} {folder}`" for folder in near[:3])
        return [f"{path} is no submission folder (one holds manifest.json, or a suite submission's parts/): did you "
                f"mean {meant}?"]
    reports = list(report.parts.values()) if hasattr(report, "parts") else [report]
    short = [r for r in reports if r.answered is not None and r.prompts is not None and r.answered < len(r.prompts)]
    if not short:
        return []
    sets = "; ".join(f"{r.prompts.label}, {len(r.prompts):,} prompts" for r in short)
    return [f"checked against the prompts {against} holds ({sets}); made for another store's or suite's prompts? "
            f"`culturelens {verb} {path} --store DIR` checks it against the store `culturelens serve` runs on, "
            "`--suite DIR` against a suite folder (the one `generate --suite DIR` read)"]


def submit(args: argparse.Namespace) -> int:
    import sys

    from benchmark import layout
    from benchmark.progress import Bars
    from benchmark.submission.suite import is_suite_upload
    from leaderboard.served_suite import open_served, remembered
    from leaderboard.store import Store

    quiet_datasets()
    root = options.store(args)

    served = open_served(options.suite(args) or remembered(root), root / layout.DATASETS,
                         lambda line: print(line, file=sys.stderr))
    # Whoever runs this holds the store's disk: the operator, held to a quota only when one is set.
    store = Store(root, options.limits(args), **options.quota(args, public=False), queue=options.queue(args),
                  suite=served.suite)
    options.build_default_dataset(store.datasets, options.cube_source(args))
    if served.assets is None and is_suite_upload(Path(args.path)):  # the package's suite: its diversity prompts
        options.build_diversity_dataset(store.datasets)
    bars = Bars(unit="img")
    try:  # PermissionDenied (over the quota) and ServerFault (the server could not store it) are user errors
        outcome = store.submit(Path(args.path), args.owner, bars)
    finally:
        bars.close()
    print(outcome.report.text())
    if outcome.job is None:
        for line in next_steps(outcome.report, "submit", args.path, f"the store {root}"):
            print(line)
        return 1
    print(f"queued as {outcome.job.id}")
    if args.wait:
        job = wait(store.queue, outcome.job.id, root, args.timeout)
        print(f"{job.id}: {job.state}: {job.error or job.message}")
        return 0 if job.state == "FINISHED" else 1
    return 0


def wait(queue, id: str, root: Path, timeout: float, poll: float = 0.5):
    """``submit --wait``: the job ``id`` once FINISHED or FAILED, saying first what it waits on and what ends the
    wait, then each change: the job's state, and whether a worker takes jobs from the store ``root``'s queue
    (``queue.base.alive``), with the command that starts one while none does. A CultureLensError after
    ``timeout`` seconds (the job stays queued)."""
    import time

    from leaderboard.queue.base import alive

    start = f"`culturelens worker --store {root}` (or `culturelens serve --store {root}`, which runs one)"
    print(f"waiting until a worker of the store {root} has scored {id} (at most {_duration(timeout)}: --timeout; "
          "Ctrl-C stops waiting, the submission stays queued)", flush=True)
    deadline, said = time.monotonic() + timeout, None
    while True:
        job = queue.get(id)
        if job is not None and job.state in ("FINISHED", "FAILED"):
            return job
        workers = queue.workers(within_seconds=3600)
        if job is not None and job.state == "RUNNING":
            state = f"{id}: RUNNING"
        elif any(alive(w) for w in workers):
            state = f"{id}: PENDING, a worker of {root} takes it next"
        elif unable := [w for w in workers if w["state"] == "unavailable"]:
            state = (f"no worker of {root} can score: {unable[0]['message']}; it waits as PENDING until one that "
                     f"can starts: {start}")
        else:
            state = f"no worker serves the store {root}: it waits as PENDING until one starts: {start}"
        if state != said:
            print(state, flush=True)
            said = state
        if time.monotonic() >= deadline:
            raise CultureLensError(f"submission {id} was not scored within {_duration(timeout)}; it stays queued on "
                                   f"the store {root}: {start} scores it (see its state in the app's Queue tab)")
        time.sleep(poll)


def _duration(seconds: float) -> str:
    """``seconds`` as a person says it: "1 h", "10 min", "45 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:g} s"


def _generate_options(p: argparse.ArgumentParser) -> None:
    from benchmark.datasets.cube_1k import HUB_REPO
    from benchmark.generation.command import add_arguments

    add_arguments(p)
    options.add_store(p, "leaderboard store: its datasets/ holds local datasets, and a bare --suite is the suite its "
                         "`serve --suite` serves")
    options.add_cube_source(p, f"into the store when --dataset is {HUB_REPO} or a part of --suite")
    p.set_defaults(run=generate, hub=True, on_interrupt=resume)


def resume(args: argparse.Namespace) -> str:
    """What ``generate`` says when stopped: its finished images are kept, and the same command goes on."""
    return (f"the images finished so far are kept in {args.out}; run the same command again to go on where it "
            "stopped")


def _upload_options(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("path", help=help)
    options.add_store(p, "leaderboard store (its datasets/ holds local datasets)")
    options.add_cube_source(p, "into the store")
    options.add_limit(p)


def _validate_options(p: argparse.ArgumentParser) -> None:
    _upload_options(p, "submission folder or .zip (a suite submission: a report per part)")
    options.add_suite(p, "a suite submission answers", served=True)
    p.set_defaults(run=validate, hub=True)


def _submit_options(p: argparse.ArgumentParser) -> None:
    _upload_options(p, "submission folder or .zip (a suite submission: every part it holds, one job)")
    options.add_suite(p, "a suite submission answers, as the leaderboard serves it", served=True)
    options.add_queue(p)
    p.add_argument("--owner", default=operator_settings.login(), help="who submits (default: your login name, "
                                                                      "$USER)")
    p.add_argument("--wait", action="store_true", help="wait until a worker has scored it")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait with --wait")
    options.add_quota(p, "You hold the store's disk, so no quota applies unless you set one here or in the "
                         "environment.")
    p.set_defaults(run=submit, hub=True)


VERBS = (
    Verb("generate", "generate a submission with a diffusers pipeline (presets, seeds, resume): one dataset config, "
                     "or every part of the suite (--suite)",
         "culturelens generate --suite --preset sdxl --out subs/sdxl",
         _generate_options),
    Verb("validate", "check a submission (folder or .zip) without storing it",
         f"culturelens validate submissions/example --store {STORE.default}", _validate_options),
    Verb("submit", "validate a submission and queue it for scoring",
         f"culturelens submit submissions/example --store {STORE.default} --wait", _submit_options),
)

"""Options and checks that several verbs share: the store, the default dataset's source, the operator's limits
and quota, the backbones and the metric settings. Each option is a declared setting (``benchmark.settings``: the
tracks', the harness's; ``leaderboard.operator_settings``: the service's), its flag and environment fallback made
from the declaration; each turns a bad value into a ``CultureLensError`` naming it."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from benchmark import settings as declared
from benchmark.errors import CultureLensError, OutputExists
from culturelens.hub_access import hub_has_dataset
from leaderboard import operator_settings as service


def add_store(parser: argparse.ArgumentParser, help: str) -> None:
    service.STORE.add_to(parser, help=help)


def store(args: argparse.Namespace | None = None) -> Path:
    """The store ``--store`` names, else ``CULTURELENS_STORE``, else on a Space its persistent storage's, else
    ``.culturelens`` (``args`` None: a verb without the flag; ``operator_settings.store``)."""
    return service.store(getattr(args, "store", None))


def add_metric_options(parser: argparse.ArgumentParser) -> None:
    """``--tracks`` and every metric setting the tracks declare, one help group per track."""
    from benchmark import tracks

    scored = [name for name, track in tracks.all_tracks().items() if track.metrics is not None]
    group = parser.add_argument_group("metrics")
    group.add_argument("--tracks", nargs="+", choices=scored, default=None, metavar="TRACK",
                       help=f"tracks to score, of {', '.join(scored)} (default: every track that can run)")
    for setting in tracks.SHARED:
        setting.add_to(group)
    for name, track in tracks.all_tracks().items():
        if track.settings:
            declared.add_options(parser, f"{name} ({track.title})", track.settings)


def scoring_options(given: Mapping[str, object]):
    """The ``benchmark.scoring_options.ScoringOptions`` the options ``given`` by name choose (a verb's parsed
    arguments, ``vars(args)``, or the Python API's keywords), built once: ``tracks``, every metric setting the
    tracks declare and ``backbones`` (its file's registry), each not given from its environment variable, else its
    default; ``device``, ``batch_size`` and ``num_workers`` as given (the harness's defaults where absent). A
    CultureLensError names a setting that cannot be read."""
    from benchmark import tracks
    from benchmark.encoders.spec import load_registry
    from benchmark.scoring_options import ScoringOptions

    chosen = given.get("tracks")
    runtime = {name: given[name] for name in ("device", "batch_size", "num_workers") if given.get(name) is not None}
    return ScoringOptions(declared.from_values(tracks.settings_declared(), given),
                          tuple(chosen) if chosen is not None else None, load_registry(given.get("backbones")),
                          **runtime)


PYTHON_KEYWORDS = ("tracks", "suite", "store", "out", "cache")
"""``culturelens.score``'s keywords besides the declared settings (the metrics', the harness's), each the same
name as a flag of ``culturelens score``."""


def in_keywords(text: str) -> str:
    """A message written for the command line (``pass --w1kp-calibration PATH_OR_URL``, "choose other --tracks") said
    in the Python API's terms (``pass w1kp_calibration=PATH_OR_URL``, "choose other tracks=..."): each flag that is
    also a keyword of ``culturelens.score`` and ``culturelens.metrics`` becomes that keyword, its value's name kept.
    The messages are written once, where what is missing is known (a track, a backbone's loader, a judge), in the
    command line's words; the environment variables they name are the same in both."""
    from benchmark import tracks

    names = [*PYTHON_KEYWORDS, *(s.name for s in (*tracks.settings_declared(), *declared.RUNTIME))]
    flags = "|".join(re.escape(name.replace("_", "-")) for name in sorted(names, key=len, reverse=True))

    def keyword(match: re.Match) -> str:
        return f"{match.group(1).replace('-', '_')}={match.group(2) or '...'}"

    return re.sub(rf"(?<![\w-])--({flags})(?![\w-])(?: ([A-Z][A-Z0-9_]*)\b)?", keyword, text)


def add_cube_source(parser: argparse.ArgumentParser, where: str) -> None:
    """``--cube-source``: where the default dataset is built from when neither a local copy nor the Hub has it."""
    service.CUBE_SOURCE.add_to(parser, help=f"the authors' cube_1k.json (path or URL) to build the default dataset "
                                            f"from, {where}, when neither a local copy nor the Hub repo is reachable "
                                            f"(default: {default_cube_source()})")


def cube_source(args: argparse.Namespace) -> str:
    """``--cube-source``, else ``CULTURELENS_CUBE_SOURCE``, else ``default_cube_source()``."""
    return service.CUBE_SOURCE.resolve(args.cube_source) or default_cube_source()


def default_cube_source() -> str:
    """``--cube-source``'s default, as the Makefile chooses: the authors' file next to this checkout
    (``../shared/data/cube/cube_1k.json``) when present, else its public URL."""
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE

    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "cube" / "cube_1k.json"
    return str(shared) if shared.is_file() else DEFAULT_SOURCE


def add_suite(parser: argparse.ArgumentParser, what: str, *, served: bool = False) -> None:
    """``--suite REPO_OR_DIR`` (else ``CULTURELENS_SUITE``): the suite a suite submission answers, and its scoring
    assets. ``served``: by default the one the store's ``serve --suite`` serves (``served_suite.remembered``)."""
    from benchmark.suite import SUITE_REPO

    first = "the one `serve --suite` serves on this store, else " if served else ""
    service.SUITE.add_to(parser, help=f"the suite {what}: a folder from `culturelens suite build` or a Hub repo id "
                                      f"(default {first}{SUITE_REPO}, its datasets from the store then the Hub)")


def suite(args: argparse.Namespace) -> str | None:
    """The suite ``--suite`` or ``CULTURELENS_SUITE`` names, or None."""
    return service.SUITE.resolve(getattr(args, "suite", None))


def use_suite_assets(given: MutableMapping[str, object], assets) -> None:
    """Give every metric setting the suite folder's assets imply (``Assets.settings``: artifact index, knowledge
    base, W1KP calibration and its backbone) to the options ``given`` by name (a verb's, ``vars(args)``: changed in
    place), where neither its option nor its environment variable set one: what the operator says wins over the
    suite."""
    from benchmark import tracks

    declared_settings = {s.name: s for s in tracks.settings_declared()}
    for name, value in assets.settings().items():
        setting = declared_settings[name]
        flag = given.get(name)
        if setting.given(None if flag == setting.default else flag)[0] is None:
            given[name] = value


def build_default_dataset(datasets_root: Path, source: str) -> Path | None:
    """Make sure the default dataset (CUBE-1K) can be loaded, as `make run` does: when neither a local copy under
    ``datasets_root`` nor the Hub repo is reachable, build it there from ``source``, saying so in one line (and
    rebuild a local copy made before the demo config existed).

    Returns the local folder when one exists afterwards, None when the Hub repo serves it.
    """
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    folder = local_folder(datasets_root, cube_1k.HUB_REPO)
    if cube_1k.has_every_config(folder):
        return folder
    if (folder / "README.md").exists():
        print(f"{folder} is an older build without the {cube_1k.CONFIG_DEMO} config: rebuilding it from {source}",
              file=sys.stderr)
    elif hub_has_dataset(cube_1k.HUB_REPO):
        return None
    else:
        print(f"{cube_1k.HUB_REPO} is neither in {datasets_root} nor reachable on the Hub: building it from {source} "
              f"into {folder}", file=sys.stderr)
    try:
        cube_1k.build(source, folder, how=f"--cube-source PATH (or {service.CUBE_SOURCE.env})")
    except (cube_1k.CubeSourceError, OutputExists) as error:
        raise CultureLensError(f"cannot build the default dataset {cube_1k.HUB_REPO}: {error}") from None
    return folder


def build_diversity_dataset(datasets_root: Path) -> None:
    """Make sure the suite's diversity prompts (``cube-diversity``, written in this package) can be loaded: when
    neither a local copy under ``datasets_root`` nor the Hub repo is reachable, build them there, saying so in one
    line, as ``build_default_dataset`` builds CUBE-1K."""
    from benchmark.datasets import cube_diversity
    from benchmark.datasets.prompts import local_folder

    folder = local_folder(datasets_root, cube_diversity.HUB_REPO)
    if (folder / "README.md").exists() or hub_has_dataset(cube_diversity.HUB_REPO):
        return
    print(f"{cube_diversity.HUB_REPO} is neither in {datasets_root} nor reachable on the Hub: building it from this "
          f"package into {folder}", file=sys.stderr)
    cube_diversity.build_diversity(folder)


def add_limit(parser: argparse.ArgumentParser) -> None:
    service.LIMITS.add_to(parser, help="change an upload limit (repeatable; the variable holds NAME=VALUE,...); "
                                       f"names and defaults: {service.describe_limits()}", action="append")


def add_quota(parser: argparse.ArgumentParser, who: str) -> None:
    group = parser.add_argument_group("quota", f"{who} A number, or '{service.NO_LIMIT}' for no limit.")
    for setting in (service.QUOTA, service.ATTEMPT_QUOTA, service.QUOTA_HOURS):
        setting.add_to(group)


def add_max_attempts(parser: argparse.ArgumentParser) -> None:
    service.MAX_ATTEMPTS.add_to(parser)


def add_queue(parser: argparse.ArgumentParser) -> None:
    service.QUEUE.add_to(parser)


def queue(args: argparse.Namespace) -> str | None:
    """The queue location ``--queue`` or ``CULTURELENS_QUEUE`` sets, or None."""
    return service.queue(args.queue)


def max_attempts(args: argparse.Namespace) -> int:
    return service.max_attempts(args.max_attempts)


def limits(args: argparse.Namespace):
    """The upload limits ``--limit`` and ``CULTURELENS_LIMITS`` set."""
    return service.limits(args.limit)


def quota(args: argparse.Namespace, *, public: bool) -> dict:
    """``Store``'s quota keywords from ``--quota``, ``--quota-hours``, ``--attempt-quota`` and the environment."""
    return service.quota(public=public, submissions=args.quota, hours=args.quota_hours, attempts=args.attempt_quota)

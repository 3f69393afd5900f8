"""Options and checks that several verbs share: the store, the default dataset's source, the operator's limits
and quota, the backbones and the metric settings (generated from the tracks' declarations, ``benchmark.settings``).
Each turns a bad value into a ``CultureLensError`` naming it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark import settings as declared
from benchmark.errors import CultureLensError, OutputExists
from culturelens.hub_access import hub_has_dataset

DEFAULT_STORE = ".culturelens"


def add_store(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, help=help)


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


def chosen_metrics(args: argparse.Namespace, backbones: dict):
    """The metrics the options choose, and {metric: reason} for those unavailable; a CultureLensError when a
    chosen track cannot run at all. ``backbones``: the registry ``--backbones`` gives (the probe judge loads
    from it)."""
    from benchmark import tracks

    settings = declared.from_args(tracks.settings_declared(), args)
    return tracks.select(*tracks.build(settings, backbones, args.tracks), args.tracks)


def add_cube_source(parser: argparse.ArgumentParser, where: str) -> None:
    """``--cube-source``: where the default dataset is built from when neither a local copy nor the Hub has it."""
    parser.add_argument("--cube-source", default=default_cube_source(),
                        help=f"the authors' cube_1k.json (path or URL) to build the default dataset from, {where}, "
                             "when neither a local copy nor the Hub repo is reachable")


def default_cube_source() -> str:
    """``--cube-source``'s default, as the Makefile chooses: the authors' file next to this checkout
    (``../shared/data/cube/cube_1k.json``) when present, else its public URL."""
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE

    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "cube" / "cube_1k.json"
    return str(shared) if shared.is_file() else DEFAULT_SOURCE


def default_w1kp_source() -> str:
    """``suite build --w1kp-source``'s default: the authors' cdf-xy.pt next to this checkout
    (``../shared/data/w1kp/cdf-xy.pt``) when present, else its pinned URL."""
    from benchmark.suite import source

    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "w1kp" / "cdf-xy.pt"
    return str(shared) if shared.is_file() else source("w1kp-calibration").default


def add_suite(parser: argparse.ArgumentParser, what: str) -> None:
    """``--suite REPO_OR_DIR``: the suite a suite submission answers, and its scoring assets."""
    from benchmark.suite import SUITE_REPO

    parser.add_argument("--suite", default=None, metavar="REPO_OR_DIR",
                        help=f"the suite {what}: a folder from `culturelens suite build` or a Hub repo id (default "
                             f"{SUITE_REPO}, its datasets from the store then the Hub)")


def use_suite_assets(args: argparse.Namespace, assets) -> None:
    """Give every metric setting the suite folder's assets imply (``Assets.settings``: artifact index, knowledge
    base, W1KP calibration and its backbone) to ``args``, where neither its flag nor its environment variable set
    one: what the operator says wins over the suite."""
    import os

    from benchmark import tracks

    declared_settings = {s.name: s for s in tracks.settings_declared()}
    for name, value in assets.settings().items():
        setting = declared_settings[name]
        given = getattr(args, name, None)
        if (given is None or given == setting.default) and not (setting.env and os.environ.get(setting.env)):
            setattr(args, name, value)


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
        cube_1k.build(source, folder)
    except (cube_1k.CubeSourceError, OutputExists) as error:
        raise CultureLensError(f"cannot build the default dataset {cube_1k.HUB_REPO}: {error}") from None
    return folder


def add_limit(parser: argparse.ArgumentParser) -> None:
    from leaderboard.operator_settings import ENV_LIMITS, describe_limits

    parser.add_argument("--limit", action="append", default=None, metavar="NAME=VALUE",
                        help=f"change an upload limit (repeatable; env {ENV_LIMITS}=NAME=VALUE,...); names and "
                             f"defaults: {describe_limits()}")


def add_quota(parser: argparse.ArgumentParser, who: str) -> None:
    from leaderboard import operator_settings as o

    group = parser.add_argument_group("quota", f"{who} A number, or '{o.NO_LIMIT}' for no limit.")
    group.add_argument("--quota", default=None, metavar="N",
                       help=f"accepted submissions (re-runs included) per user and window (env {o.ENV_QUOTA})")
    group.add_argument("--attempt-quota", default=None, metavar="N",
                       help=f"uploads sent for validation, rejected ones included, per user and window "
                            f"(env {o.ENV_ATTEMPT_QUOTA})")
    group.add_argument("--quota-hours", default=None, metavar="H",
                       help=f"the window in hours (env {o.ENV_QUOTA_HOURS}; default {o.QUOTA_HOURS:g})")


def add_max_attempts(parser: argparse.ArgumentParser) -> None:
    from leaderboard import operator_settings as o

    parser.add_argument("--max-attempts", default=None, metavar="N",
                        help=f"claims of one job before it is FAILED with its last reason (env {o.ENV_MAX_ATTEMPTS}; "
                             f"default {o.MAX_ATTEMPTS})")


def add_queue(parser: argparse.ArgumentParser) -> None:
    from leaderboard import operator_settings as o

    parser.add_argument("--queue", default=None, metavar="URL",
                        help=f"the queue on a PostgreSQL server, postgresql://USER@HOST/DATABASE, shared by workers "
                             f"on other machines (env {o.ENV_QUEUE}; default: the store's queue.sqlite). Keep the "
                             "password out of the command line: PGPASSWORD, ~/.pgpass or the environment variable")


def queue(args: argparse.Namespace) -> str | None:
    """The queue location ``--queue`` or ``CULTURELENS_QUEUE`` sets (``leaderboard.operator_settings``), or None."""
    from leaderboard import operator_settings

    return operator_settings.queue(args.queue)


def max_attempts(args: argparse.Namespace) -> int:
    from leaderboard import operator_settings

    return operator_settings.max_attempts(args.max_attempts)


def limits(args: argparse.Namespace):
    """The upload limits ``--limit`` and ``CULTURELENS_LIMITS`` set (``leaderboard.operator_settings``)."""
    from leaderboard import operator_settings

    return operator_settings.limits(args.limit)


def quota(args: argparse.Namespace, *, public: bool) -> dict:
    """``Store``'s quota keywords from ``--quota``, ``--quota-hours``, ``--attempt-quota`` and the environment."""
    from leaderboard import operator_settings

    return operator_settings.quota(public=public, submissions=args.quota, hours=args.quota_hours,
                                   attempts=args.attempt_quota)

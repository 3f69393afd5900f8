"""What an operator sets for the service, declared once as ``benchmark.settings.Setting`` records: where the store
and the queue are, who owns local uploads, the suite it serves, the Hub repos it mirrors to, the quota, the upload
limits and the attempts a job gets. Each is a flag of `culturelens serve` (and of the other verbs that need it), else an
environment variable, else the default; ``app.py`` (a Space, no command line) resolves the same records from the
environment alone (``service``). ``SERVICE`` lists them, ``environment()`` every variable CultureLens reads.

Who is held to the quota follows SECURITY.md's threat model. Visitors of a server that other machines can reach
(`culturelens serve --host 0.0.0.0`, or `app.py` on a Space) are: off a Space there is no sign-in, so every visitor
acts as the one local user, and the quota is all that bounds the scoring work they can ask for. The operator is
not: whoever runs `culturelens submit` holds the store's disk, and the only user of a server bound to loopback is
the person at that machine. There the built-in quota does not apply; a quota the operator sets (flag or
environment) applies everywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark import settings as declared
from benchmark.settings import Setting, SettingError

if TYPE_CHECKING:
    from benchmark.submission import Limits

PUBLIC_QUOTA = 5  # accepted submissions (re-runs included) per user and window
PUBLIC_ATTEMPT_QUOTA = 20  # uploads sent for validation (rejected ones included) per user and window
NO_LIMIT = "none"

STORE = Setting("store", ".culturelens", "the leaderboard store", env="CULTURELENS_STORE")
QUEUE = Setting("queue", None, "the queue on a PostgreSQL server, postgresql://USER@HOST/DATABASE, shared by workers "
                               "on other machines (default: the store's queue.sqlite); keep the password out of the "
                               "command line: PGPASSWORD, ~/.pgpass or the environment variable",
                env="CULTURELENS_QUEUE", metavar="URL")
LOGIN = Setting("login", "local", "your login name: who owns what you submit (`submit --owner`) and, unless "
                                  "CULTURELENS_USER says otherwise, a served app's uploads", env="USER")
USER = Setting("user", None, "local user submissions are owned by (default: your login name, $USER)",
               env="CULTURELENS_USER")
CUBE_SOURCE = Setting("cube_source", None, "build the default CUBE-1K dataset from this JSON (path or URL) if the "
                                           "store lacks it (app.py: the authors' public file when not set)",
                      env="CULTURELENS_CUBE_SOURCE")
HUB_REQUESTS = Setting("hub_requests", None, "Hub dataset repo mirroring the queue and submitted files (pulled at "
                                             "start, then pushed)", env="CULTURELENS_HUB_REQUESTS")
HUB_RESULTS = Setting("hub_results", None, "Hub dataset repo mirroring the results (its newest leaderboard release "
                                           "read at start, new results folders picked up, then pushed)",
                      env="CULTURELENS_HUB_RESULTS")
QUOTA = Setting("quota", None, "accepted submissions (re-runs included) per user and window", env="CULTURELENS_QUOTA",
                metavar="N")
ATTEMPT_QUOTA = Setting("attempt_quota", None, "uploads sent for validation, rejected ones included, per user and "
                                               "window", env="CULTURELENS_ATTEMPT_QUOTA", metavar="N")
QUOTA_HOURS = Setting("quota_hours", 24.0, "the window in hours", env="CULTURELENS_QUOTA_HOURS", metavar="H")
LIMITS = Setting("limit", None, "change an upload limit (repeatable; the variable: NAME=VALUE,...)",
                 env="CULTURELENS_LIMITS", metavar="NAME=VALUE")
MAX_ATTEMPTS = Setting("max_attempts", 3, "claims of one job (a worker that died holding it counts) before it is "
                                          "FAILED with its last reason", env="CULTURELENS_MAX_ATTEMPTS", metavar="N")
SUITE = Setting("suite", None, "the suite served (a folder from `culturelens suite build`, or its Hub repo): "
                               "submissions answer its definition, the store serves its datasets, and every track "
                               "whose scoring assets it holds is on (default: the definition v1 in this package, no "
                               "assets)",
                env="CULTURELENS_SUITE", metavar="REPO_OR_DIR")
SPACE_ID = Setting("space_id", None, "set by Hugging Face Spaces: visitors sign in with Hugging Face and own their "
                                     "uploads", env="SPACE_ID")
SPACE_STORAGE = Setting("space_storage", "/data", "where a Hugging Face Space mounts its persistent storage: on a "
                                                  "Space that has it, the store defaults to its culturelens/ folder",
                        env="CULTURELENS_SPACE_STORAGE", path=True)
SEAL_SECRET = Setting("seal_secret", None, "the secret that seals results (leaderboard.seal): the app and every worker "
                                           "of its queue hold the same one; several, separated by spaces, to rotate "
                                           "(the first seals, each verifies); none: a key kept in STORE/seal.key",
                      env="CULTURELENS_SEAL_SECRET")
GRADIO_TEMP_DIR = Setting("gradio_temp_dir", None, "where Gradio keeps uploads: the app keeps its own in a "
                                                 "culturelens-uploads-<random> folder under it (default: the system's "
                                                 "temporary folder), removed when the app stops",
                          env="GRADIO_TEMP_DIR", path=True)
ARENA_DAILY_VOTES = Setting("arena_daily_votes", 200, "votes one voter may cast in the arena per 24 hours (a vote past "
                                                    "it is refused)", type=int, env="CULTURELENS_ARENA_DAILY_VOTES",
                            metavar="N")
ARENA_VOTER_SHARE = Setting("arena_voter_share", 0.05, "the largest share of any arena ranking one voter may weigh (a "
                                                       "ranking of fewer than 1/SHARE voters is not ranked)", type=float,
                            env="CULTURELENS_ARENA_VOTER_SHARE", metavar="SHARE")
ARENA_BATTLE_MINUTES = Setting("arena_battle_minutes", 30.0, "how long an arena battle stays open for its vote",
                               type=float, env="CULTURELENS_ARENA_BATTLE_MINUTES", metavar="MINUTES")
ARENA_VOTER_MULTIPLE = Setting("arena_voter_multiple", 3.0, "the most one voter may weigh in any arena ranking, in "
                                                           "multiples of the median voter's votes in it (at least 1; "
                                                           "inf: no such cap)", type=float,
                               env="CULTURELENS_ARENA_VOTER_MULTIPLE", metavar="MULTIPLE")
ARENA_KB_IMAGES = Setting("arena_kb_images", None, "the folder of the relevance knowledge base's images (the "
                                                    "--kb-images it was built from): the arena's gold battles then "
                                                    "set CUBE-CSpace artifacts' real images against each other too",
                          env="CULTURELENS_ARENA_KB_IMAGES", path=True)
ARENA = (ARENA_DAILY_VOTES, ARENA_VOTER_SHARE, ARENA_VOTER_MULTIPLE, ARENA_BATTLE_MINUTES, ARENA_KB_IMAGES)
"""The Cultural Arena's rules an operator sets (``leaderboard.arena.service.ArenaSettings``)."""
SPACE_STORE = "culturelens"
"""The store's folder in a Space's persistent storage."""

SERVICE = (STORE, QUEUE, USER, CUBE_SOURCE, SUITE, HUB_REQUESTS, HUB_RESULTS, QUOTA, ATTEMPT_QUOTA, QUOTA_HOURS,
           LIMITS)
"""The settings `culturelens serve` and app.py share (``service``); serve has a flag for each."""
OTHERS = (MAX_ATTEMPTS, LOGIN, SPACE_ID, SPACE_STORAGE, SEAL_SECRET, GRADIO_TEMP_DIR)
"""The service's other variables: the worker's attempts, the login name, the Space's own, the seal's secret and
where Gradio's uploads go."""


def environment() -> list[Setting]:
    """Every setting read from an environment variable: the library's, the tracks' and the service's, in that
    order (README.md's "Environment" table lists the same)."""
    from benchmark import tracks

    every = [*declared.ENVIRONMENT, *tracks.settings_declared(), *SERVICE, *OTHERS, *ARENA]
    return [s for s in every if s.env]


def on_space(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the app runs on a Hugging Face Space (where visitors sign in)."""
    return bool(SPACE_ID.resolve(None, environ))


def store(flag: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The store folder: ``--store``, else ``CULTURELENS_STORE``, else on a Space with persistent storage (a folder
    at ``CULTURELENS_SPACE_STORAGE``, ``/data`` as Spaces mount it) its ``culturelens/`` folder, else
    ``.culturelens`` (on a Space without persistent storage: a disk wiped at every restart, ``restart_warning``)."""
    value, _ = STORE.given(flag, environ)
    if value is not None:
        return Path(value)
    persistent = Path(SPACE_STORAGE.resolve(None, environ))
    if on_space(environ) and persistent.is_dir():
        return persistent / SPACE_STORE
    return Path(STORE.default)


def restart_warning(store: Path, hub_repos: Mapping[str, str | None],
                    environ: Mapping[str, str] | None = None) -> str | None:
    """On a Space whose store would not outlive a restart, what its page says (None elsewhere, and where it would):
    a Space's own disk is wiped at every restart, so the store lasts only in its persistent storage, or mirrored to
    a requests and a results repo (restored from them at start)."""
    if not on_space(environ) or all(hub_repos.get(kind) for kind in ("requests", "results")):
        return None
    persistent = Path(SPACE_STORAGE.resolve(None, environ))
    if persistent.is_dir() and Path(store).resolve().is_relative_to(persistent.resolve()):
        return None
    return ("**Results on this Space will not survive a restart.** It has no persistent storage (nothing at "
            f"{persistent}) and mirrors to no Hub repos, so submissions, the queue and scores live on a disk that "
            "is wiped whenever the Space restarts. Its operator can turn on persistent storage in the Space's "
            "settings, or set CULTURELENS_HUB_REQUESTS and CULTURELENS_HUB_RESULTS (README.md, \"Deployment\": "
            "*Deploying the Space*).")


def login(environ: Mapping[str, str] | None = None) -> str:
    """The login name ($USER), else "local"."""
    return LOGIN.resolve(None, environ)


def is_loopback(host: str) -> bool:
    """Whether a server listening on ``host`` can be reached from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def _count(value: str, where: str) -> int | None:
    if value.strip().lower() == NO_LIMIT:
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise SettingError(f"{where}: {value!r} is not a whole number >= 0 or '{NO_LIMIT}'")
    return number


def quota(*, public: bool, submissions: str | None = None, hours: str | None = None, attempts: str | None = None,
          environ: Mapping[str, str] | None = None) -> dict:
    """``Store``'s quota keywords (``quota``, ``quota_hours``, ``attempt_quota``) from the flags' values (None:
    not given), else ``CULTURELENS_QUOTA``, ``CULTURELENS_QUOTA_HOURS`` and ``CULTURELENS_ATTEMPT_QUOTA``, else
    the public defaults where ``public`` and no quota where not. ``none`` is no limit."""
    submissions, s_where = QUOTA.given(submissions, environ)
    attempts, a_where = ATTEMPT_QUOTA.given(attempts, environ)
    hours, h_where = QUOTA_HOURS.given(hours, environ)
    settings = {
        "quota": _count(submissions, f"quota ({s_where})") if submissions is not None
        else (PUBLIC_QUOTA if public else None),
        "attempt_quota": _count(attempts, f"attempt quota ({a_where})") if attempts is not None
        else (PUBLIC_ATTEMPT_QUOTA if public else None),
        "quota_hours": QUOTA_HOURS.default,
    }
    if hours is not None:
        try:
            settings["quota_hours"] = float(hours)
        except ValueError:
            settings["quota_hours"] = 0.0
        if not 0 < settings["quota_hours"] < float("inf"):
            raise SettingError(f"quota hours ({h_where}): {hours!r} is not a number of hours > 0")
    return settings


def max_attempts(flag: str | None = None, environ: Mapping[str, str] | None = None) -> int:
    """How many times a worker may claim one job before it is FAILED with the last reason: ``--max-attempts``,
    else ``CULTURELENS_MAX_ATTEMPTS``, else 3."""
    value, where = MAX_ATTEMPTS.given(flag, environ)
    if value is None:
        return MAX_ATTEMPTS.default
    if not value.strip().isdigit() or int(value) < 1:
        raise SettingError(f"max attempts ({where}): {value!r} is not a whole number >= 1")
    return int(value)


def queue(flag: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """Where the queue lives: ``--queue``, else ``CULTURELENS_QUEUE``, else None (the store's own SQLite file). A
    URL must be a ``postgresql://`` one the driver can read (SettingError, the password hidden, otherwise)."""
    from leaderboard.queue.location import QueueLocationError, check_url, is_url

    value, where = QUEUE.given(flag, environ)
    if value is None or not value.strip():
        return None
    if not is_url(value):
        raise SettingError(f"queue ({where}): not a postgresql://USER@HOST/DATABASE URL (the default queue, the "
                           "store's own queue.sqlite, needs no setting)")  # not echoed: it may hold a password
    try:
        return check_url(value.strip())
    except QueueLocationError as error:
        raise SettingError(f"queue ({where}): {error}") from None


def limits(items: list[str] | None = None, environ: Mapping[str, str] | None = None) -> Limits:
    """The upload limits: the defaults of ``Limits``, changed by ``CULTURELENS_LIMITS`` (``NAME=VALUE,...``),
    then by each ``NAME=VALUE`` of ``items`` (the ``--limit`` flags)."""
    from benchmark.submission import Limits

    defaults = Limits()
    known = {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(Limits)}
    changes = {}
    listed, where = LIMITS.given(None, environ)  # the flags do not replace the variable: they change it further
    sources = [(item, where) for item in (listed or "").split(",") if item.strip()]
    for item, where in [*sources, *((item, "--limit") for item in items or [])]:
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in known or not value.strip():
            raise SettingError(f"{where}: {item.strip()!r} is not NAME=VALUE with NAME one of {', '.join(known)}")
        try:
            number = known[name](value.strip().replace("_", ""))
        except ValueError:
            number = -1
        if not 0 < number < float("inf"):
            raise SettingError(f"{where}: {name} must be a number > 0, not {value.strip()!r}")
        changes[name] = number
    return dataclasses.replace(defaults, **changes)


def describe_limits() -> str:
    """The limit names with their defaults, for ``--help``."""
    from benchmark.submission import Limits

    defaults = Limits()
    return ", ".join(f"{f.name} ({format(getattr(defaults, f.name), 'g' if f.type == 'float' else 'd')})"
                     for f in dataclasses.fields(Limits))


@dataclass(frozen=True)
class ServiceSettings:
    """The service's settings, resolved: what ``leaderboard.service.start`` is given."""

    store: Path
    queue: str | None
    user: str
    cube_source: str | None
    suite: str | None
    hub_repos: dict[str, str | None]
    limits: Limits
    quota: dict
    restart_warning: str | None = None  # on a Space whose store would not outlive a restart: what its page says


def service(args: argparse.Namespace | None = None, *, public: bool,
            environ: Mapping[str, str] | None = None) -> ServiceSettings:
    """The ``SERVICE`` settings: `culturelens serve`'s flags (``args``), else the environment, else the defaults;
    app.py, which has no command line, passes no ``args``. ``public``: whether visitors other than the operator
    reach it (then the public quota applies unless one is set)."""
    def flag(setting: Setting) -> object:
        return getattr(args, setting.name, None)

    root = store(flag(STORE), environ)
    repos = {"requests": HUB_REQUESTS.resolve(flag(HUB_REQUESTS), environ),
             "results": HUB_RESULTS.resolve(flag(HUB_RESULTS), environ)}
    return ServiceSettings(
        store=root,
        queue=queue(flag(QUEUE), environ),
        user=USER.resolve(flag(USER), environ) or login(environ),
        cube_source=CUBE_SOURCE.resolve(flag(CUBE_SOURCE), environ),
        suite=SUITE.resolve(flag(SUITE), environ),
        hub_repos=repos,
        limits=limits(flag(LIMITS), environ),
        quota=quota(public=public, submissions=flag(QUOTA), hours=flag(QUOTA_HOURS), attempts=flag(ATTEMPT_QUOTA),
                    environ=environ),
        restart_warning=restart_warning(root, repos, environ))

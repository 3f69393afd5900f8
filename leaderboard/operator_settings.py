"""The quota, upload limits and queue location an operator sets: a command-line flag first, then an environment
variable, then the built-in default.

Who is held to the quota follows SECURITY.md's threat model. Visitors of a server that other machines can reach
(`culturelens serve --host 0.0.0.0`, or `app.py` on a Space) are: off a Space there is no sign-in, so every visitor
acts as the one local user, and the quota is all that bounds the scoring work they can ask for. The operator is
not: whoever runs `culturelens submit` holds the store's disk, and the only user of a server bound to loopback is
the person at that machine. There the built-in quota does not apply; a quota the operator sets (flag or
environment) applies everywhere.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping

from benchmark.errors import CultureLensError
from benchmark.submission import Limits

ENV_QUOTA = "CULTURELENS_QUOTA"
ENV_QUOTA_HOURS = "CULTURELENS_QUOTA_HOURS"
ENV_ATTEMPT_QUOTA = "CULTURELENS_ATTEMPT_QUOTA"
ENV_LIMITS = "CULTURELENS_LIMITS"
ENV_MAX_ATTEMPTS = "CULTURELENS_MAX_ATTEMPTS"
ENV_QUEUE = "CULTURELENS_QUEUE"
PUBLIC_QUOTA = 5  # accepted submissions (re-runs included) per user and window
PUBLIC_ATTEMPT_QUOTA = 20  # uploads sent for validation (rejected ones included) per user and window
QUOTA_HOURS = 24.0
MAX_ATTEMPTS = 3  # claims of one job (a worker that died holding it counts) before it is FAILED
NO_LIMIT = "none"


class SettingError(CultureLensError):
    """A quota or limit setting that cannot be read; the message names the setting and what it accepts."""


def is_loopback(host: str) -> bool:
    """Whether a server listening on ``host`` can be reached from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def _setting(flag: str | None, name: str, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(the value set, where it was set) for a flag whose environment variable is ``name``."""
    if flag is not None:
        return flag, "its flag"
    return environ.get(name) or None, name


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
          environ: Mapping[str, str] = os.environ) -> dict:
    """``Store``'s quota keywords (``quota``, ``quota_hours``, ``attempt_quota``) from the flags' values (None:
    not given), else ``CULTURELENS_QUOTA``, ``CULTURELENS_QUOTA_HOURS`` and ``CULTURELENS_ATTEMPT_QUOTA``, else
    the public defaults where ``public`` and no quota where not. ``none`` is no limit."""
    submissions, s_where = _setting(submissions, ENV_QUOTA, environ)
    attempts, a_where = _setting(attempts, ENV_ATTEMPT_QUOTA, environ)
    hours, h_where = _setting(hours, ENV_QUOTA_HOURS, environ)
    settings = {
        "quota": _count(submissions, f"quota ({s_where})") if submissions is not None
        else (PUBLIC_QUOTA if public else None),
        "attempt_quota": _count(attempts, f"attempt quota ({a_where})") if attempts is not None
        else (PUBLIC_ATTEMPT_QUOTA if public else None),
        "quota_hours": QUOTA_HOURS,
    }
    if hours is not None:
        try:
            settings["quota_hours"] = float(hours)
        except ValueError:
            settings["quota_hours"] = 0.0
        if not 0 < settings["quota_hours"] < float("inf"):
            raise SettingError(f"quota hours ({h_where}): {hours!r} is not a number of hours > 0")
    return settings


def max_attempts(flag: str | None = None, environ: Mapping[str, str] = os.environ) -> int:
    """How many times a worker may claim one job before it is FAILED with the last reason: ``--max-attempts``,
    else ``CULTURELENS_MAX_ATTEMPTS``, else 3."""
    value, where = _setting(flag, ENV_MAX_ATTEMPTS, environ)
    if value is None:
        return MAX_ATTEMPTS
    if not value.strip().isdigit() or int(value) < 1:
        raise SettingError(f"max attempts ({where}): {value!r} is not a whole number >= 1")
    return int(value)


def queue(flag: str | None = None, environ: Mapping[str, str] = os.environ) -> str | None:
    """Where the queue lives: ``--queue``, else ``CULTURELENS_QUEUE``, else None (the store's own SQLite file). A
    URL must be a ``postgresql://`` one the driver can read (SettingError, the password hidden, otherwise)."""
    from leaderboard.queue.location import QueueLocationError, check_url, is_url

    value, where = _setting(flag, ENV_QUEUE, environ)
    if value is None or not value.strip():
        return None
    if not is_url(value):
        raise SettingError(f"queue ({where}): not a postgresql://USER@HOST/DATABASE URL (the default queue, the "
                           "store's own queue.sqlite, needs no setting)")  # not echoed: it may hold a password
    try:
        return check_url(value.strip())
    except QueueLocationError as error:
        raise SettingError(f"queue ({where}): {error}") from None


def limits(items: list[str] | None = None, environ: Mapping[str, str] = os.environ) -> Limits:
    """The upload limits: the defaults of ``Limits``, changed by ``CULTURELENS_LIMITS`` (``NAME=VALUE,...``),
    then by each ``NAME=VALUE`` of ``items`` (the ``--limit`` flags)."""
    defaults = Limits()
    known = {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(Limits)}
    changes = {}
    sources = [(item, ENV_LIMITS) for item in (environ.get(ENV_LIMITS) or "").split(",") if item.strip()]
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
    defaults = Limits()
    return ", ".join(f"{f.name} ({format(getattr(defaults, f.name), 'g' if f.type == 'float' else 'd')})"
                     for f in dataclasses.fields(Limits))

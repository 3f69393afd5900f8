"""Where a queue lives: a path (an SQLite file) or a ``postgresql://`` URL, checked, and shown without its password.

The password of a URL (``postgresql://user:PASSWORD@host/db`` or ``?password=PASSWORD``) never appears in a
message, a log line or the app: ``redact`` replaces it by ``***`` and ``scrub`` removes it from any text (the
driver's errors may quote the URL they could not read).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from benchmark.errors import CultureLensError

SCHEMES = ("postgresql", "postgres")
HIDDEN = "***"
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)")


class QueueLocationError(CultureLensError):
    """A queue location that is neither a path nor a PostgreSQL URL that can be read; the message says why."""


def is_url(location: str | Path) -> bool:
    """Whether ``location`` names a database server (``scheme://...``) rather than a file."""
    return isinstance(location, str) and "://" in location


def _split(url: str) -> tuple[str, str, str]:
    """(``scheme://``, the user information before ``@`` or '', the rest) of ``url``."""
    scheme, _, rest = url.partition("://")
    authority = rest.split("?", 1)[0]
    if "@" not in authority:
        return f"{scheme}://", "", rest
    at = authority.rindex("@")
    return f"{scheme}://", rest[:at], rest[at:]


def passwords(url: str) -> list[str]:
    """The password(s) ``url`` holds, as written and decoded (empty when it holds none)."""
    _, userinfo, _ = _split(url)
    found = [userinfo.partition(":")[2]] if ":" in userinfo else []
    found += [match.group(2) for match in _QUERY_PASSWORD.finditer(url)]
    return [p for raw in found if raw for p in {raw, unquote(raw)}]


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``: safe to log and to show."""
    scheme, userinfo, rest = _split(url)
    if ":" in userinfo:
        userinfo = f"{userinfo.partition(':')[0]}:{HIDDEN}"
    text = f"{scheme}{userinfo}{rest}"
    return _QUERY_PASSWORD.sub(lambda match: match.group(1) + (HIDDEN if match.group(2) else ""), text)


def scrub(text: str, url: str) -> str:
    """``text`` (an error message) with every password of ``url`` replaced by ``***``."""
    for password in sorted(passwords(url), key=len, reverse=True):
        text = text.replace(password, HIDDEN)
    return text


def check_url(url: str) -> str:
    """``url`` if it is a PostgreSQL URL the driver can read; else QueueLocationError naming it (redacted)."""
    shown = redact(url)
    scheme = url.partition("://")[0].lower()
    if scheme not in SCHEMES:
        raise QueueLocationError(f"queue {shown}: only postgresql:// (or postgres://) URLs name a queue server; "
                                 "for an SQLite queue give a path")
    try:
        urlsplit(url).port  # noqa: B018 - reading it checks it
    except ValueError as error:
        raise QueueLocationError(f"queue {shown}: {scrub(str(error), url)}") from None
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except ProgrammingError as error:
        reason = scrub(str(error).strip().splitlines()[0] if str(error).strip() else "unreadable", url)
        raise QueueLocationError(f"queue {shown}: not a PostgreSQL connection URL ({reason})") from None
    return url

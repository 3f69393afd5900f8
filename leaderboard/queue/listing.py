"""The queue as pages show it: every value a queue client wrote, bounded and typed.

Any client of a shared queue (a worker on another machine, a supervisor, whoever can write its SQLite file) can
write any value into any field: megabytes into a worker's message, a supervisor's last exit or a notice, and, in
SQLite, text where a number belongs (a REAL column keeps ``'abc'``). What the Queue tab and the ``/queue`` API read,
on every page and every tick, is read through this module (``Queue.listing``, ``Queue.listed``, ``workers``,
``supervisors``, ``notices``, ``worker_tracks``):

- each value a client wrote is read as at most ``TEXT_CHARS`` characters of text, cut by the database (``substr``,
  in ``columns``), so a longer one costs no more to list, render and send than one of that length; a text that was
  longer ends with ``CUT``;
- each number is parsed from that text (``number``), and is ``INVALID`` when it is not one, or not in its range: a
  page shows the word "invalid" in its place;
- each list holds at most ``ROWS`` rows (the newest), and jobs at most the number a page asks for.

What the database computes itself (a worker's age from its heartbeat, by the database's clock) is a number in both
backends, whatever was written, and is read as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TEXT_CHARS = 4_000  # characters of any value a queue client wrote that a page reads (a few paragraphs)
CUT = f"… (cut at {TEXT_CHARS:,} characters)"  # ends a text that was longer than TEXT_CHARS
INVALID = "invalid"  # a number that a queue client wrote as something else
ROWS = 50  # rows of each list a page reads: workers, supervisors, notices (the newest)
TRACK_ROWS = 20 * ROWS  # what workers said of their tracks: twenty tracks each


def columns(*names: str) -> str:
    """SQL selecting each column of ``names`` as text of at most ``TEXT_CHARS`` characters and one more (so that
    ``text`` can tell a cut one), under its own name; the same SQL on SQLite and PostgreSQL."""
    return ", ".join(f"substr(CAST({name} AS TEXT), 1, {TEXT_CHARS + 1}) AS {name}" for name in names)


def text(value: object) -> str | None:
    """A text ``columns`` read: as it was when it fits ``TEXT_CHARS``, else its first ``TEXT_CHARS`` characters
    and ``CUT``; None stays None."""
    if value is None:
        return None
    value = str(value)
    return value if len(value) <= TEXT_CHARS else value[:TEXT_CHARS] + CUT


def number(value: object, *, low: float = -math.inf, high: float = math.inf,
           whole: bool = False) -> int | float | str | None:
    """A number ``columns`` read as text: an int (``whole``) or a float in [``low``, ``high``]; None stays None;
    ``INVALID`` for anything else (not a number, not finite, out of range, a fraction where a count belongs)."""
    if value is None:
        return None
    try:
        parsed = float(str(value))
    except ValueError:
        return INVALID
    if not (math.isfinite(parsed) and low <= parsed <= high) or (whole and not parsed.is_integer()):
        return INVALID
    return int(parsed) if whole else parsed


@dataclass(frozen=True)
class ListedJob:
    """A submission as a page shows it: every text bounded (``text``), ``attempts`` and ``progress`` (0-1)
    numbers or ``INVALID`` (``number``)."""

    id: str
    state: str | None
    model: str | None
    model_id: str | None
    owner: str | None
    dataset: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    attempts: int | str | None
    progress: float | str | None
    message: str | None
    error: str | None
    log_excerpt: str | None

    TEXTS = ("id", "state", "model", "model_id", "owner", "dataset", "created_at", "started_at", "finished_at",
             "message", "error", "log_excerpt")

    @classmethod
    def read(cls, row: dict) -> ListedJob:
        """The job of a row ``columns`` read (every field of this class)."""
        return cls(**{name: text(row[name]) for name in cls.TEXTS},
                   attempts=number(row["attempts"], low=0, whole=True),
                   progress=number(row["progress"], low=0, high=1))


JOB_COLUMNS = columns(*ListedJob.TEXTS, "attempts", "progress")

"""Store files that cannot be read, moved aside so that the leaderboard keeps serving the rest.

A results folder is final once it is in ``results/`` (written to a hidden temporary folder and renamed into
place), so a Parquet file in it that cannot be read is damaged (a disk full, a bad copy, a hand edit), not half
written. ``move`` (``Store.quarantine``) takes it out of ``results/`` in one rename, to
``STORE/quarantine/<kind>-<name>-<when>/``, with a ``reason.txt`` saying why; ``listing`` (``Store.quarantined``)
lists what is there, for the operator, who may repair a folder and move it back, re-run the submission, or
delete it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

FOLDER = "quarantine"  # STORE/quarantine/
STAMP = "%Y%m%dT%H%M%S.%fZ"  # part of a quarantined folder's name: when it was moved aside (UTC)
REASON = "reason.txt"


@dataclass(frozen=True)
class Quarantined:
    """One thing moved aside: its kind ("results" or "reported"), its name (the submission id, or the reported
    file's name), when (ISO 8601, UTC) and why, and where it now is."""

    kind: str
    name: str
    when: str
    reason: str
    folder: Path


def folder_name(kind: str, name: str, when: datetime) -> str:
    """``<kind>-<name>-<when>``: the stamp holds no '-', so the last '-' splits it off again."""
    return f"{kind}-{name}-{when.strftime(STAMP)}"


def move(root: Path, kind: str, path: Path, reason: str) -> Path | None:
    """Move ``path`` (a folder, or a file: it gets a folder of its own) out of the readers' sight in one rename,
    to ``root/<kind>-<name>-<when>/`` with a ``reason.txt``. Returns where it went, or None when ``path`` was
    already gone (a re-run or a deletion removed it meanwhile)."""
    path = Path(path)
    root.mkdir(exist_ok=True)
    target = root / folder_name(kind, path.name, datetime.now(timezone.utc))
    try:
        if path.is_dir():
            os.rename(path, target)
        else:
            target.mkdir()
            os.rename(path, target / path.name)
    except FileNotFoundError:
        shutil.rmtree(target, ignore_errors=True)
        return None
    (target / REASON).write_text(reason + "\n", encoding="utf-8")
    return target


def listing(root: Path) -> list[Quarantined]:
    """What ``root`` (``STORE/quarantine``) holds, oldest first."""
    entries = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        kind, _, rest = folder.name.partition("-")
        name, _, stamp = rest.rpartition("-")
        try:
            when = datetime.strptime(stamp, STAMP).replace(tzinfo=timezone.utc).isoformat(timespec="seconds")
            reason = (folder / REASON).read_text(encoding="utf-8").strip()
        except (ValueError, OSError):  # not one of ours (the operator put it there): list it, say so
            when, reason = "", f"no {REASON}: not moved here by the leaderboard"
        entries.append(Quarantined(kind, name or folder.name, when, reason, folder))
    return sorted(entries, key=lambda e: e.when)


def unreadable(path: Path, public: str) -> str | None:
    """Why the Parquet file ``path`` cannot be read in full (``public``: its name in messages, instead of the
    server's folder), or None if it reads. FileNotFoundError (it was removed, not damaged) passes through."""
    try:
        pq.read_table(path)
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        message = (str(error).splitlines() or [""])[0].replace(str(path), public)
        return f"{public}: not a readable Parquet file ({type(error).__name__}: {message[:300]})"
    return None


def note(entries: list[Quarantined], shown: int = 5) -> str:
    """One line for the operator about what is quarantined ('' if nothing): kind, name, when and reason."""
    if not entries:
        return ""
    listed = "; ".join(f"{e.kind} {e.name} ({e.when or 'when unknown'}: {e.reason})" for e in entries[:shown])
    more = f"; and {len(entries) - shown} more" if len(entries) > shown else ""
    return (f"{len(entries)} unreadable store item{'s' * (len(entries) != 1)} moved to STORE/quarantine/ (repair and "
            f"move back, re-run, or delete): {listed}{more}")

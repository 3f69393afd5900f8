"""The embedded queue backend: one SQLite file in WAL mode (the default, ``STORE/queue.sqlite``).

SQLite rather than DuckDB: the app (enqueuing) and every worker (claiming)
write to the queue from separate processes, which SQLite's file locking
supports and DuckDB's single-writer files do not. The leaderboard's results
never go through this file (see ``store``). Every write transaction starts
with ``BEGIN IMMEDIATE``: writers take turns, so a claim or a quota check
sees every transaction before it (the semantics are ``base``'s).

A file SQLite finds damaged is kept aside and replaced by an empty queue
(``damaged``): the store rebuilds it from its folders, and from the ledger beside
the file (``<name>.ledger``: one JSON line per submission added or restored, lease
issued, re-run and deletion, ``_note``), which tells the rebuilt queue each
submission's owner, the leases it issued and what was deleted. At start, that is found by
``PRAGMA quick_check``; while the queue is in use, a statement SQLite finds damage in
raises ``QueueDamaged`` (SQLite's "database disk image is malformed", "file is not a
database"), and ``replace_damaged`` does then what a start does.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from benchmark.errors import CultureLensError
from leaderboard.queue.base import Queue, QueueDamaged, now_iso

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    model TEXT NOT NULL,
    model_id TEXT,
    model_revision TEXT,
    dataset TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'FINISHED', 'FAILED')),
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    updated_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires REAL,
    progress REAL,
    message TEXT,
    error TEXT,
    log_excerpt TEXT,
    lease_tokens TEXT,  -- the lease tokens issued for the current request, space-separated
    lease_hashes TEXT,  -- the sha256 of those issued before the queue was restored or rebuilt, space-separated
    requests_before INTEGER NOT NULL DEFAULT 0  -- requests to score it made before the queue was restored or rebuilt
);
CREATE TABLE IF NOT EXISTS attempts (
    owner TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_by_owner ON attempts (owner, at);
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    message TEXT,
    heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS submission_log (
    owner TEXT NOT NULL,
    at TEXT NOT NULL,
    submission TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('submission', 'rerun'))
);
CREATE INDEX IF NOT EXISTS submission_log_by_owner ON submission_log (owner, at);
-- request counts a submission's requests
CREATE INDEX IF NOT EXISTS submission_log_by_submission ON submission_log (submission);
-- A queue made before the log existed: its submissions start the log, so an upgrade gives no quota back.
INSERT INTO submission_log (owner, at, submission, kind)
    SELECT owner, created_at, id, 'submission' FROM submissions WHERE NOT EXISTS (SELECT 1 FROM submission_log);
CREATE TABLE IF NOT EXISTS supervisors (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    pid INTEGER,
    restarts INTEGER NOT NULL,
    last_exit TEXT,
    retry_at REAL,
    message TEXT,
    heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS deletions (
    submission TEXT PRIMARY KEY,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS notices (
    at REAL NOT NULL,
    message TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS worker_tracks (
    worker TEXT NOT NULL,
    track TEXT NOT NULL,
    reason TEXT,  -- NULL: the worker scores the track
    PRIMARY KEY (worker, track)
);
-- The images each submission answers a dataset with, by digest (``benchmark.submission.validate.image_set``): one
-- image set is one row of the leaderboard. A queue made before has none: the intake records them from the kept files.
CREATE TABLE IF NOT EXISTS image_sets (
    image_set TEXT NOT NULL,
    submission TEXT NOT NULL,
    PRIMARY KEY (image_set, submission)
);
CREATE INDEX IF NOT EXISTS image_sets_by_submission ON image_sets (submission);
"""

# Seconds since the epoch by the database's clock, to the millisecond (``unixepoch('subsec')`` needs SQLite
# 3.42; this works on every version). SQLite gives 'now' one value per statement.
DB_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

log = logging.getLogger("culturelens.queue")


DAMAGE = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}  # SQLite's primary result codes for a damaged file


def _dict_row(cursor: sqlite3.Cursor, row: tuple) -> dict:
    return {column[0]: value for column, value in zip(cursor.description, row)}


class _Session:
    """An SQLite connection running ``base``'s SQL (its ``DB_NOW`` made SQLite's clock)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def execute(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        return self.db.execute(sql.replace("DB_NOW", DB_NOW), params)


class SQLiteQueue(Queue):
    """Submission records in ``path`` (SQLite, WAL mode); safe to use from many processes of one machine (or
    machines sharing the file). See ``Queue`` for ``damaged``."""

    errors = (sqlite3.Error, QueueDamaged)
    _integrity_errors = (sqlite3.IntegrityError,)
    now_sql = DB_NOW

    def __init__(self, path: str | Path, *, max_attempts: int = 3,
                 has_results: Callable[[str], bool] = lambda id: False):
        super().__init__(path, max_attempts=max_attempts, has_results=has_results)
        self.path = Path(path)
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except QueueDamaged as error:
            self.damaged = self._replace_damaged(error)

    @property
    def ledger(self) -> Path:
        """The ledger beside the queue file: what a queue rebuilt after damage needs (``queue_rebuild``)."""
        return self.path.with_name(self.path.name + ".ledger")

    def _note(self, event: str, id: str, **facts) -> None:
        record = {"event": event, "id": id, "at": now_iso(), **facts}
        try:  # one write of one line, appended: lines of processes writing at once never interleave
            line = json.dumps(self.seal_note(record) if self.seal_note else record, ensure_ascii=False) + "\n"
            fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8", "surrogatepass"))
            finally:
                os.close(fd)
        except (OSError, CultureLensError) as error:  # CultureLensError: no key to seal it with
            log.warning("%s: %s of %s not noted (%s): a queue rebuilt after damage would not know it",
                        self.ledger.name, event, id, error)

    def _open(self) -> None:
        """Create the tables if needed (and the columns a queue made by an earlier version lacks); QueueDamaged if
        SQLite finds the file damaged. Processes opening the queue at once take turns (``_exclusive``): switching
        a new file to WAL is refused at once, not waited for, while another connection does it."""
        with self._exclusive():
            self._make_schema()

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """An exclusive lock on ``<name>.lock`` beside the queue file, for the steps no two processes may take at
        once: making the schema, replacing a damaged file."""
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _make_schema(self) -> None:
        with self._connect() as db:
            db.db.execute("PRAGMA journal_mode=WAL")
            db.db.executescript(_SCHEMA)
            db.db.execute("BEGIN IMMEDIATE")  # one process adds the column, the others then see it
            columns = {row["name"] for row in db.db.execute("PRAGMA table_info(submissions)")}
            for column, kind in (("lease_tokens", "TEXT"), ("lease_hashes", "TEXT"),
                                 ("requests_before", "INTEGER NOT NULL DEFAULT 0")):  # an earlier version's queue
                if column not in columns:
                    db.db.execute(f"ALTER TABLE submissions ADD COLUMN {column} {kind}")
            db.db.execute("COMMIT")
            problems = [row["quick_check"] for row in db.db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise QueueDamaged(f"{self.path.name} is damaged: {'; '.join(problems[:3])[:300]}")

    def replace_damaged(self) -> Path | None:
        try:
            self._open()
            return None
        except QueueDamaged as error:
            kept = self._replace_damaged(error)
        if kept is not None:
            self.damaged = kept
        return kept

    def _replace_damaged(self, error: QueueDamaged) -> Path | None:
        """Keep the damaged file (and its -wal, -shm) as ``<name>.damaged-<UTC time>`` and start an empty queue;
        returns where it was kept. Under an exclusive lock, checked again: of several processes finding it damaged
        at once, one replaces it (the others get None)."""
        with self._exclusive():
            try:
                self._make_schema()
                return None  # another process replaced it meanwhile
            except QueueDamaged:
                pass
            kept = self.path.with_name(f"{self.path.name}.damaged-{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}")
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{self.path}{suffix}")
                if part.exists():
                    part.rename(f"{kept}{suffix}")
            log.warning("%s: kept as %s, starting an empty queue", error, kept.name)
            self._make_schema()
            return kept

    @contextmanager
    def _connect(self) -> Iterator[_Session]:
        """A connection; a statement SQLite finds damage in raises QueueDamaged (other errors pass as they are)."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = _dict_row
        try:
            yield _Session(db)
        except sqlite3.DatabaseError as error:
            # An extended result code keeps its primary code in its low byte.
            if getattr(error, "sqlite_errorcode", 0) & 0xFF in DAMAGE:
                raise QueueDamaged(f"{self.path.name} is damaged: {error}") from error
            raise
        finally:
            db.close()

    @contextmanager
    def _transaction(self, *locks: str) -> Iterator[_Session]:
        """``BEGIN IMMEDIATE``: every writer waits for the one before it, so ``locks`` need nothing more."""
        with self._connect() as session:
            session.db.execute("BEGIN IMMEDIATE")
            try:
                yield session
            except BaseException:
                session.db.execute("ROLLBACK")
                raise
            session.db.execute("COMMIT")

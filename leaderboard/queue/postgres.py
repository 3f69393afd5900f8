"""The queue on a PostgreSQL server, for workers on many machines (``--queue postgresql://...``).

The semantics are ``base``'s, running the same SQL; what PostgreSQL adds:

- times come from the server: ``DB_NOW`` is ``clock_timestamp()`` as seconds since the epoch, so leases and
  heartbeats agree whatever the workers' clocks say;
- a claim locks the rows it picks with ``FOR UPDATE SKIP LOCKED``: concurrent claims never wait for each
  other nor take the same job;
- the transactions of one owner that count the quota and then log a submission take
  ``pg_advisory_xact_lock`` on the owner first, so two racing uploads cannot both pass the quota, and one that
  queues a submission takes it on each of its image sets too, so two racing uploads of the same images cannot both
  find them new;
- text columns compare bytewise (``COLLATE "C"``), as SQLite does: claim order and quota windows compare ISO
  times and ids as text, and must not depend on the database's locale.

psycopg (3) is imported only here, so a store on SQLite never loads it. Connections are kept open between
calls (``_Pool``), one per thread using the queue at a time.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from leaderboard.queue.base import Queue, QueueUnavailable
from leaderboard.queue.location import check_url, redact, scrub

DB_NOW = "extract(epoch from clock_timestamp())::double precision"
# The advisory-lock namespace of this queue: (_LOCKS, 0) the schema, (_LOCKS + 1, key) an owner or an image set.
_LOCKS = 7215
C = 'TEXT COLLATE "C"'

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS submissions (
    id {C} PRIMARY KEY,
    content_hash {C} NOT NULL UNIQUE,
    owner {C} NOT NULL,
    model TEXT NOT NULL,
    model_id {C},
    model_revision {C},
    dataset {C} NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'FINISHED', 'FAILED')),
    created_at {C} NOT NULL,
    started_at {C},
    finished_at {C},
    updated_at {C} NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_owner {C},
    lease_expires DOUBLE PRECISION,
    progress DOUBLE PRECISION,
    message TEXT,
    error TEXT,
    log_excerpt TEXT,
    lease_tokens {C},  -- the lease tokens issued for the current request, space-separated
    lease_hashes {C},  -- the sha256 of those issued before the queue was restored, space-separated
    requests_before INTEGER NOT NULL DEFAULT 0  -- requests to score it made before the queue was restored
);
CREATE INDEX IF NOT EXISTS submissions_by_state ON submissions (state, created_at, id);
CREATE TABLE IF NOT EXISTS attempts (
    rowid BIGSERIAL PRIMARY KEY,  -- named as SQLite's implicit key: the SQL is shared
    owner {C} NOT NULL,
    at {C} NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_by_owner ON attempts (owner, at);
CREATE TABLE IF NOT EXISTS workers (
    id {C} PRIMARY KEY,
    state TEXT NOT NULL,
    message TEXT,
    heartbeat DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS submission_log (
    owner {C} NOT NULL,
    at {C} NOT NULL,
    submission {C} NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('submission', 'rerun'))
);
CREATE INDEX IF NOT EXISTS submission_log_by_owner ON submission_log (owner, at);
-- request counts a submission's requests
CREATE INDEX IF NOT EXISTS submission_log_by_submission ON submission_log (submission);
CREATE TABLE IF NOT EXISTS supervisors (
    id {C} PRIMARY KEY,
    state TEXT NOT NULL,
    pid INTEGER,
    restarts INTEGER NOT NULL,
    last_exit TEXT,
    retry_at DOUBLE PRECISION,
    message TEXT,
    heartbeat DOUBLE PRECISION NOT NULL
);
-- A queue made before leases: its jobs get the column, empty (``base.refusal`` says what such a job takes).
ALTER TABLE submissions ADD COLUMN IF NOT EXISTS lease_tokens {C};
ALTER TABLE submissions ADD COLUMN IF NOT EXISTS lease_hashes {C};
ALTER TABLE submissions ADD COLUMN IF NOT EXISTS requests_before INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS deletions (
    submission {C} PRIMARY KEY,
    at {C} NOT NULL
);
CREATE TABLE IF NOT EXISTS notices (
    at DOUBLE PRECISION NOT NULL,
    message TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS worker_tracks (
    worker {C} NOT NULL,
    track {C} NOT NULL,
    reason TEXT,  -- NULL: the worker scores the track
    PRIMARY KEY (worker, track)
);
-- The images each submission answers a dataset with, by digest (``benchmark.submission.validate.image_set``).
CREATE TABLE IF NOT EXISTS image_sets (
    image_set {C} NOT NULL,
    submission {C} NOT NULL,
    PRIMARY KEY (image_set, submission)
);
CREATE INDEX IF NOT EXISTS image_sets_by_submission ON image_sets (submission);
"""


@functools.lru_cache(maxsize=256)
def _translate(sql: str) -> str:
    """``base``'s SQL for psycopg: ``?`` -> ``%s`` (a literal ``%`` doubled), ``DB_NOW`` -> the server's clock."""
    return sql.replace("%", "%%").replace("?", "%s").replace("DB_NOW", DB_NOW)


class _Session:
    def __init__(self, connection: psycopg.Connection):
        self.connection = connection

    def execute(self, sql: str, params: tuple = ()) -> psycopg.Cursor:
        return self.connection.execute(_translate(sql), params)


class _Pool:
    """Open connections kept between calls: a call takes an idle one (checked first when it was idle for over
    ``check_after`` seconds) or opens one, and gives it back; at most ``keep`` stay idle. A forked child starts
    with none of its parent's (they share its sockets)."""

    def __init__(self, url: str, keep: int = 4, check_after: float = 10.0):
        self.url, self.keep, self.check_after = url, keep, check_after
        self._idle: list[tuple[psycopg.Connection, float]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        connection = self._take() or psycopg.connect(self.url, autocommit=True, row_factory=dict_row,
                                                     connect_timeout=10)
        try:
            yield connection
        finally:
            self._give(connection)

    def _take(self) -> psycopg.Connection | None:
        while True:
            with self._lock:
                if self._pid != os.getpid():
                    self._idle, self._pid = [], os.getpid()
                if not self._idle:
                    return None
                connection, since = self._idle.pop()
            if not connection.closed and (time.monotonic() - since < self.check_after or _alive(connection)):
                return connection
            connection.close()

    def _give(self, connection: psycopg.Connection) -> None:
        if not connection.closed and connection.info.transaction_status == TransactionStatus.IDLE:
            with self._lock:
                if self._pid == os.getpid() and len(self._idle) < self.keep:
                    self._idle.append((connection, time.monotonic()))
                    return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()


def _alive(connection: psycopg.Connection) -> bool:
    try:
        connection.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


class PostgresQueue(Queue):
    """Submission records in the PostgreSQL database ``url`` names (tables created if missing); safe to use from
    many processes on many machines. ``location`` is the URL without its password."""

    errors = (psycopg.Error,)
    _integrity_errors = (psycopg.errors.UniqueViolation,)
    _skip_locked = " FOR UPDATE SKIP LOCKED"
    now_sql = DB_NOW

    def __init__(self, url: str, *, max_attempts: int = 3, has_results: Callable[[str], bool] = lambda id: False):
        super().__init__(url, max_attempts=max_attempts, has_results=has_results)
        self.location = redact(url)
        self._pool = _Pool(check_url(url))
        try:
            with self._pool.connection() as connection, connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s::integer, 0)", (_LOCKS,))  # workers starting together
                connection.execute(_SCHEMA)
        except psycopg.Error as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise QueueUnavailable(f"cannot open the queue at {self.location}: {scrub(reason, url)}") from None

    @contextmanager
    def _connect(self) -> Iterator[_Session]:
        with self._pool.connection() as connection:
            yield _Session(connection)

    @contextmanager
    def _transaction(self, *locks: str) -> Iterator[_Session]:
        with self._pool.connection() as connection, connection.transaction():
            for lock in sorted(set(locks)):  # always in one order: two transactions never wait for each other
                connection.execute("SELECT pg_advisory_xact_lock(%s::integer, hashtext(%s))", (_LOCKS + 1, lock))
            yield _Session(connection)

    def close(self) -> None:
        self._pool.close()

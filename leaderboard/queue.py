"""The submission queue: one SQLite file, atomic state transitions, leases for crashed workers.

States: PENDING -> RUNNING -> FINISHED | FAILED. A worker claims a job with a
lease and renews it while it works; a job whose lease expired (its worker
died) is claimed again by the next worker, up to ``max_attempts`` times, then
FAILED with that reason, unless ``has_results`` says the last attempt wrote its
results before it died: then the job is FINISHED (results are written before
the state changes, so a kill between the two must not throw them away).

SQLite rather than DuckDB: the app (enqueuing) and every worker (claiming)
write to the queue from separate processes, which SQLite's file locking
supports and DuckDB's single-writer files do not. The leaderboard's results
never go through this file (see ``store``).

Lease expiries and heartbeats are times of the database's clock (``DB_NOW``,
computed inside SQL), never of the calling process: workers on machines whose
clocks disagree share one clock, so a worker whose clock runs ahead cannot take
over a healthy job. Quotas count ``submission_log`` rows, which deleting a
submission does not touch. A file SQLite finds damaged is kept aside and
replaced by an empty queue (``damaged``): the store rebuilds it from its folders.
"""

from __future__ import annotations

import fcntl
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmark.errors import CultureLensError

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
    log_excerpt TEXT
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
CREATE TABLE IF NOT EXISTS notices (
    at REAL NOT NULL,
    message TEXT NOT NULL
);
"""

# Seconds since the epoch by the database's clock, to the millisecond (``unixepoch('subsec')`` needs SQLite
# 3.42; this works on every version). SQLite gives 'now' one value per statement.
DB_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

log = logging.getLogger("culturelens.queue")


def _times(n: int) -> str:
    return f"{n} time" + ("s" if n != 1 else "")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class QuotaExceeded(CultureLensError):
    """``owner`` already made ``used`` submissions (re-runs included) in the window; the limit is ``limit``."""

    def __init__(self, owner: str, used: int, limit: int):
        super().__init__(f"{owner} has made {used} submissions (re-runs included) in the quota window; "
                         f"the quota is {limit}")
        self.owner, self.used, self.limit = owner, used, limit


class DuplicateSubmission(CultureLensError, ValueError):
    """The same content was submitted before; ``existing`` is that submission."""

    def __init__(self, existing: Job):
        super().__init__(f"identical to submission {existing.id} ({existing.state}, {existing.created_at})")
        self.existing = existing


@dataclass(frozen=True)
class Job:
    id: str
    content_hash: str
    owner: str
    model: str
    model_id: str | None
    model_revision: str | None
    dataset: str
    state: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    updated_at: str
    attempts: int
    lease_owner: str | None
    lease_expires: float | None
    progress: float | None
    message: str | None
    error: str | None
    log_excerpt: str | None


class Queue:
    """Submission records in ``path`` (SQLite, WAL mode); safe to use from many processes.

    ``damaged``: where the file was kept if SQLite found it damaged at start (this process then created an
    empty queue in its place, and the caller should rebuild what it can); None normally.
    """

    def __init__(self, path: Path, *, max_attempts: int = 3, has_results: Callable[[str], bool] = lambda id: False):
        self.path = Path(path)
        self.max_attempts = max_attempts
        self.has_results = has_results
        self.damaged: Path | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as error:
            self._replace_damaged(error)

    def _open(self) -> None:
        """Create the tables if needed; DatabaseError if SQLite finds the file damaged."""
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:3]))

    def _replace_damaged(self, error: sqlite3.DatabaseError) -> None:
        """Keep the damaged file (and its -wal, -shm) as ``<name>.damaged-<UTC time>`` and start an empty queue.
        Under an exclusive lock, checked again: of several processes starting at once, one replaces it."""
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._open()
                return  # another process replaced it meanwhile
            except sqlite3.DatabaseError:
                pass
            kept = self.path.with_name(f"{self.path.name}.damaged-{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}")
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{self.path}{suffix}")
                if part.exists():
                    part.rename(f"{kept}{suffix}")
            log.warning("%s is damaged (%s): kept as %s, starting an empty queue", self.path.name, error, kept.name)
            self._open()
            self.damaged = kept

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def add(self, *, id: str, content_hash: str, owner: str, model: str, model_id: str | None,
            model_revision: str | None, dataset: str, quota: tuple[int, str] | None = None) -> Job:
        """Enqueue a validated submission as PENDING; raise DuplicateSubmission for known content.

        ``quota=(limit, since_iso)``: in the same transaction, QuotaExceeded if ``owner`` already has ``limit``
        entries in the submission log since ``since_iso`` (so concurrent uploads cannot all pass the check)."""
        stamp = now_iso()
        with self._transaction() as db:
            row = db.execute("SELECT * FROM submissions WHERE content_hash = ?", (content_hash,)).fetchone()
            if row:
                raise DuplicateSubmission(Job(**row))
            self._log_submission(db, owner, id, "submission", stamp, quota)
            db.execute(
                "INSERT INTO submissions (id, content_hash, owner, model, model_id, model_revision, dataset, state,"
                " created_at, updated_at, message) VALUES (?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, ?)",
                (id, content_hash, owner, model, model_id, model_revision, dataset, stamp, stamp,
                 "waiting for a worker"))
        return self.get(id)

    @staticmethod
    def _log_submission(db: sqlite3.Connection, owner: str, id: str, kind: str, stamp: str,
                        quota: tuple[int, str] | None) -> None:
        """Count ``owner``'s logged submissions against ``quota`` (QuotaExceeded), then log this one."""
        if quota is not None:
            limit, since = quota
            used = db.execute("SELECT count(*) FROM submission_log WHERE owner = ? AND at >= ?",
                              (owner, since)).fetchone()[0]
            if used >= limit:
                raise QuotaExceeded(owner, used, limit)
        db.execute("INSERT INTO submission_log (owner, at, submission, kind) VALUES (?, ?, ?, ?)",
                   (owner, stamp, id, kind))

    def get(self, id: str) -> Job | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM submissions WHERE id = ?", (id,)).fetchone()
        return Job(**row) if row else None

    def find_by_hash(self, content_hash: str) -> Job | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM submissions WHERE content_hash = ?", (content_hash,)).fetchone()
        return Job(**row) if row else None

    def wait(self, id: str, timeout: float = 300, poll: float = 0.5) -> Job:
        """Block until submission ``id`` is FINISHED or FAILED; TimeoutError after ``timeout`` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = self.get(id)
            if job and job.state in ("FINISHED", "FAILED"):
                return job
            time.sleep(poll)
        raise TimeoutError(f"submission {id} not finished after {timeout:.0f} s")

    def jobs(self) -> list[Job]:
        """All submissions, newest first."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM submissions ORDER BY created_at DESC, id DESC").fetchall()
        return [Job(**row) for row in rows]

    def claim(self, worker: str, lease_seconds: float) -> Job | None:
        """Take the oldest PENDING job, or a RUNNING one whose worker's lease expired."""
        stamp = now_iso()
        with self._transaction() as db:
            exhausted = db.execute(f"SELECT id, attempts FROM submissions WHERE state = 'RUNNING' AND lease_expires"
                                   f" < {DB_NOW} AND attempts >= ?", (self.max_attempts,)).fetchall()
            for row in exhausted:
                if self.has_results(row["id"]):
                    db.execute("UPDATE submissions SET state = 'FINISHED', finished_at = ?, updated_at = ?,"
                               " lease_owner = NULL, progress = 1, message = 'scored (the last attempt wrote its"
                               " results, then stopped)' WHERE id = ?", (stamp, stamp, row["id"]))
                else:
                    db.execute("UPDATE submissions SET state = 'FAILED', finished_at = ?, updated_at = ?,"
                               " lease_owner = NULL, error = ? WHERE id = ?",
                               (stamp, stamp, f"the worker stopped {_times(row['attempts'])} while scoring this "
                                "submission (crash or out of memory?); a maintainer can re-run it", row["id"]))
            row = db.execute(
                f"SELECT id FROM submissions WHERE state = 'PENDING' OR (state = 'RUNNING' AND lease_expires < {DB_NOW})"
                " ORDER BY created_at, id LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute(
                f"UPDATE submissions SET state = 'RUNNING', lease_owner = ?, lease_expires = {DB_NOW} + ?,"
                " attempts = attempts + 1, started_at = COALESCE(started_at, ?), updated_at = ?, progress = 0,"
                " message = ?, error = NULL WHERE id = ?",
                (worker, lease_seconds, stamp, stamp, f"claimed by worker {worker}", row["id"]))
        return self.get(row["id"])

    def _update_own(self, id: str, worker: str, assignments: str, values: tuple) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                f"UPDATE submissions SET {assignments}, updated_at = ? WHERE id = ? AND state = 'RUNNING'"
                " AND lease_owner = ?", (*values, now_iso(), id, worker))
        return cursor.rowcount == 1

    def heartbeat(self, id: str, worker: str, lease_seconds: float, progress: float | None = None,
                  message: str | None = None) -> bool:
        """Renew the lease (and report progress); False if this worker no longer holds the job."""
        return self._update_own(id, worker, f"lease_expires = {DB_NOW} + ?, progress = COALESCE(?, progress),"
                                " message = COALESCE(?, message)", (lease_seconds, progress, message))

    def finish(self, id: str, worker: str, message: str) -> bool:
        stamp = now_iso()
        return self._update_own(id, worker, "state = 'FINISHED', finished_at = ?, progress = 1, message = ?,"
                                " lease_owner = NULL", (stamp, message))

    def fail(self, id: str, worker: str, error: str, log_excerpt: str | None = None) -> bool:
        stamp = now_iso()
        return self._update_own(id, worker, "state = 'FAILED', finished_at = ?, error = ?, log_excerpt = ?,"
                                " lease_owner = NULL", (stamp, error, log_excerpt))

    def expire_leases(self, worker: str, reason: str) -> int:
        """Expire the leases ``worker`` holds (its process is known to be gone), so the next claim takes its
        jobs over at once rather than after the lease; the attempt still counts. Returns how many."""
        with self._transaction() as db:
            cursor = db.execute("UPDATE submissions SET lease_expires = 0, message = ?, updated_at = ?"
                                " WHERE state = 'RUNNING' AND lease_owner = ?", (reason, now_iso(), worker))
        return cursor.rowcount

    def set_worker(self, worker: str, state: str, message: str | None = None) -> None:
        """Record what a worker is doing, so the app can say why a job waits."""
        with self._transaction() as db:
            db.execute(f"INSERT INTO workers (id, state, message, heartbeat) VALUES (?, ?, ?, {DB_NOW}) ON CONFLICT(id)"
                       " DO UPDATE SET state = excluded.state, message = excluded.message,"
                       " heartbeat = excluded.heartbeat", (worker, state, message))

    def workers(self, within_seconds: float = 120) -> list[dict]:
        """Workers seen in the last ``within_seconds``, each with ``age``: seconds since its last heartbeat."""
        with self._connect() as db:
            rows = db.execute(f"SELECT *, {DB_NOW} - heartbeat AS age FROM workers WHERE heartbeat > {DB_NOW} - ?"
                              " ORDER BY id", (within_seconds,)).fetchall()
        return [dict(row) for row in rows]

    def set_supervisor(self, id: str, state: str, *, pid: int | None, restarts: int, last_exit: str | None,
                       retry_in: float | None = None, message: str | None = None) -> None:
        """Record what a worker supervisor (``leaderboard.supervisor``) sees: its worker's state, pid, restarts."""
        with self._transaction() as db:
            db.execute(f"INSERT OR REPLACE INTO supervisors (id, state, pid, restarts, last_exit, retry_at, message,"
                       f" heartbeat) VALUES (?, ?, ?, ?, ?, {DB_NOW} + ?, ?, {DB_NOW})",
                       (id, state, pid, restarts, last_exit, retry_in, message))

    def supervisors(self, within_seconds: float = 60) -> list[dict]:
        """Supervisors seen in the last ``within_seconds``, each with ``age`` and ``retry_in`` (seconds, or None)."""
        with self._connect() as db:
            rows = db.execute(f"SELECT *, {DB_NOW} - heartbeat AS age, retry_at - {DB_NOW} AS retry_in"
                              f" FROM supervisors WHERE heartbeat > {DB_NOW} - ? ORDER BY id",
                              (within_seconds,)).fetchall()
        return [dict(row) for row in rows]

    def add_notice(self, message: str) -> None:
        """Record something the operator must hear about (the queue was rebuilt); the Queue tab shows it."""
        with self._transaction() as db:
            db.execute(f"INSERT INTO notices (at, message) VALUES ({DB_NOW}, ?)", (message,))

    def notices(self, within_seconds: float = 7 * 24 * 3600) -> list[str]:
        """Notices of the last ``within_seconds``, oldest first."""
        with self._connect() as db:
            rows = db.execute(f"SELECT message FROM notices WHERE at > {DB_NOW} - ? ORDER BY at",
                              (within_seconds,)).fetchall()
        return [row[0] for row in rows]

    # --- owner operations (checked by the store against the signed-in user) -------------------------------
    def count_since(self, owner: str, since_iso: str) -> int:
        """Submissions and re-runs ``owner`` made at or after ``since_iso``, deleted ones included (the quota)."""
        with self._connect() as db:
            return db.execute("SELECT count(*) FROM submission_log WHERE owner = ? AND at >= ?",
                              (owner, since_iso)).fetchone()[0]

    def record_attempt(self, owner: str) -> int:
        """Note that ``owner`` sent an upload to validate, accepted or not (the quota on validation work);
        returns the attempt's number, for ``forget_attempt``."""
        with self._transaction() as db:
            return db.execute("INSERT INTO attempts (owner, at) VALUES (?, ?)", (owner, now_iso())).lastrowid

    def forget_attempt(self, attempt: int) -> None:
        """Remove an attempt that failed through the server's fault (it must not count against the user)."""
        with self._transaction() as db:
            db.execute("DELETE FROM attempts WHERE rowid = ?", (attempt,))

    def count_attempts_since(self, owner: str, since_iso: str) -> int:
        """Uploads ``owner`` sent for validation at or after ``since_iso``, rejected ones included."""
        with self._connect() as db:
            return db.execute("SELECT count(*) FROM attempts WHERE owner = ? AND at >= ?",
                              (owner, since_iso)).fetchone()[0]

    def find_model(self, model_id: str, model_revision: str, dataset: str) -> Job | None:
        """A live (not FAILED) submission of the same model revision for the same dataset, if any."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM submissions WHERE model_id = ? AND model_revision = ? AND dataset = ?"
                             " AND state <> 'FAILED' ORDER BY created_at LIMIT 1",
                             (model_id, model_revision, dataset)).fetchone()
        return Job(**row) if row else None

    def requeue(self, id: str, owner: str, quota: tuple[int, str] | None = None) -> bool:
        """FINISHED or FAILED -> PENDING with a fresh attempt count (a re-run by ``owner``, logged against the
        quota like a submission: QuotaExceeded, see ``add``); False in any other state."""
        stamp = now_iso()
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE submissions SET state = 'PENDING', attempts = 0, started_at = NULL, finished_at = NULL,"
                " progress = NULL, error = NULL, log_excerpt = NULL, lease_owner = NULL, lease_expires = NULL,"
                " message = 're-run requested: waiting for a worker', updated_at = ?"
                " WHERE id = ? AND state IN ('FINISHED', 'FAILED')", (stamp, id))
            if cursor.rowcount == 1:
                self._log_submission(db, owner, id, "rerun", stamp, quota)  # QuotaExceeded rolls the update back
        return cursor.rowcount == 1

    def delete(self, id: str) -> bool:
        """Forget a submission that no worker is scoring; False if it is RUNNING or unknown."""
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM submissions WHERE id = ? AND state <> 'RUNNING'", (id,))
        return cursor.rowcount == 1

    def restore(self, job: Job) -> bool:
        """Insert a submission record kept elsewhere (``hub_sync``: a restarted Space rebuilding its queue);
        False if its id or content is already here. A RUNNING record comes back PENDING: its worker is gone."""
        record = asdict(job)
        if job.state == "RUNNING":
            record.update(state="PENDING", progress=None, message="restored from the Hub: waiting for a worker")
        record.update(lease_owner=None, lease_expires=None, updated_at=now_iso())
        names = ", ".join(record)
        with self._transaction() as db:
            cursor = db.execute(f"INSERT OR IGNORE INTO submissions ({names}) VALUES ({', '.join('?' * len(record))})",
                                tuple(record.values()))
        return cursor.rowcount == 1

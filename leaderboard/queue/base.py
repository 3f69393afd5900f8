"""The queue's semantics, written once for every backend: states, leases, attempts, takeover, the quota.

States: PENDING -> RUNNING -> FINISHED | FAILED. A worker claims a job with a
lease and renews it while it works; a job whose lease expired (its worker
died) is claimed again by the next worker, up to ``max_attempts`` times, then
FAILED with that reason, unless ``has_results`` says the last attempt wrote its
results before it died: then the job is FINISHED (results are written before
the state changes, so a kill between the two must not throw them away). The
results may be in a Hub repo (a worker on another machine): ``has_results`` is
asked outside any transaction, never while the queue's write lock is held.

Lease expiries and heartbeats are times of the database's clock (``DB_NOW`` in
the SQL below, which each backend turns into its own clock expression), never of
the calling process: workers on machines whose clocks disagree share one clock,
so a worker whose clock runs ahead cannot take over a healthy job. Quotas count
``submission_log`` rows, which deleting a submission does not touch, in the
transaction that inserts (``_transaction(owner)``: a backend serialises
the transactions of one owner there).

One image set is one row of the leaderboard: each submission's image sets (the images it answers each dataset
with, by digest: ``benchmark.submission.validate.image_set``) are kept with it (table ``image_sets``), and ``add``
refuses a submission holding one a submission the queue knows holds (``SameImages``), checked in the inserting
transaction, which is serialised with every other holding the same image set (``_transaction(owner, *image_sets)``).
A record restored or rebuilt, or made before image sets were kept, has its own recorded where it is restored, or
by the intake from its kept files (``restore``, ``without_image_sets``, ``record_image_sets``); ``same_images``
finds the oldest other submission holding one.

Each claim issues a lease token (``Job.lease``), kept with the job until its next request (a re-run), and the
worker writes it into the results it writes (run.json ``lease``): results answer a job only when they carry a
lease the queue issued for its current request (``refusal``), so results that someone else put in a results repo
never answer a job, nor mark one FINISHED; while a worker holds the job, only its own lease counts (an expired
lease is refused once another worker took the job over). The tokens never leave the queue but in the run.json of
results written under them: a requests mirror (``hub_sync``) keeps their sha256 (``Job.issued_hashes``), and a
queue restored from it (``restore``) or rebuilt from the store's folders knows the leases it issued by those
(``lease_hashes``), and the number of the request they answer (``requests_before``), and takes under them only
results whose seal was checked (``refusal``: a token is public once the run.json carrying it is). A deleted submission is remembered (``deleted``), so that a mirror can remove its results
wherever they were published. What a rebuilt queue needs (owners, lease hashes, deletions) a backend whose file
can be damaged also appends to a ledger beside it (``_note``: SQLite's ``.ledger``; ``queue_rebuild``).

The SQL is written once, with ``?`` placeholders and ``DB_NOW``; a backend
(``sqlite``, ``postgres``) supplies connections, transactions, the clock and
row locking (``_skip_locked``), so the two cannot drift apart.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from benchmark.errors import CultureLensError
from benchmark.run_record import RunRecord
import leaderboard.queue.listing as listing
from leaderboard.queue.listing import ListedJob


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _times(n: int) -> str:
    return f"{n} time" + ("s" if n != 1 else "")


_HASH = re.compile(r"[0-9a-f]{64}")  # a lease token's sha256, as a mirror keeps it
UNKNOWN = "the queue knows no such submission (never submitted here, or deleted)"  # ``refusal``'s one that may pass


def lease_hash(token: str) -> str:
    """The sha256 of a lease token: what a requests mirror keeps of it (the token itself never leaves the queue)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Request:
    """What results must answer to count as a submission's scores: its current request to be scored (``number``:
    1 for the submission, one more per re-run), the state of its job, the lease tokens the queue issued for that
    request (one per claim: a worker that takes over a dead one's job gets its own, the newest last), the sha256 of
    those issued before the queue was restored or rebuilt (``hashes``), and whether a worker holds the job now
    (``held``: RUNNING, its lease not expired: the newest token's claimant)."""

    number: int
    state: str
    leases: tuple[str, ...]
    hashes: tuple[str, ...] = ()
    held: bool = False


def refusal(run: RunRecord | None, request: Request | None, *, sealed: bool = False,
            holder: str | None = None) -> str | None:
    """Why results whose run.json is ``run`` do not answer a submission's current ``request``
    (``Queue.request``; None: the queue knows no such submission); None when they do.

    They answer it when they carry (run.json ``lease``) a lease the queue issued for that request: a token it holds,
    or one whose sha256 a restored or rebuilt queue holds, and then only when a caller checked their seal
    (``sealed``: ``leaderboard.seal``; a lease token is public once its run.json is). Either way they must record that
    request's number (``request``; results written before requests were recorded answer the first), which the seal
    covers: the run before a re-run never answers the re-run, whatever leases a record lists. While a worker holds the
    job, only its lease answers: results of an expired lease are refused (the worker itself, ``holder``, may take an
    earlier attempt's results as its own). A job FINISHED with no lease recorded (finished by a version before leases,
    or restored from a record that kept none) takes only sealed results. Any other job takes none: results nobody
    scored under its lease (another submission's, a forged folder, a re-run's run before) never answer it, nor mark
    it FINISHED."""
    if run is None:
        return "it has no run.json holding a run record"
    if request is None:
        return UNKNOWN
    lease = run.lease
    if not request.leases and not request.hashes:
        if request.state == "FINISHED":
            return None if sealed else ("its job holds no lease (finished before leases, or restored without them): "
                                        "only sealed results answer it")
        return (f"the queue has issued no lease for its request {request.number} ({request.state}): no worker "
                "has scored it")
    if lease not in request.leases:
        if lease is None or lease_hash(lease) not in request.hashes:
            carried = "carries none" if lease is None else "carries another"
            return f"its run.json {carried} of the leases the queue issued for its request {request.number}"
        if not sealed:
            return ("its lease is known by its sha256 only (a queue restored or rebuilt): only sealed results answer "
                    "it")
    if run.request_answered != request.number:
        return f"it answers request {run.request_answered}, not its current request {request.number}"
    if request.held and request.leases and lease != request.leases[-1] and holder != request.leases[-1]:
        return "its lease expired and another worker holds the job now: only the holder's results answer it"
    return None


class QuotaExceeded(CultureLensError):
    """``owner`` already made ``used`` submissions (re-runs included) in the window; the limit is ``limit``."""

    def __init__(self, owner: str, used: int, limit: int):
        super().__init__(f"{owner} has made {used} submissions (re-runs included) in the quota window; "
                         f"the quota is {limit}")
        self.owner, self.used, self.limit = owner, used, limit


class DuplicateSubmission(CultureLensError, ValueError):
    """The same content was submitted before; ``existing`` is that submission."""

    def __init__(self, existing: Job, message: str | None = None):
        super().__init__(message or f"identical to submission {existing.id} ({existing.state}, {existing.created_at})")
        self.existing = existing


class SameImages(DuplicateSubmission):
    """The images of ``image_set`` were submitted before, in ``existing`` (the oldest submission holding them)."""

    def __init__(self, existing: Job, image_set: str):
        super().__init__(existing, f"the same images as submission {existing.id} ({existing.model!r}, "
                                   f"{existing.state}, {existing.created_at})")
        self.image_set = image_set


class QueueUnavailable(CultureLensError):
    """The queue's database cannot be reached or set up; the message names it (without a password) and why."""


DATASETS_JOINED = " + "  # a suite submission's ``dataset``: its parts' datasets (repo:config:split), joined


class QueueDamaged(CultureLensError):
    """SQLite found the queue's file damaged while it was in use; the service keeps it aside and rebuilds the queue
    from the store's folders (``Store.rebuild_damaged_queue``), as at start; a worker waits meanwhile."""


WORKER_SILENT = 30
"""Seconds without a heartbeat after which a worker no longer counts as running (an idle one beats every 2 s, one
loading weights every 10 s)."""


def alive(worker: dict) -> bool:
    """Whether a worker row of ``Queue.workers`` is a worker that takes jobs now: heard from within
    ``WORKER_SILENT`` seconds, neither stopped nor unable to score anything."""
    return worker["state"] not in ("stopped", "unavailable") and worker["age"] < WORKER_SILENT


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
    lease_tokens: str | None = None  # the tokens issued for the current request, space-separated (never mirrored)
    lease_hashes: str | None = None  # sha256 of tokens issued before a restore or rebuild, space-separated
    requests_before: int = 0  # requests to score it made before a restore or rebuild (the record's ``request``)

    @property
    def lease(self) -> str | None:
        """The token of the newest claim: the one the worker that claimed this job writes into its results."""
        return self.lease_tokens.split()[-1] if self.lease_tokens else None

    @property
    def issued_hashes(self) -> str | None:
        """The sha256 of every lease issued for the current request, held or restored: what a mirror keeps."""
        hashes = [*(self.lease_hashes or "").split(), *map(lease_hash, (self.lease_tokens or "").split())]
        return " ".join(dict.fromkeys(hashes)) or None

    @property
    def datasets(self) -> list[str]:
        """The datasets it answers: one, or a suite submission's parts' (``DATASETS_JOINED``)."""
        return self.dataset.split(DATASETS_JOINED)


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> dict[str, Any] | None: ...

    def fetchall(self) -> list[dict[str, Any]]: ...


class Session(Protocol):
    """A backend's connection: runs the shared SQL (``?`` placeholders, ``DB_NOW``); rows are dicts."""

    def execute(self, sql: str, params: tuple = ()) -> Cursor: ...


class Queue:
    """Submission records, safe to use from many processes (and, for PostgreSQL, many machines).

    ``leaderboard.queue.open_queue(location)`` opens the backend ``location`` names: a ``postgresql://`` URL
    gives ``postgres.PostgresQueue``, a path ``sqlite.SQLiteQueue``. ``damaged``: where an SQLite file was kept if it was found damaged at start (this process then created an
    empty queue in its place, and the caller should rebuild what it can); None normally, and always for
    PostgreSQL. ``errors``: the exceptions the backend's database raises (a caller that must survive a
    database fault catches these). ``location``: where it lives, safe to show (no password).
    """

    errors: tuple[type[Exception], ...] = ()
    damaged: Path | None = None
    ledger: Path | None = None  # where ``_note`` keeps what a rebuild needs (SQLite's file; none for PostgreSQL)
    seal_note: Callable[[dict], dict] | None = None
    """How ``_note`` seals a ledger line: a store gives its keys' (``leaderboard.seal.ledger_line``), as a rebuild trusts
    only sealed lines; None writes them unsealed (a queue opened outside a store, which no rebuild reads)."""
    location: str
    _integrity_errors: tuple[type[Exception], ...] = ()
    _skip_locked = ""  # appended to a SELECT that picks rows to change: lock them, skip those others hold

    def __init__(self, location: str | Path, *, max_attempts: int = 3,
                 has_results: Callable[[str], bool] = lambda id: False):
        """``has_results(id)``: whether results answering submission ``id``'s newest request exist (a store's
        ``Results.answered``, through ``Store``); asked outside any transaction, as it may read a repo."""
        self.max_attempts = max_attempts
        self.has_results = has_results

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # --- what a backend supplies -----------------------------------------------------------------------------
    def _connect(self) -> AbstractContextManager[Session]:
        """A session whose statements each commit at once (reads)."""
        raise NotImplementedError

    def _transaction(self, lock: str | None = None) -> AbstractContextManager[Session]:
        """A session in one transaction, committed at the end, rolled back on an exception; ``lock``: a key
        (the owner) whose transactions must run one after another (the quota is counted, then logged)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connections kept open (none for SQLite)."""

    def _note(self, event: str, id: str, **facts) -> None:
        """Keep, outside the database, a fact a queue rebuilt from the store's folders needs (``queue_rebuild``):
        ``add`` (the owner, when), ``lease`` (a token's sha256), ``rerun``, ``delete``, ``restore`` (owner, lease
        hashes). Called after the change is committed. Nothing for a backend whose data cannot be damaged under it
        (PostgreSQL keeps its own data safe)."""

    def replace_damaged(self) -> Path | None:
        """While the queue is in use: when its file is damaged, keep it aside and start an empty queue, as at start
        (``damaged``); returns where it was kept, None when nothing was (always, for PostgreSQL, which keeps its own
        data safe)."""
        return None

    # --- submissions ------------------------------------------------------------------------------------------
    def add(self, *, id: str, content_hash: str, owner: str, model: str, model_id: str | None,
            model_revision: str | None, dataset: str, quota: tuple[int, str] | None = None,
            image_sets: Sequence[str] = ()) -> Job:
        """Enqueue a validated submission as PENDING, with its ``image_sets``; raise DuplicateSubmission for known
        content, and SameImages (one) when a submission the queue knows holds one of its image sets.

        ``quota=(limit, since_iso)``: in the same transaction, QuotaExceeded if ``owner`` already has ``limit``
        entries in the submission log since ``since_iso`` (so concurrent uploads cannot all pass the check)."""
        stamp = now_iso()
        try:
            with self._transaction(owner, *image_sets) as db:
                row = db.execute("SELECT * FROM submissions WHERE content_hash = ?", (content_hash,)).fetchone()
                if row:
                    raise DuplicateSubmission(Job(**row))
                if same := self._same_images(db, image_sets):
                    raise SameImages(*same)
                self._log_submission(db, owner, id, "submission", stamp, quota)
                db.execute(
                    "INSERT INTO submissions (id, content_hash, owner, model, model_id, model_revision, dataset,"
                    " state, created_at, updated_at, message) VALUES (?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, ?)",
                    (id, content_hash, owner, model, model_id, model_revision, dataset, stamp, stamp,
                     "waiting for a worker"))
                self._keep_image_sets(db, id, image_sets)
        except self._integrity_errors:
            # Another owner's transaction inserted the same content between our check and our insert.
            if existing := self.find_by_hash(content_hash):
                raise DuplicateSubmission(existing) from None
            raise
        self._note("add", id, owner=owner, created_at=stamp)
        return self.get(id)

    @staticmethod
    def _log_submission(db: Session, owner: str, id: str, kind: str, stamp: str,
                        quota: tuple[int, str] | None) -> None:
        """Count ``owner``'s logged submissions against ``quota`` (QuotaExceeded), then log this one."""
        if quota is not None:
            limit, since = quota
            used = db.execute("SELECT count(*) AS n FROM submission_log WHERE owner = ? AND at >= ?",
                              (owner, since)).fetchone()["n"]
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

    # --- image sets: one row each ------------------------------------------------------------------------------
    def same_images(self, image_sets: Sequence[str], before: Job | None = None) -> tuple[Job, str] | None:
        """The oldest submission the queue knows (any state) that holds one of ``image_sets``, with that image set;
        ``before``: only one submitted before that job (by time, then id), itself excepted. None when there is none."""
        with self._connect() as db:
            return self._same_images(db, image_sets, before)

    @staticmethod
    def _same_images(db: Session, image_sets: Sequence[str], before: Job | None = None) -> tuple[Job, str] | None:
        if not image_sets:
            return None
        sql = ("SELECT s.*, i.image_set AS held FROM image_sets i JOIN submissions s ON s.id = i.submission"
               f" WHERE i.image_set IN ({', '.join('?' * len(image_sets))})")
        params: tuple = tuple(image_sets)
        if before is not None:
            sql += " AND (s.created_at < ? OR (s.created_at = ? AND s.id < ?))"
            params += (before.created_at, before.created_at, before.id)
        row = db.execute(sql + " ORDER BY s.created_at, s.id LIMIT 1", params).fetchone()
        if row is None:
            return None
        held = row.pop("held")
        return Job(**row), held

    def without_image_sets(self) -> list[str]:
        """The submissions the queue keeps no image set for (queued before image sets were kept, or restored without
        their files), oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT id FROM submissions s WHERE NOT EXISTS (SELECT 1 FROM image_sets i WHERE"
                              " i.submission = s.id) ORDER BY created_at, id").fetchall()
        return [row["id"] for row in rows]

    def record_image_sets(self, id: str, image_sets: Sequence[str]) -> None:
        """Keep submission ``id``'s image sets where the queue has not (a record restored, rebuilt, or made before
        image sets were kept)."""
        with self._transaction() as db:
            self._keep_image_sets(db, id, image_sets)

    @staticmethod
    def _keep_image_sets(db: Session, id: str, image_sets: Sequence[str]) -> None:
        for image_set in dict.fromkeys(image_sets):
            db.execute("INSERT INTO image_sets (image_set, submission) VALUES (?, ?) ON CONFLICT DO NOTHING",
                       (image_set, id))

    _REQUESTS = ("SELECT id, state, lease_tokens, lease_hashes, requests_before, (state = 'RUNNING' AND lease_expires"
                 " >= DB_NOW) AS held, (SELECT count(*) FROM submission_log l WHERE l.submission = s.id) AS logged"
                 " FROM submissions s")

    @staticmethod
    def _request(row: dict) -> Request:
        # A record restored or rebuilt brings the number of the requests made before (its log is not here); 1 at least
        return Request(max(1, (row["requests_before"] or 0) + row["logged"]), row["state"],
                       tuple((row["lease_tokens"] or "").split()), tuple((row["lease_hashes"] or "").split()),
                       bool(row["held"]))

    def request(self, id: str) -> Request | None:
        """Submission ``id``'s current request to be scored (``Request``: what results must answer); None for an
        unknown id."""
        with self._connect() as db:
            row = db.execute(self._REQUESTS + " WHERE id = ?", (id,)).fetchone()
        return self._request(row) if row else None

    def requests(self) -> dict[str, Request]:
        """Every submission's current request, in one read (a release's submissions checked at each refresh)."""
        with self._connect() as db:
            return {row["id"]: self._request(row) for row in db.execute(self._REQUESTS).fetchall()}

    def request_number(self, id: str) -> int | None:
        """How many times submission ``id`` has been asked to be scored: 1 for its submission, one more for each
        re-run (its entries in the submission log, after those a restored or rebuilt record says were made before it
        came here, ``Job.requests_before``); None for an unknown id. A worker records it in the results (run.json ``request``), so a re-run's results
        are told from those of the run before, however soon the re-run came."""
        request = self.request(id)
        return request.number if request else None

    def answered_by(self, id: str, run: RunRecord | None, *, sealed: bool = False,
                    holder: str | None = None) -> bool:
        """Whether results whose run.json is ``run`` answer submission ``id``'s current request (``refusal``)."""
        return refusal(run, self.request(id), sealed=sealed, holder=holder) is None

    def deleted(self) -> set[str]:
        """The submissions their owners deleted (``delete``): their results go wherever they were published."""
        return set(self.deletions())

    def deletions(self) -> dict[str, str]:
        """Each deleted submission and when it was deleted (ISO 8601): what a requests mirror keeps of them."""
        with self._connect() as db:
            return {row["submission"]: row["at"] for row in db.execute("SELECT submission, at FROM deletions")}

    def remember_deleted(self, deletions: dict[str, str]) -> int:
        """Record deletions kept elsewhere (a requests mirror, a ledger: ``deletions``), so that a restored or rebuilt
        queue still knows them; the records of those submissions, if any, go. Returns how many were new."""
        added = 0
        with self._transaction() as db:
            for submission, at in deletions.items():
                if db.execute("DELETE FROM submissions WHERE id = ? AND state <> 'RUNNING'", (submission,)).rowcount:
                    db.execute("DELETE FROM image_sets WHERE submission = ?", (submission,))
                added += db.execute("INSERT INTO deletions (submission, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                    (submission, at)).rowcount
        return added

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

    def listing(self, limit: int) -> list[ListedJob]:
        """The newest ``limit`` submissions as a page shows them (``listing.ListedJob``: bounded and typed)."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {listing.JOB_COLUMNS} FROM submissions ORDER BY created_at DESC, id DESC"
                              " LIMIT ?", (limit,)).fetchall()
        return [ListedJob.read(row) for row in rows]

    def listed(self, id: str) -> ListedJob | None:
        """Submission ``id`` as a page shows it (``listing.ListedJob``), or None."""
        with self._connect() as db:
            row = db.execute(f"SELECT {listing.JOB_COLUMNS} FROM submissions WHERE id = ?", (id,)).fetchone()
        return ListedJob.read(row) if row else None

    # --- workers: claims, leases, outcomes --------------------------------------------------------------------
    def claim(self, worker: str, lease_seconds: float) -> Job | None:
        """Take the oldest PENDING job, or a RUNNING one whose worker's lease expired, with a new lease token
        (``Job.lease`` of the job returned: the worker writes it into its results). A job whose lease expired on
        its last attempt is not taken: it ends FINISHED if that attempt wrote its results, else FAILED."""
        self._end_exhausted()
        stamp = now_iso()
        token = secrets.token_hex(16)
        with self._transaction() as db:
            row = db.execute(
                "SELECT id FROM submissions WHERE state = 'PENDING' OR (state = 'RUNNING' AND lease_expires < DB_NOW"
                " AND attempts < ?) ORDER BY created_at, id LIMIT 1" + self._skip_locked,
                (self.max_attempts,)).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE submissions SET state = 'RUNNING', lease_owner = ?, lease_expires = DB_NOW + ?,"
                " attempts = attempts + 1, started_at = COALESCE(started_at, ?), updated_at = ?, progress = 0,"
                " message = ?, error = NULL, lease_tokens = trim(COALESCE(lease_tokens, '') || ' ' || ?)"
                " WHERE id = ?",
                (worker, lease_seconds, stamp, stamp, f"claimed by worker {worker}", token, row["id"]))
        self._note("lease", row["id"], hash=lease_hash(token))
        return self.get(row["id"])

    def _end_exhausted(self) -> None:
        """End the jobs whose worker died on their last attempt: FINISHED if that attempt wrote its results, else
        FAILED. ``has_results`` is asked between transactions (it may download from a repo: the queue's write lock
        must not wait on the network); each job is then ended in a transaction only if it is still as it was seen
        (RUNNING, its lease expired, the same attempt), so a job another claimer ended, or whose worker came back,
        is left alone."""
        with self._connect() as db:
            exhausted = db.execute("SELECT id, attempts FROM submissions WHERE state = 'RUNNING' AND lease_expires"
                                   " < DB_NOW AND attempts >= ?", (self.max_attempts,)).fetchall()
        for row in exhausted:
            done = self.has_results(row["id"])
            stamp = now_iso()
            unchanged = " WHERE id = ? AND state = 'RUNNING' AND lease_expires < DB_NOW AND attempts = ?"
            with self._transaction() as db:
                if done:
                    db.execute("UPDATE submissions SET state = 'FINISHED', finished_at = ?, updated_at = ?,"
                               " lease_owner = NULL, progress = 1, message = 'scored (the last attempt wrote its"
                               " results, then stopped)'" + unchanged, (stamp, stamp, row["id"], row["attempts"]))
                else:
                    db.execute("UPDATE submissions SET state = 'FAILED', finished_at = ?, updated_at = ?,"
                               " lease_owner = NULL, error = ?" + unchanged,
                               (stamp, stamp, f"the worker stopped {_times(row['attempts'])} while scoring this"
                                " submission (crash or out of memory?); a maintainer can re-run it", row["id"],
                                row["attempts"]))

    def _update_own(self, id: str, worker: str, assignments: str, values: tuple) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                f"UPDATE submissions SET {assignments}, updated_at = ? WHERE id = ? AND state = 'RUNNING'"
                " AND lease_owner = ?", (*values, now_iso(), id, worker))
        return cursor.rowcount == 1

    def heartbeat(self, id: str, worker: str, lease_seconds: float, progress: float | None = None,
                  message: str | None = None) -> bool:
        """Renew the lease (and report progress); False if this worker no longer holds the job."""
        return self._update_own(id, worker, "lease_expires = DB_NOW + ?, progress = COALESCE(?, progress),"
                                " message = COALESCE(?, message)", (lease_seconds, progress, message))

    def finish(self, id: str, worker: str, message: str) -> bool:
        stamp = now_iso()
        return self._update_own(id, worker, "state = 'FINISHED', finished_at = ?, progress = 1, message = ?,"
                                " lease_owner = NULL", (stamp, message))

    def fail(self, id: str, worker: str, error: str, log_excerpt: str | None = None) -> bool:
        stamp = now_iso()
        return self._update_own(id, worker, "state = 'FAILED', finished_at = ?, error = ?, log_excerpt = ?,"
                                " lease_owner = NULL", (stamp, error, log_excerpt))

    def settle(self, id: str, message: str) -> bool:
        """PENDING -> FINISHED for a job whose sealed results answering it were just taken (a record restored
        FINISHED before its results arrived: ``hub_sync``); the caller checked them. False in any other state (a
        worker claimed it meanwhile: it finds them)."""
        stamp = now_iso()
        with self._transaction() as db:
            cursor = db.execute("UPDATE submissions SET state = 'FINISHED', finished_at = ?, progress = 1, message = ?,"
                                " updated_at = ? WHERE id = ? AND state = 'PENDING'", (stamp, message, stamp, id))
        return cursor.rowcount == 1

    def expire_leases(self, worker: str, reason: str) -> int:
        """Expire the leases ``worker`` holds (its process is known to be gone), so the next claim takes its
        jobs over at once rather than after the lease; the attempt still counts. Returns how many."""
        with self._transaction() as db:
            cursor = db.execute("UPDATE submissions SET lease_expires = 0, message = ?, updated_at = ?"
                                " WHERE state = 'RUNNING' AND lease_owner = ?", (reason, now_iso(), worker))
        return cursor.rowcount

    # --- what the app shows about workers -------------------------------------------------------------------
    def set_worker(self, worker: str, state: str, message: str | None = None) -> None:
        """Record what a worker is doing, so the app can say why a job waits."""
        with self._transaction() as db:
            db.execute("INSERT INTO workers (id, state, message, heartbeat) VALUES (?, ?, ?, DB_NOW) ON CONFLICT (id)"
                       " DO UPDATE SET state = excluded.state, message = excluded.message,"
                       " heartbeat = excluded.heartbeat", (worker, state, message))

    def workers(self, within_seconds: float = 120) -> list[dict]:
        """Workers seen in the last ``within_seconds`` (the newest ``listing.ROWS``), by id: ``id``, ``state``,
        ``message`` (bounded text), ``heartbeat`` (a number or ``INVALID``) and ``age``, seconds since it (one that
        takes jobs now: ``alive``)."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {listing.columns('id', 'state', 'message', 'heartbeat')}, DB_NOW - heartbeat"
                              " AS age FROM workers WHERE heartbeat > DB_NOW - ? ORDER BY heartbeat DESC LIMIT ?",
                              (within_seconds, listing.ROWS)).fetchall()
        return sorted(({**{name: listing.text(row[name]) for name in ("id", "state", "message")},
                        "heartbeat": listing.number(row["heartbeat"]), "age": row["age"]} for row in rows),
                      key=lambda worker: worker["id"])

    def set_worker_tracks(self, worker: str, tracks: dict[str, str | None]) -> None:
        """Record, per track, whether ``worker`` scores it (None) or why not, so the app can say which tracks are
        on; the records of workers silent for a day are dropped."""
        with self._transaction() as db:
            db.execute("DELETE FROM worker_tracks WHERE worker = ? OR worker NOT IN (SELECT id FROM workers WHERE "
                       "heartbeat > DB_NOW - 86400)", (worker,))
            for track, reason in tracks.items():
                db.execute("INSERT INTO worker_tracks (worker, track, reason) VALUES (?, ?, ?)",
                           (worker, track, reason))

    def worker_tracks(self, workers: list[str]) -> dict[str, dict[str, str | None]]:
        """What ``set_worker_tracks`` recorded for these workers: worker -> track -> None (scored) or why not
        (bounded text; at most ``listing.TRACK_ROWS`` rows)."""
        if not workers:
            return {}
        with self._connect() as db:
            rows = db.execute(f"SELECT {listing.columns('worker', 'track', 'reason')} FROM worker_tracks WHERE worker"
                              f" IN ({', '.join('?' * len(workers))}) ORDER BY worker, track LIMIT ?",
                              (*workers, listing.TRACK_ROWS)).fetchall()
        found: dict[str, dict[str, str | None]] = {}
        for row in rows:
            found.setdefault(listing.text(row["worker"]), {})[listing.text(row["track"])] = listing.text(row["reason"])
        return found

    def set_supervisor(self, id: str, state: str, *, pid: int | None, restarts: int, last_exit: str | None,
                       retry_in: float | None = None, message: str | None = None) -> None:
        """Record what a worker supervisor (``leaderboard.supervisor``) sees: its worker's state, pid, restarts."""
        with self._transaction() as db:
            db.execute("INSERT INTO supervisors (id, state, pid, restarts, last_exit, retry_at, message, heartbeat)"
                       " VALUES (?, ?, ?, ?, ?, DB_NOW + ?, ?, DB_NOW) ON CONFLICT (id) DO UPDATE SET"
                       " state = excluded.state, pid = excluded.pid, restarts = excluded.restarts,"
                       " last_exit = excluded.last_exit, retry_at = excluded.retry_at, message = excluded.message,"
                       " heartbeat = excluded.heartbeat", (id, state, pid, restarts, last_exit, retry_in, message))

    def supervisors(self, within_seconds: float = 60) -> list[dict]:
        """Supervisors seen in the last ``within_seconds`` (the newest ``listing.ROWS``), by id: ``id``, ``state``,
        ``last_exit``, ``message`` (bounded text), ``pid``, ``restarts`` (whole numbers or ``INVALID``), ``age`` and
        ``retry_in`` (seconds, or None)."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {listing.columns('id', 'state', 'pid', 'restarts', 'last_exit', 'message')},"
                              " DB_NOW - heartbeat AS age, retry_at - DB_NOW AS retry_in FROM supervisors"
                              " WHERE heartbeat > DB_NOW - ? ORDER BY heartbeat DESC LIMIT ?",
                              (within_seconds, listing.ROWS)).fetchall()
        return sorted(({**{name: listing.text(row[name]) for name in ("id", "state", "last_exit", "message")},
                        **{name: listing.number(row[name], low=0, whole=True) for name in ("pid", "restarts")},
                        "age": row["age"], "retry_in": row["retry_in"]} for row in rows),
                      key=lambda supervisor: supervisor["id"])

    def add_notice(self, message: str) -> None:
        """Record something the operator must hear about (the queue was rebuilt); the Queue tab shows it."""
        with self._transaction() as db:
            db.execute("INSERT INTO notices (at, message) VALUES (DB_NOW, ?)", (message,))

    def notices(self, within_seconds: float = 7 * 24 * 3600) -> list[str]:
        """Notices of the last ``within_seconds`` (the newest ``listing.ROWS``, bounded text), oldest first."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {listing.columns('message')} FROM notices WHERE at > DB_NOW - ?"
                              " ORDER BY at DESC LIMIT ?", (within_seconds, listing.ROWS)).fetchall()
        return [listing.text(row["message"]) for row in reversed(rows)]

    # --- owner operations (checked by the store against the signed-in user) -------------------------------
    def count_since(self, owner: str, since_iso: str) -> int:
        """Submissions and re-runs ``owner`` made at or after ``since_iso``, deleted ones included (the quota)."""
        with self._connect() as db:
            return db.execute("SELECT count(*) AS n FROM submission_log WHERE owner = ? AND at >= ?",
                              (owner, since_iso)).fetchone()["n"]

    def record_attempt(self, owner: str) -> int:
        """Note that ``owner`` sent an upload to validate, accepted or not (the quota on validation work);
        returns the attempt's number, for ``forget_attempt``."""
        with self._transaction() as db:
            return db.execute("INSERT INTO attempts (owner, at) VALUES (?, ?) RETURNING rowid AS n",
                              (owner, now_iso())).fetchone()["n"]

    def forget_attempt(self, attempt: int) -> None:
        """Remove an attempt that failed through the server's fault (it must not count against the user)."""
        with self._transaction() as db:
            db.execute("DELETE FROM attempts WHERE rowid = ?", (attempt,))

    def count_attempts_since(self, owner: str, since_iso: str) -> int:
        """Uploads ``owner`` sent for validation at or after ``since_iso``, rejected ones included."""
        with self._connect() as db:
            return db.execute("SELECT count(*) AS n FROM attempts WHERE owner = ? AND at >= ?",
                              (owner, since_iso)).fetchone()["n"]

    def find_model(self, model_id: str, model_revision: str, dataset: str) -> Job | None:
        """A live (not FAILED) submission of the same model revision for the same dataset, alone or as a part of a
        suite submission (``Job.datasets``), if any."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM submissions WHERE model_id = ? AND model_revision = ? AND state <> "
                              "'FAILED' ORDER BY created_at", (model_id, model_revision)).fetchall()
        return next((job for job in (Job(**row) for row in rows) if dataset in job.datasets), None)

    def requeue(self, id: str, owner: str, quota: tuple[int, str] | None = None) -> bool:
        """FINISHED or FAILED -> PENDING with a fresh attempt count (a re-run by ``owner``, logged against the
        quota like a submission: QuotaExceeded, see ``add``); False in any other state."""
        stamp = now_iso()
        with self._transaction(owner) as db:
            cursor = db.execute(
                "UPDATE submissions SET state = 'PENDING', attempts = 0, started_at = NULL, finished_at = NULL,"
                " progress = NULL, error = NULL, log_excerpt = NULL, lease_owner = NULL, lease_expires = NULL,"
                " lease_tokens = NULL, lease_hashes = NULL, message = 're-run requested: waiting for a worker',"
                " updated_at = ? WHERE id = ? AND state IN ('FINISHED', 'FAILED')", (stamp, id))
            if cursor.rowcount == 1:
                self._log_submission(db, owner, id, "rerun", stamp, quota)  # QuotaExceeded rolls the update back
        if cursor.rowcount == 1:
            self._note("rerun", id)
        return cursor.rowcount == 1

    def delete(self, id: str) -> bool:
        """Forget a submission that no worker is scoring, remembering that it was deleted (``deleted``); False if it
        is RUNNING or unknown."""
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM submissions WHERE id = ? AND state <> 'RUNNING'", (id,))
            if cursor.rowcount == 1:
                db.execute("DELETE FROM image_sets WHERE submission = ?", (id,))
                db.execute("INSERT INTO deletions (submission, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                           (id, now_iso()))
        if cursor.rowcount == 1:
            self._note("delete", id)
        return cursor.rowcount == 1

    def restore(self, job: Job, image_sets: Sequence[str] = ()) -> bool:
        """Insert a submission record kept elsewhere (``hub_sync``: a restarted Space rebuilding its queue; or rebuilt
        from the folders, ``queue_rebuild``), with its ``image_sets`` (computed from its validated files, never taken
        from the record); False if its id or content is already here. A RUNNING record comes back PENDING: its worker
        is gone. No token comes with it (a token is never taken from outside the queue), only the sha256 of the
        leases issued for its request (``lease_hashes``: 64 hex digits each, anything else dropped) and that
        request's number (``requests_before``: results must answer it, ``refusal``). A record that holds the images
        of another is restored as it was: the worker refuses to score the later of the two."""
        record = asdict(job)
        if job.state == "RUNNING":
            record.update(state="PENDING", progress=None, message="restored from the Hub: waiting for a worker")
        hashes = [h for h in (job.lease_hashes or "").split() if _HASH.fullmatch(h)]
        record.update(lease_owner=None, lease_expires=None, lease_tokens=None, lease_hashes=" ".join(hashes) or None,
                      updated_at=now_iso())
        names = ", ".join(record)
        with self._transaction() as db:
            cursor = db.execute(f"INSERT INTO submissions ({names}) VALUES ({', '.join('?' * len(record))})"
                                " ON CONFLICT DO NOTHING", tuple(record.values()))
            if cursor.rowcount == 1:
                self._keep_image_sets(db, job.id, image_sets)
        if cursor.rowcount == 1:
            self._note("restore", job.id, owner=job.owner, created_at=job.created_at, hashes=hashes,
                       request=max(1, job.requests_before))
        return cursor.rowcount == 1

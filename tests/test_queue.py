"""The queue's contract, run against both backends (SQLite and a real PostgreSQL server): what every caller relies
on. Submissions and duplicates, the quota counted in the inserting transaction (also under racing threads), claim
order and claims racing, leases renewed by heartbeats, takeover after expiry, attempts and max_attempts, results
written by a dead worker, outcomes only from the lease holder, expiring leases, re-runs, deletes, restores,
workers, supervisors and notices, and leases timed by the database's clock rather than the caller's."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from benchmark.run_record import RunRecord
from leaderboard.queue import DuplicateSubmission, Job, Queue, QuotaExceeded, SameImages, listing
from leaderboard.queue import open_queue as open_backend  # the fixture below is named open_queue
from leaderboard.queue.postgres import PostgresQueue
from leaderboard.queue.sqlite import SQLiteQueue
from tests.helpers import until


def _run(fields: dict) -> RunRecord:
    """A results folder's run record holding ``fields``."""
    return RunRecord.model_validate(fields)


@pytest.fixture()
def location(store_queue, tmp_path):
    """Where each backend's queue lives: an SQLite file, or a fresh PostgreSQL database."""
    return store_queue or tmp_path / "q.sqlite"


@pytest.fixture()
def open_queue(location):
    """``leaderboard.queue.open_queue(location, **options)``, closed after the test."""
    opened = []

    def open_(**options) -> Queue:
        opened.append(open_backend(location, **options))
        return opened[-1]
    yield open_
    for queue in opened:
        queue.close()


@pytest.fixture()
def queue(open_queue) -> Queue:
    return open_queue()


def run_sql(queue: Queue, statement: str) -> list[tuple]:
    """Run ``statement`` (``DB_NOW``: the database's clock) outside the queue's code, as another client would."""
    statement = statement.replace("DB_NOW", queue.now_sql)
    if isinstance(queue, PostgresQueue):
        import psycopg

        with psycopg.connect(queue._pool.url, autocommit=True) as db:
            cursor = db.execute(statement)
            return cursor.fetchall() if cursor.description else []
    with sqlite3.connect(queue.path) as db:
        return db.execute(statement).fetchall()


def db_now(queue: Queue) -> float:
    return run_sql(queue, "SELECT DB_NOW")[0][0]


def _add(queue: Queue, id: str, content_hash: str | None = None, owner: str = "alice", quota=None, **fields):
    return queue.add(id=id, content_hash=content_hash or f"sha256:{id}", owner=owner, model=f"model {id}",
                     model_id=fields.get("model_id"), model_revision=fields.get("model_revision"),
                     dataset="culturelens/cube-1k:cube_1k:test", quota=quota, image_sets=fields.get("image_sets", ()))


def _race(n: int, action) -> list:
    """Run ``action(i)`` in ``n`` threads released together; each one's result or exception."""
    start = threading.Barrier(n)
    outcomes: list = [None] * n

    def run(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = action(i)
        except Exception as error:  # noqa: BLE001 - the test inspects what each thread got
            outcomes[i] = error
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_the_location_picks_the_backend(tmp_path, postgres_url):
    sqlite, postgres = open_backend(tmp_path / "q.sqlite"), open_backend(postgres_url)
    assert type(sqlite) is SQLiteQueue and isinstance(sqlite, Queue) and sqlite.location == str(tmp_path / "q.sqlite")
    assert type(postgres) is PostgresQueue and isinstance(postgres, Queue) and postgres.location == postgres_url
    postgres.close()


# --- submissions --------------------------------------------------------------------------------------------
def test_a_submission_is_queued_pending_and_found_by_id_and_content(queue):
    job = _add(queue, "a", model_id="org/m", model_revision="r1")
    assert job == queue.get("a") == queue.find_by_hash("sha256:a")
    assert (job.state, job.owner, job.attempts, job.message) == ("PENDING", "alice", 0, "waiting for a worker")
    assert job.started_at is None and job.lease_owner is None and job.created_at == job.updated_at
    assert queue.get("nope") is None and queue.find_by_hash("sha256:nope") is None
    assert queue.find_model("org/m", "r1", job.dataset) == job and queue.find_model("org/m", "r2", job.dataset) is None
    _add(queue, "b")
    assert [j.id for j in queue.jobs()] == ["b", "a"]  # newest first (same second: by id)


def test_the_same_content_cannot_be_queued_twice(queue):
    _add(queue, "a", "sha256:same")
    with pytest.raises(DuplicateSubmission, match="identical to submission a") as raised:
        _add(queue, "b", "sha256:same", owner="bob")
    assert raised.value.existing.id == "a"
    assert [j.id for j in queue.jobs()] == ["a"] and queue.count_since("bob", "1970") == 0


def test_the_same_content_sent_at_once_by_two_owners_is_queued_once(queue):
    outcomes = _race(6, lambda i: _add(queue, f"s{i}", "sha256:same", owner=f"owner-{i}").id)
    assert sum(isinstance(o, str) for o in outcomes) == 1, outcomes
    assert all(isinstance(o, DuplicateSubmission) for o in outcomes if not isinstance(o, str)), outcomes
    assert len(queue.jobs()) == 1


def test_curation_a_submission_holding_an_image_set_the_queue_knows_is_refused_naming_the_oldest_holder(queue):
    """One image set, one row (issue 49, finding 10): b's content differs (another model name), but one of its image
    sets is a's; refused naming a, in the inserting transaction, with nothing logged against its owner. Deleting a
    frees the image set."""
    first = _add(queue, "a", image_sets=["sha256:set-1", "sha256:set-2"])
    with pytest.raises(SameImages) as raised:
        _add(queue, "b", owner="bob", image_sets=["sha256:set-9", "sha256:set-2"])
    assert raised.value.existing == first and raised.value.image_set == "sha256:set-2"
    assert str(raised.value) == f"the same images as submission a ('model a', PENDING, {first.created_at})"
    assert [j.id for j in queue.jobs()] == ["a"] and queue.count_since("bob", "1970") == 0
    assert queue.same_images(["sha256:set-1"]) == (first, "sha256:set-1")
    assert queue.same_images(["sha256:set-9"]) is None and queue.same_images([]) is None
    assert queue.delete("a")
    assert queue.same_images(["sha256:set-2"]) is None
    assert _add(queue, "b", owner="bob", image_sets=["sha256:set-9", "sha256:set-2"]).id == "b"


def test_curation_the_same_images_sent_at_once_by_two_owners_are_queued_once(queue):
    """Six uploads of one image set under six names (six contents), racing: one is queued, five refused naming it."""
    outcomes = _race(6, lambda i: _add(queue, f"s{i}", owner=f"owner-{i}", image_sets=["sha256:same-images"]).id)
    queued = [o for o in outcomes if isinstance(o, str)]
    assert len(queued) == 1, outcomes
    assert all(isinstance(o, SameImages) and o.existing.id == queued[0] for o in outcomes if o not in queued), outcomes
    assert [j.id for j in queue.jobs()] == queued


def test_curation_records_restored_without_the_check_are_told_apart_by_age(queue):
    """Two records holding one image set, restored as they were (a requests repo kept both): each keeps its image
    sets, and only the younger finds an older holder (what the worker refuses to score); a re-run's own images
    never count against it."""
    old = Job(id="old", content_hash="sha256:old", owner="ada", model="Original", model_id=None, model_revision=None,
              dataset="d", state="FINISHED", created_at="2026-11-20T00:00:00+00:00", started_at=None,
              finished_at=None, updated_at="2026-11-20T00:00:00+00:00", attempts=1, lease_owner=None,
              lease_expires=None, progress=1, message="scored", error=None, log_excerpt=None)
    young = replace(old, id="young", content_hash="sha256:young", model="Copy", state="PENDING",
                    created_at="2026-11-21T00:00:00+00:00")
    same_second = replace(young, id="twin", content_hash="sha256:twin", created_at=old.created_at)
    assert queue.restore(young, ["sha256:set"]) and queue.restore(old, ["sha256:set"])
    queue.record_image_sets("twin-unrestored", ["sha256:set"])  # a record the queue does not hold counts for nothing
    assert queue.restore(same_second)
    queue.record_image_sets("twin", ["sha256:set"])  # a record restored without them, as a worker records them
    assert queue.same_images(["sha256:set"], before=queue.get("young")) == (queue.get("old"), "sha256:set")
    assert queue.same_images(["sha256:set"], before=queue.get("twin")) == (queue.get("old"), "sha256:set")
    assert queue.same_images(["sha256:set"], before=queue.get("old")) is None
    assert queue.same_images(["sha256:set"]) == (queue.get("old"), "sha256:set")


def test_the_quota_is_checked_in_the_inserting_transaction(queue):
    for n in range(2):
        _add(queue, f"a{n}", quota=(2, "1970"))
    with pytest.raises(QuotaExceeded, match="alice has made 2 submissions .* the quota is 2") as raised:
        _add(queue, "a2", quota=(2, "1970"))
    assert (raised.value.used, raised.value.limit) == (2, 2)
    assert queue.get("a2") is None and queue.count_since("alice", "1970") == 2  # refused: nothing logged
    _add(queue, "b0", owner="bob", quota=(2, "1970"))  # another owner's quota is their own
    _add(queue, "a3", quota=(2, "2999"))  # a window that starts later holds none of alice's
    assert queue.count_since("alice", "1970") == 3


def test_uploads_racing_one_owners_quota_cannot_pass_it_together(queue):
    outcomes = _race(12, lambda i: _add(queue, f"r{i}", quota=(3, "1970")).id)
    accepted = [o for o in outcomes if isinstance(o, str)]
    assert len(accepted) == 3, outcomes
    assert all(isinstance(o, QuotaExceeded) and o.used == 3 for o in outcomes if not isinstance(o, str)), outcomes
    assert sorted(j.id for j in queue.jobs()) == sorted(accepted) and queue.count_since("alice", "1970") == 3


def test_upload_attempts_are_counted_and_a_server_fault_forgotten(queue):
    first = queue.record_attempt("alice")
    second = queue.record_attempt("alice")
    queue.record_attempt("bob")
    assert first != second and queue.count_attempts_since("alice", "1970") == 2
    queue.forget_attempt(second)
    assert queue.count_attempts_since("alice", "1970") == 1 and queue.count_attempts_since("bob", "1970") == 1
    assert queue.count_attempts_since("alice", "2999") == 0


# --- claims and leases ----------------------------------------------------------------------------------------
def test_jobs_are_claimed_oldest_first_and_only_once(queue):
    _add(queue, "a")
    _add(queue, "b")
    first, second = queue.claim("w1", 60), queue.claim("w2", 60)
    assert (first.id, second.id) == ("a", "b")
    assert first.state == "RUNNING" and first.lease_owner == "w1" and first.attempts == 1
    assert first.progress == 0 and first.message == "claimed by worker w1" and first.started_at
    assert queue.claim("w3", 60) is None


def test_workers_claiming_at_once_never_share_a_job(queue):
    for n in range(12):
        _add(queue, f"j{n:02d}")

    def claim_all(i: int) -> list[str]:
        taken = []
        while job := queue.claim(f"w{i}", 60):
            taken.append(job.id)
        return taken
    outcomes = _race(6, claim_all)
    claimed = [id for taken in outcomes for id in taken]
    assert sorted(claimed) == [f"j{n:02d}" for n in range(12)], outcomes  # each job once, none lost
    assert all(queue.get(id).lease_owner == f"w{i}" and queue.get(id).attempts == 1
               for i, taken in enumerate(outcomes) for id in taken)


def test_finish_and_fail_record_state_reason_and_timestamps(queue):
    _add(queue, "a")
    _add(queue, "b")
    queue.claim("w", 60)
    queue.claim("w", 60)
    assert queue.finish("a", "w", "scored 12 images")
    assert queue.fail("b", "w", "scoring failed: ValueError: bad", "Traceback ...")
    a, b = queue.get("a"), queue.get("b")
    assert a.state == "FINISHED" and a.finished_at and a.progress == 1 and a.message == "scored 12 images"
    assert a.lease_owner is None and b.lease_owner is None
    assert b.state == "FAILED" and b.error == "scoring failed: ValueError: bad" and b.log_excerpt == "Traceback ..."


def test_only_the_lease_holder_reports_on_a_job(queue):
    _add(queue, "a")
    held = queue.claim("holder", 60)
    assert not queue.heartbeat("a", "other", 60, 0.9, "hijacked")
    assert not queue.finish("a", "other", "done by another") and not queue.fail("a", "other", "failed by another")
    assert queue.get("a") == held
    assert not queue.finish("nope", "holder", "unknown job")
    assert queue.finish("a", "holder", "done") and not queue.fail("a", "holder", "too late: not RUNNING")
    assert queue.get("a").state == "FINISHED"


def test_heartbeat_extends_the_lease_and_reports_progress(queue):
    _add(queue, "a")
    queue.claim("w", lease_seconds=0.2)
    assert queue.heartbeat("a", "w", 60, 0.5, "embedded 6/12 images")
    time.sleep(0.3)
    assert queue.claim("other", 60) is None
    job = queue.get("a")
    assert job.progress == 0.5 and job.message == "embedded 6/12 images"
    assert queue.heartbeat("a", "w", 60)  # no progress given: the last one stays
    assert queue.get("a").progress == 0.5 and queue.get("a").message == "embedded 6/12 images"


def test_an_expired_lease_is_taken_over_and_the_old_worker_is_shut_out(queue):
    _add(queue, "a")
    queue.claim("crashed", lease_seconds=0.05)
    time.sleep(0.1)
    taken = queue.claim("rescuer", 60)
    assert taken.id == "a" and taken.lease_owner == "rescuer" and taken.attempts == 2
    assert not queue.heartbeat("a", "crashed", 60), "the presumed-dead worker must learn it lost the job"
    assert not queue.finish("a", "crashed", "late")
    assert queue.finish("a", "rescuer", "done") and queue.get("a").state == "FINISHED"


def test_a_job_that_keeps_crashing_its_workers_fails_with_that_reason(open_queue):
    queue = open_queue(max_attempts=2)
    _add(queue, "a")
    for attempt in (1, 2):
        job = queue.claim("w", lease_seconds=0.01)
        assert (job.id, job.attempts) == ("a", attempt)
        time.sleep(0.05)
    assert queue.claim("w", 60) is None
    job = queue.get("a")
    assert job.state == "FAILED" and job.lease_owner is None and job.finished_at
    assert job.error == ("the worker stopped 2 times while scoring this submission (crash or out of memory?); a "
                         "maintainer can re-run it")


def test_a_last_attempt_that_wrote_its_results_before_dying_ends_finished(open_queue):
    written = {"a"}  # results on disk for "a" only: its last attempt died between writing them and finish()
    queue = open_queue(max_attempts=1, has_results=written.__contains__)
    _add(queue, "a")
    _add(queue, "b")
    assert {queue.claim("w", lease_seconds=0.01).id, queue.claim("w", lease_seconds=0.01).id} == {"a", "b"}
    time.sleep(0.05)
    assert queue.claim("w", 60) is None
    a, b = queue.get("a"), queue.get("b")
    assert a.state == "FINISHED" and a.error is None and a.progress == 1
    assert a.message == "scored (the last attempt wrote its results, then stopped)"
    assert b.state == "FAILED" and "stopped 1 time " in b.error


def test_expiring_a_dead_workers_leases_frees_its_jobs_at_once(queue):
    _add(queue, "a")
    _add(queue, "b")
    queue.claim("dead", 3600)
    queue.claim("alive", 3600)
    assert queue.expire_leases("dead", "its worker stopped (killed by SIGKILL)") == 1
    assert queue.get("a").message == "its worker stopped (killed by SIGKILL)" and queue.get("a").state == "RUNNING"
    taken = queue.claim("next", 60)
    assert (taken.id, taken.attempts, taken.lease_owner) == ("a", 2, "next")  # the attempt counted
    assert queue.get("b").lease_owner == "alive" and queue.expire_leases("dead", "again") == 0


# --- owner operations -------------------------------------------------------------------------------------------
def test_a_rerun_starts_afresh_and_counts_against_the_quota(queue):
    _add(queue, "a", quota=(2, "1970"))
    assert not queue.requeue("a", "alice")  # PENDING: not re-runnable
    queue.claim("w", 60)
    assert not queue.requeue("a", "alice")  # RUNNING neither
    queue.fail("a", "w", "boom", "trace")
    assert queue.requeue("a", "alice", quota=(2, "1970"))
    job = queue.get("a")
    assert (job.state, job.attempts, job.error, job.log_excerpt, job.started_at, job.lease_expires) == (
        "PENDING", 0, None, None, None, None)
    assert job.message == "re-run requested: waiting for a worker" and queue.count_since("alice", "1970") == 2
    queue.claim("w", 60)
    queue.finish("a", "w", "done")
    with pytest.raises(QuotaExceeded, match="the quota is 2"):
        queue.requeue("a", "alice", quota=(2, "1970"))
    assert queue.get("a").state == "FINISHED"  # refused: rolled back


def test_results_answer_a_submission_s_newest_request_only(queue):
    """A re-run is the submission's second request: results of the first (run.json ``request`` 1, or no
    ``request`` at all, as written before runs recorded it) no longer answer it, however soon it came. And results
    answer a job only under a lease the queue issued for its current request (issue 30): never a pending job's,
    nor an unknown id's."""
    _add(queue, "a")
    assert queue.request_number("a") == 1 and queue.request_number("nope") is None
    assert not queue.answered_by("a", _run({"submission_id": "a", "request": 1}))  # PENDING: no lease issued yet
    lease = queue.claim("w", 60).lease
    first = {"submission_id": "a", "request": 1, "lease": lease}
    assert queue.answered_by("a", _run(first)) and queue.answered_by("a", _run({"submission_id": "a", "lease": lease}))
    assert not queue.answered_by("a", _run({"submission_id": "a", "request": 1}))  # a request number alone
    assert not queue.answered_by("a", _run({**first, "lease": "0" * 32}))
    assert not queue.answered_by("a", None)  # no run.json: no results
    queue.finish("a", "w", "done")
    assert queue.requeue("a", "alice")  # within the same second as the submission
    assert queue.request_number("a") == 2
    assert not queue.answered_by("a", _run(first)) and not queue.answered_by("a", _run({**first, "request": 2}))
    again = queue.claim("w", 60).lease
    assert queue.answered_by("a", _run({"submission_id": "a", "request": 2, "lease": again}))
    assert not queue.answered_by("a", _run({**first, "request": 2}))  # the run before's lease
    assert not queue.answered_by("gone", _run(first))  # a submission the queue does not know: never


def test_each_claim_issues_a_lease_that_stays_valid_until_the_next_request(open_queue):
    queue = open_queue(max_attempts=3)
    _add(queue, "a")
    _add(queue, "b")
    first = queue.claim("w1", 60)
    assert first.id == "a" and len(first.lease) == 32 and queue.get("a").lease == first.lease
    run_sql(queue, "UPDATE submissions SET lease_expires = DB_NOW - 1 WHERE id = 'a'")  # w1 died: its lease ran out
    second = queue.claim("w2", 60)
    assert second.id == "a" and second.lease != first.lease
    ran = {t: _run({"submission_id": "a", "request": 1, "lease": t}) for t in (first.lease, second.lease)}
    # While w2 holds the job, only its lease answers it: w1's expired one is refused (issue 40), but w2 itself may
    # take w1's results as its own (w1 was killed after writing them: they are not scored again).
    assert queue.answered_by("a", ran[second.lease]) and not queue.answered_by("a", ran[first.lease])
    assert queue.answered_by("a", ran[first.lease], holder=second.lease)
    assert not queue.answered_by("a", ran[first.lease], holder=first.lease)
    other = queue.claim("w3", 60)
    assert other.id == "b" and not queue.answered_by("a", _run({"submission_id": "a", "lease": other.lease}))
    run_sql(queue, "UPDATE submissions SET lease_expires = DB_NOW - 1 WHERE id = 'a'")  # w2 died too
    # Nobody holds it: results written under either claim answer it (the takeover rule's last attempt).
    assert all(queue.answered_by("a", run) for run in ran.values())
    queue.finish("a", "w2", "done")
    assert queue.requeue("a", "alice") and queue.get("a").lease is None  # the re-run's leases are new ones


def test_a_job_finished_with_no_lease_recorded_takes_only_sealed_results(queue):
    """Records restored from a requests repo that kept no lease, or finished by an earlier version, carry no lease: a
    FINISHED one takes results without a token only when their seal was checked (issue 40), a pending one none."""
    restored = Job(id="f", content_hash="sha256:f", owner="ada", model="m", model_id=None, model_revision=None,
                   dataset="d", state="FINISHED", created_at="2026-11-20T00:00:00+00:00", started_at=None,
                   finished_at="2026-11-20T00:05:00+00:00", updated_at="2026-11-20T00:05:00+00:00", attempts=1,
                   lease_owner=None, lease_expires=None, progress=1, message="scored", error=None, log_excerpt=None,
                   lease_tokens="a-token-from-outside")
    assert queue.restore(restored) and queue.restore(replace(restored, id="p", content_hash="sha256:p",
                                                             state="PENDING"))
    assert queue.get("f").lease_tokens is None  # a token is never taken from outside the queue
    assert queue.answered_by("f", _run({"submission_id": "f", "request": 3}), sealed=True)
    assert not queue.answered_by("f", _run({"submission_id": "f", "request": 3}))  # unsealed
    assert not queue.answered_by("p", _run({"submission_id": "p"}), sealed=True)
    assert not queue.answered_by("p", _run({"submission_id": "p", "lease": "a-token-from-outside"}), sealed=True)


def test_a_restored_record_knows_its_leases_by_their_sha256_only(queue):
    """A requests mirror keeps the sha256 of each lease issued (``Job.issued_hashes``), never a token: a queue
    restored from it takes results under those leases, and no others (issue 40)."""
    from leaderboard.queue.base import lease_hash

    _add(queue, "a")
    token = queue.claim("w", 60).lease
    queue.finish("a", "w", "done")
    mirrored = queue.get("a")
    assert mirrored.issued_hashes == lease_hash(token) == hashlib.sha256(token.encode()).hexdigest()
    run_sql(queue, "DELETE FROM submissions WHERE id = 'a'")  # the queue lost it: restored from the mirror
    restored = queue
    assert restored.restore(replace(mirrored, lease_tokens=None, lease_hashes=mirrored.issued_hashes))
    assert restored.get("a").lease_tokens is None and restored.get("a").lease_hashes == lease_hash(token)
    # A lease known by its sha256 answers with a seal only (its token is public once its run.json is, issue 48).
    assert restored.answered_by("a", _run({"submission_id": "a", "lease": token}), sealed=True)
    assert not restored.answered_by("a", _run({"submission_id": "a", "lease": token}))
    assert not restored.answered_by("a", _run({"submission_id": "a", "lease": "0" * 32}), sealed=True)
    assert not restored.answered_by("a", _run({"submission_id": "a"}), sealed=True)  # no lease: the job has some


def test_a_queue_made_before_leases_gets_them(open_queue):
    queue = open_queue()
    _add(queue, "old")
    queue.claim("w", 60)
    queue.finish("old", "w", "done")
    _add(queue, "waiting")
    for column in ("lease_tokens", "lease_hashes"):  # as an earlier version made it
        run_sql(queue, f"ALTER TABLE submissions DROP COLUMN {column}")
    queue.close()

    upgraded = open_queue()
    assert upgraded.get("old").lease_tokens is None and upgraded.get("old").lease_hashes is None
    assert upgraded.answered_by("old", _run({"submission_id": "old", "request": 1}), sealed=True)  # before leases
    job = upgraded.claim("w", 60)
    assert job.id == "waiting"
    assert upgraded.answered_by("waiting", _run({"submission_id": "waiting", "lease": job.lease}))


def test_a_job_not_being_scored_can_be_deleted_and_its_quota_stays_used(queue):
    _add(queue, "a")
    _add(queue, "b")
    queue.claim("w", 60)
    assert not queue.delete("a")  # RUNNING
    assert queue.delete("b") and not queue.delete("b") and not queue.delete("nope")
    assert [j.id for j in queue.jobs()] == ["a"] and queue.count_since("alice", "1970") == 2
    assert queue.deleted() == {"b"}  # remembered: its results go wherever they were published


def test_a_restored_record_comes_back_once_and_a_running_one_pending(queue):
    job = Job(id="r", content_hash="sha256:r", owner="ada", model="m", model_id=None, model_revision=None,
              dataset="d", state="RUNNING", created_at="2026-11-20T00:00:00+00:00", started_at="2026-11-20T00:01:00+00:00",
              finished_at=None, updated_at="2026-11-20T00:02:00+00:00", attempts=1, lease_owner="gone-worker",
              lease_expires=123.0, progress=0.4, message="embedding", error=None, log_excerpt=None)
    assert queue.restore(job)
    restored = queue.get("r")
    assert (restored.state, restored.lease_owner, restored.lease_expires, restored.progress) == (
        "PENDING", None, None, None)
    assert restored.created_at == job.created_at and restored.attempts == 1
    assert restored.message == "restored from the Hub: waiting for a worker"
    assert not queue.restore(job)  # the same id
    assert not queue.restore(replace(job, id="other"))  # the same content
    assert queue.restore(replace(job, id="f", content_hash="sha256:f", state="FINISHED"))
    assert queue.get("f").state == "FINISHED" and queue.claim("w", 60).id == "r"


def test_wait_returns_the_finished_job_or_times_out(queue):
    _add(queue, "a")
    with pytest.raises(TimeoutError, match="submission a not finished after 0 s"):
        queue.wait("a", timeout=0.2, poll=0.05)
    queue.claim("w", 60)
    threading.Timer(0.2, queue.finish, ("a", "w", "done")).start()
    assert queue.wait("a", timeout=10, poll=0.05).state == "FINISHED"


# --- workers, supervisors, notices -------------------------------------------------------------------------------
def test_workers_report_their_state(queue):
    queue.set_worker("w1", "unavailable", "cannot load CLIP ViT-B-32")
    assert queue.workers() == [{"id": "w1", "state": "unavailable", "message": "cannot load CLIP ViT-B-32",
                                "heartbeat": pytest.approx(time.time(), abs=5), "age": pytest.approx(0, abs=5)}]
    queue.set_worker("w1", "idle", None)
    queue.set_worker("w0", "scoring", "scoring a")
    assert [(w["id"], w["state"], w["message"]) for w in queue.workers()] == [("w0", "scoring", "scoring a"),
                                                                             ("w1", "idle", None)]
    run_sql(queue, "UPDATE workers SET heartbeat = DB_NOW - 200 WHERE id = 'w0'")
    assert [w["id"] for w in queue.workers(within_seconds=120)] == ["w1"]  # silent for 200 s: not listed


def test_workers_record_which_tracks_they_score_and_a_silent_workers_record_goes(queue):
    queue.set_worker("w1", "idle", "ready")
    queue.set_worker_tracks("w1", {"awareness": None, "diversity": "no artifact index\nno judge"})
    queue.set_worker("w2", "idle", "ready")
    queue.set_worker_tracks("w2", {"awareness": "no CLIP"})
    assert queue.worker_tracks(["w1", "w2", "w3"]) == {"w1": {"awareness": None,
                                                            "diversity": "no artifact index\nno judge"},
                                                     "w2": {"awareness": "no CLIP"}}
    queue.set_worker_tracks("w2", {"awareness": None})  # loaded again: its new word replaces the old
    assert queue.worker_tracks(["w2"]) == {"w2": {"awareness": None}}
    run_sql(queue, "UPDATE workers SET heartbeat = DB_NOW - 90000 WHERE id = 'w1'")  # silent for more than a day
    queue.set_worker_tracks("w2", {"awareness": None})
    assert queue.worker_tracks(["w1", "w2"]) == {"w2": {"awareness": None}}


def test_a_worker_loading_weights_for_long_stays_alive_in_the_table(queue):
    from leaderboard.worker import keep_alive

    with keep_alive(queue, "w1", "loading", "loading clip-vit-b-32", every=0.05):
        first = queue.workers()[0]["heartbeat"]
        # a slow download: the row is refreshed meanwhile, not left to look dead
        until(lambda: queue.workers()[0]["heartbeat"] > first, 60, "a heartbeat while the weights load")
        assert queue.workers()[0]["state"] == "loading"
    last = queue.workers()[0]["heartbeat"]
    time.sleep(0.15)
    assert queue.workers()[0]["heartbeat"] == last  # and no beat after the block


def test_supervisors_report_their_worker_and_when_they_retry(queue):
    queue.set_supervisor("s1", "running", pid=4242, restarts=0, last_exit=None)
    queue.set_supervisor("s1", "restarting", pid=None, restarts=1, last_exit="killed by SIGKILL", retry_in=30,
                         message="waiting 30 s before the next start")
    (row,) = queue.supervisors()
    assert {k: row[k] for k in ("id", "state", "pid", "restarts", "last_exit", "message")} == {
        "id": "s1", "state": "restarting", "pid": None, "restarts": 1, "last_exit": "killed by SIGKILL",
        "message": "waiting 30 s before the next start"}
    assert row["retry_in"] == pytest.approx(30, abs=2) and row["age"] == pytest.approx(0, abs=2)
    queue.set_supervisor("s1", "running", pid=4343, restarts=1, last_exit="killed by SIGKILL")
    assert queue.supervisors()[0]["retry_in"] is None and queue.supervisors()[0]["pid"] == 4343


def test_notices_are_listed_oldest_first_for_a_week(queue):
    queue.add_notice("first")
    queue.add_notice("second")
    assert queue.notices() == ["first", "second"]
    run_sql(queue, "UPDATE notices SET at = DB_NOW - 8 * 24 * 3600 WHERE message = 'first'")
    assert queue.notices() == ["second"]


def test_edge_queue_text_every_value_a_page_reads_is_cut_and_every_number_typed(queue):
    """Issue 48: queue clients write 5 MB into every text the Queue tab shows, numbers out of their range and, with
    SQL of their own, text where a number belongs (SQLite keeps it; PostgreSQL's columns refuse it, but take NaN).
    What the pages read (``listing``, ``listed``, ``workers``, ``supervisors``, ``notices``, ``worker_tracks``) gives
    each text as its first 4,000 characters and the cut marker, each such number as "invalid", and at most 50 rows of
    each list, the newest."""
    big = "x" * 5_000_000
    cut = "x" * listing.TEXT_CHARS + f"… (cut at {listing.TEXT_CHARS:,} characters)"
    queue.set_supervisor("s1", "running", pid=4242, restarts=-1, last_exit=big)
    queue.set_worker("w1", "scoring", big)
    queue.set_worker_tracks("w1", {"relevance": big})
    for n in range(listing.ROWS + 10):
        queue.add_notice(f"notice {n}")
        run_sql(queue, f"UPDATE notices SET at = DB_NOW - {1000 - n} WHERE message = 'notice {n}'")  # oldest first
    queue.add_notice(big)
    for sid in ("a", "b"):
        _add(queue, sid)
    queue.claim("w1", 60)
    queue.fail("a", "w1", big, big)
    queue.claim("w1", 60)
    assert queue.heartbeat("b", "w1", 60, 0.5, big)
    run_sql(queue, "UPDATE submissions SET attempts = -2 WHERE id = 'a'")
    if isinstance(queue, SQLiteQueue):  # SQL of another client: text in a number's column
        run_sql(queue, "UPDATE submissions SET progress = 'abc' WHERE id = 'b'")
        run_sql(queue, "UPDATE supervisors SET pid = 'abc'")
    else:
        run_sql(queue, "UPDATE submissions SET progress = 'NaN' WHERE id = 'b'")
        run_sql(queue, "UPDATE supervisors SET pid = -7")

    failed, running = sorted(queue.listing(10), key=lambda job: job.id)
    assert (failed.error, failed.log_excerpt, failed.attempts) == (cut, cut, "invalid")
    assert (running.message, running.progress, running.attempts) == (cut, "invalid", 1)
    assert queue.listed("a") == failed and queue.listed("nobody") is None and len(queue.listing(1)) == 1
    assert [w["message"] for w in queue.workers()] == [cut]
    assert queue.worker_tracks(["w1"]) == {"w1": {"relevance": cut}}
    (supervisor,) = queue.supervisors()
    assert (supervisor["last_exit"], supervisor["pid"], supervisor["restarts"]) == (cut, "invalid", "invalid")
    notices = queue.notices()
    assert notices == [f"notice {n}" for n in range(11, listing.ROWS + 10)] + [cut]  # the newest 50, oldest first


def test_queues_opened_at_once_on_one_location_share_it(open_queue):
    queues = _race(4, lambda i: open_queue())  # workers starting together: the schema is made once
    assert all(isinstance(q, Queue) for q in queues), queues
    _add(queues[0], "a")
    assert queues[3].get("a").state == "PENDING" and queues[1].claim("w", 60).id == "a"


# --- the database's clock ---------------------------------------------------------------------------------------
def test_lease_times_are_computed_by_the_database_not_the_caller(queue, monkeypatch):
    _add(queue, "a")
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this process's clock, an hour ahead
    before = db_now(queue)
    job = queue.claim("w", 60)
    after = db_now(queue)
    assert before + 60 <= job.lease_expires <= after + 60  # the database's now + 60, not the caller's
    queue.set_worker("w", "scoring")
    assert before <= queue.workers()[0]["heartbeat"] <= after + 1


def test_a_worker_whose_clock_runs_ahead_does_not_take_over_a_healthy_job(open_queue, monkeypatch):
    healthy = open_queue()
    _add(healthy, "a")
    assert healthy.claim("healthy", lease_seconds=60).id == "a"
    skewed = open_queue()  # another machine on the same queue, its clock two minutes ahead
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 120)
    assert skewed.claim("ahead", 60) is None
    assert healthy.heartbeat("a", "healthy", 60) and skewed.claim("ahead", 60) is None
    run_sql(healthy, "UPDATE submissions SET lease_expires = DB_NOW - 1")  # the lease runs out, by the database's clock
    taken = skewed.claim("ahead", 60)
    assert taken.id == "a" and taken.lease_owner == "ahead" and taken.attempts == 2


def test_a_worker_whose_clock_lags_still_shows_as_alive(queue, monkeypatch):
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() - 3600)  # the worker's machine, an hour behind
    queue.set_worker("behind", "idle", "ready")
    monkeypatch.setattr(time, "time", real_time)  # the app's machine
    (worker,) = queue.workers(within_seconds=120)
    assert worker["id"] == "behind" and worker["age"] < 5


def test_a_postgresql_server_whose_clock_differs_from_the_workers_times_every_lease(postgres_url):
    """The server's clock made an hour fast (its ``clock_timestamp()`` shadowed for this database): leases and
    heartbeats follow it, which they could not if any time came from this process."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("CREATE SCHEMA fast_clock")
        db.execute("CREATE FUNCTION fast_clock.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS "
                   "$$ SELECT pg_catalog.clock_timestamp() + interval '1 hour' $$")
        name = db.execute("SELECT current_database()").fetchone()[0]
        db.execute(f'ALTER DATABASE "{name}" SET search_path = public, fast_clock, pg_catalog')
    queue = open_backend(postgres_url)
    try:
        _add(queue, "a")
        job = queue.claim("w", 60)
        assert job.lease_expires == pytest.approx(time.time() + 3600 + 60, abs=5)
        queue.set_worker("w", "scoring", "scoring a")
        assert queue.workers()[0]["heartbeat"] == pytest.approx(time.time() + 3600, abs=5)
        assert queue.workers()[0]["age"] == pytest.approx(0, abs=5)  # alive, by the server's own clock
        assert queue.claim("other", 60) is None  # the hour-fast lease is not expired by the server's clock
    finally:
        queue.close()


def test_a_store_on_sqlite_never_loads_the_postgresql_driver():
    code = ("import sys, tempfile\nfrom leaderboard.store import Store\nStore(tempfile.mkdtemp()).queue.jobs()\n"
            "print('psycopg' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr

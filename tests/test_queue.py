"""Queue transitions: claim order, leases, takeover after a crash, attempts, duplicates."""

from __future__ import annotations

import time

import pytest

from leaderboard.queue import DuplicateSubmission, Queue


def _add(queue: Queue, id: str, content_hash: str | None = None):
    return queue.add(id=id, content_hash=content_hash or f"sha256:{id}", owner="alice", model=f"model {id}",
                     model_id=None, model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")


def test_jobs_are_claimed_oldest_first_and_only_once(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    _add(queue, "a")
    _add(queue, "b")
    first, second = queue.claim("w1", 60), queue.claim("w2", 60)
    assert (first.id, second.id) == ("a", "b")
    assert first.state == "RUNNING" and first.lease_owner == "w1" and first.attempts == 1
    assert queue.claim("w3", 60) is None


def test_finish_and_fail_record_state_reason_and_timestamps(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    _add(queue, "a")
    _add(queue, "b")
    queue.claim("w", 60)
    queue.claim("w", 60)
    assert queue.finish("a", "w", "scored 12 images")
    assert queue.fail("b", "w", "scoring failed: ValueError: bad", "Traceback ...")
    a, b = queue.get("a"), queue.get("b")
    assert a.state == "FINISHED" and a.finished_at and a.progress == 1 and a.message == "scored 12 images"
    assert b.state == "FAILED" and b.error == "scoring failed: ValueError: bad" and b.log_excerpt == "Traceback ..."


def test_an_expired_lease_is_taken_over_and_the_old_worker_is_shut_out(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    _add(queue, "a")
    queue.claim("crashed", lease_seconds=0.05)
    time.sleep(0.1)
    taken = queue.claim("rescuer", 60)
    assert taken.id == "a" and taken.lease_owner == "rescuer" and taken.attempts == 2
    assert not queue.heartbeat("a", "crashed", 60), "the presumed-dead worker must learn it lost the job"
    assert not queue.finish("a", "crashed", "late")
    assert queue.finish("a", "rescuer", "done") and queue.get("a").state == "FINISHED"


def test_a_job_that_keeps_crashing_its_workers_fails_with_that_reason(tmp_path):
    queue = Queue(tmp_path / "q.sqlite", max_attempts=2)
    _add(queue, "a")
    for _ in range(2):
        assert queue.claim("w", lease_seconds=0.01).id == "a"
        time.sleep(0.05)
    assert queue.claim("w", 60) is None
    job = queue.get("a")
    assert job.state == "FAILED" and "stopped 2 times" in job.error


def test_a_last_attempt_that_wrote_its_results_before_dying_ends_finished(tmp_path):
    written = {"a"}  # results on disk for "a" only: its last attempt died between writing them and finish()
    queue = Queue(tmp_path / "q.sqlite", max_attempts=1, has_results=written.__contains__)
    _add(queue, "a")
    _add(queue, "b")
    assert {queue.claim("w", lease_seconds=0.01).id, queue.claim("w", lease_seconds=0.01).id} == {"a", "b"}
    time.sleep(0.05)
    assert queue.claim("w", 60) is None
    a, b = queue.get("a"), queue.get("b")
    assert a.state == "FINISHED" and a.error is None and "wrote its results" in a.message
    assert b.state == "FAILED" and "stopped 1 time " in b.error


def test_heartbeat_extends_the_lease_and_reports_progress(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    _add(queue, "a")
    queue.claim("w", lease_seconds=0.2)
    assert queue.heartbeat("a", "w", 60, 0.5, "embedded 6/12 images")
    time.sleep(0.3)
    assert queue.claim("other", 60) is None
    job = queue.get("a")
    assert job.progress == 0.5 and job.message == "embedded 6/12 images"


def test_the_same_content_cannot_be_queued_twice(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    _add(queue, "a", "sha256:same")
    with pytest.raises(DuplicateSubmission, match="identical to submission a"):
        _add(queue, "b", "sha256:same")
    assert [j.id for j in queue.jobs()] == ["a"]


def test_workers_report_their_state(tmp_path):
    queue = Queue(tmp_path / "q.sqlite")
    queue.set_worker("w1", "unavailable", "cannot load CLIP ViT-B-32")
    assert queue.workers() == [{"id": "w1", "state": "unavailable", "message": "cannot load CLIP ViT-B-32",
                                "heartbeat": pytest.approx(time.time(), abs=5), "age": pytest.approx(0, abs=5)}]


def test_a_worker_loading_weights_for_long_stays_alive_in_the_table(tmp_path):
    from leaderboard.worker import keep_alive

    queue = Queue(tmp_path / "q.sqlite")
    with keep_alive(queue, "w1", "loading", "loading clip-vit-b-32", every=0.05):
        first = queue.workers()[0]["heartbeat"]
        time.sleep(0.3)  # a slow download: the row is refreshed meanwhile, not left to look dead
        assert queue.workers()[0]["heartbeat"] > first
        assert queue.workers()[0]["state"] == "loading"
    last = queue.workers()[0]["heartbeat"]
    time.sleep(0.15)
    assert queue.workers()[0]["heartbeat"] == last  # and no beat after the block

"""The worker supervisor of ``culturelens serve`` with real processes and signals: a killed worker is reaped and
restarted and its job finishes without restarting serve; a worker that cannot score is not restarted; a worker
whose serve process dies stops too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from culturelens.testing.soak import Soak, build_store, worker_env
from leaderboard.queue import Queue, open_queue
from leaderboard.store import Store
from leaderboard.supervisor import Supervisor
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from tests.helpers import culturelens_command, until

pytestmark = pytest.mark.slow  # starts, kills and restarts worker and serve processes

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie is not: it has exited, only its parent has not reaped it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _row(queue: Queue) -> dict | None:
    rows = queue.supervisors()
    return rows[0] if rows else None


def test_a_killed_worker_is_reaped_and_restarted(tmp_path):
    store = Store(tmp_path / "store")
    queue = store.queue
    supervisor = Supervisor([sys.executable, "-c", "import time; time.sleep(600)"], queue, first_delay=0.2, beat=0.2)
    supervisor.start()
    try:
        first = until(lambda: (r := _row(queue)) and r["state"] == "running" and r["pid"], 30, "a worker runs")
        os.kill(first, signal.SIGKILL)
        row = until(lambda: (r := _row(queue)) and r["state"] == "running" and r["pid"] != first and r, 30,
                     "a new worker runs")
        assert row["restarts"] == 1 and row["last_exit"] == "killed by SIGKILL"
        assert not _alive(first) and not Path(f"/proc/{first}").exists()  # reaped: not even a zombie
        assert "restarted 1 time, last exit: killed by SIGKILL" in "\n".join(QueueTab(Site(store, "ada")).status())
    finally:
        supervisor.stop()
    assert not _alive(row["pid"]) and queue.supervisors()[0]["state"] == "stopped"


def test_a_crashing_worker_is_restarted_with_growing_delays(tmp_path):
    queue = open_queue(tmp_path / "q.sqlite")
    supervisor = Supervisor([sys.executable, "-c", "raise SystemExit(1)"], queue, first_delay=1.0, max_delay=2.0,
                            beat=0.2)
    delays = []
    supervisor.start()
    try:
        def third_restart():
            row = _row(queue)
            if row and row["state"] == "restarting" and row["restarts"] not in [r for r, _ in delays]:
                delays.append((row["restarts"], row["message"]))
            return row and row["restarts"] >= 3
        until(third_restart, 60, "three restarts")
    finally:
        supervisor.stop()
    assert delays[:3] == [(0, "waiting 1 s before the next start"), (1, "waiting 2 s before the next start"),
                          (2, "waiting 2 s before the next start")]  # doubling, up to max_delay


def test_a_worker_that_cannot_score_is_not_restarted(tmp_path):
    store = Store(tmp_path / "store")
    queue = store.queue
    supervisor = Supervisor([sys.executable, "-c", "raise SystemExit(2)"], queue, first_delay=0.1, beat=0.2)
    supervisor.start()
    try:
        row = until(lambda: (r := _row(queue)) and r["state"] == "gave up" and r, 30, "the supervisor gives up")
        time.sleep(0.5)
        assert queue.supervisors()[0]["restarts"] == 0 and row["last_exit"] == "exit code 2"
        assert "supervisor gave up" in "\n".join(QueueTab(Site(store, "ada")).status())
    finally:
        supervisor.stop()


def test_a_real_worker_without_weights_exits_2_and_is_not_restarted(tmp_path):
    """`make run` offline: the worker, watching its parent on stdin, finds no backbone weights and says no metric
    can run; it must end with status 2 (not die at shutdown with SIGABRT, which reads as a crash and restarts it
    forever)."""
    store = Store(tmp_path / "store")
    supervisor = Supervisor(culturelens_command("worker", "--store", store.root, "--tracks", "awareness"),
                            store.queue, env=ENV, first_delay=0.1, beat=0.2)
    supervisor.start()
    try:
        row = until(lambda: (r := _row(store.queue)) and r["state"] == "gave up" and r, 120, "the supervisor gives up")
        assert row["last_exit"] == "exit code 2" and store.queue.supervisors()[0]["restarts"] == 0
    finally:
        supervisor.stop()


def _worker_command(store, backbones_file: Path, lease_seconds: float) -> list[str]:
    return culturelens_command("worker", "--store", store.root, "--backbones", backbones_file, "--lease-seconds",
                               lease_seconds, "--batch-size", "2", "--tracks", "awareness")


def test_the_job_of_a_killed_worker_finishes_without_restarting_serve(tmp_path, backbones_file, store_queue):
    """On each queue backend: the supervisor expires the leases of its worker in the queue the worker used."""
    logs = tmp_path / "logs"
    logs.mkdir()
    soak = Soak(build_store(tmp_path, store_queue), backbones_file, logs, queue=store_queue, seeds=24, size=96)
    queue = soak.store.queue
    job_id = soak.submit()
    # A lease far longer than the test: the job is taken over at once because the supervisor expires it.
    supervisor = Supervisor(_worker_command(soak.store, backbones_file, lease_seconds=3600), queue,
                            env=worker_env(store_queue), first_delay=0.5)
    supervisor.start()
    try:
        until(lambda: queue.get(job_id).state == "RUNNING", 240, "the worker claims the job")
        os.kill(_row(queue)["pid"], signal.SIGKILL)
        job = queue.wait(job_id, timeout=300, poll=0.2)
        assert job.state == "FINISHED" and job.attempts == 2, (job.state, job.error)
        assert _row(queue)["restarts"] == 1
    finally:
        supervisor.stop()


PARENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from leaderboard.queue import open_queue
    from leaderboard.supervisor import Supervisor

    Supervisor(sys.argv[2:], open_queue(Path(sys.argv[1])), beat=0.2).start()
    time.sleep(600)
""")


def test_a_worker_stops_when_its_serve_process_is_killed(tmp_path, backbones_file):
    store = build_store(tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(store.root / "queue.sqlite"),
                               *_worker_command(store, backbones_file, lease_seconds=60)], cwd=REPO, env=ENV)
    try:
        worker = until(lambda: (r := _row(store.queue)) and r["pid"], 60, "the supervisor starts a worker")
        until(lambda: store.queue.workers(), 240, "the worker reports in")  # it runs, past its imports
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        until(lambda: not _alive(worker), 10, "the orphaned worker stops")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_cannot_score_banner_goes_once_a_worker_scores(tmp_path):
    store = Store(tmp_path / "store")
    store.queue.set_worker("old", "unavailable", "no metric can run: no CLIP weights")
    views = QueueTab(Site(store, "ada"))
    assert "cannot score: no metric can run" in "\n".join(views.status())  # nothing scores: the reason matters
    store.queue.set_worker("new", "idle", "ready with clip_score")
    shown = "\n".join(views.status())
    assert "cannot score" not in shown and "ready with clip&#95;score" in shown  # the live worker, as plain text

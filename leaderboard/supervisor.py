"""Keeps ``culturelens serve``'s worker process running: starts it, reaps it, restarts it with backoff.

A thread in the serve process. Whenever the worker exits (a crash, an SQLite
``disk I/O error`` or a lost PostgreSQL connection, a full disk, the out-of-memory killer's SIGKILL), the
supervisor reaps it (no zombie), ends its entry in the queue's worker table
(the Queue tab never shows a worker scoring whose process is gone), expires the
leases it held so its job is taken over by the next worker at once rather than
after the lease (the attempt still counts: a job that keeps killing its worker
still ends FAILED), and
starts a new one after a delay that doubles from ``first_delay`` up to
``max_delay``, back to ``first_delay`` once a worker ran ``healthy_after``
seconds. Exit code 2 means "no metric can run" (``worker.main``): a new worker
would fail the same way, so the supervisor gives up and says so; the worker's
own row in the queue says why.

What it sees (running / restarting in N s / gave up, pid, restarts, last exit)
is recorded in the queue's ``supervisors`` table for the app's Queue tab.

Each worker gets ``--supervised ID``: its worker id, which the supervisor
needs to expire its leases, and the instruction to read stdin, a pipe this
process holds, and stop at end-of-file: when serve dies, even by SIGKILL, the
kernel closes the pipe and the worker does not live on as an orphan.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

from leaderboard.queue import Queue

log = logging.getLogger("culturelens.supervisor")

NO_METRIC_CAN_RUN = 2  # the worker's exit code when no metric can run (``leaderboard.worker.main``)


def describe_exit(returncode: int) -> str:
    """'exit code 1' or 'killed by SIGKILL'."""
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


class Supervisor(threading.Thread):
    """Runs ``command`` + ``--supervised ID`` as long as the supervisor runs; ``stop()`` ends both."""

    def __init__(self, command: list[str], queue: Queue, *, env: dict[str, str] | None = None,
                 first_delay: float = 1.0, max_delay: float = 300.0, healthy_after: float = 600.0,
                 beat: float = 10.0):
        super().__init__(daemon=True, name="worker-supervisor")
        self.command, self.queue, self.env = command, queue, env
        self.first_delay, self.max_delay, self.healthy_after, self.beat = first_delay, max_delay, healthy_after, beat
        self.id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.restarts = 0
        self.last_exit: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        delay = self.first_delay
        while not self._stop_event.is_set():
            started = time.monotonic()
            code = self._run_worker()
            if code is None:  # stopped by stop()
                return
            self.last_exit = describe_exit(code)
            if code == NO_METRIC_CAN_RUN:
                log.error("the worker cannot score (no metric can run); not restarting it")
                self._hold("gave up", "the worker exited because no metric can run (its line says why); fix the "
                                      "setup and restart serve")
                return
            if time.monotonic() - started >= self.healthy_after:
                delay = self.first_delay
            log.warning("the worker stopped (%s); restarting it in %.1f s", self.last_exit, delay)
            self._record("restarting", None, retry_in=delay, message=f"waiting {delay:g} s before the next start")
            if self._stop_event.wait(delay):
                return
            delay = min(delay * 2, self.max_delay)
            self.restarts += 1

    def _run_worker(self) -> int | None:
        """Start one worker and wait for it (recording a heartbeat every ``beat`` seconds); its exit code, or
        None when ``stop()`` was called (the worker is then stopped too)."""
        worker_id = f"{socket.gethostname()}-{os.getpid()}.{self.restarts}-{uuid.uuid4().hex[:6]}"
        # stdin: a pipe only this process holds open (close_fds keeps it out of other children).
        process = subprocess.Popen([*self.command, "--supervised", worker_id], stdin=subprocess.PIPE, env=self.env)
        self._record("running", process.pid)
        beaten = time.monotonic()
        while True:
            try:
                code = process.wait(timeout=0.2)  # waiting reaps it: no zombie
                break
            except subprocess.TimeoutExpired:
                pass
            if self._stop_event.is_set():
                _terminate(process)
                return None
            if time.monotonic() - beaten >= self.beat:
                self._record("running", process.pid)
                beaten = time.monotonic()
        try:
            # Its entry ends now: a killed worker cannot say so itself, and must not be shown scoring until it ages
            # out. Not one that cannot score: its entry says why, for the Queue tab.
            if code != NO_METRIC_CAN_RUN:
                self.queue.set_worker(worker_id, "stopped", f"its process ended ({describe_exit(code)})")
            taken = self.queue.expire_leases(worker_id, f"its worker stopped ({describe_exit(code)}): waiting for "
                                                        "another to take it over")
            if taken:
                log.warning("the worker held %d job(s); their leases are expired for the next worker", taken)
        except self.queue.errors as error:  # the entry ages out and the leases expire by themselves
            log.warning("could not record that the worker stopped: %s", error)
        return code

    def _hold(self, state: str, message: str) -> None:
        """Keep recording ``state`` until ``stop()``, so the app goes on showing it."""
        while True:
            self._record(state, None, message=message)
            if self._stop_event.wait(self.beat):
                return

    def _record(self, state: str, pid: int | None, *, retry_in: float | None = None,
                message: str | None = None) -> None:
        """Write the supervisor's row; a queue that cannot be written (the fault that stopped the worker, often)
        must not stop the supervisor."""
        try:
            self.queue.set_supervisor(self.id, state, pid=pid, restarts=self.restarts, last_exit=self.last_exit,
                                      retry_in=retry_in, message=message)
        except self.queue.errors as error:
            log.warning("could not record the supervisor's state (%s): %s", state, error)

    def stop(self) -> None:
        """Stop supervising, and the worker (SIGTERM, then SIGKILL after 30 s)."""
        self._stop_event.set()
        self.join()
        self._record("stopped", None)


def _terminate(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it is still running after ``timeout`` seconds; reaped either way."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

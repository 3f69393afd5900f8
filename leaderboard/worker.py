"""The scoring worker: claims queued submissions, runs the harness, writes results atomically.

Run it as its own process (``culturelens worker --store DIR``); ``culturelens
serve`` starts one next to the app. It scores a submission, or a suite submission part by part against the suite
its store serves (``benchmark.suite_scoring.score``: each part with its tracks, one results folder; the parts
missing named in run.json and in the job's message). On another machine, with the queue on
PostgreSQL and the submissions and results in Hub repos (``leaderboard.remote``),
it fetches each job's submission and publishes its results. The worker loads the
backbones its metrics need once, at start. A metric whose backbone or setting is missing is disabled,
and every result says so; if no metric can run (e.g. no CLIP weights offline)
the worker says why in the queue's worker table, so the app can tell people why
their submission waits, and exits with code 2 without touching any submission
(``leaderboard.supervisor`` does not restart it then: it would fail the same way). A queue whose SQLite file is
found damaged (``QueueDamaged``) is waited for, with growing pauses, while the service rebuilds it
(``leaderboard.queue_rebuild``): the worker neither exits nor is restarted every few seconds.

Each job is claimed with a lease token (``Job.lease``), written into its results' run.json (``lease``, beside
``request``), which the store seals (``Results.write``, ``leaderboard.seal``): only results carrying it answer the job
(``leaderboard.queue.base.refusal``). A job whose images for a dataset are those of a submission queued before it
(one image set is one row of the leaderboard) is failed unscored, naming that submission
(``Store.same_images_refusal``): the intake refuses such uploads, and this catches those that entered another way.

Under ``culturelens serve`` (``--supervised ID``) the worker's stdin is a pipe
from the serve process: when it reads end-of-file, serve has died (even by
SIGKILL, when no code of its own could run), and the worker stops as SIGTERM
would stop it, so no orphan keeps scoring. A pipe rather than Linux's
``PR_SET_PDEATHSIG``: it is portable, and the death signal fires when the
*thread* that started the child ends, which for a supervisor thread is not the
process's death.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from dataclasses import replace

from benchmark import harness, suite_scoring, tracks
from benchmark.atomic import leftovers
from benchmark.datasets.prompts import DatasetUnavailable
from benchmark.encoders.base import Backbone
from benchmark.errors import CultureLensError
from benchmark.metrics.base import Metric
from benchmark.scoring_options import ScoringOptions
from leaderboard.queue import Job, Queue, QueueDamaged
from leaderboard.remote import Remote
from leaderboard.store import Store

log = logging.getLogger("culturelens.worker")

DAMAGED_WAIT = (1.0, 60.0)  # seconds between looks at a damaged queue: the first, doubling up to the second


class LeaseLost(RuntimeError):
    """Another worker took the job over (this one was presumed dead). Not a ``CultureLensError``: a signal
    between the worker's heartbeat and its job loop, which drops the job quietly; no person ever reads it."""


class Worker:
    def __init__(self, store: Store, options: ScoringOptions, metrics: list[Metric],
                 unavailable: dict[str, str] | None = None, *, lease_seconds: float = 60, id: str | None = None,
                 remote: Remote | None = None):
        """``options``: how every submission is scored (backbones, device, batch size, DataLoader workers) and
        how ``metrics`` were built (``ScoringOptions.record``, in every result's run.json so that
        ``culturelens reproduce`` can redo the scoring). ``unavailable``: metrics that could not be built, with the
        reason. ``remote``: the repos of a worker that shares no disk with the app; its ``store`` must be built with
        its results repo (``Store(..., results_repo=remote.results)``), so that results there count, for this worker
        and for the queue's takeover rule."""
        if remote is not None and store.results_folders.repo is not remote.results:
            raise ValueError("a worker on another machine needs a store built with its results repo: "
                             "Store(..., results_repo=remote.results)")
        self.store, self.options, self.metrics = store, options, metrics
        self.remote = remote
        self.disabled: dict[str, str] = dict(unavailable or {})
        self.tracks_of = {m.info.name: m.info.track for m in metrics}  # kept: loading drops a disabled metric
        self.id = id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease_seconds = lease_seconds
        self.backbones: dict[str, Backbone] = {}

    @property
    def description(self) -> str:
        ready = ", ".join(m.info.name for m in self.metrics) or "no metric"
        off = self._disabled_text(" off")
        return f"ready with {ready}" + (f" ({off})" if off else "")

    def _disabled_text(self, suffix: str = "") -> str:
        """The disabled metrics grouped by reason (one missing backbone disables several metrics)."""
        by_reason: dict[str, list[str]] = {}
        for name, reason in sorted(self.disabled.items()):
            by_reason.setdefault(reason, []).append(name)
        return "; ".join(f"{', '.join(names)}{suffix}: {reason}" for reason, names in by_reason.items())

    def track_states(self) -> dict[str, str | None]:
        """Per registered track that has metrics: None when this worker scores it, else why not, in the words of
        its disabled metrics (a disabled name is a track, a track's headline metric, or a metric of this worker's;
        one reason a line) or, for a track it was not started with, that one."""
        states = {}
        for name, track in tracks.all_tracks().items():
            if track.metrics is None:
                continue
            if any(m.info.track == name for m in self.metrics):
                states[name] = None
                continue
            reasons = [reason for disabled, reason in self.disabled.items()
                       if name in (disabled, self.tracks_of.get(disabled)) or disabled == track.headline]
            states[name] = "\n".join(dict.fromkeys(reasons)) or "not among the tracks this worker was started with"
        return states

    def load(self) -> bool:
        """Load the backbones the metrics need; a metric whose backbone is missing is disabled (with its reason).
        Returns whether any metric can run."""
        needed = sorted({n.backbone for m in self.metrics for n in m.info.needs})
        with keep_alive(self.store.queue, self.id, "loading", f"loading {', '.join(needed)}"):
            self.backbones, self.metrics, disabled = harness.load_backbones(self.metrics, dict(self.options.registry),
                                                                            self.options.device)
        self.disabled.update(disabled)
        self.store.queue.set_worker_tracks(self.id, self.track_states())
        if not self.metrics:
            reasons = self._disabled_text()
            self.store.queue.set_worker(self.id, "unavailable", f"no metric can run: {reasons}")
            log.error("no metric can run: %s", reasons)
            return False
        self.store.queue.set_worker(self.id, "idle", self.description)
        return True

    def run(self, *, once: bool = False, poll_seconds: float = 2.0, stop: threading.Event | None = None) -> int:
        """Process jobs until ``stop`` is set (or the queue is empty, with ``once``); return jobs processed."""
        stop = stop or threading.Event()
        done, wait = 0, 0.0
        while not stop.is_set():
            try:
                job = self.store.queue.claim(self.id, self.lease_seconds)
                if job is None:
                    self.store.queue.set_worker(self.id, "idle", self.description)
                    if once:
                        break
                    stop.wait(poll_seconds)
                    continue
                wait = 0.0
                self.process(job)
            except QueueDamaged as error:  # the service rebuilds it: wait, and look again
                wait = min(max(2 * wait, DAMAGED_WAIT[0]), DAMAGED_WAIT[1])
                log.warning("%s; waiting %.0f s for the service to rebuild the queue", error, wait)
                stop.wait(wait)
                continue
            done += 1
        return done

    def process(self, job: Job) -> None:
        queue, results = self.store.queue, self.store.results_folders
        queue.set_worker(self.id, "scoring", f"scoring {job.id}")
        log.info("scoring %s (%s), attempt %d", job.id, job.model, job.attempts)
        # The request the results must answer (and will record, with this claim's lease): a re-run's are not those
        # of the run before.
        request = queue.request_number(job.id)
        if results.answered(job.id, holder=job.lease):  # a previous attempt wrote them, then stopped before FINISHED
            try:
                self._publish(job.id)
            except CultureLensError as error:  # the Hub refused or is away: the job says so
                queue.fail(job.id, self.id, f"its results could not be published: {error}")
                return
            queue.finish(job.id, self.id, "scored (results from an earlier attempt)")
            if self.remote is not None:
                self.remote.forget(self.store, job.id)
            return
        self._remove_unfinished_results(job.id)
        heartbeat = _Heartbeat(self, job)
        heartbeat.start()
        try:
            if self.remote is not None:
                self.remote.fetch(self.store, job.id, heartbeat.check)
            if reason := self.store.same_images_refusal(job):  # entered without the intake's check (restored, older)
                queue.fail(job.id, self.id, reason)
                return
            scores = suite_scoring.score(self.store.submissions / job.id, self.metrics, self.backbones,
                                         self.store.cache, submission_id=job.id, datasets_root=self.store.datasets,
                                         suite=self.store.suite, local_only=True, options=self.options,
                                         progress=heartbeat.report, disabled=self.disabled)
            heartbeat.check()
            log.info("scored %s (attempt %d)", job.id, job.attempts)  # what a soak counts: never twice per job
            if results.answered(job.id):  # a worker that took over before us finished first
                queue.finish(job.id, self.id, "scored (results written by another worker)")
                return
            scores = replace(scores, run=scores.run.answering(request, job.lease))
            self._remove_superseded_results(job.id)
            try:
                results.write(job.id, scores)
            except OSError:
                if not results.answered_here(job.id):
                    raise
                # Results are immutable: the other worker's rename won, ours was refused; they are the same scores.
                queue.finish(job.id, self.id, "scored (results written by another worker)")
                return
            self._publish(job.id)  # even if the lease was just lost: a worker that took over then finds them
        except LeaseLost:
            log.warning("lost the lease on %s; another worker has it", job.id)
            return
        except DatasetUnavailable as error:
            queue.fail(job.id, self.id, f"the dataset is not available to the worker: {error}")
            return
        except Exception as error:  # noqa: BLE001 - any scoring bug must end as FAILED with its reason
            log.exception("scoring %s failed", job.id)
            excerpt = "".join(traceback.format_exception(error))[-2000:]
            queue.fail(job.id, self.id, f"scoring failed: {type(error).__name__}: {error}", excerpt)
            return
        finally:
            heartbeat.stop()
        run = scores.run
        missing = run.suite.missing if run.suite is not None else []
        parts = f"; parts missing: {', '.join(missing)}" if missing else ""
        skipped = f"; not scored: {', '.join(sorted(run.skipped))}" if run.skipped else ""
        queue.finish(job.id, self.id, f"scored {run.images} images ({run.embeddings_computed} embeddings "
                                      f"computed, {run.embeddings_cached} from the cache){parts}{skipped}")
        if self.remote is not None:
            self.remote.forget(self.store, job.id)

    def _publish(self, submission_id: str) -> None:
        """A remote worker's results go to the results repo before the job is FINISHED (the app reads them there),
        unless the repo holds them already (an earlier attempt published them, then stopped)."""
        results = self.store.results_folders
        if self.remote is None or not results.has(submission_id) or results.answered_in_repo(submission_id):
            return
        self.remote.publish(self.store, submission_id)
        log.info("published the results of %s to %s", submission_id, self.remote.results.name)

    def _remove_superseded_results(self, submission_id: str) -> None:
        """Delete this store's results of the submission that do not answer its current request (a re-run's worker
        that kept the run before's): the new results take their place. This worker holds the job's lease."""
        results = self.store.results_folders
        if results.has(submission_id) and not results.answered_here(submission_id):
            log.info("removing the results of an earlier run of %s", submission_id)
            shutil.rmtree(self.store.results_folder(submission_id), ignore_errors=True)

    def _remove_unfinished_results(self, submission_id: str) -> None:
        """Delete the temporary results folders (``results/.<id>.*``, ``benchmark.atomic.leftovers``) a killed
        attempt left behind; this worker holds the job's lease, so no live writer owns them."""
        for folder in leftovers(self.store.results_folder(submission_id)):
            log.warning("removing %s, left by an attempt that stopped while writing results", folder.name)
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def keep_alive(queue: Queue, worker_id: str, state: str, message: str, every: float = 10.0):
    """Record ``state`` for this worker now and every ``every`` seconds until the block ends, so the app shows
    a worker busy without a job (loading weights: offline, the Hub client retries for minutes) as alive."""
    queue.set_worker(worker_id, state, message)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            with contextlib.suppress(QueueDamaged):  # being rebuilt: the next beat records it
                queue.set_worker(worker_id, state, message)

    thread = threading.Thread(target=beat, daemon=True, name="worker-keep-alive")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class _Heartbeat(threading.Thread):
    """Renews the job's lease in the background and passes progress on to the queue."""

    def __init__(self, worker: Worker, job: Job):
        super().__init__(daemon=True)
        self.worker, self.job = worker, job
        self.progress: tuple[float, str] | None = None
        self.lost = False
        self._pushed = time.monotonic()
        self._stop_event = threading.Event()

    def report(self, stage: str, done: int, total: int) -> None:
        """Progress callback of the harness: pushed to the queue at most once a second."""
        self.progress = (done / max(total, 1), f"{stage} {done}/{total}")
        if time.monotonic() - self._pushed >= 1.0:
            self._push()
        self.check()

    def _push(self) -> None:
        self._pushed = time.monotonic()
        fraction, message = self.progress or (None, None)
        queue = self.worker.store.queue
        try:
            queue.set_worker(self.worker.id, "scoring", f"scoring {self.job.id}")
            if not queue.heartbeat(self.job.id, self.worker.id, self.worker.lease_seconds, fraction, message):
                self.lost = True
        except QueueDamaged:  # being rebuilt: the next beat renews the lease, or finds the rebuilt queue lost it
            log.warning("the queue is damaged: the lease on %s was not renewed this time", self.job.id)

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(self.job.id)

    def run(self) -> None:
        interval = self.worker.lease_seconds / 3
        while not self._stop_event.wait(interval) and not self.lost:
            self._push()

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def stop_when_parent_dies() -> None:
    """Read stdin (a pipe the supervisor in the parent holds open) in a thread; at end-of-file the parent is
    gone: stop this process with SIGTERM, as a clean shutdown of the parent would."""

    def watch() -> None:
        # The raw descriptor, not sys.stdin.buffer: a daemon thread blocked in the buffered reader holds its lock,
        # and a worker that then returns (e.g. "no metric can run", status 2) dies at shutdown with SIGABRT.
        while os.read(sys.stdin.fileno(), 4096):
            pass
        log.warning("the process that started this worker stopped; stopping too")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(store: Store, options: ScoringOptions, metrics: list[Metric], unavailable: dict[str, str], *,
         once: bool, **keywords) -> int:
    """Entry point of ``culturelens worker``: 0 when stopped cleanly, 2 when no metric can run. ``keywords``: the
    ``Worker``'s (lease_seconds, id, remote)."""
    worker = Worker(store, options, metrics, unavailable, **keywords)
    if not worker.load():
        return 2
    stop = threading.Event()
    try:
        worker.run(once=once, stop=stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        with contextlib.suppress(*store.queue.errors):  # a queue being rebuilt: the entry ages out
            store.queue.set_worker(worker.id, "stopped", None)
    return 0


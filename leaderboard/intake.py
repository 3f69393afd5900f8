"""How a submission enters the store: the quota, then the one ``accept`` path (validate, keep, queue).

An upload (``submit``, or ``submit_from_hub`` for a Hub dataset repo, ``leaderboard.hub_submission``) and a
submission restored from the requests repo (``leaderboard.hub_sync``) both go through ``Intake.accept``: staged
and validated in ``staging/`` as an upload is (``benchmark.submission.suite.stage``: one dataset config, or a suite
submission with a folder per part of the suite served, ``leaderboard.served_suite``), kept in
``submissions/<id>/`` with its images as Parquet shards (``Report.keep``; a suite submission's under
``parts/<part>/``), and queued as one job. They differ only in what they start from: an
upload gets a new id, is refused when its content is known or its model revision was submitted for one of its
datasets (a suite submission: any of its parts'), and is queued with the
owner's quota counted in the queuing transaction; a restored submission keeps its id and its record, whose
content hash it must have.

The quota (``Quota``) bounds what one user asks of the leaderboard per window: accepted submissions and re-runs
(the queue's submission log) and uploads sent for validation, rejected ones included (validating decodes every
image). It is checked before any work, and again, atomically, where a job is queued (``Queue.add``).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmark.datasets.prompts import PromptSet
from benchmark.errors import CultureLensError
from benchmark.submission import Limits, Manifest, Report, ServerFault
from benchmark.submission.space import Hold, UploadSpace
from benchmark.submission.suite import SuiteReport, stage
from benchmark.suite import SUITE_V1, Suite
from leaderboard import hub_submission
from leaderboard.queue import DATASETS_JOINED, DuplicateSubmission, Job, Queue, QuotaExceeded


class PermissionDenied(CultureLensError, PermissionError):
    """The signed-in user may not do this (not the owner, or over the quota); the message says why."""


@dataclass
class SubmitOutcome:
    report: Report | SuiteReport
    job: Job | None = None


def dataset_label(manifest: Manifest) -> str:
    """A dataset as the queue names it: ``repo:config:split``."""
    d = manifest.dataset
    return f"{d.repo}:{d.config}:{d.split}"


def datasets_of(report: Report | SuiteReport) -> list[str]:
    """The datasets an accepted submission answers (``dataset_label``): a suite submission's, one per part."""
    if isinstance(report, SuiteReport):
        return [dataset_label(r.manifest) for r in report.parts.values()]
    return [dataset_label(report.manifest)]


@dataclass
class Quota:
    """How much one user may ask per ``hours``: ``submissions`` accepted (re-runs included) and ``uploads`` sent
    for validation (rejected ones included); None is no limit (the operator's own store)."""

    submissions: int | None = 5
    hours: float = 24
    uploads: int | None = 20

    @property
    def note(self) -> str:
        """The quota in words, as the Submit tab states it."""
        parts = [f"{self.submissions} accepted submissions" if self.submissions is not None else None,
                 f"{self.uploads} uploads (rejected ones included)" if self.uploads is not None else None]
        parts = [p for p in parts if p]
        if not parts:
            return "quota: none (this server's operator sets it: `culturelens serve --quota`)"
        return f"quota: {' and '.join(parts)} per {self.hours:g} h"

    def since(self) -> str:
        """The start of the quota window, as ISO time."""
        since = datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() - self.hours * 3600, timezone.utc)
        return since.isoformat(timespec="seconds")

    def window(self) -> tuple[int, str] | None:
        """(limit, start of the window) for ``Queue.add`` / ``Queue.requeue``; None without a limit."""
        return None if self.submissions is None else (self.submissions, self.since())

    def over(self, owner: str, used: int) -> PermissionDenied:
        return PermissionDenied(f"{owner} has made {used} submissions in the last {self.hours:g} hours; the "
                                f"quota is {self.submissions} (re-runs and deleted submissions count). Try again "
                                "later or ask a maintainer.")

    def check(self, queue: Queue, owner: str) -> None:
        """PermissionDenied if ``owner`` has used up the quota: a cheap refusal before an upload is even read.
        What guarantees it is ``Queue.add`` checking it again in the transaction that queues a job."""
        since = self.since()
        if self.submissions is not None and (used := queue.count_since(owner, since)) >= self.submissions:
            raise self.over(owner, used)
        tried = queue.count_attempts_since(owner, since) if self.uploads is not None else 0
        if self.uploads is not None and tried >= self.uploads:
            raise PermissionDenied(f"{owner} has sent {tried} uploads (accepted or rejected) in the last "
                                   f"{self.hours:g} hours; the limit is {self.uploads}. Check uploads with "
                                   "`culturelens validate FILE.zip` on your machine first.")


class Intake:
    """Submissions entering a store: uploads into ``staging``, accepted ones kept in ``submissions`` and queued in
    ``queue``. ``prompts_for``: the prompt set a manifest names, among the datasets the store serves; ``limits``:
    what an upload may hold; ``max_shard_bytes``: the largest Parquet shard an accepted submission is kept in;
    ``suite``: the suite definition a suite submission answers (``leaderboard.served_suite``); ``space``: where
    the uploads in flight hold what they write (the app's upload route holds its files there too), one per store,
    of ``limits.max_in_flight_bytes``."""

    def __init__(self, queue: Queue, *, staging: Path, submissions: Path, prompts_for: Callable[[Manifest], PromptSet],
                 limits: Limits, quota: Quota, max_shard_bytes: int, suite: Suite = SUITE_V1):
        self.queue, self.staging, self.submissions, self.prompts_for = queue, staging, submissions, prompts_for
        self.quota, self.max_shard_bytes, self.suite = quota, max_shard_bytes, suite
        self.space = UploadSpace(limits.max_in_flight_bytes)
        self.limits = limits

    @property
    def limits(self) -> Limits:
        return self._limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        self._limits = limits
        self.space.capacity = limits.max_in_flight_bytes

    def submit(self, source: Path, owner: str, progress=None) -> SubmitOutcome:
        """Validate ``source`` (folder or zip) and, if it passes, queue it. Nothing is kept on rejection.
        ``progress(stage, done, total)`` hears how validation goes (a ``benchmark.progress.Bars``, say; a suite
        submission's stages name their part).

        PermissionDenied if ``owner`` is over the quota (before any work, and again, atomically, when queuing).
        Each call counts as an attempt, except when the server cannot store the upload (a full disk): then
        ServerFault (an OSError) is raised, nothing is kept and the attempt is not counted."""
        self.quota.check(self.queue, owner)
        return self.accept(Path(source), owner=owner, attempt=self.queue.record_attempt(owner), progress=progress)

    def submit_from_hub(self, repo: str, owner: str, progress=None) -> SubmitOutcome:
        """``submit`` for a Hub dataset repo holding a submission (``hub_submission.fetch``); a fetch that fails
        (RepoError with the reason) counts as an attempt too: it was work done for ``owner``."""
        self.quota.check(self.queue, owner)
        attempt = self.queue.record_attempt(owner)
        with self.space.hold() as hold:  # the download's bytes, held until it is removed
            try:
                folder = hub_submission.fetch(repo, self.staging, self.limits, hold)
            except OSError as error:  # the server could not write the download (or hold it): not counted
                raise self._server_fault(error, attempt) from None
            try:
                return self.accept(folder, owner=owner, attempt=attempt, progress=progress)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def _server_fault(self, error: OSError, attempt: int) -> ServerFault:
        """The server could not store an upload: not the uploader's fault, so ``attempt`` does not count."""
        self.queue.forget_attempt(attempt)
        return error if isinstance(error, ServerFault) else ServerFault(error)

    def accept(self, source: Path, *, owner: str | None = None, attempt: int | None = None,
               record: Job | None = None, progress=None) -> SubmitOutcome:
        """The one way a submission enters the store: stage and validate ``source``, and if it passes keep it in
        ``submissions/<id>/`` and queue it. Either an upload of ``owner`` (``attempt``: the upload attempt it
        counts as; a new id; refused when its content or its model revision was submitted before; queued as
        PENDING with the quota counted, PermissionDenied when concurrent uploads passed it together), or a
        submission restored from a requests repo (``record``: kept under the record's id, refused unless its
        content hash is the record's; the record restored as it was, ``Queue.restore``: the outcome's job is
        None, with no error, when the queue has that record already). A refusal keeps nothing: the outcome's
        report says why. ServerFault when our own disk fails or the uploads in flight fill their space (an upload's
        attempt is then not counted): what it staged is held in ``space`` until it is kept or removed."""
        with self.space.hold() as hold:
            return self._accept(source, owner, attempt, record, progress, hold)

    def _accept(self, source: Path, owner: str | None, attempt: int | None, record: Job | None, progress,
                hold: Hold) -> SubmitOutcome:
        try:
            report = stage(source, self.staging, self.suite, self.prompts_for, self.limits, progress, hold)
        except OSError as error:  # the server could not write the staged copy (stage removed it)
            raise self._fault(error, attempt) from None
        if report.ok:
            self._refuse_known(report, record)
        if not report.ok:
            if report.folder is not None:
                shutil.rmtree(report.folder, ignore_errors=True)
                report.folder = None
            return SubmitOutcome(report)
        submission_id = record.id if record is not None else _new_id(report)
        try:
            target = report.keep(self.submissions / submission_id, self.max_shard_bytes, hold,
                                 submission_id=submission_id)
        except OSError as error:  # a full disk again: the staged copy goes
            shutil.rmtree(report.folder, ignore_errors=True)
            raise self._fault(error, attempt) from None
        if record is not None:
            return SubmitOutcome(report, record if self.queue.restore(record) else None)
        m = report.manifest
        try:
            job = self.queue.add(id=submission_id, content_hash=report.content_hash, owner=owner, model=m.model.name,
                                 model_id=m.model.id, model_revision=m.model.revision,
                                 dataset=DATASETS_JOINED.join(datasets_of(report)), quota=self.quota.window())
        except BaseException as error:
            # Not queued: its folder goes too (a queue rebuilt from the folders would bring it back).
            shutil.rmtree(target, ignore_errors=True)
            report.folder = None
            if isinstance(error, DuplicateSubmission):  # the same content arrived concurrently
                report.error(str(error))
                return SubmitOutcome(report)
            if isinstance(error, QuotaExceeded):  # concurrent uploads passed the early check together
                raise self.quota.over(owner, error.used) from None
            raise
        return SubmitOutcome(report, job)

    def _fault(self, error: OSError, attempt: int | None) -> OSError:
        """A failure of our own disk: an upload's attempt is not counted (ServerFault); a restore's passes on."""
        return self._server_fault(error, attempt) if attempt is not None else error

    def _refuse_known(self, report: Report | SuiteReport, record: Job | None) -> None:
        """Add the reason to ``report`` when a validated submission must not be queued: a restored one whose content
        is not its record's; an upload whose content was submitted before, or whose model revision was submitted
        for one of its datasets (alone or as a suite submission's part)."""
        if record is not None:
            if report.content_hash != record.content_hash:
                report.error(f"its content hash {report.content_hash} is not the record's {record.content_hash}")
            return
        m = report.manifest
        if existing := self.queue.find_by_hash(report.content_hash):
            report.error(f"identical to submission {existing.id} ({existing.state}, submitted "
                         f"{existing.created_at}): nothing new to score")
            return
        for dataset in datasets_of(report) if m.model.revision else []:
            if same := self.queue.find_model(m.model.id, m.model.revision, dataset):
                report.error(f"{m.model.id} at revision {m.model.revision} was already submitted for {dataset} "
                             f"(submission {same.id}, {same.state}); its owner can re-run or delete it")
                return

    def sweep_staging(self, older_than_hours: float = 6) -> list[str]:
        """Remove what uploads left in ``staging/`` when the app died while validating them (a finished
        validation always removes or moves its folder). Only entries untouched for ``older_than_hours`` go, so
        an upload being validated now is never touched. Returns the names removed."""
        cutoff = time.time() - older_than_hours * 3600
        removed = []
        for entry in sorted(self.staging.iterdir()):
            if entry.lstat().st_mtime < cutoff:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry.name)
        return removed


def _new_id(report: Report | SuiteReport) -> str:
    """A new submission's id: when it was accepted, the start of its content hash, and a random tail."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{report.content_hash.removeprefix('sha256:')[:10]}-{uuid.uuid4().hex[:4]}"

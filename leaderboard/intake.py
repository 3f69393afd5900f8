"""How a submission enters the store: the quota, then the one ``accept`` path (validate, keep, queue).

An upload (``submit``, or ``submit_from_hub`` for a Hub dataset repo, ``leaderboard.hub_submission``) and a
submission restored from the requests repo (``leaderboard.hub_sync``) both go through ``Intake.accept``: staged
and validated in ``staging/`` as an upload is (``benchmark.submission.suite.stage``: one dataset config, or a suite
submission with a folder per part of the suite served, ``leaderboard.served_suite``), kept in
``submissions/<id>/`` with its images as Parquet shards (``Report.keep``; a suite submission's under
``parts/<part>/``), and queued as one job. They differ only in what they start from: an
upload gets a new id, is refused when its content is known, when its images for one of its datasets are another
submission's (``image_sets_of``: one image set is one row of the leaderboard, whatever the model is called), or
when its model revision was submitted for one of its datasets (a suite submission: any of its parts'), and is
queued with the owner's quota counted in the queuing transaction; a restored submission keeps its id and its record,
whose content hash it must have. The image sets are digests of the sha256s validation computed (and the kept image
tables hold, read for a submission queued before image sets were kept): no image is hashed again. A submission that
entered holding another's images all the same (restored from a requests repo) is refused by the worker
(``same_images_refusal``).

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

import pyarrow.parquet as pq

from benchmark.datasets.prompts import PromptSet
from benchmark.errors import CultureLensError
from benchmark.layout import submission_layouts
from benchmark.submission import Limits, Manifest, Report, ServerFault
from benchmark.submission.space import Hold, UploadSpace
from benchmark.submission.suite import SuiteReport, stage
from benchmark.submission.validate import image_set
from benchmark.suite import SUITE_V1, Suite
from leaderboard import hub_submission
from leaderboard.queue import DATASETS_JOINED, DuplicateSubmission, Job, Queue, QuotaExceeded, SameImages


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


def image_sets_of(report: Report | SuiteReport) -> dict[str, str]:
    """Dataset (``dataset_label``) -> the digest of the images an accepted submission answers it with
    (``validate.image_set``, from the sha256s validation recorded): one, or a suite submission's, one per part."""
    reports = report.parts.values() if isinstance(report, SuiteReport) else [report]
    return {dataset_label(r.manifest): image_set(r.manifest, ((i.prompt_id, i.sha256) for i in r.images))
            for r in reports}


def kept_image_sets(folder: Path) -> dict[str, str]:
    """``image_sets_of`` a kept submission folder, plain or suite, from its manifests and the prompt_id and sha256
    columns of its image tables: no image is read."""
    sets = {}
    for part in submission_layouts(folder).values():
        manifest = Manifest.model_validate_json(part.manifest.read_bytes())
        table = pq.read_table(part.images_table, columns=["prompt_id", "sha256"])
        pairs = zip(table.column("prompt_id").to_pylist(), table.column("sha256").to_pylist())
        sets[dataset_label(manifest)] = image_set(manifest, pairs)
    return sets


def same_images(existing: Job, dataset: str) -> str:
    """Why a submission whose images for ``dataset`` are those of the older ``existing`` is refused."""
    return (f"its images for {dataset} are those of submission {existing.id} (model {existing.model!r}, "
            f"{existing.state}, submitted {existing.created_at}): the same images are one row of the leaderboard, "
            "whatever the model is called; that submission's owner can re-run or delete it")


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
        image_sets = image_sets_of(report) if report.ok else {}
        if report.ok:
            self._record_missing_image_sets()
            self._refuse_known(report, record, image_sets)
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
            return SubmitOutcome(report, record if self.queue.restore(record, list(image_sets.values())) else None)
        m = report.manifest
        try:
            job = self.queue.add(id=submission_id, content_hash=report.content_hash, owner=owner, model=m.model.name,
                                 model_id=m.model.id, model_revision=m.model.revision,
                                 dataset=DATASETS_JOINED.join(datasets_of(report)), quota=self.quota.window(),
                                 image_sets=list(image_sets.values()))
        except BaseException as error:
            # Not queued: its folder goes too (a queue rebuilt from the folders would bring it back).
            shutil.rmtree(target, ignore_errors=True)
            report.folder = None
            if isinstance(error, SameImages):  # the same images arrived concurrently
                report.error(same_images(error.existing, _dataset_holding(image_sets, error.image_set)))
                return SubmitOutcome(report)
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

    def _refuse_known(self, report: Report | SuiteReport, record: Job | None, image_sets: dict[str, str]) -> None:
        """Add the reason to ``report`` when a validated submission must not be queued: a restored one whose content
        is not its record's; an upload whose content was submitted before, whose model revision was submitted for
        one of its datasets (alone or as a suite submission's part), or whose images for one of its datasets
        (``image_sets``) are another submission's."""
        if record is not None:
            if report.content_hash != record.content_hash:
                aside = getattr(report, "set_aside", {})  # a suite submission's parts whose datasets are not here
                report.error(f"its content hash {report.content_hash} is not the record's {record.content_hash}" + (
                    f": its parts {', '.join(aside)} were set aside, their datasets not served here; restore or build "
                    "those datasets in this store's datasets/ first, then pull again" if aside else ""))
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
        if same := self.queue.same_images(list(image_sets.values())):
            existing, held = same
            report.error(same_images(existing, _dataset_holding(image_sets, held)))

    def same_images_refusal(self, job: Job) -> str | None:
        """Why the queued ``job`` must not be scored: its images for a dataset are those of a submission queued
        before it (both entered without the check: restored from a requests repo, or queued before image sets were
        kept); None when they are its own. Its image sets, from its kept folder's image tables, are recorded where
        the queue lacks them. A re-run of a submission is never refused for its own images."""
        self._record_missing_image_sets()
        image_sets = kept_image_sets(self.submissions / job.id)
        self.queue.record_image_sets(job.id, list(image_sets.values()))
        if same := self.queue.same_images(list(image_sets.values()), before=job):
            existing, held = same
            return same_images(existing, _dataset_holding(image_sets, held))
        return None

    def _record_missing_image_sets(self) -> None:
        """Record the image sets of the kept submissions the queue keeps none for (queued before image sets were
        kept, restored or rebuilt without them), from their image tables: once each, so that a copy of an older
        submission's images is found too. A submission whose files are not here (a worker on another machine
        fetches them per job) is left for the worker that scores it."""
        for id in self.queue.without_image_sets():
            try:
                image_sets = kept_image_sets(self.submissions / id)
            except (OSError, ValueError):  # not here, or not a complete folder (ValueError: pydantic, pyarrow)
                continue
            self.queue.record_image_sets(id, list(image_sets.values()))

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


def _dataset_holding(image_sets: dict[str, str], image_set: str) -> str:
    return next(dataset for dataset, held in image_sets.items() if held == image_set)


def _new_id(report: Report | SuiteReport) -> str:
    """A new submission's id: when it was accepted, the start of its content hash, and a random tail."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{report.content_hash.removeprefix('sha256:')[:10]}-{uuid.uuid4().hex[:4]}"

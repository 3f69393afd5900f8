"""The leaderboard's store: a folder holding datasets, submissions, the queue and immutable results.

Layout::

    STORE/
      datasets/<org>__<name>/       local Hub-layout dataset folders (e.g. culturelens__cube-1k)
      staging/                      uploads being validated (removed on rejection)
      submissions/<id>/             accepted submissions: manifest.json, data/images-*-of-*.parquet (the images,
                                    as Parquet shards: ``benchmark.submission.shards``), images.parquet
      queue.sqlite                  submission records (see ``queue``), unless the queue is on a PostgreSQL server
      results/<id>/                 per_image, aggregates, curves (.parquet), run.json (written once, atomically)
      cache/embeddings.sqlite       embeddings by content (see ``benchmark.cache``), shared by workers
      reported/reported.parquet     results published in the papers (rewritten from code at start)
      meta_eval/*.parquet           metric-human agreement tables (``culturelens meta-eval --store``)

Writers never block readers: results are immutable Parquet folders that
appear by one ``rename``; the app reads them with an in-memory DuckDB
(``leaderboard.catalog``), so no DuckDB file is ever opened for writing.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import layout, results
from benchmark.layout import is_submission_id
from benchmark.atomic import atomic_write
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import PromptSet, load_prompts
from benchmark.errors import CultureLensError
from benchmark.submission import Limits, Manifest, Report, ServerFault, stage
from benchmark.submission.shards import MAX_SHARD_BYTES, Shards
from leaderboard import reported
from leaderboard.queue import DuplicateSubmission, Job, QuotaExceeded, now_iso, open_queue

if TYPE_CHECKING:
    from benchmark.harness import Scores


@dataclass
class SubmitOutcome:
    report: Report
    job: Job | None = None


class PermissionDenied(CultureLensError, PermissionError):
    """The signed-in user may not do this (not the owner, or over the quota); the message says why."""


log = logging.getLogger("culturelens.store")
REBUILT_OWNER = "unknown (rebuilt)"  # the owner of records rebuilt from disk after the queue file was damaged


def _dataset_label(manifest: Manifest) -> str:
    """The queue's ``dataset`` field: ``repo:config:split``."""
    d = manifest.dataset
    return f"{d.repo}:{d.config}:{d.split}"


class Store:
    """One leaderboard's files. Safe to share between the app process and worker processes.

    ``quota``: how many submissions one user may have accepted per ``quota_hours``, and ``attempt_quota`` how
    many uploads (rejected ones included: validating them decodes every image) one user may send in that time;
    both are checked before any work. None is no limit: the operator's own store (``leaderboard.operator``).
    ``max_shard_bytes``: the largest Parquet shard an accepted submission's images are kept in. ``queue``: where
    the queue lives (``leaderboard.queue``): None for ``queue.sqlite`` in the store, or a ``postgresql://`` URL
    shared by workers on other machines.
    """

    def __init__(self, root: Path, limits: Limits = Limits(), *, quota: int | None = 5, quota_hours: float = 24,
                 attempt_quota: int | None = 20, max_attempts: int = 3, max_shard_bytes: int = MAX_SHARD_BYTES,
                 queue: str | None = None):
        self.root = Path(root).resolve()
        self.limits = limits
        self.max_shard_bytes = max_shard_bytes  # the bound on each Parquet shard of an accepted submission
        self.quota, self.quota_hours, self.attempt_quota = quota, quota_hours, attempt_quota
        self.datasets = self.root / layout.DATASETS
        self.staging = self.root / "staging"
        self.submissions = self.root / layout.SUBMISSIONS
        self.results = self.root / layout.RESULTS
        self.reported = self.root / "reported" / "reported.parquet"
        for folder in (self.datasets, self.staging, self.submissions, self.results, self.reported.parent):
            folder.mkdir(parents=True, exist_ok=True)
        self.queue = open_queue(queue or self.root / "queue.sqlite", max_attempts=max_attempts,
                                has_results=self.has_results)
        # What the operator must hear when the (SQLite) queue file was found damaged and rebuilt here; else None.
        self.rebuilt: str | None = self._rebuild_queue() if self.queue.damaged else None

    def _rebuild_queue(self) -> str:
        """Give every ``submissions/<id>/`` folder its record again (the queue file was found damaged and replaced
        by an empty one): FINISHED if its results exist, else PENDING, owner unknown, content hash recomputed
        as validation computes it. Returns the notice, also logged and shown in the app's Queue tab."""
        from benchmark.submission import ImageRecord
        from benchmark.submission.validate import content_hash

        def mtime(path: Path) -> str:
            return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")

        states, skipped = [], []
        for folder in sorted(self.submissions.iterdir()):
            try:
                manifest = self.manifest(folder.name)
                images = [ImageRecord(**row) for row in pq.read_table(folder / layout.IMAGES_TABLE).to_pylist()]
            except (OSError, ValueError):  # not a complete submission folder (ValueError: pydantic, pyarrow)
                skipped.append(folder.name)
                continue
            done = self.has_results(folder.name)
            job = Job(id=folder.name, content_hash=content_hash(manifest, images), owner=REBUILT_OWNER,
                      model=manifest.model.name, model_id=manifest.model.id, model_revision=manifest.model.revision,
                      dataset=_dataset_label(manifest), state="FINISHED" if done else "PENDING",
                      created_at=mtime(folder), started_at=None,
                      finished_at=mtime(self.results_folder(folder.name) / layout.RUN) if done else None,
                      updated_at=now_iso(), attempts=0, lease_owner=None, lease_expires=None,
                      progress=1 if done else None, message="record rebuilt from the submission folder", error=None,
                      log_excerpt=None)
            if self.queue.restore(job):
                states.append(job.state)
        notice = (f"queue rebuilt from disk at {now_iso()} (damaged file kept as {self.queue.damaged.name}): "
                  f"{len(states)} submissions restored ({states.count('FINISHED')} finished, "
                  f"{states.count('PENDING')} pending), owners unknown")
        if skipped:
            notice += f"; not submissions, skipped: {', '.join(skipped)}"
        log.warning(notice)
        self.queue.add_notice(notice)
        return notice

    def seed_reported(self) -> int:
        """(Re)write the paper-reported rows; returns how many."""
        rows = reported.rows()
        atomic_write(self.reported, lambda tmp: pq.write_table(results.table(rows, results.AGGREGATE), tmp))
        return len(rows)

    # --- datasets -------------------------------------------------------------------------
    def prompts(self, repo: str, config: str, split: str = "test", revision: str | None = None) -> PromptSet:
        """A dataset this leaderboard serves (a folder in ``datasets/``); never fetched because a submission names it."""
        return _cached_prompts(str(self.datasets), repo, config, split, revision, self._datasets_stamp())

    def _datasets_stamp(self) -> float:
        # Rebuilding a local dataset replaces its folder, which changes this mtime: reload then.
        return max((p.stat().st_mtime for p in self.datasets.iterdir()), default=0.0)

    def prompts_for(self, manifest: Manifest) -> PromptSet:
        d = manifest.dataset
        return self.prompts(d.repo, d.config, d.split, d.revision)

    # --- submissions ----------------------------------------------------------------------
    @property
    def quota_note(self) -> str:
        """The quota in words, as the Submit tab states it."""
        parts = [f"{self.quota} accepted submissions" if self.quota is not None else None,
                 f"{self.attempt_quota} uploads (rejected ones included)" if self.attempt_quota is not None else None]
        parts = [p for p in parts if p]
        if not parts:
            return "quota: none (this server's operator sets it: `culturelens serve --quota`)"
        return f"quota: {' and '.join(parts)} per {self.quota_hours:g} h"

    def _since(self) -> str:
        """The start of the quota window, as ISO time."""
        since = datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() - self.quota_hours * 3600, timezone.utc)
        return since.isoformat(timespec="seconds")

    def _quota_window(self) -> tuple[int, str] | None:
        """(quota, start of the quota window) for ``Queue.add`` / ``Queue.requeue``; None without a quota."""
        return None if self.quota is None else (self.quota, self._since())

    def _over_quota(self, owner: str, used: int) -> PermissionDenied:
        return PermissionDenied(f"{owner} has made {used} submissions in the last {self.quota_hours:g} hours; the "
                                f"quota is {self.quota} (re-runs and deleted submissions count). Try again later or "
                                "ask a maintainer.")

    def check_quota(self, owner: str) -> None:
        """PermissionDenied if ``owner`` has used up the quota: a cheap refusal before an upload is even read.
        What guarantees the quota is ``Queue.add`` checking it again in the transaction that queues a job."""
        since = self._since()
        if self.quota is not None and (used := self.queue.count_since(owner, since)) >= self.quota:
            raise self._over_quota(owner, used)
        tried = self.queue.count_attempts_since(owner, since) if self.attempt_quota is not None else 0
        if self.attempt_quota is not None and tried >= self.attempt_quota:
            raise PermissionDenied(f"{owner} has sent {tried} uploads (accepted or rejected) in the last "
                                   f"{self.quota_hours:g} hours; the limit is {self.attempt_quota}. Check uploads "
                                   "with `culturelens validate FILE.zip` on your machine first.")

    def submit(self, source: Path, owner: str, progress=None) -> SubmitOutcome:
        """Validate ``source`` (folder or zip) and, if it passes, queue it. Nothing is kept on rejection.

        PermissionDenied if ``owner`` is over the quota (before any work, and again, atomically, when queuing).
        Each call counts as an attempt, except when the server cannot store the upload (a full disk): then
        ServerFault (an OSError) is raised, nothing is kept and the attempt is not counted."""
        self.check_quota(owner)
        return self._validate_and_queue(Path(source), owner, self.queue.record_attempt(owner), progress)

    def submit_from_hub(self, repo: str, owner: str, progress=None) -> SubmitOutcome:
        """``submit`` for a Hub dataset repo holding a submission (``fetch_hub_submission``); a fetch that fails
        (ValueError with the reason) counts as an attempt too: it was work done for ``owner``."""
        self.check_quota(owner)
        attempt = self.queue.record_attempt(owner)
        try:
            folder = self.fetch_hub_submission(repo)
        except OSError as error:  # the server could not write the download: not counted
            raise self._server_fault(error, attempt) from None
        try:
            return self._validate_and_queue(folder, owner, attempt, progress)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _server_fault(self, error: OSError, attempt: int) -> ServerFault:
        """The server could not store an upload: not the uploader's fault, so ``attempt`` does not count."""
        self.queue.forget_attempt(attempt)
        return error if isinstance(error, ServerFault) else ServerFault(error)

    def _validate_and_queue(self, source: Path, owner: str, attempt: int, progress) -> SubmitOutcome:
        """Stage and validate ``source``; queue it if it passes (see ``submit``)."""
        try:
            report = stage(source, self.staging, self.prompts_for, self.limits, progress)
        except OSError as error:  # the server could not write the staged copy (stage removed it)
            raise self._server_fault(error, attempt) from None
        if not report.ok:
            return SubmitOutcome(report)
        existing = self.queue.find_by_hash(report.content_hash)
        m = report.manifest
        dataset = _dataset_label(m)
        same_model = self.queue.find_model(m.model.id, m.model.revision, dataset) if m.model.revision else None
        if existing or same_model:
            shutil.rmtree(report.folder, ignore_errors=True)
            report.folder = None
            if existing:
                report.error(f"identical to submission {existing.id} ({existing.state}, submitted "
                             f"{existing.created_at}): nothing new to score")
            else:
                report.error(f"{m.model.id} at revision {m.model.revision} was already submitted for {dataset} "
                             f"(submission {same_model.id}, {same_model.state}); its owner can re-run or delete it")
            return SubmitOutcome(report)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        submission_id = f"{stamp}-{report.content_hash.removeprefix('sha256:')[:10]}-{uuid.uuid4().hex[:4]}"
        try:
            target = report.keep(self.submissions / submission_id, self.max_shard_bytes)
        except OSError as error:  # a full disk again: the staged copy goes
            shutil.rmtree(report.folder, ignore_errors=True)
            raise self._server_fault(error, attempt) from None
        try:
            job = self.queue.add(id=submission_id, content_hash=report.content_hash, owner=owner, model=m.model.name,
                                 model_id=m.model.id, model_revision=m.model.revision, dataset=dataset,
                                 quota=self._quota_window())
        except BaseException as error:
            # Not queued: its folder goes too (a queue rebuilt from the folders would bring it back).
            shutil.rmtree(target, ignore_errors=True)
            report.folder = None
            if isinstance(error, DuplicateSubmission):  # the same content arrived concurrently
                report.error(str(error))
                return SubmitOutcome(report)
            if isinstance(error, QuotaExceeded):  # concurrent uploads passed the early check together
                raise self._over_quota(owner, error.used) from None
            raise
        return SubmitOutcome(report, job)

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

    def _own(self, submission_id: str, owner: str):
        job = self.queue.get(submission_id)
        if job is None:
            raise PermissionDenied(f"no submission {submission_id}")
        if job.owner != owner:
            raise PermissionDenied(f"submission {submission_id} belongs to {job.owner}, not {owner}")
        return job

    def _drop_results(self, submission_id: str) -> None:
        """Move a results folder out of sight in one rename (readers see it or not), then delete it."""
        folder = self.results_folder(submission_id)
        if folder.exists():
            hidden = self.results / f".{submission_id}.dropped-{uuid.uuid4().hex[:6]}"
            os.rename(folder, hidden)
            shutil.rmtree(hidden, ignore_errors=True)

    def rerun(self, submission_id: str, owner: str) -> None:
        """Score a FINISHED or FAILED submission again (owner only): its old results go, it queues as PENDING.
        A re-run is scoring work: it counts against the quota like a submission (PermissionDenied when over)."""
        job = self._own(submission_id, owner)
        if job.state not in ("FINISHED", "FAILED"):
            raise PermissionDenied(f"submission {submission_id} is {job.state}: only a finished or failed one can "
                                   "be re-run")
        # Out of sight first (a worker must not find them and call the re-run done), back if the quota refuses.
        results = self.results_folder(submission_id)
        hidden = self.results / f".{submission_id}.rerun-{uuid.uuid4().hex[:6]}"
        had_results = results.exists()
        if had_results:
            os.rename(results, hidden)
        try:
            requeued = self.queue.requeue(submission_id, owner, quota=self._quota_window())
        except QuotaExceeded as error:
            if had_results:
                os.rename(hidden, results)
            raise self._over_quota(owner, error.used) from None
        shutil.rmtree(hidden, ignore_errors=True)
        if not requeued:
            raise PermissionDenied(f"submission {submission_id} changed state meanwhile; refresh and try again")

    def delete(self, submission_id: str, owner: str) -> None:
        """Remove a submission, its images and its results (owner only; not while it is being scored). The quota
        is not given back: the submission log keeps the entry."""
        job = self._own(submission_id, owner)
        if job.state == "RUNNING" or not self.queue.delete(submission_id):
            raise PermissionDenied(f"submission {submission_id} is being scored; delete it once it has finished")
        self._drop_results(submission_id)
        shutil.rmtree(self.submissions / submission_id, ignore_errors=True)

    def manifest(self, submission_id: str) -> Manifest:
        return Manifest.model_validate_json((self._folder(submission_id) / layout.MANIFEST).read_bytes())

    def _folder(self, submission_id: str) -> Path:
        """``submissions/<id>`` for a well-formed id; ValueError for anything else (a path, '..', a URL)."""
        if not is_submission_id(submission_id):
            raise ValueError(f"{submission_id!r} is not a submission id")
        return self.submissions / submission_id

    def image_bytes(self, submission_id: str, names: list[str]) -> dict[str, bytes]:
        """The images ``names`` (their paths in the submission, ``images/<prompt_id>/<seed>.<ext>``, as results
        name them) of an accepted submission, read from its shards: name -> the image's bytes, for exactly the
        names its validated image table lists. Empty for an unknown or malformed id: no other file of the store
        is ever read from here, and the app serves copies of these bytes, never a store file."""
        try:
            folder = self._folder(submission_id)
            listed = set(pq.read_table(folder / layout.IMAGES_TABLE, columns=["path"]).column("path").to_pylist())
            shards = Shards(folder)
            return {name: shards.read(name) for name in dict.fromkeys(names) if name in listed}
        except (ValueError, OSError, KeyError, pa.ArrowException):  # ShardError is a ValueError
            return {}

    # --- results --------------------------------------------------------------------------
    def results_folder(self, submission_id: str) -> Path:
        """``results/<id>``, named as ``culturelens score`` names its results (``layout.results_folder``)."""
        return layout.results_folder(self.root, submission_id)

    def has_results(self, submission_id: str) -> bool:
        return (self.results_folder(submission_id) / layout.RUN).exists()

    def run_record(self, submission_id: str) -> dict | None:
        """The run.json of the submission's results folder (None without one, or one that is not a JSON object)."""
        try:
            return results.read_run((self.results_folder(submission_id) / layout.RUN).read_bytes())
        except FileNotFoundError:
            return None

    def write_results(self, submission_id: str, scores: Scores) -> Path:
        """Write one submission's results folder atomically (all files appear at once, or none)."""
        return results.write_folder(self.results_folder(submission_id), results.records(scores.per_image),
                                    scores.aggregates, results.records(scores.curves), scores.run)

    @functools.cached_property
    def cache(self) -> EmbeddingCache:
        """The embedding cache the store's workers share."""
        return EmbeddingCache(self.root / layout.STORE_CACHE)

    def quarantine(self, path: Path, reason: str) -> Path | None:
        """Move a results folder (``results/<id>``) or the reported file, which cannot be read, out of the
        readers' sight in one rename, to ``quarantine/<kind>-<name>-<when>/`` with a ``reason.txt``. Returns
        where it went, or None when ``path`` was already gone (a re-run or a deletion removed it meanwhile)."""
        from leaderboard import quarantine

        kinds = {self.results: "results", self.reported.parent: "reported"}
        if Path(path).parent not in kinds:
            raise ValueError(f"{path}: only a results folder or the reported file is ever quarantined")
        root = self.root / "quarantine"
        root.mkdir(exist_ok=True)
        target = root / quarantine.folder_name(kinds[Path(path).parent], Path(path).name, datetime.now(timezone.utc))
        try:
            if Path(path).is_dir():
                os.rename(path, target)
            else:
                target.mkdir()
                os.rename(path, target / Path(path).name)
        except FileNotFoundError:
            shutil.rmtree(target, ignore_errors=True)
            return None
        (target / quarantine.REASON).write_text(reason + "\n", encoding="utf-8")
        return target

    def quarantined(self) -> list:
        """What was moved to ``quarantine/`` (``leaderboard.quarantine.Quarantined``: kind, name, when, reason,
        folder), oldest first; the operator repairs and moves back, re-runs, or deletes each."""
        from leaderboard import quarantine

        return quarantine.listing(self.root / "quarantine")

    # --- metric meta-evaluation -----------------------------------------------------------
    @property
    def meta_eval(self) -> Path:
        return self.root / layout.META_EVAL

    def meta_evaluation(self) -> pd.DataFrame:
        """The metric ranking table: rows computed here (``culturelens meta-eval --store``) and the paper's."""
        from benchmark.expectations import published

        frames = [pd.read_parquet(p).assign(provenance="scored") for p in sorted(self.meta_eval.glob("*.parquet"))]
        frames.append(pd.DataFrame(published.ranking_rows()))
        table = pd.concat([f for f in frames if len(f)], ignore_index=True)
        table["source"] = table.pop("source_table").fillna("") if "source_table" in table else ""
        columns = ["provenance", "metric", "criterion", "country", "spearman", "ci_low", "ci_high", "n", "ceiling",
                   "source"]
        table = table.reindex(columns=columns)
        return table.sort_values(["criterion", "country", "spearman"], ascending=[True, True, False],
                                 na_position="last").round(3).reset_index(drop=True)

    # --- submissions from the Hub -----------------------------------------------------------
    def fetch_hub_submission(self, repo: str) -> Path:
        """Download a Hub dataset repo holding a submission (manifest.json and images/, or manifest.json and
        data/*.parquet: the Parquet form, ``benchmark.submission.shards``) into staging; what else it holds is
        not downloaded. ValueError with the reason when the id is malformed or the Hub cannot be reached."""
        from huggingface_hub import HfApi, snapshot_download

        from benchmark.submission.manifest import is_repo_id

        if not is_repo_id(repo):
            raise ValueError(f"{repo!r} is not a Hub dataset repo id (ORG/NAME)")
        try:
            info = HfApi().dataset_info(repo, files_metadata=True)
        except Exception as error:  # offline, missing, gated: the Hub client raises many kinds
            raise ValueError(f"cannot fetch Hub dataset {repo}: {type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200]}") from None
        folders = (f"{layout.IMAGES_DIR}/", f"{layout.DATA_DIR}/")
        files = [f for f in info.siblings or [] if f.rfilename == layout.MANIFEST or f.rfilename.startswith(folders)]
        size = sum(f.size or 0 for f in files)
        if len(files) > self.limits.max_files or size > self.limits.max_total_bytes:
            raise ValueError(f"Hub dataset {repo} holds {len(files)} files, {size} bytes: over this leaderboard's "
                             f"limits ({self.limits.max_files} files, {self.limits.max_total_bytes} bytes)")
        target = Path(tempfile.mkdtemp(prefix="hub-", dir=self.staging))
        try:
            snapshot_download(repo, repo_type="dataset", local_dir=target,
                              allow_patterns=[layout.MANIFEST, f"{layout.IMAGES_DIR}/**", f"{layout.DATA_DIR}/*.parquet"])
        except Exception as error:  # offline, missing, gated: the Hub client raises many kinds
            shutil.rmtree(target, ignore_errors=True)
            raise ValueError(f"cannot fetch Hub dataset {repo}: {type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200]}") from None
        shutil.rmtree(target / ".cache", ignore_errors=True)  # snapshot_download's bookkeeping, not the submission's
        return target


@functools.lru_cache(maxsize=16)
def _cached_prompts(root: str, repo: str, config: str, split: str, revision: str | None, stamp: float) -> PromptSet:
    return load_prompts(repo, config, split, revision=revision, local_root=Path(root), local_only=True)

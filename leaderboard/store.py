"""The leaderboard's store: a folder holding datasets, submissions, the queue and immutable results.

Layout::

    STORE/
      datasets/<org>__<name>/       local Hub-layout dataset folders (e.g. culturelens__cube-1k)
      staging/                      uploads being validated (removed on rejection)
      submissions/<id>/             accepted submissions: manifest.json, data/images-*-of-*.parquet (the images,
                                    as Parquet shards: ``benchmark.submission.shards``), images.parquet; a suite
                                    submission: the same under parts/<part>/ for each part it holds
      queue.sqlite                  submission records (see ``queue``), unless the queue is on a PostgreSQL server
      results/<id>/                 per_image, aggregates, curves (.parquet), run.json (written once, atomically)
      cache/embeddings.sqlite       embeddings by content (see ``benchmark.cache``), shared by workers
      reported/reported.parquet     results published in the papers (rewritten from code at start)
      meta_eval/*.parquet           metric-human agreement tables (``culturelens meta-eval --store``)

Writers never block readers: results are immutable Parquet folders that
appear by one ``rename``; the app reads them with an in-memory DuckDB
(``leaderboard.catalog``), so no DuckDB file is ever opened for writing.

``Store`` owns this layout and composes the store's jobs, each in a module named after it: the intake of
submissions, with the quota and the one ``accept`` path (``leaderboard.intake``; from the Hub,
``leaderboard.hub_submission``), what an owner may do with a submission (``leaderboard.ownership``), the results
folders and whether they answer a job (``leaderboard.results_folders``), files moved aside (``leaderboard.quarantine``)
and a damaged queue file rebuilt (``leaderboard.queue_rebuild``). Its methods of the same names hand over to them.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import layout, results
from benchmark.atomic import atomic_write
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import PromptSet, load_prompts
from benchmark.layout import SubmissionLayout, is_submission_id
from benchmark.run_record import RunRecord
from benchmark.submission import Limits, Manifest
from benchmark.submission.shards import MAX_SHARD_BYTES, Shards
from benchmark.submission.space import UploadSpace
from benchmark.suite import SUITE_V1, Suite
from leaderboard import hub_submission, quarantine, reported, seal
from leaderboard.intake import Intake, Quota, SubmitOutcome
from leaderboard.ownership import Ownership
from leaderboard.queue import Job, open_queue
from leaderboard.queue_rebuild import Watch, rebuild
from leaderboard.repo import Repo
from leaderboard.results_folders import Results

if TYPE_CHECKING:
    from benchmark.harness import Scores


class Store:
    """One leaderboard's files. Safe to share between the app process and worker processes.

    ``quota``: how many submissions one user may have accepted per ``quota_hours``, and ``attempt_quota`` how
    many uploads (rejected ones included: validating them decodes every image) one user may send in that time;
    both are checked before any work. None is no limit: the operator's own store (``leaderboard.operator``).
    ``max_shard_bytes``: the largest Parquet shard an accepted submission's images are kept in. ``queue``: where
    the queue lives (``leaderboard.queue``): None for ``queue.sqlite`` in the store, or a ``postgresql://`` URL
    shared by workers on other machines. ``results_repo``: the results repo of a worker on another machine
    (``leaderboard.remote``), where results count too when the queue asks whether a job was answered.
    ``suite``: the suite definition suite submissions answer (``leaderboard.served_suite``; its datasets must be in
    ``datasets/``).
    """

    def __init__(self, root: Path, limits: Limits = Limits(), *, quota: int | None = 5, quota_hours: float = 24,
                 attempt_quota: int | None = 20, max_attempts: int = 3, max_shard_bytes: int = MAX_SHARD_BYTES,
                 queue: str | None = None, results_repo: Repo | None = None, suite: Suite = SUITE_V1):
        self.root = Path(root).resolve()
        self.datasets = self.root / layout.DATASETS
        self.staging = self.root / "staging"
        self.submissions = self.root / layout.SUBMISSIONS
        self.results = self.root / layout.RESULTS
        self.reported = self.root / "reported" / "reported.parquet"
        for folder in (self.datasets, self.staging, self.submissions, self.results, self.reported.parent):
            folder.mkdir(parents=True, exist_ok=True)
        self.queue = open_queue(queue or self.root / "queue.sqlite", max_attempts=max_attempts,
                                has_results=self._answered)
        self.results_folders = Results(self.root, self.queue, results_repo)
        # A rebuild trusts only ledger lines sealed with the store's keys (read when the first line is written).
        self.queue.seal_note = lambda event: seal.ledger_line(self.results_folders.keys, event)
        self.quotas = Quota(quota, quota_hours, attempt_quota)
        self.suite = suite
        self.intake = Intake(self.queue, staging=self.staging, submissions=self.submissions,
                             prompts_for=self.prompts_for, limits=limits, quota=self.quotas,
                             max_shard_bytes=max_shard_bytes, suite=suite)
        self.ownership = Ownership(self.queue, self.results_folders, self.submissions, self.quotas)
        # What the operator must hear when the (SQLite) queue file was found damaged and rebuilt here; else None.
        self.rebuilt: str | None = (rebuild(self.queue, self.submissions, self.results_folders)
                                    if self.queue.damaged else None)
        self._rebuilding = threading.Lock()
        self.queue_watch = Watch(self.rebuild_damaged_queue)  # while serving: started by the service, or a view

    def rebuild_damaged_queue(self) -> str | None:
        """While the store is in use: if the queue's file is damaged (SQLite only), keep it aside and rebuild the
        queue from the folders, as at start (``rebuilt``, returned); None when the file is sound (or another
        call or process replaced it first)."""
        with self._rebuilding:
            if self.queue.replace_damaged() is None:
                return None
            self.rebuilt = rebuild(self.queue, self.submissions, self.results_folders)
            return self.rebuilt

    def _answered(self, submission_id: str) -> bool:
        """The queue's ``has_results``: whether results answering the submission's current request exist, in the
        store or in the results repo (``Results.answered``)."""
        return self.results_folders.answered(submission_id)

    @property
    def limits(self) -> Limits:
        """What an upload may hold (``benchmark.submission.Limits``); the operator may set other limits."""
        return self.intake.limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        self.intake.limits = limits

    @property
    def upload_space(self) -> UploadSpace:
        """Where the uploads in flight hold what they write (``benchmark.submission.space``): the app's upload route
        and the staging of submissions, within ``limits.max_in_flight_bytes``."""
        return self.intake.space

    @property
    def quota(self) -> int | None:
        """Accepted submissions (re-runs included) one user may make per quota window; None is no limit."""
        return self.quotas.submissions

    @quota.setter
    def quota(self, submissions: int | None) -> None:
        self.quotas.submissions = submissions

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

    def dataset_folders(self) -> dict[str, Path]:
        """Hub repo id -> local folder, for every dataset folder the store serves (one with its card)."""
        return {p.name.replace("__", "/", 1): p for p in sorted(self.datasets.iterdir()) if (p / "README.md").exists()}

    def datasets_cache(self, fingerprint: str) -> Path:
        """Where ``datasets`` caches what it read of a served dataset folder whose content is ``fingerprint``."""
        return self.datasets / ".hf-cache" / fingerprint

    def prompt_sets(self, submission_id: str) -> list[PromptSet]:
        """The prompt sets an accepted submission answers, as this store serves them: one, or a suite submission's,
        one per part (DatasetUnavailable when one is no longer served)."""
        return [self.prompts_for(manifest) for manifest in self.manifests(submission_id).values()]

    # --- submissions: ``leaderboard.intake`` and ``leaderboard.ownership`` --------------------
    @property
    def quota_note(self) -> str:
        """The quota in words, as the Submit tab states it."""
        return self.quotas.note

    def check_quota(self, owner: str) -> None:
        self.quotas.check(self.queue, owner)

    def submit(self, source: Path, owner: str, progress=None) -> SubmitOutcome:
        return self.intake.submit(source, owner, progress)

    def submit_from_hub(self, repo: str, owner: str, progress=None) -> SubmitOutcome:
        return self.intake.submit_from_hub(repo, owner, progress)

    def fetch_hub_submission(self, repo: str) -> Path:
        """The submission the Hub dataset repo ``repo`` holds, downloaded into staging (``hub_submission.fetch``)."""
        return hub_submission.fetch(repo, self.staging, self.limits)

    def sweep_staging(self, older_than_hours: float = 6) -> list[str]:
        return self.intake.sweep_staging(older_than_hours)

    def same_images_refusal(self, job: Job) -> str | None:
        return self.intake.same_images_refusal(job)

    def rerun(self, submission_id: str, owner: str) -> None:
        self.ownership.rerun(submission_id, owner)

    def delete(self, submission_id: str, owner: str) -> None:
        self.ownership.delete(submission_id, owner)

    def manifests(self, submission_id: str) -> dict[str | None, Manifest]:
        """Part -> manifest of an accepted submission: {None: its manifest}, or one per part of a suite submission."""
        return {part: Manifest.model_validate_json(folder.manifest.read_bytes())
                for part, folder in self._layouts(submission_id).items()}

    def _layouts(self, submission_id: str) -> dict[str | None, SubmissionLayout]:
        """Part -> folder of a submission: {None: itself}, or its parts (``layout.submission_layouts``)."""
        return layout.submission_layouts(self._folder(submission_id))

    def _folder(self, submission_id: str) -> Path:
        """``submissions/<id>`` for a well-formed id; ValueError for anything else (a path, '..', a URL)."""
        if not is_submission_id(submission_id):
            raise ValueError(f"{submission_id!r} is not a submission id")
        return self.submissions / submission_id

    def image_bytes(self, submission_id: str, names: list[str]) -> dict[str, bytes]:
        """The images ``names`` (their paths in the submission, ``images/<prompt_id>/<seed>.<ext>``, as results
        name them; a suite submission's in the part that lists them) of an accepted submission, read from its
        shards: name -> the image's bytes, for exactly the names its validated image tables list. Empty for an
        unknown or malformed id: no other file of the store is ever read from here, and the app serves copies of
        these bytes, never a store file."""
        found: dict[str, bytes] = {}
        try:
            for folder in self._layouts(submission_id).values():
                listed = set(pq.read_table(folder.images_table, columns=["path"]).column("path").to_pylist())
                shards = Shards(folder.folder)
                found |= {name: shards.read(name) for name in dict.fromkeys(names)
                          if name in listed and name not in found}
        except (ValueError, OSError, KeyError, pa.ArrowException):  # ShardError is a ValueError
            return {}
        return found

    # --- results: ``leaderboard.results_folders`` ---------------------------------------------
    def results_folder(self, submission_id: str) -> Path:
        return self.results_folders.folder(submission_id)

    def has_results(self, submission_id: str) -> bool:
        return self.results_folders.has(submission_id)

    def run_record(self, submission_id: str) -> RunRecord | None:
        return self.results_folders.run(submission_id)

    def per_image_file(self, submission_id: str) -> Path | None:
        """The per-image scores of the submission's results folder (None without them)."""
        path = self.results_folder(submission_id) / layout.PER_IMAGE
        return path if path.exists() else None

    def write_results(self, submission_id: str, scores: Scores) -> Path:
        return self.results_folders.write(submission_id, scores)

    def _drop_results(self, submission_id: str) -> None:
        self.results_folders.drop(submission_id)

    @functools.cached_property
    def cache(self) -> EmbeddingCache:
        """The embedding cache the store's workers share."""
        return EmbeddingCache(self.root / layout.STORE_CACHE)

    def quarantine(self, path: Path, reason: str) -> Path | None:
        """Move a results folder (``results/<id>``) or the reported file, which cannot be read, out of the
        readers' sight (``quarantine.move``), to ``quarantine/<kind>-<name>-<when>/`` with a ``reason.txt``.
        Returns where it went, or None when ``path`` was already gone."""
        kinds = {self.results: "results", self.reported.parent: "reported"}
        if Path(path).parent not in kinds:
            raise ValueError(f"{path}: only a results folder or the reported file is ever quarantined")
        return quarantine.move(self.root / quarantine.FOLDER, kinds[Path(path).parent], Path(path), reason)

    def quarantined(self) -> list[quarantine.Quarantined]:
        """What was moved to ``quarantine/``, oldest first; the operator repairs and moves back, re-runs, or
        deletes each."""
        return quarantine.listing(self.root / quarantine.FOLDER)

    # --- metric meta-evaluation -----------------------------------------------------------
    @property
    def meta_eval(self) -> Path:
        return self.root / layout.META_EVAL

    def meta_evaluation(self) -> pd.DataFrame:
        """The metric ranking table: rows computed here (``culturelens meta-eval --store``) and the tracks' papers'
        (``Track.papers``)."""
        frames = [pd.read_parquet(p).assign(provenance="scored") for p in sorted(self.meta_eval.glob("*.parquet"))]
        frames.append(pd.DataFrame(reported.ranking_rows()))
        table = pd.concat([f for f in frames if len(f)], ignore_index=True)
        table["source"] = table.pop("source_table").fillna("") if "source_table" in table else ""
        # the paper's rows, uploaded files and tables written before versions were recorded: none
        table["metric_version"] = table["metric_version"].fillna("") if "metric_version" in table else ""
        columns = ["provenance", "metric", "criterion", "country", "spearman", "ci_low", "ci_high", "n", "ceiling",
                   "model_spearman", "models", "source", "metric_version"]
        table = table.reindex(columns=columns)
        return table.sort_values(["criterion", "country", "spearman"], ascending=[True, True, False],
                                 na_position="last").round(3).reset_index(drop=True)


@functools.lru_cache(maxsize=16)
def _cached_prompts(root: str, repo: str, config: str, split: str, revision: str | None, stamp: float) -> PromptSet:
    return load_prompts(repo, config, split, revision=revision, local_root=Path(root), local_only=True)

"""The leaderboard's store: a folder holding datasets, submissions, the queue and immutable results.

Layout::

    STORE/
      datasets/<org>__<name>/       local Hub-layout dataset folders (e.g. culturelens__cube-1k)
      staging/                      uploads being validated (removed on rejection)
      submissions/<id>/             accepted submissions: manifest.json, images/, images.parquet
      queue.sqlite                  submission records (see ``queue``)
      results/<id>/                 per_image, aggregates, curves (.parquet), run.json (written once, atomically)
      cache/embeddings.sqlite       embeddings by content (see ``benchmark.cache``), shared by workers
      reported/reported.parquet     results published in the papers (rewritten from code at start)

Writers never block readers: results are immutable Parquet folders that
appear by one ``rename``; the app reads them with an in-memory DuckDB, so no
DuckDB file is ever opened for writing.
"""

from __future__ import annotations

import functools
import os
import uuid
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import results
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import PromptSet, load_prompts
from benchmark.submission import Limits, Manifest, Report, stage
from leaderboard import reported
from leaderboard.queue import DuplicateSubmission, Job, Queue

if TYPE_CHECKING:
    from benchmark.harness import Scores


@dataclass
class SubmitOutcome:
    report: Report
    job: Job | None = None


def _write_parquet_atomic(table: pa.Table, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """One leaderboard's files. Safe to share between the app process and worker processes."""

    def __init__(self, root: Path, limits: Limits = Limits()):
        self.root = Path(root).resolve()
        self.limits = limits
        self.datasets = self.root / "datasets"
        self.staging = self.root / "staging"
        self.submissions = self.root / "submissions"
        self.results = self.root / "results"
        self.reported = self.root / "reported" / "reported.parquet"
        for folder in (self.datasets, self.staging, self.submissions, self.results, self.reported.parent):
            folder.mkdir(parents=True, exist_ok=True)
        self.queue = Queue(self.root / "queue.sqlite")

    def seed_reported(self) -> int:
        """(Re)write the paper-reported rows; returns how many."""
        rows = reported.rows()
        _write_parquet_atomic(results.table(rows, results.AGGREGATE), self.reported)
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
    def submit(self, source: Path, owner: str, progress=None) -> SubmitOutcome:
        """Validate ``source`` (folder or zip) and, if it passes, queue it. Nothing is kept on rejection."""
        report = stage(Path(source), self.staging, self.prompts_for, self.limits, progress)
        if not report.ok:
            return SubmitOutcome(report)
        existing = self.queue.find_by_hash(report.content_hash)
        if existing:
            shutil.rmtree(report.folder, ignore_errors=True)
            report.folder = None
            report.error(f"identical to submission {existing.id} ({existing.state}, submitted {existing.created_at}): "
                         "nothing new to score")
            return SubmitOutcome(report)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        submission_id = f"{stamp}-{report.content_hash.removeprefix('sha256:')[:10]}-{uuid.uuid4().hex[:4]}"
        target = report.keep(self.submissions / submission_id)
        m = report.manifest
        try:
            job = self.queue.add(id=submission_id, content_hash=report.content_hash, owner=owner, model=m.model.name,
                                 model_id=m.model.id, model_revision=m.model.revision,
                                 dataset=f"{m.dataset.repo}:{m.dataset.config}:{m.dataset.split}")
        except DuplicateSubmission as error:  # the same content arrived concurrently
            shutil.rmtree(target, ignore_errors=True)
            report.folder = None
            report.error(str(error))
            return SubmitOutcome(report)
        return SubmitOutcome(report, job)

    def manifest(self, submission_id: str) -> Manifest:
        return Manifest.model_validate_json((self.submissions / submission_id / "manifest.json").read_bytes())

    # --- results --------------------------------------------------------------------------
    def has_results(self, submission_id: str) -> bool:
        return (self.results / submission_id / "run.json").exists()

    def write_results(self, submission_id: str, scores: Scores) -> Path:
        """Write one submission's results folder atomically (all files appear at once, or none)."""
        return results.write_folder(self.results / submission_id, results.records(scores.per_image), scores.aggregates,
                                    results.records(scores.curves), scores.run)

    @functools.cached_property
    def cache(self) -> EmbeddingCache:
        """The embedding cache the store's workers share."""
        return EmbeddingCache(self.root / "cache" / "embeddings.sqlite")

    def aggregate_files(self) -> list[str]:
        files = [str(p) for p in sorted(self.results.glob("*/aggregates.parquet"))]
        if self.reported.exists():
            files.append(str(self.reported))
        return files

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A fresh in-memory DuckDB with the view ``aggregates`` over every results file now on disk."""
        con = duckdb.connect()
        files = self.aggregate_files()
        if files:
            con.read_parquet(files, union_by_name=True).create_view("aggregates")
        else:
            empty = results.AGGREGATE.empty_table()
            con.register("aggregates", empty)
        return con


@functools.lru_cache(maxsize=16)
def _cached_prompts(root: str, repo: str, config: str, split: str, revision: str | None, stamp: float) -> PromptSet:
    return load_prompts(repo, config, split, revision=revision, local_root=Path(root), local_only=True)

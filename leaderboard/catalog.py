"""What the app reads: one in-memory DuckDB table of every aggregate row on disk, kept up to date.

Results folders are immutable and appear by one rename (``benchmark.results.write_folder``), so the catalog
only has to notice new or deleted folder names: ``refresh`` lists ``results/`` (cheap), loads the aggregate
rows of new folders and drops those of deleted ones. Per-prompt rows (slice ``prompt``) stay on disk and are
read per submission when a view needs them, so the table holds about (slices x metrics) rows per submission.
Queries run under one lock on one connection: each takes milliseconds, and DuckDB connections are not meant
to be shared across threads without it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duckdb
import pandas as pd

from benchmark import results
from leaderboard.store import Store

REFRESH_SECONDS = 2.0  # at most one directory listing per this many seconds
RESORT_ROWS = 50_000  # rows appended out of order before the table is sorted again
ORDER = "track, metric, slice, slice_value"  # what every view filters on: sorted, DuckDB skips row groups


class Catalog:
    """The store's aggregate rows (all but per-prompt) and model-level curves, in memory, kept up to date."""

    def __init__(self, store: Store):
        self.store = store
        self.con = duckdb.connect()
        self.lock = threading.RLock()
        self.loaded: set[str] = set()
        self.reported_stamp = None
        self.checked = 0.0
        self.unsorted = 0
        for name, schema in (("aggregates", results.AGGREGATE), ("curves", results.CURVES)):
            self.con.register("_empty", schema.empty_table())
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _empty")
            self.con.unregister("_empty")
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Load results that appeared and drop results that disappeared since the last refresh."""
        with self.lock:
            if not force and time.monotonic() - self.checked < REFRESH_SECONDS:
                return
            self.checked = time.monotonic()
            present = {entry.name for entry in os.scandir(self.store.results)
                       if not entry.name.startswith(".") and os.path.exists(os.path.join(entry.path, "run.json"))}
            gone, new = self.loaded - present, sorted(present - self.loaded)
            if gone:
                self.con.execute("DELETE FROM aggregates WHERE provenance = 'scored' AND submission_id IN "
                                 "(SELECT unnest(?))", [sorted(gone)])
                self.con.execute("DELETE FROM curves WHERE submission_id IN (SELECT unnest(?))", [sorted(gone)])
            if new:
                self._insert([str(self.store.results / name / "aggregates.parquet") for name in new])
                self._insert_curves([str(self.store.results / name / "curves.parquet") for name in new])
            self.loaded = present
            stamp = self.store.reported.stat().st_mtime_ns if self.store.reported.exists() else None
            if stamp != self.reported_stamp:
                self.con.execute("DELETE FROM aggregates WHERE provenance = 'reported'")
                if stamp is not None:
                    self._insert([str(self.store.reported)])
                self.reported_stamp = stamp
            if self.unsorted > RESORT_ROWS:
                self.con.execute(f"CREATE OR REPLACE TABLE aggregates AS SELECT * FROM aggregates ORDER BY {ORDER}")
                self.unsorted = 0

    def _insert(self, files: list[str]) -> None:
        columns = ", ".join(f'"{name}"' for name in results.AGGREGATE.names)
        for start in range(0, len(files), 200):
            chunk = files[start:start + 200]
            source = self.con.read_parquet(chunk, union_by_name=True)
            have = set(source.columns)
            select = ", ".join(f'"{n}"' if n in have else f'NULL AS "{n}"' for n in results.AGGREGATE.names)
            inserted = self.con.execute(f"INSERT INTO aggregates ({columns}) SELECT {select} FROM read_parquet(?, "
                                        "union_by_name = true) WHERE slice <> 'prompt'", [chunk]).fetchone()[0]
            self.unsorted += inserted

    def _insert_curves(self, files: list[str]) -> None:
        """The model-level curves (prompt_id null; a few rows per submission) of these results folders."""
        files = [f for f in files if os.path.exists(f)]
        for start in range(0, len(files), 200):
            self.con.execute("INSERT INTO curves BY NAME SELECT * FROM read_parquet(?, union_by_name = true) "
                             "WHERE prompt_id IS NULL", [files[start:start + 200]])

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        self.refresh()
        with self.lock:
            return self.con.execute(sql, params or []).df()

    def per_image(self, submission_ids: list[str], where: str = "TRUE", params: list | None = None) -> pd.DataFrame:
        """Per-image rows of some submissions (``where``: a SQL condition with ``?`` placeholders)."""
        files = [str(self.store.results / s / "per_image.parquet") for s in submission_ids
                 if (self.store.results / s / "per_image.parquet").exists()]
        if not files:
            return pd.DataFrame(columns=list(results.PER_IMAGE.names))
        with self.lock:
            return self.con.execute(f"SELECT * FROM read_parquet(?, union_by_name = true) WHERE {where}",
                                    [files, *(params or [])]).df()

    def prompts_of(self, submission_id: str) -> pd.DataFrame:
        """The prompts a submission's images answer: prompt_id and the slice columns that say what it is."""
        path = self.store.results / submission_id / "per_image.parquet"
        if not path.exists():
            return pd.DataFrame(columns=["prompt_id", "country", "concept", "kind"])
        with self.lock:
            return self.con.execute("SELECT DISTINCT prompt_id, country, coalesce(concept, domain, kind) AS what "
                                    "FROM read_parquet(?) ORDER BY prompt_id", [str(path)]).df()

    def curves(self, metric: str, submission_ids: list[str] | None = None) -> pd.DataFrame:
        """Model-level curves of one metric (of some submissions, or all)."""
        where = "metric = ?" + (" AND list_contains(?, submission_id)" if submission_ids is not None else "")
        params = [metric] + ([submission_ids] if submission_ids is not None else [])
        return self.query(f"SELECT * FROM curves WHERE {where} ORDER BY model, x", params)

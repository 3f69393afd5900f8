"""What the app reads: one in-memory DuckDB table of every aggregate row on disk, kept up to date.

Results folders are immutable and appear by one rename (``benchmark.results.write_folder``), so the catalog
only has to notice new, replaced or deleted folders: ``refresh`` lists ``results/`` (cheap) with each folder's
stamp (its inode and its run record's time and size: a re-run renames a new folder into the same name, issue 50
finding 3), loads the aggregate rows of new or replaced folders and drops those of deleted or replaced ones.
``stamps`` holds what each loaded submission was loaded from and ``version`` counts the changes: what was
computed from the results (``cached``, ``leaderboard.stored_rankings``) is keyed by them. Per-prompt rows (slice ``prompt``) stay on disk and are
read per submission when a view needs them, so the table holds about (slices x metrics) rows per submission.
Queries run under one lock on one connection: each takes milliseconds, and DuckDB connections are not meant
to be shared across threads without it.

A store started from a leaderboard release (``leaderboard.snapshot``, installed by ``leaderboard.pickup``)
has the rows of submissions it holds no folder of in that one file: the catalog loads them from it, reads their
per-prompt rows (and which prompts a slice holds) from it, and asks ``fetch`` for their folder when a view
needs per-image rows. A folder, once it appears, is read instead of the release (a folder this catalog saw
disappear, deleted or re-run, is not served from the release again).

Whatever a file holds, a folder brings only its own submission's ``scored`` rows (``results/<id>/`` gives the rows
whose submission_id is ``<id>``; a paper's rows come only from ``reported/``, written from the tracks'
declarations), and forgetting a submission removes every row of it: a folder that escaped the checks at its
door (``Results.add``) cannot list another submission or a paper's results.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from benchmark import layout, results
from benchmark.aggregate import CROSS_SEPARATOR, CROSSED, SLICES
from benchmark.errors import CultureLensError
from benchmark.layout import RESULT_PARQUET
from leaderboard import quarantine, snapshot
from leaderboard.store import Store

REFRESH_SECONDS = 2.0  # at most one directory listing per this many seconds
RESORT_ROWS = 50_000  # rows appended out of order before the table is sorted again
ORDER = "track, metric, slice, slice_value"  # what every view filters on: sorted, DuckDB skips row groups
VANISHED_RETRIES = 3  # a per-image file missing when read (a re-run or a deletion meanwhile): list them again

log = logging.getLogger("culturelens.catalog")


# DuckDB column types whose frame ``duckdb_frame`` builds from Arrow exactly as DuckDB's ``df()`` does.
_SAME_FROM_ARROW = {"VARCHAR", "DOUBLE", "FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "BOOLEAN", "TIMESTAMP"}


def duckdb_frame(table: pa.Table) -> pd.DataFrame:
    """``table`` (of the ``_SAME_FROM_ARROW`` types) as DuckDB's ``df()`` gives it: an integer or boolean column with
    a null as pandas' nullable type (Arrow's frame makes it float or object), a text column of nulls only (or of
    no rows) as objects (``None``). Converted in the calling thread: Arrow's thread pool, used from the rankings'
    thread (a daemon), can hang the interpreter's exit (apache/arrow#50482: a SIGTERM'd server that never ended)."""
    frame = table.to_pandas(use_threads=False)
    for i, (kind, column) in enumerate(zip(table.schema.types, table.columns)):
        if pa.types.is_string(kind) and column.null_count == len(column):
            frame.isetitem(i, pd.Series([None] * len(column), dtype=object))
        elif column.null_count and pa.types.is_integer(kind):
            frame.isetitem(i, pd.array(column.to_numpy(zero_copy_only=False), dtype=f"Int{kind.bit_width}"))
        elif column.null_count and pa.types.is_boolean(kind):
            frame.isetitem(i, pd.array(column.to_numpy(zero_copy_only=False), dtype="boolean"))
    return frame


class Catalog:
    """The store's aggregate rows (all but per-prompt) and model-level curves, in memory, kept up to date."""

    def __init__(self, store: Store, fetch: Callable[[list[str]], object] | None = None):
        self.store, self.fetch = store, fetch  # fetch(ids): bring these results folders into the store
        self.con = duckdb.connect()
        self.lock = threading.RLock()
        self.loaded: set[str] = set()
        self.reported_stamp = None
        self.release: tuple[snapshot.Release, Path] | None = None
        self.release_stamp = None
        self.from_release: set[str] = set()  # loaded from the release file, not from a folder
        self.from_folders: set[str] = set()  # ever loaded from a folder: never served from the release again
        self.checked = 0.0
        self.unsorted = 0
        self.stamps: dict[str, tuple] = {}  # loaded submission -> its folder's stamp (``_stamp``) or its release's
        self.version = 0  # changes whenever rows are loaded or dropped
        self._digests: dict[tuple, str] = {}  # a served prompt set's digest, computed once per load
        self._memo: dict[tuple, object] = {}  # ``cached``'s answers, for the results of ``_state``
        self._state: int | None = None
        self._keeping, self._track_rows = 0, None  # ``keeping_track_rows``: depth, and (key, the rows) kept
        for name, schema in (("aggregates", results.AGGREGATE), ("curves", results.CURVES)):
            self.con.register("_empty", schema.empty_table())
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _empty")
            self.con.unregister("_empty")
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Load results that appeared and drop results that disappeared since the last refresh. A folder or the
        reported file that cannot be read is quarantined (``Store.quarantine``): the rest is still served."""
        with self.lock:
            if not force and time.monotonic() - self.checked < REFRESH_SECONDS:
                return
            self.checked = time.monotonic()
            present = {entry.name: stamp for entry in os.scandir(self.store.results)
                       if not entry.name.startswith(".") and (stamp := _stamp(entry)) is not None}
            released = self._release_ids()
            vanished = self.loaded - self.from_release - set(present)
            replaced = {name for name in self.loaded - self.from_release - vanished
                        if self.stamps.get(name) != present[name]}  # re-run: a new folder under the same name
            self._forget(vanished | replaced | (self.from_release & set(present)) | (self.from_release - released))
            new = self._load(sorted(set(present) - self.loaded))
            self.loaded |= new
            self.from_folders |= new
            self.stamps.update({name: present[name] for name in new})
            self._load_release(sorted(released - set(present) - self.loaded - self.from_folders))
            stamp = self.store.reported.stat().st_mtime_ns if self.store.reported.exists() else None
            if stamp != self.reported_stamp:
                self.con.execute("DELETE FROM aggregates WHERE provenance = 'reported'")
                if stamp is not None:
                    self._load_reported()
                self.reported_stamp = stamp
                self.version += 1
            if self.unsorted > RESORT_ROWS:
                self.con.execute(f"CREATE OR REPLACE TABLE aggregates AS SELECT * FROM aggregates ORDER BY {ORDER}")
                self.unsorted = 0

    def _release_ids(self) -> set[str]:
        """The submissions of the store's newest release (``snapshot.installed``) as they still are (a re-run's
        rows there are the run before's: ``snapshot.current``), read again when its latest.json changed: the rows
        of the release it replaced are dropped then."""
        latest = self.store.root / snapshot.LATEST
        stamp = latest.stat().st_mtime_ns if latest.exists() else None
        if stamp != self.release_stamp:
            self._forget(set(self.from_release))
            self.release, self.release_stamp = snapshot.installed(self.store), stamp
        return snapshot.current(self.store, self.release) if self.release else set()

    def _load_release(self, names: list[str]) -> None:
        """Insert the release's rows of these submissions (all but per-prompt, model-level curves). A release
        that cannot be read is set aside for this process (logged): the folders are still served."""
        if not names:
            return
        file = str(self.release[1])
        columns = ", ".join(f'"{name}"' for name in results.AGGREGATE.names)
        curves = ", ".join(f'"{name}"' for name in results.CURVES.names if name != "prompt_id")
        self.con.execute("BEGIN TRANSACTION")
        try:
            have = set(self.con.read_parquet(file).columns)  # a release older than a column has it null
            select = ", ".join(f'"{n}"' if n in have else f'NULL AS "{n}"' for n in results.AGGREGATE.names)
            self.unsorted += self.con.execute(
                f"INSERT INTO aggregates ({columns}) SELECT {select} FROM read_parquet(?) WHERE part = 'aggregates'"
                " AND provenance = 'scored' AND slice <> 'prompt' AND list_contains(?, submission_id)",
                [file, names]).fetchone()[0]
            self.con.execute(f"INSERT INTO curves ({curves}) SELECT {curves} FROM read_parquet(?) WHERE part = "
                             "'curves' AND list_contains(?, submission_id)", [file, names])
            self.con.execute("COMMIT")
        except duckdb.Error as error:
            self.con.execute("ROLLBACK")
            log.warning("leaderboard release %s not served: %s", self.release[0].number, self._said(error))
            self.release = None
            return
        self.loaded.update(names)
        self.from_release.update(names)
        self.stamps.update({name: ("release", self.release[0].number, self.release[0].submissions.get(name))
                            for name in names})
        self.version += 1

    def _forget(self, names: set[str]) -> None:
        """Drop every row of these results folders (deleted, re-run or quarantined) or release submissions."""
        if names:
            self.con.execute("DELETE FROM aggregates WHERE submission_id IN (SELECT unnest(?))", [sorted(names)])
            self.con.execute("DELETE FROM curves WHERE submission_id IN (SELECT unnest(?))", [sorted(names)])
            self.loaded -= names
            self.from_release -= names
            for name in names:
                self.stamps.pop(name, None)
            self.version += 1

    def _load(self, names: list[str]) -> set[str]:
        """Insert the rows of these new results folders, 200 in one read; returns the names loaded. When a
        read fails, the folders are loaded one by one: one whose file is missing (removed meanwhile by a re-run
        or a deletion) is left for the next refresh, one that cannot be read is quarantined with the reason
        (pyarrow's, else DuckDB's)."""
        loaded = set()
        for start in range(0, len(names), 200):
            chunk = names[start:start + 200]
            try:
                self._insert_folders(chunk)
                loaded.update(chunk)
            except duckdb.Error:
                for name in chunk:
                    try:
                        self._insert_folders([name])
                        loaded.add(name)
                    except duckdb.IOException:
                        continue  # gone, not damaged
                    except duckdb.Error as error:
                        self._set_aside(name, _damage(self.store.results_folder(name), RESULT_PARQUET)
                                        or self._said(error))
        return loaded

    def _insert_folders(self, names: list[str]) -> None:
        """Aggregates and curves of these folders, in one transaction: all their rows or none."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            inserted = self._insert([str(self.store.results_folder(name) / layout.AGGREGATES) for name in names],
                                    own=layout.AGGREGATES)
            self._insert_curves([str(self.store.results_folder(name) / layout.CURVES) for name in names])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.unsorted += inserted
        self.version += 1

    def _load_reported(self) -> None:
        """The paper-reported rows; a damaged file (it is rewritten from code at each start) is quarantined."""
        try:
            self.unsorted += self._insert([str(self.store.reported)])
        except duckdb.Error as error:
            try:
                reason = quarantine.unreadable(self.store.reported, "reported/reported.parquet")
            except FileNotFoundError:
                return  # being rewritten: the next refresh reads the new file
            self._set_aside(self.store.reported.name, reason or self._said(error), self.store.reported)

    def _said(self, error: duckdb.Error) -> str:
        """DuckDB's reason, first line, with the store's folder named STORE."""
        return (str(error).splitlines() or [""])[0].replace(str(self.store.root), "STORE")[:300]

    def _set_aside(self, name: str, reason: str, path: Path | None = None) -> None:
        """Quarantine results folder ``name`` (or ``path``) with ``reason``, unless it is gone already."""
        if self.store.quarantine(path or self.store.results / name, reason) is not None:
            log.warning("quarantined %s: %s (see STORE/quarantine/)", name, reason)

    def _insert(self, files: list[str], own: str | None = None) -> int:
        """Aggregate rows (all but per-prompt) of these Parquet files; returns how many. ``own``: the files are
        results folders' (``own``, their file name): of each, only the scored rows of its folder's submission."""
        columns = ", ".join(f'"{name}"' for name in results.AGGREGATE.names)
        have = set(self.con.read_parquet(files, union_by_name=True).columns)
        select = ", ".join(f'"{n}"' if n in have else f'NULL AS "{n}"' for n in results.AGGREGATE.names)
        where, params = "slice <> 'prompt'", [files]
        if own is not None:
            where += f" AND provenance = 'scored' AND {_OWN_ROWS}"
            params += [f"{self.store.results}{os.sep}", f"{os.sep}{own}"]
        return self.con.execute(f"INSERT INTO aggregates ({columns}) SELECT {select} FROM read_parquet(?, "
                                f"union_by_name = true, filename = true) WHERE {where}", params).fetchone()[0]

    def _insert_curves(self, files: list[str]) -> None:
        """The model-level curves (prompt_id null; a few rows per submission) of these results folders, each
        folder's own submission's only."""
        files = [f for f in files if os.path.exists(f)]
        if files:
            self.con.execute("INSERT INTO curves BY NAME SELECT * EXCLUDE (filename) FROM read_parquet(?, "
                             f"union_by_name = true, filename = true) WHERE prompt_id IS NULL AND {_OWN_ROWS}",
                             [files, f"{self.store.results}{os.sep}", f"{os.sep}{layout.CURVES}"])

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """The answer of a SELECT as DuckDB's frame gives it (``duckdb_frame``), built from Arrow where every column
        is of a type that comes out the same (text, numbers, booleans, timestamps: every query of the views), 3-6
        times faster: DuckDB's frame makes a Python string of each text cell, which pandas then turns into Arrow."""
        self.refresh()
        with self.lock:
            relation = self.con.sql(sql, params=params or None)
            if (len(set(relation.columns)) < len(relation.columns)  # DuckDB's frame renames a repeated name
                    or not all(str(kind) in _SAME_FROM_ARROW for kind in relation.types)):
                return relation.df()
            return duckdb_frame(relation.to_arrow_table())

    def per_image(self, submission_ids: list[str], where: str = "TRUE", params: list | None = None) -> pd.DataFrame:
        """Per-image rows of some submissions (``where``: a SQL condition with ``?`` placeholders)."""
        frame = self._read_per_image(submission_ids, "SELECT * FROM read_parquet(?, union_by_name = true) "
                                     f"WHERE {where}", params or [])
        return frame if frame is not None else pd.DataFrame(columns=list(results.PER_IMAGE.names))

    def prompts_of(self, submission_id: str) -> pd.DataFrame:
        """The prompts a submission's images answer: prompt_id and the slice columns that say what it is."""
        frame = self._read_per_image([submission_id], "SELECT DISTINCT prompt_id, country, coalesce(concept, "
                                     "domain, kind) AS what FROM read_parquet(?) ORDER BY prompt_id", [])
        return frame if frame is not None else pd.DataFrame(columns=["prompt_id", "country", "concept", "kind"])

    def images_of(self, submission_ids: list[str]) -> pd.DataFrame:
        """The images these submissions' per-image rows name, one row each: submission_id, model, prompt_id, seed,
        image_path, country (the culture the prompt names; rows without one left out). What the arena draws from."""
        columns = ["submission_id", "model", "prompt_id", "seed", "image_path", "country"]
        frame = self._read_per_image(submission_ids, f"SELECT DISTINCT {', '.join(columns)} FROM read_parquet(?, "
                                     "union_by_name = true) WHERE image_path IS NOT NULL AND country IS NOT NULL "
                                     "AND country <> '' ORDER BY submission_id, prompt_id, seed", [])
        return frame if frame is not None else pd.DataFrame(columns=columns)

    def image_values(self, submission_ids: list[str]) -> pd.DataFrame:
        """Every scored per-image value of these submissions: submission_id, image_path, metric, value (rows without
        an image or a value left out). What the arena measures each metric's agreement with the votes on."""
        columns = ["submission_id", "image_path", "metric", "value"]
        frame = self._read_per_image(submission_ids, f"SELECT {', '.join(columns)} FROM read_parquet(?, "
                                     "union_by_name = true) WHERE image_path IS NOT NULL AND value IS NOT NULL "
                                     "AND isfinite(value)", [])
        return frame if frame is not None else pd.DataFrame(columns=columns)

    def _read_per_image(self, submission_ids: list[str], sql: str, params: list) -> pd.DataFrame | None:
        """``sql`` (its first ``?`` is the file list) over these submissions' per-image files; None if none has
        one. Only submissions the catalog has loaded are read; those known from the release only are fetched
        first (``fetch``). A file that cannot be read has its folder quarantined and the query runs again over
        the others; a file removed meanwhile (a re-run, a deletion) is looked for again, up to
        ``VANISHED_RETRIES`` times."""
        with self.lock:
            released = [s for s in submission_ids if s in self.from_release]
        if released and self.fetch is not None:  # outside the lock: a download must not hold up other views
            self.fetch(released)
        with self.lock:
            known = [s for s in submission_ids if s in self.loaded]  # ids from outside never name a path
            vanished = 0
            while True:
                files = [path for path in (self.store.results_folder(s) / layout.PER_IMAGE for s in known)
                         if path.exists()]
                if not files:
                    return None
                try:
                    return self.con.execute(sql, [[str(path) for path in files], *params]).df()
                except duckdb.IOException:
                    vanished += 1
                    if vanished > VANISHED_RETRIES:
                        raise
                except duckdb.Error:
                    damaged = {p.parent.name: reason for p in files if (reason := _damage(p.parent, (p.name,)))}
                    if not damaged:
                        raise  # the files read: the query itself is wrong
                    for name, reason in damaged.items():
                        self._set_aside(name, reason)
                    self._forget(set(damaged))

    def per_prompt(self, submission_ids: list[str], metric: str) -> pd.DataFrame:
        """The per-prompt values (slice ``prompt``) of one metric for these submissions: submission_id,
        prompt_id, value (null values left out)."""
        return self._prompt_rows(submission_ids, "metric = ?", [metric])

    def track_prompts(self, submission_ids: list[str], track: str) -> pd.DataFrame:
        """The per-prompt rows of every metric of a track for these submissions, in one read: submission_id,
        metric, prompt_id, value, excluded. A prompt a submission refused or missed has none; one where a metric has
        no value has its row with a null value: undefined by the metric's own rule where ``excluded`` is 0 (VR where
        nothing was recognised), not scored where it is above 0 (``benchmark.aggregate``)."""
        key = (self.version, tuple(submission_ids), track)
        with self.lock:
            if self._track_rows is not None and self._track_rows[0] == key:
                return self._track_rows[1]
            rows = self._prompt_rows(submission_ids, "track = ?", [track],
                                     "submission_id, metric, slice_value, value, excluded", values_only=False)
            if self._keeping:
                self._track_rows = (key, rows)
            return rows

    @contextlib.contextmanager
    def keeping_track_rows(self) -> Iterator[None]:
        """Within, the last ``track_prompts`` read is kept for the next with the same submissions (a recompute
        reads each metric of a track in turn: one read, not one per metric); dropped after (at 1,000 submissions
        a track's rows are hundreds of MB)."""
        with self.lock:
            self._keeping += 1
        try:
            yield
        finally:
            with self.lock:
                self._keeping -= 1
                if not self._keeping:
                    self._track_rows = None

    def cached(self, key: tuple, compute: Callable[[], object]) -> object:
        """``compute()``, kept under ``key`` until the catalog's results change (a folder or release loaded or
        dropped): what a ranking reads of every submission of a protocol, for the next view."""
        with self.lock:
            state = self.version
            if self._state != state:
                self._memo, self._state = {}, state
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]

    def _prompt_rows(self, submission_ids: list[str], where: str, params: list,
                     select: str = "submission_id, slice_value, value", values_only: bool = True) -> pd.DataFrame:
        """Per-prompt rows (slice ``prompt``; with ``values_only``, those whose value is not null; ``where``: a
        condition with ``?`` placeholders) of these submissions: ``select``'s columns, slice_value named prompt_id
        (default submission_id, prompt_id, value). Only submissions the catalog has loaded are read (from the
        release, those it has them from); a folder removed meanwhile is skipped (its files are looked for again, up
        to ``VANISHED_RETRIES`` times)."""
        select = select.replace("slice_value", "slice_value AS prompt_id")
        where = f"{where} AND value IS NOT NULL" if values_only else where
        with self.lock:
            known = sorted(set(submission_ids) & self.loaded - self.from_release)  # ids from outside never name a path
            released = self._from_release_file(
                f"SELECT {select} FROM read_parquet(?) WHERE part = 'aggregates' AND slice = 'prompt' AND {where} "
                "AND list_contains(?, submission_id)",
                [*params, sorted(set(submission_ids) & self.from_release)])
            for attempt in range(VANISHED_RETRIES + 1):
                files = [str(p) for p in (self.store.results_folder(s) / layout.AGGREGATES for s in known) if p.exists()]
                if not files:
                    break
                try:
                    frame = self.con.execute(
                        f"SELECT {select} FROM read_parquet(?, union_by_name = true) WHERE slice = 'prompt' AND "
                        f"{where}", [files, *params]).df()
                    return frame if released is None else pd.concat([released, frame], ignore_index=True)
                except duckdb.IOException:
                    if attempt == VANISHED_RETRIES:
                        raise
        columns = [c.split()[-1] for c in select.removeprefix("DISTINCT ").split(", ")]
        return released if released is not None else pd.DataFrame(columns=columns)

    def _from_release_file(self, sql: str, params: list) -> pd.DataFrame | None:
        """``sql`` (its first ``?`` the release file) over the release; None when none of the submissions asked
        for (``params``' last item) is served from it."""
        if not params[-1] or self.release is None:
            return None
        return self.con.execute(sql, [str(self.release[1]), *params]).df()

    def prompt_slices(self, submission_ids: list[str], track: str, slice_name: str) -> pd.Series | None:
        """prompt_id -> its value of slice ``slice_name`` (e.g. country, or country_concept "Japan / cuisine"),
        for every prompt any of these submissions has a row of on ``track`` (a prompt's slice is its dataset's,
        the same in every submission of a protocol, so each submission adds the prompts it answered); None for a
        slice the rows do not hold, or without such rows."""
        columns = CROSSED.get(slice_name, (slice_name,) if slice_name in SLICES else ())
        if not columns:
            return None
        key = f" || '{CROSS_SEPARATOR}' || ".join(f'CAST("{c}" AS VARCHAR)' for c in columns)
        with self.lock:  # submissions served from the release: their per-prompt rows say which prompts
            released = self._from_release_file(
                f"SELECT DISTINCT slice_value AS prompt_id, {key} AS value FROM read_parquet(?) WHERE part = "
                "'aggregates' AND slice = 'prompt' AND track = ? AND list_contains(?, submission_id)",
                [track, sorted(set(submission_ids) & self.from_release)])
            folders = [s for s in submission_ids if s not in self.from_release]
        frame = None
        if folders:
            table = self.cached(("slice columns", tuple(folders), track), lambda: self._slice_columns(folders, track))
            if table is not None and set(columns) <= set(table.columns):
                first, *others = columns  # a crossed value is null where any of its parts is
                value = table[first].str.cat([table[c] for c in others], sep=CROSS_SEPARATOR) if others else table[first]
                frame = pd.DataFrame({"prompt_id": table["prompt_id"], "value": value})
        found = [f for f in (released, frame) if f is not None and len(f)]
        if not found:
            return None
        rows = pd.concat(found, ignore_index=True).dropna().drop_duplicates("prompt_id")
        return rows.set_index("prompt_id")["value"]

    def _slice_columns(self, submission_ids: list[str], track: str) -> pd.DataFrame | None:
        """Every slice column (``SLICES``, as text) of each prompt these submissions have per-image rows of on
        ``track``, read in one pass over their files (``prompt_slices`` derives each slice from it); None when none
        has such a file."""
        probe = self._read_per_image(submission_ids, "SELECT * FROM read_parquet(?, union_by_name = true) LIMIT 0", [])
        if probe is None:
            return None
        present = [c for c in SLICES if c in probe.columns]
        cast = "".join(f', CAST("{c}" AS VARCHAR) AS "{c}"' for c in present)
        return self._read_per_image(submission_ids, f"SELECT DISTINCT prompt_id{cast} FROM read_parquet(?, "
                                    "union_by_name = true) WHERE track = ?", [track])

    def dataset_prompts(self, protocol: dict) -> pd.DataFrame | None:
        """The prompt rows (index prompt_id; the prompt set's slice columns) of the dataset a protocol names
        (``dataset``, repo:config:split) at the revision it names (``dataset_revision``: the digest of its prompt
        rows), when this store serves exactly that; else None (another revision, or a dataset not served here)."""
        repo, _, rest = str(protocol.get("dataset") or "").partition(":")
        config, _, split = rest.partition(":")
        if not (repo and config and protocol.get("dataset_revision")):
            return None
        try:
            prompts = self.store.prompts(repo, config, split or "test")
        except (CultureLensError, ValueError, OSError):
            return None
        key = (repo, config, split, id(prompts))
        if key not in self._digests:  # the store's loader caches one PromptSet per dataset folder state
            self._digests[key] = prompts.digest
        return prompts.table if self._digests[key] == protocol["dataset_revision"] else None

    def curves(self, metric: str, submission_ids: list[str] | None = None) -> pd.DataFrame:
        """Model-level curves of one metric (of some submissions, or all)."""
        where = "metric = ?" + (" AND list_contains(?, submission_id)" if submission_ids is not None else "")
        params = [metric] + ([submission_ids] if submission_ids is not None else [])
        return self.query(f"SELECT * FROM curves WHERE {where} ORDER BY model, x", params)


def _stamp(entry: os.DirEntry) -> tuple | None:
    """What tells one results folder from the next under the same name: its inode and its run record's time and
    size (a re-run writes a new folder and renames it into place); None for a folder without a run record (being
    written, or not a results folder)."""
    try:
        run = os.stat(os.path.join(entry.path, layout.RUN))
    except OSError:
        return None
    return entry.inode(), run.st_mtime_ns, run.st_size


# A row of results/<id>/<file> whose submission_id is <id> (parameters: "STORE/results/", "/<file>").
_OWN_ROWS = "filename = concat(?, submission_id, ?)"


def _damage(folder: Path, names: tuple[str, ...]) -> str | None:
    """Why pyarrow cannot read one of these Parquet files of a results folder, or None if all that are there
    read (a file removed meanwhile is not damage)."""
    for name in names:
        try:
            reason = quarantine.unreadable(folder / name, f"results/{folder.name}/{name}")
        except FileNotFoundError:
            continue
        if reason:
            return reason
    return None


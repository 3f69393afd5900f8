"""Rankings computed when results change, read when viewed (issue 55).

Every ranking a view shows is the protocol's whole ranking on one slice value: ``rankings.rank_frame`` over every
row of (track, metric, protocol, slice, value), the submissions that answered none of the value's prompts at the
worst value (``rankings.with_absent``). It is computed once per state of its results and kept here, keyed by that
state: the **group** of the ranking (its track and protocol; a group is what one submission can change) has a
digest of the submissions it holds and what each was loaded from (``Catalog.stamps``: a folder's inode and run
record, or the release's number and the run record's sha256) and of the papers' rows (their file's sha256). A view (``apply``) takes
the stored rows of the models it shows: filters hide rows of the ranking, never change it, so a row's rank, rank
range, score and refusal rate are the same whatever is hidden (ranks are among every model of the protocol).

- **Never stale unsaid.** A stored ranking whose digest is not its group's current one is never shown as current:
  in the app (``background``), a view shows it with ``UPDATING`` in its note while a thread recomputes every
  ranking whose group changed (``start``); elsewhere (the command line, tests) the view that finds it stale
  recomputes it first. A model scored after the ranking shown is listed apart until the update ends.
- **Views made once.** What a view shows (``StoredRankings.view``) is made once per state of the results and rankings
  and read by later calls with the same choices; one made from a previous ranking says so and is kept until the
  recompute ends, and a call while another thread makes the same view waits for it.
- **Incremental.** One new, re-run or deleted submission changes the digest of its own groups only (its tracks
  under its protocols): the rankings of other tracks and protocols are kept as they are.
- **Kept on disk.** A finished group's rankings are written to ``STORE/rankings/`` (one Parquet file per group,
  its digest in the file's metadata; the overall ranking of each track set in a folder of its own) and read back at
  the next start when the digest still matches, so a restart recomputes nothing that did not change.

The overall ranking (win rates per track set) rests on every track's headline group: it is kept under the digest
of all groups (``overall``), computed by ``leaderboard.tables`` which knows its rules.

``read(cat, track, metric, protocol_id, slice_name, slice_value)`` is the one read API for later views (a map, a
model's page): the protocol's stored ranking on one slice value, as ``rankings.rank_frame`` gives its rows.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import json
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import __version__, ranking
from benchmark.atomic import atomic_folder, atomic_write
from benchmark.digests import file_digest
from leaderboard import rankings
from leaderboard.catalog import Catalog
from leaderboard.rankings import COLUMNS, OVERALL, UNRECORDED

# What a ranking gives each row, beside the catalog's columns (``rankings.rank_frame``).
RANKED = ("value", "ci_low", "ci_high", "n", "refused", "not_ranked", "rank", "rank_low", "rank_high", "tie_group")
UPDATING = ("Rankings are updating after a change in the results: this one is from before it, and a model scored "
            "since is listed apart until the update ends (reload in a moment)")
NOT_YET = "scored after the ranking shown: it is ranked when the update ends"
FOLDER = "rankings"  # under the store's root
DIGEST_KEY = b"culturelens.rankings.digest"
NOTE_KEY, TRACK_KEY = b"culturelens.rankings.note", b"culturelens.rankings.track"
# What a heatmap's cell is made of: a row's key (``row_key``), its model, value, time and protocol.
CELL = ("submission_id", "model", "provenance", "citation", "source_table", "protocol_id", "slice_value", "scored_at",
        "value")
VIEWS = 256  # views kept per state (``StoredRankings.view``)
MAKING_WAIT = 60  # seconds a view waits for another thread making the same one before making its own
RULES = (ranking.RULE_VERSION, __version__)  # a file kept by other rules or code is computed again
STOP_WAIT = 30  # seconds the interpreter's exit waits for a rankings thread to reach its next checkpoint

log = logging.getLogger("culturelens.stored_rankings")


class Stopped(BaseException):
    """Raised in a rankings thread at its next checkpoint (a ranking, a group, a view) once ``stop`` was asked: the
    thread ends there without logging. A ``BaseException``, so that no ``except Exception`` on the way takes it for
    a bug."""


_THREADED: weakref.WeakSet = weakref.WeakSet()  # the stored rankings that started a thread (``start``)


def stop_threads(root: Path | None = None) -> None:
    """Stop each rankings thread (of the store at ``root``; default: of every store) at its next checkpoint and wait
    for it (``StoredRankings.stop``): when the service stops (``leaderboard.service``), and at the interpreter's exit
    for any other embedder (registered again when a thread starts, so it runs before what was registered earlier:
    the download folder's removal, ``leaderboard.downloads``). A daemon thread left running while Python tears down
    the modules it runs failed in pandas' or Arrow's code (a SystemError, a crash) and wrote a traceback into a
    stopped Space's log."""
    for stored in list(_THREADED):
        if root is None or stored.cat.store.root == root:
            stored.stop(STOP_WAIT)


_SHARED = (str, int, float, bool, bytes, type(None))  # immutable: a view's copy shares them


def own_copy(value: object) -> object:
    """A copy of a kept view that no change by its caller can reach the kept one through, at a fraction of
    ``copy.deepcopy``'s cost on a thousand records (which copies every scalar): lists, tuples and dicts rebuilt,
    pandas objects copied lazily (copy-on-write, always on since pandas 3: a change to the copy copies first),
    immutable scalars shared; anything else deep-copied."""
    kind = type(value)
    if kind in _SHARED:
        return value
    if kind is dict:
        return {k: v if type(v) in _SHARED else own_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SHARED else own_copy(v) for v in value]
    if kind is tuple:
        return tuple(own_copy(v) for v in value)
    if kind in (pd.DataFrame, pd.Series):
        return value.copy(deep=False)
    return copy.deepcopy(value)


@dataclass
class Stored:
    """One protocol's ranking on one slice value: ``rows`` (index: ``row_key``; columns ``RANKED``), its note, the
    digest of the group it was computed from, and ``updating``: True when that digest is no longer the group's (the
    app shows it while recomputing)."""

    rows: pd.DataFrame
    note: str
    digest: str
    updating: bool = False


def row_key(frame: pd.DataFrame) -> pd.Series:
    """What a ranked row is stored under: its submission, else (a paper's row) its model, provenance, paper and
    table. The papers' keys are made for their rows only (a handful of a ranking's thousand)."""
    key = frame["submission_id"]
    papers = key.isna().to_numpy()
    if not papers.any():
        return key
    rows = frame.loc[papers]
    paper = "paper:" + rows["model"].astype(str)
    for column in ("provenance", "citation", "source_table"):
        paper = paper + "|" + rows[column].astype(str)
    out = key.to_numpy(dtype=object, copy=True)
    out[papers] = paper.to_numpy(dtype=object)
    return pd.Series(out, index=frame.index, dtype=key.dtype, name=key.name)


def _digest(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


class StoredRankings:
    """The stored rankings of one catalog (``of``). ``background``: recompute in a thread and show the previous
    ranking meanwhile (the app); else a stale one is recomputed when read. ``everything``: computes every ranking
    (``leaderboard.tables.recompute``), what the thread runs."""

    def __init__(self, cat: Catalog, background: bool = False, everything: Callable[[Catalog], object] | None = None,
                 persist: bool = True):
        self.cat, self.background, self.everything = cat, background, everything
        self.folder = cat.store.root / FOLDER if persist else None
        self.lock = threading.RLock()
        self.entries: dict[tuple, Stored] = {}  # (track, metric, protocol_id, slice, value) -> its ranking
        self.overalls: dict[str, tuple[str, object]] = {}  # track set -> (digest, ``tables.overall``'s answer)
        self._groups: tuple[int, dict[tuple[str, str], str]] | None = None
        self._disk: dict[tuple[str, str], str] = {}  # group -> the digest its file was last looked for at
        self._written: dict[tuple[str, str], str] = {}  # group -> the digest of what its file holds
        self._thread: threading.Thread | None = None
        # group -> (digest, its file's table (index: row key), (metric, slice, value) -> row positions, -> note)
        self._read: dict[tuple[str, str], tuple[str, pd.DataFrame, dict, dict]] = {}
        self._overall_disk: dict[str, str] = {}  # track set -> the digest its folder was last looked for at
        self._views: OrderedDict[tuple, object] = OrderedDict()  # (view, its arguments) -> what it showed
        self._views_state: tuple | None = None  # the state those views were made at
        self._making: dict[tuple, threading.Event] = {}  # view key -> set when the thread making it ends
        self.last_recompute: float | None = None  # seconds the last full recompute took
        self.runs = 0  # rankings published (``publish``, a run's end): what a view's cache keys on with the results
        self.after: Callable[[], object] | None = None  # run by the thread when a recompute ends: the first views
        self._running = False  # a thread recomputes, or runs ``after``
        self._phase = ""  # "after" while it runs ``after``
        self._again = False  # a previous ranking was shown during ``after``: the thread runs once more
        self._stopping = False  # ``stop`` was asked: the thread ends at its next checkpoint, none starts again

    # --- the state rankings are computed from ------------------------------------------------------------------
    def groups(self) -> dict[tuple[str, str], str]:
        """(track, protocol_id) -> the digest of what its rankings rest on: its scored submissions with their stamps,
        and the papers' rows; computed once per catalog version."""
        self.cat.refresh()
        with self.cat.lock:
            version = self.cat.version
            if self._groups is not None and self._groups[0] == version:
                return self._groups[1]
            frame = self.cat.con.execute(
                f"SELECT track, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, list(DISTINCT submission_id "
                "ORDER BY submission_id) FILTER (WHERE provenance = 'scored' AND submission_id IS NOT NULL) AS ids "
                "FROM aggregates GROUP BY 1, 2").fetchall()
            stamps = dict(self.cat.stamps)
        # The papers' rows by their bytes: the app rewrites the file at each start (``Store.seed_reported``).
        reported = file_digest(self.cat.store.reported) if self.cat.store.reported.exists() else None
        groups = {(track, pid): _digest([RULES, reported, [(s, stamps.get(s)) for s in ids or []]])
                  for track, pid, ids in frame}
        with self.cat.lock:
            if self.cat.version == version:
                self._groups = (version, groups)
        return groups

    def state(self) -> str:
        """The digest of every group: what the overall ranking rests on."""
        return _digest(sorted(self.groups().items()))

    # --- reading ------------------------------------------------------------------------------------------------
    def ranking(self, track: str, metric: str, protocol_id: str, slice_name: str = OVERALL,
                slice_value: str = "all") -> Stored:
        """The protocol's ranking of ``metric`` on one slice value at the current state; in the app, the previous
        one (``updating``) while it is recomputed."""
        key = (track, metric, protocol_id, slice_name, slice_value)
        self.checkpoint()
        digest = self.groups().get((track, protocol_id), "")
        with self.lock:
            self._read_disk(track, protocol_id, digest)
            entry = self._entry(key, digest) or self.entries.get(key) or self._entry(key)
        if entry is not None and entry.digest == digest:
            return entry
        if entry is not None and self._shows_previous():
            self.start()  # its recompute (once more after the running one's first views)
            return Stored(entry.rows, entry.note, entry.digest, updating=True)
        return self.compute(key, digest)

    def current(self, key: tuple) -> bool:
        """Compute ``key``'s ranking now if the one kept is not of its group's current state; whether it did."""
        digest = self.groups().get((key[0], key[2]), "")
        with self.lock:
            self._read_disk(key[0], key[2], digest)
            if self._fresh(key, digest):
                return False
        self.compute(key, digest)
        return True

    def _fresh(self, key: tuple, digest: str) -> bool:
        """Whether ``key``'s ranking at ``digest`` is kept, in memory or in its group's file as read."""
        entry = self.entries.get(key)
        if entry is not None and entry.digest == digest:
            return True
        read = self._read.get((key[0], key[2]))
        return read is not None and read[0] == digest and key[1:2] + key[3:] in read[2]

    def _entry(self, key: tuple, digest: str | None = None) -> Stored | None:
        """``key``'s ranking at ``digest`` if kept: from memory, else taken from its group's file as read (each
        ranking's rows taken out of the file's table when first asked for); ``None``: the file's, whatever its
        state (a previous ranking, to show while the current one is computed)."""
        entry = self.entries.get(key)
        if entry is not None and entry.digest == digest:
            return entry
        read = self._read.get((key[0], key[2]))
        if read is None or (digest is not None and read[0] != digest) or key[1:2] + key[3:] not in read[2]:
            return None
        held, table, positions, notes = read
        where = key[1:2] + key[3:]
        entry = self.entries[key] = Stored(table.iloc[positions[where]], notes[where], held)
        return entry

    def compute(self, key: tuple, digest: str, frame: pd.DataFrame | None = None,
                whole: pd.DataFrame | None = None) -> Stored:
        """Rank ``key``'s rows afresh (``rankings.rank_frame`` over every row of the protocol on the slice value,
        the absent ones included) and keep the ranking under ``digest``. ``frame`` and ``whole``: the catalog's
        rows of the key, and of its metric and protocol on the whole prompt set, when the caller read them."""
        track, metric, protocol_id, slice_name, slice_value = key
        if frame is None:
            frame = self.cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? "
                                   f"AND slice_value = ? AND coalesce(protocol_id, '{UNRECORDED}') = ?",
                                   [track, metric, slice_name, slice_value, protocol_id])
        frame = frame.reset_index(drop=True)
        if protocol_id == UNRECORDED:
            out, note = rankings.listed(frame, "scored before protocols were recorded"), ""
        else:
            whole = (rankings.overall_rows(self.cat, track, metric, protocol_id) if whole is None else
                     whole[whole["provenance"].eq("scored")].reset_index(drop=True))
            frame = rankings.with_absent(frame, whole, slice_name, slice_value)
            out, _, note = rankings.rank_frame(self.cat, frame, track, metric, slice_name, slice_value)
        rows = out.set_index(row_key(out))[list(RANKED)]
        entry = Stored(rows[~rows.index.duplicated()], note, digest)
        with self.lock:
            self.entries[key] = entry
        return entry

    def overall(self, track_set: str, compute: Callable[[], object], state: str | None = None
                ) -> tuple[object, bool]:
        """``compute()`` (the overall ranking of one track set) as of the current state, and whether it is from
        before the latest change (the app, while recomputing). ``state``: the ``state()`` taken before the rows
        ``compute`` ranks were read (default: now), so that a value is never kept under a later state than its
        rows'."""
        digest = self.state() if state is None else state
        with self.lock:
            kept = self.overalls.get(track_set)
        if kept is not None and kept[0] == digest:
            return kept[1], False
        if self._overall_disk.get(track_set) != digest and (read := self._read_overall(track_set, digest)):
            if read[0] == digest or kept is None:  # current, or the previous one (after a restart)
                with self.lock:
                    self.overalls[track_set] = kept = read
            if read[0] == digest:
                return read[1], False
        if kept is not None and self._shows_previous():
            self.start()  # its recompute (once more after the running one's first views)
            return kept[1], True
        value = compute()
        with self.lock:
            self.overalls[track_set] = (digest, value)
        self._write_overall(track_set, digest, value)
        return value, False

    def view(self, name: str, arguments: tuple, make: Callable[[], object],
             kept: Callable[[object], bool] | None = None) -> object:
        """What view ``name`` shows for ``arguments`` (``make()``), made once per state of the results and of the
        rankings (the catalog's version, the recomputes ended, the metric agreement tables) and read by every later
        call with the same arguments: a click on a view someone already opened is a lookup, and a call while another
        thread makes the same view waits for it rather than making it twice (20 pages redrawn when results land make
        it once). The ``VIEWS`` most recent are kept (arguments are a visitor's: their number is bounded, not their
        variety); each caller gets its own copy (``own_copy``). ``kept``: whether what was made still holds (files on
        disk), else it is made again. A view made from a previous ranking (while one is recomputed) says it is
        updating, and is kept until that recompute ends (``runs`` changes the state), which shows the new one."""
        self.checkpoint()
        self.cat.refresh()
        # The metric agreement a note quotes (``Store.meta_evaluation``) is read from its folder's files.
        state = (self.cat.version, self.runs, _stamps(self.cat.store.meta_eval))
        key = (name, json.dumps(arguments, sort_keys=True, default=repr))
        with self.lock:
            if self._views_state != state:
                self._views.clear()
                self._making.clear()
                self._views_state = state
            if (found := self._kept(key, kept)) is not None:
                return own_copy(found)
            other = self._making.get(key)
            if other is None:
                mine = self._making[key] = threading.Event()
        if other is not None:  # another thread makes it: its answer when it ends (or ours, if it kept none)
            other.wait(MAKING_WAIT)
            with self.lock:
                found = self._kept(key, kept) if self._views_state == state else None
            return own_copy(found) if found is not None else own_copy(make())
        try:
            made = make()
            with self.lock:
                if self._views_state == state:
                    self._views[key] = made
                    while len(self._views) > VIEWS:
                        self._views.popitem(last=False)
        finally:
            with self.lock:
                if self._making.get(key) is mine:
                    del self._making[key]
            mine.set()
        return own_copy(made)

    def _kept(self, key: tuple, kept: Callable[[object], bool] | None) -> object | None:
        """The view kept under ``key`` at the current state if it still holds (``kept``), marked most recent."""
        if key in self._views and (kept is None or kept(self._views[key])):
            self._views.move_to_end(key)
            return self._views[key]
        return None

    def forget_views(self) -> None:
        """Drop every view made (``view``), as a change of the results does: ``benchmarks/app_speed.py`` times the
        first call after one."""
        with self.lock:
            self._views.clear()

    def _shows_previous(self) -> bool:
        """Whether a stale ranking is shown (saying it is updating) rather than computed now: in the app, to every
        thread but the one recomputing."""
        return self.background and threading.current_thread() is not self._thread

    # --- recomputing in the background --------------------------------------------------------------------------
    def start(self) -> None:
        """Recompute every ranking whose group changed, in a thread (one at a time; asked while that thread makes
        the first views, it recomputes once more after them)."""
        with self.lock:
            if self.everything is None or self._stopping:
                return
            if self._running:
                self._again = self._again or self._phase == "after"
                return
            self._running, self._phase = True, ""
            atexit.unregister(stop_threads)  # registered once, after what was registered before this thread
            atexit.register(stop_threads)
            _THREADED.add(self)
            self._thread = threading.Thread(target=self._run, name="culturelens-rankings", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """End the thread at its next checkpoint (``checkpoint``: before each ranking, each group and each view it
        makes) and wait for it up to ``timeout`` seconds; no thread starts after this."""
        with self.lock:
            self._stopping = True
        self.wait(timeout)

    def checkpoint(self) -> None:
        """In the rankings thread once ``stop`` was asked: raise ``Stopped``, which ends it."""
        if self._stopping and threading.current_thread() is self._thread:
            raise Stopped

    def _run(self) -> None:
        running = True
        try:
            while running:
                started = time.perf_counter()
                try:
                    while True:
                        state = self.state()
                        self.everything(self.cat)
                        if self.state() == state:
                            break
                except Exception:  # a bug: logged, and the next view that finds a stale ranking starts a new run
                    log.exception("recomputing the rankings failed")
                with self.lock:
                    self.last_recompute = time.perf_counter() - started
                    self.runs += 1  # a new state: the views made from the previous rankings are dropped
                    self._phase = "after"
                if self.after is not None:
                    try:
                        self.after()
                    except Exception:  # a bug: logged; the views are then made when first opened
                        log.exception("making the first views after a recompute failed")
                with self.lock:  # ends with the same lock ``start`` asks under: no request for a run is lost
                    running = self._running = self._again and not self._stopping
                    self._again, self._phase = False, ""
        except Stopped:  # ``stop``: the interpreter exits
            pass
        finally:
            if running:  # something escaped: the next view that finds a stale ranking starts a new run
                with self.lock:
                    self._running, self._phase = False, ""

    def publish(self) -> None:
        """Called by ``everything`` (``tables.recompute``) once the rankings the first page shows are current: in
        the thread, the views made before are dropped (``runs``), so the pages, which redraw when it changes, show
        the new ones without waiting for every other ranking (an added model changes every ranking of its protocol:
        4 minutes at 1,000 submissions); a view of one not yet recomputed says it is updating until the run ends."""
        if threading.current_thread() is self._thread:
            with self.lock:
                self.runs += 1

    def recomputing(self) -> bool:
        """Whether the thread is recomputing rankings (or making the first views after it) now."""
        return self._running

    def wait(self, timeout: float | None = None) -> None:
        """Until the thread recomputing (if any) ends."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def refresh_group(self, track: str, protocol_id: str, keys: list[tuple]) -> int:
        """Recompute the rankings of one group whose digest changed (``keys``: every ranking it has now) and write
        its file; returns how many were computed (0 when the group was current)."""
        self.checkpoint()
        digest = self.groups().get((track, protocol_id), "")
        with self.lock:
            self._read_disk(track, protocol_id, digest)
            todo = [k for k in keys if not self._fresh(k, digest)]
            dropped = [k for k in self.entries if k[0] == track and k[2] == protocol_id and k not in set(keys)]
            for key in dropped:  # slice values no longer there
                del self.entries[key]
        if todo:  # the group's rows read once, each ranking's taken from them
            rows = self.cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND "
                                  f"coalesce(protocol_id, '{UNRECORDED}') = ?", [track, protocol_id])
            parts = {name: part for name, part in rows.groupby(["metric", "slice", "slice_value"], sort=False)}
            wholes = {name: part for name, part in rows[rows["slice"].eq(OVERALL)].groupby("metric", sort=False)}
            for key in todo:
                self.checkpoint()
                self.compute(key, digest, parts.get(key[1:2] + key[3:], rows.iloc[:0]),
                             wholes.get(key[1], rows.iloc[:0]))
        if todo or dropped or self._written.get((track, protocol_id)) != digest:
            self._write_disk(track, protocol_id, digest, keys)
        return len(todo)

    # --- on disk ------------------------------------------------------------------------------------------------
    def _file(self, track: str, protocol_id: str):
        return self.folder / f"{_digest([track, protocol_id])}.parquet"

    def _read_disk(self, track: str, protocol_id: str, digest: str) -> None:
        """Look at a group's file once per ``digest`` asked for: the rankings it holds are read (unless those are the
        ones read already), current if they are of ``digest``, else the previous ones, which a view shows while they
        are recomputed (``ranking``; after a restart, the results having changed meanwhile)."""
        group = (track, protocol_id)
        if self.folder is None or self._disk.get(group) == digest:
            return
        self._disk[group] = digest  # looked at, whatever it holds
        path = self._file(track, protocol_id)
        try:
            held = (pq.read_schema(path).metadata or {}).get(DIGEST_KEY, b"").decode()
            if group in self._read and self._read[group][0] == held:
                table = None
            else:
                table = pq.read_table(path)
                held = (table.schema.metadata or {}).get(DIGEST_KEY, b"").decode()  # the file's, if just replaced
        except FileNotFoundError:
            return
        except (OSError, pa.ArrowInvalid) as error:  # written again at the group's next recompute
            log.warning("stored rankings %s not read: %s", path.name, error)
            return
        if held == digest:
            self._written[group] = digest
        if table is None or not held:
            return
        frame = table.to_pandas(use_threads=False)  # as ``Catalog.query``: no pool work in the daemon thread
        where = frame.groupby(["metric", "slice", "slice_value"], sort=False)
        notes = {name: str(frame["note"].iat[rows[0]]) for name, rows in where.indices.items()}
        self._read[group] = (held, _typed(frame.set_index("key")[list(RANKED)]), where.indices, notes)

    def _write_disk(self, track: str, protocol_id: str, digest: str, keys: list[tuple]) -> None:
        """Write the group's rankings at ``digest`` (``keys``: every one it has) to its file, in one table."""
        if self.folder is None:
            return
        with self.lock:
            kept = {key[1:2] + key[3:]: entry for key in keys if (entry := self._entry(key, digest)) is not None}
        if not kept:
            return
        frame = pd.concat({k: e.rows for k, e in kept.items()}, names=["metric", "slice", "slice_value", "key"])
        notes = pd.Series({k: e.note for k, e in kept.items()}, dtype=object)
        frame = frame.reset_index()
        frame["note"] = notes.reindex(pd.MultiIndex.from_frame(frame[["metric", "slice", "slice_value"]])).to_numpy()
        frame = frame.assign(not_ranked=frame["not_ranked"].astype(str),
                             **{c: pd.to_numeric(frame[c], errors="coerce").astype(float)
                                for c in RANKED if c != "not_ranked"})
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), DIGEST_KEY: digest.encode()})
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self._file(track, protocol_id), lambda path: pq.write_table(table, path))
        with self.lock:
            self._disk[(track, protocol_id)] = self._written[(track, protocol_id)] = digest


    def _overall_folder(self, track_set: str):
        return self.folder / f"overall-{_digest([track_set])}"

    def _read_overall(self, track_set: str, digest: str
                      ) -> tuple[str, tuple[pd.DataFrame, dict[str, pd.DataFrame]]] | None:
        """The overall ranking of ``track_set`` (``tables.overall``'s table and its rows per track) as its folder
        holds it, with the state it was written at (``digest``: the current one, or a previous one to show while it
        is recomputed); None when there is none, or it cannot be read (computed again)."""
        if self.folder is None:
            return None
        self._overall_disk[track_set] = digest  # looked at once per state, whatever it holds
        folder = self._overall_folder(track_set)
        try:
            tables = {path.name: pq.read_table(path) for path in sorted(folder.glob("*.parquet"))}
        except (OSError, pa.ArrowInvalid) as error:
            log.warning("stored overall ranking %s not read: %s", folder.name, error)
            return None
        meta = {name: table.schema.metadata or {} for name, table in tables.items()}
        held = {m.get(DIGEST_KEY, b"").decode() for m in meta.values()}
        if "wide.parquet" not in tables or len(held) != 1 or "" in held \
                or any(TRACK_KEY not in m for name, m in meta.items() if name != "wide.parquet"):
            return None  # not as written here: computed again
        wide = tables.pop("wide.parquet").to_pandas(use_threads=False)
        wide.attrs["note"] = meta["wide.parquet"].get(NOTE_KEY, b"").decode()
        ranked = {meta[name][TRACK_KEY].decode(): table.to_pandas(use_threads=False) for name, table in tables.items()}
        return held.pop(), (wide, ranked)

    def _write_overall(self, track_set: str, digest: str, value: tuple[pd.DataFrame, dict[str, pd.DataFrame]]
                       ) -> None:
        """Write the overall ranking of ``track_set`` at ``digest``: its table and each track's rows, one Parquet
        file each in one folder (replaced whole), the digest in every file's metadata."""
        if self.folder is None:
            return
        wide, ranked = value

        def table(frame: pd.DataFrame, extra: dict[bytes, bytes]) -> pa.Table:
            out = pa.Table.from_pandas(frame.copy().reset_index(drop=True).pipe(_without_attrs), preserve_index=False)
            return out.replace_schema_metadata({**(out.schema.metadata or {}), DIGEST_KEY: digest.encode(), **extra})

        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_folder(self._overall_folder(track_set), replace=True) as tmp:
            pq.write_table(table(wide, {NOTE_KEY: str(wide.attrs.get("note", "")).encode()}), tmp / "wide.parquet")
            for i, (track, rows) in enumerate(ranked.items()):
                pq.write_table(table(rows, {TRACK_KEY: track.encode()}), tmp / f"ranked-{i}.parquet")


def _stamps(folder) -> tuple:
    """The names, sizes and times of a folder's files (empty when it is absent): what changes when one is written."""
    try:
        return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder)))
    except FileNotFoundError:
        return ()


def _without_attrs(frame: pd.DataFrame) -> pd.DataFrame:
    frame.attrs = {}
    return frame


def _typed(rows: pd.DataFrame) -> pd.DataFrame:
    """Stored columns as ``rank_frame`` types them (whole numbers nullable)."""
    whole = {c: pd.array(rows[c].to_numpy(float), dtype="Float64").astype("Int64")
             for c in ("rank", "rank_low", "rank_high", "tie_group", "n")}
    return rows.assign(**whole, not_ranked=rows["not_ranked"].fillna("").astype(str))


def of(cat: Catalog) -> StoredRankings:
    """The stored rankings of ``cat`` (made on first use: recomputed when read; the app sets its own up with
    ``attach``)."""
    with cat.lock:
        stored = getattr(cat, "stored_rankings", None)
        if stored is None:
            stored = cat.stored_rankings = StoredRankings(cat)
        return stored


def attach(cat: Catalog, **options) -> StoredRankings:
    """Set up ``cat``'s stored rankings with ``options`` (``StoredRankings``'s)."""
    with cat.lock:
        cat.stored_rankings = StoredRankings(cat, **options)
        return cat.stored_rankings


def apply(cat: Catalog, frame: pd.DataFrame, track: str, metric: str, slice_name: str = OVERALL,
          slice_value: str = "all") -> tuple[pd.DataFrame, str]:
    """``frame``'s rows (one protocol of ``metric`` on one slice value, as filters left them) with the protocol's
    stored ranking's numbers (``RANKED``), ranked rows first by rank (``rankings.ordered``), and its note (saying
    when it is updating)."""
    if frame.empty:
        return rankings.listed(frame, ""), ""
    entry = of(cat).ranking(track, metric, frame["protocol_id"].iloc[0], slice_name, slice_value)
    out = frame.reset_index(drop=True)
    found = entry.rows.reindex(row_key(out))
    missing = found["not_ranked"].isna().to_numpy()
    out = out.assign(**{c: found[c].to_numpy() for c in RANKED})
    if missing.any():  # scored since the ranking shown (updating), or a row it never saw: its own value, apart
        own = frame.reset_index(drop=True)
        for column in ("value", "ci_low", "ci_high", "n"):
            out[column] = out[column].astype(object)
            out.loc[missing, column] = own.loc[missing, column].astype(object)
        out.loc[missing, "not_ranked"] = NOT_YET
    note = entry.note
    if entry.updating:
        note = f"{UPDATING}; {note}" if note else UPDATING
    return rankings.ordered(out), note


def scores(cat: Catalog, frame: pd.DataFrame, track: str, metric: str, slice_name: str, slice_value: str
           ) -> pd.Series:
    """Each row's score as the protocol's stored ranking on one slice value gives it (a heatmap's cell, a chart's
    value), the row's own value where the ranking has none (``rankings.scores``' rule, read, not computed)."""
    own = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    if frame.empty or frame["protocol_id"].iloc[0] == UNRECORDED:
        return own
    entry = of(cat).ranking(track, metric, frame["protocol_id"].iloc[0], slice_name, slice_value)
    found = pd.to_numeric(entry.rows["value"].reindex(row_key(frame)), errors="coerce").to_numpy(float)
    return pd.Series(np.where(np.isnan(found), own.to_numpy(), found), index=frame.index)


def read(cat: Catalog, track: str, metric: str, protocol_id: str, slice_name: str = OVERALL,
         slice_value: str = "all") -> pd.DataFrame:
    """The protocol's stored ranking of ``metric`` on one slice value: every row of it (``rankings.COLUMNS``, the
    submissions that answered none of the value's prompts included) with ``RANKED`` as ``rankings.rank_frame``
    gives them, ranked rows first; ``attrs["note"]`` says what it rests on (and when it is updating). The read API
    for views built on the rankings (a map, a model's page)."""
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      f"slice_value = ? AND coalesce(protocol_id, '{UNRECORDED}') = ?",
                      [track, metric, slice_name, slice_value, protocol_id])
    if protocol_id != UNRECORDED:
        frame = rankings.with_absent(frame, rankings.overall_rows(cat, track, metric, protocol_id), slice_name,
                                     slice_value)
    out, note = apply(cat, frame, track, metric, slice_name, slice_value)
    out.attrs["note"] = note
    return out


def heatmap(cat: Catalog, frame: pd.DataFrame, overall: pd.DataFrame, track: str, metric: str, slice_name: str,
            limit: int) -> pd.DataFrame:
    """Model x slice value matrix of one metric under one protocol (``frame``: its rows on the slice, every value;
    ``overall``: its rows on the whole prompt set; both as the filters left them). Each cell is the value's stored
    ranking's score (``scores``; a submission with no row on a value, having answered none of its prompts, at the
    worst value: ``rankings.absent``). Rows (a model's latest) in the order of the metric's stored ranking on the
    protocol's whole prompt set (for a metric about one label, the prompts naming it), its first ``limit``; where
    that ranking has no row (a paper's table per value only), by the mean over the values."""
    scored = overall[overall["submission_id"].notna()]
    ranked_protocol = frame["protocol_id"].iloc[0] != UNRECORDED
    ranked = apply(cat, overall, track, metric)[0] if ranked_protocol and len(scored) else overall[:0]
    present = {*rankings.who(frame).unique(), *rankings.who(scored).unique()}  # a row on a value, or absent from one
    order = [w for w in rankings.who(ranked).unique() if w in present]
    values, higher = list(frame["slice_value"].unique()), rankings.higher_is_better(frame)
    frame, scored = frame[list(CELL)], scored[list(CELL)]  # what a cell needs: fewer columns to copy
    if len(order) >= limit:  # the rows shown are the ranking's first: only theirs are filled
        frame, scored = (part[rankings.who(part).isin(order[:limit])] for part in (frame, scored))
    cells = frame.assign(_value=frame["slice_value"].map({v: i for i, v in enumerate(values)}).to_numpy(int),
                         _order=np.arange(len(frame)))  # each row's value (its place in ``values``) and its order
    if ranked_protocol and slice_name != OVERALL and len(scored):
        cells = _with_absent(cells, scored, values)
    cells = _latest(cells)
    value = np.empty(len(cells))
    for i, rows in cells.groupby("_value").indices.items():
        value[rows] = scores(cat, cells.iloc[rows], track, metric, slice_name, values[i]).to_numpy()
    cells = cells.assign(value=value)
    matrix = cells.assign(who=rankings.who(cells)).pivot_table(index="who", columns="slice_value", values="value",
                                                               aggfunc="first", dropna=False)
    order = [w for w in order if w in matrix.index]
    rest = matrix.drop(index=order).mean(axis=1).sort_values(ascending=not higher, kind="stable").index
    return matrix.loc[[*order, *rest][:limit]]


def _with_absent(cells: pd.DataFrame, scored: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """``cells`` (one metric and protocol on every value of a slice, numbered: ``_value``, ``_order``) and, for
    each value, a row without a value for each submission of ``scored`` (its rows on the whole prompt set) that
    has none there (``rankings.absent``, for all values at once), after that value's rows in ``scored``'s order."""
    grid = scored.loc[scored.index.repeat(len(values))].assign(
        slice_value=np.tile(values, len(scored)), value=np.nan, _value=np.tile(np.arange(len(values)), len(scored)),
        _order=len(cells) + np.repeat(np.arange(len(scored)), len(values)))
    answered = pd.MultiIndex.from_arrays([cells["slice_value"], cells["submission_id"]])
    absent = grid[~pd.MultiIndex.from_arrays([grid["slice_value"], grid["submission_id"]]).isin(answered)]
    return pd.concat([cells, absent], ignore_index=True)


def _latest(cells: pd.DataFrame) -> pd.DataFrame:
    """Per value (``_value``), each model's latest row (by ``scored_at``, a row without one first; rows equally
    late in ``_order``): a heatmap's cell."""
    cells = cells.sort_values(["_value", "scored_at", "_order"], na_position="first")
    return cells.drop_duplicates(["_value", "model", "provenance"], keep="last").reset_index(drop=True)


def ranked_values(cat: Catalog, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of one track and protocol (any metrics and slices), a model's latest, with each value its stored
    ranking's (``scores``: the protocol's prompts, an unanswered one counting as worst; a submission absent from a
    slice value, having answered none of its prompts, there at the worst value: ``rankings.absent``): what a chart
    draws."""
    parts = []
    for (metric, slice_name), rows in frame.groupby(["metric", "slice"], sort=False):
        protocol, track = rows["protocol_id"].iloc[0], rows["track"].iloc[0]
        overall = rankings.overall_rows(cat, track, metric, protocol) if protocol != UNRECORDED else rows[:0]
        overall = overall[overall["model"].isin(frame["model"])]  # the models the caller's rows (filters) keep
        for value, group in rows.groupby("slice_value", sort=False):
            group = rankings.with_absent(group, overall, slice_name, value).sort_values("scored_at",
                                                                                      na_position="first")
            group = group.drop_duplicates(["model", "provenance"], keep="last")
            parts.append(group.assign(value=scores(cat, group, track, metric, slice_name, value)))
    return pd.concat(parts, ignore_index=True) if parts else frame

"""Leaderboard releases: every scored submission's leaderboard rows in one Parquet file per release.

A results repo holds one folder per submission (``results/<id>/``); an app starting on an empty disk that read
them all would read four files per submission. A release is what the app needs at start in one file, so a fresh
start reads two files whatever the number of submissions (``leaderboard.pickup``)::

    leaderboard/leaderboard-00012.parquet   release 12: ``SCHEMA`` rows, never modified once written
    leaderboard/latest.json                 {"release": 12, "file": "leaderboard/leaderboard-00012.parquet",
                                             "created_at": ..., "submissions": {id: sha256 of its run.json},
                                             "seal": {"key": ..., "hmac": ...}}
    README.md                               the card: config ``leaderboard`` is the newest release's file

A release's rows, column ``part``:

- ``aggregates``: every row of each submission's ``aggregates.parquet`` (``results.AGGREGATE``), the per-prompt
  rows (slice ``prompt``) included: the ranks of the first page are comparisons over them. A per-prompt
  row also carries its prompt's dataset columns (country, continent, concept...: ``SLICE_COLUMNS``, read from
  ``per_image.parquet``), which say which prompts a slice value holds (``Catalog.prompt_slices``);
- ``curves``: each submission's model-level curves (``curves.parquet`` rows whose prompt_id is null: x,
  value, standard_error, ci_low, ci_high, n);

and on every row ``run``, the submission's run.json as written (harness version, backbones, seeds, date, what was
not scored and why), whose sha256 latest.json records. Per-image rows and per-prompt curves stay in the results
folders, fetched when a page needs one submission's detail.

Older releases stay in the repo, so a figure can cite release N; the store keeps only the newest
(``STORE/leaderboard/``). A release read from outside is checked as any file from outside is (``read``): the
names in latest.json, the Parquet schema, the ids and digests; it is parsed, never unpickled. And it must carry the
seal of an app of this queue (``seal``: ``leaderboard.seal.release_seal`` over its number, its file's sha256 and its
submissions, made by ``leaderboard.pickup.publish``): a value changed in its file, or a release someone else wrote,
is refused before it is installed (``leaderboard.pickup.install_latest``).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import layout, results
from benchmark.run_record import RunRecord
from benchmark.atomic import atomic_write_text
from benchmark.datasets.prompts import SLICE_COLUMNS
from benchmark.errors import CultureLensError
from benchmark.layout import is_submission_id
from leaderboard.queue import refusal
from leaderboard.repo import Repo
from leaderboard.store import Store

log = logging.getLogger("culturelens.snapshot")

FOLDER = "leaderboard"
LATEST = f"{FOLDER}/latest.json"
FILE = re.compile(r"leaderboard/leaderboard-(\d{5})\.parquet")
PARTS = ("aggregates", "curves")
SCHEMA = pa.schema([
    ("part", pa.string()),  # "aggregates" or "curves"
    *results.AGGREGATE,
    ("x", pa.float64()),  # curves: the curve's parameter (e.g. k of W1KP_k)
    ("standard_error", pa.float64()),  # curves
    *[(name, pa.string()) for name in SLICE_COLUMNS],  # per-prompt rows: the prompt's dataset columns
    ("run", pa.string()),  # the submission's run.json
])
_RUNS = pa.schema([("run_id", pa.string()), ("run_number", pa.int64()), ("run", pa.string())])
ROW_GROUP = 100_000  # rows sorted by part, slice, metric, submission: a per-prompt read skips most row groups
DIGEST = re.compile(r"[0-9a-f]{64}")


class SnapshotError(CultureLensError, ValueError):
    """A release (latest.json or its Parquet file) is not one this leaderboard can take; says which and why."""


@dataclass(frozen=True)
class Release:
    """What latest.json says: the release's number, its file in the repo and the submissions it holds."""

    number: int
    submissions: dict[str, str]  # id -> sha256 of its run.json
    created_at: str = ""
    seal: dict | None = None  # the publishing app's seal (``leaderboard.seal.release_seal``); None before it is sealed

    @property
    def file(self) -> str:
        return release_file(self.number)

    def to_json(self) -> str:
        return json.dumps({"release": self.number, "file": self.file, "created_at": self.created_at,
                           "submissions": dict(sorted(self.submissions.items())),
                           **({"seal": self.seal} if self.seal is not None else {})}, indent=1)

    @classmethod
    def parse(cls, data: bytes, where: str) -> Release:
        """latest.json's content, checked: a release number, the file name it implies, submission ids and
        sha256 digests. SnapshotError naming ``where`` otherwise."""
        try:
            record = json.loads(data)
        except ValueError as error:
            raise SnapshotError(f"{where}: not readable JSON ({error})") from None
        if not isinstance(record, dict) or not isinstance(record.get("release"), int) or record["release"] < 1 \
                or not isinstance(record.get("submissions"), dict):
            raise SnapshotError(f"{where}: not a release record (release: a number from 1, file, submissions: "
                                "{id: sha256})")
        number = record["release"]
        if record.get("file") != release_file(number) or not FILE.fullmatch(record["file"]):
            raise SnapshotError(f"{where}: release {number}'s file is {release_file(number)!r}, not "
                                f"{str(record.get('file'))[:200]!r}")
        for sid, digest in record["submissions"].items():
            if not is_submission_id(sid):
                raise SnapshotError(f"{where}: {sid[:200]!r} is not a submission id (letters, digits, '-' and '_')")
            if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                raise SnapshotError(f"{where}: submission {sid}: {str(digest)[:100]!r} is not a sha256 (64 hex digits)")
        created, sealed = record.get("created_at", ""), record.get("seal")
        return cls(number, dict(record["submissions"]), created if isinstance(created, str) else "",
                   sealed if isinstance(sealed, dict) else None)


def release_file(number: int) -> str:
    """Release ``number``'s file in the repo: ``leaderboard/leaderboard-00012.parquet``."""
    return f"{FOLDER}/leaderboard-{number:05d}.parquet"


def newest_file(repo: Repo, revision: str | None = None) -> int:
    """The highest release number whose file the repo holds (0 for none): release files are never overwritten nor
    removed by the app, so a latest.json naming a lower one was rolled back, and the next release is after it."""
    numbers = [int(match.group(1)) for path in repo.files([f"{FOLDER}/leaderboard-*.parquet"], revision)
               if (match := FILE.fullmatch(path))]
    return max(numbers, default=0)


def run_digest(folder: Path) -> str:
    """The sha256 of a results folder's run.json: what a release records for it."""
    return hashlib.sha256((folder / layout.RUN).read_bytes()).hexdigest()


# --- the store's copy --------------------------------------------------------------------------------------------
def installed(store: Store) -> tuple[Release, Path] | None:
    """The newest release this store holds (``STORE/leaderboard/``) and its file; None without one."""
    latest = store.root / LATEST
    try:
        release = Release.parse(latest.read_bytes(), "STORE/" + LATEST)
    except FileNotFoundError:
        return None
    except SnapshotError as error:  # the store's own file: written only by ``install``
        log.warning("%s", error)
        return None
    file = store.root / release.file
    return (release, file) if file.exists() else None


def current(store: Store, installed: tuple[Release, Path]) -> set[str]:
    """The submissions of the ``installed`` release (``installed``: the release and its file) as they still are:
    each whose run.json in the release answers its submission's current request in the store's queue
    (``leaderboard.queue.base.refusal``). So none re-run since it was built (its rows are the run before's), none
    deleted (the queue no longer knows it), none the queue never issued a lease for (a release someone else
    wrote). A queue whose database is away cannot tell: then all of its submissions count."""
    release, file = installed
    try:
        requests = store.queue.requests()
    except Exception as error:  # noqa: BLE001 - the leaderboard is still served while the queue's database is away
        log.warning("cannot tell which submissions of release %d still stand: %s", release.number, error)
        return set(release.submissions)
    ran = runs(file)
    # The store installed only a release whose seal it checked: its runs are sealed ones.
    return {sid for sid in release.submissions if refusal(ran.get(sid), requests.get(sid), sealed=True) is None}


def runs(file: Path) -> dict[str, RunRecord | None]:
    """Each submission's run.json in the release ``file`` (read once per file: a release is never modified); empty
    for a file that cannot be read (logged)."""
    stat = file.stat()
    return _runs(str(file), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _runs(file: str, mtime_ns: int, size: int) -> dict[str, RunRecord | None]:
    con = duckdb.connect()
    try:
        rows = con.execute("SELECT submission_id, any_value(run) FROM read_parquet(?) GROUP BY 1", [file]).fetchall()
    except duckdb.Error as error:
        log.warning("the runs of %s cannot be read: %s", Path(file).name, str(error).splitlines()[0][:200])
        return {}
    finally:
        con.close()
    return {sid: RunRecord.parse(run) if run is not None else None for sid, run in rows}


def install(store: Store, release: Release, file: Path) -> Path:
    """Move a checked release file (``read``) into the store, then write its latest.json (which switches the
    catalog to it), then remove the store's older release files. Returns where the file now is."""
    target = store.root / release.file
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(file, target)
    atomic_write_text(store.root / LATEST, release.to_json())
    for old in target.parent.glob("leaderboard-*.parquet"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


# --- reading one from outside ------------------------------------------------------------------------------------
def read(file: Path, release: Release) -> None:
    """Check a downloaded release file against its latest.json: exactly ``SCHEMA``, rows of the parts it
    knows, scored rows only, of submissions latest.json names, each with the run.json its digest says.
    SnapshotError with the reason."""
    where = release.file
    try:
        schema = pq.read_schema(file)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise SnapshotError(f"{where}: not a readable Parquet file ({error})") from None
    found = [(f.name, str(f.type)) for f in schema]
    wanted = [(f.name, str(f.type)) for f in SCHEMA]
    if found != wanted:
        odd = [f"{n} {t}" for n, t in found if (n, t) not in wanted][:3] or ["missing columns"]
        raise SnapshotError(f"{where}: not a leaderboard release table (columns {', '.join(odd)}; see "
                            "leaderboard.snapshot.SCHEMA)")
    con = duckdb.connect()
    try:
        bad = con.execute(
            "SELECT count(*) FILTER (WHERE part IS NULL OR NOT list_contains(?, part)), count(*) FILTER (WHERE "
            "part = 'aggregates' AND provenance IS DISTINCT FROM 'scored') FROM read_parquet(?)",
            [list(PARTS), str(file)]).fetchone()
        runs = con.execute("SELECT submission_id, count(DISTINCT run), min(run) FROM read_parquet(?) GROUP BY 1",
                           [str(file)]).fetchall()
    except duckdb.Error as error:
        raise SnapshotError(f"{where}: not readable ({str(error).splitlines()[0][:200]})") from None
    finally:
        con.close()
    if bad[0]:
        raise SnapshotError(f"{where}: {bad[0]} row(s) of no known part (one of {', '.join(PARTS)})")
    if bad[1]:
        raise SnapshotError(f"{where}: {bad[1]} aggregate row(s) not scored by the harness (provenance 'scored')")
    extra = sorted(str(sid) for sid, _, _ in runs if sid not in release.submissions)
    if extra:
        raise SnapshotError(f"{where}: rows of submissions latest.json does not list ({', '.join(extra[:3])})")
    for sid, count, run in runs:
        if count != 1 or hashlib.sha256((run or "").encode()).hexdigest() != release.submissions[sid]:
            raise SnapshotError(f"{where}: submission {sid}: its run.json is not the one latest.json's digest names")


# --- writing one -------------------------------------------------------------------------------------------------
def build(store: Store, ids: list[str], out: Path, previous: tuple[Release, Path] | None = None,
          number: int | None = None) -> Release:
    """Write release ``number`` (default: the one after ``previous``) holding ``ids`` to ``out``: each submission's
    rows from the previous release when it holds the same run.json, else from the store's results folder (which it
    must have: ValueError). Returns its latest.json record."""
    before, old_file = previous if previous else (Release(0, {}), None)
    digests, from_folders = {}, []
    for sid in sorted(set(ids)):
        local = store.results_folder(sid)
        digest = run_digest(local) if store.has_results(sid) else before.submissions.get(sid)
        if digest is None:
            raise ValueError(f"submission {sid}: neither in the store nor in release {before.number}")
        digests[sid] = digest
        if before.submissions.get(sid) != digest:
            from_folders.append(sid)
    kept = sorted(set(digests) - set(from_folders))
    release = Release(number or before.number + 1, digests,
                      datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    con = duckdb.connect()
    try:
        # Each submission's run.json text goes on every row, but the sort carries only its number in ``runs``:
        # with the texts in the sort, 300 folders took 26-34 s instead of 15-18 s (benchmarks/README.md).
        runs = {sid: (store.results_folder(sid) / layout.RUN).read_text(encoding="utf-8") for sid in from_folders}
        if kept:
            runs.update(con.execute(f"SELECT submission_id, any_value(run) FROM read_parquet('{_quoted(old_file)}') "
                                    f"WHERE list_contains({_list(kept)}, submission_id) GROUP BY 1").fetchall())
        order = sorted(runs)
        con.register("runs", pa.table({"run_id": order, "run_number": list(range(1, len(order) + 1)),
                                       "run": [runs[sid] for sid in order]}, schema=_RUNS))  # typed: may be empty
        con.register("base", SCHEMA.empty_table())
        parts = ["SELECT * EXCLUDE (run) FROM base"]
        if kept:
            parts.append(f"SELECT * EXCLUDE (run) FROM read_parquet('{_quoted(old_file)}') WHERE "
                         f"list_contains({_list(kept)}, submission_id)")
        if from_folders:
            parts += _folder_parts(con, store, from_folders)
        columns = ", ".join(f'CAST("{f.name}" AS {_sql_type(f.type)}) AS "{f.name}"'
                            for f in SCHEMA if f.name != "run")
        query = " UNION ALL BY NAME ".join(f"({part})" for part in parts)
        texts = "(SELECT list(run ORDER BY run_number) FROM runs)"
        con.execute(f"COPY (SELECT * EXCLUDE (run_number), {texts}[run_number] AS run FROM (SELECT {columns}, "
                    f"r.run_number FROM ({query}) q JOIN runs r ON r.run_id = q.submission_id ORDER BY part, slice, "
                    f"metric, submission_id, slice_value, x)) TO '{_quoted(out)}' (FORMAT PARQUET, COMPRESSION "
                    f"zstd, ROW_GROUP_SIZE {ROW_GROUP})")
    finally:
        con.close()
    return release


def _folder_parts(con: duckdb.DuckDBPyConnection, store: Store, ids: list[str]) -> list[str]:
    """The SELECTs of these results folders' rows, in ``SCHEMA``'s columns but ``run`` (a column an older folder
    lacks is null)."""
    folders = [store.results_folder(sid) for sid in ids]
    aggregates = _list([str(f / layout.AGGREGATES) for f in folders])
    have = set(con.execute(f"SELECT * FROM read_parquet({aggregates}, union_by_name = true) LIMIT 0").df().columns)
    select = ", ".join(f'a."{n}"' if n in have else f'NULL AS "{n}"' for n in results.AGGREGATE.names)
    per_image = [str(f / layout.PER_IMAGE) for f in folders if (f / layout.PER_IMAGE).exists()]
    prompts, slices = "", ", ".join(f'NULL AS "{n}"' for n in SLICE_COLUMNS)
    if per_image:
        files = _list(per_image)
        columns = set(con.execute(f"SELECT * FROM read_parquet({files}, union_by_name = true) LIMIT 0").df().columns)
        present = [n for n in SLICE_COLUMNS if n in columns]
        prompts = (" LEFT JOIN (SELECT DISTINCT ON (submission_id, prompt_id) submission_id, prompt_id, "
                   + ", ".join(f'"{n}"' for n in present)
                   + f" FROM read_parquet({files}, union_by_name = true)) p ON a.slice = 'prompt' AND "
                   "p.submission_id = a.submission_id AND p.prompt_id = a.slice_value")
        slices = ", ".join(f'CAST(p."{n}" AS VARCHAR) AS "{n}"' if n in present else f'NULL AS "{n}"'
                           for n in SLICE_COLUMNS)
    curves = _list([str(f / layout.CURVES) for f in folders])
    return [f"SELECT 'aggregates' AS part, {select}, {slices} FROM read_parquet({aggregates}, "
            f"union_by_name = true) a{prompts}",
            f"SELECT 'curves' AS part, c.submission_id, c.model, c.metric, c.x, c.value, c.standard_error, c.ci_low, "
            f"c.ci_high, c.n FROM read_parquet({curves}, union_by_name = true) c WHERE c.prompt_id IS NULL"]


def _quoted(path) -> str:
    return str(path).replace("'", "''")


def _list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{_quoted(item)}'" for item in items) + "]"


def _sql_type(kind: pa.DataType) -> str:
    return {pa.string(): "VARCHAR", pa.float64(): "DOUBLE", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN"}[kind]

"""The results tables every track writes and the leaderboard reads.

Per-image rows are the unit of truth (as in GenEval): one row per image and
metric, with a short human-readable note where that helps. Aggregate rows are
derived from them and can always be recomputed. Rows reported in a paper use
the aggregate schema too, with ``provenance = 'reported'`` and their citation,
so both kinds sit in one table and are never confused.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import layout
from benchmark.atomic import atomic_folder
from benchmark.run_record import RunRecord

PER_IMAGE = pa.schema([
    ("submission_id", pa.string()),
    ("model", pa.string()),
    ("prompt_id", pa.string()),
    ("seed", pa.int64()),
    ("image_path", pa.string()),
    ("image_sha256", pa.string()),
    ("country", pa.string()),
    ("country_code", pa.string()),
    ("continent", pa.string()),
    ("concept", pa.string()),
    ("domain", pa.string()),
    ("kind", pa.string()),
    ("modality", pa.string()),
    ("track", pa.string()),
    ("metric", pa.string()),
    ("value", pa.float64()),
    ("note", pa.string()),
    ("detail", pa.string()),            # JSON, metric-specific (e.g. reused patches, for pictures)
    ("error", pa.string()),             # why the row has no value (e.g. a non-finite embedding); null if scored
])

AGGREGATE = pa.schema([
    ("provenance", pa.string()),        # "scored" (this harness) or "reported" (a paper)
    ("submission_id", pa.string()),     # null for reported rows
    ("model", pa.string()),
    ("model_id", pa.string()),
    ("model_type", pa.string()),        # "open" / "closed" / null
    ("model_revision", pa.string()),
    ("parameters_billions", pa.float64()),  # model size, when the submitter or the paper states it
    ("track", pa.string()),
    ("metric", pa.string()),
    ("metric_label", pa.string()),
    ("metric_version", pa.string()),
    ("higher_is_better", pa.bool_()),
    ("range_low", pa.float64()),        # the metric's declared range (``MetricInfo.low``, ``high``): a ranking counts
    ("range_high", pa.float64()),       # an unanswered prompt as its worse end; null if not declared
    ("value_kind", pa.string()),        # ``MetricInfo.kind``: "rate" or "continuous" (null: continuous), which
                                        # chooses the CI (``benchmark.stats.mean_ci``)
    ("slice", pa.string()),             # "overall", "country", "concept", "prompt", "subset", ...
    ("slice_value", pa.string()),       # "all" for overall
    ("value", pa.float64()),
    ("ci_low", pa.float64()),           # 95% CI; on a right-censored row (value null: beyond every value that
    ("ci_high", pa.float64()),          # could be measured, e.g. W1KP reusability never reached) ci_low is the
                                        # bound the value exceeds and ci_high is null
    ("n", pa.int64()),                  # prompts (images, for slice "prompt") the value averages over
    ("excluded", pa.int64()),           # images (or prompts) left out for errors (per-image ``error``); null if unknown
    ("citation", pa.string()),          # reported: paper title, authors, arXiv id
    ("source_table", pa.string()),      # reported: table / figure of the paper
    ("harness_version", pa.string()),
    ("backbone", pa.string()),
    ("backbone_revision", pa.string()),
    ("dataset", pa.string()),
    ("seeds", pa.string()),             # comma-separated generation seeds of the submission
    ("protocol", pa.string()),          # what the value assumes, canonical JSON (``protocol_columns``): dataset
                                        # (repo:config:split) and its revision, images per prompt (the seeds
                                        # declared, a missing image counted as a failure), the metric's version
                                        # (its settings) and backbones (uid@revision)
    ("protocol_id", pa.string()),       # the first 12 hex digits of the sha256 of ``protocol``
    ("scored_at", pa.string()),         # ISO 8601, UTC
])

# Curves over a parameter x (e.g. W1KP_k over k): per prompt, and the model's (prompt_id null, with a CI).
CURVES = pa.schema([
    ("submission_id", pa.string()),
    ("model", pa.string()),
    ("metric", pa.string()),
    ("prompt_id", pa.string()),
    ("x", pa.float64()),
    ("value", pa.float64()),
    ("standard_error", pa.float64()),
    ("ci_low", pa.float64()),           # 95% CI; on a right-censored row (value null: beyond every value that
    ("ci_high", pa.float64()),          # could be measured, e.g. W1KP reusability never reached) ci_low is the
                                        # bound the value exceeds and ci_high is null
    ("n", pa.int64()),
])


SCHEMAS = {layout.PER_IMAGE: PER_IMAGE, layout.AGGREGATES: AGGREGATE, layout.CURVES: CURVES}
"""Each Parquet file of a results folder, with its schema."""
MISSING_AS_FAILURES = "failures"  # a protocol's ``missing_images``: how an image declared but not there was scored


def protocol_columns(fields: dict) -> dict:
    """``protocol`` (canonical JSON of ``fields``) and ``protocol_id`` (the first 12 hex digits of its sha256), as
    every aggregate row carries them: scored rows (the harness), the papers' rows (``leaderboard.reported``) and
    synthetic stores alike. Two rows are ranked together only when every field is equal, so the fields are
    everything that changes a value: ``dataset`` (repo:config:split), ``dataset_revision`` (the digest of the prompt
    rows scored against, ``PromptSet.digest``), ``images_per_prompt`` (the seeds the submission declared, as a
    prompt's CRA per reference, 1 - (1 - p)^n, depends on it) with ``missing_images`` (``MISSING_AS_FAILURES``: an
    image declared but not there, refused or missing, was scored as a failure, so a submission that pads its seeds
    and refuses some is never the protocol of fewer seeds), ``metric_version`` (which names the metric's settings:
    thresholds, variant, calibration, tagger, N and draws) and ``backbones`` (uid@revision). Papers' rows state what
    the paper states."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return {"protocol": text, "protocol_id": hashlib.sha256(text.encode()).hexdigest()[:12]}


def protocol_fields(protocol: object) -> dict | None:
    """The fields of a row's ``protocol`` (see ``protocol_columns``); None for a row that has none or whose text
    is not such JSON (results written before protocols were recorded, or damaged)."""
    try:
        fields = json.loads(protocol) if isinstance(protocol, str) else None
    except ValueError:
        return None
    return fields if isinstance(fields, dict) else None


def records(frame) -> list[dict]:
    """DataFrame rows as dicts with None (not NaN) for missing values, as Arrow expects."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows -> a table of exactly ``schema`` (absent fields are null)."""
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)


def parquet_rows(path: Path) -> int | None:
    """The rows of a Parquet file as its footer says (None: not readable as Parquet), read again only when the
    file's size or time changed (a mirror asks every minute about files written once)."""
    stat = Path(path).stat()
    return _rows(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=65536)
def _rows(path: str, size: int, modified: int) -> int | None:
    try:
        return pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException):
        return None


@functools.cache
def empty_table(name: str) -> bytes:
    """The one file a result table of no rows is (``name``: a file of ``SCHEMAS``): its schema's empty table as
    pyarrow writes it, which is the same bytes every time. ``write_folder`` writes a table of no rows so, and
    ``complete`` writes it back where a repo left it out; whether a file is one is told by its bytes
    (``is_empty_table``), never by the row count a footer claims: a footer can say 0 over rows a reader reads."""
    sink = pa.BufferOutputStream()
    pq.write_table(SCHEMAS[name].empty_table(), sink)
    return sink.getvalue().to_pybytes()


def is_empty_table(path: Path) -> bool:
    """Whether the file at ``path`` is byte for byte the result table of no rows of its name (``empty_table``)."""
    path = Path(path)
    try:
        return path.stat().st_size == len(empty_table(path.name)) and path.read_bytes() == empty_table(path.name)
    except (FileNotFoundError, KeyError):
        return False


def published(folder: Path) -> list[str]:
    """The files of a results folder that a results repo holds: every one but a result table of no rows
    (``is_empty_table``: a submission without curves has an empty ``curves.parquet``, and one empty file breaks
    ``load_dataset`` on the whole config), and its seal (``layout.SEAL``) where it has one, ``run.json`` last (the
    mark of a complete folder). ``complete`` restores the others."""
    names = [name for name in layout.SEALED_FILES
             if (name in SCHEMAS and not is_empty_table(Path(folder) / name))
             or (name == layout.SEAL and (Path(folder) / name).exists()) or name == layout.RUN]
    return sorted(names, key=lambda name: name == layout.RUN)


def complete(folder: Path) -> None:
    """Write back, as the table of no rows (``empty_table``), the Parquet files a results folder taken from a repo
    lacks (``published`` leaves them out), so that it holds every result file again."""
    for name in SCHEMAS:
        if not (Path(folder) / name).exists():
            (Path(folder) / name).write_bytes(empty_table(name))


def write_folder(target: Path, per_image_rows: list[dict], aggregate_rows: list[dict], curve_rows: list[dict],
                 run: RunRecord, *, replace: bool = False, then: Callable[[Path], object] | None = None) -> Path:
    """Write ``per_image.parquet``, ``aggregates.parquet``, ``curves.parquet`` and ``run.json`` (``run``, in its
    canonical text: ``RunRecord.to_json``) as one folder, atomically (``benchmark.atomic.atomic_folder``): readers
    see all files or none. ``then`` is called on the temporary folder once they are written, before it is renamed
    into place (a leaderboard worker seals it there: ``leaderboard.seal``).

    An existing ``target`` is never modified (results are immutable: FileExistsError) unless ``replace``
    (``culturelens score`` scoring the same submission again into its --out).
    """
    with atomic_folder(target, replace=replace) as tmp:
        for name, rows in ((layout.PER_IMAGE, per_image_rows), (layout.AGGREGATES, aggregate_rows),
                           (layout.CURVES, curve_rows)):
            if rows:
                pq.write_table(table(rows, SCHEMAS[name]), tmp / name)
            else:  # the one file of no rows (``empty_table``): a seal tells it by its bytes
                (tmp / name).write_bytes(empty_table(name))
        (tmp / layout.RUN).write_text(run.to_json(), encoding="utf-8")
        if then is not None:
            then(tmp)
    return Path(target)

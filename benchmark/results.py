"""The results tables every track writes and the leaderboard reads.

Per-image rows are the unit of truth (as in GenEval): one row per image and
metric, with a short human-readable note where that helps. Aggregate rows are
derived from them and can always be recomputed. Rows reported in a paper use
the aggregate schema too, with ``provenance = 'reported'`` and their citation,
so both kinds sit in one table and are never confused.
"""

from __future__ import annotations

import pyarrow as pa

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
    ("track", pa.string()),
    ("metric", pa.string()),
    ("value", pa.float64()),
    ("note", pa.string()),
])

AGGREGATE = pa.schema([
    ("provenance", pa.string()),        # "scored" (this harness) or "reported" (a paper)
    ("submission_id", pa.string()),     # null for reported rows
    ("model", pa.string()),
    ("model_id", pa.string()),
    ("model_type", pa.string()),        # "open" / "closed" / null
    ("track", pa.string()),
    ("metric", pa.string()),
    ("metric_label", pa.string()),
    ("higher_is_better", pa.bool_()),
    ("slice", pa.string()),             # "overall", "country", "concept", "subset", ...
    ("slice_value", pa.string()),       # "all" for overall
    ("value", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("n", pa.int64()),                  # prompts (or references) the value averages over
    ("citation", pa.string()),          # reported: paper title, authors, arXiv id
    ("source_table", pa.string()),      # reported: table / figure of the paper
    ("harness_version", pa.string()),
    ("backbone", pa.string()),
    ("backbone_revision", pa.string()),
    ("dataset", pa.string()),
    ("scored_at", pa.string()),         # ISO 8601, UTC
])


def table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows -> a table of exactly ``schema`` (absent fields are null)."""
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)

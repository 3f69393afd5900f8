"""The catalog's answers as DuckDB's own frame gives them: ``Catalog.query`` builds its frames from Arrow (3-6 times
faster on the views' queries), and every view reads them as it read DuckDB's ``df()``: the same columns, values and
types, nulls included. The reference here is DuckDB's ``df()`` itself, on results written with the production
``benchmark.results.write_folder`` into a real store."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmark import results
from benchmark.run_record import RunRecord
from leaderboard import tables
from leaderboard.catalog import Catalog
from leaderboard.store import Store


@pytest.fixture
def cat(tmp_path) -> Catalog:
    """Two submissions' rows: one row without ``n`` (a null in an integer column that has values), no citation on
    any (a text column of nulls only)."""
    store = Store(tmp_path / "store")
    for sid, model, value in (("s-1", "Alpha", 0.5), ("s-2", "Beta", 0.25)):
        common = {"provenance": "scored", "submission_id": sid, "model": model, "track": "awareness",
                  "metric": "clip_score", "higher_is_better": True, "range_low": 0.0, "range_high": 1.0,
                  "scored_at": "2026-01-01T00:00:00"}
        rows = [{**common, "slice": "overall", "slice_value": "all", "value": value, "n": 2},
                {**common, "slice": "country", "slice_value": "Brazil", "value": value, "n": None}]
        results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))
    return Catalog(store)


@pytest.mark.parametrize("sql", [
    f"SELECT {tables.COLUMNS} FROM aggregates ORDER BY submission_id, slice",  # every column a view reads
    f"SELECT {tables.COLUMNS} FROM aggregates WHERE slice = 'overall' ORDER BY submission_id",  # no null n
    f"SELECT {tables.COLUMNS} FROM aggregates WHERE false",  # no rows
    "SELECT submission_id, n > 1 AS many, count(*) OVER () AS rows FROM aggregates ORDER BY submission_id, slice",
    "SELECT DATE '2026-01-01' AS day, [1, 2] AS pair, 1::UBIGINT AS big",  # types DuckDB's frame gives itself
])
def test_a_catalog_query_answers_as_duckdbs_own_frame(cat, sql):
    with cat.lock:
        expected = cat.con.execute(sql).df()
    pd.testing.assert_frame_equal(cat.query(sql), expected, check_exact=True)


def test_a_catalog_query_keeps_a_null_count_as_a_missing_integer(cat):
    frame = cat.query(f"SELECT {tables.COLUMNS} FROM aggregates ORDER BY submission_id, slice")
    assert str(frame["n"].dtype) == "Int64" and list(frame["n"]) == [pd.NA, 2, pd.NA, 2]
    assert frame["citation"].dtype == object and frame["citation"].isna().all()

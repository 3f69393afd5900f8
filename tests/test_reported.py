"""Rows reported in the papers: provenance on every row, and the papers' own arithmetic holds."""

from __future__ import annotations

from collections import defaultdict

import pytest

from benchmark import results
from leaderboard import reported


def test_every_reported_row_carries_its_citation_and_table():
    rows = reported.rows()
    assert rows and all(r["provenance"] == "reported" and r["citation"] and r["source_table"] for r in rows)
    table = results.table(rows, results.AGGREGATE)
    # CRT Table 1: 5 models x 2 subsets x 4 columns; CUBE Tables 6, 5, 3; CulturalFrames: 4 models
    assert table.num_rows == len(rows) == 40 + 60 + 12 + 16 + 4


def test_crt_table_1_satisfies_crt_equals_cra_times_one_minus_vr():
    """Eq. 3 of the CRT paper on Table 1's column means holds to the table's rounding."""
    values = defaultdict(dict)
    for r in reported.rows():
        if r["track"] == "iconicity":
            values[(r["model"], r["slice_value"])][r["metric"]] = r["value"]
    assert len(values) == 10
    for key, v in values.items():
        assert v["crt"] == pytest.approx(v["cra_reference"] * (1 - v["vr"]), abs=0.0015), key


def test_cube_table_6_is_quality_times_unweighted_vendi_within_rounding():
    """Table 6 = q (Table 5) x VS-bar; VS-bar <= 1 for the (0,0,1) kernel at N = 8, so CD <= q."""
    q = {(r["model"], r["slice_value"]): r["value"] for r in reported.rows() if r["metric"] == "hpsv2_quality"}
    for r in reported.rows():
        if r["metric"] == "cd[0,0,1]":
            assert r["value"] <= q[(r["model"], r["slice_value"])] + 1e-9

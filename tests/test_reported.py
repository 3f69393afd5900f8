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
    # CRT Table 1: 5 models x 2 kinds x 4 columns; CUBE Tables 6, 5, 3, 4 (2 criteria x 3 concepts x 2 models
    # x 8 countries); CulturalFrames: 4 models alignment + 2 stereotype rates
    assert table.num_rows == len(rows) == 40 + 60 + 12 + 16 + 96 + 4 + 2


def test_crt_table_1_satisfies_crt_equals_cra_times_one_minus_vr():
    """Eq. 3 of the CRT paper on Table 1's column means holds to the table's rounding."""
    values = defaultdict(dict)
    for r in reported.rows():
        if r["track"] == "iconicity":
            values[(r["model"], r["slice_value"])][r["metric"]] = r["value"]
    assert len(values) == 10
    for key, v in values.items():
        assert v["crt_from_means"] == pytest.approx(v["cra_reference"] * (1 - v["vr"]), abs=0.0015), key


def test_cube_table_6_is_quality_times_unweighted_vendi_within_rounding():
    """Table 6 = q (Table 5) x VS-bar; VS-bar <= 1 for the (0,0,1) kernel at N = 8, so CD <= q."""
    q = {(r["model"], r["slice_value"]): r["value"] for r in reported.rows() if r["metric"] == "mean_hps_quality"}
    for r in reported.rows():
        if r["metric"] == "cd_artifact":
            assert r["value"] <= q[(r["model"], r["slice_value"])] + 1e-9


def test_reported_iconicity_rows_share_the_scored_metrics_names_and_labels():
    """So that Table 1 and scored submissions are ranked in one table (metric + label + slice kind)."""
    from benchmark.metrics import iconicity

    scored = {m.info.name: m.info.label for m in iconicity.metrics()}
    scored[iconicity.CRT_FROM_MEANS[0]] = iconicity.CRT_FROM_MEANS[1]
    rows = [r for r in reported.rows() if r["track"] == "iconicity" and r["metric"] != "vr_at_k"]
    assert {r["metric"] for r in rows} == {"cra_reference", "vr", "crt_from_means"}
    assert all(r["metric_label"] == scored[r["metric"]] and r["slice"] == "kind" for r in rows)


def test_cube_table_4_cells_are_on_the_1_to_5_scale_and_keyed_by_country_and_concept():
    cells = {(r["model"], r["metric"], r["slice_value"]): r["value"] for r in reported.rows()
             if r["source_table"] == "Table 4"}
    assert all(1.0 <= v <= 5.0 for v in cells.values())
    assert cells[("SDXL", "human_realism", "Nigeria / art")] == 3.0  # the table's last cell
    assert cells[("Imagen 2", "human_faithfulness", "India / cuisine")] == 2.8  # its first

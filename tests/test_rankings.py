"""Protocols, rank intervals and the overall ranking, on hand-built results whose right answer is known.

Results are written with the production ``benchmark.results.write_folder`` into a real store and read through
the real ``Catalog``; the expected bootstrap is brute-forced here, replicate by replicate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import results
from benchmark.datasets import cube_1k, iconic_references
from benchmark.metrics import iconicity
from leaderboard import tables
from leaderboard.catalog import Catalog
from leaderboard.store import Store

CRT_DATASET = f"{iconic_references.HUB_REPO}:{iconic_references.CONFIG}:{iconic_references.SPLIT}"
CUBE_DATASET = f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG}:{cube_1k.SPLIT}"
PAPER = iconicity.VARIANTS["paper"]
CRT_BACKBONES = [f"{PAPER.clip}=openai/clip@r1", f"{PAPER.dino}=facebook/dino@r2"]
# (track, headline metric, higher is better, dataset, metric version, backbones) of each track's default protocol
DEFAULTS = {
    "iconicity": ("crt", True, CRT_DATASET, PAPER.version, CRT_BACKBONES),
    "awareness": ("clip_score", True, CUBE_DATASET, "1", ["clip-vit-b-32=openai/clip@r1"]),
    "variability": ("w1kp", False, CUBE_DATASET, "1 (paper; calibration sha256 ab for dreamsim)", ["dreamsim=d@r"]),
}


def write_result(store: Store, sid: str, model: str, track: str, prompts: dict[str, float], *, seeds: int = 10,
                 dataset: str | None = None) -> None:
    """One submission's aggregate rows (overall and per prompt) of ``track``'s headline metric, scored under
    the track's default protocol except for ``seeds`` and ``dataset``."""
    metric, higher, default_dataset, version, backbones = DEFAULTS[track]
    protocol = results.protocol_columns({"dataset": dataset or default_dataset, "images_per_prompt": seeds,
                                        "metric_version": version, "backbones": backbones})
    common = {"provenance": "scored", "submission_id": sid, "model": model, "track": track, "metric": metric,
              "metric_version": version, "higher_is_better": higher, "seeds": ",".join(map(str, range(seeds))),
              "dataset": dataset or default_dataset, "scored_at": f"2026-01-01T00:00:{len(sid):02d}", **protocol}
    rows = [{**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(list(prompts.values()))),
             "n": len(prompts)}]
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": seeds} for p, v in prompts.items()]
    results.write_folder(store.results / sid, [], rows, [], {"submission_id": sid})


def brute_force_rank_intervals(values: dict[str, list[float]], higher: bool) -> dict[str, tuple[int, int]]:
    """The paired bootstrap written out: per replicate the same drawn prompts for every model, each model's mean
    over them, its rank 1 + the models strictly better; the 2.5% / 97.5% order statistics of its ranks."""
    models = list(values)
    n = len(values[models[0]])
    draws = np.random.default_rng(tables.SEED).integers(0, n, size=(tables.REPLICATES, n))
    ranks = {m: [] for m in models}
    for drawn in draws:
        means = {m: sum(values[m][i] for i in drawn) / n for m in models}
        for m in models:
            better = sum(1 for o in models if (means[o] > means[m] if higher else means[o] < means[m]))
            ranks[m].append(1 + better)
    low, high = math.floor(0.025 * (tables.REPLICATES - 1)), math.ceil(0.975 * (tables.REPLICATES - 1))
    return {m: (sorted(r)[low], sorted(r)[high]) for m, r in ranks.items()}


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "store")


# Multiples of 1/8: every mean is exact, so float rounding cannot break a tie differently here and there.
FOUR_MODELS = {
    "Alpha": [0.875, 0.75, 0.625, 0.875, 0.5, 0.75],
    "Beta": [0.75, 0.875, 0.5, 0.75, 0.625, 0.625],
    "Gamma": [0.25, 0.375, 0.5, 0.25, 0.125, 0.375],
    "Delta": [0.25, 0.25, 0.625, 0.375, 0.125, 0.25],
}
PROMPTS = ["p1", "p2", "p3", "p4", "p5", "p6"]


def test_rank_intervals_equal_a_brute_force_paired_bootstrap_over_shared_prompts(store):
    for i, (model, values) in enumerate(FOUR_MODELS.items()):
        prompts = dict(zip(PROMPTS, values))
        if model == "Alpha":
            prompts["p7"] = 0.0  # not shared: left out of the bootstrap (it still counts in Alpha's score)
        write_result(store, f"s{i}", model, "iconicity", prompts)
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    expected = brute_force_rank_intervals(FOUR_MODELS, higher=True)
    got = {m: (lo, hi) for m, lo, hi in zip(frame["model"], frame["rank_low"], frame["rank_high"])}
    assert got == expected
    # The point ranks use each model's score (Alpha's counts p7): Gamma and Delta tie on 0.3125.
    assert list(frame["model"]) == ["Beta", "Alpha", "Delta", "Gamma"] and list(frame["rank"]) == [1, 2, 3, 3]
    # Tie groups: a new group starts where an interval begins after the current group's intervals end.
    reach, group, groups = 0, 0, []
    for model in frame["model"]:
        low, high = expected[model]
        group += low > reach
        reach = max(reach, high)
        groups.append(group)
    assert list(frame["tie_group"]) == groups
    shown = tables.display(frame)
    low, high = expected["Beta"]
    assert shown.loc[0, "Rank"] == 1 and shown.loc[0, "Rank range (95%)"] == (f"{low}–{high}" if low < high else f"{low}")
    assert shown["Protocol"].str.endswith("(headline)").all()
    assert "No rank interval" not in note


def test_models_that_share_no_prompt_get_no_interval_and_the_note_says_why(store):
    write_result(store, "s1", "Left", "iconicity", {"p1": 0.5, "p2": 0.25})
    write_result(store, "s2", "Right", "iconicity", {"p3": 0.75, "p4": 0.5})
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    assert list(frame["model"]) == ["Right", "Left"] and list(frame["rank"]) == [1, 2]
    assert frame["rank_low"].isna().all() and frame["tie_group"].isna().all()
    assert "share no prompts" in note
    shown = tables.display(frame)
    assert list(shown["Rank"]) == [1, 2] and list(shown["Rank range (95%)"]) == ["", ""]


def test_rows_of_two_datasets_never_share_a_ranking_and_four_seeds_are_off_protocol_for_crt(store):
    write_result(store, "s1", "On A", "iconicity", {"p1": 0.5, "p2": 0.5})
    write_result(store, "s2", "On B", "iconicity", {"p1": 0.75, "p2": 0.5})
    write_result(store, "s3", "Other data", "iconicity", {"p1": 0.9, "p2": 0.9}, dataset="someone/titles:x:test")
    write_result(store, "s4", "Four seeds", "iconicity", {"p1": 1.0, "p2": 1.0}, seeds=4)
    cat = Catalog(store)
    table = tables.protocols(cat, "iconicity", "crt")
    assert list(table["rows"]) == [2, 1, 1] and list(table["on_protocol"]) == [True, False, False]
    headline, _ = tables.ranked(cat, "iconicity", "crt")
    assert list(headline["model"]) == ["On B", "On A"]  # the headline protocol by default, nothing else
    for protocol_id in table["protocol_id"][1:]:
        other, _ = tables.ranked(cat, "iconicity", "crt", protocol_id=protocol_id)
        assert len(other) == 1 and not other["on_protocol"].any()
        assert tables.display(other).loc[0, "Protocol"] == f"{protocol_id} (off-protocol)"
    four = table[table["protocol"].str.contains('"images_per_prompt":4')]
    assert len(four) == 1 and not four["on_protocol"].iloc[0]
    assert "4 images per prompt" in tables.describe_protocol(four["protocol"].iloc[0])


def test_old_results_without_protocol_columns_form_the_unrecorded_protocol(store):
    write_result(store, "s1", "Recorded", "iconicity", {"p1": 0.5})
    old = {"provenance": "scored", "submission_id": "s0", "model": "Old", "track": "iconicity", "metric": "crt",
           "slice": "overall", "slice_value": "all", "value": 0.9, "higher_is_better": True}
    folder = store.results / "s0"
    folder.mkdir(parents=True)
    pq.write_table(results.table([old], results.AGGREGATE).drop(["protocol", "protocol_id"]),
                   folder / "aggregates.parquet")
    (folder / "run.json").write_text("{}")
    cat = Catalog(store)
    table = tables.protocols(cat, "iconicity", "crt")
    assert set(table["protocol_id"]) == {tables.UNRECORDED, table["protocol_id"].iloc[0]}
    assert table["on_protocol"].iloc[0] and table["protocol_id"].iloc[1] == tables.UNRECORDED
    old_rows, _ = tables.ranked(cat, "iconicity", "crt", protocol_id=tables.UNRECORDED)
    assert list(old_rows["model"]) == ["Old"]


def test_paper_rows_of_another_protocol_are_listed_beside_not_ranked(store):
    metric = iconicity.CRT_FROM_MEANS[0]
    protocol = results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10,
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})
    row = {"provenance": "scored", "submission_id": "s1", "model": "Mine", "track": "iconicity", "metric": metric,
           "slice": "kind", "slice_value": "still", "value": 0.4, "higher_is_better": True, **protocol}
    results.write_folder(store.results / "s1", [], [row], [], {})
    store.seed_reported()
    cat = Catalog(store)
    frame, _ = tables.ranked(cat, "iconicity", metric, "kind", "still")
    assert list(frame.loc[~frame["beside"], "model"]) == ["Mine"]
    beside = frame[frame["beside"]]
    assert set(beside["provenance"]) == {"reported"} and len(beside) == 5  # CRT Table 1's five models
    shown = tables.display(frame)[frame["beside"]]
    assert shown["Rank"].isna().all() and (shown["Rank range (95%)"] == "not ranked: other protocol").all()
    # Under the paper's own protocol they are ranked among themselves, with no interval, and the note says why.
    paper = tables.protocols(cat, "iconicity", metric, "kind", "still")
    paper_id = paper.loc[paper["provenance"] == "reported", "protocol_id"].iloc[0]
    reported, why = tables.ranked(cat, "iconicity", metric, "kind", "still", protocol_id=paper_id)
    assert list(reported.loc[~reported["beside"], "rank"]) == [1, 2, 3, 4, 5]
    assert reported["rank_low"].isna().all() and "no per-prompt values" in why


def test_a_null_leaves_the_win_rate_denominator_as_in_heim():
    frame = pd.DataFrame({"track": "t", "model": ["A", "B", "C"], "provenance": "scored",
                          "value": [0.9, np.nan, 0.1], "higher_is_better": True})
    wide = tables.win_rates(frame)
    assert dict(zip(wide["model"], wide["win_rate"])) == {"A": 1.0, "C": 0.0}  # not A 0.5, C 0.0, B -0.25


def test_overall_ranks_models_of_one_track_set_with_brute_force_intervals(store):
    # Three models on three tracks (the default set), one on awareness only, and a one-track paper row.
    values = {"Alpha": {"iconicity": [0.75, 0.5, 0.625], "awareness": [0.5, 0.25, 0.5], "variability": [0.25, 0.5, 0.25]},
              "Beta": {"iconicity": [0.5, 0.625, 0.25], "awareness": [0.75, 0.5, 0.25], "variability": [0.5, 0.5, 0.75]},
              "Gamma": {"iconicity": [0.25, 0.25, 0.5], "awareness": [0.25, 0.5, 0.75], "variability": [0.5, 0.25, 0.5]}}
    for i, (model, per_track) in enumerate(values.items()):
        for track, prompt_values in per_track.items():
            write_result(store, f"{track[:3]}{i}", model, track, dict(zip(["p1", "p2", "p3"], prompt_values)))
    write_result(store, "solo", "Solo", "awareness", {"p1": 1.0, "p2": 1.0, "p3": 1.0})
    paper = {"provenance": "reported", "model": "SDXL", "track": "iconicity", "metric": "crt", "slice": "overall",
             "slice_value": "all", "value": 0.99, "higher_is_better": True,
             **results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10,
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})}
    pq.write_table(results.table([paper], results.AGGREGATE), store.reported)  # on-protocol, one track only
    wide, choices, chosen, off = tables.overall(Catalog(store))
    assert chosen == "awareness + iconicity + variability" and off == 0
    assert dict(choices) == {chosen: 3, "awareness": 1, "iconicity": 1}
    assert set(wide["model"]) == set(values)  # neither Solo nor the paper row is ranked among them
    # Brute force: per track the same drawn prompts for every model (tracks in name order, one generator).
    rng = np.random.default_rng(tables.SEED)
    models = list(values)
    means = np.zeros((tables.REPLICATES, len(models)))
    for track in sorted(DEFAULTS):
        higher = DEFAULTS[track][1]
        draws = rng.integers(0, 3, size=(tables.REPLICATES, 3))
        for b, drawn in enumerate(draws):
            boot = [sum(values[m][track][i] for i in drawn) / 3 for m in models]
            for j, v in enumerate(boot):
                beaten = sum((v > o if higher else v < o) + 0.5 * (v == o) for k, o in enumerate(boot) if k != j)
                means[b, j] += beaten / (len(models) - 1) / len(DEFAULTS)
    low, high = math.floor(0.025 * (tables.REPLICATES - 1)), math.ceil(0.975 * (tables.REPLICATES - 1))
    for j, model in enumerate(models):
        row = wide[wide["model"] == model].iloc[0]
        assert row["win_low"] == pytest.approx(sorted(means[:, j])[low])
        assert row["win_high"] == pytest.approx(sorted(means[:, j])[high])
    other, _, shown, _ = tables.overall(Catalog(store), track_set="iconicity")
    assert shown == "iconicity" and list(other["model"]) == []  # one model alone has no win rate

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
from benchmark.run_record import RunRecord
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
    results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))


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


# Multiples of 1/8: every mean is exact, so float rounding cannot break a tie differently here and there. Twelve
# prompts: at least MIN_SHARED_PROMPTS, so the rank intervals are given.
SIX = {
    "Alpha": [0.875, 0.75, 0.625, 0.875, 0.5, 0.75],
    "Beta": [0.75, 0.875, 0.5, 0.75, 0.625, 0.625],
    "Gamma": [0.25, 0.375, 0.5, 0.25, 0.125, 0.375],
    "Delta": [0.25, 0.25, 0.625, 0.375, 0.125, 0.25],
}
FOUR_MODELS = {model: values + values[::-1] for model, values in SIX.items()}
PROMPTS = [f"p{i}" for i in range(1, 13)]


def common_rank_groups(intervals: list[tuple[int, int]]) -> list[int]:
    """Tie groups written out: down the rows, a row joins the current group while some whole rank r lies in
    the interval of every row of the group and of it (r tried one by one), else it starts the next group."""
    groups, members = [], []
    for low, high in intervals:
        candidate = members + [(low, high)]
        if members and any(all(lo <= r <= hi for lo, hi in candidate) for r in range(1, 100)):
            members = candidate
            groups.append(groups[-1])
        else:
            members = [(low, high)]
            groups.append(groups[-1] + 1 if groups else 1)
    return groups


def test_rank_intervals_equal_a_brute_force_paired_bootstrap_over_shared_prompts(store):
    assert len(PROMPTS) >= tables.MIN_SHARED_PROMPTS
    for i, (model, values) in enumerate(FOUR_MODELS.items()):
        prompts = dict(zip(PROMPTS, values))
        if model == "Alpha":
            prompts["p13"] = 0.0  # not shared: left out of the bootstrap, and of Alpha's score and rank
        write_result(store, f"s{i}", model, "iconicity", prompts)
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    expected = brute_force_rank_intervals(FOUR_MODELS, higher=True)
    got = {m: (lo, hi) for m, lo, hi in zip(frame["model"], frame["rank_low"], frame["rank_high"])}
    assert got == expected
    # Score and rank come from the 12 shared prompts too: Alpha 8.75 / 12 (its own mean with p13 would be
    # 8.75 / 13, below Beta's 8.25 / 12), Gamma and Delta tie on 3.75 / 12.
    assert list(frame["model"]) == ["Alpha", "Beta", "Delta", "Gamma"] and list(frame["rank"]) == [1, 2, 3, 3]
    assert list(frame["value"]) == [8.75 / 12, 8.25 / 12, 3.75 / 12, 3.75 / 12] and (frame["n"] == 12).all()
    assert "from the 12 prompts they all answered" in note
    assert list(frame["tie_group"]) == common_rank_groups([expected[m] for m in frame["model"]])
    shown = tables.display(frame)
    low, high = expected["Alpha"]
    assert shown.loc[0, "Rank"] == 1 and shown.loc[0, "Rank range (95%)"] == (f"{low}–{high}" if low < high else f"{low}")
    assert shown.loc[0, "Score"] == round(8.75 / 12, 3) and shown.loc[0, "n"] == 12
    assert shown["Protocol"].str.endswith("(headline)").all()
    assert "no rank interval" not in note


def test_models_that_share_no_prompt_get_no_interval_and_the_note_says_why(store):
    # Each answered 2 of the 4 prompts the two answered between them: neither is ranked (no prompt to rank them on).
    write_result(store, "s1", "Left", "iconicity", {"p1": 0.5, "p2": 0.25})
    write_result(store, "s2", "Right", "iconicity", {"p3": 0.75, "p4": 0.5})
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    assert list(frame["model"]) == ["Right", "Left"] and frame["rank"].isna().all()
    assert frame["rank_low"].isna().all() and frame["tie_group"].isna().all()
    assert "2 model(s) answered fewer than 90% of the 4 prompts" in note and "listed apart, not ranked" in note
    shown = tables.display(frame)
    assert shown["Rank"].isna().all()
    assert list(shown["Rank range (95%)"]) == ["not ranked: answered 2 of the 4 prompts the models of this table "
                                               "answered"] * 2


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
    old_rows, why = tables.ranked(cat, "iconicity", "crt", protocol_id=tables.UNRECORDED)
    assert list(old_rows["model"]) == ["Old"]
    assert old_rows["rank"].isna().all() and "listed, never ranked" in why  # nothing says how it was scored
    assert tables.display(old_rows).loc[0, "Rank range (95%)"] == "not ranked: scored before protocols were recorded"


def test_paper_rows_of_another_protocol_are_listed_beside_not_ranked(store):
    metric = iconicity.CRT_FROM_MEANS[0]
    protocol = results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10,
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})
    row = {"provenance": "scored", "submission_id": "s1", "model": "Mine", "track": "iconicity", "metric": metric,
           "slice": "kind", "slice_value": "still", "value": 0.4, "higher_is_better": True, **protocol}
    results.write_folder(store.results / "s1", [], [row], [], RunRecord())
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
    # Three models on three tracks, one on awareness only, and a one-track paper row. Variability is not in the
    # overall (no direction to win on), so the set is awareness + iconicity; twelve prompts per track.
    rng = np.random.default_rng(7)
    values = {model: {track: list(rng.integers(0, 9, 12) / 8) for track in DEFAULTS}
              for model in ("Alpha", "Beta", "Gamma")}
    for i, (model, per_track) in enumerate(values.items()):
        for track, prompt_values in per_track.items():
            write_result(store, f"{track[:3]}{i}", model, track, dict(zip(PROMPTS, prompt_values)))
    write_result(store, "solo", "Solo", "awareness", dict.fromkeys(PROMPTS, 1.0))
    paper = {"provenance": "reported", "model": "SDXL", "track": "iconicity", "metric": "crt", "slice": "overall",
             "slice_value": "all", "value": 0.99, "higher_is_better": True,
             **results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10,
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})}
    pq.write_table(results.table([paper], results.AGGREGATE), store.reported)  # on-protocol, one track only
    wide, choices, chosen, off = tables.overall(Catalog(store))
    assert chosen == "awareness + iconicity" and off == 0
    assert dict(choices) == {chosen: 3, "awareness": 1, "iconicity": 1}
    assert set(wide["model"]) == set(values)  # neither Solo nor the paper row is ranked among them
    assert "variability" not in wide.columns
    # Brute force: per track the same drawn prompts for every model (tracks in name order, one generator).
    models, generator = list(values), np.random.default_rng(tables.SEED)
    means = np.zeros((tables.REPLICATES, len(models)))
    for track in ("awareness", "iconicity"):
        higher = DEFAULTS[track][1]
        draws = generator.integers(0, 12, size=(tables.REPLICATES, 12))
        for b, drawn in enumerate(draws):
            boot = [sum(values[m][track][i] for i in drawn) / 12 for m in models]
            for j, v in enumerate(boot):
                beaten = sum((v > o if higher else v < o) + 0.5 * (v == o) for k, o in enumerate(boot) if k != j)
                means[b, j] += beaten / (len(models) - 1) / 2
    low, high = math.floor(0.025 * (tables.REPLICATES - 1)), math.ceil(0.975 * (tables.REPLICATES - 1))
    for j, model in enumerate(models):
        row = wide[wide["model"] == model].iloc[0]
        assert row["win_low"] == pytest.approx(sorted(means[:, j])[low])
        assert row["win_high"] == pytest.approx(sorted(means[:, j])[high])
    assert "12 prompts they all answered" in wide.attrs["note"]
    other, _, shown, _ = tables.overall(Catalog(store), track_set="iconicity")
    assert shown == "iconicity" and list(other["model"]) == []  # one model alone has no win rate


# --- issue 33: one set of prompts per ranking ------------------------------------------------------------------
def sixty_fourths(rng: np.random.Generator, low: int, high: int, size: int) -> list[float]:
    """Per-prompt values that are multiples of 1/64: every sum of up to 200 of them is exact, so the brute force
    and the ranking break no tie differently."""
    return list(rng.integers(low, high + 1, size) / 64)


def test_rankings_a_model_that_refused_its_hardest_prompts_is_ranked_on_the_prompts_all_answered(store):
    """200 prompts; "Refuser" declared refusals on the 10 hardest, where the others score 0. Its own mean (over
    its 190) is above the others' means over all 200, but below theirs on the 190 it answered: ranked on its
    own prompts and the others' on all theirs, it would show rank 1 while its interval (shared prompts) says 3."""
    rng = np.random.default_rng(1)
    prompts = [f"p{i:03d}" for i in range(200)]
    hard, easy = prompts[:10], prompts[10:]
    shared = {"Strong": sixty_fourths(rng, 62, 64, 190), "Good": sixty_fourths(rng, 60, 64, 190),
              "Refuser": sixty_fourths(rng, 60, 62, 190)}
    for i, (model, values) in enumerate(shared.items()):
        answers = dict(zip(easy, values)) | ({} if model == "Refuser" else dict.fromkeys(hard, 0.0))
        write_result(store, f"s{i}", model, "iconicity", answers)
    own = {m: np.mean(v) if m == "Refuser" else np.sum(v) / 200 for m, v in shared.items()}
    assert own["Refuser"] > max(own["Strong"], own["Good"])  # the case: first on each model's own prompts
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    expected = brute_force_rank_intervals(shared, higher=True)
    assert list(frame["model"]) == ["Strong", "Good", "Refuser"] and list(frame["rank"]) == [1, 2, 3]
    for row in frame.itertuples():
        assert (row.rank_low, row.rank_high) == expected[row.model]
        assert row.rank_low <= row.rank <= row.rank_high  # rank and interval from the same prompts
        assert row.value == pytest.approx(np.mean(shared[row.model])) and row.n == 190
    assert "from the 190 prompts they all answered" in note
    shown = tables.display(frame)
    assert list(shown["n"]) == [190, 190, 190] and not shown["Rank range (95%)"].str.startswith("not").any()


def test_rankings_one_submission_of_3_of_200_prompts_is_listed_apart_and_leaves_the_others_intervals(store):
    rng = np.random.default_rng(2)
    prompts = [f"p{i:03d}" for i in range(200)]
    values = {"A": sixty_fourths(rng, 40, 64, 200), "B": sixty_fourths(rng, 30, 60, 200),
              "C": sixty_fourths(rng, 20, 56, 200)}
    for i, (model, model_values) in enumerate(values.items()):
        write_result(store, f"s{i}", model, "iconicity", dict(zip(prompts, model_values)))
    write_result(store, "s9", "Three", "iconicity", dict(zip(prompts[:3], [1.0, 1.0, 1.0])))
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    expected = brute_force_rank_intervals(values, higher=True)  # over the 200 prompts, as if Three were absent
    ranked = frame[frame["rank"].notna()]
    assert list(ranked["model"]) == ["A", "B", "C"]
    assert {m: (lo, hi) for m, lo, hi in zip(ranked["model"], ranked["rank_low"], ranked["rank_high"])} == expected
    three = frame[frame["model"] == "Three"].iloc[0]
    assert pd.isna(three["rank"]) and pd.isna(three["rank_low"]) and three["value"] == 1.0 and three["n"] == 3
    assert three["not_ranked"] == "answered 3 of the 200 prompts the models of this table answered"
    assert "from the 200 prompts they all answered" in note
    assert "1 model(s) answered fewer than 90% of the 200 prompts" in note and "listed apart, not ranked" in note
    assert list(frame["model"])[-1] == "Three"  # after the ranked rows
    assert set(ranked["tie_group"]) != {1} or len(set(expected.values())) == 1  # not one group of everyone


def test_rankings_diversity_at_n_4_and_n_8_never_share_a_ranking(store):
    from benchmark.datasets.names import CUBE_DIVERSITY
    from benchmark.metrics.diversity import version

    tagger = "index of 12 artifacts by clip-vit-b-32 (k), 'a photo of {artifact}'"
    for i, (model, size, value) in enumerate((("Eight", 8, 0.25), ("Four", 4, 0.5), ("Eight too", 8, 0.125))):
        metric_version = version(tagger, size, 50, 0, "seed_batches")
        protocol = results.protocol_columns({"dataset": str(CUBE_DIVERSITY), "images_per_prompt": 80,
                                            "metric_version": metric_version, "backbones": ["clip-vit-b-32=c@r"]})
        row = {"provenance": "scored", "submission_id": f"d{i}", "model": model, "track": "diversity",
               "metric": "cd_uniform", "slice": "overall", "slice_value": "all", "value": value, "n": 15,
               "higher_is_better": True, "metric_version": metric_version, **protocol}
        results.write_folder(store.results / f"d{i}", [], [row], [], RunRecord(submission_id=f"d{i}"))
    cat = Catalog(store)
    table = tables.protocols(cat, "diversity", "cd_uniform")
    assert list(table["rows"]) == [2, 1] and list(table["on_protocol"]) == [True, False]
    assert "N = 4" in tables.describe_protocol(table["protocol"].iloc[1])
    headline, _ = tables.ranked(cat, "diversity", "cd_uniform")
    assert list(headline.loc[headline["rank"].notna(), "model"]) == ["Eight", "Eight too"]  # Four's 0.5 is not
    other, _ = tables.ranked(cat, "diversity", "cd_uniform", protocol_id=table["protocol_id"].iloc[1])
    assert list(other["model"]) == ["Four"]
    # Random draws name their count and seed: 50 draws and 20 draws are two protocols as well.
    assert version(tagger, 8, 50, 0, "random") != version(tagger, 8, 20, 0, "random")


def test_rankings_chained_intervals_make_separate_tie_groups():
    low, high = pd.Series([1, 2, 3, 4]), pd.Series([2, 3, 4, 5])  # each overlaps the next, 1-2 and 4-5 do not
    assert list(tables.tie_groups(low, high)) == [1, 1, 2, 2]  # {1-2, 2-3} share rank 2, {3-4, 4-5} rank 4
    # 1-2, 1-3 and 2-4 all hold rank 2; 3-4 shares no rank with 1-2: a new group (though it overlaps 2-4)
    assert list(tables.tie_groups(pd.Series([1, 1, 2, 3]), pd.Series([2, 3, 4, 4]))) == [1, 1, 1, 2]
    assert list(tables.tie_groups(pd.Series([1, 1, 1, 3]), pd.Series([3, 3, 3, 4]))) == [1, 1, 1, 1]  # rank 3
    assert list(tables.tie_groups(pd.Series([1, 2, 3]), pd.Series([1, 2, 3]))) == [1, 2, 3]  # all told apart
    with_gap = tables.tie_groups(pd.Series([1, None, 1]), pd.Series([2, None, 2]))
    assert list(with_gap.astype(object)) == [1, pd.NA, 1]  # a row without an interval has no group


def test_rankings_a_never_used_up_model_ranks_first_on_reusability(store):
    from benchmark.aggregate import aggregate_curves
    from benchmark.metrics.variability import W1KP, Calibration

    metric = W1KP(Calibration(np.array([0.0, 4.0]), np.array([0.0, 1.0]), backbone="x"), backbone="x")
    # W1KP_k per prompt (4 prompts, k = 2..10): "Noise" never reaches 0.85, the others at k = 3 and k = 6.
    curves = {"Noise": lambda k: 0.2, "Early": lambda k: 0.9 if k >= 3 else 0.5, "Late": lambda k: 0.9 if k >= 6 else 0.5}
    for i, (model, at) in enumerate(curves.items()):
        per_prompt = pd.DataFrame([{"metric": "w1kp", "prompt_id": f"p{p}", "x": k, "value": at(k)}
                                   for p in range(4) for k in range(2, 11)])
        [row] = metric.derived([], aggregate_curves(per_prompt))
        protocol = results.protocol_columns({"dataset": CUBE_DATASET, "images_per_prompt": 10,
                                            "metric_version": metric.info.version, "backbones": ["x=x@r"]})
        row |= {"provenance": "scored", "submission_id": f"w{i}", "model": model, **protocol}
        results.write_folder(store.results / f"w{i}", [], [row], [], RunRecord(submission_id=f"w{i}"))
    frame, note = tables.ranked(Catalog(store), "variability", "w1kp_reusability")
    assert list(frame["model"]) == ["Noise", "Late", "Early"] and list(frame["rank"]) == [1, 2, 3]
    noise = frame.iloc[0]
    assert pd.isna(noise["value"]) and noise["ci_low"] == 10.0  # censored: more than 10 seeds
    shown = tables.display(frame)
    assert list(shown["Score"]) == ["> 10", 6.0, 3.0] and shown.loc[0, "95% CI"] == ""
    kinds = dict(zip(shown.columns, tables.datatypes(shown.columns, shown)))
    assert kinds["Score"] == "str" and kinds["Model"] == "markdown" and kinds["Rank"] == "number"
    assert "ranked on its own value" in note  # a model-level value: no per-prompt values, no interval


def test_rankings_crt_from_column_means_has_a_bootstrap_interval_over_references(store):
    """The iconicity Overview's metric, CRA per reference x (1 - VR) on the column means: each model's value,
    its 95% CI and its rank interval from the same bootstrap draws of the references every model answered
    (VR is undefined on a reference with no recognised image, and its mean is over the others)."""
    rng = np.random.default_rng(3)
    references = [f"r{i:02d}" for i in range(24)]
    metric = iconicity.CRT_FROM_MEANS[0]
    protocol = results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10,
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})
    data = {}
    for i, (model, share) in enumerate((("Often", 0.9), ("Sometimes", 0.6), ("Rarely", 0.3))):
        cra = (rng.random(24) < share).astype(float)
        vr = np.where(cra == 1, rng.integers(0, 17, 24) / 16, np.nan)
        data[model] = (cra, vr)
        common = {"provenance": "scored", "submission_id": f"c{i}", "model": model, "track": "iconicity",
                  "metric_version": PAPER.version, "dataset": CRT_DATASET, **protocol}
        rows = [{**common, "metric": metric, "slice": "overall", "slice_value": "all", "higher_is_better": True,
                 "value": cra.mean() * (1 - np.nanmean(vr)), "n": 24}]
        for name, values in (("cra_reference", cra), ("vr", vr)):
            rows += [{**common, "metric": name, "slice": "prompt", "slice_value": r, "value": v, "n": 10}
                     for r, v in zip(references, values)]
        results.write_folder(store.results / f"c{i}", [], rows, [], RunRecord(submission_id=f"c{i}"))
    frame, note = tables.ranked(Catalog(store), "iconicity", metric)
    draws = np.random.default_rng(tables.SEED).integers(0, 24, size=(tables.REPLICATES, 24))
    boot = {m: [] for m in data}
    for drawn in draws:
        for model, (cra, vr) in data.items():
            taken = vr[drawn][~np.isnan(vr[drawn])]
            boot[model].append(cra[drawn].mean() * (1 - (taken.mean() if len(taken) else 0.0)))
    low, high = math.floor(0.025 * (tables.REPLICATES - 1)), math.ceil(0.975 * (tables.REPLICATES - 1))
    ranks = {m: [] for m in data}
    for b in range(tables.REPLICATES):
        for m in data:
            ranks[m].append(1 + sum(boot[o][b] > boot[m][b] for o in data))
    for row in frame.itertuples():
        assert row.value == pytest.approx(data[row.model][0].mean() * (1 - np.nanmean(data[row.model][1])))
        assert (row.ci_low, row.ci_high) == pytest.approx((sorted(boot[row.model])[low], sorted(boot[row.model])[high]))
        assert (row.rank_low, row.rank_high) == (sorted(ranks[row.model])[low], sorted(ranks[row.model])[high])
    assert "from the 24 prompts they all answered" in note
    assert tables.display(frame)["95% CI"].str.startswith("[").all()


@pytest.mark.slow  # builds a dataset, stages and scores a submission (4 s)
def test_rankings_images_per_prompt_is_what_the_submission_holds_not_the_seeds_declared(tmp_path, tiny_upstream):
    """A submission declaring 3 seeds whose first prompt's seed 2 was refused holds 2 images for that prompt:
    its protocol records 2 images per prompt (and the dataset's revision), so it is not ranked with 3-image ones."""
    import json

    from benchmark import harness
    from benchmark.datasets.prompts import load_prompts, local_folder
    from benchmark.metrics.base import Inputs, Metric, MetricInfo
    from benchmark.submission import stage
    from culturelens.testing.submissions import make_submission

    class ImageCount(Metric):
        info = MetricInfo("images", "images of the prompt", "test", "1", True, "count", 0.0, 10.0, "test", (),
                          level="prompt")

        def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
            counts = inputs.images.groupby("prompt_id").size()
            return pd.DataFrame({"prompt_id": counts.index, "value": counts.to_numpy(float), "note": None})

    root = local_folder(tmp_path / "datasets", cube_1k.HUB_REPO)
    cube_1k.build(str(tiny_upstream), root)
    prompts = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=tmp_path / "datasets")
    ids = list(prompts.table.index)
    folder = make_submission(tmp_path / "sub", ids, seeds=(0, 1, 2))
    (folder / "images" / ids[0] / "2.png").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["missing"] = [{"prompt_id": ids[0], "seed": 2, "reason": "safety_filter"}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    report = stage(folder, tmp_path / "staging", lambda m: prompts)
    assert report.ok, report.errors
    staged = report.keep(tmp_path / "staged")
    images = pq.read_table(staged / "images.parquet").to_pandas()
    scores = harness.score(staged, report.manifest, prompts, images, [ImageCount()], {}, submission_id="t")
    fields = {results.protocol_fields(row["protocol"])["images_per_prompt"] for row in scores.aggregates}
    assert fields == {2} and len(report.manifest.seeds) == 3
    revision = {results.protocol_fields(row["protocol"])["dataset_revision"] for row in scores.aggregates}
    assert revision == {prompts.digest}

"""Protocols, rank intervals and the overall ranking, on hand-built results whose right answer is known.

Results are written with the production ``benchmark.results.write_folder`` into a real store and read through
the real ``Catalog``; the expected bootstrap is brute-forced here, replicate by replicate.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import ranking, results
from benchmark.datasets import cube_1k, iconic_references
from benchmark.metrics import iconicity
from benchmark.run_record import RunRecord
from benchmark.stats import difference_ci
from leaderboard import display, tables
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
    "variability": ("w1kp", False, CUBE_DATASET, "2 (paper; calibration sha256 ab for dreamsim)", ["dreamsim=d@r"]),
}


def write_result(store: Store, sid: str, model: str, track: str, prompts: dict[str, float], *, seeds: int = 10,
                 dataset: str | None = None) -> None:
    """One submission's aggregate rows (overall and per prompt) of ``track``'s headline metric, scored under
    the track's default protocol except for ``seeds`` and ``dataset``."""
    metric, higher, default_dataset, version, backbones = DEFAULTS[track]
    protocol = results.protocol_columns({"dataset": dataset or default_dataset, "images_per_prompt": seeds,
                                        "metric_version": version, "backbones": backbones})
    common = {"provenance": "scored", "submission_id": sid, "model": model, "track": track, "metric": metric,
              "metric_version": version, "higher_is_better": higher, "range_low": 0.0, "range_high": 1.0,
              "seeds": ",".join(map(str, range(seeds))),
              "dataset": dataset or default_dataset, "scored_at": f"2026-01-01T00:00:{len(sid):02d}", **protocol}
    rows = [{**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(list(prompts.values()))),
             "n": len(prompts)}]
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": seeds} for p, v in prompts.items()]
    results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))


def rank_rule_by_hand(values: dict[str, list[float]], higher: bool, confidence: float = 0.95
                      ) -> dict[str, tuple[int, int, int]]:
    """Rank rule 2 written out: for each ordered pair, the prompts on which one model's value beats the other's
    (equal values count for neither), the exact sign test as a sum of binomial terms, significant at or below
    (1 - confidence) / (2 x pairs) where the mean is better too; a model above one that is above a third is above
    it too (passes until nothing changes); then each model's (rank, rank_low, rank_high): 1 + the models above it,
    twice, and the number of models less those below it."""
    models = list(values)
    n = len(values[models[0]])
    mean = {m: sum(v) / n for m, v in values.items()}
    sign = 1 if higher else -1
    pairs = len(models) * (len(models) - 1) // 2
    above = set()
    for a in models:
        for b in models:
            wins = sum(int(sign * (x - y) > 0) for x, y in zip(values[a], values[b]))
            losses = sum(int(sign * (x - y) < 0) for x, y in zip(values[a], values[b]))
            tail = sum(math.comb(wins + losses, k) for k in range(wins, wins + losses + 1)) / 2 ** (wins + losses)
            if sign * (mean[a] - mean[b]) > 0 and tail <= (1 - confidence) / (2 * pairs):
                above.add((a, b))
    while implied := {(a, c) for a, b in above for b_, c in above if b == b_} - above:
        above |= implied
    ranks = {m: 1 + sum((o, m) in above for o in models) for m in models}
    return {m: (ranks[m], ranks[m], len(models) - sum((m, o) in above for o in models)) for m in models}


def ranks_of(frame: pd.DataFrame) -> dict[str, tuple[int, int, int]]:
    """A ranked table's (rank, rank_low, rank_high) by model."""
    return {m: (r, lo, hi) for m, r, lo, hi in zip(frame["model"], frame["rank"], frame["rank_low"],
                                                   frame["rank_high"])}


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "store")


# Multiples of 1/8: every mean is exact, so float rounding cannot break a tie differently here and there. Twelve
# prompts: at least ranking.MIN_PROMPTS, so the rank intervals are given.
SIX = {
    "Alpha": [0.875, 0.75, 0.625, 0.875, 0.5, 0.75],
    "Beta": [0.75, 0.875, 0.5, 0.75, 0.625, 0.625],
    "Gamma": [0.25, 0.375, 0.5, 0.25, 0.125, 0.375],
    "Delta": [0.25, 0.25, 0.625, 0.375, 0.125, 0.25],
}
FOUR_MODELS = {model: values + values[::-1] for model, values in SIX.items()}
PROMPTS = [f"p{i}" for i in range(1, 13)]


def test_ranks_and_ranges_follow_rank_rule_2_written_out_on_the_protocols_prompts(store):
    assert len(PROMPTS) >= ranking.MIN_PROMPTS
    for i, (model, values) in enumerate(FOUR_MODELS.items()):
        prompts = dict(zip(PROMPTS, values))
        if model == "Alpha":
            prompts["p13"] = 0.5  # answered by Alpha alone: in the prompt set, the others' worst value (0) there
        write_result(store, f"s{i}", model, "iconicity", prompts)
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    on_13 = {m: v + ([0.5] if m == "Alpha" else [0.0]) for m, v in FOUR_MODELS.items()}
    assert ranks_of(frame) == rank_rule_by_hand(on_13, higher=True)
    # By hand: 6 pairs, each side tested at 0.05 / 12 = 0.0042. Alpha beats Gamma on 13 prompts of 13 (p = 1/8192)
    # and Delta on 11 of 11 that differ (1/2048), Beta beats Gamma 10-0 (1/1024): significant. Alpha-Beta 9-4
    # (1093/8192 = 0.13), Beta-Delta 10-2 (79/4096 = 0.019) and Gamma-Delta 4-4 are not. Gamma and Delta tie on
    # 3.75 / 13, yet Beta is above Gamma and not Delta: Gamma's rank is 1 + 2, Delta's 1 + 1.
    assert list(frame["model"]) == ["Alpha", "Beta", "Delta", "Gamma"] and list(frame["rank"]) == [1, 1, 2, 3]
    assert list(zip(frame["rank_low"], frame["rank_high"])) == [(1, 2), (1, 3), (2, 4), (3, 4)]
    assert list(frame["value"]) == [9.25 / 13, 8.25 / 13, 3.75 / 13, 3.75 / 13] and (frame["n"] == 13).all()
    assert list(frame["refused"]) == [0.0, 1 / 13, 1 / 13, 1 / 13]
    assert "from the same 13 prompts" in note and "3 rows left some unanswered" in note
    assert "rank rule 2" in note
    assert list(frame["tie_group"]) == [1, 1, 2, 3]  # the rows sharing a rank
    shown = display.display(frame)
    assert shown.loc[0, "Rank"] == 1 and list(shown["Rank range (95%)"]) == ["1–2", "1–3", "2–4", "3–4"]
    assert shown.loc[0, "Score"] == round(9.25 / 13, 3) and shown.loc[0, "n"] == 13
    assert list(shown["Refused"]) == ["0%", "7.69%", "7.69%", "7.69%"]
    assert shown["Protocol"].str.endswith("(headline)").all()


def test_models_that_answered_different_prompts_are_shown_each_refusal_at_the_worst_value(store):
    # Each answered 2 of the 4 prompts the two answered between them: scored on all 4, the others at 0; four
    # prompts are too few to rank (ranking.MIN_PROMPTS), so the values are shown and no order is claimed.
    write_result(store, "s1", "Left", "iconicity", {"p1": 0.5, "p2": 0.25})
    write_result(store, "s2", "Right", "iconicity", {"p3": 0.75, "p4": 0.5})
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    assert list(frame["model"]) == ["Right", "Left"] and frame["rank"].isna().all()
    assert list(frame["value"]) == [1.25 / 4, 0.75 / 4] and list(frame["refused"]) == [0.5, 0.5]
    assert frame["rank_low"].isna().all() and frame["tie_group"].isna().all()
    assert (frame["not_ranked"] == f"{ranking.TOO_FEW} (4; a ranking needs {ranking.MIN_PROMPTS})").all()
    assert f"{ranking.TOO_FEW}: below {ranking.MIN_PROMPTS} prompts the values are shown, never an order" in note
    assert list(display.display(frame)["Refused"]) == ["50%", "50%"]


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
        assert display.display(other).loc[0, "Protocol"] == f"{protocol_id} (off-protocol)"
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
    assert display.display(old_rows).loc[0, "Rank range (95%)"] == "not ranked: scored before protocols were recorded"


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
    shown = display.display(frame)[frame["beside"]]
    assert shown["Rank"].isna().all() and (shown["Rank range (95%)"] == "not ranked: other protocol").all()
    # Under the paper's own protocol they are ranked among themselves, with no interval, and the note says why.
    paper = tables.protocols(cat, "iconicity", metric, "kind", "still")
    paper_id = paper.loc[paper["provenance"] == "reported", "protocol_id"].iloc[0]
    reported, why = tables.ranked(cat, "iconicity", metric, "kind", "still", protocol_id=paper_id)
    assert list(reported.loc[~reported["beside"], "rank"]) == [1, 2, 3, 4, 5]
    assert reported["rank_low"].isna().all() and "no per-prompt values" in why


def test_a_null_leaves_the_win_rate_denominator_as_in_heim():
    rates = ranking.track_win_rates(np.array([[0.9, np.nan, 0.1]]), True)[0]
    assert rates[0] == 1.0 and np.isnan(rates[1]) and rates[2] == 0.0  # not A 0.5, C 0.0, B -0.25


def test_overall_ranks_models_of_one_track_set_with_brute_force_intervals(store):
    # Three models on three tracks, one on awareness only, and a one-track paper row. Variability is not in the
    # overall (no direction to win on), so the set is awareness + iconicity; twelve prompts per track.
    rng = np.random.default_rng(7)
    values = {model: {track: list(rng.integers(low, low + 4, 12) / 8) for track in DEFAULTS}
              for model, low in (("Alpha", 5), ("Beta", 3), ("Gamma", 0))}
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
    assert chosen == "awareness + iconicity" and off.empty
    assert dict(choices) == {chosen: 3, "awareness": 1, "iconicity": 1}
    assert set(wide["model"]) == set(values)  # neither Solo nor the paper row is ranked among them
    assert "variability" not in wide.columns
    # By hand: per track, rank rule 2 at 97.5% (95% shared by the two tracks), each model's win-rate range from its
    # rank range (beating those below it, up to all not above it), the point its middle; their means over the two
    # tracks; the overall rank 1 + the models whose lowest mean is above its highest.
    models, low, high = list(values), {}, {}
    for model in models:
        ranges = [rank_rule_by_hand({m: values[m][t] for m in models}, DEFAULTS[t][1], 0.975)[model]
                  for t in ("awareness", "iconicity")]
        low[model] = np.mean([(3 - hi) / 2 for _, _, hi in ranges])
        high[model] = np.mean([(3 - rank) / 2 for rank, _, _ in ranges])
    for model in models:
        row = wide[wide["model"] == model].iloc[0]
        assert (row["win_low"], row["win_high"]) == pytest.approx((low[model], high[model]))
        assert row["win_rate"] == pytest.approx((low[model] + high[model]) / 2)
        assert row["rank"] == 1 + sum(low[o] > high[model] for o in models)
        assert row["rank_high"] == 3 - sum(high[o] < low[model] for o in models)
    assert "from the same 12 prompts" in wide.attrs["note"]
    other, _, shown, _ = tables.overall(Catalog(store), track_set="iconicity")
    # One model alone has no win rate: it is shown with its own score, unranked, saying what ranks it (issue 41).
    assert shown == "iconicity" and list(other["model"]) == ["SDXL"] and other["win_rate"].isna().all()
    assert list(other["not_ranked"]) == [tables.LONE]


# --- issue 33: one set of prompts per ranking ------------------------------------------------------------------
def sixty_fourths(rng: np.random.Generator, low: int, high: int, size: int) -> list[float]:
    """Per-prompt values that are multiples of 1/64: every sum of up to 200 of them is exact, so the brute force
    and the ranking break no tie differently."""
    return list(rng.integers(low, high + 1, size) / 64)


def test_rankings_a_model_that_refused_its_hardest_prompts_is_ranked_with_them_at_the_worst_value(store):
    """200 prompts; "Refuser" declared refusals on the 10 hardest, where the others score 0. Its own mean (over
    its 190) is above the others' means over all 200; ranked on the protocol's 200, its refusals at the worst value
    (0), it is third, and its score, rank and interval all say so."""
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
    on_200 = {m: [0.0] * 10 + v for m, v in shared.items()}
    assert ranks_of(frame) == rank_rule_by_hand(on_200, higher=True)
    assert list(frame["model"]) == ["Strong", "Good", "Refuser"] and list(frame["rank"]) == [1, 2, 3]
    for row in frame.itertuples():
        assert row.rank_low <= row.rank <= row.rank_high  # rank and range from the same prompts
        assert row.value == pytest.approx(np.sum(shared[row.model]) / 200) and row.n == 200
    assert list(frame["refused"]) == [0.0, 0.0, 0.05]
    assert "from the same 200 prompts" in note
    shown = display.display(frame)
    assert list(shown["n"]) == [200, 200, 200] and not shown["Rank range (95%)"].str.startswith("not").any()


def test_rankings_one_submission_of_3_of_200_prompts_is_ranked_last_and_leaves_the_others_intervals(store):
    rng = np.random.default_rng(2)
    prompts = [f"p{i:03d}" for i in range(200)]
    values = {"A": sixty_fourths(rng, 40, 64, 200), "B": sixty_fourths(rng, 30, 60, 200),
              "C": sixty_fourths(rng, 20, 56, 200)}
    for i, (model, model_values) in enumerate(values.items()):
        write_result(store, f"s{i}", model, "iconicity", dict(zip(prompts, model_values)))
    write_result(store, "s9", "Three", "iconicity", dict(zip(prompts[:3], [1.0, 1.0, 1.0])))
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    on_200 = {**values, "Three": [1.0] * 3 + [0.0] * 197}  # its 197 unanswered prompts at the worst value, 0
    assert ranks_of(frame) == rank_rule_by_hand(on_200, higher=True)
    assert list(frame["model"]) == ["A", "B", "C", "Three"] and list(frame["rank"]) == [1, 2, 3, 4]
    three = frame[frame["model"] == "Three"].iloc[0]
    assert three["value"] == 3 / 200 and three["n"] == 200 and three["refused"] == 197 / 200
    assert (three["rank_low"], three["rank_high"]) == (4, 4) and three["not_ranked"] == ""
    assert "from the same 200 prompts" in note and "1 row left some unanswered" in note
    assert "1 row mostly refused" in note and display.share(three["refused"]) == "98.5%: mostly refused"


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
    shown = display.display(frame)
    assert list(shown["Score"]) == ["> 10", 6.0, 3.0] and shown.loc[0, "95% CI"] == ""
    kinds = dict(zip(shown.columns, display.datatypes(shown.columns, shown)))
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
    draws = np.random.default_rng(ranking.SEED).integers(0, 24, size=(ranking.REPLICATES, 24))
    boot = {m: [] for m in data}
    for drawn in draws:
        for model, (cra, vr) in data.items():
            taken = vr[drawn][~np.isnan(vr[drawn])]
            boot[model].append(cra[drawn].mean() * (1 - (taken.mean() if len(taken) else 0.0)))
    low, high = math.floor(0.025 * (ranking.REPLICATES - 1)), math.ceil(0.975 * (ranking.REPLICATES - 1))
    ranks = {m: [] for m in data}
    for b in range(ranking.REPLICATES):
        for m in data:
            ranks[m].append(1 + sum(boot[o][b] > boot[m][b] for o in data))
    for row in frame.itertuples():
        assert row.value == pytest.approx(data[row.model][0].mean() * (1 - np.nanmean(data[row.model][1])))
        assert (row.ci_low, row.ci_high) == pytest.approx((sorted(boot[row.model])[low], sorted(boot[row.model])[high]))
        assert (row.rank_low, row.rank_high) == (sorted(ranks[row.model])[low], sorted(ranks[row.model])[high])
    assert "from the same 24 prompts" in note
    assert display.display(frame)["95% CI"].str.startswith("[").all()


@pytest.mark.slow  # builds a dataset, stages and scores three submissions (6 s)
def test_gaming_padded_seeds_share_no_protocol_with_an_honest_run_and_do_not_raise_cra_per_reference(
        tmp_path, tiny_upstream):
    """An honest run of 3 seeds (0-2) and a padded one declaring 6 (0-5) that lists 3 as refused on one prompt.
    "Recognised" is seed 4's image alone, so a reference's CRA (any image recognised) is 0 with 3 seeds and 1 with
    6 wherever seed 4's image is there. Recorded as the fewest images present (3), the padded run shared the honest
    run's protocol and ranked above it (1.0 against 0.0 on every reference but the refused one); it now records 6
    images per prompt, a protocol of its own, the refused images count as failures (its per-image share on the
    refused prompt is 0 of 6, not of 3), and the suite's 3-seed part would not take it."""
    import json

    from benchmark import harness
    from benchmark.datasets.prompts import load_prompts, local_folder
    from benchmark.metrics.base import Inputs, Metric, MetricInfo
    from benchmark.submission import stage
    from benchmark.suite import DatasetPin, Part, Suite
    from culturelens.testing.submissions import make_submission

    class Hit(Metric):
        info = MetricInfo("hit", "seed 4's image", "test", "1", True, "share", 0.0, 1.0, "test", ())

        def per_image(self, inputs: Inputs):
            return (inputs.images["seed"] == 4).to_numpy(float), [None] * len(inputs.images)

    class AnyHit(Metric):
        info = MetricInfo("any_hit", "any image recognised", "test", "1", True, "share", 0.0, 1.0, "test", (),
                          level="prompt")

        def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
            hits = inputs.images.groupby("prompt_id")["seed"].agg(lambda seeds: float((seeds == 4).any()))
            return pd.DataFrame({"prompt_id": hits.index, "value": hits.to_numpy(), "note": None})

    root = local_folder(tmp_path / "datasets", cube_1k.HUB_REPO)
    cube_1k.build(str(tiny_upstream), root)
    prompts = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=tmp_path / "datasets")
    ids = list(prompts.table.index)
    store = Store(tmp_path / "store")
    protocol_ids = {}
    for sid, seeds, refused in (("honest", (0, 1, 2), ()), ("padded", tuple(range(6)), (3, 4, 5))):
        folder = make_submission(tmp_path / sid, ids, seeds=seeds, model_name=sid.capitalize())
        for seed in refused:
            (folder / "images" / ids[0] / f"{seed}.png").unlink()
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["missing"] = [{"prompt_id": ids[0], "seed": seed, "reason": "safety_filter"} for seed in refused]
        (folder / "manifest.json").write_text(json.dumps(manifest))
        report = stage(folder, tmp_path / f"staging-{sid}", lambda m: prompts)
        assert report.ok, report.errors
        staged = report.keep(tmp_path / f"staged-{sid}")
        images = pq.read_table(staged / "images.parquet").to_pandas()
        scores = harness.score(staged, report.manifest, prompts, images, [Hit(), AnyHit()], {}, submission_id=sid)
        fields = {json.dumps(results.protocol_fields(row["protocol"]), sort_keys=True) for row in scores.aggregates}
        [recorded] = [json.loads(f) for f in fields]
        assert recorded["images_per_prompt"] == len(seeds) and recorded["missing_images"] == "failures"
        protocol_ids[sid] = {row["protocol_id"] for row in scores.aggregates}
        store.write_results(sid, scores)
    assert protocol_ids["honest"].isdisjoint(protocol_ids["padded"])
    cat = Catalog(store)
    table = tables.protocols(cat, "test", "any_hit")
    assert len(table) == 2 and set(table["rows"]) == {1}
    for protocol_id in table["protocol_id"]:  # each run alone in its protocol: never one above the other
        frame, _ = tables.ranked(cat, "test", "any_hit", protocol_id=protocol_id)
        assert len(frame) == 1
    padded = cat.per_prompt(["padded"], "hit").set_index("prompt_id")["value"]
    assert padded[ids[0]] == 0.0 and (padded.drop(ids[0]) == 1 / 6).all()  # 3 refused images count as 0 of 6
    suite = Suite("test/suite", 1, (Part("cube", DatasetPin(cube_1k.HUB_REPO, cube_1k.CONFIG), (0, 1, 2), ("test",),
                                         ""),))
    for sid in ("honest", "padded"):
        fields = results.protocol_fields(cat.query("SELECT protocol FROM aggregates WHERE submission_id = ?",
                                                   [sid])["protocol"].iloc[0])
        assert suite.answered_by("test", fields) == (sid == "honest")


# --- issue 39: rankings no submitter can game ------------------------------------------------------------------
def write_scored(store: Store, sid: str, model: str, values: dict[str, float], *, track: str = "iconicity",
                 metric: str = "crt", countries: dict[str, str] | None = None, when: int = 0, higher: bool = True,
                 value_range: tuple[float, float] = (0.0, 1.0), version: str = PAPER.version,
                 dataset: str = CRT_DATASET, extra: dict[str, dict[str, float]] | None = None) -> None:
    """One submission scored as the harness leaves it: a per-image row per answered prompt (seed 0, its country
    when given), the production ``aggregate`` of them (overall, per country, per prompt) with the row's context and
    protocol. ``extra``: more metrics' per-prompt values of the same submission (metric -> prompt -> value)."""
    from benchmark.aggregate import aggregate

    per_image = pd.DataFrame([{"submission_id": sid, "model": model, "prompt_id": p, "seed": 0, "track": track,
                               "metric": m, "value": v, "country": (countries or {}).get(p)}
                              for m, answers in {metric: values, **(extra or {})}.items() for p, v in answers.items()])
    protocol = results.protocol_columns({"dataset": dataset, "images_per_prompt": 10, "missing_images": "failures",
                                        "metric_version": version, "backbones": CRT_BACKBONES})
    context = {"provenance": "scored", "submission_id": sid, "model": model, "higher_is_better": higher,
               "metric_label": metric,
               "range_low": value_range[0], "range_high": value_range[1], "metric_version": version,
               "dataset": dataset, "seeds": ",".join(map(str, range(10))),
               "scored_at": f"2026-01-01T00:{when // 60:02d}:{when % 60:02d}", **protocol}
    rows = [{**row, **context} for row in aggregate(per_image.dropna(axis=1, how="all"))]
    results.write_folder(store.results / sid, results.records(per_image), rows, [], RunRecord(submission_id=sid))


def test_gaming_a_slice_rests_on_the_protocols_prompts_not_on_the_oldest_submission(store):
    """The Japan slice of 100 prompts (50 Japanese). The oldest submission answered 3 Japanese prompts (all 1.0),
    the next one refused one Japanese prompt; two complete ones follow. Read from the oldest submission, the slice
    was those 3 prompts: the 3-prompt model first, the others at their 50-prompt means with no interval. Every row
    now rests on the 50 Japanese prompts, an unanswered one at the worst value 0, each with its interval."""
    rng = np.random.default_rng(11)
    prompts = [f"p{i:03d}" for i in range(100)]
    countries = {p: "Japan" if i % 2 else "Brazil" for i, p in enumerate(prompts)}
    japan = [p for p in prompts if countries[p] == "Japan"]
    full = {m: dict(zip(prompts, sixty_fourths(rng, low, 64, 100))) for m, low in (("A", 40), ("B", 20))}
    refuser = dict(zip(prompts, sixty_fourths(rng, 30, 64, 100)))
    del refuser[japan[0]]
    write_scored(store, "s0-three", "Three", dict.fromkeys(japan[:3], 1.0), countries=countries, when=0)
    write_scored(store, "s1-refuser", "Refuser", refuser, countries=countries, when=1)
    for i, (model, values) in enumerate(full.items()):
        write_scored(store, f"s{i + 2}-{model}", model, values, countries=countries, when=2 + i)
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt", "country", "Japan")
    expected = {"A": sum(full["A"][p] for p in japan) / 50, "B": sum(full["B"][p] for p in japan) / 50,
                "Refuser": sum(refuser.get(p, 0.0) for p in japan) / 50, "Three": 3 / 50}
    got = dict(zip(frame["model"], frame["value"]))
    assert got == pytest.approx(expected) and (frame["n"] == 50).all() and frame["rank_low"].notna().all()
    assert list(frame["model"]) == sorted(expected, key=lambda m: -expected[m]) and frame["model"].iloc[-1] == "Three"
    assert dict(zip(frame["model"], frame["refused"])) == {"A": 0.0, "B": 0.0, "Refuser": 1 / 50, "Three": 47 / 50}
    assert "from the same 50 prompts" in note


def withholding_store(root, rng: np.random.Generator, withhold: int) -> tuple[Store, dict]:
    """Three models drawn alike on 200 prompts; "Withholder" leaves out its ``withhold`` lowest prompts."""
    store = Store(root)
    prompts = [f"p{i:03d}" for i in range(200)]
    values = {m: dict(zip(prompts, sixty_fourths(rng, 0, 64, 200))) for m in ("Withholder", "Other 1", "Other 2")}
    for i, (model, answers) in enumerate(values.items()):
        if model == "Withholder" and withhold:
            answers = dict(sorted(answers.items(), key=lambda kv: kv[1])[withhold:])
        write_result(store, f"s{i}", model, "iconicity", answers)
    return store, values


def test_gaming_withholding_the_19_lowest_prompts_never_raises_the_withholders_rank(tmp_path):
    """Ranked on the prompts all answered, a model equal to two others that left out its 19 lowest prompts ranked
    first in most draws (31 of 40 before: 1/3 expected). Each left-out prompt now counts as the worst value: in
    every draw the withholder's rank is no better than it is when it answers everything, and its score is its
    honest sum less what it withheld, over all 200 prompts."""
    for draw in range(12):
        ranks = {}
        for withhold in (0, 19):
            store, values = withholding_store(tmp_path / f"d{draw}-{withhold}", np.random.default_rng(draw), withhold)
            frame, _ = tables.ranked(Catalog(store), "iconicity", "crt")
            row = frame[frame["model"] == "Withholder"].iloc[0]
            ranks[withhold] = row["rank"]
            kept = sorted(values["Withholder"].values())[withhold:]
            assert row["value"] == pytest.approx(sum(kept) / 200) and row["refused"] == withhold / 200
        assert ranks[19] >= ranks[0], (draw, ranks)


def test_gaming_one_complete_model_does_not_push_others_out(store):
    """Four models answered the same 179 of 200 prompts (a 10.5% gap) and one weak model all 200: under the 90%
    rule the four were listed apart and the weak one ranked alone as 1. Eleven models each missing a different 9%
    were ranked on the 2 prompts they shared. Now every model is ranked on the 200 prompts, the gaps at 0."""
    rng = np.random.default_rng(5)
    prompts = [f"p{i:03d}" for i in range(200)]
    gap = {m: dict(zip(prompts[21:], sixty_fourths(rng, 48, 64, 179))) for m in ("G1", "G2", "G3", "G4")}
    for i, (model, answers) in enumerate(gap.items()):
        write_scored(store, f"g{i}", model, answers)
    write_scored(store, "weak", "Weak", dict.fromkeys(prompts, 0.125))
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    on_200 = {**{m: [0.0] * 21 + list(a.values()) for m, a in gap.items()}, "Weak": [0.125] * 200}
    assert frame["not_ranked"].eq("").all() and ranks_of(frame) == rank_rule_by_hand(on_200, higher=True)
    assert frame["model"].iloc[-1] == "Weak" and (frame["n"] == 200).all() and frame["rank_low"].notna().all()
    assert frame["rank"].iloc[-1] == 5  # each of the four beats it on the 179 prompts it answered, loses 21
    assert dict(zip(frame["model"], frame["refused"])) == {**dict.fromkeys(gap, 21 / 200), "Weak": 0.0}
    for model, answers in gap.items():
        assert frame.loc[frame["model"] == model, "value"].iloc[0] == pytest.approx(sum(answers.values()) / 200)
    eleven, on_200 = Store(store.root.parent / "eleven"), {}
    for k in range(11):
        missing = set(prompts[18 * k:18 * k + 18])
        on_200[f"M{k:02d}"] = [0.0 if p in missing else v for p, v in zip(prompts, sixty_fourths(rng, 32, 64, 200))]
        write_scored(eleven, f"e{k:02d}", f"M{k:02d}",
                     {p: v for p, v in zip(prompts, on_200[f"M{k:02d}"]) if p not in missing})
    frame, note = tables.ranked(Catalog(eleven), "iconicity", "crt")
    assert frame["not_ranked"].eq("").all() and (frame["n"] == 200).all() and (frame["refused"] == 0.09).all()
    assert ranks_of(frame) == rank_rule_by_hand(on_200, higher=True)
    assert "from the same 200 prompts" in note and frame["rank_low"].notna().all()


def test_gaming_the_overall_download_equals_the_rankings_numbers(store):
    """A model that refused its lowest iconicity prompt of 12: its own mean over 11 is above what it scores on the
    12 (the download gave that own mean beside win rates computed on other numbers). The overall download's
    headline rows, the overall's win rates and the track's own table now give one set of numbers (score, CI, n,
    refusal rate), and the heatmap beside them too."""
    from leaderboard import exports

    rng = np.random.default_rng(8)
    models = {m: {t: dict(zip(PROMPTS, rng.integers(2, 7, 12) / 8)) for t in ("awareness", "iconicity")}
              for m in ("Alpha", "Beta", "Refuser")}
    refused = min(models["Refuser"]["iconicity"], key=models["Refuser"]["iconicity"].get)
    own = np.mean([v for p, v in models["Refuser"]["iconicity"].items() if p != refused])
    models["Refuser"]["iconicity"][refused] = 0.0  # what the refusal counts as: its table's and the download's value
    for i, (model, per_track) in enumerate(models.items()):
        for track, answers in per_track.items():
            kept = {p: v for p, v in answers.items() if not (model == "Refuser" and track == "iconicity" and
                                                               p == refused)}
            write_result(store, f"{track[:3]}{i}", model, track, kept)
    cat = Catalog(store)
    download = exports.overall_rows(cat)
    for track in ("awareness", "iconicity"):
        table, _ = tables.ranked(cat, track, DEFAULTS[track][0])
        rows = download[(download["track"] == track) & (download["metric"] == DEFAULTS[track][0])]
        mine = table.set_index("model")[["value", "ci_low", "ci_high", "n", "refused"]].sort_index()
        theirs = rows.set_index("model")[["value", "ci_low", "ci_high", "n", "refused"]].sort_index()
        assert np.allclose(mine.to_numpy(float), theirs.to_numpy(float), equal_nan=True), track
        assert dict(zip(rows["model"], rows["value"])) == pytest.approx(
            {m: np.mean(list(models[m][track].values())) for m in models})
        # Win rates from the comparisons (rank rule 2 at 97.5% in an overall of two tracks): the middle of the
        # range from beating those below to beating all not above, (3 - rank_high + 3 - rank) / 2 of 2 others.
        win = download[(download["track"] == track) & (download["metric"] == exports.WIN_RATE)]
        by_hand = rank_rule_by_hand({m: list(models[m][track].values()) for m in models}, DEFAULTS[track][1], 0.975)
        assert dict(zip(win["model"], win["value"])) == pytest.approx(
            {m: (3 - high + 3 - rank) / 4 for m, (rank, _, high) in by_hand.items()})
    refuser = download[(download["model"] == "Refuser") & (download["metric"] == "crt")].iloc[0]
    assert refuser["value"] < own and refuser["refused"] == 1 / 12
    heat = tables.heatmap(cat, "iconicity", "crt", tables.OVERALL)
    assert heat["all"].to_dict() == pytest.approx(dict(zip(*tables.ranked(cat, "iconicity", "crt")[0][
        ["model", "value"]].T.to_numpy())))


def test_gaming_a_model_that_recognised_nothing_ranks_last_at_0(store):
    """CRT from the column means on the still references: a model that recognised none has no VR there (it is
    undefined), so no CRT row was derived and the model vanished from the table. Its CRT is CRA x (1 - VR) = 0."""
    metric = iconicity.CRT_FROM_MEANS[0]
    references = [f"r{i:02d}" for i in range(12)]
    kinds = {r: "still" for r in references}
    per_model = {"Often": [1.0] * 9 + [0.0] * 3, "Seldom": [1.0] * 3 + [0.0] * 9, "Blind": [0.0] * 12}
    for i, (model, cra) in enumerate(per_model.items()):
        vr = {r: 0.25 for r, c in zip(references, cra) if c}
        rows = write_crt(store, f"c{i}", model, dict(zip(references, cra)), vr, kinds)
        assert any(r["metric"] == metric and r["slice"] == "kind" for r in rows)
    frame, _ = tables.ranked(Catalog(store), "iconicity", metric, "kind", "still")
    # Compared reference by reference (CRA x (1 - VR) on each): Often beats Blind on 9 (p = 1/512, below 0.05 / 6)
    # and Seldom on 6 (1/64: not significant), Seldom beats Blind on 3 (1/8): Blind alone is below anyone.
    assert list(frame["model"]) == ["Often", "Seldom", "Blind"] and list(frame["rank"]) == [1, 1, 2]
    assert list(frame["value"]) == pytest.approx([0.75 * 0.75, 0.25 * 0.75, 0.0]) and frame["not_ranked"].eq("").all()


def write_crt(store: Store, sid: str, model: str, cra: dict[str, float], vr: dict[str, float],
              kinds: dict[str, str]) -> list[dict]:
    """A submission's iconicity rows as the harness derives them: per-reference CRA and VR (VR only where a
    reference was recognised), the production ``aggregate`` over them by kind, and ``Transformation.derived``'s
    CRT from column means. Returns the aggregate rows written."""
    from benchmark.aggregate import aggregate

    per_image = pd.DataFrame([{"submission_id": sid, "model": model, "prompt_id": r, "track": "iconicity",
                               "metric": m, "value": v, "kind": kinds[r]}
                              for m, values in (("cra_reference", cra), ("vr", vr)) for r, v in values.items()])
    rows = aggregate(per_image)
    rows += iconicity.Transformation(PAPER).derived(rows, None)
    protocol = results.protocol_columns({"dataset": CRT_DATASET, "images_per_prompt": 10, "missing_images": "failures",
                                        "metric_version": PAPER.version, "backbones": CRT_BACKBONES})
    ranges = {"cra_reference": (True, 0.0, 1.0), "vr": (False, 0.0, 1.0), iconicity.CRT_FROM_MEANS[0]: (True, 0, 1)}
    rows = [{"provenance": "scored", "submission_id": sid, "model": model, "metric_version": PAPER.version,
             "dataset": CRT_DATASET, **row, "higher_is_better": ranges[row["metric"]][0],
             "range_low": ranges[row["metric"]][1], "range_high": ranges[row["metric"]][2], **protocol}
            for row in rows]
    results.write_folder(store.results / sid, results.records(per_image), rows, [], RunRecord(submission_id=sid))
    return rows


def test_gaming_a_japan_everywhere_model_does_not_win_relevance_to_japan(store):
    """Relevance to Japan (1-5) over 40 prompts, 10 of them Japanese: a faithful model scores 4.5 on those and 1
    elsewhere, one that makes every image look Japanese 4.0 everywhere. Ranked on every prompt it won (4.0 against
    1.875); ranked on the prompts that ask for Japan, the faithful model wins, and on Brazil's prompts the values
    are shown, not ranked."""
    from benchmark.tracks.relevance import PROTOCOL_JUDGE

    prompts = [f"p{i:02d}" for i in range(40)]
    countries = {p: "Japan" if i < 10 else "Brazil" for i, p in enumerate(prompts)}
    version = f"2 (kb abc, judge {PROTOCOL_JUDGE}@r1, k 20, linking first_with_page, label as_given, text whole)"
    faithful = {p: 4.5 if countries[p] == "Japan" else 1.0 for p in prompts}
    for i, (model, values) in enumerate((("Faithful", faithful), ("Everywhere", dict.fromkeys(prompts, 4.0)))):
        write_scored(store, f"r{i}", model, values, track="relevance", metric="relevance[Japan]", countries=countries,
                     value_range=(1.0, 5.0), version=version, dataset=CUBE_DATASET)
    cat = Catalog(store)
    assert dict(zip(*tables.rows(cat, "relevance", "relevance[Japan]", "overall")[["model", "value"]].T.to_numpy())) \
        == pytest.approx({"Faithful": 1.875, "Everywhere": 4.0})  # what the aggregate rows hold
    frame, note = tables.ranked(cat, "relevance", "relevance[Japan]")
    assert list(frame["model"]) == ["Faithful", "Everywhere"] and list(frame["rank"]) == [1, 2]
    assert list(frame["value"]) == [4.5, 4.0] and (frame["n"] == 10).all()
    brazil, note = tables.ranked(cat, "relevance", "relevance[Japan]", "country", "Brazil")
    assert brazil["rank"].isna().all() and set(brazil["value"]) == {1.0, 4.0}
    assert brazil["not_ranked"].str.startswith("ranked on the prompts whose country is Japan only").all()


def judged_store(root) -> tuple[Store, str]:
    """Three models of the expectations track scored by the headline protocol's judge at revision r2 (12 prompts);
    returns the store and the metric version."""
    from benchmark.datasets import names
    from benchmark.tracks.expectations import PROTOCOL_JUDGE

    store = Store(root)
    version = f"2 (judge {PROTOCOL_JUDGE}@r2)"
    rng = np.random.default_rng(4)
    for i, model in enumerate(("Alpha", "Beta", "Gamma")):
        write_scored(store, f"x{i}", model, dict(zip(PROMPTS, rng.integers(0, 11, 12).astype(float))),
                     track="expectations", metric="expectations_met", value_range=(0.0, 10.0), version=version,
                     dataset=str(names.CULTURALFRAMES))
    return store, version


def agreement_rows(store: Store, rows: list[dict]) -> None:
    """A meta-evaluation table as ``culturelens meta-eval --store`` leaves it."""
    from benchmark.layout import META_EVAL

    (store.root / META_EVAL).mkdir(exist_ok=True)
    pd.DataFrame([{"metric": "expectations_met", "criterion": "alignment", "country": "all", "ci_low": 0.3,
                   "ci_high": 0.6, "n": 3637, "ceiling": 0.38, "rank": 1, **row} for row in rows]).to_parquet(
        store.root / META_EVAL / "judge.parquet")


def test_gaming_the_judge_note_names_the_judge_version_and_says_not_measured_when_it_is(tmp_path):
    """Beside the expectations ranking: a meta-evaluation of the judge at another revision (r1) says nothing of the
    judge ranked (r2), and the note says so, naming it; once r2 is measured, its numbers, per image and per model."""
    from leaderboard.ui.overview import OverviewTab
    from leaderboard.ui.site import Site

    store, version = judged_store(tmp_path / "store")
    judge = version.removeprefix("2 (judge ").removesuffix(")")

    def note() -> str:
        overview = OverviewTab(Site(store, "ada"))
        return html.unescape(overview.overview("expectations", "expectations_met", "", [], None, None, "", [],
                                               display.SHOWN_COLUMNS)[3])

    assert (f"Agreement of the judge <code>{judge}</code> with the CulturalFrames raters**: not measured for this "
            "judge") in note()
    agreement_rows(store, [{"spearman": 0.45, "model_spearman": 1.0, "models": 4,
                            "metric_version": version.replace("@r2", "@r1")}])
    assert "not measured for this judge" in note() and "0.45" not in note()
    agreement_rows(store, [{"spearman": 0.45, "model_spearman": -0.4, "models": 4, "metric_version": version}])
    said = note()
    assert "not measured" not in said and "per image, Spearman ρ 0.45 [0.30, 0.60] over 3,637 images" in said
    assert "per model, Spearman ρ -0.40 between its order of the 4 CulturalFrames models and the raters'" in said


def test_gaming_model_level_agreement_is_reported(tmp_path):
    """A judge that follows the raters image by image within each model but orders the four models backwards:
    per-image Spearman well above 0 (0.4 or more), the models' order -1. The meta-evaluation reports both, and the
    Metrics tab shows the models' order beside the per-image agreement."""
    from benchmark.expectations import meta_eval
    from leaderboard.ui.metrics import agreement_page, agreement_table

    rng = np.random.default_rng(12)
    models = {"gpt-image": 0.9, "imagen3": 0.8, "sd35": 0.7, "flux": 0.6}  # the raters' order: mean alignment
    rows, scores = [], []
    for p in range(60):
        for model, level in models.items():
            image = f"{model}-{p:02d}"
            own = rng.uniform(-0.35, 0.35)  # what the judge sees of the image itself, and the raters too
            for slot in range(3):
                seen = np.clip(np.round((level + own + rng.normal(0, 0.15)) * 2) / 2, 0, 1)
                rows.append({"image_id": image, "prompt_id": f"p{p:02d}", "country": "Japan", "model": model,
                             "rater_slot": slot, "alignment": seen, "quality": 0.5, "overall": 3.0})
            scores.append({"image_id": image, "score": own - 0.6 * (level - 0.75)})  # models reversed
    table = meta_eval.meta_evaluate({"judge": pd.DataFrame(scores)}, pd.DataFrame(rows), criteria=["alignment"],
                                    by_country=False, n_resamples=50)
    row = table.iloc[0]
    assert row["spearman"] >= 0.4 and row["model_spearman"] == -1.0 and row["models"] == 4
    store = Store(tmp_path / "store")
    agreement_rows(store, [{**row.to_dict(), "metric": "judge", "metric_version": "1 (judge some/judge@r1)"}])
    page = agreement_page(agreement_table(store.meta_evaluation()))
    assert page.loc[page["Metric"] == "judge", "Models' order ρ"].iloc[0] == "-1.00 (4 models)"


def test_rankings_the_pure_rules_count_unanswered_prompts_as_worst_or_list_the_row_apart_as_declared():
    """``benchmark.ranking.rank`` on hand-made values: 12 prompts, "Full" answered all (0.5 each), "Gap" all but
    the last two (0.75 each), "Undefined" all but with no value on two (answered, undefined: left out)."""
    prompts = [f"p{i:02d}" for i in range(12)]
    values = pd.DataFrame({"Full": 0.5, "Gap": [0.75] * 10 + [np.nan] * 2,
                           "Undefined": [0.25] * 10 + [np.nan] * 2}, index=prompts)
    answered = values.notna().assign(Undefined=True)
    worst = ranking.rank([values], ranking.Rule((ranking.Quantity(True, 0.0, 1.0),)), answered)
    rows = worst.rows
    assert worst.prompts == 12 and rows.loc["Gap", "score"] == pytest.approx(7.5 / 12)  # two zeros counted
    assert rows.loc["Undefined", "score"] == 0.25 and rows.loc["Undefined", "n"] == 10  # undefined: left out
    # Compared prompt by prompt (0.05 / 6 each side): Gap beats Full on 10 and loses 2 (79/4096: no), Full and Gap
    # beat Undefined on the 10 prompts it has a value on (1/1024: yes); Gap's 0.625 above Full's 0.5 is no rank.
    assert list(rows["rank"]) == [1, 1, 3] and list(rows["refused"]) == [0.0, 2 / 12, 0.0]
    listed = ranking.rank([values], ranking.Rule((ranking.Quantity(True, 0.0, 1.0),), unanswered="not_ranked"),
                          answered).rows
    assert listed.loc["Gap", "not_ranked"] == ("left 2 of the 12 prompts unanswered: this track ranks complete "
                                               "answers only")
    assert pd.isna(listed.loc["Gap", "rank"]) and listed.loc["Gap", "score"] == 0.75  # its own mean, shown apart
    unknown = ranking.rank([values], ranking.Rule((ranking.Quantity(True, None, None),)), answered).rows
    assert "range is not recorded" in unknown.loc["Gap", "not_ranked"] and unknown.loc["Full", "rank"] == 1
    undirected = ranking.rank([values], ranking.Rule(directed=False), answered).rows
    assert "neither end of this metric is better" in undirected.loc["Gap", "not_ranked"]
    # Two inputs combined from their means (CRT from column means): VR undefined where nothing was recognised.
    cra = pd.DataFrame({"A": [1.0] * 6 + [0.0] * 6, "B": 0.0}, index=prompts)
    vr = pd.DataFrame({"A": [0.5] * 6 + [np.nan] * 6, "B": np.nan}, index=prompts)
    crt = ranking.Rule((ranking.Quantity(True, 0.0, 1.0), ranking.Quantity(False, 0.0, 1.0)),
                       iconicity.crt_from_means)
    rows = ranking.rank([cra, vr], crt).rows
    assert list(rows["score"]) == [0.25, 0.0] and list(rows["rank"]) == [1, 2] and rows["ci_low"].notna().all()
    # A difference kind takes the paired differences' interval: Bonett & Price on -1/0/1 values.
    differences = pd.DataFrame({"a - b": [1.0, 1.0] + [0.0] * 10}, index=prompts)
    rows = ranking.rank([differences], ranking.Rule(kind="difference")).rows
    assert (rows.loc["a - b", "ci_low"], rows.loc["a - b", "ci_high"]) == pytest.approx(
        difference_ci(differences["a - b"].to_numpy()))


def test_rankings_one_submission_per_model_is_ranked_its_latest_and_variability_is_ordered_not_judged(store):
    """A model scored twice (two revisions): ranked at 1 and 3 of one table before, while the overall kept only the
    latest; now its latest is ranked and the earlier listed under it. Variability's own table says it has no
    better end, as the overall does, and lists apart a model that left prompts unanswered."""
    from leaderboard.ui.overview import OverviewTab
    from leaderboard.ui.site import Site

    values = dict(zip(PROMPTS, FOUR_MODELS["Alpha"]))
    write_result(store, "s1", "Twice", "iconicity", values)
    write_result(store, "s22", "Other", "iconicity", dict(zip(PROMPTS, FOUR_MODELS["Beta"])))
    write_result(store, "s333", "Twice", "iconicity", dict(zip(PROMPTS, FOUR_MODELS["Delta"])))  # the latest
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    assert list(zip(frame["model"], frame["rank"].fillna(0))) == [("Other", 1), ("Twice", 2), ("Twice", 0)]
    assert list(frame["submission_id"]) == ["s22", "s333", "s1"]
    assert frame["not_ranked"].iloc[-1] == "an earlier submission of this model: its latest is ranked"
    for i, (model, w1kp) in enumerate((("Varied", 0.25), ("Alike", 0.75), ("Gappy", 0.5))):
        answers = dict.fromkeys(PROMPTS if model != "Gappy" else PROMPTS[:-1], w1kp)
        write_result(store, f"v{i}", model, "variability", answers)
    shown = OverviewTab(Site(store, "ada")).overview("variability", "w1kp", "", [], None, None, "", [],
                                                     display.SHOWN_COLUMNS)
    assert "ordered lower first: neither end is better, no direction to win on" in shown[3]  # as the overall says
    assert "lower is better" not in shown[3]
    assert [html.unescape(m).split("]")[0].strip("[") for m in shown[2]["Model"]][:2] == ["Varied", "Alike"]
    assert html.unescape(shown[2]["Model"].iloc[-1]) == "[Gappy](?tab=model&model=Gappy)"  # every name: its page
    assert shown[2]["Rank range (95%)"].iloc[-1].startswith("not ranked: left 1 of the 12 prompts unanswered")

"""Issue 49, findings 2 to 7: scores no curation can lift, as the ranks, intervals and views show them.

Each test builds a store by hand (``write_scored``: per-image rows and the production ``aggregate`` of them, as the
harness leaves them), with values whose right answer is worked out in the test, reads it through the real
``Catalog`` and the views a visitor or a script uses (tables, heatmap, downloads), and states in its docstring what
main showed on the same store before the fix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmark import ranking
from leaderboard import display, exports, rankings, stored_rankings, tables
from leaderboard.catalog import Catalog
from leaderboard.store import Store
from tests.test_rankings import CUBE_DATASET, rank_rule_by_hand, ranks_of, write_scored

# Three models on 12 prompts (multiples of 1/8: exact means). C is 0.5 below A on every prompt; B lies between and
# crosses both: above A on 5 prompts and below it on 7, above C on 7 and below it on 5.
CHAIN = {
    "A": [0.75] * 12,
    "B": [0.875] * 5 + [0.5] * 2 + [0.125] * 5,  # mean (4.375 + 1 + 0.625) / 12 = 0.5
    "C": [0.25] * 12,
}


def prompts(n: int) -> list[str]:
    return [f"p{i:02d}" for i in range(n)]


def test_curation_two_models_that_differ_never_share_a_rank_and_refusing_never_lifts_one(tmp_path):
    """Finding 2. A ~ B and B ~ C, A - C significant. Under 10 prompts main tied neighbours whose paired interval held 0
    and chained the ties: on the first 8 prompts it showed A, B and C all at rank 1 (range 1-3), though A is 0.5 above C
    on every prompt; on the 12 it gave each its own rank, 1, 2 and 3, each range a single rank (its bootstrap), though B
    is told apart from neither. Rule 2 (LMArena's: 1 + the models significantly better) on the 12 prompts, by hand: 3
    pairs, each side tested at 0.05 / 6 = 0.0083; A beats C 12-0 (p = 1/4096), A-B 7-5 and B-C 7-5 (p = 1586/4096 each)
    are not significant: A 1, B 1, C 2; ranges A 1-2 (C below it), B 1-3, C 2-3. And refusing a prompt (counted at the
    worst value, 0) never lifts C above rank 2, whichever prompt it refuses."""
    store = Store(tmp_path / "twelve")
    for i, (model, values) in enumerate(CHAIN.items()):
        write_scored(store, f"s{i}", model, dict(zip(prompts(12), values)))
    frame, note = tables.ranked(Catalog(store), "iconicity", "crt")
    assert ranks_of(frame) == rank_rule_by_hand(CHAIN, higher=True) == {"A": (1, 1, 2), "B": (1, 1, 3),
                                                                        "C": (2, 2, 3)}
    assert list(frame["model"]) == ["A", "B", "C"] and list(frame["tie_group"]) == [1, 1, 2]
    # Never a significant pair at one rank: A and C, the one pair that differs, hold different ranks.
    rank = dict(zip(frame["model"], frame["rank"]))
    assert rank["A"] < rank["C"]
    # The change is said where ranks are read: the note, and the download's rank_rule column.
    assert f"rank rule {ranking.RULE_VERSION}" in note and ranking.RULE_VERSION == 2
    typed = exports.ranking(Catalog(store), "iconicity", "crt")
    assert typed["rank_rule"].tolist() == [2, 2, 2]
    # Withholding: C refuses each prompt in turn; its rank never improves, and A stays above it.
    for refused in prompts(12):
        withheld = Store(tmp_path / f"without-{refused}")
        for i, (model, values) in enumerate(CHAIN.items()):
            answers = dict(zip(prompts(12), values))
            write_scored(withheld, f"s{i}", model, {p: v for p, v in answers.items()
                                                    if not (model == "C" and p == refused)})
        shown, _ = tables.ranked(Catalog(withheld), "iconicity", "crt")
        assert dict(zip(shown["model"], shown["rank"]))["C"] >= 2, refused
    # The 8-prompt store that chained on main: too few prompts to rank, so no order at all, never a chain.
    eight = Store(tmp_path / "eight")
    for i, (model, values) in enumerate(CHAIN.items()):
        write_scored(eight, f"s{i}", model, dict(zip(prompts(8), values[:8])))
    frame, _ = tables.ranked(Catalog(eight), "iconicity", "crt")
    assert frame["rank"].isna().all() and frame["not_ranked"].str.startswith(ranking.TOO_FEW).all()


def test_curation_a_slice_of_too_few_prompts_shows_values_never_a_strict_order(tmp_path):
    """Finding 3. Six models on 4 prompts, each 1/8 above the next on every prompt: main ranked them 1 to 6 with no
    range (the paired interval gives nothing below 5 values, so nothing tied). Four prompts cannot tell any two of them
    apart (a sign test's best p-value on 4 prompts, 1/16, is above 0.05 / 30): the table, the page and the API show the
    six values, each row "too few prompts to rank (4; a ranking needs 10)", no rank."""
    store = Store(tmp_path / "store")
    for i in range(6):
        write_scored(store, f"s{i}", f"M{i}", dict.fromkeys(prompts(4), (7 - i) / 8))
    cat = Catalog(store)
    frame, note = tables.ranked(cat, "iconicity", "crt")
    assert list(frame["value"]) == [7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8]  # the values, best first
    assert frame["rank"].isna().all() and frame["rank_low"].isna().all() and frame["tie_group"].isna().all()
    why = f"{ranking.TOO_FEW} (4; a ranking needs {ranking.MIN_PROMPTS})"
    assert (frame["not_ranked"] == why).all() and ranking.TOO_FEW in note
    shown = display.display(frame)
    assert shown["Rank"].isna().all() and (shown["Rank range (95%)"] == f"not ranked: {why}").all()
    api = exports.ranking(cat, "iconicity", "crt")
    assert api["rank"].isna().all() and (api["not_ranked"] == why).all() and api["rank_rule"].isna().all()
    # The threshold is at least the CIs' minimum: below it a CI says nothing, and from it a ranking can.
    assert ranking.MIN_PROMPTS >= 5
    many = Store(tmp_path / "ten")
    for i in range(6):
        write_scored(many, f"s{i}", f"M{i}", dict.fromkeys(prompts(10), (7 - i) / 8))
    frame, _ = tables.ranked(Catalog(many), "iconicity", "crt")
    # 10 prompts, each 10-0: p = 1/1024 < 0.05 / 30: every pair differs, ranks 1 to 6, each range one rank.
    assert list(frame["rank"]) == [1, 2, 3, 4, 5, 6] and list(frame["rank_high"]) == [1, 2, 3, 4, 5, 6]


def test_curation_an_interval_the_prompts_cannot_bound_says_so_and_a_mostly_refused_row_is_flagged(tmp_path):
    """Finding 4, the intervals. A metric of range [0, 2.5] on 200 prompts; "Three" answered 3 (0.12 each, a mean of
    0.36 / 200 = 0.0018 with its 197 refusals at 0). (197/200)^200 = 4.9% of the percentile-t's resamples draw only
    zeros (no spread, t* = -inf), more than its 1% tail: the prompts cannot bound the mean above, and main showed the
    range's end, [0.000, 2.500], as if measured, and its 98.5% refused unflagged. Now the side is infinite, the page
    says "not bounded by 200 prompts", the download leaves ci_high null and says so in ci_note, and the row is flagged
    mostly refused. A CRT-like row on 10 prompts (eight zeros) read [0.000, 1.000] on main, now [0.000, not bounded by
    10 prompts]; ten equal values read [0.250, 0.250], now "not bounded by 10 prompts"."""
    store = Store(tmp_path / "store")
    rng = np.random.default_rng(3)
    full = {p: float(v) for p, v in zip(prompts(200), rng.integers(40, 64, 200) / 32)}
    write_scored(store, "full", "Full", full, value_range=(0.0, 2.5))
    write_scored(store, "three", "Three", dict.fromkeys(prompts(200)[:3], 0.12), value_range=(0.0, 2.5))
    cat = Catalog(store)
    frame, note = tables.ranked(cat, "iconicity", "crt")
    three = frame.set_index("model").loc["Three"]
    assert three["value"] == pytest.approx(0.0018) and three["refused"] == 197 / 200
    assert 0 < three["ci_low"] < 0.0018 and three["ci_high"] == np.inf
    shown = display.display(frame).set_index(frame["model"])
    assert shown.at["Three", "95% CI"] == f"[{three['ci_low']:.3f}, not bounded by 200 prompts]"
    assert shown.at["Three", "Refused"] == "98.5%: mostly refused" and shown.at["Full", "Refused"] == "0%"
    assert "1 row mostly refused" in note
    api = exports.ranking(cat, "iconicity", "crt").set_index("model")
    assert pd.isna(api.at["Three", "ci_high"]) and api.at["Three", "ci_note"] == "not bounded above by 200 prompts"
    assert pd.isna(api.at["Full", "ci_note"]) and np.isfinite(api.at["Full", "ci_high"])
    # CRT-like: per-reference values mostly 0. 0.8^10 = 11% of resamples draw zeros only: above unbounded.
    crt = Store(tmp_path / "crt")
    write_scored(crt, "c", "Rare", dict(zip(prompts(10), [0.0] * 8 + [0.5, 0.75])))
    write_scored(crt, "d", "Other", dict(zip(prompts(10), [0.25] * 10)))
    frame, _ = tables.ranked(Catalog(crt), "iconicity", "crt")
    rows = display.display(frame).set_index(frame["model"])
    assert rows.at["Rare", "95% CI"] == "[0.000, not bounded by 10 prompts]"
    # Every value equal, inside the range: nothing bounds the mean on either side.
    assert rows.at["Other", "95% CI"] == "not bounded by 10 prompts"


def japan_refuser(store: Store) -> None:
    """24 prompts: 20 Japanese, 2 Brazilian, 2 Nigerian. A scores 0.625 and B 0.5 on every prompt; R refused every
    Japanese prompt and scores 0.75 on the other four."""
    countries = {p: "Japan" if i < 20 else ("Brazil" if i < 22 else "Nigeria") for i, p in enumerate(prompts(24))}
    write_scored(store, "a", "A", dict.fromkeys(prompts(24), 0.625), countries=countries, when=1)
    write_scored(store, "b", "B", dict.fromkeys(prompts(24), 0.5), countries=countries, when=2)
    write_scored(store, "r", "R", dict.fromkeys(prompts(24)[20:], 0.75), countries=countries, when=3)


def test_curation_a_model_that_refused_a_whole_slice_value_keeps_its_row_at_the_worst_value(tmp_path):
    """Finding 5. R refused all 20 Japanese prompts. Main had no Japan row for it: it vanished from the Japan table and
    the API (A, B only), and the heatmap, ordering by each model's mean over the values it has (R: 0.75 on Brazil and
    Nigeria, above A's 0.625), put it first, its Japan cell empty. Now its Japan row is there at the worst value, 0,
    with 100% refused, ranked last (A beats it on 20 of 20 Japanese prompts, p = 2^-20), in the table, the API and the
    heatmap's cell; the heatmap's rows follow the metric's ranking on the 24 prompts: A beats B 24-0 and R 20-4 (p =
    12951 / 2^24 = 0.00077 < 0.05 / 6), B beats R 20-4: A, B, R."""
    store = Store(tmp_path / "store")
    japan_refuser(store)
    cat = Catalog(store)
    frame, _ = tables.ranked(cat, "iconicity", "crt", "country", "Japan")
    assert list(frame["model"]) == ["A", "B", "R"] and list(frame["rank"]) == [1, 2, 3]
    r = frame.set_index("model").loc["R"]
    assert r["value"] == 0.0 and r["refused"] == 1.0 and r["n"] == 20 and r["not_ranked"] == ""
    assert display.display(frame)["Refused"].iloc[-1] == "100%: mostly refused"
    api = exports.ranking(cat, "iconicity", "crt", "country", "Japan")
    assert list(api["model"]) == ["A", "B", "R"] and api["value"].tolist() == [0.625, 0.5, 0.0]
    heat = tables.heatmap(cat, "iconicity", "crt", "country")
    assert list(heat.index) == ["A", "B", "R"]
    assert heat.loc["R"].to_dict() == {"Brazil": 0.75, "Japan": 0.0, "Nigeria": 0.75}
    overall, _ = tables.ranked(cat, "iconicity", "crt")
    assert list(overall["model"]) == list(heat.index) and list(overall["rank"]) == [1, 2, 3]
    # A chart's values (the Slices tab's) are the ranking's too: R on Japan at 0.
    charted = stored_rankings.ranked_values(cat, tables.rows(cat, "iconicity", "crt", "country"))
    assert charted.set_index(["model", "slice_value"]).loc[("R", "Japan"), "value"] == 0.0


def test_curation_the_heatmap_ranks_relevance_to_japan_on_the_prompts_that_name_japan(tmp_path):
    """Finding 6. Relevance to Japan (1-5) on 40 prompts, 10 of them Japanese: "Faithful" scores 4.5 on those and 1
    elsewhere, "Everywhere" 4.0 on every prompt. The tables rank it on the 10 Japanese prompts (Faithful first), but
    main's heatmap ordered by each model's mean over the countries, Brazil's cell its stored 1.0 against 4.0 (2.75
    against 4.0): Everywhere first. Now the heatmap's rows follow the ranking of relevance[Japan] (Faithful beats
    Everywhere on all 10 Japanese prompts, p = 1/1024 < 0.025: ranks 1, 2)."""
    from benchmark.tracks.relevance import PROTOCOL_JUDGE

    countries = {p: "Japan" if i < 10 else "Brazil" for i, p in enumerate(prompts(40))}
    version = f"2 (kb abc, judge {PROTOCOL_JUDGE}@r1, k 20, linking first_with_page, label as_given, text whole)"
    store = Store(tmp_path / "store")
    faithful = {p: 4.5 if countries[p] == "Japan" else 1.0 for p in prompts(40)}
    for i, (model, values) in enumerate((("Faithful", faithful), ("Everywhere", dict.fromkeys(prompts(40), 4.0)))):
        write_scored(store, f"r{i}", model, values, track="relevance", metric="relevance[Japan]", countries=countries,
                     value_range=(1.0, 5.0), version=version, dataset=CUBE_DATASET)
    cat = Catalog(store)
    ranked, _ = tables.ranked(cat, "relevance", "relevance[Japan]")
    assert list(ranked["model"]) == ["Faithful", "Everywhere"] and list(ranked["rank"]) == [1, 2]
    heat = tables.heatmap(cat, "relevance", "relevance[Japan]", "country")
    assert list(heat.index) == ["Faithful", "Everywhere"]
    assert heat.loc["Faithful"].to_dict() == {"Brazil": 1.0, "Japan": 4.5}  # Brazil's cell shown, not ranked


def test_curation_a_track_downloads_unranked_rows_say_they_are_the_submissions_own_means(tmp_path):
    """Finding 7. The iconicity download ranks the table the Overview shows (CRT, overall) and adds every other row of
    the track as stored: a submission's own mean over the prompts it answered. "Refuser" left 3 of its 10 Japanese
    prompts unanswered: its stored Japan row is 7 x 0.875 / 7 = 0.875, the Japan table's 7 x 0.875 / 10 = 0.6125. Main
    gave the 0.875 (and Brazil's 0.875) unmarked beside ranked rows; now every row outside the ranking says what it is
    (not comparable: the submission's own mean), and the ranked ones carry their ranks and rule."""
    countries = {p: "Japan" if i < 10 else "Brazil" for i, p in enumerate(prompts(20))}
    store = Store(tmp_path / "store")
    refuser = {p: 0.875 for p in prompts(20)[3:]}
    write_scored(store, "r", "Refuser", refuser, countries=countries, when=1)
    write_scored(store, "f", "Full", dict.fromkeys(prompts(20), 0.5), countries=countries, when=2)
    cat = Catalog(store)
    japan, _ = tables.ranked(cat, "iconicity", "crt", "country", "Japan")
    assert japan.set_index("model").at["Refuser", "value"] == pytest.approx(0.6125)
    download = exports.track_rows(cat, "iconicity")
    shown = download[download["rank"].notna()]
    assert set(shown["slice"]) == {"overall"} and shown["not_ranked"].isna().all() and (shown["rank_rule"] == 2).all()
    rest = download[download["rank"].isna()]
    stored = rest[(rest["model"] == "Refuser") & (rest["slice"] == "country") & (rest["slice_value"] == "Japan")]
    assert stored["value"].tolist() == [0.875] and stored["not_ranked"].tolist() == [exports.OWN_PROMPTS]
    assert exports.OWN_PROMPTS.startswith("not comparable")
    assert (rest.loc[rest["slice"] == "prompt", "not_ranked"] == exports.ONE_PROMPT).all()
    assert rest["not_ranked"].notna().all()  # no unranked row passes for a ranked value

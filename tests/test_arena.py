"""The Cultural Arena's core (issue 53), as the app will use it: ratings checked against an independent Bradley-Terry
implementation (choix) and the asymptotic theory, per-culture rankings, a metric's agreement against hand-computed
values, every refused vote, the gold and contrary rules, the per-voter cap, 20 voters at once on SQLite and
PostgreSQL, votes and withdrawals through restarts and restores from the repo, and the published ``votes`` config.
Real databases (SQLite files, a PostgreSQL server), real seals, real Parquet and ``datasets``; nothing mocked."""

from __future__ import annotations

import dataclasses
import hashlib
import html
import io
import json
import math
import re
import shutil
import threading
from pathlib import Path

import choix
import datasets
import PIL.Image
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from benchmark.arena import agreement, gold, matchmaking, rating, reliability
from benchmark.settings import SettingError
from leaderboard import hub_sync
from leaderboard import seal as sealing
from leaderboard.arena import publish
from leaderboard.arena.ballots import Ballots, VoteRefused
from leaderboard.arena.service import Arena, ArenaSettings
from leaderboard.arena.tokens import TokenRefused, voter_hash
from leaderboard.queue import open_queue
from leaderboard.seal import Keys, keys_for
from leaderboard.store import Store
from tests.helpers import until

CULTURES = ("Japan", "India")
MODELS = 4


def _candidates(models: int = MODELS, prompts: int = 3) -> pd.DataFrame:
    """Every model answered every prompt (two seeds each) of each culture: the images the arena draws from."""
    return pd.DataFrame([{"submission": f"sub{m}", "model": f"Model {m}", "prompt_id": f"{c}-{p}",
                          "prompt": f"A dish from {c}, number {p}", "culture": c, "image": f"sub{m}/{c}-{p}/{seed}"}
                         for m in range(models) for c in CULTURES for p in range(prompts) for seed in (0, 1)])


GOLD = pd.DataFrame([
    {"name": "Sushi", "culture": "Japan", "group": "cuisine", "image": "kb:sushi", "source": "CUBE-CSpace"},
    {"name": "Dosa", "culture": "India", "group": "cuisine", "image": "kb:dosa", "source": "CUBE-CSpace"},
])


@pytest.fixture()
def arena_queue(store_queue, tmp_path):
    """The queue's database on each backend: an SQLite file, or a fresh PostgreSQL database."""
    queue = open_queue(store_queue or tmp_path / "queue.sqlite")
    yield queue
    queue.close()


def _arena(queue, settings: ArenaSettings = ArenaSettings(voter_share=0.5), **options) -> Arena:
    return Arena(queue, Keys.parse("arena-tests-secret-0123456789", "the test"), _candidates(), GOLD, settings,
                 replicates=20, **options)


def _votes(pairs: dict[tuple[str, str], tuple[int, int, int]], culture: str = "Japan", voters: int = 1000,
           prefix: str = "v") -> pd.DataFrame:
    """Vote records: for each (a, b), (wins of a, wins of b, ties), by ``voters`` voters in turn (``prefix``<n>)."""
    rows = []
    for (a, b), counts in pairs.items():
        for outcome, n in zip(("a", "b", "tie"), counts):
            rows += [{"model_a": a, "model_b": b, "outcome": outcome, "culture": culture} for _ in range(n)]
    frame = pd.DataFrame(rows)
    frame["voter"] = [f"{prefix}{i % voters}" for i in range(len(frame))]
    return frame


# --- ratings -------------------------------------------------------------------------------------------------------
FIXED = {("A", "B"): (60, 40, 10), ("A", "C"): (70, 25, 5), ("A", "D"): (80, 15, 5), ("B", "C"): (55, 40, 5),
         ("B", "D"): (65, 30, 5), ("C", "D"): (50, 45, 5)}


def test_arena_bradley_terry_fit_equals_choix_to_1e6_with_its_bootstrap_interval():
    votes = _votes(FIXED)
    models = ["A", "B", "C", "D"]
    wins = np.zeros((4, 4))  # ties half to each side, written out independently of the module
    for (a, b), (won, lost, tied) in FIXED.items():
        i, j = models.index(a), models.index(b)
        wins[i, j] += won + tied / 2
        wins[j, i] += lost + tied / 2
    # The plain maximum likelihood against choix's I-LSR (Maystre & Grossglauser 2015), which converges to it.
    mle = choix.ilsr_pairwise_dense(wins, tol=1e-13, max_iter=100_000)
    assert np.abs(rating.fit(wins, prior=0) - (mle - mle.mean())).max() < 1e-6
    # The fit the arena uses (a Gaussian prior, choix's alpha) against choix's Newton-CG on the votes themselves:
    # every vote doubled so that a tie is one win each way (the likelihood, and so alpha, doubles).
    data = [pair for (a, b), (won, lost, tied) in FIXED.items() for pair in
            [(models.index(a), models.index(b))] * (2 * won + tied) + [(models.index(b), models.index(a))] * (2 * lost + tied)]
    expected = choix.opt_pairwise(4, data, alpha=2 * rating.PRIOR, tol=1e-12)
    rated = rating.rate(votes)
    assert np.abs(rated.rows.loc[models, "strength"].to_numpy() - expected).max() < 1e-6
    assert list(rated.rows.index) == models
    assert (rated.votes, rated.voters) == (610, 610) and rated.not_ranked == ""  # one voter a vote

    # The bootstrap interval over votes: at 610 votes the strengths are nearly normal, so the 95% interval of each
    # is the estimate +/- 1.96 standard errors of the asymptotic theory (the inverse Fisher information, strengths
    # summing to 0), to within the bootstrap's own noise; each interval holds its estimate; seeded, it repeats.
    s = rated.rows.loc[models, "strength"].to_numpy()
    p = 1 / (1 + np.exp(-(s[:, None] - s[None, :])))
    games = wins + wins.T
    information = np.diag((games * p * p.T).sum(1)) - games * p * p.T + 2 * rating.PRIOR * np.eye(4)
    centre = np.eye(4) - 1 / 4
    standard_error = np.sqrt(np.diag(centre @ np.linalg.pinv(information) @ centre))
    half_width = (rated.rows.loc[models, "elo_high"] - rated.rows.loc[models, "elo_low"]).to_numpy() / 2
    expected_half = rating.ELO_SCALE / np.log(10) * 1.96 * standard_error
    assert np.allclose(half_width, expected_half, rtol=0.15), (half_width, expected_half)
    assert (rated.rows["elo_low"] <= rated.rows["elo"]).all() and (rated.rows["elo"] <= rated.rows["elo_high"]).all()
    again = rating.rate(votes)
    assert again.rows[["elo_low", "elo_high", "rank_low", "rank_high"]].equals(
        rated.rows[["elo_low", "elo_high", "rank_low", "rank_high"]])
    # The tables' rank rule (``benchmark.ranking``, LMArena's): 1 + the models significantly better, every pair at
    # 95% together (Bonferroni over 6 pairs: one-sided 0.05 / 12, z > 2.64). By the asymptotic theory the pairs
    # A-B, B-C and C-D stand at z = 3.56, 3.17 and 1.84 (the others farther apart): C and D, 50 to 45, share rank 3.
    covariance = centre @ np.linalg.pinv(information) @ centre
    spread = np.sqrt(np.diag(covariance)[:, None] + np.diag(covariance)[None, :] - 2 * covariance)
    with np.errstate(divide="ignore", invalid="ignore"):
        above = (s[:, None] - s[None, :]) / spread > stats.norm.isf(0.05 / 12)
    assert (1 + above.sum(axis=0)).tolist() == [1, 2, 3, 3] == rated.rows.loc[models, "rank"].tolist()
    assert rated.rows.loc[models, "rank_high"].tolist() == [1, 2, 4, 4]  # 4 models less those below
    assert rated.rows.loc[models, "tie_group"].tolist() == [1, 2, 3, 3]


def test_arena_per_culture_rankings_each_rest_on_their_own_votes_and_voters():
    japan = _votes({("A", "B"): (40, 10, 0), ("B", "C"): (30, 20, 0), ("A", "C"): (45, 5, 0)}, "Japan", voters=30)
    india = _votes({("A", "B"): (10, 40, 0), ("B", "C"): (35, 15, 0), ("A", "C"): (20, 30, 0)}, "India", voters=25,
                   prefix="w")
    found = rating.ratings(pd.concat([japan, india], ignore_index=True), replicates=100)
    assert list(found) == [rating.OVERALL, "India", "Japan"]
    assert list(found["Japan"].rows.index) == ["A", "B", "C"] and list(found["India"].rows.index) == ["B", "C", "A"]
    assert (found["Japan"].votes, found["Japan"].voters) == (150, 30)
    assert (found["India"].votes, found["India"].voters) == (150, 25)
    assert (found[rating.OVERALL].votes, found[rating.OVERALL].voters) == (300, 55)
    # Each culture's ranking is exactly the fit of its own votes.
    alone = rating.rate(india, replicates=100)
    pd.testing.assert_frame_equal(found["India"].rows, alone.rows)
    assert found["Japan"].note == ("150 votes by 30 voters; no voter counts for more than 3 times the median voter's "
                                   "5 votes or 5% of the ranking (the heaviest weighs 3.3% of it)")


def test_arena_no_voter_weighs_more_than_the_stated_share_of_any_ranking():
    honest = _votes({("A", "B"): (150, 50, 0)}, voters=40)  # 40 voters, 5 votes each, A preferred 3 to 1
    flood = pd.DataFrame({"model_a": "A", "model_b": "B", "outcome": ["b"] * 500, "culture": "Japan",
                          "voter": "flooder"})
    votes = pd.concat([honest, flood], ignore_index=True)
    weights = rating.voter_weights(votes["voter"].to_numpy(), 0.05)
    # By hand: the flooder's cap t solves t = 0.05 (t + 200): t = 10 / 0.95; the others keep weight 1.
    assert weights[len(honest):].sum() == pytest.approx(10 / 0.95)
    assert np.all(weights[:len(honest)] == 1)
    capped = rating.rate(votes, replicates=0)
    assert capped.largest_share == pytest.approx(0.05) and capped.rows.index[0] == "A"
    uncapped = rating.rate(votes, share=1.0, multiple=math.inf, replicates=0)  # neither cap
    assert uncapped.rows.index[0] == "B" and uncapped.largest_share == pytest.approx(500 / 700)
    # A ranking with fewer voters than 1 / share is listed with its counts, not ranked, and says why.
    few = rating.rate(_votes({("A", "B"): (10, 5, 0)}, voters=15), share=0.05)
    assert few.not_ranked == "15 voters: at least 20 are needed so that none weighs more than 5% of it"
    assert few.rows.loc["A", "votes"] == 15 and "strength" not in few.rows


def test_arena_voter_weights_cap_each_voter_at_a_multiple_of_the_median_voter_then_at_the_share():
    voters = ["one"] + ["two"] * 2 + ["too"] * 2 + ["three"] * 3 + ["heavy"] * 30
    weights = pd.Series(rating.voter_weights(voters, share=1.0, multiple=3), index=voters)
    # By hand: the counts 1, 2, 2, 3, 30 have median 2, so no voter weighs more than 3 x 2 = 6: the 30-vote voter
    # weighs 6 in all, each vote 6 / 30 = 0.2; the others keep every vote at 1 (a share of 1 binds nobody).
    assert weights["heavy"].tolist() == pytest.approx([0.2] * 30)
    assert (weights.drop("heavy") == 1).all()
    # With a share cap that binds, it is applied to the median-capped weights 1, 2, 2, 3, 6 (14 in all). Share 0.3:
    # only the heavy voter is over 0.3 x 14; its level t solves t = 0.3 (t + 8): t = 24 / 7, each vote 24 / 210.
    weights = pd.Series(rating.voter_weights(voters, share=0.3, multiple=3), index=voters)
    assert weights["heavy"].tolist() == pytest.approx([24 / 210] * 30)
    assert (weights.drop("heavy") == 1).all()
    # Share 0.25: t = 0.25 (1 + 2 + 2 + 2t) gives t = 2.5, between the third voter's 2 and the fourth's 3: the
    # 3-vote voter weighs 2.5 too (each vote 2.5 / 3), the heavy one 2.5 (each vote 2.5 / 30); 10 in all.
    weights = pd.Series(rating.voter_weights(voters, share=0.25, multiple=3), index=voters)
    assert weights["three"].tolist() == pytest.approx([2.5 / 3] * 3)
    assert weights["heavy"].tolist() == pytest.approx([2.5 / 30] * 30)
    assert weights.groupby(level=0).sum().to_dict() == pytest.approx(
        {"one": 1, "two": 2, "too": 2, "three": 2.5, "heavy": 2.5})
    # Without the median cap the heavy voter weighs all 30 of its votes when the share does not bind, and a
    # multiple of 1 holds everyone to the median voter's 2.
    assert rating.voter_weights(voters, share=1.0, multiple=math.inf).tolist() == [1.0] * 38
    weights = pd.Series(rating.voter_weights(voters, share=1.0, multiple=1), index=voters)
    assert weights.groupby(level=0).sum().to_dict() == pytest.approx(
        {"one": 1, "two": 2, "too": 2, "three": 2, "heavy": 2})


def test_arena_a_heavy_bloc_flips_the_order_under_the_share_cap_alone_and_not_under_the_median_cap():
    """60 honest voters cast 5 votes each on A against B, A winning 250 to 50; a bloc of 10 voters casts 60 votes
    each for B. Under the 5% share cap alone each bloc voter weighs t = 0.05 (300 + 10 t), t = 30: the bloc adds 300
    weighted votes for B, 350 to 250, and B ranks first. Under the median cap (the median voter cast 5, 3 x 5 = 15,
    and 15 is under 5% of 300 + 150) the bloc adds 150, 200 to 250, and A stays first. With two models the
    Bradley-Terry strengths differ by the log of the weighted win ratio (up to the prior's 1e-3)."""
    honest = _votes({("A", "B"): (250, 50, 0)}, voters=60)
    bloc = pd.DataFrame({"model_a": "A", "model_b": "B", "outcome": ["b"] * 600, "culture": "Japan",
                         "voter": [f"bloc{i % 10}" for i in range(600)]})
    votes = pd.concat([honest, bloc], ignore_index=True)

    share_only = rating.rate(votes, multiple=math.inf, replicates=0)
    assert rating.voter_weights(votes["voter"], multiple=math.inf)[len(honest):].sum() == pytest.approx(300)
    assert list(share_only.rows.index) == ["B", "A"]
    gap = share_only.rows.loc["B", "strength"] - share_only.rows.loc["A", "strength"]
    assert gap == pytest.approx(math.log(350 / 250), abs=1e-3)

    capped = rating.rate(votes, replicates=0)  # the default rule: MEDIAN_MULTIPLE 3 and VOTER_SHARE 5%
    assert rating.MEDIAN_MULTIPLE == 3 and rating.VOTER_SHARE == 0.05
    assert rating.voter_weights(votes["voter"])[len(honest):].sum() == pytest.approx(150)
    assert list(capped.rows.index) == ["A", "B"]
    gap = capped.rows.loc["A", "strength"] - capped.rows.loc["B", "strength"]
    assert gap == pytest.approx(math.log(250 / 200), abs=1e-3)
    assert capped.largest_share == pytest.approx(15 / 450) and capped.median_votes == 5
    assert capped.note == ("900 votes by 70 voters; no voter counts for more than 3 times the median voter's 5 votes "
                           "or 5% of the ranking (the heaviest weighs 3.3% of it)")


def test_arena_voter_multiple_is_an_operator_setting_the_standings_rank_by(tmp_path):
    """CULTURELENS_ARENA_VOTER_MULTIPLE reaches the rankings: three voters cast 1, 1 and 6 votes (median 1); with a
    multiple of 2 the third weighs 2 of 4 (a share of 1 binds nobody), with the default 3 it weighs 3 of 5. A
    multiple under 1, or not a number, is refused with a sentence naming the variable."""
    assert ArenaSettings.resolve({}).voter_multiple == rating.MEDIAN_MULTIPLE
    settings = ArenaSettings.resolve({"CULTURELENS_ARENA_VOTER_MULTIPLE": "2", "CULTURELENS_ARENA_VOTER_SHARE": "1",
                                      "CULTURELENS_ARENA_DAILY_VOTES": "200"})
    assert (settings.voter_multiple, settings.voter_share) == (2.0, 1.0)
    with pytest.raises(SettingError, match=r"^The arena's voter multiple is 0.5: set CULTURELENS_ARENA_VOTER_MULTIPLE "
                                           r"to a number of at least 1"):
        ArenaSettings.resolve({"CULTURELENS_ARENA_VOTER_MULTIPLE": "0.5"})
    with pytest.raises(SettingError, match=r"^CULTURELENS_ARENA_VOTER_MULTIPLE: 'three' cannot be read"):
        ArenaSettings.resolve({"CULTURELENS_ARENA_VOTER_MULTIPLE": "three"})

    queue = open_queue(tmp_path / "queue.sqlite")
    arena = _arena(queue, dataclasses.replace(settings, gold_share=0.0))
    for user, votes in (("ada", 1), ("bo", 1), ("cy", 6)):
        arena.set_cultures(user, ["Japan"])
        for _ in range(votes):
            battle = arena.next_battle(user)
            arena.vote(user, battle.token, "a")
    found = arena.standings().rankings[rating.OVERALL]
    assert (found.votes, found.voters, found.median_votes, found.largest_share) == (8, 3, 1, pytest.approx(2 / 4))
    assert "no voter counts for more than 2 times the median voter's 1 vote or 100% of the ranking" in found.note
    default = _arena(queue, ArenaSettings(voter_share=1.0, gold_share=0.0)).standings().rankings[rating.OVERALL]
    assert default.largest_share == pytest.approx(3 / 5)
    queue.close()


# --- reliability ------------------------------------------------------------------------------------------------
def test_arena_a_voter_who_disagrees_with_everyone_far_beyond_chance_is_set_aside():
    everyone = _votes({("A", "B"): (60, 0, 0)}, voters=30).assign(kind="model", gold_answer=None)
    contrary = pd.DataFrame({"model_a": "A", "model_b": "B", "outcome": "b", "culture": "Japan", "voter": "against",
                             "kind": "model", "gold_answer": None}, index=range(20))
    split = pd.DataFrame({"model_a": "A", "model_b": "B", "outcome": ["a", "b"] * 10, "culture": "Japan",
                          "voter": "undecided", "kind": "model", "gold_answer": None})
    table = reliability.reliability(pd.concat([everyone, contrary, split], ignore_index=True))
    # Against: 0 of 20 agree, p = 0.5^20; undecided: 10 of 20, p = P(X <= 10) = 0.588: kept.
    assert table.loc["against", ["compared", "agreed"]].tolist() == [20, 0]
    assert table.loc["against", "contrary_p"] == pytest.approx(0.5 ** 20)
    assert table.loc["against", "reason"] == (
        "set aside: agreed with the other voters on only 0 of 20 battles they decided, far below the half a guess "
        "agrees on (binomial p = 9.5e-07 < 0.001)")
    assert table.loc["undecided", "contrary_p"] == pytest.approx(stats.binom.cdf(10, 20, 0.5))
    assert not table.loc["undecided", "set_aside"] and not table.loc["v0", "set_aside"]


def _careful(shown, reveal_gold=GOLD):
    """A careful voter's choice on a gold battle: the side whose real image shows the artifact the prompt names."""
    named = reveal_gold.set_index("image")["name"]
    return "a" if named[shown.image_a] in shown.prompt else "b"


def test_arena_gold_battles_set_a_careless_voters_votes_aside_and_show_why(tmp_path):
    queue = open_queue(tmp_path / "queue.sqlite")
    arena = _arena(queue, ArenaSettings(voter_share=0.5, gold_share=0.5))
    for user in ("careful", "careless"):
        arena.set_cultures(user, ["Japan"])
    gold_seen, cast = {"careful": 0, "careless": 0}, {"careful": 0, "careless": 0}
    while min(gold_seen.values()) < reliability.GOLD_MIN:
        for user in gold_seen:
            shown = arena.next_battle(user)
            is_gold = shown.image_a.startswith("kb:")
            # The careless voter says "both wrong" without looking; the careful one judges (here: the lower model
            # number wins a model battle, the named artifact a gold one).
            choice = ("both_bad" if user == "careless" else _careful(shown) if is_gold
                      else "a" if shown.image_a < shown.image_b else "b")
            reveal = arena.vote(user, shown.token, choice)
            assert (reveal.gold_answer is not None) == is_gold
            gold_seen[user] += is_gold
            cast[user] += 1
    standings = arena.standings()
    careless, careful = voter_hash(arena.keys, "careless"), voter_hash(arena.keys, "careful")
    n = int(standings.voters.loc[careless, "gold"])
    assert standings.voters.loc[careless, "set_aside"] and not standings.voters.loc[careful, "set_aside"]
    assert standings.voters.loc[careless, "reason"].startswith(
        f"set aside: right on 0 of {n} gold battles (a real image of the named artifact against another culture's)")
    # Shown as set aside, never dropped: every vote is there, the careless voter's marked with the reason, and the
    # rankings count the careful voter's model votes only.
    mine = standings.votes[standings.votes["voter"] == careless]
    assert len(mine) == cast["careless"] and mine["set_aside"].all()
    assert set(mine["reason"]) == {standings.voters.loc[careless, "reason"]}
    model_votes = standings.votes[(standings.votes["kind"] == "model") & (standings.votes["voter"] == careful)]
    assert standings.rankings[rating.OVERALL].votes == len(model_votes)
    queue.close()


# --- metric agreement ------------------------------------------------------------------------------------------
def test_arena_a_metrics_agreement_on_hand_built_votes_equals_the_hand_computed_value():
    pairs = pd.DataFrame([
        # Japan: agrees, agrees, agrees, a metric tie (half), disagrees -> 3.5 of 5
        ("Japan", "a", 0.9, 0.1), ("Japan", "b", 0.2, 0.8), ("Japan", "a", 0.5, 0.4), ("Japan", "b", 0.3, 0.3),
        ("Japan", "a", 0.1, 0.6),
        # India: agrees, disagrees, one without a value -> 1 of 2
        ("India", "b", 0.1, 0.7), ("India", "b", 0.9, 0.2), ("India", "a", np.nan, 0.5),
    ], columns=["culture", "outcome", "value_a", "value_b"])
    found = agreement.pair_agreement(pairs)
    assert found.loc["Japan", ["pairs", "agreed", "agreement"]].tolist() == [5, 3.5, 0.7]
    assert found.loc["India", ["pairs", "agreed", "agreement", "without_values"]].tolist() == [2, 1.0, 0.5, 1]
    assert found.loc[rating.OVERALL, "agreement"] == pytest.approx(4.5 / 7)
    # Wilson's interval with continuity correction, the tables' for a rate (Newcombe 1998, method 4), by hand for 1 of
    # 2 (z^2 = 3.8415): (2 + z^2 - 1 -+ z sqrt(z^2 - 2.5 + 4)) / (2 (2 + z^2)) = (4.8415 -+ 4.5298) / 11.6829, and
    # high = (6.8415 + 4.5298) / 11.6829.
    assert found.loc["India", ["ci_low", "ci_high"]].tolist() == pytest.approx([0.02668, 0.97332], abs=1e-5)
    # Lower is better: every order flips, the tie stays half.
    assert agreement.pair_agreement(pairs, higher_is_better=False).loc["Japan", "agreement"] == pytest.approx(0.3)
    # Model level: strengths order A > B > C > D, the metric's A > C > B > D: one discordant pair of six, so
    # tau = (5 - 1) / 6 and rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    strength = pd.Series({"A": 2.0, "B": 1.0, "C": 0.0, "D": -1.0})
    scores = pd.Series({"A": 0.9, "B": 0.5, "C": 0.6, "D": 0.1, "E": 1.0})  # E has no strength: left out
    correlation = agreement.rank_correlation(strength, scores)
    assert correlation["models"] == 4
    assert (correlation["kendall"], correlation["spearman"]) == (pytest.approx(2 / 3), pytest.approx(0.8))
    assert agreement.rank_correlation(strength, -scores, higher_is_better=False)["kendall"] == pytest.approx(2 / 3)


def test_arena_agreement_reads_the_images_the_voters_saw(tmp_path):
    queue = open_queue(tmp_path / "queue.sqlite")
    arena = _arena(queue, ArenaSettings(voter_share=0.5, gold_share=0.0))
    arena.set_cultures("ada", ["Japan"])
    for _ in range(6):  # the voter prefers the lower model number (images are named sub<m>/...)
        battle = arena.next_battle("ada")
        arena.vote("ada", battle.token, "a" if battle.image_a < battle.image_b else "b")
    images = _candidates()["image"]
    by_model = pd.Series(-images.str.slice(3, 4).astype(float).to_numpy(), index=images)
    table, _ = arena.agreement(by_model)  # a metric that prefers the lower model number agrees on every pair
    assert table.loc["Japan", ["pairs", "agreement"]].tolist() == [6, 1.0]
    assert arena.agreement(-by_model)[0].loc["Japan", "agreement"] == 0.0
    queue.close()


# --- integrity --------------------------------------------------------------------------------------------------
def test_arena_forged_replayed_second_other_voter_expired_and_over_cap_votes_are_refused(arena_queue):
    arena = _arena(arena_queue, ArenaSettings(voter_share=0.5, daily_votes=3, gold_share=0.0))
    for user in ("ada", "bo"):
        arena.set_cultures(user, ["Japan"])
    shown = arena.next_battle("ada")
    assert arena.next_battle("ada") == shown  # one battle at a time: asking again shows the same one
    forged = f"{'0' * 32}.{arena.keys.sealing}.{'0' * 64}"
    altered = shown.token[:-1] + ("0" if shown.token[-1] != "0" else "1")
    for token in (forged, altered, "not a token", None):
        with pytest.raises(TokenRefused, match="battle token"):
            arena.vote("ada", token, "a")
    with pytest.raises(TokenRefused, match="not issued to you by this server"):
        arena.vote("bo", shown.token, "a")  # another voter's battle
    other = Keys.parse("another-servers-secret-0123456789", "elsewhere")
    with pytest.raises(TokenRefused, match="a key this server does not hold"):
        arena.vote("ada", f"{shown.battle}.{other.sealing}.{'0' * 64}", "a")
    with pytest.raises(VoteRefused, match="A vote is one of a, b, tie, both_bad"):
        arena.vote("ada", shown.token, "left")
    assert arena.ballots.votes().empty  # nothing refused was stored

    reveal = arena.vote("ada", shown.token, "tie", ["stereotype"])
    assert {reveal.model_a, reveal.model_b} <= {f"Model {m}" for m in range(MODELS)} and reveal.reasons == ("stereotype",)
    # The models are revealed only after the vote: nothing the voter was shown names either.
    assert not [v for v in vars(shown).values() if reveal.model_a in str(v) or reveal.model_b in str(v)]
    with pytest.raises(VoteRefused, match="already voted on this battle"):
        arena.vote("ada", shown.token, "a")  # replayed
    # Two votes on one battle sent at once: one counts.
    racing = arena.next_battle("ada")
    outcomes = _race(6, lambda i: arena.vote("ada", racing.token, "a"))
    assert sum(not isinstance(o, Exception) for o in outcomes) == 1
    assert all(isinstance(o, VoteRefused) for o in outcomes if isinstance(o, Exception)), outcomes

    arena.vote("ada", arena.next_battle("ada").token, "b")
    with pytest.raises(VoteRefused, match="3 votes in the last 24 hours, the daily cap"):
        arena.vote("ada", arena.next_battle("ada").token, "a")
    assert len(arena.ballots.votes()) == 3

    hasty = _arena(arena_queue, ArenaSettings(voter_share=0.5, battle_minutes=0.002, gold_share=0.0))
    late = hasty.next_battle("bo")
    until(lambda: hasty.ballots.open_battle(hasty.voter("bo")) is None, 10, "the battle to expire")
    with pytest.raises(VoteRefused, match="expired before the vote arrived"):
        hasty.vote("bo", late.token, "a")


def test_arena_stores_a_keyed_hash_never_the_name_and_finds_a_voter_after_a_key_rotation(tmp_path):
    queue = open_queue(tmp_path / "queue.sqlite")
    without_gold = ArenaSettings(voter_share=0.5, gold_share=0.0)
    arena = _arena(queue, without_gold)
    arena.set_cultures("ada.lovelace", ["Japan", "India"])
    arena.vote("ada.lovelace", arena.next_battle("ada.lovelace").token, "a")
    assert b"ada.lovelace" not in (tmp_path / "queue.sqlite").read_bytes()
    assert arena.ballots.votes()["voter"].tolist() == [voter_hash(arena.keys, "ada.lovelace")]
    # The operator rotates the secret (the new one first, the old one still verifying): the voter keeps their votes
    # and cultures, now under the new key's hash.
    rotated = Arena(queue, Keys.parse("a-new-arena-secret-0123456789 arena-tests-secret-0123456789", "rotated"),
                    _candidates(), GOLD, without_gold, replicates=20)
    assert rotated.cultures("ada.lovelace") == ["India", "Japan"]
    assert rotated.ballots.votes()["voter"].tolist() == [voter_hash(rotated.keys, "ada.lovelace")]
    queue.close()


def _race(n: int, action) -> list:
    """Run ``action(i)`` in ``n`` threads released together; each one's result or exception."""
    start, outcomes = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = action(i)
        except Exception as error:  # noqa: BLE001 - the test inspects what each thread got
            outcomes[i] = error
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_arena_20_concurrent_voters_lose_no_vote(arena_queue):
    arena = _arena(arena_queue, ArenaSettings(voter_share=0.5, gold_share=0.2))
    rounds = 3

    def voter(i: int) -> list[str]:
        user = f"voter-{i}"
        arena.set_cultures(user, [CULTURES[i % 2]])
        cast = []
        for _ in range(rounds):
            shown = arena.next_battle(user)
            arena.vote(user, shown.token, ("a", "b", "tie", "both_bad")[i % 4])
            cast.append(shown.battle)
        return cast

    outcomes = _race(20, voter)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    stored = arena.ballots.votes()
    assert len(stored) == 20 * rounds and stored["battle"].is_unique
    assert sorted(stored["battle"]) == sorted(b for cast in outcomes for b in cast)
    assert stored.groupby("voter").size().tolist() == [rounds] * 20


# --- votes as data: restarts, restores, the published config ---------------------------------------------------
ADA, BO = "ada.lovelace", "niels.bohr"  # sign-in names with letters no hex digest holds


def _voted_store(root, votes_each: int = 3) -> tuple[Store, Arena]:
    store = Store(root)
    arena = Arena(store.queue, keys_for(store.root), _candidates(), GOLD, ArenaSettings(voter_share=0.5,
                                                                                        gold_share=0.0),
                  replicates=50)
    for user, culture, choice in ((ADA, "Japan", "a"), (BO, "India", "b")):
        arena.set_cultures(user, [culture])
        for _ in range(votes_each):
            arena.vote(user, arena.next_battle(user).token, choice, ["wrong culture"] if choice == "b" else [])
    return store, arena


def _reopened(root) -> Arena:
    """The arena of the store at ``root`` after a restart: a new process opening the same store."""
    store = Store(root)
    return Arena(store.queue, keys_for(store.root), _candidates(), GOLD, ArenaSettings(voter_share=0.5),
                 replicates=50)


def _ranks(arena: Arena) -> dict:
    return {name: found.rows[["model", "strength", "votes"]].round(9).to_dict()
            for name, found in arena.standings().rankings.items() if not found.not_ranked}


def test_arena_votes_and_a_withdrawal_survive_restarts_and_restores_from_the_repo(tmp_path):
    store, arena = _voted_store(tmp_path / "store")
    before, ranks = arena.ballots.votes(), _ranks(arena)
    assert len(before) == 6 and ranks
    restarted = _reopened(tmp_path / "store")
    pd.testing.assert_frame_equal(restarted.ballots.votes(), before)
    assert _ranks(restarted) == ranks

    old_repo = tmp_path / "repo-before-withdrawal"
    hub_sync.export(store, "requests", old_repo)
    assert restarted.withdraw(BO) == 3
    bo = voter_hash(restarted.keys, BO)
    after = _reopened(tmp_path / "store")
    assert bo not in set(after.ballots.votes()["voter"]) and len(after.ballots.votes()) == 3
    # The repo still holds bo's votes (no push since): pulling it brings none back.
    counts = hub_sync.pull(Store(tmp_path / "store"), "requests", str(old_repo))
    assert (counts["votes_added"], counts["votes_present"], counts["votes_withdrawn"]) == (0, 3, 3)
    assert bo not in set(_reopened(tmp_path / "store").ballots.votes()["voter"])

    # The disk is lost after the next push: a fresh store restores ada's votes, not bo's, and the same rankings.
    repo = tmp_path / "repo"
    hub_sync.export(Store(tmp_path / "store"), "requests", repo)
    fresh = Store(tmp_path / "fresh")
    counts = hub_sync.pull(fresh, "requests", str(repo))
    assert (counts["votes_added"], counts["votes_withdrawn"], counts["voters_added"], counts["votes_refused"]) == (
        3, 0, 2, 0)
    restored = Arena(fresh.queue, keys_for(fresh.root), _candidates(), GOLD, ArenaSettings(voter_share=0.5),
                     replicates=50)
    kept = after.ballots.votes()
    pd.testing.assert_frame_equal(restored.ballots.votes().drop(columns=["issued_at", "expires_at", "voted_at"]),
                                  kept.drop(columns=["issued_at", "expires_at", "voted_at"]))
    assert np.allclose(restored.ballots.votes()["voted_at"], kept["voted_at"], atol=1e-5)
    assert restored.cultures(ADA) == ["Japan"] and restored.cultures(BO) == ["India"]
    assert _ranks(restored) == _ranks(after)
    # ... and knows the withdrawal: the copy from before it, pulled now, brings nothing of bo's back either.
    counts = hub_sync.pull(fresh, "requests", str(old_repo))
    assert (counts["votes_added"], counts["votes_withdrawn"]) == (0, 3)
    assert bo not in set(restored.ballots.votes()["voter"])


def test_arena_a_push_keeps_the_repos_votes_the_store_lacks_and_every_withdrawal(tmp_path):
    """As the requests repo's seal keeps its records and deletions (issue 48), a push drops nothing the repo's sealed
    votes folder holds: a store on a fresh disk whose restore never ran pushes its own votes beside the repo's, and
    the repo's withdrawals stay; a folder it cannot check is left as it is, nothing pushed."""
    store, arena = _voted_store(tmp_path / "store")
    repo = tmp_path / "repo"
    hub_sync.push(store, "requests", repo)
    assert arena.withdraw(BO) == 3
    hub_sync.push(store, "requests", repo)  # the repo's seal is this store's last: not read again
    other = Store(tmp_path / "other")  # a fresh disk, its restore never run: it holds none of the repo's votes
    carl = Arena(other.queue, keys_for(other.root), _candidates(), GOLD, ArenaSettings(voter_share=0.5,
                                                                                       gold_share=0.0))
    carl.set_cultures("carl", ["India"])
    carl.vote("carl", carl.next_battle("carl").token, "tie")
    hub_sync.push(other, "requests", repo)
    published = pq.read_table(repo / "votes" / publish.VOTES).to_pandas()
    assert sorted(published["voter"]) == sorted([voter_hash(arena.keys, ADA)] * 3 + [voter_hash(arena.keys, "carl")])
    withdrawn = json.loads((repo / "votes" / publish.WITHDRAWALS).read_bytes())["battles"]
    assert len(withdrawn) == 3  # bo's, which the other store never knew
    fresh = Store(tmp_path / "fresh")
    counts = hub_sync.pull(fresh, "requests", str(repo))
    assert (counts["votes_added"], counts["voters_added"], counts["votes_refused"]) == (4, 3, 0)
    assert voter_hash(arena.keys, BO) not in set(Ballots(fresh.queue).votes()["voter"])

    sealed = (repo / "votes" / publish.SEAL).read_bytes()  # a folder this server cannot check: nothing pushed over it
    (repo / "votes" / publish.SEAL).write_bytes(sealed.replace(b'"hmac": "', b'"hmac": "0'))
    before = {p: p.read_bytes() for p in (repo / "votes").iterdir()}
    carl.vote("carl", carl.next_battle("carl").token, "a")
    with pytest.raises(hub_sync.RepoError, match="votes/seal.json: its seal does not match its files"):
        hub_sync.push(other, "requests", repo)
    assert {p: p.read_bytes() for p in (repo / "votes").iterdir()} == before


def test_arena_a_forged_or_edited_votes_file_is_refused_whole_on_restore(tmp_path, caplog):
    store, _ = _voted_store(tmp_path / "store")
    repo = tmp_path / "repo"
    hub_sync.export(store, "requests", repo)

    def pulled(change) -> dict:
        copy = tmp_path / f"copy-{change.__name__}"
        shutil.copytree(repo, copy)
        change(copy / "votes")
        fresh = Store(tmp_path / f"fresh-{change.__name__}")
        with caplog.at_level("WARNING", logger="culturelens.arena"):
            counts = hub_sync.pull(fresh, "requests", str(copy))
        assert Arena(fresh.queue, keys_for(fresh.root), _candidates()).ballots.votes().empty
        return counts

    def edited(folder):  # one vote turned around
        table = pq.read_table(folder / publish.VOTES)
        rows = table.to_pylist()
        rows[0]["outcome"] = "b" if rows[0]["outcome"] == "a" else "a"
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), folder / publish.VOTES)

    def forged(folder):  # files of someone's own, sealed with a key this server does not hold
        other = Keys.parse("a-forgers-own-secret-0123456789", "forger")
        seal = json.loads((folder / publish.SEAL).read_bytes())
        edited(folder)
        seal["files"][publish.VOTES] = hashlib.sha256((folder / publish.VOTES).read_bytes()).hexdigest()
        seal.update(sealing.sign(other, publish.KIND, {"files": seal["files"]}))
        (folder / publish.SEAL).write_text(json.dumps(seal))

    def resealed(folder):  # the digest updated, the HMAC left: the seal no longer matches
        seal = json.loads((folder / publish.SEAL).read_bytes())
        edited(folder)
        seal["files"][publish.VOTES] = hashlib.sha256((folder / publish.VOTES).read_bytes()).hexdigest()
        (folder / publish.SEAL).write_text(json.dumps(seal))

    def unsealed(folder):
        (folder / publish.SEAL).unlink()

    for change, reason in ((edited, "votes/votes.parquet is not the file sealed"),
                           (forged, "which this server does not hold"),
                           (resealed, "votes/seal.json: its seal does not match its files (changed after it was "
                                      "sealed, or forged)"),
                           (unsealed, "votes/seal.json is missing")):
        caplog.clear()
        assert pulled(change)["votes_refused"] == 1
        assert reason in caplog.text, caplog.text


def test_arena_votes_config_loads_with_load_dataset(tmp_path):
    store, arena = _voted_store(tmp_path / "store")
    repo = tmp_path / "repo"
    hub_sync.export(store, "requests", repo)
    card = (repo / "README.md").read_text()
    assert "config_name: votes" in card and 'load_dataset("ORG/NAME", "votes"' in card
    loaded = datasets.load_dataset(str(repo), "votes", split="train")
    assert len(loaded) == 6
    assert loaded.features["reasons"] == datasets.List(datasets.Value("string"))
    assert loaded.features["voted_at"] == datasets.Value("timestamp[us, tz=UTC]")
    for column in ("voter", "battle", "model_a", "model_b", "prompt", "culture", "outcome"):
        assert loaded.features[column] == datasets.Value("string")
    frame = loaded.to_pandas()
    assert set(frame["voter"]) == {voter_hash(arena.keys, ADA), voter_hash(arena.keys, BO)}
    assert sorted(frame["outcome"]) == ["a"] * 3 + ["b"] * 3
    assert {tuple(r) for r in frame["reasons"]} == {(), ("wrong culture",)}
    every_byte = b"".join(p.read_bytes() for p in repo.rglob("*") if p.is_file())
    assert b"lovelace" not in every_byte and b"bohr" not in every_byte  # keyed hashes, never a name


# --- the rules the server draws battles by, and the gold items --------------------------------------------------
def test_arena_battles_favour_the_pairs_whose_order_is_least_certain():
    intervals = pd.DataFrame({"rank_low": [1, 1, 3], "rank_high": [2, 3, 3]}, index=["x", "y", "z"])
    votes = pd.DataFrame({"model_a": ["x", "y", "x"], "model_b": ["y", "x", "z"]})
    weights = matchmaking.pair_weights(["x", "y", "z"], intervals, votes)
    # x-y share ranks 1-2 (2) and have 2 votes: 3/3; x-z share none: 1/2; y-z share rank 3 with no vote: 2/1.
    assert weights.tolist() == [[0, 1.0, 0.5], [1.0, 0, 2.0], [0.5, 2.0, 0]]
    # Without a ranking, every pair's order is unknown: (1 + 3 models) / (1 + votes).
    assert matchmaking.pair_weights(["x", "y", "z"], None, votes)[1, 2] == 4.0
    # Drawn in proportion: y-z (2 of the 3.5 the three pairs weigh) comes 4/7 of the time.
    candidates = pd.DataFrame([{"submission": s, "model": s, "prompt_id": "p", "prompt": "p", "culture": "Japan",
                                "image": f"{s}.png"} for s in "xyz"])
    rng = np.random.default_rng(0)
    drawn = [frozenset((b.submission_a, b.submission_b)) for b in
             (matchmaking.model_battle(candidates, ["Japan"], {"Japan": intervals}, votes.assign(culture="Japan"), rng)
              for _ in range(2000))]
    assert drawn.count(frozenset("yz")) / 2000 == pytest.approx(4 / 7, abs=0.04)
    none = votes.assign(culture="Japan").iloc[:0]  # no vote yet, no ranking: every pair alike
    lefts = [b.submission_a for b in (matchmaking.model_battle(candidates, ["Japan"], {}, none, rng)
                                      for _ in range(600))]
    assert lefts.count("x") / 600 == pytest.approx(1 / 3, abs=0.06)  # sides at random
    with pytest.raises(ValueError, match="need the columns culture"):  # votes without their culture: said, not guessed
        matchmaking.model_battle(candidates, ["Japan"], {}, votes, rng)


def test_arena_gold_items_come_from_the_knowledge_base_and_the_iconic_references():
    entities = pd.DataFrame({"entity_id": ["Q1", "Q2", "Q3"], "name": ["Sushi", "Dosa", "Unknown"],
                             "country": ["Japan", "India", None], "category": ["cuisine", "cuisine", "cuisine"]})
    images = pd.DataFrame({"image_sha256": ["s1", "s2", "s3", "s4"], "entity_ids": [["Q1"], ["Q2"], ["Q1", "Q2"],
                                                                                   ["Q3"]]})
    items = gold.from_knowledge_base(entities, images)
    assert items.to_dict("records") == [
        {"name": "Sushi", "culture": "Japan", "group": "cuisine", "image": "kb:s1", "source": "CUBE-CSpace"},
        {"name": "Dosa", "culture": "India", "group": "cuisine", "image": "kb:s2", "source": "CUBE-CSpace"}]
    references = pd.DataFrame({"prompt_id": ["ref-q5", "ref-q6"], "title": ["The Great Wave", "Untitled"],
                               "country": ["Japan", None], "kind": ["still", "still"], "images": [2, 1]})
    assert gold.from_iconic_references(references)["image"].tolist() == ["iconic:ref-q5:0", "iconic:ref-q5:1"]
    battle = matchmaking.gold_battle(items, ["Japan"], np.random.default_rng(1))
    assert battle.prompt == "Sushi (Japan)" and {battle.image_a, battle.image_b} == {"kb:s1", "kb:s2"}
    assert (battle.image_a if battle.gold_answer == "a" else battle.image_b) == "kb:s1"
    assert matchmaking.gold_battle(items[items["culture"] == "Japan"], ["Japan"], np.random.default_rng(1)) is None


# --- the Arena tab: the store's scored submissions, the images served, a visitor in Chromium ----------------------
ARENA_MODELS = ("Alpha", "Beta", "Gamma")
CLIP_SCORES = {"Alpha": 0.9, "Beta": 0.5, "Gamma": 0.7}  # every image of a model scores its model's value
PLANTED = {"Beta": (96, 64), "Gamma": (64, 128)}  # sizes other than 64 x 64, and metadata naming the model


def _planted(path, model: str, size: tuple[int, int], seed: int) -> None:
    """A PNG of ``size`` whose text chunk and EXIF name its ``model``, as a generator's files can."""
    from PIL import Image, PngImagePlugin

    pixels = np.random.default_rng(seed).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", f"made by {model}")
    exif = Image.Exif()
    exif[0x0131] = model  # Software
    Image.fromarray(pixels).save(path, format="PNG", pnginfo=info, exif=exif)


@pytest.fixture()
def arena_store(tmp_path, tiny_upstream) -> Store:
    """A store serving the tiny CUBE dataset (Brazil and Nigeria, 3 prompts each) with three scored submissions,
    Alpha, Beta and Gamma, of 2 seeds a prompt: their images in the submissions' shards (Beta's and Gamma's of other
    sizes, with metadata naming the model), their per-image results naming each image and its country."""
    from benchmark import results
    from benchmark.datasets import cube_1k
    from benchmark.run_record import RunRecord
    from culturelens.testing.submissions import make_submission
    from tests.helpers import serving_tiny_cube

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompts = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table
    for n, model in enumerate(ARENA_MODELS):
        folder = make_submission(tmp_path / "uploads" / model, list(prompts.index), model_name=model)
        if model in PLANTED:
            for i, image in enumerate(sorted((folder / "images").rglob("*.png"))):
                _planted(image, model, PLANTED[model], 100 * n + i)
        sid = store.submit(folder, "ada").job.id
        per_image = [{"submission_id": sid, "model": model, "prompt_id": pid, "seed": seed,
                      "image_path": f"images/{pid}/{seed}.png", "country": prompts.loc[pid, "country"],
                      "track": "awareness", "metric": "clip_score", "value": CLIP_SCORES[model]} for pid in prompts.index
                     for seed in (0, 1)]
        overall = {"provenance": "scored", "submission_id": sid, "model": model, "model_id": f"org/{model.lower()}",
                   "track": "awareness", "metric": "clip_score", "metric_version": "1", "higher_is_better": True,
                   "dataset": "culturelens/cube-1k:cube_1k:test", "seeds": "0,1",
                   "scored_at": f"2026-03-0{n + 1}T00:00:00+00:00", "slice": "overall", "slice_value": "all",
                   "value": CLIP_SCORES[model], "n": 6}
        results.write_folder(store.results / sid, per_image, [overall], [], RunRecord(submission_id=sid))
    return store


def _served(path) -> tuple:
    """A served file: its name, its size, its format and every metadata block Pillow or its chunks show."""
    from PIL import Image

    data, chunks, at = Path(path).read_bytes(), set(), 8  # a PNG: its signature, then length, kind, data, CRC
    while at < len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        chunks.add(data[at + 4:at + 8].decode("latin-1"))
        at += 12 + length
    with Image.open(path) as image:
        return image.size, image.format, dict(image.info), dict(image.getexif()), getattr(image, "text", {}), chunks


def _assert_fitted(path, original: bytes) -> None:
    """The served file ``path`` is 512 x 512, metadata-free, and holds ``original``'s pixels scaled into the square
    and centred on white (checked independently: Pillow's Lanczos on the original file)."""
    from PIL import Image

    size, kind, info, exif, text, chunks = _served(path)
    assert (size, kind, info, exif, text) == ((512, 512), "PNG", {}, {}, {})  # EXIF, text: none
    assert chunks == {"IHDR", "IDAT", "IEND"}, chunks  # no tEXt, iTXt, zTXt, eXIf, iCCP, tIME
    stored = Image.open(io.BytesIO(original)).convert("RGB")
    scale = 512 / max(stored.size)
    fitted = np.asarray(stored.resize((round(stored.width * scale), round(stored.height * scale)),
                                      Image.Resampling.LANCZOS))
    pixels = np.asarray(Image.open(path))
    top, left_edge = (512 - fitted.shape[0]) // 2, (512 - fitted.shape[1]) // 2
    assert np.array_equal(pixels[top:top + fitted.shape[0], left_edge:left_edge + fitted.shape[1]], fitted)
    assert (pixels.sum() - fitted.astype(int).sum()) == 255 * 3 * (512 * 512 - fitted.shape[0] * fitted.shape[1])


def test_arena_served_images_are_one_size_free_of_metadata_and_not_named_after_the_model(arena_store):
    from PIL import Image

    from leaderboard.arena import served
    from leaderboard.ui.arena import ArenaTab
    from leaderboard.ui.site import Site

    tab = ArenaTab(Site(arena_store, "ada"))
    arena = tab.arena
    assert len(arena.candidates) == 36 and set(arena.candidates["culture"]) == {"Brazil", "Nigeria"}
    assert set(arena.candidates["model"]) == set(ARENA_MODELS)
    shown = tab.save_cultures(["Brazil", "Nigeria"])
    names, seen = set(), []
    for _ in range(6):
        left, right = shown["left"]["value"], shown["right"]["value"]
        reveal = tab.vote("a", shown["token"], [])["reveal"]["value"]
        models = re.search(r"\*\*Left:\*\* (\w+) · \*\*Right:\*\* (\w+)", reveal).groups()
        for path, model in zip((left, right), models):
            size, kind, info, exif, text, chunks = _served(path)
            assert (size, kind, info, exif, text) == ((512, 512), "PNG", {}, {}, {}), model  # EXIF, text: none
            assert chunks == {"IHDR", "IDAT", "IEND"}, chunks  # no tEXt, iTXt, zTXt, eXIf, iCCP, tIME
            name = Path(path).name
            assert re.fullmatch(r"[0-9a-f]{32}\.png", name) and name not in names  # a name per battle side
            names.add(name)
            seen.append((model, path, shown["token"].split(".")[0], path == left))
        shown = tab.next_battle()
    assert {model for model, *_ in seen} == set(ARENA_MODELS)
    # Each is the image the submission's shards hold, its pixels scaled into the square, Beta's 96 x 64 and Gamma's
    # 64 x 128 centred on white.
    battles = arena.ballots.votes().set_index("battle")
    for model, path, battle, is_left in seen:
        ref = battles.loc[battle, "image_a" if is_left else "image_b"]
        assert battles.loc[battle, "model_a" if is_left else "model_b"] == model
        submission, image_path = ref.split(":", 1)
        stored = arena_store.image_bytes(submission, [image_path])[image_path]
        assert Image.open(io.BytesIO(stored)).size == PLANTED.get(model, (64, 64))
        _assert_fitted(path, stored)
    # Nothing but the candidates' images, as the submission's own image table lists them, is ever read.
    known = set(arena.candidates["image"])
    some = arena.candidates["image"].iloc[0]
    submission = some.split(":", 1)[0]
    assert served.owned_bytes(arena_store, known, some) is not None
    for stranger in (f"{submission}:images/../../../queue.sqlite", f"{submission}:images/nothing/0.png",
                     f"{submission}:manifest.json", "kb:abc"):
        assert served.owned_bytes(arena_store, known | {stranger}, stranger) is None, stranger
    assert served.owned_bytes(arena_store, known - {some}, some) is None


# Two works the store's iconic references name, of Brazil and Nigeria (both still images, so one can be set against
# the other), and one without a country (never a gold item): title -> (country, modality, size of its one image).
REFERENCE_WORKS = {"Morning Coffee": ("Brazil", "artwork", (80, 40)), "Lift Off": ("Nigeria", "photograph", (30, 60)),
                   "A Cat Asleep": (None, "album", (50, 50))}


def _serve_references(store: Store, folder: Path) -> dict[str, bytes]:
    """The iconic references dataset, built from ``REFERENCE_WORKS`` (each image a PNG with EXIF naming it), put in
    the store's datasets; returns each work's image bytes by title."""
    from benchmark.datasets import iconic_references
    from benchmark.datasets.prompts import local_folder

    images, lines, made = folder / "iconic", [], {}
    images.mkdir(parents=True)
    for i, (title, (country, modality, size)) in enumerate(REFERENCE_WORKS.items()):
        _planted(images / f"Q{100 + i}.png", title, size, 500 + i)
        made[title] = (images / f"Q{100 + i}.png").read_bytes()
        lines.append({"qid": f"Q{100 + i}", "title": title, "modality": modality, "sitelinks": 40, "country": country,
                      "images": [f"Q{100 + i}.png"], "image_licenses": ["CC0 (test image)"]})
    records = folder / "references.jsonl"
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    iconic_references.build(records, images, local_folder(store.datasets, iconic_references.HUB_REPO))
    return made


def test_arena_the_app_issues_gold_battles_of_real_reference_images_and_sets_a_careless_voters_votes_aside(
        arena_store, tmp_path):
    """With the iconic references served, a voter who knows Brazil is shown check battles: the Brazilian work's
    real image against the Nigerian one's, named in the prompt, served like any battle image (512 x 512, no
    metadata); the reveal says which was right. A voter who answers every one "both wrong" without looking has
    every vote set aside once they have answered the gold rule's minimum, and the tab says so; one who picks the
    named work keeps theirs."""
    from leaderboard.ui.arena import ArenaTab
    from leaderboard.ui.site import Site

    originals = _serve_references(arena_store, tmp_path)
    settings = ArenaSettings(voter_share=0.5, gold_share=0.9)
    tabs = {user: ArenaTab(Site(arena_store, user), settings) for user in ("careless", "careful")}
    items = tabs["careless"].arena.gold
    assert sorted(zip(items["name"], items["culture"], items["group"], items["source"])) == [
        ("Lift Off", "Nigeria", "still", "iconic references"),
        ("Morning Coffee", "Brazil", "still", "iconic references")]
    gold_seen = {"careless": 0, "careful": 0}
    shown = {user: tab.save_cultures(["Brazil"]) for user, tab in tabs.items()}
    while min(gold_seen.values()) < reliability.GOLD_MIN:
        for user, tab in tabs.items():
            is_gold = "Morning Coffee (Brazil)" in html.unescape(shown[user]["prompt"]["value"])
            left, right = shown[user]["left"]["value"], shown[user]["right"]["value"]
            # The careless voter says "both wrong" without looking. The careful one looks: Morning Coffee is the
            # wide image (80 x 40), white above its middle once fitted; Lift Off, the tall one, is not.
            wide = np.asarray(PIL.Image.open(left))[50, 256].tolist() == [255, 255, 255]
            choice = "both_bad" if user == "careless" else "a" if not is_gold or wide else "b"
            reveal = html.unescape(tab.vote(choice, shown[user]["token"], [])["reveal"]["value"])
            assert ("check battle" in reveal) == is_gold, reveal
            if is_gold:
                gold_seen[user] += 1
                answer = "left" if re.search(r"the (left|right) one shows", reveal).group(1) == "left" else "right"
                named, other = (left, right) if answer == "left" else (right, left)
                _assert_fitted(named, originals["Morning Coffee"])
                _assert_fitted(other, originals["Lift Off"])
                assert "Morning Coffee (Brazil)" in reveal and "Lift Off (Nigeria)" in reveal
            shown[user] = tab.next_battle()
    standings = tabs["careful"].arena.standings()
    careless, careful = (voter_hash(keys_for(arena_store.root), u) for u in ("careless", "careful"))
    assert standings.voters.loc[careless, "set_aside"] and not standings.voters.loc[careful, "set_aside"]
    assert standings.voters.loc[careful, "gold_right"] == standings.voters.loc[careful, "gold"] >= reliability.GOLD_MIN
    said = html.unescape(tabs["careful"].rankings()["standing"])
    assert (f"{int((standings.votes['voter'] == careless).sum())} votes of 1 voter set aside: right on 0 of "
            f"{int(standings.voters.loc[careless, 'gold'])} gold battles (a real image") in said, said


def test_arena_knowledge_base_gold_items_are_served_only_while_their_bytes_match_what_it_recorded(
        arena_store, tmp_path, tiny_clip):
    """CUBE-CSpace's artifacts as the relevance knowledge base holds them: gold items only where the operator names
    the folder of its images (``CULTURELENS_ARENA_KB_IMAGES``), a battle between the Brazilian and the Nigerian
    dish's real images served fitted like any other; an image file swapped after the build is never served as the
    artifact, nor is anything the items do not name, and a knowledge base whose tables were edited gives none."""
    from benchmark.relevance.kb import build_index
    from leaderboard.arena import served
    from leaderboard.ui.arena import ArenaTab
    from leaderboard.ui.site import Site

    images = tmp_path / "kb-images"
    images.mkdir()
    dishes = {"Q1": ("Pão de queijo", "Brazil", (90, 30)), "Q2": ("Jollof rice", "Nigeria", (40, 70)),
              "Q3": ("Somewhere", None, (64, 64))}  # no country: never a gold item
    originals = {}
    for n, (qid, (name, country, size)) in enumerate(dishes.items()):
        _planted(images / f"{qid}.png", name, size, 700 + n)
        originals[name] = (images / f"{qid}.png").read_bytes()
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"entity_id": qid, "name": name, "description": "", "wikipedia": "",
                                           "images": [f"{qid}.png"],
                                           "sources": {"country": country, "category": "cuisine"}}) + "\n"
                               for qid, (name, country, _) in dishes.items()))
    kb_folder = tmp_path / "kb"
    build_index(records, images, kb_folder, "msiglip-so400m", registry={"msiglip-so400m": tiny_clip}, device="cpu",
                show_progress=False)
    sha = {name: hashlib.sha256(data).hexdigest() for name, data in originals.items()}

    assert served.gold(arena_store, kb_folder, None).items.empty  # no images folder named: no item
    found = served.gold(arena_store, kb_folder, images)
    assert sorted(zip(found.items["name"], found.items["culture"], found.items["image"])) == [
        ("Jollof rice", "Nigeria", f"kb:{sha['Jollof rice']}"),
        ("Pão de queijo", "Brazil", f"kb:{sha['Pão de queijo']}")]
    assert found.bytes_of(f"kb:{sha['Jollof rice']}") == originals["Jollof rice"]
    for stranger in (f"kb:{sha['Somewhere']}", "kb:../Q1.png", "iconic:ref-q1:0", f"kb:{sha['Jollof rice']}x"):
        assert found.bytes_of(stranger) is None, stranger

    tab = ArenaTab(Site(arena_store, "ada", metric_settings={"relevance_kb": str(kb_folder)}),
                   ArenaSettings(voter_share=0.5, gold_share=0.9, kb_images=str(images)))
    shown = tab.save_cultures(["Brazil"])
    while "Pão de queijo (Brazil)" not in html.unescape(shown["prompt"]["value"]):  # 9 battles in 10 are gold
        tab.vote("tie", shown["token"], [])
        shown = tab.next_battle()
    left, right = shown["left"]["value"], shown["right"]["value"]
    reveal = html.unescape(tab.vote("a", shown["token"], [])["reveal"]["value"])
    named, other = (left, right) if "the left one shows" in reveal else (right, left)
    _assert_fitted(named, originals["Pão de queijo"])
    _assert_fitted(other, originals["Jollof rice"])

    (images / "Q2.png").write_bytes(originals["Somewhere"])  # swapped after the build: its bytes no longer match
    assert found.bytes_of(f"kb:{sha['Jollof rice']}") is None
    assert found.bytes_of(f"kb:{sha['Pão de queijo']}") == originals["Pão de queijo"]
    entities = kb_folder / "entities.parquet"
    entities.write_bytes(entities.read_bytes() + b"\0")  # the tables edited: the knowledge base gives no item
    assert served.gold(arena_store, kb_folder, images).items.empty


@pytest.mark.slow  # a live app and Chromium
def test_arena_a_signed_in_visitor_votes_three_times_in_chromium_and_sees_each_reveal_after_the_vote(arena_store):
    """The app signed in as its local user (``culturelens serve --user ada``): the visitor opens the Arena tab,
    picks Brazil, and three times is shown a battle (no model named anywhere in the tab, nor in an image's
    address), votes, and sees both models revealed, as the database recorded them under their keyed hash."""
    from culturelens.testing.live_app import launched
    from leaderboard.arena.tokens import voter_hash
    from tests.browser import chromium, control, open_page, screenshot, wait_for_text

    names = [*ARENA_MODELS, *(s.lower() for s in ARENA_MODELS)]
    with launched(arena_store, "ada") as url, chromium() as browser:
        page = open_page(browser, url + "?tab=arena", shows="Cultures you know well")
        control(page, "Cultures you know well").click()
        page.get_by_role("option", name="Brazil").click()
        page.get_by_role("button", name="Save my cultures").click()
        reveals = []
        for turn in range(3):
            wait_for_text(page, "Which image answers the prompt better")
            panel = page.locator("[role=tabpanel]:visible")
            page.wait_for_function("() => [...document.querySelectorAll('[role=tabpanel] img')]"
                                   ".filter(i => i.offsetParent && i.complete && i.naturalWidth === 512).length >= 2",
                                   timeout=60_000)
            before = panel.inner_text() + " ".join(page.evaluate(
                "() => [...document.querySelectorAll('[role=tabpanel] img')].map(i => i.src)"))
            assert "Culture: Brazil" in before and not [n for n in names if n in before], before
            if turn == 0:
                screenshot(page, "arena-battle")
            page.get_by_role("button", name=("Left is better", "Right is better", "Tie")[turn]).click()
            wait_for_text(page, "You voted:")
            said = page.locator("[role=tabpanel]:visible").inner_text()
            left, right = re.search(r"Left: (\w+) · Right: (\w+)", said).groups()
            assert {left, right} <= set(ARENA_MODELS) and left != right
            reveals.append((left, right))
            if turn == 0:
                screenshot(page, "arena-reveal")
            page.get_by_role("button", name="Next battle").click()
            page.wait_for_function("() => !document.body.innerText.includes('You voted:')", timeout=60_000)
        wait_for_text(page, "Which image answers the prompt better")
    votes = Arena(arena_store.queue, keys_for(arena_store.root), pd.DataFrame(
        columns=list(matchmaking.CANDIDATE_COLUMNS))).ballots.votes().sort_values("voted_at")
    assert list(votes["voter"]) == [voter_hash(keys_for(arena_store.root), "ada")] * 3
    assert list(votes["outcome"]) == ["a", "b", "tie"] and set(votes["culture"]) == {"Brazil"}
    assert list(zip(votes["model_a"], votes["model_b"])) == reveals


@pytest.mark.slow  # a live app and Chromium
def test_arena_a_visitor_not_signed_in_is_told_to_sign_in_and_shown_no_battle(arena_store, monkeypatch):
    """On a Space, a visitor who has not signed in (here: a Space without sign-in set up, where no one is signed
    in) gets the sentence, no culture picker and no battle; the rankings stay open to them."""
    from culturelens.testing.live_app import launched
    from leaderboard.ui.arena import SIGN_IN
    from tests.browser import chromium, open_page, screenshot

    monkeypatch.setenv("SPACE_ID", "org/culturelens")
    with launched(arena_store, "ada") as url, chromium() as browser:
        page = open_page(browser, url + "?tab=arena", shows=SIGN_IN)
        text = page.locator("[role=tabpanel]:visible").inner_text()
        assert "Cultures you know well" not in text and "Which image" not in text
        assert "No votes in the rankings yet" in text
        screenshot(page, "arena-signed-out")
    assert Arena(arena_store.queue, keys_for(arena_store.root), pd.DataFrame(
        columns=list(matchmaking.CANDIDATE_COLUMNS))).ballots.votes().empty


BETTER = {"Alpha": 3, "Beta": 2, "Gamma": 1}  # the order every careful voter below sees


def test_arena_tab_shows_the_leaderboards_own_rank_beside_the_votes(tmp_path):
    """Beside the arena's rankings, each model's rank on the leaderboard's automatic ranking: here awareness alone
    on 12 prompts, Alpha above Beta above Gamma on every one (0.9, 0.5, 0.1): each pair's sign test is 12 of 12
    (p = 2 x 0.5^12, under 0.05 / 3), so rank rule 2 gives ranks 1, 2 and 3 with no range, in the overall too (win
    rates 1, 0.5 and 0)."""
    from leaderboard.ui.arena import ArenaTab
    from leaderboard.ui.site import Site
    from tests.test_rankings import PROMPTS, write_result

    store = Store(tmp_path / "store")
    for i, (model, value) in enumerate((("Alpha", 0.9), ("Beta", 0.5), ("Gamma", 0.1))):
        write_result(store, f"s{i}", model, "awareness", dict.fromkeys(PROMPTS, value))
    ranks, said = ArenaTab(Site(store, "ada")).leaderboard_ranks()
    assert ranks == {rating.OVERALL: {"Alpha": "1", "Beta": "2", "Gamma": "3"}}
    assert said.startswith("the overall ranking's (mean win rate over tracks)")


def test_arena_tab_ranks_by_the_votes_shows_set_aside_votes_and_each_metrics_agreement_and_a_voter_withdraws(
        arena_store):
    """Six careful voters vote 10 times each for the better model (Alpha > Beta > Gamma); one votes 10 times for
    the worse: 0.5 ** 10 < 0.001, so the contrary rule sets those 10 aside. The tab lists 70 votes by 7 voters, the
    10 set aside with the rule's reason, and ranks Alpha, Beta, Gamma overall and for Brazil on the 60 counted
    votes (each vote is in two models' counts: 120). The Metrics tab shows CLIPScore's agreement with the 60
    counted votes as computed by hand from them. The contrary voter's "Withdraw my votes" removes their 10 for
    good."""
    from leaderboard.ui.arena import ArenaTab
    from leaderboard.ui.metrics import MetricsTab
    from leaderboard.ui.site import Site

    settings = ArenaSettings(voter_share=0.25)
    arena = ArenaTab(Site(arena_store, "ada"), settings).arena
    for user in [f"careful-{n}" for n in range(6)] + ["mallory"]:
        arena.set_cultures(user, ["Brazil"])
        for _ in range(10):
            shown = arena.next_battle(user)
            models = {c.image: c.model for c in arena.candidates.itertuples()}  # the test knows; the voter not
            left, right = BETTER[models[shown.image_a]], BETTER[models[shown.image_b]]
            better = "a" if left > right else "b"
            arena.vote(user, shown.token, better if user != "mallory" else {"a": "b", "b": "a"}[better])
    # The page's rankings are at most STANDINGS_SECONDS old: a page served once they are (here: by another
    # process on the same store, whose arena has none kept yet) shows every vote.
    fresh = ArenaTab(Site(arena_store, "ada"), settings)
    shown = fresh.rankings()
    summary, table = shown["standing"], shown["rankings"]["value"]
    assert "70 votes by 7 voters; 10 set aside" in summary
    assert re.search(r"10 votes of 1 voter set aside: .*agree", summary), summary
    for ranking in (rating.OVERALL, "Brazil"):
        rows = table[table["ranking"] == ranking]
        assert list(rows["model"]) == ["Alpha", "Beta", "Gamma"] and rows["votes"].sum() == 120, rows
        assert list(rows["rank"].str[0]) == ["1", "2", "3"] and rows["Elo"].is_monotonic_decreasing
        assert f"**{ranking}**: 60 votes by 6 voters" in summary
        # Beside each, the leaderboard's own rank: none here, its 6 prompts being too few to rank (rank rule 2).
        assert set(rows["leaderboard rank"]) == {"–"}
    assert "Beside each, the model's rank on the leaderboard's automatic ranking" in summary
    # The Metrics tab: CLIPScore (Alpha 0.9 > Gamma 0.7 > Beta 0.5) orders every counted vote as the voters did
    # but those on Beta against Gamma, where it favours Gamma: by hand, from the stored votes.
    votes = arena.ballots.votes()
    counted = votes[votes["voter"] != voter_hash(arena.keys, "mallory")]
    against = sum({a, b} == {"Beta", "Gamma"} for a, b in zip(counted["model_a"], counted["model_b"]))
    assert len(counted) == 60 and 0 < against < 60
    found = MetricsTab(fresh.site, fresh).page()
    measured = found["arena"]["value"].set_index("culture")
    expected = (60 - against) / 60
    for culture in (rating.OVERALL, "Brazil"):
        assert measured.loc[culture, "metric"] == "clip_score"  # the fixture's rows carry no label
        assert measured.loc[culture, "pairs"] == 60 and measured.loc[culture, "agreed"] == 60 - against
        assert measured.loc[culture, "agreement"].startswith(f"{expected:.1%} [")
    assert "not measured" not in found["arena_note"]
    # The awareness track's method page says the same under its method; a track with no voted image, not measured.
    method = html.unescape(found["method"] if found["track"]["value"] == "awareness" else
                           MetricsTab(fresh.site, fresh).method("awareness"))
    for culture in (rating.OVERALL, "Brazil"):
        assert f"- clip_score, {culture}: {expected:.1%} [" in method and "of 60 decided pairs" in method
    assert "not measured yet" in MetricsTab(fresh.site, fresh).method("expectations")
    said = ArenaTab(Site(arena_store, "mallory"), settings).withdraw()  # a withdrawal redraws them at once
    assert said["said"].startswith("Withdrawn for good: 10 votes of yours")
    after = said["standing"]
    assert "60 votes by 6 voters; 0 set aside" in after

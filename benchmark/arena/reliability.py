"""Whose votes are set aside, and why: two stated rules on what each voter did, each a one-sided binomial test.

A voter either rule flags has every vote set aside: the votes stay stored and published, are shown as set aside
with the reason, and no ranking counts them (never silently dropped). Both rules are recomputed from all votes each
time, so a voter's standing follows their record.

1. **Gold battles** (``matchmaking.gold_battle``: a real image of the named artifact against a real image of
   another culture's artifact of the same kind). A careful voter picks the named artifact's image; a tie or "both
   wrong" is not right. After at least ``GOLD_MIN`` gold battles, a voter whose right answers fall short of a careful
   voter's ``CAREFUL`` share (0.8) beyond chance is set aside: P(X <= right) < ``GOLD_LEVEL`` (0.05) for X ~
   Binomial(gold battles, 0.8). A clicker right half the time is caught with probability 0.62 after 10 gold battles,
   0.87 after 20 and 0.99 after 40; a careful voter right 90% of the time is wrongly caught with probability 0.002
   or less at each of those counts.
2. **Disagreeing with everyone far beyond chance.** On each decided model battle (a side chosen), the voter agrees
   with the others when the others' votes on the same pair of models in the same culture favour the same model
   (more votes for it than for the other; battles where the others are level, or have not voted on the pair, are
   not counted). A voter guessing agrees half the time; one who agrees less often than half beyond chance,
   P(X <= agreed) < ``CONTRARY_LEVEL`` (0.001) for X ~ Binomial(counted, 0.5), votes for something other than the
   images (e.g. against the models everyone else prefers) and is set aside (at 20 counted battles: 2 agreements or
   fewer; at 100: 34 or fewer).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binom

GOLD_MIN = 5  # gold battles a voter answers before the gold rule can set them aside
CAREFUL = 0.8  # the share of gold battles a careful voter gets right
GOLD_LEVEL = 0.05
CONTRARY_LEVEL = 0.001
COLUMNS = ("votes", "gold", "gold_right", "gold_p", "compared", "agreed", "contrary_p", "set_aside", "reason")


def _agreement(votes: pd.DataFrame) -> pd.DataFrame:
    """Per decided model vote: whether the others' votes on its pair in its culture favour its winner (``agrees``)
    and whether they favour either (``counted``)."""
    decided = votes[(votes["kind"] == "model") & votes["outcome"].isin(("a", "b"))]
    a_won = decided["outcome"] == "a"
    frame = pd.DataFrame({"voter": decided["voter"], "culture": decided["culture"],
                          "winner": decided["model_a"].where(a_won, decided["model_b"]),
                          "loser": decided["model_b"].where(a_won, decided["model_a"])})
    everyone = frame.groupby(["culture", "winner", "loser"]).size()
    own = frame.groupby(["voter", "culture", "winner", "loser"]).size()

    def others(winner: str, loser: str) -> np.ndarray:
        keys = pd.MultiIndex.from_frame(frame[["culture", winner, loser]])
        own_keys = pd.MultiIndex.from_frame(frame[["voter", "culture", winner, loser]])
        return (everyone.reindex(keys).fillna(0).to_numpy() - own.reindex(own_keys).fillna(0).to_numpy())

    for_it, against = others("winner", "loser"), others("loser", "winner")
    return pd.DataFrame({"voter": frame["voter"].to_numpy(), "agrees": for_it > against,
                         "counted": for_it != against})


def reliability(votes: pd.DataFrame) -> pd.DataFrame:
    """Each voter's record and standing (index: voter): votes; gold battles answered and right, with the gold rule's
    p-value (nan below ``GOLD_MIN``); decided model battles compared with the others and agreed, with the contrary
    rule's p-value (nan when none compared); ``set_aside`` and ``reason`` (a sentence; '' when kept).

    ``votes``: vote records with ``kind`` and ``gold_answer`` (``benchmark.arena``)."""
    voters = pd.Index(sorted(votes["voter"].unique()), name="voter")
    table = pd.DataFrame(index=voters)
    table["votes"] = votes.groupby("voter").size().reindex(voters).fillna(0).astype(int)
    gold = votes[votes["kind"] == "gold"]
    table["gold"] = gold.groupby("voter").size().reindex(voters).fillna(0).astype(int)
    right = gold["outcome"] == gold["gold_answer"]
    table["gold_right"] = right.groupby(gold["voter"]).sum().reindex(voters).fillna(0).astype(int)
    table["gold_p"] = np.where(table["gold"] >= GOLD_MIN, binom.cdf(table["gold_right"], table["gold"], CAREFUL),
                               np.nan)
    compared = _agreement(votes)
    counted = compared[compared["counted"]]
    table["compared"] = counted.groupby("voter").size().reindex(voters).fillna(0).astype(int)
    table["agreed"] = counted.groupby("voter")["agrees"].sum().reindex(voters).fillna(0).astype(int)
    table["contrary_p"] = np.where(table["compared"] > 0, binom.cdf(table["agreed"], table["compared"], 0.5), np.nan)
    careless = table["gold_p"] < GOLD_LEVEL
    contrary = table["contrary_p"] < CONTRARY_LEVEL
    table["set_aside"] = careless | contrary
    table["reason"] = [_reason(row, bool(a), bool(b)) for row, a, b in
                       zip(table.itertuples(), careless, contrary)]
    return table[list(COLUMNS)]


def _reason(row, careless: bool, contrary: bool) -> str:
    said = []
    if careless:
        said.append(f"right on {row.gold_right} of {row.gold} gold battles (a real image of the named artifact "
                    f"against another culture's), short of a careful voter's {CAREFUL:.0%} beyond chance "
                    f"(binomial p = {row.gold_p:.2g} < {GOLD_LEVEL})")
    if contrary:
        said.append(f"agreed with the other voters on only {row.agreed} of {row.compared} battles they decided, far "
                    f"below the half a guess agrees on (binomial p = {row.contrary_p:.2g} < {CONTRARY_LEVEL})")
    return ("set aside: " + "; and ".join(said)) if said else ""


def marked(votes: pd.DataFrame, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """``votes`` with ``set_aside`` and ``reason`` from their voter's standing (``reliability``, computed here when
    ``table`` is None): every vote, none dropped; the rankings read those not set aside."""
    table = reliability(votes) if table is None else table
    marked = votes.copy()
    marked["set_aside"] = marked["voter"].map(table["set_aside"]).fillna(False).astype(bool)
    marked["reason"] = marked["voter"].map(table["reason"]).fillna("")
    return marked

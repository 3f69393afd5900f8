"""The Cultural Arena's ratings on simulated voters whose truth is known (issue 53).

20 models, 10 cultures; each model's log-strength in culture c is ``g_m + u_mc`` (g ~ N(0, 1), u ~ N(0, 0.5):
strengths differing by culture). Each voter knows one culture (uniformly) and votes on battles of two models' images
in it: the left model wins with the Bradley-Terry probability ``1 / (1 + exp(-(s_a - s_b)))``, and 10% of votes are
ties (at random, which a Bradley-Terry strength counts half to each side). The pairs are drawn uniformly, as the
matchmaking draws them before any ranking exists (``benchmark.arena.matchmaking``: every pair's order unknown).
Everything is fitted by the arena's own code (``benchmark.arena.rating``, ``benchmark.arena.reliability``).

1. **Votes to recover the truth**: Kendall's tau between the fitted strengths and the true ones, overall (the truth
   being the Bradley-Terry fit of the expected votes over every culture) and per culture (median of the 10), at
   several numbers of votes (voters casting 20 each), over ``--repeats`` seeds; the fewest votes whose median tau
   is at least 0.9.
2. **An attacker holding 5% of the voters** who recognises the target model's image 95% of the time and then votes
   for it (otherwise honestly, so as to look like everyone else): the target's overall rank and Elo, with no attack,
   with the attack against an arena without defences (the attackers choose battles with the target and vote without
   a daily cap: 10 times an honest voter's votes; no per-voter cap, no reliability rule) and with the defences (the
   server draws every battle, the daily cap holds each attacker to ``--cap`` votes, no voter weighs more than 5% of
   a ranking, 10% of battles are gold battles and the reliability rules set voters aside), with no voter weighing
   more than each of ``--multiples`` times the median voter's votes (``rating.voter_weights``; inf: the share cap
   alone), and the attackers' share of the ranking's weight.
   **What the median cap costs honest voters**: when honest voters vote at uneven paces (each voter's votes
   geometric with mean 20, so a few cast many), Kendall's tau of the overall ranking at 2,000 votes and of the
   cultures' (median) at 20,000 under each multiple, and the share of the 20,000 votes' weight the rule keeps
   (overall), median over ``--repeats`` seeds.
3. **Cost**: fitting 1,000,000 votes with 1,000 bootstrap draws (``rating.rate``), and every ranking at once (overall
   and the 10 cultures, ``rating.ratings``), on one core (BLAS threads set to 1 before numpy loads); and one ranking
   of 1,000,000 votes by voters of uneven pace, whose capped voters' weights make more cells to draw.

    .venv/bin/python benchmarks/arena_sim.py            # about 5 minutes on a busy 2-core VM
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # one core, before numpy loads

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402
from scipy.special import expit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.arena import rating, reliability  # noqa: E402  after the repository is on the path

MODELS, CULTURES = 20, 10
TIE_SHARE = 0.1
VOTES_EACH = 20  # an honest voter's votes
GOLD_SHARE = 0.1


def truth(rng: np.random.Generator) -> np.ndarray:
    """cultures x models true log-strengths: a model's general strength plus its culture's own part."""
    general = rng.normal(0, 1, MODELS)
    return general[None, :] + rng.normal(0, 0.5, (CULTURES, MODELS))


def overall_truth(strengths: np.ndarray) -> np.ndarray:
    """The strengths an overall ranking converges to: the Bradley-Terry fit of the expected votes of uniform pairs
    in uniform cultures."""
    expected = expit(strengths[:, :, None] - strengths[:, None, :]).sum(axis=0)
    np.fill_diagonal(expected, 0)
    return rating.fit(expected, prior=0)


def honest_votes(strengths: np.ndarray, n: int, rng: np.random.Generator, prefix: str = "h",
                 each: int = VOTES_EACH) -> pd.DataFrame:
    """``n`` model battles by honest voters (``each`` votes each), uniform pairs in each voter's culture."""
    voters = np.arange(n) // each
    culture = (voters * 7919) % CULTURES  # each voter knows one culture
    a = rng.integers(0, MODELS, n)
    b = (a + rng.integers(1, MODELS, n)) % MODELS
    return _outcomes(strengths, culture, a, b, voters, prefix, rng)


def uneven_votes(strengths: np.ndarray, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``n`` model battles by honest voters of uneven pace: each voter's votes geometric with mean ``VOTES_EACH``."""
    paces = rng.geometric(1 / VOTES_EACH, n)  # more voters than needed; the first n votes are kept
    voters = np.repeat(np.arange(n), paces)[:n]
    a = rng.integers(0, MODELS, n)
    b = (a + rng.integers(1, MODELS, n)) % MODELS
    return _outcomes(strengths, (voters * 7919) % CULTURES, a, b, voters, "h", rng)


def _outcomes(strengths, culture, a, b, voters, prefix, rng) -> pd.DataFrame:
    won = rng.random(len(a)) < expit(strengths[culture, a] - strengths[culture, b])
    outcome = np.where(rng.random(len(a)) < TIE_SHARE, "tie", np.where(won, "a", "b"))
    return pd.DataFrame({"model_a": [f"m{i:02d}" for i in a], "model_b": [f"m{i:02d}" for i in b],
                         "outcome": outcome, "culture": [f"c{c}" for c in culture],
                         "voter": [f"{prefix}{v}" for v in voters], "kind": "model", "gold_answer": None})


def tau(rated: rating.Rating, true: np.ndarray) -> float:
    """Kendall's tau of the fitted strengths against ``true``; nan for a ranking not ranked (fewer than 20 voters)."""
    if rated.not_ranked:
        return float("nan")
    fitted = rated.rows["strength"].reindex([f"m{i:02d}" for i in range(MODELS)]).to_numpy()
    return float(stats.kendalltau(fitted, true).statistic)


def recovery(sizes: list[int], repeats: int) -> pd.DataFrame:
    rows = []
    for seed in range(repeats):
        rng = np.random.default_rng(seed)
        strengths = truth(rng)
        target = overall_truth(strengths)
        for n in sizes:
            found = rating.ratings(honest_votes(strengths, n, rng), replicates=0)
            per_culture = [tau(found[f"c{c}"], strengths[c]) for c in range(CULTURES)]
            rows.append({"votes": n, "seed": seed, "overall": tau(found[rating.OVERALL], target),
                         "culture_median": float(np.median(per_culture))})  # nan: cultures not ranked
    return pd.DataFrame(rows).groupby("votes")[["overall", "culture_median"]].median()


def uneven_recovery(multiples: list[float], repeats: int, overall_votes: int = 2_000,
                    culture_votes: int = 20_000) -> pd.DataFrame:
    """Kendall's tau under each median multiple when honest voters vote at uneven paces: overall at
    ``overall_votes``, the cultures' median at ``culture_votes``; median over ``repeats`` seeds."""
    rows = []
    for seed in range(repeats):
        rng = np.random.default_rng(seed)
        strengths = truth(rng)
        target = overall_truth(strengths)
        few, many = uneven_votes(strengths, overall_votes, rng), uneven_votes(strengths, culture_votes, rng)
        for multiple in multiples:
            found = rating.ratings(many, multiple=multiple, replicates=0)
            kept = rating.voter_weights(many["voter"].to_numpy(), rating.VOTER_SHARE, multiple)
            rows.append({"multiple": multiple, "seed": seed,
                         "overall": tau(rating.rate(few, multiple=multiple, replicates=0), target),
                         "culture_median": float(np.median([tau(found[f"c{c}"], strengths[c])
                                                            for c in range(CULTURES)])),
                         "weight kept": kept.sum() / len(many)})
    return pd.DataFrame(rows).groupby("multiple", sort=False)[["overall", "culture_median", "weight kept"]].median()


def attack(honest: int, attackers: int, cap: int, target_rank: int, multiples: list[float], seed: int = 0) -> dict:
    """The target's overall rank and Elo: no attack, attacked without defences, attacked with them (under each
    median multiple)."""
    rng = np.random.default_rng(seed)
    strengths = truth(rng)
    order = np.argsort(-overall_truth(strengths))
    target = int(order[target_rank - 1])
    name = f"m{target:02d}"
    clean = honest_votes(strengths, honest * VOTES_EACH, rng)

    def attacked(votes: pd.DataFrame) -> pd.DataFrame:
        """Attackers recognise the target 95% of the time and then vote for it."""
        has = (votes["model_a"] == name) | (votes["model_b"] == name)
        seen = has & (rng.random(len(votes)) < 0.95)
        return votes.assign(outcome=np.where(seen, np.where(votes["model_a"] == name, "a", "b"), votes["outcome"]))

    # Without defences: the attackers pick battles with the target, 10 honest voters' votes each.
    n = attackers * VOTES_EACH * 10
    voters = np.arange(n) // (VOTES_EACH * 10)
    other = (target + rng.integers(1, MODELS, n)) % MODELS
    left = rng.random(n) < 0.5
    a, b = np.where(left, target, other), np.where(left, other, target)
    free = attacked(_outcomes(strengths, (voters * 7919) % CULTURES, a, b, voters, "x", rng))
    undefended = rating.rate(pd.concat([clean, free], ignore_index=True), share=1.0, multiple=math.inf, replicates=0)

    baseline = rating.rate(clean, replicates=0)
    found = {"target true rank": target_rank}
    for label, rated in (("no attack", baseline), ("attack, no defences", undefended)):
        found[f"{label}: place, elo"] = _place(rated, name)
    found["attack, no defences: attack votes"] = len(free)
    # With defences: the server draws the battles; each attacker casts the daily cap (or only as many votes as an
    # honest voter); gold battles in between, answered with care by everyone (an attacker too: it looks honest).
    for each in (cap, VOTES_EACH):
        drawn = attacked(honest_votes(strengths, attackers * each, rng, prefix="x", each=each))
        everyone = pd.concat([clean, drawn], ignore_index=True)
        gold = everyone.sample(frac=GOLD_SHARE, random_state=seed)[["voter", "culture"]].assign(
            kind="gold", model_a="gold-left", model_b="gold-right", gold_answer="a")
        gold["outcome"] = np.where(rng.random(len(gold)) < 0.9, "a", "b")
        marked = reliability.marked(pd.concat([everyone, gold], ignore_index=True))
        counted = marked[(marked["kind"] == "model") & ~marked["set_aside"]]
        label = f"attack, defences, {each} votes per attacker"
        found[f"{label}: attack votes"] = len(drawn)
        aside = marked.groupby("voter")["set_aside"].first()
        found[f"{label}: voters set aside (attackers, honest)"] = (
            int(aside[aside.index.str.startswith("x")].sum()), int(aside[aside.index.str.startswith("h")].sum()))
        for multiple in multiples:
            rule = f"{label}, median multiple {multiple:g}"
            found[f"{rule}: place, elo"] = _place(rating.rate(counted, multiple=multiple, replicates=0), name)
            weights = rating.voter_weights(counted["voter"].to_numpy(), rating.VOTER_SHARE, multiple)
            found[f"{rule}: attackers' share of the weight"] = (
                f"{weights[counted['voter'].str.startswith('x').to_numpy()].sum() / weights.sum():.1%}")
    return found


def _place(rated: rating.Rating, name: str) -> str:
    """The model's place by strength (1: strongest) and its Elo."""
    return f"{rated.rows.index.get_loc(name) + 1}, {rated.rows.loc[name, 'elo']:.0f}"


def cost(n: int, replicates: int) -> dict:
    rng = np.random.default_rng(1)
    votes = honest_votes(truth(rng), n, rng)
    started = time.process_time()
    rating.rate(votes, replicates=replicates)
    one = time.process_time() - started
    started = time.process_time()
    rating.ratings(votes, replicates=replicates)
    every = time.process_time() - started
    # Voters of uneven pace: the median cap gives the capped voters weights of their own, so more cells to draw.
    uneven = uneven_votes(truth(rng), n, rng)
    started = time.process_time()
    rating.rate(uneven, replicates=replicates)
    return {"votes": n, "replicates": replicates, "rate (overall) CPU-s": one,
            "ratings (overall + 10 cultures) CPU-s": every,
            "rate (overall), voters of uneven pace, CPU-s": time.process_time() - started,
            "rate (overall), voters of uneven pace: distinct vote weights":
                len(np.unique(rating.voter_weights(uneven["voter"].to_numpy())))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="seeds of the recovery sweep (5)")
    parser.add_argument("--sizes", default="1000,2000,5000,10000,20000,50000,100000",
                        help="numbers of votes of the recovery sweep")
    parser.add_argument("--honest", type=int, default=950, help="honest voters of the attack (950)")
    parser.add_argument("--cap", type=int, default=200, help="an attacker's votes under the daily cap (200)")
    parser.add_argument("--target-rank", type=int, default=15, help="the attacked model's true rank (15 of 20)")
    parser.add_argument("--multiples", default="inf,5,3,2,1",
                        help="the median multiples of the attack and the uneven-pace sweep (inf: the share cap alone)")
    parser.add_argument("--cost-votes", type=int, default=1_000_000)
    parser.add_argument("--cost-replicates", type=int, default=1000)
    args = parser.parse_args(argv)

    sizes = [int(s) for s in args.sizes.split(",")]
    table = recovery(sizes, args.repeats)
    print(f"1. Kendall tau against the truth (median over {args.repeats} seeds):")
    print(table.round(3).to_string())
    for column in table:
        enough = table.index[table[column] >= 0.9]
        print(f"   fewest votes with {column} tau >= 0.9: {enough.min() if len(enough) else 'none of these'}")
    multiples = [float(m) for m in args.multiples.split(",")]
    attackers = round(args.honest * 0.05 / 0.95)
    print(f"\n2. {attackers} attackers among {args.honest + attackers} voters (5%), target recognised 95% of the time:")
    for key, value in attack(args.honest, attackers, args.cap, args.target_rank, multiples).items():
        print(f"   {key}: {value:.1f}" if isinstance(value, float) else f"   {key}: {value}")
    print(f"\n   Honest voters of uneven pace: Kendall tau under each median multiple (median over {args.repeats} "
          "seeds; overall at 2,000 votes, per culture at 20,000):")
    print(uneven_recovery(multiples, args.repeats).round(3).to_string())
    print("\n3. Cost on one core:")
    for key, value in cost(args.cost_votes, args.cost_replicates).items():
        print(f"   {key}: {value:,.1f}" if isinstance(value, float) else f"   {key}: {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Bradley-Terry ratings from arena votes: strengths with bootstrap intervals and rank intervals, overall and per
culture, each with its number of votes and voters, no voter weighing more than a stated multiple of the median
voter's votes nor a stated share of any ranking.

**Model** (Bradley & Terry 1952, Biometrika 39(3/4), Eq. 1; as LMArena rates models: Chiang et al. 2024, "Chatbot
Arena", arXiv:2403.04132, Sec. 5): model i is preferred to model j with probability

    P(i > j) = 1 / (1 + exp(-(s_i - s_j)))

s the log-strengths. **Fit** by maximum likelihood on the pair counts, as LMArena fits a logistic regression on its
votes: maximise ``sum_ij W_ij log P(i > j) - PRIOR * sum_i s_i^2``, W_ij the (weighted) votes for i against j.

- **A tie counts half a win to each side** (LMArena). **Both wrong** (``both_bad``: neither image depicts the culture)
  counts as a tie too, as LMArena counts "tie (bothbad)": it says neither model did better than the other, which is
  all a Bradley-Terry strength can say (strengths are relative). That both failed is information of its own, so it
  is kept beside the strengths: each model's ``both_wrong`` count and share.
- ``PRIOR`` (a Gaussian prior of variance 1 / (2 PRIOR) on each s_i, choix's ``alpha``): 0.01 moves the strengths
  the votes determine by under 1e-3 log-odds (0.2 Elo) once each pair has ~40 votes (6e-4 measured on 400 votes
  among 5 models), and keeps a model that won (or lost) every battle at a finite strength, where the likelihood
  alone has no maximum; it also centres the strengths (sum 0).
- **Elo scale** for display: ``elo = 1000 + 400 s / ln 10`` (LMArena's scale and base; the mean model at 1000).
- **Solver**: Newton's method on every fit at once (``fit``: arrays of pair-count matrices), each step at most
  ``MAX_STEP`` log-odds per model (a trust region: the likelihood is concave, so it converges from anywhere).

**Intervals** (LMArena's bootstrap over votes): ``REPLICATES`` draws of N votes with replacement from the N votes,
made as one multinomial draw of the counts of the distinct (pair, outcome, weight) cells, which has the same
distribution at O(cells) rather than O(votes) cost; every draw is fitted at once, warm-started at the point fit.
Strength interval: the 2.5% and 97.5% order statistics of the draws; ranks by ``rank_step``, the tables' rule.

**No voter weighs more than ``multiple`` times the median voter, nor more than ``share`` of a ranking**
(``voter_weights``). Voting leaderboards are manipulated by voters who vote for a model they recognise, and the more
votes a voter casts the further they move it (Huang et al. 2025, "Exploring and Mitigating Adversarial Manipulation
of Voting-Based Leaderboards", arXiv:2501.07493, on LMArena); so a voter's weight in a ranking is bounded twice, by
what the ranking's other voters cast. In a ranking whose voters cast n_v votes each, m the median of the n_v:

    c_v = min(n_v, multiple * m)          (the median cap: ``MEDIAN_MULTIPLE``)
    w_v = min(c_v, t)                     (the share cap: ``VOTER_SHARE``)

t the largest common level with ``max_v w_v <= share * sum_u w_u`` ("water filling" over the median-capped c_v;
t = inf when no c_v exceeds ``share`` of their sum). Voter v's total weight is w_v, each of their votes w_v / n_v.
The median cap is what stops a bloc: ``share`` bounds one voter, but 5% of the voters each casting 10 times the
median voter's votes hold a third of a ranking (34.5% in ``benchmarks/arena_sim.py``) while each stays under the 5%
share cap; with ``MEDIAN_MULTIPLE`` 3 they hold 3 / (3 + 19) = 13.6% of it, and lift a model they recognise from 14th
to 11th instead of to 5th. 3 because the simulated honest voters of uneven pace lose nothing measurable down to it
(89% of their weight kept, the same Kendall tau), where 1 keeps half and loses accuracy. A ranking of fewer than
1 / ``share`` voters cannot hold the share cap: it is listed, with its counts, and not ranked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from benchmark import ranking
from benchmark.arena import OUTCOMES

PRIOR = 0.01  # choix's alpha: the penalty PRIOR * sum(s^2)
REPLICATES = 1000  # bootstrap draws of an interval
SEED = 0  # the draws' seed: the same votes always give the same intervals
VOTER_SHARE = 0.05  # the largest share of a ranking one voter may weigh
MEDIAN_MULTIPLE = 3.0  # the most one voter weighs, in the median voter's votes of the ranking (benchmarks/arena_sim.py)
MAX_STEP = 2.0  # log-odds: the largest change of one strength in one Newton step
TOLERANCE = 1e-10  # log-odds: the fit stops when no strength moves more than this
ELO_SCALE, ELO_BASE, ELO_MEAN = 400.0, 10.0, 1000.0
OVERALL = "all cultures"  # the key of the ranking over every culture's votes (no country is named so)


@dataclass
class Rating:
    """One ranking's ratings. ``rows`` (index: models, best first): strength (log-odds, mean 0), elo, elo_low and
    elo_high (95% bootstrap interval), rank, rank_low, rank_high, tie_group, votes (battles it was in), wins, ties,
    both_wrong, both_wrong_share. ``votes`` and ``voters``: what the ranking rests on; ``largest_share``: the
    largest weight share of one voter in it; ``not_ranked``: '' when ranked, else why (the rows then hold the
    counts only); ``replicates``: draws x models strengths (None without intervals); ``median_votes``,
    ``multiple`` and ``share``: the voters' weighting rule it was rated by (``voter_weights``)."""

    rows: pd.DataFrame
    votes: int
    voters: int
    largest_share: float
    not_ranked: str
    replicates: np.ndarray | None
    median_votes: float = math.nan
    multiple: float = MEDIAN_MULTIPLE
    share: float = VOTER_SHARE

    @property
    def note(self) -> str:
        """What the ranking rests on and how its voters are weighted, in words."""
        said = f"{self.votes:,} vote{'s' * (self.votes != 1)} by {self.voters:,} voter{'s' * (self.voters != 1)}"
        if self.not_ranked:
            return f"{said}: not ranked ({self.not_ranked})"
        median = f"{self.median_votes:g} vote{'s' * (self.median_votes != 1)}"
        bounds = ([f"{self.multiple:g} times the median voter's {median}"] if math.isfinite(self.multiple) else []) + [
            f"{self.share * 100:g}% of the ranking"]
        return (f"{said}; no voter counts for more than {' or '.join(bounds)} (the heaviest weighs "
                f"{self.largest_share:.1%} of it)")


def elo(strength: np.ndarray | float) -> np.ndarray | float:
    """Log-strengths on LMArena's Elo scale: 1000 + 400 s / ln 10."""
    return ELO_MEAN + ELO_SCALE * np.asarray(strength) / math.log(ELO_BASE)


def voter_weights(voters: Sequence, share: float = VOTER_SHARE,
                  multiple: float = MEDIAN_MULTIPLE) -> np.ndarray | None:
    """Each vote's weight (``voters``: the voter of each vote), by the module's rule: a voter of n votes weighs
    min(n, ``multiple`` * m, t) in all, m the median voter's votes, t the share cap's level over the median-capped
    counts (``_share_level``); each of their votes weighs that over n. ``multiple`` inf: no median cap. None when no
    level can hold the share cap (fewer than 1 / ``share`` voters)."""
    codes = np.unique(np.asarray(voters).astype(str), return_inverse=True)[1]
    counts = np.bincount(codes).astype(float)
    if counts.size == 0:
        return np.ones(0)
    capped = np.minimum(counts, multiple * np.median(counts))
    level = _share_level(capped, share)
    if level is None:
        return None
    return (np.minimum(capped, level) / counts)[codes]


def _share_level(weights: np.ndarray, share: float = VOTER_SHARE) -> float | None:
    """The largest level t with min(w_v, t) <= ``share`` * sum_u min(w_u, t) for every voter v (``weights``: each
    voter's weight before the share cap), "water filling": a voter under t keeps their weight, one above it weighs t.
    inf when no voter exceeds ``share`` of the total; None when no t can hold it (fewer than 1 / share voters)."""
    if weights.max() <= share * weights.sum():
        return math.inf
    ordered = np.sort(weights)[::-1]
    below = np.concatenate([np.cumsum(ordered[::-1])[::-1][1:], [0.0]])  # below[k-1]: the weight of voters after k
    for k in range(1, len(ordered) + 1):  # k voters capped: t = share * (k t + below) on [ordered[k], ordered[k-1]]
        if share * k >= 1:
            break
        cap = share * below[k - 1] / (1 - share * k)
        floor = ordered[k] if k < len(ordered) else 0.0
        if floor <= cap <= ordered[k - 1] and cap > 0:
            return float(cap)
    # k >= 1 / share voters all capped: only equal weights could hold it, and only when share * voters == 1
    if math.isclose(share * len(ordered), 1.0):
        return float(ordered[-1])
    return None


def _cells(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, weight: np.ndarray, m: int):
    """The distinct (pair, outcome, weight) cells of the votes: their counts (cells,) and each cell's contribution to
    the flattened win matrix (cells x m*m): a win of i over j adds its weight at (i, j), a tie (or both wrong) half its
    weight at (i, j) and (j, i)."""
    low, high = np.minimum(a, b), np.maximum(a, b)
    first_won = np.where(a < b, outcome == "a", outcome == "b")
    code = np.where(np.isin(outcome, ("tie", "both_bad")), 2, np.where(first_won, 0, 1))
    frame = pd.DataFrame({"low": low, "high": high, "code": code, "weight": weight})
    cells = frame.value_counts(sort=False).reset_index()
    contribution = np.zeros((len(cells), m * m))
    rows = np.arange(len(cells))
    lo, hi, kind, w = (cells[c].to_numpy() for c in ("low", "high", "code", "weight"))
    for where, at, value in ((kind == 0, lo * m + hi, w), (kind == 1, hi * m + lo, w),
                             (kind == 2, lo * m + hi, w / 2), (kind == 2, hi * m + lo, w / 2)):
        contribution[rows[where], at[where]] += value[where]
    return cells["count"].to_numpy(), contribution


def fit(wins: np.ndarray, *, prior: float = PRIOR, start: np.ndarray | None = None,
        tolerance: float = TOLERANCE, max_steps: int = 500) -> np.ndarray:
    """Bradley-Terry log-strengths maximising ``sum_ij W_ij log P(i > j) - prior * sum_i s_i^2`` for each win matrix
    of ``wins`` (..., m, m: W_ij the votes for i against j, a tie half to each), by Newton's method on all at once,
    from ``start`` (a warm start, e.g. the point fit for bootstrap draws) or 0. With ``prior`` 0 (the plain maximum
    likelihood) the comparisons must connect every model and no model may win or lose all its battles, else there is
    no maximum; the strengths are then centred (mean 0), as the prior centres them."""
    wins = np.asarray(wins, dtype=float)
    m = wins.shape[-1]
    games = wins + np.swapaxes(wins, -1, -2)
    strength = np.zeros(wins.shape[:-1]) if start is None else np.array(np.broadcast_to(start, wins.shape[:-1]))
    eye = np.eye(m)
    gauge = np.full((m, m), 1.0 / m) if prior == 0 else 0.0  # fixes the free common shift (the gradient is _|_ 1)
    for _ in range(max_steps):
        p = expit(strength[..., :, None] - strength[..., None, :])
        gradient = (wins - games * p).sum(-1) - 2 * prior * strength
        curvature = games * p * (1 - p)
        information = curvature.sum(-1)[..., None] * eye - curvature + 2 * prior * eye + gauge
        step = np.linalg.solve(information, gradient[..., None])[..., 0]
        step /= np.maximum(1.0, np.abs(step).max(-1, keepdims=True) / MAX_STEP)
        strength = strength + step
        if np.abs(step).max(initial=0.0) < tolerance:
            break
    return strength - strength.mean(-1, keepdims=True)


def rank_step(strength: pd.Series, replicates: np.ndarray | None,
              confidence: float = ranking.CONFIDENCE) -> pd.DataFrame:
    """A rating's ranks by the rank rule of the leaderboard's tables (``benchmark.ranking``, rule
    ``ranking.RULE_VERSION``, LMArena's), so that the arena follows it: rank = 1 + the models significantly better
    (through chains, ``ranking.chains``), rank range from it to the number of models less those significantly worse
    (``ranking.rank_range``), tie groups, the models sharing a rank. Where the tables test two models on the prompts
    each wins (a sign test), a rating tests them on the votes: model j is significantly better than model i when its
    strength is higher and the Wald test of the difference, ``(s_j - s_i) / sd``, sd the standard deviation of
    ``s_j - s_i`` over the bootstrap draws (the maximum-likelihood strengths are asymptotically normal), rejects
    equality two-sided at (1 - ``confidence``) / pairs, every pair of the ranking at family-wise ``confidence``
    together (Bonferroni, as the tables). Without draws nothing is tested: no rank."""
    frame = pd.DataFrame(index=strength.index)
    places = np.full((4, len(strength)), np.nan)  # rank, rank_low, rank_high, tie_group
    m = len(strength)
    if replicates is not None and m >= 2:
        s = strength.to_numpy(float)
        spread = (replicates[:, :, None] - replicates[:, None, :]).std(axis=0)  # sd of s_j - s_i, j x i
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(spread > 0, (s[:, None] - s[None, :]) / spread, np.inf * np.sign(s[:, None] - s[None, :]))
        pairs = m * (m - 1) // 2
        above = ranking.chains((s[:, None] > s[None, :]) & (stats.norm.sf(z) < (1 - confidence) / (2 * pairs)))
        place, worst = ranking.rank_range(above)
        places[:] = place, place, worst, stats.rankdata(place, method="dense")
    for column, values in zip(("rank", "rank_low", "rank_high", "tie_group"), places):
        frame[column] = pd.array(values, dtype="Float64").astype("Int64")
    return frame


def _counts(votes: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Per model: the battles it was in, its decisive wins, ties and both-wrong votes (unweighted)."""
    sides = pd.concat([pd.DataFrame({"model": votes["model_a"], "won": votes["outcome"] == "a"}),
                       pd.DataFrame({"model": votes["model_b"], "won": votes["outcome"] == "b"})])
    outcome = pd.concat([votes["outcome"], votes["outcome"]])
    counts = pd.DataFrame({"votes": sides.groupby("model").size(),
                           "wins": sides.groupby("model")["won"].sum(),
                           "ties": (outcome == "tie").groupby(sides["model"].to_numpy()).sum(),
                           "both_wrong": (outcome == "both_bad").groupby(sides["model"].to_numpy()).sum()})
    counts = counts.reindex(models).fillna(0).astype(int)
    counts["both_wrong_share"] = counts["both_wrong"] / counts["votes"].where(counts["votes"] > 0)
    return counts


def check_votes(votes: pd.DataFrame) -> pd.DataFrame:
    """``votes`` if every row is a vote record (``benchmark.arena``), else ValueError saying which is not."""
    missing = {"model_a", "model_b", "outcome", "voter"} - set(votes.columns)
    if missing:
        raise ValueError(f"vote records need the columns {', '.join(sorted(missing))}")
    if bad := sorted(set(votes["outcome"]) - set(OUTCOMES)):
        raise ValueError(f"a vote's outcome is one of {', '.join(OUTCOMES)}, not {', '.join(map(repr, bad[:3]))}")
    if (votes["model_a"] == votes["model_b"]).any():
        raise ValueError("a battle's two images come from two different models")
    return votes


def rate(votes: pd.DataFrame, *, share: float = VOTER_SHARE, multiple: float = MEDIAN_MULTIPLE,
         replicates: int = REPLICATES, prior: float = PRIOR, rng: np.random.Generator | None = None) -> Rating:
    """Rate the models of ``votes`` (vote records of model battles): weights capping each voter at ``multiple``
    times the median voter's votes and at ``share`` of the ranking (``voter_weights``), the Bradley-Terry fit of the
    weighted pair counts (``fit``), ``replicates`` bootstrap draws over the votes (0: no intervals) and the ranks
    (``rank_step``)."""
    check_votes(votes)
    models = sorted(set(votes["model_a"]) | set(votes["model_b"]))
    counts = _counts(votes, models)
    n_votes, n_voters = len(votes), votes["voter"].nunique()
    rule = {"median_votes": float(votes["voter"].value_counts().median()) if n_votes else math.nan,
            "multiple": multiple, "share": share}
    weights = voter_weights(votes["voter"].to_numpy(), share, multiple)
    if not n_votes or weights is None or len(models) < 2:
        why = ("no votes" if not n_votes else "a ranking needs two models" if len(models) < 2 else
               f"{n_voters} voter{'s' * (n_voters != 1)}: at least {math.ceil(1 / share - 1e-9)} are needed so that none weighs more "
               f"than {share:.0%} of it")
        return Rating(counts, n_votes, n_voters, float("nan"), why, None, **rule)
    index = {model: i for i, model in enumerate(models)}
    a = votes["model_a"].map(index).to_numpy()
    b = votes["model_b"].map(index).to_numpy()
    cell_counts, contribution = _cells(a, b, votes["outcome"].to_numpy(), weights, len(models))
    m = len(models)
    point = fit((cell_counts @ contribution).reshape(m, m), prior=prior)
    draws = None
    if replicates:
        rng = rng if rng is not None else np.random.default_rng(SEED)
        resampled = rng.multinomial(n_votes, cell_counts / n_votes, size=replicates)
        draws = fit((resampled @ contribution).reshape(replicates, m, m), prior=prior, start=point)
    strength = pd.Series(point, index=models)
    rows = pd.DataFrame({"strength": strength, "elo": elo(point)}, index=models)
    low, high = ranking.interval(draws) if draws is not None else (np.full(m, np.nan), np.full(m, np.nan))
    rows["elo_low"], rows["elo_high"] = elo(low), elo(high)
    rows = rows.join(rank_step(strength, draws)).join(counts)
    per_voter = pd.Series(weights).groupby(votes["voter"].to_numpy()).sum()
    order = rows.sort_values(["rank", "strength"], ascending=[True, False]).index
    return Rating(rows.loc[order], n_votes, n_voters, float(per_voter.max() / per_voter.sum()), "",
                  None if draws is None else draws[:, [models.index(model) for model in order]], **rule)


def ratings(votes: pd.DataFrame, *, share: float = VOTER_SHARE, multiple: float = MEDIAN_MULTIPLE,
            replicates: int = REPLICATES, prior: float = PRIOR) -> dict[str, Rating]:
    """The ranking over every culture's votes (``OVERALL``) and one per culture (``votes``' ``culture``), each by
    ``rate`` on its own votes (so each has its own voters' median and caps) with the draws seeded ``SEED``."""
    options = {"share": share, "multiple": multiple, "replicates": replicates, "prior": prior}
    found = {OVERALL: rate(votes, **options)}
    for culture, part in sorted(votes.groupby("culture"), key=lambda item: str(item[0])):
        found[str(culture)] = rate(part, **options)
    return found

"""The ranking rules, in one pure module: per-prompt values in, ranked rows out (score, its 95% CI, n, refusal
rate, rank, rank interval, tie group, or why a row is not ranked).

Every view that ranks (the Overview's tables and its overall win rates, the Slices tab with its heatmap and charts,
the downloads and the API) hands these functions the values the catalog read; nothing here reads a store, runs SQL
or draws a page, as GenArena keeps its ratings in one module that takes battles and returns ratings with intervals
(``genarena/bt_elo.py``), so every view ranks alike.

A ranking rests on one prompt set, the protocol's (on a slice, the slice value's; for a metric about one label,
the prompts naming it), whoever submitted first and whatever each row answered. On it:

- **Withholding never pays.** A prompt a row did not answer (refused, missing) counts as the metric's worst value,
  the end of its declared range that is worse (``Quantity.worst``), so leaving a prompt out can only lower a score;
  or, where the track declares it (``Rule.unanswered = "not_ranked"``), and where the metric has no worse end or no
  declared range, the row is listed apart, not ranked. Each row shows its refusal rate (the share of the prompt set
  it left unanswered). Answered means a value, or none by the metric's own rule (VR where nothing was recognised),
  which is left out of that row's mean; the caller says which (``answered``): a value that is missing otherwise
  (a prompt-level value whose declared images were not all there, every image of a prompt failing, a row that
  holds nothing for this metric) is unanswered, so no choice of which images or values to send lifts a score.
- **score**: the mean over the prompt set (a metric made of other metrics' means, such as CRT from column means:
  ``Rule.combine`` of their means); **95% CI**: ``benchmark.stats.mean_ci`` over the per-prompt values, or for a
  combined metric the percentile interval of its paired bootstrap; **n**: the values the mean averages.
- **rank**: best first by the rule's direction, ties sharing the best rank; **rank interval**: the 2.5% and 97.5%
  order statistics of each row's rank over ``REPLICATES`` draws of the prompt set (the same draw for every row:
  a paired bootstrap), none below ``MIN_PROMPTS`` prompts (a percentile bootstrap over a handful covers poorly);
  **tie groups** (``tie_groups``): rows whose intervals all hold one common rank. Without a rank interval (fewer
  than ``MIN_PROMPTS`` prompts), neighbours in rank order whose paired difference's 95% interval
  (``benchmark.stats.difference_ci``) covers 0 are tied (``paired_ties``): they share the best rank of their group,
  and its span of ranks is their rank range, so a gap the data cannot tell from none never reads as rank 1 and 2.
- **win rates** (HEIM's mean win rate): ``track_win_rates`` per track, ``mean_win_rates`` across tracks.

A metric's kind (``KINDS``: a rate, a continuous score, a difference of two models') and declared range ride along
in its ``Rule``: the kind chooses the interval (Wilson's for a rate of events only, never for a continuous score
whose values happen to be 0 or 1) and no interval leaves the range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.stats import clip, difference_ci, mean_cis

REPLICATES = 1000  # bootstrap draws of a rank interval
SEED = 0  # the draws' seed: the same values always give the same intervals
# Below this many prompts no rank interval is given: a percentile bootstrap over fewer prompts is too narrow (its
# interval of a mean covers 0.83 of the nominal 0.95 at 5 values, 0.91 at 10: benchmarks/README.md, "coverage.py").
MIN_PROMPTS = 10
KINDS = ("rate", "continuous", "difference")  # a share of events, any other value, a difference of two models'
UNANSWERED = ("worst", "not_ranked")  # what an unanswered prompt does to a row (``Rule.unanswered``)


@dataclass(frozen=True)
class Quantity:
    """One per-prompt quantity a score is the mean of: its direction and declared range (None: not recorded)."""

    higher_is_better: bool = True
    low: float | None = None
    high: float | None = None

    @property
    def worst(self) -> float | None:
        """The value an unanswered prompt counts as: the declared range's worse end (None when not declared)."""
        return self.low if self.higher_is_better else self.high


@dataclass(frozen=True)
class Rule:
    """How one metric is ranked.

    ``inputs``: the per-prompt quantities its score is made of (one for a plain mean, the metric itself); with
    several, ``combine(*means)`` makes the score of their means over the prompt set (each a mean over the prompts
    where that input is defined). ``higher_is_better``: the score's direction; ``directed`` False when neither
    end is better (W1KP variability): rows are then ordered, not judged, and a row with unanswered prompts is
    listed apart, as nothing is a worst value. ``kind`` (``KINDS``) and ``low``/``high``, the score's declared
    range, choose its interval. ``unanswered`` (``UNANSWERED``): "worst", an unanswered prompt counts as each
    input's worst value; "not_ranked", a row that left any prompt unanswered is listed apart."""

    inputs: tuple[Quantity, ...] = (Quantity(),)
    combine: Callable[..., object] | None = None
    higher_is_better: bool = True
    directed: bool = True
    kind: str = "continuous"
    low: float | None = None
    high: float | None = None
    unanswered: str = "worst"

    def __post_init__(self):
        if self.kind not in KINDS or self.unanswered not in UNANSWERED:
            raise ValueError(f"a rule's kind is one of {KINDS} and unanswered one of {UNANSWERED}, not "
                             f"{self.kind!r}, {self.unanswered!r}")
        if len(self.inputs) != 1 and self.combine is None:
            raise ValueError("a rule of several inputs needs combine")


@dataclass
class Ranking:
    """``rule``'s ranking of some rows on one prompt set. ``rows`` (index: the rows' keys, in the order given):
    score, ci_low, ci_high, n, unanswered (prompts), refused (their share of the prompt set), rank, rank_low,
    rank_high, tie_group, not_ranked ('' when ranked, else why). ``replicates``: the ranked rows' scores in each
    bootstrap draw (draws x rows, nan for rows not ranked; None without intervals). ``prompts``: how many the
    prompt set holds. ``note``: what it rests on."""

    rows: pd.DataFrame
    replicates: np.ndarray | None
    prompts: int
    note: str


def rank(values: Sequence[pd.DataFrame], rule: Rule, answered: pd.DataFrame | None = None, *,
         intervals: bool = True, rng: np.random.Generator | None = None, source: str = "") -> Ranking:
    """Rank the rows (columns) of ``values`` on its prompt set (index) by ``rule``.

    ``values``: one frame per input of the rule, prompts x rows, on the same index and columns: the index is the
    whole prompt set (every prompt of it, answered or not), a cell the row's value on the prompt (nan: none).
    ``answered``: whether each row answered each prompt (default: where the first input has a value); an
    answered prompt without a value is undefined there (left out of the mean), an unanswered one counts as the
    input's worst value (``Rule.unanswered``). ``intervals``: with False, scores and ranks only (no CI, no
    bootstrap). ``rng``: the bootstrap's draws (default seeded ``SEED``). ``source``: which prompts these are, in
    words, for the note."""
    first = values[0]
    keys, prompts = list(first.columns), len(first.index)
    answered = first.notna() if answered is None else answered.reindex(index=first.index, columns=keys,
                                                                      fill_value=False)
    matrices = [v.reindex(index=first.index, columns=keys).to_numpy(float) for v in values]
    given = answered.to_numpy(bool)
    unanswered = prompts - given.sum(axis=0)
    why = np.array([_not_ranked(rule, int(u), prompts) for u in unanswered], dtype=object)
    imputed = [np.where(given, m, q.worst if q.worst is not None else np.nan) for m, q in zip(matrices, rule.inputs)]
    # A row listed apart for its unanswered prompts still shows its own mean over what it answered.
    own = [np.where(given, m, np.nan) for m in matrices]
    chosen = [np.where((why == "")[None, :], i, o) for i, o in zip(imputed, own)]
    score = _scores(chosen, rule.combine)
    why[(why == "") & np.isnan(score)] = "no value on these prompts (undefined: nothing it answered gives one)"
    ranked = why == ""
    n = (~np.isnan(chosen[0])).sum(axis=0) if rule.combine is None else np.where(ranked, prompts, given.sum(axis=0))
    replicates = None
    if intervals and prompts >= MIN_PROMPTS and ranked.any():
        rng = rng if rng is not None else np.random.default_rng(SEED)
        draws = rng.integers(0, prompts, size=(REPLICATES, prompts))
        weights = np.stack([np.bincount(d, minlength=prompts) for d in draws]).astype(float)
        replicates = np.full((REPLICATES, len(keys)), np.nan)
        replicates[:, ranked] = _scores([c[:, ranked] for c in chosen], rule.combine, weights)
    low, high = np.full(len(keys), np.nan), np.full(len(keys), np.nan)
    if intervals and rule.combine is None:
        low, high = (np.array(bound, dtype=float) for bound in zip(*_cis(chosen[0], rule))) if keys else (low, high)
    elif replicates is not None:  # a combined metric: its paired bootstrap's percentile interval
        low, high = interval(replicates)
    rows = pd.DataFrame({"score": score, "ci_low": low, "ci_high": high, "n": n, "unanswered": unanswered,
                         "refused": unanswered / prompts if prompts else np.nan, "not_ranked": why}, index=keys)
    rows["rank"] = rank_values(rows["score"], rule.higher_is_better, ranked=ranked)
    rank_low = rank_high = np.full(len(keys), np.nan)
    if replicates is not None:
        rank_low, rank_high = interval(replicate_ranks(replicates, rule.higher_is_better))
    rows["rank_low"] = pd.array(rank_low, dtype="Float64").astype("Int64")
    rows["rank_high"] = pd.array(rank_high, dtype="Float64").astype("Int64")
    order = rows.sort_values(["rank", "score"], ascending=[True, not rule.higher_is_better], na_position="last").index
    if replicates is None and intervals and rule.combine is None:
        paired_ties(rows, order, chosen[0])
    rows["tie_group"] = tie_groups(rows.loc[order, "rank_low"], rows.loc[order, "rank_high"]).reindex(rows.index)
    note = _note(rule, prompts, unanswered, why, replicates is not None, source)
    return Ranking(rows, replicates, prompts, note)


def paired_ties(rows: pd.DataFrame, order: pd.Index, matrix: np.ndarray) -> None:
    """Without a rank interval: reading ``order`` (rank order) down, a ranked row whose paired difference from the
    one above (``matrix``: prompts x rows, in ``rows``' order; on the prompts both have a value) has a 95% interval
    (``difference_ci``) holding 0 joins its group; a group of two or more shares its best rank, and rank_low and
    rank_high are the span of ranks it holds (two tied at the top: rank 1, range 1-2). In place, on ``rows``."""
    position = {key: j for j, key in enumerate(rows.index)}
    ranked = [key for key in order if rows.at[key, "not_ranked"] == "" and pd.notna(rows.at[key, "rank"])]
    groups: list[list] = []
    for key in ranked:
        if groups:
            above = matrix[:, position[groups[-1][-1]]] - matrix[:, position[key]]
            # Rounded: a subtraction's float noise (0.75 - 0.55 = 0.19999999999999996) is no spread to bootstrap.
            low, high = difference_ci(np.round(above[~np.isnan(above)], 12))
            if not np.isnan(low) and low <= 0 <= high:
                groups[-1].append(key)
                continue
        groups.append([key])
    for group in (g for g in groups if len(g) > 1):
        best = int(rows.loc[group, "rank"].min())
        rows.loc[group, "rank"] = best
        rows.loc[group, "rank_low"], rows.loc[group, "rank_high"] = best, best + len(group) - 1


def _not_ranked(rule: Rule, unanswered: int, prompts: int) -> str:
    """Why a row that left ``unanswered`` of ``prompts`` unanswered is not ranked ('' when it is)."""
    if prompts == 0:
        return "no prompt to rank on"
    if unanswered == prompts:
        return f"answered none of the {prompts} prompts"
    if not unanswered:
        return ""
    left = f"left {unanswered} of the {prompts} prompts unanswered"
    if not rule.directed:
        return f"{left}: neither end of this metric is better, so nothing is a worst value to count them as"
    if rule.unanswered == "not_ranked":
        return f"{left}: this track ranks complete answers only"
    if any(q.worst is None for q in rule.inputs):
        return f"{left}, and this metric's range is not recorded: no worst value to count them as"
    return ""


def _scores(matrices: list[np.ndarray], combine, weights: np.ndarray | None = None) -> np.ndarray:
    """Each row's score: the (weighted) mean of each input over its defined prompts, combined."""
    weights = np.ones((1, matrices[0].shape[0])) if weights is None else weights
    means = [_means(m, weights) for m in matrices]
    scores = means[0] if combine is None else np.asarray(combine(*means), dtype=float)
    return scores[0] if scores.shape[0] == 1 and weights.shape[0] == 1 else scores


def _means(matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted means of each column of ``matrix`` (prompts x rows) with ``weights`` (draws x prompts: how often
    each draw takes each prompt), leaving out its nan cells: draws x rows, nan where a draw takes none."""
    present = ~np.isnan(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ np.where(present, matrix, 0.0)) / (weights @ present)


def _cis(matrix: np.ndarray, rule: Rule) -> list[tuple[float, float]]:
    """The 95% CI of the mean of each column (nan cells left out), by the metric's kind, inside its range."""
    if rule.kind == "difference":
        span = None if rule.low is None or rule.high is None else rule.high - rule.low
        return [clip(*difference_ci(column[~np.isnan(column)]), (-span, span) if span is not None else (None, None))
                for column in matrix.T]
    return mean_cis(matrix, bounds=(rule.low, rule.high), kind=rule.kind)


def _note(rule: Rule, prompts: int, unanswered: np.ndarray, why: np.ndarray, with_intervals: bool,
          source: str) -> str:
    """What a ranking rests on, in words (no sentence-final period: the caller joins notes)."""
    said = [f"every row's score, rank and interval come from the same {prompts} prompts"
            + (f" ({source})" if source else "")]
    some = int((unanswered > 0).sum())
    if some:
        counted = int(((unanswered > 0) & (why == "")).sum())
        said.append(f"{some} row(s) left some unanswered" + (
            f"; in {counted} an unanswered prompt counts as the metric's worst value "
            f"({', '.join(f'{q.worst:g}' for q in rule.inputs if q.worst is not None)})" if counted else ""))
    apart = int((why != "").sum())
    if apart:
        said.append(f"{apart} row(s) listed apart, not ranked (each says why)")
    if prompts < MIN_PROMPTS:
        said.append(f"with fewer than {MIN_PROMPTS} prompts there is no rank interval: neighbours whose paired "
                    "difference's 95% interval holds 0 share a rank, their range the ranks they span")
    return "; ".join(said)


def rank_values(values: pd.Series, higher_is_better: bool, exceeds: pd.Series | None = None,
                ranked: np.ndarray | pd.Series | None = None) -> pd.Series:
    """Ranks of ``values`` among the ``ranked`` ones (default all; others get none), best first: 1 + the number of
    them known to be better, so ties share the best rank. A plain null has no rank.

    ``exceeds``: for a right-censored value (stored as null, e.g. a W1KP reusability never reached within the k
    measured, shown "> k"), the bound k it is known to exceed; nan elsewhere. All that is known of it is that it
    lies above k, at any size: higher being better, it is better than a measured v only when k >= v, and nothing
    is known to be better than it, neither a measured value (it may be larger) nor another censored one ("> 10" and
    "> 20" may lie either way); lower being better, a measured v <= k is better than it and it is better than
    nothing. So "> 10" ranks above 8 and level with 15 (it may be 12 or 30) and with "> 20", while 15 ranks below
    "> 20". Without censored values these are the usual ranks (``method="min"``)."""
    value = values.astype(float).to_numpy()
    bound = np.full(len(value), np.nan) if exceeds is None else \
        pd.Series(exceeds, index=values.index).astype(float).to_numpy()
    censored = np.isnan(value) & ~np.isnan(bound)
    keep = np.ones(len(value), bool) if ranked is None else np.asarray(ranked, bool).copy()
    keep &= ~np.isnan(value) | censored
    measured = ~np.isnan(value)
    with np.errstate(invalid="ignore"):
        if higher_is_better:  # better[i, j]: i is known to be better than j
            better = (measured[:, None] & measured[None, :] & (value[:, None] > value[None, :])) | \
                (censored[:, None] & measured[None, :] & (bound[:, None] >= value[None, :]))
        else:
            better = (measured[:, None] & measured[None, :] & (value[:, None] < value[None, :])) | \
                (measured[:, None] & censored[None, :] & (value[:, None] <= bound[None, :]))
    ranks = 1 + (better & keep[:, None]).sum(axis=0)
    return pd.Series(np.where(keep, ranks, np.nan), index=values.index).astype("Float64").astype("Int64")


def interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each column: the 2.5% and 97.5% order statistics (numpy's 'lower' / 'higher')."""
    low, high = np.full(samples.shape[1], np.nan), np.full(samples.shape[1], np.nan)
    some = ~np.isnan(samples).all(axis=0)  # a column with no value in any replicate has no interval
    low[some] = np.nanquantile(samples[:, some], 0.025, axis=0, method="lower")
    high[some] = np.nanquantile(samples[:, some], 0.975, axis=0, method="higher")
    return low, high


def replicate_ranks(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Per replicate (row of ``values``), each model's rank: 1 + the models strictly better; null stays null."""
    key = np.where(np.isnan(values), np.nan, -values if higher_is_better else values)
    ranks = stats.rankdata(key, axis=1, method="min", nan_policy="omit")
    return np.where(np.isnan(values), np.nan, ranks)


def tie_groups(low: pd.Series, high: pd.Series) -> pd.Series:
    """Rows in rank order -> their tie group (1, 2, ...): reading down, a group takes the next row while some rank
    lies inside every interval of the group and that row's (the largest low bound <= the smallest high bound);
    a row whose interval would leave no rank common to all starts the next group. So every group is a set of
    models that may all hold one same rank, and intervals 1-2, 2-3, 3-4, 4-5 make two groups ({1-2, 2-3} share
    rank 2, {3-4, 4-5} rank 4), not one chain. Rows without an interval have none."""
    groups, group, top, bottom = [], 0, np.inf, -np.inf  # the ranks common to the current group: [top, bottom]
    for lo, hi in zip(low, high):
        if pd.isna(lo):
            groups.append(pd.NA)
            continue
        if max(top, lo) > min(bottom, hi):  # always for the first row: no group yet, no common rank
            group, top, bottom = group + 1, lo, hi
        else:
            top, bottom = max(top, lo), min(bottom, hi)
        groups.append(group)
    return pd.Series(groups, index=low.index, dtype="Int64")


def track_win_rates(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Replicates x models -> each model's win rate in each replicate (HEIM): the share of the other models with
    a value it beats, ties counting half. A null value leaves the comparison: it has no win rate and is not
    counted in the others' denominators; with fewer than two values, none has one."""
    key = np.where(np.isnan(values), np.nan, values if higher_is_better else -values)
    m = (~np.isnan(key)).sum(axis=1, keepdims=True)
    below = stats.rankdata(key, axis=1, method="average", nan_policy="omit") - 1  # beaten + ties / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = below / (m - 1)
    return np.where(np.isnan(key) | (m < 2), np.nan, rates)


def mean_win_rates(point: dict[str, np.ndarray], replicates: dict[str, np.ndarray | None]) -> pd.DataFrame:
    """HEIM's mean win rate over tracks: per model (the arrays' positions), ``win_rate`` the mean of its win rates
    over the tracks it has one on (``point``: track -> models' win rates), ``tracks`` their count and, when every
    track has replicates (``replicates``: track -> draws x models win rates), the 95% intervals of the mean win
    rate (win_low, win_high) and of the rank (rank_low, rank_high) over the draws, else nan."""
    rates = np.stack(list(point.values()), axis=1) if point else np.empty((0, 0))
    counted = (~np.isnan(rates)).sum(axis=1)
    with np.errstate(invalid="ignore"):
        frame = pd.DataFrame({"win_rate": np.where(counted > 0, np.nansum(rates, axis=1) / np.maximum(counted, 1),
                                                   np.nan), "tracks": counted})
    frame[["win_low", "win_high", "rank_low", "rank_high"]] = np.nan
    if point and all(r is not None for r in replicates.values()):
        stacked = np.stack(list(replicates.values()))  # tracks x draws x models
        counts = (~np.isnan(stacked)).sum(axis=0)
        with np.errstate(invalid="ignore"):
            means = np.where(counts > 0, np.nansum(stacked, axis=0) / np.maximum(counts, 1), np.nan)
        frame["win_low"], frame["win_high"] = interval(means)
        frame["rank_low"], frame["rank_high"] = interval(replicate_ranks(means, True))
    return frame

"""The ranking rules, in one pure module: per-prompt values in, ranked rows out (score, its 95% CI, n, refusal
rate, rank, rank range, or why a row is not ranked) and the paired comparisons behind them.

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
  it left unanswered); one that left more than half unanswered is flagged (``MOSTLY_REFUSED``). Answered means a
  value, or none by the metric's own rule (VR where nothing was recognised), which is left out of that row's mean,
  never counted as worst; the caller says which (``answered``): a value that is missing otherwise (a prompt-level
  value whose declared images were not all there, every image of a prompt failing, a row that holds nothing for this
  metric) is unanswered, so no choice of which images or values to send lifts a score.
- **score**: the mean over the prompt set (a metric made of other metrics' means, such as CRT from column means:
  ``Rule.combine`` of their means); **95% CI**: ``benchmark.stats.mean_ci`` over the per-prompt values, or for a
  combined metric the percentile interval of a paired bootstrap over the prompts (``REPLICATES`` draws); a side
  the prompts cannot bound is infinite ("not bounded by n prompts"), never the range's end; **n**: the values the
  mean averages.
- **Too few prompts to rank**: below ``MIN_PROMPTS`` prompts no row is ranked (values shown, never an order).
- **rank** (rank rule ``RULE_VERSION``, LMArena's): 1 + the number of rows significantly better. Two rows are
  compared prompt by prompt (``Comparisons``): on each prompt both have a value on, one wins, or they tie; a row
  is significantly better than another when its score is better and the exact sign test (``benchmark.stats.
  sign_test``) of its wins against its losses rejects equality at the family-wise 95% of every pair of the
  ranking (Bonferroni: each two-sided test at 5% / pairs); a row above one that is significantly better than
  another is above that one too (chains of significant comparisons, which go down the scores), so that no two
  rows at one rank ever differ significantly. **rank range**: from 1 + the rows above to the number ranked less
  the rows below, the ranks those comparisons allow (the form Mogstad, Romano, Shaikh & Wilhelm give a rank's
  confidence set from pairwise tests: "Inference for ranks", REStud 91(1), 2024); rows sharing a rank are a
  **tie group**. Why this test: the sign test and
  Bonferroni each decide a pair on that pair's prompts alone, and a row that lowers its own values only adds to
  another's wins over it, so refusing can never make a lead over it insignificant (a t interval or a bootstrap
  widens with the spread a worst value adds; Holm's step-down lets one pair's p-value move another's decision).
- **win rates** (HEIM's mean win rate) from the same comparisons: a row beats those significantly worse, ties
  (counting half) with those it cannot be told from (``Comparisons.win_rates``), with the range of win rates its
  rank range allows; ``mean_win_rates`` across tracks, ranked by the same rule on those ranges.

A metric's kind (``KINDS``: a rate, a continuous score, a difference of two models') and declared range ride along
in its ``Rule``: the kind chooses the interval (Wilson's for a rate of events only, never for a continuous score
whose values happen to be 0 or 1) and no bounded side of an interval leaves the range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.stats import clip, difference_ci, mean_cis, sign_test_rejects

REPLICATES = 1000  # bootstrap draws of a combined metric's CI
SEED = 0  # the draws' seed: the same values always give the same intervals
# Below this many prompts nothing is ranked: no pair of 6 models can be told apart at 95% over their 15 pairs (a
# sign test's smallest p-value on n prompts is 2^-n, and Bonferroni asks 0.05 / 30 of each side: n >= 10), and
# the CIs beside need 5 (``benchmark.stats.MIN_CI_N``).
MIN_PROMPTS = 10
CONFIDENCE = 0.95  # family-wise, over every pair of one ranking
RULE_VERSION = 2  # of the rank rule: 1, a rank per distinct score (ties by intervals); 2, LMArena's (issue 49)
MOSTLY_REFUSED = 0.5  # a row that left more than this share of the prompt set unanswered is flagged
TOO_FEW = "too few prompts to rank"
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
class Comparisons:
    """Every pair of a ranking's ranked rows, prompt by prompt: ``wins[j, i]``, the prompts on which row j's value is
    better than row i's (on prompts where both have one; equal values are ties, counting for neither), ``scores``
    their scores, in the same order. ``better`` applies the rank rule's test, ``ranks`` and ``win_rates`` what
    follows from it."""

    wins: np.ndarray
    scores: np.ndarray
    higher_is_better: bool

    def better(self, confidence: float = CONFIDENCE) -> np.ndarray:
        """above[j, i]: row j is above row i. Directly when j's score is better and the sign test of j's wins over
        i against its losses (``benchmark.stats.sign_test``) is below (1 - ``confidence``) / (2 x pairs), so that
        every pair of the ranking is decided at family-wise ``confidence`` (Bonferroni); and through chains of such
        comparisons (transitive closure; each link goes down the scores, so no cycle)."""
        m = len(self.scores)
        pairs = m * (m - 1) // 2
        if not pairs:
            return np.zeros((m, m), dtype=bool)
        key = np.round(self.scores if self.higher_is_better else -self.scores, 12)
        return chains(sign_test_rejects(self.wins, self.wins.T, (1 - confidence) / (2 * pairs))
                      & (key[:, None] > key[None, :]))

    def ranks(self, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
        """Each row's rank and the worst end of its rank range (``rank_range``)."""
        return rank_range(self.better(confidence))

    def win_rates(self, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's win rate from these comparisons (HEIM's, a tie counting half): the rows it is above count as
        beaten, those neither above nor below it half; and its range, from beating only those to beating every row
        not above it (the win rates its rank range allows). nan with fewer than two rows."""
        above = self.better(confidence)
        others = len(self.scores) - 1
        if others < 1:
            return (np.full(len(self.scores), np.nan),) * 3
        beaten, beating = above.sum(axis=1), above.sum(axis=0)
        return ((beaten + (others - beaten - beating) / 2) / others, beaten / others, (others - beating) / others)


def chains(above: np.ndarray) -> np.ndarray:
    """``above`` (above[j, i]: row j is significantly better than row i) closed under chains: j is above i when a
    chain of such comparisons leads from j to i (the transitive closure; each link goes down the scores, so no
    cycle)."""
    while True:  # add the pairs two steps apart until none is new
        reach = above | ((above.astype(np.float32) @ above.astype(np.float32)) > 0)
        if (reach == above).all():
            return above
        above = reach


def rank_range(above: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From ``above`` (closed under chains): each row's rank, 1 + the rows above it (LMArena's rule, its rank range's
    best end), and the worst end of its rank range, the number of rows less the rows below it."""
    return 1 + above.sum(axis=0), len(above) - above.sum(axis=1)


def compare(matrix: np.ndarray, scores: np.ndarray, higher_is_better: bool) -> Comparisons:
    """The ``Comparisons`` of the columns of ``matrix`` (prompts x rows: each row's value on each prompt, nan where
    it has none), with their ``scores``. Values are compared rounded to 12 decimals, so that float noise (0.75 -
    0.55 = 0.19999999999999996) is no win. One prompt at a time (rows x rows comparisons each, nan comparing False:
    no win either way), counted in bytes and added up every 255 prompts: the cost is prompts x rows^2 byte steps."""
    key = np.round(matrix if higher_is_better else -matrix, 12)
    rows = key.shape[1]
    wins, count = np.zeros((rows, rows), dtype=np.int64), np.zeros((rows, rows), dtype=np.uint8)
    won = np.empty((rows, rows), dtype=bool)
    for prompt, values in enumerate(key, start=1):
        np.greater(values[:, None], values[None, :], out=won)
        count += won.view(np.uint8)
        if prompt % 255 == 0:
            wins += count
            count[:] = 0
    return Comparisons(wins + count, np.asarray(scores, dtype=float), higher_is_better)


@dataclass
class Ranking:
    """``rule``'s ranking of some rows on one prompt set. ``rows`` (index: the rows' keys, in the order given):
    score, ci_low, ci_high (infinite on a side the prompts cannot bound), n, unanswered (prompts), refused (their
    share of the prompt set), rank, rank_low, rank_high, tie_group (rows sharing a rank), not_ranked ('' when
    ranked, else why). ``comparisons``: the ranked rows' (in the rows' order; None when none is ranked).
    ``prompts``: how many the prompt set holds. ``note``: what it rests on."""

    rows: pd.DataFrame
    comparisons: Comparisons | None
    prompts: int
    note: str

    @property
    def ranked(self) -> pd.Index:
        """The keys of the ranked rows, in the order of ``comparisons``."""
        return self.rows.index[self.rows["not_ranked"].eq("")]


def rank(values: Sequence[pd.DataFrame], rule: Rule, answered: pd.DataFrame | None = None, *,
         intervals: bool = True, ranks: bool = True, rng: np.random.Generator | None = None,
         source: str = "") -> Ranking:
    """Rank the rows (columns) of ``values`` on its prompt set (index) by ``rule``.

    ``values``: one frame per input of the rule, prompts x rows, on the same index and columns: the index is the
    whole prompt set (every prompt of it, answered or not), a cell the row's value on the prompt (nan: none).
    ``answered``: whether each row answered each prompt (default: where the first input has a value); an
    answered prompt without a value is undefined there (left out of the mean), an unanswered one counts as the
    input's worst value (``Rule.unanswered``). ``intervals``: with False, no CI (scores, ranks and rank ranges only);
    ``ranks``: with False, no comparison either (scores only: a heatmap's cells). ``rng``: a combined metric's bootstrap
    draws (default seeded ``SEED``). ``source``: which prompts these are, in words, for the note."""
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
    n = (~np.isnan(chosen[0])).sum(axis=0) if rule.combine is None else np.where(why == "", prompts,
                                                                                 given.sum(axis=0))
    if prompts < MIN_PROMPTS:
        why[why == ""] = f"{TOO_FEW} ({prompts}; a ranking needs {MIN_PROMPTS})"
    ranked = why == ""
    low, high = np.full(len(keys), np.nan), np.full(len(keys), np.nan)
    if intervals and rule.combine is None:
        low, high = (np.array(bound, dtype=float) for bound in zip(*_cis(chosen[0], rule))) if keys else (low, high)
    elif intervals and prompts >= MIN_PROMPTS:  # a combined metric: a paired bootstrap's percentile interval
        low, high = interval(_replicates(chosen, rule.combine, prompts, rng))
    rows = pd.DataFrame({"score": score, "ci_low": low, "ci_high": high, "n": n, "unanswered": unanswered,
                         "refused": unanswered / prompts if prompts else np.nan, "not_ranked": why}, index=keys)
    places = np.full((4, len(keys)), np.nan)  # rank, rank_low, rank_high, tie_group
    comparisons = None
    if ranks and ranked.any():
        per_prompt = [c[:, ranked] for c in chosen]
        per_prompt = per_prompt[0] if rule.combine is None else np.asarray(rule.combine(*per_prompt), dtype=float)
        comparisons = compare(per_prompt, score[ranked], rule.higher_is_better)
        place, worst = comparisons.ranks()
        places[:, ranked] = place, place, worst, stats.rankdata(place, method="dense")
    for column, place_values in zip(("rank", "rank_low", "rank_high", "tie_group"), places):
        rows[column] = pd.array(place_values, dtype="Float64").astype("Int64")
    return Ranking(rows, comparisons, prompts, _note(rule, prompts, unanswered, why, source))


def _replicates(chosen: list[np.ndarray], combine, prompts: int, rng: np.random.Generator | None) -> np.ndarray:
    """Each row's combined score in ``REPLICATES`` bootstrap draws of the prompts (the same draw for every row):
    draws x rows."""
    rng = rng if rng is not None else np.random.default_rng(SEED)
    draws = rng.integers(0, prompts, size=(REPLICATES, prompts))
    weights = np.stack([np.bincount(d, minlength=prompts) for d in draws]).astype(float)
    return _scores(chosen, combine, weights)


def _not_ranked(rule: Rule, unanswered: int, prompts: int) -> str:
    """Why a row that left ``unanswered`` of ``prompts`` unanswered is not ranked ('' when it is). A row that
    answered none of them (a slice value refused whole) is ranked like any other, at the worst value on each."""
    if prompts == 0:
        return "no prompt to rank on"
    if not unanswered:
        return ""
    left = (f"left {unanswered} of the {prompts} prompts unanswered" if unanswered < prompts else
            f"answered none of the {prompts} prompts")
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


def _note(rule: Rule, prompts: int, unanswered: np.ndarray, why: np.ndarray, source: str) -> str:
    """What a ranking rests on, in words (no sentence-final period: the caller joins notes)."""
    said = [f"every row's score, CI, rank and rank range come from the same {prompts} prompts"
            + (f" ({source})" if source else "")]
    some = int((unanswered > 0).sum())
    if some:
        counted = int(((unanswered > 0) & (why == "")).sum())
        said.append(f"{some} row{'' if some == 1 else 's'} left some unanswered" + (
            f"; in {counted} an unanswered prompt counts as the metric's worst value "
            f"({', '.join(f'{q.worst:g}' for q in rule.inputs if q.worst is not None)})" if counted else ""))
    mostly = int((unanswered > MOSTLY_REFUSED * prompts).sum()) if prompts else 0
    if mostly:
        said.append(f"{mostly} row{'' if mostly == 1 else 's'} mostly refused (more than {MOSTLY_REFUSED:.0%} of the "
                    "prompts unanswered): "
                    "their scores are mostly the worst value")
    if prompts < MIN_PROMPTS:
        said.append(f"{TOO_FEW}: below {MIN_PROMPTS} prompts the values are shown, never an order")
    elif (why == "").any():
        said.append(f"rank rule {RULE_VERSION}: a model's rank is 1 + the models significantly better on these "
                    f"prompts (sign test, {CONFIDENCE:.0%} over every pair), its range the ranks those comparisons "
                    "allow")
    apart = int(((why != "") & ~np.char.startswith(why.astype(str), TOO_FEW)).sum())
    if apart:
        said.append(f"{apart} row{'' if apart == 1 else 's'} listed apart, not ranked (each says why)")
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


def overall_confidence(tracks: int) -> float:
    """The confidence of each track's comparisons in a mean over ``tracks`` of them: ``CONFIDENCE`` shared out
    (Bonferroni over the tracks), so that every track's ranges hold together with ``CONFIDENCE``, and the mean of
    those ranges holds the mean win rate."""
    return 1 - (1 - CONFIDENCE) / max(tracks, 1)


def mean_win_rates(rates: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray | None]],
                   ranked: np.ndarray) -> pd.DataFrame:
    """HEIM's mean win rate over tracks, per model (the arrays' positions): ``win_rate`` the mean of its win rates
    over the tracks it has one on (``rates``: track -> the models' win rates and, from that track's comparisons at
    ``overall_confidence``, the low and high ends of their ranges, None where the track has no comparisons),
    ``tracks`` their count; when every track has ranges, win_low and win_high, the means of those ends. Among the
    ``ranked`` models, the rank by the same rule as a track's: 1 + the models whose lowest mean win rate is above
    its highest (LMArena's rule on intervals), down to (rank_high) the number ranked less those whose highest is
    below its lowest; without ranges, the order of the win rates (ties sharing the best rank), with no range."""
    stacked = [np.stack([r[k] for r in rates.values()], axis=1) if rates and all(r[k] is not None for r in
               rates.values()) else None for k in range(3)]
    point = stacked[0] if stacked[0] is not None else np.empty((len(ranked), 0))
    counted = (~np.isnan(point)).sum(axis=1)

    def mean(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.where(counted > 0, np.nansum(values, axis=1) / np.maximum(counted, 1), np.nan)

    frame = pd.DataFrame({"win_rate": mean(point), "tracks": counted})
    keep = np.asarray(ranked, bool) & frame["win_rate"].notna().to_numpy()
    frame["win_low"], frame["win_high"] = (np.where(keep, mean(s), np.nan) if s is not None else np.nan
                                           for s in stacked[1:])
    frame[["rank", "rank_low", "rank_high"]] = np.nan
    if stacked[1] is not None:
        low, high = frame.loc[keep, "win_low"].to_numpy(), frame.loc[keep, "win_high"].to_numpy()
        frame.loc[keep, "rank"] = frame.loc[keep, "rank_low"] = 1 + (low[:, None] > high[None, :]).sum(axis=0)
        frame.loc[keep, "rank_high"] = keep.sum() - (high[None, :] < low[:, None]).sum(axis=1)
    else:
        frame.loc[keep, "rank"] = frame.loc[keep, "win_rate"].rank(ascending=False, method="min")
    return frame

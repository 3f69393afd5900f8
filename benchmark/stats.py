"""Statistics shared by all tracks: CIs of means and of paired differences, paired tests, Holm correction.

The CRT paper (arXiv:2511.11435, Sec. 5) compares models with two-sided Wilcoxon
signed-rank tests on per-reference pairs, Holm-corrected, and reports bootstrap
95% CIs of mean paired differences; CultureLens runs the same tests on per-prompt
values for every track, with intervals chosen by their measured coverage at small n
(``benchmarks/coverage.py``, figures in ``benchmarks/README.md``):

- a mean of values (``mean_ci``), chosen by what the values are (the metric's declared kind), never by the values
  that happened to occur: Wilson's with continuity correction for a rate whose values are all 0 or 1 (events),
  else the percentile-t
  bootstrap with 1% in each tail, because Student-t undercovers on skewed values (exponential 0.89 at n = 5,
  lognormal 0.84 to 0.92 from n = 5 to 50) and the percentile-t at 2.5% tails still does on the lognormal (0.89
  to 0.93);
- a mean of paired differences (``difference_ci``): Bonett & Price's adjusted interval for differences that are
  all -c, 0 or c (two models' 0/1 events on the same prompts, c = 1; shares of 10 images differing by one image,
  c = 0.1), else as a mean. Wilson's interval is for a proportion only: given such differences it covered as
  little as 0.40 at n = 10, and Student-t 0.23 at n = 5.

Holm's correction runs over every test of one comparison (every pair of every metric), not within a metric.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pandas as pd
from scipy import stats

# Below this many values no interval is given: see mean_ci and benchmarks/README.md ("coverage.py").
MIN_CI_N = 5
RESAMPLES = 1999  # draws of the percentile-t bootstrap: 20 beyond each 1% tail
TAIL_SHARE = 0.4  # the percentile-t's tails are this share of the nominal ones: 1% each for a 95% interval
SEED = 0  # the percentile-t's draws: the same values always give the same interval


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval with continuity correction for a proportion from ``successes`` of ``n`` independent
    0/1 trials (Newcombe 1998, "Two-sided confidence intervals for the single proportion", Stat. Med. 17, 857-872,
    method 4).

    With z the two-sided normal quantile, p = successes / n and q = 1 - p:
    low = (2np + z^2 - 1 - z sqrt(z^2 - 2 - 1/n + 4p(nq + 1))) / (2(n + z^2)), 0 at 0 successes;
    high = (2np + z^2 + 1 + z sqrt(z^2 + 2 - 1/n + 4p(nq - 1))) / (2(n + z^2)), 1 at n successes.
    Wilson's interval without the correction undercovers where events are rare or nearly certain (0.84 to 0.92 at
    n = 5 to 200, exact binomial coverage: ``benchmarks/coverage.py``); with it the coverage is at least 0.95 at
    every p on a 0.005 grid from n = 5 to 200. The bounds never pass the share itself (rounding).
    """
    z = stats.norm.ppf(0.5 + confidence / 2)
    share, rest = successes / n, 1 - successes / n
    scale = 2 * (n + z * z)
    low = (2 * n * share + z * z - 1 - z * np.sqrt(max(z * z - 2 - 1 / n + 4 * share * (n * rest + 1), 0.0))) / scale
    high = (2 * n * share + z * z + 1 + z * np.sqrt(max(z * z + 2 - 1 / n + 4 * share * (n * rest - 1), 0.0))) / scale
    low = 0.0 if successes == 0 else min(max(low, 0.0), share)
    high = 1.0 if successes == n else max(min(high, 1.0), share)
    return float(low), float(high)


def mean_ci(values: np.ndarray, *, confidence: float = 0.95,
            bounds: tuple[float | None, float | None] = (None, None), kind: str = "continuous") -> tuple[float, float]:
    """Confidence interval of the mean of independent ``values`` (e.g. one value per prompt), inside ``bounds``
    (the values' declared range, when known: a mean cannot leave it, and no bounded side does either).
    ``kind``: what the values are (``benchmark.metrics.base.MetricInfo.kind``): "rate", a share of events;
    "continuous", any other score. A side the values cannot bound is infinite (-inf below, inf above; a page shows
    "not bounded by n prompts"), never the range's end shown as if the values had put it there.

    - fewer than ``MIN_CI_N`` values: (nan, nan), no interval;
    - a rate whose every value is 0 or 1 (events, e.g. "artifact recognised" per image): Wilson's score interval
      with continuity correction (``wilson_interval``). A continuous score whose values all happen to be 0 (CLIPScore
      of images unlike their prompts) is not a proportion, and gets the rules below. Differences between two
      models go to ``difference_ci``;
    - every value equal (no spread in the sample, e.g. a row refused on every prompt, each counted at the worst
      value): nothing bounds the mean but the range, so a side is that value where it is the range's end on that
      side (a mean of values in the range cannot pass it), else unbounded;
    - otherwise the percentile-t (studentized) bootstrap (Efron & Tibshirani 1993, "An Introduction to the
      Bootstrap", ch. 12.5; ``percentile_t``) with ``TAIL_SHARE`` of the nominal tails.

    Chosen by measured coverage (``benchmarks/coverage.py``): Student-t covers normal and [0, 1] (beta) values but
    not skewed ones (exponential 0.89 at n = 5; lognormal 0.84 to 0.92 at n = 5 to 50), and the percentile and
    BCa bootstraps cover less than t at small n (both resample the sample's own spread and cannot reach past its
    range). The percentile-t learns the skew from the sample; at 2.5% tails it still undercovers the lognormal
    (0.89 at n = 5, 0.91 at n = 20), because a small sample rarely holds its long tail, and at 1% tails it covers
    0.94 or more on every kind measured at n = 5 to 50, wider than t by the table's factor on symmetric values.
    On heavily tied values (shares of a few seeds, n <= 10; a row mostly refused) more than 1% of the resamples
    may have no spread, and a side of the interval is then unbounded: the sample cannot bound the mean there.
    """
    return mean_cis(np.asarray(values, dtype=np.float64)[:, None], confidence=confidence, bounds=bounds,
                    kind=kind)[0]


def mean_cis(columns: np.ndarray, *, confidence: float = 0.95,
             bounds: tuple[float | None, float | None] = (None, None),
             kind: str = "continuous") -> list[tuple[float, float]]:
    """``mean_ci`` of each column of ``columns`` (values x samples; nan cells left out), the complete columns'
    percentile-t resamples taken in one product (a ranking's rows: one interval each)."""
    columns = np.asarray(columns, dtype=np.float64)
    out: list[tuple[float, float]] = [(float("nan"), float("nan"))] * columns.shape[1]
    floor, ceiling = bounds
    bootstrapped = []
    for j in range(columns.shape[1]):
        values = columns[:, j][~np.isnan(columns[:, j])]
        if values.size < MIN_CI_N:
            continue
        if kind == "rate" and np.all((values == 0) | (values == 1)):
            out[j] = wilson_interval(int(values.sum()), values.size, confidence=confidence)
        elif np.all(values == values[0]):
            value = float(values[0])
            out[j] = (value if floor is not None and value <= floor else -np.inf,
                      value if ceiling is not None and value >= ceiling else np.inf)
        else:
            bootstrapped.append(j)
    complete = [j for j in bootstrapped if not np.isnan(columns[:, j]).any()]
    if complete:
        for j, interval in zip(complete, _percentile_t(columns[:, complete], confidence)):
            out[j] = interval
    for j in (j for j in bootstrapped if j not in set(complete)):
        out[j] = _percentile_t(columns[:, [j]][~np.isnan(columns[:, [j]])][:, None], confidence)[0]
    return [clip(low, high, bounds) for low, high in out]


def clip(low: float, high: float, bounds: tuple[float | None, float | None]) -> tuple[float, float]:
    """An interval kept inside a metric's declared range ``bounds`` (None: that side open): a mean of values in the
    range cannot leave it, so neither does a bounded side of its interval. An unbounded side (infinite: the sample
    cannot bound the mean there) stays unbounded, so that it is never shown as the range's end."""
    floor, ceiling = bounds
    if floor is not None:
        low, high = (max(side, floor) if np.isfinite(side) else side for side in (low, high))
    if ceiling is not None:
        low, high = (min(side, ceiling) if np.isfinite(side) else side for side in (low, high))
    return low, high


def percentile_t(values: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile-t interval of a mean of ``values`` (``_percentile_t``)."""
    return _percentile_t(np.asarray(values, dtype=np.float64)[:, None], confidence)[0]


def _percentile_t(columns: np.ndarray, confidence: float) -> list[tuple[float, float]]:
    """The percentile-t interval of the mean of each column (Efron & Tibshirani 1993, ch. 12.5, Eq. 12.22): with
    m and se a sample's mean and standard error, and t* = (m* - m) / se* over ``RESAMPLES`` bootstrap samples
    (drawn from ``SEED``), [m - q_hi se, m - q_lo se], q_lo and q_hi the t*'s quantiles at a = (1 - confidence) /
    2 x ``TAIL_SHARE`` and 1 - a. A resample with no spread (se* = 0) has t* = +/-inf by the sign of m* - m (0
    when equal), as its t statistic would be. Each column is sorted first, so that its interval depends on its
    values, not on their order; each resample is taken as its counts of each value (``resample_counts``: the same
    draws for every sample of one size), its mean and spread as products with them."""
    values = np.sort(columns, axis=0)
    n = values.shape[0]
    mean = values.mean(axis=0)
    se = values.std(axis=0, ddof=1) / np.sqrt(n)
    centred = values - mean  # the resamples' spread, computed about the sample's mean
    counts = resample_counts(n)
    sums = counts @ np.concatenate([centred, centred ** 2], axis=1)  # resamples x (2 x columns)
    shift = sums[:, :values.shape[1]] / n
    spread = np.maximum(sums[:, values.shape[1]:] - n * shift ** 2, 0.0) / (n - 1)
    flat = spread <= 1e-12 * (centred ** 2).sum(axis=0)  # no spread but rounding
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.where(flat, np.sign(shift) * np.inf, shift / np.sqrt(spread / n))
    t_star = np.nan_to_num(t_star, nan=0.0, posinf=np.inf, neginf=-np.inf)
    tail = (1 - confidence) / 2 * TAIL_SHARE
    low, high = np.quantile(t_star, [tail, 1 - tail], axis=0, method="inverted_cdf")
    return [(float(m - h * e), float(m - lo * e)) for m, e, lo, h in zip(mean, se, low, high)]


@functools.lru_cache(maxsize=8)
def resample_counts(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """``resamples`` bootstrap resamples of n values, each as how often it takes each value (resamples x n): the
    draws ``numpy.random.default_rng(seed).integers(0, n, (resamples, n))`` make, counted. Read-only: shared."""
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    counts = np.bincount((draws + n * np.arange(resamples)[:, None]).ravel(), minlength=resamples * n)
    counts = counts.reshape(resamples, n).astype(np.float64)
    counts.flags.writeable = False
    return counts


def holm(p_values: list[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    Sorted ascending, p_(i) is multiplied by (m - i) for i = 0..m-1, made monotone
    non-decreasing, and capped at 1.
    """
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def difference_ci(differences: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the mean of paired ``differences`` (model a's value minus model b's, one per prompt).

    - fewer than ``MIN_CI_N`` values: (nan, nan), no interval;
    - every difference -c, 0 or c for one step c > 0 (the largest |difference|; c = 1 when all are 0): two models'
      0/1 events on the same prompts (c = 1: b prompts where only a's event happened, c where only b's, n in
      all), or two shares of 10 images that differ by one image at most (c = 0.1). Bonett & Price's adjusted Wald
      interval for a difference of paired proportions (Bonett & Price 2012, "Adjusted Wald confidence interval for
      a difference of binomial proportions based on paired data", J. Educ. Behav. Stat. 37(4), 479-488) on the
      differences in units of c, which adds one prompt of each discordant kind: p+ = (b + 1) / (n + 2),
      p- = (c + 1) / (n + 2), d = p+ - p-, d -/+ q sqrt((p+ + p- - d^2) / (n + 2)), here with q Student's t
      quantile on n + 1 degrees of freedom in place of the normal one (with the normal one its coverage dips to
      0.89 at n = 10), times c. Its exact coverage, enumerated over every trinomial with probabilities on a 0.05
      grid (``benchmarks/coverage.py``), is at least 0.935 from n = 5 to 50 (0.949 at n = 10), whatever c;
      there the t interval and the BCa bootstrap fall to 0.40 at n = 10 when few prompts differ (an all-zero
      sample gives the point (0, 0)), and so does the rule used before, which took differences without a -1 for a
      proportion (Wilson's interval);
    - otherwise the interval of a mean of the differences (``mean_ci``'s percentile-t).
    """
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n < MIN_CI_N:
        return float("nan"), float("nan")
    step = float(np.abs(d).max()) or 1.0
    if np.all((d == -step) | (d == 0) | (d == step)):
        more, fewer = (int((d == step).sum()) + 1) / (n + 2), (int((d == -step).sum()) + 1) / (n + 2)
        centre = more - fewer
        half = float(stats.t.ppf(0.5 + confidence / 2, n + 1) * np.sqrt((more + fewer - centre ** 2) / (n + 2)))
        return step * (centre - half), step * (centre + half)
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    return percentile_t(d, confidence=confidence)


def sign_test(wins, losses) -> np.ndarray:
    """The exact one-sided sign test (Dixon & Mood 1946, "The statistical sign test", JASA 41(236), 557-566) of
    paired comparisons, elementwise: the p-value of ``wins`` against ``losses`` (prompts on which one model's value
    is better than the other's, and worse; ties carry no sign and are left out), P(X >= wins) for X ~
    Binomial(wins + losses, 1/2); 1 where no comparison has a sign. It is monotone: a win more, or a loss less,
    never raises it (``benchmark.ranking`` relies on that: a model that lowers its own values, by refusing prompts
    counted at the worst value, can never make another model's lead over it less significant)."""
    wins, losses = np.asarray(wins), np.asarray(losses)
    with np.errstate(invalid="ignore"):
        return np.where(wins + losses > 0, stats.binom.sf(wins - 1, wins + losses, 0.5), 1.0)


def sign_test_rejects(wins, losses, alpha: float) -> np.ndarray:
    """Whether ``sign_test(wins, losses) <= alpha``, elementwise, as fast for a million pairs as for one: for each
    distinct number of signed comparisons N = wins + losses, the fewest wins that reject, w(N), is found once (the
    binomial's inverse survival function, checked and moved by one where its floating point lands beside), and
    then wins >= w(N)."""
    wins, losses = np.asarray(wins, dtype=np.int64), np.asarray(losses, dtype=np.int64)
    totals = wins + losses
    distinct = np.unique(totals[totals > 0])
    needed = np.full(int(totals.max(initial=0)) + 1, np.iinfo(np.int64).max)
    if distinct.size:
        fewest = np.minimum(stats.binom.isf(alpha, distinct, 0.5).astype(np.int64) + 1, distinct + 1)
        fewest += sign_test(fewest, distinct - fewest) > alpha  # the floating point landed one short
        fewest -= (fewest > 0) & (sign_test(fewest - 1, distinct - fewest + 1) <= alpha)  # or one past
        needed[distinct] = np.where(fewest <= distinct, fewest, np.iinfo(np.int64).max)
    return wins >= needed[totals]


PAIRED_COLUMNS = ["metric", "model_a", "model_b", "n", "mean_difference", "ci_low", "ci_high", "p_value", "p_holm"]


def paired_comparisons(per_prompt: pd.DataFrame, *, confidence: float = 0.95) -> pd.DataFrame:
    """Every pair of models on the prompts both answered, per metric: mean difference (a - b) with its CI
    (``difference_ci``), the two-sided Wilcoxon signed-rank p-value, and the Holm-adjusted p-value across every
    test of the table (all pairs of all metrics: a reader scans them all, so the family is all of them).

    ``per_prompt`` has columns model, prompt_id, value (one value per model and prompt) and, for several metrics
    at once, metric (absent: one metric, named '').
    """
    if "metric" not in per_prompt.columns:
        per_prompt = per_prompt.assign(metric="")
    rows = []
    for metric, values in per_prompt.groupby("metric", sort=True):
        wide = values.pivot_table(index="prompt_id", columns="model", values="value", aggfunc="mean")
        for a, b in itertools.combinations(sorted(wide.columns), 2):
            both = wide[[a, b]].dropna()
            diff = (both[a] - both[b]).to_numpy()
            low, high = difference_ci(diff, confidence=confidence)
            p = float(stats.wilcoxon(both[a], both[b]).pvalue) if np.any(diff != 0) else 1.0
            rows.append({"metric": metric, "model_a": a, "model_b": b, "n": len(both),
                         "mean_difference": float(diff.mean()) if len(diff) else float("nan"),
                         "ci_low": low, "ci_high": high, "p_value": p})
    table = pd.DataFrame(rows, columns=PAIRED_COLUMNS[:-1])
    table["p_holm"] = holm(table["p_value"].to_numpy()) if len(table) else []
    return table

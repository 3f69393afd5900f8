"""Statistics shared by all tracks: CIs of means and of paired differences, paired tests, Holm correction.

The CRT paper (arXiv:2511.11435, Sec. 5) compares models with two-sided Wilcoxon
signed-rank tests on per-reference pairs, Holm-corrected, and reports bootstrap
95% CIs of mean paired differences; CultureLens runs the same tests on per-prompt
values for every track, with intervals chosen by their measured coverage at small n
(``benchmarks/coverage.py``, figures in ``benchmarks/README.md``) in place of the bootstrap:

- a mean of values (``mean_ci``): Student-t, Wilson's for values that are all 0 or 1 (events);
- a mean of paired differences (``difference_ci``): Student-t, and Bonett & Price's adjusted interval for
  differences that are all -1, 0 or 1 (two models' 0/1 events on the same prompts). Wilson's interval is for a
  proportion only: given such differences it covered as little as 0.40 at n = 10.

Holm's correction runs over every test of one comparison (every pair of every metric), not within a metric.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats

# Below this many values no interval is given: see mean_ci and benchmarks/README.md ("coverage.py").
MIN_CI_N = 5


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion from ``successes`` of ``n`` independent 0/1 trials.

    With z the two-sided normal quantile and p = successes / n:
    (p + z^2/2n -/+ z sqrt(p(1 - p)/n + z^2/4n^2)) / (1 + z^2/n). Unlike the Wald interval it stays
    inside [0, 1] and is not degenerate at 0 or n successes. At 0 (n) successes the lower (upper) bound is
    exactly 0 (1); it is set so, as rounding leaves it a few ulps off and past the share itself.
    """
    z = stats.norm.ppf(0.5 + confidence / 2)
    share = successes / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return float(min(centre - half, share)), float(max(centre + half, share))


def mean_ci(values: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the mean of independent ``values`` (e.g. one value per prompt).

    - fewer than ``MIN_CI_N`` values: (nan, nan), no interval;
    - every value 0 or 1 (events, e.g. "artifact recognised" per image): the Wilson (1927) score interval. The
      values must be a proportion's: differences between two models go to ``difference_ci``;
    - otherwise the Student-t interval, mean -/+ t_{n-1} s / sqrt(n) (Student 1908), which is (v, v) when
      every value is v (no spread in the sample).

    The method and the minimum n were chosen by measured coverage (``benchmarks/coverage.py``): the
    percentile and BCa bootstraps (Efron 1987) undercover at small n (normal data, n = 5: 0.81 of the nominal
    0.95), the t interval does not, and on 0/1 data only Wilson's covers below n = 20.
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.size
    if n < MIN_CI_N:
        return float("nan"), float("nan")
    if np.all((values == 0) | (values == 1)):
        return wilson_interval(int(values.sum()), n, confidence=confidence)
    mean = float(values.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * values.std(ddof=1) / np.sqrt(n))
    return mean - half, mean + half


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
    - every difference -1, 0 or 1 (two models' 0/1 events on the same prompts: b prompts where only a's event
      happened, c where only b's, n in all): Bonett & Price's adjusted Wald interval for a difference of paired
      proportions (Bonett & Price 2012, "Adjusted Wald confidence interval for a difference of binomial
      proportions based on paired data", J. Educ. Behav. Stat. 37(4), 479-488), which adds one prompt of each
      discordant kind: p+ = (b + 1) / (n + 2), p- = (c + 1) / (n + 2), d = p+ - p-,
      d -/+ q sqrt((p+ + p- - d^2) / (n + 2)), here with q Student's t quantile on n + 1 degrees of freedom in
      place of the normal one (with the normal one its coverage dips to 0.89 at n = 10). Its exact coverage,
      enumerated over every trinomial with probabilities on a 0.05 grid (``benchmarks/coverage.py``), is at
      least 0.935 from n = 5 to 50 (0.949 at n = 10); there the t interval and the BCa bootstrap fall to 0.40
      at n = 10 when few prompts differ (an all-zero sample gives the point (0, 0)), and so does the rule used
      before, which took differences without a -1 for a proportion (Wilson's interval);
    - otherwise the Student-t interval of the differences' mean, as ``mean_ci``'s.
    """
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n < MIN_CI_N:
        return float("nan"), float("nan")
    if np.all((d == -1) | (d == 0) | (d == 1)):
        more, fewer = (int((d == 1).sum()) + 1) / (n + 2), (int((d == -1).sum()) + 1) / (n + 2)
        centre = more - fewer
        half = float(stats.t.ppf(0.5 + confidence / 2, n + 1) * np.sqrt((more + fewer - centre ** 2) / (n + 2)))
        return centre - half, centre + half
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * d.std(ddof=1) / np.sqrt(n))
    return float(d.mean()) - half, float(d.mean()) + half


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

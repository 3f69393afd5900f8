"""Statistics shared by all tracks: CIs of means, paired tests between models, Holm correction.

The CRT paper (arXiv:2511.11435, Sec. 5) compares models with two-sided Wilcoxon
signed-rank tests on per-reference pairs, Holm-corrected, and reports bootstrap
95% CIs of mean paired differences; CultureLens runs the same tests on per-prompt
values for every track, with Student-t intervals (Wilson's for 0/1 values) in place
of the bootstrap, because their coverage at small n is measured to be better
(``benchmarks/coverage.py``).
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
    - every value 0 or 1 (events, e.g. "artifact recognised" per image): the Wilson (1927) score interval;
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


def paired_comparisons(per_prompt: pd.DataFrame, *, confidence: float = 0.95) -> pd.DataFrame:
    """Every pair of models on the prompts both answered: mean difference (a - b) with its CI (``mean_ci``),
    two-sided Wilcoxon signed-rank p-value, and the Holm-adjusted p-value across all pairs.

    ``per_prompt`` has columns model, prompt_id, value (one value per model and prompt).
    """
    wide = per_prompt.pivot_table(index="prompt_id", columns="model", values="value", aggfunc="mean")
    rows = []
    for a, b in itertools.combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        diff = (both[a] - both[b]).to_numpy()
        low, high = mean_ci(diff, confidence=confidence)
        p = float(stats.wilcoxon(both[a], both[b]).pvalue) if np.any(diff != 0) else 1.0
        rows.append({"model_a": a, "model_b": b, "n": len(both), "mean_difference": float(diff.mean()),
                     "ci_low": low, "ci_high": high, "p_value": p})
    table = pd.DataFrame(rows, columns=["model_a", "model_b", "n", "mean_difference", "ci_low", "ci_high", "p_value"])
    table["p_holm"] = holm(table["p_value"].to_numpy()) if len(table) else []
    return table

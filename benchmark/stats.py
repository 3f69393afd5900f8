"""Statistics shared by all tracks: bootstrap CIs, paired tests between models, Holm correction.

The CRT paper (arXiv:2511.11435, Sec. 5) compares models with two-sided Wilcoxon
signed-rank tests on per-reference pairs, Holm-corrected, and reports bootstrap
95% CIs of mean paired differences; CultureLens does the same on per-prompt
values for every track.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats


def bootstrap_mean_ci(values: np.ndarray, *, confidence: float = 0.95, n_resamples: int = 2000,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of independent ``values`` (e.g. one value per prompt).

    Returns (nan, nan) for fewer than two values, and (v, v) when every value is v
    (scipy refuses a degenerate sample; its interval is the value itself).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return float("nan"), float("nan")
    if np.all(values == values[0]):
        return float(values[0]), float(values[0])
    result = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                             method="percentile", random_state=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


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


def paired_comparisons(per_prompt: pd.DataFrame, *, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Every pair of models on the prompts both answered: mean difference (a - b) with a bootstrap CI,
    two-sided Wilcoxon signed-rank p-value, and the Holm-adjusted p-value across all pairs.

    ``per_prompt`` has columns model, prompt_id, value (one value per model and prompt).
    """
    wide = per_prompt.pivot_table(index="prompt_id", columns="model", values="value", aggfunc="mean")
    rows = []
    for a, b in itertools.combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        diff = (both[a] - both[b]).to_numpy()
        low, high = bootstrap_mean_ci(diff, confidence=confidence, seed=seed)
        p = float(stats.wilcoxon(both[a], both[b]).pvalue) if np.any(diff != 0) else 1.0
        rows.append({"model_a": a, "model_b": b, "n": len(both), "mean_difference": float(diff.mean()),
                     "ci_low": low, "ci_high": high, "p_value": p})
    table = pd.DataFrame(rows, columns=["model_a", "model_b", "n", "mean_difference", "ci_low", "ci_high", "p_value"])
    table["p_holm"] = holm(table["p_value"].to_numpy()) if len(table) else []
    return table

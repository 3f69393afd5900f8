"""Confidence intervals for leaderboard means."""

from __future__ import annotations

import numpy as np
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

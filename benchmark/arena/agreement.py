"""Every metric answers to the votes: how often an automatic metric orders a decided pair of images as the voters
did, per culture, and how its model-level scores correlate with the voters' Bradley-Terry strengths.

As the image arenas check automatic judges against their votes (GenAI-Arena, Jiang et al. 2024, arXiv:2406.04485,
"GenAI-Bench": a judge's accuracy on the human-decided pairs), and as CulturalFrames asks "which metric can you
trust, per country" (Nayak et al., Sec. 6, Fig. 7: Spearman between metric and human scores):

- **pairwise agreement**, per culture and over all: of the decided pairs (model battles voted left or right, not set
  aside, where the metric has a value for both images the voter saw), the share the metric orders as the voter did
  (the winner's value better by the metric's direction); a metric tie counts half (a coin would be right half the
  time). 95% Wilson interval with continuity correction over the pairs, the tables' for a rate
  (``benchmark.stats.wilson_interval``; pairs by one voter are not independent, so it is a little narrow), and the
  number of pairs.
- **model-level rank correlation**: Kendall's tau-b and Spearman's rho (``scipy.stats``) between the models'
  strengths and the metric's model scores, on the models that have both, signed so that +1 means the metric ranks
  the models as the voters do whatever its direction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.arena.rating import OVERALL
from benchmark.stats import wilson_interval

MIN_MODELS = 3  # a rank correlation over fewer models says nothing


def pair_agreement(pairs: pd.DataFrame, *, higher_is_better: bool = True) -> pd.DataFrame:
    """The metric's agreement with the votes on ``pairs`` (one row per decided vote: ``culture``, ``outcome`` "a" or
    "b", ``value_a`` and ``value_b``, the metric's values of the left and right images; nan: none). Rows: ``OVERALL``
    then each culture; columns pairs (with both values), agreed (orders as the voter, ties half), agreement, ci_low,
    ci_high, without_values (decided pairs left out for a missing value)."""
    if bad := sorted(set(pairs["outcome"]) - {"a", "b"}):
        raise ValueError(f"agreement is measured on decided pairs (outcome a or b), not {', '.join(map(repr, bad))}")
    sign = 1.0 if higher_is_better else -1.0
    difference = sign * (pairs["value_a"].astype(float) - pairs["value_b"].astype(float))
    difference = difference.where(pairs["outcome"] == "a", -difference)  # the winner's margin by the metric
    valued = difference.notna()
    credit = np.where(difference > 0, 1.0, np.where(difference == 0, 0.5, 0.0))
    frame = pd.DataFrame({"culture": pairs["culture"].astype(str), "valued": valued, "credit": credit})
    rows = {}
    for culture, part in [(OVERALL, frame), *sorted(frame.groupby("culture"), key=lambda item: item[0])]:
        n = int(part["valued"].sum())
        agreed = float(part.loc[part["valued"], "credit"].sum())
        low, high = wilson_interval(agreed, n) if n else (np.nan, np.nan)
        rows[culture] = {"pairs": n, "agreed": agreed, "agreement": agreed / n if n else np.nan, "ci_low": low,
                         "ci_high": high, "without_values": int((~part["valued"]).sum())}
    return pd.DataFrame.from_dict(rows, orient="index")


def rank_correlation(strength: pd.Series, scores: pd.Series, *, higher_is_better: bool = True) -> dict:
    """Kendall's tau-b and Spearman's rho (with their p-values) between ``strength`` (model -> Bradley-Terry
    strength) and ``scores`` (model -> the metric's score), on the ``models`` holding both, the metric's scores
    negated when lower is better; nan below ``MIN_MODELS`` models."""
    both = pd.concat([strength.rename("strength"), scores.rename("score")], axis=1, join="inner").dropna()
    found = {"models": len(both), "kendall": np.nan, "kendall_p": np.nan, "spearman": np.nan, "spearman_p": np.nan}
    if len(both) < MIN_MODELS:
        return found
    score = both["score"] if higher_is_better else -both["score"]
    kendall, spearman = stats.kendalltau(both["strength"], score), stats.spearmanr(both["strength"], score)
    found.update(kendall=float(kendall.statistic), kendall_p=float(kendall.pvalue),
                 spearman=float(spearman.statistic), spearman_p=float(spearman.pvalue))
    return found

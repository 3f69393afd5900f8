"""Evaluating relevance scores against human labels, as CAIRE does (Yayavaram et al., arXiv:2506.09109, Sec. 5.4).

Specific set (multi-label, binary gold): a score >= threshold (4: "Relevant" or "Highly Relevant") is a
positive prediction for that (image, label). With TP, FP, FN counted over (image, label) pairs:

    precision = TP / (TP + FP),  recall = TP / (TP + FN),  F1 = 2 TP / (2 TP + FP + FN)

*Micro*: counts pooled over every (image, label) pair (what the paper's Table 1 reports: "computed across all
culture labels"). *Macro*: the unweighted mean over labels of each label's value. A ratio with a zero
denominator is undefined (NaN), never 0: precision when nothing is predicted positive, recall when nothing is
gold positive, F1 when neither; macro averages skip NaNs and report how many labels were defined.

Universal set (graded gold): per image, Pearson's r between the L label scores and the L human mean ratings
(App. C.9); *macro* = the mean of the per-image r (Table 2 averages these by image group, e.g. the country
in the prompt: ``mean_by_group``), *micro* = one r over every (image, label) pair pooled. Per image, labels
with a missing score or human mean are dropped; r is NaN if fewer than 3 pairs remain (with 2, r is always
+-1) or if either side is constant (r is undefined; scipy would warn and return NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

THRESHOLD = 4
MIN_PAIRS = 3


def _ratio(numerator, denominator) -> np.ndarray:
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def confusion_counts(scores: np.ndarray, gold: np.ndarray, threshold: int = THRESHOLD) -> dict[str, np.ndarray]:
    """Per label (column): TP, FP, FN of ``scores >= threshold`` against the boolean ``gold``, both (N, L)."""
    scores, gold = np.asarray(scores), np.asarray(gold)
    if scores.shape != gold.shape or scores.ndim != 2:
        raise ValueError(f"scores and gold must both be (images, labels); got {scores.shape} and {gold.shape}")
    if gold.dtype != bool and not np.isin(gold, (0, 1)).all():
        raise ValueError("gold must be boolean (or 0/1): is this label relevant to this image")
    predicted, gold = scores >= threshold, gold.astype(bool)
    return {"tp": (predicted & gold).sum(axis=0), "fp": (predicted & ~gold).sum(axis=0),
            "fn": (~predicted & gold).sum(axis=0)}


def precision_recall_f1(scores: np.ndarray, gold: np.ndarray, threshold: int = THRESHOLD,
                        labels: Sequence[str] | None = None) -> dict:
    """Micro and macro precision, recall and F1 (see the module docstring), and a per-label table."""
    c = confusion_counts(scores, gold, threshold)
    tp, fp, fn = c["tp"], c["fp"], c["fn"]
    per_label = pd.DataFrame({"label": list(labels) if labels is not None else range(len(tp)), "tp": tp, "fp": fp,
                              "fn": fn, "precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn),
                              "f1": _ratio(2 * tp, 2 * tp + fp + fn)})
    TP, FP, FN = tp.sum(), fp.sum(), fn.sum()
    micro = {"precision": float(_ratio(TP, TP + FP)), "recall": float(_ratio(TP, TP + FN)),
             "f1": float(_ratio(2 * TP, 2 * TP + FP + FN))}
    macro = {}
    for name in ("precision", "recall", "f1"):
        values = per_label[name].to_numpy()
        defined = ~np.isnan(values)
        macro[name] = float(values[defined].mean()) if defined.any() else float("nan")
        macro[f"{name}_labels"] = int(defined.sum())
    return {"threshold": threshold, "micro": micro, "macro": macro, "per_label": per_label}


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) < MIN_PAIRS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(pearsonr(x, y).statistic)


def per_image_pearson(scores: np.ndarray, human: np.ndarray) -> np.ndarray:
    """(N,) Pearson's r per image (row) between its label scores and human mean ratings, both (N, L)."""
    scores = np.asarray(scores, dtype=np.float64)
    human = np.asarray(human, dtype=np.float64)
    if scores.shape != human.shape or scores.ndim != 2:
        raise ValueError(f"scores and human ratings must both be (images, labels); got {scores.shape} and "
                         f"{human.shape}")
    return np.array([_pearson(s, h) for s, h in zip(scores, human)])


def pearson_summary(scores: np.ndarray, human: np.ndarray) -> dict:
    """Macro (mean of per-image r, over images where r is defined) and micro (pooled pairs) Pearson."""
    r = per_image_pearson(scores, human)
    defined = ~np.isnan(r)
    pooled = (np.asarray(scores, dtype=np.float64).ravel(), np.asarray(human, dtype=np.float64).ravel())
    return {"macro": float(r[defined].mean()) if defined.any() else float("nan"), "images": int(len(r)),
            "images_defined": int(defined.sum()),
            "micro": _pearson(*pooled),
            "per_image": r}


def mean_by_group(per_image: np.ndarray, groups: Sequence[str]) -> pd.Series:
    """Mean per-image r within each group (e.g. the prompt's country, Table 2's columns), NaNs skipped."""
    return pd.Series(np.asarray(per_image, dtype=np.float64)).groupby(np.asarray(groups)).mean()

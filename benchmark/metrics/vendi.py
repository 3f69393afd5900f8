"""Vendi scores, their quality-weighted form, and CUBE's cultural diversity (CD) over tag kernels.

Friedman & Dieng, "The Vendi Score: A Diversity Evaluation Metric for Machine
Learning", arXiv:2210.02410; Nguyen & Dieng, "Quality-Weighted Vendi Scores
and Their Application to Diverse Experimental Design", ICML 2024 (PMLR 235); as
used by Kannen et al., "Beyond Aesthetics: Cultural Competence in
Text-to-Image Models" (CUBE), arXiv:2407.06863, Sec. 5:

- VS_q(X; k) = exp( (1 / (1 - q)) log sum_i lambda_bar_i^q ), lambda_bar the
  eigenvalues of the kernel matrix K (K_ij = k(x_i, x_j), k(x, x) = 1) divided
  by their sum, 0 log 0 = 0 (CUBE Eq. 1); q = 1 is exp(Shannon entropy), the
  original Vendi score, q = inf is 1 / max lambda_bar.
- qVS_q = mean_i s(x_i) x VS_q (CUBE Eq. 2); CD = qVS_q / N (CUBE Eq. 3), in
  [0, 1] for qualities s in [0, 1]. CUBE's Table 5 reports mean s and VS_q / N
  ("VS-bar"), Table 6 the CD.
- The tag kernel k = w1 [same continent] + w2 [same country] + w3 [same
  artifact] (CUBE Eq. 4), with the five weightings of Sec. 5.2.2.
- The protocol (CUBE Sec. 5.2.1, App. H): N = 8 images per score, the mean of
  50 scores per prompt concept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark.stats import mean_ci

TAG_LEVELS = ("continent", "country", "artifact")
# CUBE Sec. 5.2.2: (w1, w2, w3) over [same continent], [same country], [same artifact].
KERNELS: dict[str, tuple[float, float, float]] = {
    "continent": (1.0, 0.0, 0.0),
    "country": (0.0, 1.0, 0.0),
    "artifact": (0.0, 0.0, 1.0),
    "hierarchical": (0.5, 0.5, 0.0),
    "uniform": (1 / 3, 1 / 3, 1 / 3),
}
SUBSET_SIZE = 8  # CUBE Sec. 5.2.1: eight images per score, as image APIs return
DRAWS = 50  # CUBE Sec. 5.2.1: the mean of 50 scores (5 rephrasings x 10 seed batches)


def normalised_eigenvalues(K: np.ndarray, tolerance: float = 1e-6) -> np.ndarray:
    """lambda_bar: the eigenvalues of K / N (they sum to trace(K) / N = 1), with round-off set to 0: negatives,
    and positives below numpy's numerical-rank threshold (N x eps x the largest), which would otherwise
    inflate VS_q for q < 1 (a 1e-17 round-off eigenvalue contributes 3e-9 at q = 1/2).

    K must be a valid Vendi kernel matrix: square, symmetric, unit diagonal and positive semi-definite,
    each within ``tolerance``; otherwise a ValueError says which condition fails and by how much.
    """
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(f"a kernel matrix must be square and non-empty, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("the kernel matrix has non-finite entries")
    asymmetry = float(np.abs(K - K.T).max())
    if asymmetry > tolerance:
        raise ValueError(f"the kernel matrix is not symmetric (largest |K_ij - K_ji| = {asymmetry:.3g})")
    diagonal = float(np.abs(np.diag(K) - 1.0).max())
    if diagonal > tolerance:
        raise ValueError(f"the kernel needs k(x, x) = 1: the diagonal is off by up to {diagonal:.3g}")
    eigenvalues = np.linalg.eigvalsh(K / K.shape[0])
    if eigenvalues[0] < -tolerance:
        raise ValueError(f"the kernel matrix is not positive semi-definite (smallest eigenvalue of K "
                         f"{eigenvalues[0] * K.shape[0]:.3g})")
    eigenvalues[eigenvalues < len(K) * np.finfo(np.float64).eps * eigenvalues[-1]] = 0.0
    return eigenvalues / eigenvalues.sum()


def vendi_score(K: np.ndarray, q: float = 1.0, tolerance: float = 1e-6) -> float:
    """VS_q of a kernel matrix (CUBE Eq. 1; for q = 1 the Vendi score of Friedman & Dieng, arXiv:2210.02410), in [1, N].

    q = 1: exp(-sum lambda_bar log lambda_bar) with 0 log 0 = 0; q = inf: 1 / max lambda_bar;
    other q > 0: exp(log(sum lambda_bar^q) / (1 - q)).
    """
    if not q > 0:
        raise ValueError(f"the Vendi order q must be > 0 (or inf), got {q}")
    p = normalised_eigenvalues(K, tolerance)
    p = p[p > 0]
    if q == 1:
        return float(np.exp(-np.sum(p * np.log(p))))
    if math.isinf(q):
        return float(1.0 / p.max())
    return float(np.exp(np.log(np.sum(p ** q)) / (1.0 - q)))


def _mean_quality(s: np.ndarray, n: int) -> float:
    s = np.asarray(s, dtype=np.float64)
    if s.shape != (n,):
        raise ValueError(f"expected one quality score per item ({n}), got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
        raise ValueError(f"quality scores must lie in [0, 1] (CUBE Eq. 3), got min {s.min():.3g}, max {s.max():.3g}")
    return float(s.mean())


def quality_weighted_vendi(K: np.ndarray, s: np.ndarray, q: float = 1.0, tolerance: float = 1e-6) -> float:
    """qVS_q = (1/N sum_i s(x_i)) x VS_q (CUBE Eq. 2; Nguyen & Dieng, ICML 2024), in [0, N]."""
    diversity = vendi_score(K, q, tolerance)
    return _mean_quality(s, np.shape(K)[0]) * diversity


def normalised_cd(K: np.ndarray, s: np.ndarray, q: float = 1.0, tolerance: float = 1e-6) -> float:
    """Cultural diversity CD = (1/N sum_i s(x_i)) x VS_q / N (CUBE Eq. 3), in [0, 1]: 1 when every item has
    quality 1 and all are distinct, 0 when every quality is 0."""
    return quality_weighted_vendi(K, s, q, tolerance) / np.shape(K)[0]


def tag_kernel(tags, weights: tuple[float, float, float]) -> np.ndarray:
    """K_ij = w1 [same continent] + w2 [same country] + w3 [same artifact] (CUBE Eq. 4).

    ``tags``: a DataFrame with columns continent, country, artifact, or an (N, 3) array of those labels.
    The weights must be non-negative and sum to 1, so that k(x, x) = 1; a non-negative sum of
    same-label indicator kernels is positive semi-definite.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (3,) or np.any(w < 0) or not math.isclose(w.sum(), 1.0, abs_tol=1e-9):
        raise ValueError(f"tag-kernel weights (continent, country, artifact) must be 3 non-negative numbers "
                         f"summing to 1, got {tuple(weights)}")
    labels = tags[list(TAG_LEVELS)].to_numpy(dtype=object) if isinstance(tags, pd.DataFrame) \
        else np.asarray(tags, dtype=object)
    if labels.ndim != 2 or labels.shape[1] != 3:
        raise ValueError(f"tags must be (N, 3) labels (continent, country, artifact), got shape {labels.shape}")
    if pd.isna(labels).any():
        raise ValueError("a tag is missing (continent, country or artifact is null)")
    K = np.zeros((len(labels), len(labels)))
    for level, weight in enumerate(w):
        if weight:
            column = labels[:, level]
            K += weight * (column[:, None] == column[None, :])
    return K


def random_subsets(n_items: int, size: int = SUBSET_SIZE, draws: int = DRAWS,
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """(draws, size) item indices: ``draws`` independent uniformly random size-subsets of ``n_items`` items
    (each without repetition). CUBE draws its 50 sets of N = 8 as consecutive-seed batches (App. H.1); for
    exchangeable seeds both estimate the same expectation over 8-image sets."""
    if not 1 <= size <= n_items:
        raise ValueError(f"cannot draw subsets of {size} from {n_items} items")
    if draws < 1:
        raise ValueError(f"need at least one draw, got {draws}")
    rng = rng if rng is not None else np.random.default_rng(0)
    return np.argsort(rng.random((draws, n_items)), axis=1)[:, :size]


def seed_batches(seeds: np.ndarray, size: int = SUBSET_SIZE) -> np.ndarray:
    """(batches, size) item positions: the items in seed order, cut into consecutive batches of ``size``
    (CUBE App. H.1: seeds 0-79 in ten batches of eight consecutive seeds); an incomplete last batch is left out."""
    seeds = np.asarray(seeds)
    if not 1 <= size <= len(seeds):
        raise ValueError(f"cannot make batches of {size} from {len(seeds)} items")
    order = np.argsort(seeds, kind="stable")
    return order[:len(order) - len(order) % size].reshape(-1, size)


@dataclass(frozen=True)
class DrawMean:
    """The mean of a score over draws, with a CI of that mean over draws (``benchmark.stats.mean_ci``)."""

    mean: float
    ci_low: float
    ci_high: float
    draws: int


def draw_mean(per_draw: np.ndarray, confidence: float = 0.95) -> DrawMean:
    """Mean of per-draw scores (CUBE reports the mean of 50, Sec. 5.2.1) and a CI over draws
    (``benchmark.stats.mean_ci``). The draws share images, so the CI measures the Monte Carlo error of the mean
    for these images, not the uncertainty over prompts (the leaderboard's CIs are over prompts)."""
    values = np.asarray(per_draw, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError(f"expected a non-empty 1-D array of per-draw scores, got shape {values.shape}")
    low, high = mean_ci(values, confidence=confidence)
    if np.all(values == values[0]):  # every draw gives one value: no Monte Carlo error to bound
        low = high = float(values[0])
    return DrawMean(float(values.mean()), low, high, len(values))

"""Perceptual variability across seeds: W1KP.

Tang, Zhang, Xu, Lu, Li, Stenetorp, Lin, Ture, "Words Worth a Thousand
Pictures: Measuring and Understanding Perceptual Variability in Text-to-Image
Generation", arXiv:2406.08482.

- Distance between two images: squared Euclidean distance of their features
  (DreamSim in the paper: "DreamSim_l2").
- Normalisation (Eq. 1): d* = F(d), F the empirical CDF of distances over a
  reference sample; the authors publish theirs for DreamSim_l2 (``cdf_x``,
  ``cdf_y``), queried by linear interpolation.
- eta_mean: the U-statistic with the pairwise-mean kernel, the mean of d* over
  all C(n, 2) pairs (Sec. 2.2). The authors' code instead normalises the mean
  raw distance, F(mean d); offered as ``variant="authors_code"``.
- eta_k: the U-statistic with the min kernel of arity k, the expected minimum
  pairwise d* over random k-subsets (Sec. 2.2, "k-expected maximum" of
  similarity).
- W1KP score = 1 - eta (higher = more similar = less variable); levels high
  [0.85, 1], medium [0.4, 0.85), low [0.2, 0.4), none [0, 0.2) (Sec. 3.2).
- Reusability (Sec. 4.1): the smallest k at which 1 - eta_k >= 0.85.
"""

from __future__ import annotations

import io
import math
import re
import urllib.request
import zipfile
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need

HIGH = 0.85
LEVELS = (("high", HIGH), ("medium", 0.4), ("low", 0.2), ("none", 0.0))
CITATION = "Tang et al., arXiv:2406.08482"


def pairwise_squared_l2(embeddings: np.ndarray) -> np.ndarray:
    """(n, D) features -> (n, n) squared Euclidean distances, in one batched computation."""
    x = np.asarray(embeddings, dtype=np.float64)
    squared = np.einsum("nd,nd->n", x, x)
    distances = squared[:, None] + squared[None, :] - 2.0 * x @ x.T
    np.fill_diagonal(distances, 0.0)
    return np.maximum(distances, 0.0)


@dataclass(frozen=True)
class Calibration:
    """An empirical CDF of distances (Eq. 1): ``normalize(d) = interp(d, cdf_x, cdf_y)``.

    Where ``cdf_x`` repeats a value (the authors' file has one such tie), ``np.interp``
    returns the last ``cdf_y`` of the tie, which is the CDF's P(X <= x).
    """

    cdf_x: np.ndarray
    cdf_y: np.ndarray
    source: str = ""

    def __post_init__(self):
        x, y = np.asarray(self.cdf_x), np.asarray(self.cdf_y)
        if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
            raise ValueError(f"calibration {self.source}: cdf_x and cdf_y must be equal-length 1-D arrays")
        if np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0) or y[0] < 0 or y[-1] > 1:
            raise ValueError(f"calibration {self.source}: cdf_x and cdf_y must be non-decreasing, cdf_y in [0, 1]")

    def normalize(self, distances: np.ndarray) -> np.ndarray:
        return np.interp(distances, self.cdf_x, self.cdf_y)

    @classmethod
    def load(cls, source: str | Path) -> Calibration:
        """An ``.npz`` with arrays ``cdf_x`` and ``cdf_y``, from a path or an http(s) URL (never unpickled)."""
        source = str(source)
        try:
            if re.match(r"https?://", source):
                with urllib.request.urlopen(source, timeout=60) as response:  # noqa: S310 (http(s) only)
                    raw = io.BytesIO(response.read())
            else:
                raw = source
            with np.load(raw, allow_pickle=False) as data:
                missing = {"cdf_x", "cdf_y"} - set(data.files)
                if missing:
                    raise ValueError(f"calibration {source}: lacks the arrays {sorted(missing)}")
                return cls(data["cdf_x"], data["cdf_y"], source)
        except (OSError, zipfile.BadZipFile) as error:
            raise ValueError(f"calibration {source}: cannot be read as an .npz of cdf_x, cdf_y ({error})") from None
        except ValueError as error:
            if str(error).startswith(f"calibration {source}"):
                raise
            raise ValueError(f"calibration {source}: cannot be read as an .npz of cdf_x, cdf_y ({error})") from None

    @classmethod
    def fit(cls, distances: np.ndarray, source: str = "fitted") -> Calibration:
        """The empirical CDF of a reference sample of distances: F(x) = share of the sample <= x."""
        x = np.sort(np.asarray(distances, dtype=np.float64).ravel())
        if len(x) < 2:
            raise ValueError("a calibration needs at least two reference distances")
        values, counts = np.unique(x, return_counts=True)
        return cls(values, np.cumsum(counts) / len(x), source)

    def save(self, path: Path) -> None:
        np.savez(path, cdf_x=np.asarray(self.cdf_x), cdf_y=np.asarray(self.cdf_y))


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, k=1)


def eta_mean(normalized: np.ndarray) -> float:
    """Mean normalised distance over the C(n, 2) pairs of one prompt's images (the paper's eta_mean)."""
    i, j = _pairs(len(normalized))
    if len(i) == 0:
        raise ValueError("eta_mean needs at least two images")
    return float(normalized[i, j].mean())


def eta_mean_of_raw(distances: np.ndarray, calibration: Calibration) -> float:
    """The authors' code variant: the normalised mean raw distance, F(mean d)."""
    i, j = _pairs(len(distances))
    if len(i) == 0:
        raise ValueError("eta_mean needs at least two images")
    return float(calibration.normalize(distances[i, j].mean()))


def eta_k_exact(normalized: np.ndarray, k: int) -> float:
    """Expected minimum pairwise normalised distance over all C(n, k) subsets, by enumeration."""
    n = len(normalized)
    if not 2 <= k <= n:
        raise ValueError(f"k must be in 2..{n}, got {k}")
    subsets = np.array(list(combinations(range(n), k)))
    a, b = _pairs(k)
    return float(normalized[subsets[:, a], subsets[:, b]].min(axis=1).mean())


@dataclass(frozen=True)
class EtaCurve:
    k: np.ndarray
    eta: np.ndarray
    standard_error: np.ndarray  # 0 where exact
    exact: np.ndarray


def eta_k_curve(normalized: np.ndarray, *, n_permutations: int = 1000, seed: int = 0,
                exact_limit: int = 2000) -> EtaCurve:
    """eta_k for k = 2..n: exact where C(n, k) <= ``exact_limit``, else a Monte Carlo estimate.

    The estimator draws ``n_permutations`` random orders of the n images; the first k
    images of a random order are a uniformly random k-subset, so the running minimum
    of pairwise distances along each order is an unbiased draw of the min kernel for
    every k at once (O(n^2) per order instead of O(k^2) per subset and k). The
    standard error is the sample standard deviation over orders / sqrt(orders).
    """
    d = np.asarray(normalized, dtype=np.float64)
    n = len(d)
    if n < 2:
        raise ValueError("eta_k needs at least two images")
    rng = np.random.default_rng(seed)
    orders = np.argsort(rng.random((n_permutations, n)), axis=1)
    running = np.full(n_permutations, np.inf)
    ks = np.arange(2, n + 1)
    eta, error, exact = np.empty(len(ks)), np.zeros(len(ks)), np.ones(len(ks), dtype=bool)
    for index, k in enumerate(ks):
        newest = orders[:, k - 1]
        running = np.minimum(running, d[newest[:, None], orders[:, :k - 1]].min(axis=1))
        if k == 2:
            eta[index] = eta_mean(d)  # the min kernel of a pair is the pair's distance
        elif k == n:
            eta[index] = d[_pairs(n)].min()  # one subset: all images
        elif math.comb(n, k) <= exact_limit:
            eta[index] = eta_k_exact(d, int(k))
        else:
            eta[index], exact[index] = running.mean(), False
            error[index] = running.std(ddof=1) / math.sqrt(n_permutations)
    return EtaCurve(ks, eta, error, exact)


def level(score: float) -> str:
    """The paper's calibrated similarity level of a W1KP score."""
    for name, low in LEVELS:
        if score >= low:
            return name
    return "none"


def reusability(ks: np.ndarray, scores: np.ndarray, threshold: float = HIGH) -> int | None:
    """The smallest k whose W1KP_k score (1 - eta_k) reaches ``threshold``; None if none does."""
    reached = np.flatnonzero(np.asarray(scores) >= threshold)
    return int(ks[reached[0]]) if len(reached) else None


class W1KP(Metric):
    """W1KP score of each prompt over its images (seeds), its W1KP_k curve, and the model's reusability."""

    def __init__(self, calibration: Calibration, backbone: str = "dreamsim", variant: str = "paper",
                 n_permutations: int = 1000, seed: int = 0):
        if variant not in ("paper", "authors_code"):
            raise ValueError(f"W1KP variant must be 'paper' or 'authors_code', not {variant!r}")
        self.calibration, self.variant = calibration, variant
        self.n_permutations, self.seed = n_permutations, seed
        self.need = Need(backbone, "image")
        suffix = "" if variant == "paper" else "_authors_code"
        label = ("W1KP score, 1 - mean normalised pair distance" if variant == "paper"
                 else "W1KP score, 1 - normalised mean distance (authors' code)")
        # Higher W1KP means more alike images across seeds: less variability, so lower is better here.
        self.info = MetricInfo(f"w1kp{suffix}", label, "variability", "1", False, "W1KP score", 0.0, 1.0,
                               f"{CITATION}, Sec. 2.2", (self.need,), level="prompt")

    def applies(self, inputs: Inputs) -> str | None:
        if inputs.images.groupby("prompt_id").size().max() < 2:
            return "needs at least two images per prompt (seeds) to compare"
        return None

    def _distances(self, inputs: Inputs):
        features = inputs.features[self.need]
        for prompt_id, rows in inputs.images.groupby("prompt_id", sort=True).indices.items():
            if len(rows) >= 2:
                yield prompt_id, pairwise_squared_l2(features[rows])

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        rows = []
        for prompt_id, distances in self._distances(inputs):
            if self.variant == "paper":
                eta = eta_mean(self.calibration.normalize(distances))
            else:
                eta = eta_mean_of_raw(distances, self.calibration)
            score = 1.0 - eta
            rows.append({"prompt_id": prompt_id, "value": score,
                         "note": f"{level(score)} similarity across {len(distances)} seeds"})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])

    def curves(self, inputs: Inputs) -> pd.DataFrame:
        frames = []
        for prompt_id, distances in self._distances(inputs):
            curve = eta_k_curve(self.calibration.normalize(distances), n_permutations=self.n_permutations,
                                seed=self.seed)
            frames.append(pd.DataFrame({"prompt_id": prompt_id, "x": curve.k, "value": 1.0 - curve.eta,
                                        "standard_error": curve.standard_error}))
        return pd.concat(frames, ignore_index=True)

    def derived(self, aggregates: list[dict], curves: pd.DataFrame | None) -> list[dict]:
        """Reusability (Sec. 4.1): the first k where the model's mean W1KP_k curve reaches 0.85."""
        if curves is None or curves.empty or self.variant != "paper":
            return []
        model_curve = curves.sort_values("x")
        k = reusability(model_curve["x"].to_numpy(), model_curve["value"].to_numpy())
        largest = int(model_curve["x"].max())
        return [{"track": self.info.track, "metric": "w1kp_reusability", "slice": "overall", "slice_value": "all",
                 "value": float(k) if k is not None else None, "ci_low": None, "ci_high": None,
                 "n": int(model_curve["n"].max()), "higher_is_better": True, "metric_version": "1",
                 "metric_label": f"W1KP reusability: seeds until W1KP_k >= {HIGH} (empty: not within {largest})"}]

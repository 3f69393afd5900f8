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
  all C(n, 2) pairs (Sec. 2.2).
- ``variant="authors_code"`` follows the authors' code (castorini/w1kp,
  w1kp/model/distance.py, ``ListwiseDreamSimDistanceMeasure.measure``, and
  w1kp/run/measure_variability.py): eta_mean = F(mean of the raw d > 1e-4),
  eta_k = F(E[min raw d]), and reusability from that curve; their calibration
  fit (w1kp/utils.py, ``compute_cdf``) is ``Calibration.fit_authors_code``.
- eta_k: the U-statistic with the min kernel of arity k, the expected minimum
  pairwise d* over random k-subsets (Sec. 2.2, "k-expected maximum" of
  similarity).
- W1KP score = 1 - eta (higher = more similar = less variable); levels high
  [0.85, 1], medium [0.4, 0.85), low [0.2, 0.4), none [0, 0.2) (Sec. 3.2).
- Reusability (Sec. 4.1): the smallest k at which 1 - eta_k >= 0.85. Here the model's curve at k is the mean
  over the prompts with at least k images, so only the k that enough prompts reach count (``supported``); a
  model never used up within them has a right-censored reusability, "> k_max" (``W1KP.derived``).
- A calibration is fitted for one backbone's distances: a file records the backbone id (and its weights'
  ``Backbone.key``) it was fitted for; the authors' published files record none and are DreamSim_l2's
  (``AUTHORS_BACKBONE``). ``W1KP`` refuses a calibration fitted for another backbone.
"""

from __future__ import annotations

import hashlib
import io
import math
import pickle
import re
import urllib.request
import zipfile
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct

HIGH = 0.85
AUTHORS_BACKBONE = "dreamsim"  # the authors' cdf-xy.pt is the CDF of DreamSim_l2 distances; it records no backbone
MIN_PROMPTS, MIN_SHARE = 2, 0.5  # a k counts for reusability where >= max(2, half the prompts at k = 2) reach it
AUTHORS_SELF_DISTANCE = 1e-4  # the authors' code drops pairs with d <= 1e-4 from the mean, meant for self-pairs
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
    returns the last ``cdf_y`` of the tie, which is the CDF's P(X <= x). ``backbone`` is the backbone id whose
    distances it was fitted on (None: the file records none, as the authors' DreamSim_l2 files), and
    ``backbone_key`` that backbone's ``Backbone.key`` (weights, revision, preprocessing) where recorded.
    """

    cdf_x: np.ndarray
    cdf_y: np.ndarray
    source: str = ""
    sha256: str = ""  # of the file it was loaded from
    backbone: str | None = None
    backbone_key: str | None = None

    def __post_init__(self):
        x, y = np.asarray(self.cdf_x), np.asarray(self.cdf_y)
        if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
            raise ValueError(f"calibration {self.source}: cdf_x and cdf_y must be equal-length 1-D arrays")
        if np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0) or y[0] < 0 or y[-1] > 1:
            raise ValueError(f"calibration {self.source}: cdf_x and cdf_y must be non-decreasing, cdf_y in [0, 1]")

    def normalize(self, distances: np.ndarray) -> np.ndarray:
        return np.interp(distances, self.cdf_x, self.cdf_y)

    @property
    def fitted_for(self) -> str:
        """The backbone id this calibration's distances are of: the recorded one, else the authors' DreamSim."""
        return self.backbone or AUTHORS_BACKBONE

    def mismatch(self, backbone: str) -> str | None:
        """None if this calibration was fitted for the backbone id ``backbone``, else why W1KP must not use it."""
        if self.fitted_for == backbone:
            return None
        unrecorded = (" (the file records no backbone, so it is taken as the authors' DreamSim_l2 CDF)"
                      if self.backbone is None else "")
        return (f"the W1KP calibration {self.source or '(in memory)'} was fitted for backbone {self.fitted_for!r}"
                f"{unrecorded}, not for --w1kp-backbone {backbone!r}: fit one for it with `culturelens calibrate "
                f"--backbone {backbone}`, or score with --w1kp-backbone {self.fitted_for}")

    @classmethod
    def load(cls, source: str | Path) -> Calibration:
        """From a path or an http(s) URL: an ``.npz`` with arrays ``cdf_x`` and ``cdf_y``, or the authors'
        ``torch.save`` of the tuple ``(cdf_x, cdf_y)`` (``cdf-xy.pt``), unpickled with only numpy's array
        globals allowed. Records the file's sha256, and the backbone (id and key) an ``.npz`` written by ``save``
        names; the authors' files name none."""
        source = str(source)
        try:
            if re.match(r"https?://", source):
                with urllib.request.urlopen(source, timeout=60) as response:  # noqa: S310 (http(s) only)
                    raw = response.read()
            else:
                raw = Path(source).read_bytes()
            if _is_torch_archive(raw):
                (cdf_x, cdf_y), backbone, backbone_key = _torch_saved_pair(raw), None, None
            else:
                cdf_x, cdf_y, backbone, backbone_key = _npz_arrays(raw)
        except (OSError, zipfile.BadZipFile) as error:
            raise ValueError(f"calibration {source}: cannot be read as an .npz of cdf_x, cdf_y or the authors' "
                             f".pt ({error})") from None
        except ValueError as error:
            raise ValueError(f"calibration {source}: {error}") from None
        return cls(cdf_x, cdf_y, source, hashlib.sha256(raw).hexdigest(), backbone, backbone_key)

    @classmethod
    def fit(cls, distances: np.ndarray, source: str = "fitted", backbone: str | None = None,
            backbone_key: str | None = None) -> Calibration:
        """The empirical CDF of a reference sample of distances (of the backbone ``backbone``, whose
        ``Backbone.key`` is ``backbone_key``): F(x) = share of the sample <= x."""
        x = np.sort(np.asarray(distances, dtype=np.float64).ravel())
        if len(x) < 2:
            raise ValueError("a calibration needs at least two reference distances")
        values, counts = np.unique(x, return_counts=True)
        return cls(values, np.cumsum(counts) / len(x), source, backbone=backbone, backbone_key=backbone_key)

    @classmethod
    def fit_authors_code(cls, distances: np.ndarray, source: str = "fitted", backbone: str | None = None,
                         backbone_key: str | None = None) -> Calibration:
        """The authors' fit (castorini/w1kp, w1kp/utils.py, ``compute_cdf``): the sample padded with 0 and 1,
        sorted, the i-th of the N + 2 values (from 0) at i / (N + 2)."""
        sample = np.asarray(distances, dtype=np.float64).ravel()
        if len(sample) < 1:
            raise ValueError("a calibration needs at least one reference distance")
        x = np.sort(np.concatenate([[0.0], sample, [1.0]]))
        return cls(x, np.arange(len(x)) / len(x), source, backbone=backbone, backbone_key=backbone_key)

    def save(self, path: Path) -> None:
        """An ``.npz`` of ``cdf_x``, ``cdf_y`` and, where known, ``backbone`` and ``backbone_key`` (strings)."""
        names = {name: np.str_(value) for name in ("backbone", "backbone_key")
                 if (value := getattr(self, name)) is not None}
        np.savez(path, cdf_x=np.asarray(self.cdf_x), cdf_y=np.asarray(self.cdf_y), **names)


_NUMPY_ARRAY_GLOBALS = {  # what a pickled float ndarray needs (protocol 2, as torch.save writes it)
    ("numpy.core.multiarray", "_reconstruct"),  # written by numpy < 2 (the authors' file)
    ("numpy._core.multiarray", "_reconstruct"),  # written by numpy >= 2
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # the array's bytes, pickled as a latin-1 string
}


class _NumpyArraysUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays and nothing else: any other global, and any torch storage, is refused before
    it is looked up, so no pickled code runs."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _NUMPY_ARRAY_GLOBALS:
            raise ValueError(f"refused to unpickle the global {module}.{name} (only numpy arrays are allowed)")
        if name == "_reconstruct":  # numpy >= 2 renamed numpy.core to numpy._core: one function, two names
            return _reconstruct
        return super().find_class(module, name)

    def persistent_load(self, pid):
        raise ValueError("refused a torch tensor: the calibration must be a tuple of two numpy arrays")


def _is_torch_archive(raw: bytes) -> bool:
    """Whether ``raw`` is a zip written by ``torch.save`` (one ``data.pkl`` in a top folder) rather than an ``.npz``."""
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        return False
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        return any(n == "data.pkl" or n.endswith("/data.pkl") for n in archive.namelist())


def _torch_saved_pair(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(cdf_x, cdf_y)`` from the authors' ``torch.save((cdf_x, cdf_y))`` zip, by a restricted unpickler."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        pickles = [n for n in archive.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"a torch.save archive has one data.pkl, this one has {len(pickles)}")
        payload = archive.read(pickles[0])
    try:
        loaded = _NumpyArraysUnpickler(io.BytesIO(payload)).load()
    except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError, KeyError) as error:
        raise ValueError(f"its data.pkl is not a pickled tuple of numpy arrays ({error})") from None
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and all(isinstance(a, np.ndarray) for a in loaded)):
        items = f" of {len(loaded)} items" if isinstance(loaded, (tuple, list)) else ""
        raise ValueError(f"holds a {type(loaded).__name__}{items}, not the tuple (cdf_x, cdf_y) of two numpy arrays")
    if any(a.dtype.kind not in "fiu" for a in loaded):
        raise ValueError("cdf_x and cdf_y must be numeric arrays")
    return loaded


def _npz_arrays(raw: bytes) -> tuple[np.ndarray, np.ndarray, str | None, str | None]:
    """``(cdf_x, cdf_y, backbone, backbone_key)`` from an ``.npz`` (never unpickled); None for a name it lacks."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        missing = {"cdf_x", "cdf_y"} - set(data.files)
        if missing:
            raise ValueError(f"lacks the arrays {sorted(missing)}")
        names = []
        for name in ("backbone", "backbone_key"):
            value = data[name] if name in data.files else None
            if value is not None and (value.ndim != 0 or value.dtype.kind != "U"):
                raise ValueError(f"its {name!r} must be one string, not a {value.dtype} array of shape {value.shape}")
            names.append(None if value is None else str(value))
        return data["cdf_x"], data["cdf_y"], *names


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, k=1)


def eta_mean(normalized: np.ndarray) -> float:
    """Mean normalised distance over the C(n, 2) pairs of one prompt's images (the paper's eta_mean)."""
    i, j = _pairs(len(normalized))
    if len(i) == 0:
        raise ValueError("eta_mean needs at least two images")
    return float(normalized[i, j].mean())


def eta_mean_authors_code(distances: np.ndarray, calibration: Calibration) -> float:
    """The authors' eta_mean (castorini/w1kp, w1kp/model/distance.py, ``ListwiseDreamSimDistanceMeasure.measure``,
    ``reduce="mean"``, normalised in w1kp/run/measure_variability.py): F(mean raw d over the pairs with
    d > 1e-4). Where no pair exceeds 1e-4 (identical images) their mean is empty (NaN, and the prompt
    drops out of their average); here it is the mean over all pairs."""
    i, j = _pairs(len(distances))
    if len(i) == 0:
        raise ValueError("eta_mean needs at least two images")
    pairs = distances[i, j]
    kept = pairs[pairs > AUTHORS_SELF_DISTANCE]
    return float(calibration.normalize((kept if len(kept) else pairs).mean()))


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


def eta_k_curve_authors_code(distances: np.ndarray, calibration: Calibration, *, n_permutations: int = 1000,
                             seed: int = 0, exact_limit: int = 2000) -> EtaCurve:
    """The authors' eta_k (castorini/w1kp, w1kp/model/distance.py, ``ListwiseDreamSimDistanceMeasure.measure``,
    ``reduce="reusability"``, normalised in w1kp/run/measure_variability.py): F(E[min raw d]) over k-subsets,
    normalising after averaging the raw minima (no 1e-4 drop there). E[min raw d] is ``eta_k_curve`` of the raw
    distances; its standard error se becomes (F(m + se) - F(m - se)) / 2, F's secant slope times se."""
    raw = eta_k_curve(distances, n_permutations=n_permutations, seed=seed, exact_limit=exact_limit)
    error = (calibration.normalize(raw.eta + raw.standard_error)
             - calibration.normalize(raw.eta - raw.standard_error)) / 2
    return EtaCurve(raw.k, calibration.normalize(raw.eta), error, raw.exact)


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


def supported(prompts: np.ndarray) -> np.ndarray:
    """Which k of a model's W1KP_k curve count for reusability (Sec. 4.1), given ``prompts``, the number of prompts
    the mean at each k is over (those with at least k images): those reached by at least ``MIN_PROMPTS`` (2)
    prompts and by at least ``MIN_SHARE`` (half) of the prompts at k = 2 (the most). So a k that only one
    prompt with extra seeds reaches (others refused, or generated fewer) cannot decide the model's reusability."""
    prompts = np.asarray(prompts)
    return prompts >= max(MIN_PROMPTS, MIN_SHARE * prompts.max())


class W1KP(Metric):
    """W1KP score of each prompt over its images (seeds), its W1KP_k curve, and the model's reusability.

    ``variant`` "paper" follows the paper's definitions (Sec. 2.2, 4.1); "authors_code" the authors' code
    (``eta_mean_authors_code``, ``eta_k_curve_authors_code``). A calibration fitted for another backbone than
    ``backbone`` is a ValueError (``Calibration.mismatch``). The version records the variant, the sha256 of the
    calibration file and the backbone it was fitted for (noting where the file records none: the authors').

    Failure (not every declared image there): the prompt is not scored, and its curve is left out; W1KP has no
    better end, so its table lists a row with such a prompt apart instead of counting a worst value
    (``benchmark.tracks.variability``)."""

    def __init__(self, calibration: Calibration, backbone: str = AUTHORS_BACKBONE, variant: str = "paper",
                 n_permutations: int = 1000, seed: int = 0):
        if variant not in ("paper", "authors_code"):
            raise ValueError(f"W1KP variant must be 'paper' or 'authors_code', not {variant!r}")
        if reason := calibration.mismatch(backbone):
            raise ValueError(reason)
        self.calibration, self.variant = calibration, variant
        self.n_permutations, self.seed = n_permutations, seed
        self.need = Need(backbone, "image")
        self.suffix = "" if variant == "paper" else "_authors_code"
        label = ("W1KP score, 1 - mean normalised pair distance" if variant == "paper"
                 else "W1KP score, 1 - normalised mean distance (authors' code)")
        # authors_code became whole (1e-4 drop, F(E[min d]) curve) in 2; both moved on when a prompt whose declared
        # images are not all there stopped being scored over the images sent (3 and 2)
        base = "2" if variant == "paper" else "3"
        sha = f" sha256 {calibration.sha256}" if calibration.sha256 else ""
        assumed = ", assumed: the file records no backbone" if calibration.backbone is None else ""
        version = f"{base} ({variant}; calibration{sha} for {calibration.fitted_for}{assumed})"
        # Higher W1KP means more alike images across seeds, less variability; neither end is better (the track
        # orders its rows, never ranks them): higher_is_better False only sets the order, more variable first.
        self.info = MetricInfo(f"w1kp{self.suffix}", label, "variability", version, False, "W1KP score", 0.0, 1.0,
                               f"{CITATION}, Sec. 2.2", (self.need,), level="prompt")

    def check(self, backbones: dict) -> str | None:
        """Where the calibration records its backbone's weights (``Backbone.key``), the loaded backbone must have
        them: a registry id pointed at other weights gets other distances."""
        loaded = backbones.get(self.need.backbone)
        recorded = self.calibration.backbone_key
        if loaded is None or recorded is None or loaded.key == recorded:
            return None
        return (f"the W1KP calibration {self.calibration.source} was fitted on backbone {self.need.backbone!r} "
                f"with weights {recorded}, but {self.need.backbone!r} loads {loaded.key}: fit it again with "
                "`culturelens calibrate`")

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
                eta = eta_mean_authors_code(distances, self.calibration)
            score = 1.0 - eta
            rows.append({"prompt_id": prompt_id, "value": score,
                         "note": f"{level(score)} similarity across {len(distances)} seeds"})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])

    def curves(self, inputs: Inputs) -> pd.DataFrame:
        frames = []
        for prompt_id, distances in self._distances(inputs):
            if self.variant == "paper":
                curve = eta_k_curve(self.calibration.normalize(distances), n_permutations=self.n_permutations,
                                    seed=self.seed)
            else:
                curve = eta_k_curve_authors_code(distances, self.calibration, n_permutations=self.n_permutations,
                                                 seed=self.seed)
            frames.append(pd.DataFrame({"prompt_id": prompt_id, "x": curve.k, "value": 1.0 - curve.eta,
                                        "standard_error": curve.standard_error}))
        return pd.concat(frames, ignore_index=True)

    def derived(self, aggregates: list[dict], curves: pd.DataFrame | None) -> list[dict]:
        """Reusability (Sec. 4.1): the first k where the model's mean W1KP_k curve (this variant's) reaches 0.85,
        among the k that enough prompts reach (``supported``: n at k >= max(2, half of n at k = 2)).

        Where no supported k reaches it, the model was never used up within the seeds measured: its reusability
        is right-censored, known only to exceed the largest supported k_max. The row then has no value and
        ``ci_low`` = k_max, the bound it exceeds (``benchmark.results``: a censored row), so that it is shown as
        "> k_max" and ranked as the most reusable rather than left out. With no supported k at all, nothing is
        known: no value and no bound."""
        if curves is None or curves.empty:
            return []
        model_curve = curves.sort_values("x")
        prompts = model_curve["n"].to_numpy()
        counted = model_curve[supported(prompts)]
        k = reusability(counted["x"].to_numpy(), counted["value"].to_numpy())
        needed = max(MIN_PROMPTS, math.ceil(MIN_SHARE * prompts.max()))
        k_max = int(counted["x"].max()) if len(counted) else None
        within = f"> {k_max} where no k up to {k_max} reaches it" if k_max is not None else \
            "empty: no k has enough prompts"
        return [{"track": self.info.track, "metric": f"w1kp_reusability{self.suffix}", "slice": "overall",
                 "slice_value": "all", "value": float(k) if k is not None else None,
                 "ci_low": float(k_max) if k is None and k_max is not None else None, "ci_high": None,
                 "n": int(prompts.max()), "higher_is_better": True, "metric_version": self.info.version,
                 "metric_label": f"W1KP reusability: seeds until W1KP_k >= {HIGH}, over the k that at least "
                                 f"{needed} of the {int(prompts.max())} prompts reach ({within})"}]

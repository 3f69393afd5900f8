"""Prompt-image alignment with CLIP: cosine similarity and CLIPScore.

CLIPScore is Eq. 1 of Hessel, Holtzman, Forbes, Le Bras, Choi, "CLIPScore: A
Reference-free Evaluation Metric for Image Captioning" (EMNLP 2021,
arXiv:2104.08718): ``CLIP-S(c, v) = w * max(cos(c, v), 0)`` with ``w = 2.5``.
Some libraries report ``100 * cos`` under the same name; CultureLens keeps two
named metrics instead: ``clip_cosine`` (raw cosine, in [-1, 1]) and
``clip_score`` (Hessel's scale, in [0, 2.5]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HESSEL_WEIGHT = 2.5


@dataclass(frozen=True)
class MetricInfo:
    """What a metric measures and how to read it."""

    name: str
    label: str
    track: str
    higher_is_better: bool
    low: float
    high: float
    citation: str


CLIP_COSINE = MetricInfo("clip_cosine", "CLIP cosine (prompt, image)", "awareness", True, -1.0, 1.0,
                         "Radford et al., arXiv:2103.00020")
CLIP_SCORE = MetricInfo("clip_score", "CLIPScore (2.5 max(cos, 0))", "awareness", True, 0.0, HESSEL_WEIGHT,
                        "Hessel et al., arXiv:2104.08718, Eq. 1")


def cosine_similarity(image_embeddings: np.ndarray, text_embeddings: np.ndarray) -> np.ndarray:
    """Row-wise cosine between paired (N, D) image and text embeddings -> (N,)."""
    a = np.asarray(image_embeddings, dtype=np.float64)
    b = np.asarray(text_embeddings, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"expected paired (N, D) embeddings, got {a.shape} and {b.shape}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    if np.any(norms == 0):
        raise ValueError("an embedding has zero norm: cosine is undefined")
    return np.einsum("nd,nd->n", a, b) / norms


def clip_score(cosine: np.ndarray, weight: float = HESSEL_WEIGHT) -> np.ndarray:
    """CLIPScore of Hessel et al. (Eq. 1): ``weight * max(cosine, 0)``, in [0, weight]."""
    return weight * np.maximum(np.asarray(cosine, dtype=np.float64), 0.0)

"""Prompt-image alignment with CLIP: cosine similarity and CLIPScore.

CLIPScore is Eq. 1 of Hessel, Holtzman, Forbes, Le Bras, Choi, "CLIPScore: A
Reference-free Evaluation Metric for Image Captioning" (EMNLP 2021,
arXiv:2104.08718): ``CLIP-S(c, v) = w * max(cos(c, v), 0)`` with ``w = 2.5``.
Some libraries report ``100 * cos`` under the same name; CultureLens keeps two
named metrics instead: ``clip_cosine`` (raw cosine, in [-1, 1]) and
``clip_score`` (Hessel's scale, in [0, 2.5]).
"""

from __future__ import annotations

import numpy as np

from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need

HESSEL_WEIGHT = 2.5
TRUNCATED_NOTE = "prompt longer than the text encoder's context: scored on its first tokens"


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


class ClipCosine(Metric):
    """Cosine between each image and its prompt under a CLIP backbone. Failure (a declared image missing): -1."""

    def __init__(self, backbone: str = "clip-vit-b-32"):
        self.backbone = backbone
        self.info = MetricInfo(
            "clip_cosine", "CLIP cosine (prompt, image)", "awareness", "1", True, "cosine", -1.0, 1.0,
            "Radford et al., arXiv:2103.00020", (Need(backbone, "image"), Need(backbone, "text")))

    def cosines(self, inputs: Inputs) -> np.ndarray:
        image, text = self.info.needs
        return cosine_similarity(inputs.features[image], inputs.features[text])

    def notes(self, inputs: Inputs) -> list[str | None]:
        return [TRUNCATED_NOTE if cut else None for cut in inputs.truncated[self.backbone]]

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        return self.cosines(inputs), self.notes(inputs)


class ClipScore(ClipCosine):
    """CLIPScore (Hessel et al., Eq. 1) of each image for its prompt. Failure (a declared image missing): 0."""

    def __init__(self, backbone: str = "clip-vit-b-32"):
        super().__init__(backbone)
        self.info = MetricInfo(
            "clip_score", "CLIPScore (2.5 max(cos, 0))", "awareness", "1", True, "CLIPScore", 0.0, HESSEL_WEIGHT,
            "Hessel et al., arXiv:2104.08718, Eq. 1", self.info.needs)

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        return clip_score(self.cosines(inputs)), self.notes(inputs)

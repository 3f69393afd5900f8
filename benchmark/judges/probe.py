"""CAIRE's encoder baseline (Yayavaram et al., arXiv:2506.09109, Sec. 5.1): probe prompts
"This image is {level} to {culture}" for the five relevance levels; the score is the level whose probe is
most similar to the image, ``s = argmax_k cos(f(I), g(probe_k))``, on any CultureLens backbone with a text
encoder (the paper: CLIP ViT-B/32 and mSigLIP). The entity text is not used: the baseline has no retrieval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from benchmark.encoders.base import Backbone
from benchmark.judges.base import CAIRE_RUBRIC, Judge, Judgement, JudgeRequest, Rubric


def probe_texts(label: str, rubric: Rubric = CAIRE_RUBRIC) -> list[str]:
    """The probes for one label, in level order. Levels are phrased as Sec. 5.1 lists them ("Not relevant",
    "Minimally relevant", ...): the rubric's names with only the first letter capitalised."""
    return [f"This image is {level.name[:1].upper()}{level.name[1:].lower()} to {label}" for level in rubric.levels]


def probe_scores(image_embeddings: np.ndarray, probe_embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) images and (N, L, D) probes (L levels) -> (score in 1..L, (N, L) cosines) per image; ties go to
    the lower level."""
    images = np.asarray(image_embeddings, dtype=np.float64)
    probes = np.asarray(probe_embeddings, dtype=np.float64)
    images = images / np.linalg.norm(images, axis=-1, keepdims=True)
    probes = probes / np.linalg.norm(probes, axis=-1, keepdims=True)
    cosines = np.einsum("nd,nld->nl", images, probes)
    return cosines.argmax(axis=1) + 1, cosines


class ProbeJudge(Judge):
    def __init__(self, backbone: Backbone):
        if type(backbone).embed_texts is Backbone.embed_texts:
            raise ValueError(f"backbone {backbone.id} ({backbone.spec.uid}) has no text encoder: the probe "
                             "baseline needs one (a CLIP or SigLIP backbone)")
        self.backbone = backbone
        self.id = f"probe:{backbone.id}={backbone.key}"

    def judge_batch(self, requests: Sequence[JudgeRequest], rubric: Rubric = CAIRE_RUBRIC) -> list[Judgement]:
        if not requests:
            return []
        pixels = torch.stack([self.backbone.prepare(r.image.convert("RGB"), "image") for r in requests])
        images = self.backbone.embed(pixels)
        labels = sorted({r.label for r in requests})
        by_label = dict(zip(labels, self.backbone.embed_texts([t for label in labels
                                                               for t in probe_texts(label, rubric)])
                            .reshape(len(labels), len(rubric.levels), -1)))
        scores, cosines = probe_scores(images, np.stack([by_label[r.label] for r in requests]))
        return [Judgement(int(s), similarities=tuple(float(c) for c in row)) for s, row in zip(scores, cosines)]

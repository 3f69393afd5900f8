"""CAIRE's encoder baseline (Yayavaram et al., arXiv:2506.09109, Sec. 5.1): probe prompts
"This image is {level} to {culture}" for the five relevance levels; the score is the level whose probe is
most similar to the image, ``s = argmax_k cos(f(I), g(probe_k))``, on any CultureLens backbone with a text
encoder (the paper: CLIP ViT-B/32 and mSigLIP). The entity text is not used: the baseline has no retrieval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from benchmark.encoders.base import Backbone
from benchmark.judges.base import CAIRE_RUBRIC, Context, Judge, Rubric


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
    evidence = "similarities"

    def __init__(self, backbone: Backbone):
        if type(backbone).embed_texts is Backbone.embed_texts:
            raise ValueError(f"backbone {backbone.id} ({backbone.spec.uid}) has no text encoder: the probe "
                             "baseline needs one (a CLIP or SigLIP backbone)")
        self.backbone = backbone
        self.id = f"probe:{backbone.id}={backbone.key}"

    def prompt(self, context: Context) -> str:
        """The probes the image is compared with, one per line (the entity text is not read)."""
        request, rubric = context
        return "\n".join(probe_texts(request.label, rubric))

    def produce_batch(self, images: Sequence[Image.Image], contexts: Sequence[Context]) -> list[np.ndarray]:
        """cos(image, probe_k) for each level k of each context's rubric (Sec. 5.1); each label's probes are
        embedded once per batch."""
        if not contexts:
            return []
        pixels = torch.stack([self.backbone.prepare(image.convert("RGB"), "image") for image in images])
        embedded = self.backbone.embed(pixels)
        groups = list(dict.fromkeys((request.label, rubric) for request, rubric in contexts))
        texts = [probe_texts(label, rubric) for label, rubric in groups]
        vectors = self.backbone.embed_texts([text for probes in texts for text in probes])
        starts = np.cumsum([0] + [len(probes) for probes in texts])
        probes = {group: vectors[starts[i]:starts[i + 1]] for i, group in enumerate(groups)}
        return [probe_scores(image[None], probes[(request.label, rubric)][None])[1][0]
                for image, (request, rubric) in zip(embedded, contexts)]

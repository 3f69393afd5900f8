"""Features: what the metrics read, produced below them and cached by content.

- ``Need`` (here): a request for embeddings of one kind from one backbone; metrics declare their needs and the
  harness computes their union once.
- ``embeddings``: the embedding pipeline (``compute_features``, ``embed_texts``): images decoded once, embedded
  once per backbone, through the embedding cache (``benchmark.cache``).
- ``producers``: models that turn (image, context) into an array, such as a vision-language model's
  probabilities over a closed set of answers (diversity's ``VLMTagger``, relevance's judges), cached like
  embeddings: by image sha256, model id and revision, prompt hash and label.

Nothing here imports ``benchmark.metrics``: metrics sit above their features.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Need:
    """Features of one kind from one backbone: ``image`` (N, D), ``grid`` (N, grid^2, D) or ``text``
    (the embedding of each image's prompt, (N, D)); of the submitted images, or (``of="reference"``) of the
    dataset's reference images (``Inputs.references``)."""

    backbone: str
    kind: Literal["image", "grid", "text"]
    grid: int = 4
    of: Literal["generated", "reference"] = "generated"

    @property
    def name(self) -> str:
        return f"grid{self.grid}x{self.grid}" if self.kind == "grid" else self.kind

    def __str__(self) -> str:
        return f"{self.backbone}/{self.name}" + ("/reference" if self.of == "reference" else "")

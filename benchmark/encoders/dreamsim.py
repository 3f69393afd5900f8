"""DreamSim perceptual embeddings (Fu, Tamir, Sundaram, Chai, Zhang, Dekel, Isola, "DreamSim: Learning New
Dimensions of Human Visual Similarity using Synthetic Data", NeurIPS 2023, arXiv:2306.09344), the features of
W1KP's DreamSim_l2 distance. Needs the ``dreamsim`` package (a dependency of culturelens; ``pip install dreamsim``
where it was left out); its weights download on first use into ``weights`` (a folder) or
DreamSim's default ``./models``.
"""

from __future__ import annotations

import torch
from torchvision import transforms

from benchmark.encoders.base import (
    Backbone,
    ComposePreparation,
    Preparation,
    how_to_provide,
)
from benchmark.encoders.spec import BackboneSpec, BackboneUnavailable

IMAGE_SIZE = 224  # DreamSim's preprocessing: bicubic resize to 224 x 224, values in [0, 1]


class DreamSimBackbone(Backbone):
    def __init__(self, backbone_id: str, spec: BackboneSpec, device: str | None = None):
        super().__init__(backbone_id, spec, device)
        try:
            from dreamsim import dreamsim
        except ImportError:
            raise BackboneUnavailable(f"backbone {backbone_id!r} needs the package `dreamsim` (a dependency of "
                                      "culturelens, missing here): pip install dreamsim") from None
        try:
            self.model, _ = dreamsim(pretrained=True, device=self.device, cache_dir=spec.weights or "./models",
                                     dreamsim_type=spec.model)
        except Exception as error:  # noqa: BLE001 - downloads, hub and checkpoint errors all mean: unavailable
            raise BackboneUnavailable(f"cannot load backbone {backbone_id!r} ({spec.uid}): {type(error).__name__}: "
                                      f"{str(error)[:200]} " + how_to_provide(backbone_id, spec)) from None
        self.revision = f"dreamsim-{spec.model}"
        self._transform = transforms.Compose([
            transforms.Resize((IMAGE_SIZE, IMAGE_SIZE), interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.ToTensor()])
        self._preparation = ComposePreparation.of(self._transform)

    @property
    def preprocess_version(self) -> str:
        return f"dreamsim-resize{IMAGE_SIZE}-bicubic"

    @property
    def transform(self):
        return self._transform

    @property
    def preparation(self) -> Preparation:
        return self._preparation

    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.embed(pixels)

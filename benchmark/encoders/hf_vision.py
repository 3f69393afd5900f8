"""DINO-family image encoders through ``transformers`` (DINOv2: Oquab et al., arXiv:2304.07193; DINOv3:
Siméoni et al., arXiv:2508.10104).

The global feature is the model's pooled output (the layer-normed CLS token), or with
``pooling="mean"`` in the spec the mean of all output tokens, CLS included, as the CRT
authors' code does (compute_VR.py, ``DINOEmbedder``: the mean of timm's normed
``forward_features``); the ``grid`` need embeds each tile of a 4x4 grid as its own image,
as the CRT paper's visual-reuse score does (Eq. 2 of arXiv:2511.11435).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from PIL import Image
from transformers import AutoImageProcessor, AutoModel

from benchmark.encoders.base import Backbone, file_digest, how_to_provide
from benchmark.encoders.spec import BackboneSpec, BackboneUnavailable


class _ProcessorTransform:
    """A transformers image processor as a picklable PIL -> (C, H, W) transform."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, image: Image.Image) -> torch.Tensor:
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0]


class HFVisionBackbone(Backbone):
    def __init__(self, backbone_id: str, spec: BackboneSpec, device: str | None = None):
        super().__init__(backbone_id, spec, device)
        try:
            self.processor = AutoImageProcessor.from_pretrained(spec.model, revision=spec.revision)
            model = AutoModel.from_pretrained(spec.model, revision=spec.revision)
        except (OSError, ValueError) as error:
            raise BackboneUnavailable(f"cannot load backbone {backbone_id!r} ({spec.uid}): "
                                      f"{str(error).splitlines()[0][:240]} " + how_to_provide(backbone_id, spec)) from None
        self.model = model.to(self.device).eval()
        local = Path(spec.model)
        if local.is_dir():
            weights = sorted(local.glob("*.safetensors")) + sorted(local.glob("*.bin"))
            self.revision = "sha256:" + hashlib.sha256("".join(file_digest(w) for w in weights).encode()).hexdigest()[:16]
        else:
            self.revision = getattr(model.config, "_commit_hash", None) or spec.revision or "main"
        settings = json.dumps(self.processor.to_dict(), sort_keys=True, default=str)
        self._preprocess_version = hashlib.sha256(settings.encode()).hexdigest()[:12]

    @property
    def preprocess_version(self) -> str:
        return f"hf-{self._preprocess_version}"

    @property
    def transform(self) -> _ProcessorTransform:
        return _ProcessorTransform(self.processor)

    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        output = self.model(pixel_values=pixels)
        if self.spec.pooling == "mean":
            return output.last_hidden_state.mean(dim=1)
        pooled = getattr(output, "pooler_output", None)
        return pooled if pooled is not None else output.last_hidden_state[:, 0]

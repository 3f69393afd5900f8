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

from benchmark.digests import file_digest
from benchmark.encoders.base import Backbone, Preparation, how_to_provide
from benchmark.encoders.spec import (
    BackboneSpec,
    BackboneUnavailable,
)
from benchmark.metric_marks import PREPARED_ON_DEVICE


class _ProcessorTransform:
    """A transformers image processor as a picklable PIL -> (C, H, W) transform."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, image: Image.Image) -> torch.Tensor:
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0]


class ProcessorPreparation(Preparation):
    """The ``Preparation`` of a torchvision-backed transformers image processor (``backend == "torchvision"``,
    e.g. DINOv2's BitImageProcessor in transformers 5), run on the device: the processor itself on the uint8
    pixels there (its ``device`` argument), rescaling and normalisation off (RGB, resize, centre crop: uint8 out),
    then its rescale and normalisation with constants made once per device. On the CPU the inputs are the
    processor's own bit for bit (the same torchvision operations on the same uint8 tensor); on a GPU torch resizes
    in floating point where the CPU resizes uint8 in fixed point, so a pixel may land a few levels away, and these
    inputs have their own cache key (``PREPARED_ON_DEVICE``)."""

    tag = PREPARED_ON_DEVICE

    def __init__(self, processor):
        super().__init__(_ProcessorTransform(processor),
                         "hf:" + json.dumps(processor.to_dict(), sort_keys=True, default=str))
        self.processor = processor
        self._constants: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def of(cls, processor) -> Preparation | None:
        if getattr(processor, "backend", None) != "torchvision" or not hasattr(processor, "rescale_and_normalize"):
            return None
        return cls(processor)

    def images(self, pixels: torch.Tensor) -> torch.Tensor:
        p = self.processor
        staged = p(images=list(pixels), do_rescale=False, do_normalize=False, return_tensors="pt",
                   device=pixels.device)["pixel_values"]
        if not (p.do_rescale and p.do_normalize):
            return p.rescale_and_normalize(staged, p.do_rescale, p.rescale_factor, p.do_normalize,
                                           tuple(p.image_mean), tuple(p.image_std))
        # The processor's own fused step, (x - mean / factor) / (std / factor) in float32, without its check that
        # no std is zero: on a GPU that check reads a device value back, so every batch would wait for the
        # batches queued before it. The constants are computed as the processor computes them, on the device,
        # once per device: the result is the processor's bit for bit (tests/test_encoder.py).
        if staged.device not in self._constants:
            if 0 in p.image_std:
                raise ValueError(f"{self.key}: an image_std of 0 would divide by zero")
            self._constants[staged.device] = tuple(
                (torch.tensor(values, device=staged.device) * (1.0 / p.rescale_factor)).view(-1, 1, 1)
                for values in (tuple(p.image_mean), tuple(p.image_std)))
        mean, std = self._constants[staged.device]
        return staged.to(torch.float32).sub_(mean).div_(std)


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
        self._preparation = ProcessorPreparation.of(self.processor)

    @property
    def preprocess_version(self) -> str:
        return f"hf-{self._preprocess_version}"

    @property
    def transform(self) -> _ProcessorTransform:
        return _ProcessorTransform(self.processor)

    @property
    def preparation(self) -> Preparation:
        return self._preparation or super().preparation

    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        output = self.model(pixel_values=pixels)
        if self.spec.pooling == "mean":
            return output.last_hidden_state.mean(dim=1)
        pooled = getattr(output, "pooler_output", None)
        return pooled if pooled is not None else output.last_hidden_state[:, 0]

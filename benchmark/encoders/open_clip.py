"""open_clip image and text encoders: CLIP, SigLIP and HPSv2-style fine-tunes.

Loads an open_clip architecture with weights from a pretrained tag (``openai``:
Radford et al., arXiv:2103.00020), a local checkpoint (``.safetensors`` or a
weights-only ``torch.load``), or a file of a Hub model repo (``hf-file:``, e.g.
the HPS v2 checkpoint of Wu et al., arXiv:2306.09341). A local model-config
JSON defines architectures open_clip does not ship, which is how the tests
build a tiny random CLIP offline.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import numpy as np
import open_clip
import torch
from huggingface_hub import hf_hub_download

from benchmark.digests import file_digest
from benchmark.encoders.base import Backbone, Preparation, how_to_provide
from benchmark.encoders.spec import LOCAL_WEIGHTS, BackboneSpec, BackboneUnavailable

HF_FILE = "hf-file:"


def _resolve_weights(backbone_id: str, spec: BackboneSpec) -> tuple[str | None, str]:
    """(what to pass to open_clip as ``pretrained``, revision string)."""
    weights = spec.weights
    if weights and weights.startswith(HF_FILE):
        repo, _, filename = weights[len(HF_FILE):].rpartition("/")
        try:
            path = hf_hub_download(repo, filename, revision=spec.revision)
        except Exception as error:  # noqa: BLE001 - any Hub or network failure means: not available here
            raise BackboneUnavailable(f"cannot fetch {filename} of {repo} for backbone {backbone_id!r}: "
                                      f"{type(error).__name__}. " + how_to_provide(backbone_id, spec)) from None
        return path, "sha256:" + file_digest(Path(path))[:16]
    if weights and weights.endswith(LOCAL_WEIGHTS):
        if not Path(weights).is_file():
            raise BackboneUnavailable(f"checkpoint {weights} of backbone {backbone_id!r} ({spec.model}) does not "
                                      "exist. " + how_to_provide(backbone_id, spec))
        return weights, "sha256:" + file_digest(Path(weights))[:16]
    if weights and weights not in open_clip.list_pretrained_tags_by_model(spec.model):
        raise BackboneUnavailable(f"open_clip has no pretrained tag {weights!r} for {spec.model} "
                                  f"(backbone {backbone_id!r})")
    return weights, f"tag:{weights}"


class ComposePreparation(Preparation):
    """The ``Preparation`` of a torchvision ``Compose`` that ends in ToTensor and Normalize (open_clip's):
    ``stage`` runs the PIL steps before them (resize, crop, RGB) and keeps the uint8 pixels; ``finish`` converts
    as ToTensor (x / 255 in float32) and Normalize ((x - mean) / std) do, on whatever device the pixels are.
    Every step is one IEEE operation per element (division by a tensor: a CUDA division by a Python number is
    a multiplication by its reciprocal), so the result is the transform's own bit for bit."""

    def __init__(self, transform, pil_steps: list, normalize):
        super().__init__(transform, "compose:" + repr(pil_steps))
        self.pil_steps = pil_steps
        self.mean = torch.tensor(normalize.mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(normalize.std, dtype=torch.float32).view(-1, 1, 1)
        self._constants: dict[torch.device, tuple[torch.Tensor, ...]] = {}

    @classmethod
    def of(cls, transform) -> Preparation | None:
        """The preparation of ``transform`` if it has that shape, else None."""
        from torchvision import transforms

        steps = list(getattr(transform, "transforms", []))
        at = next((i for i, step in enumerate(steps) if isinstance(step, transforms.ToTensor)), None)
        if at is None or len(steps) != at + 2 or not isinstance(steps[-1], transforms.Normalize) \
                or steps[-1].inplace:
            return None
        return cls(transform, steps[:at], steps[-1])

    def stage(self, images) -> torch.Tensor:
        staged = []
        for image in images:
            for step in self.pil_steps:
                image = step(image)
            if getattr(image, "mode", None) != "RGB":
                raise TypeError(f"{self.key}: expected an RGB PIL image before ToTensor, got {type(image).__name__}")
            staged.append(torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1))
        return torch.stack(staged)

    def finish(self, staged: torch.Tensor) -> torch.Tensor:
        if staged.is_floating_point():
            return staged
        # The constants are copied to a device once: a copy from pageable memory waits for the device's queue,
        # which would keep the next batch from being queued while the last one runs.
        if staged.device not in self._constants:
            self._constants[staged.device] = tuple(t.to(staged.device) for t in
                                                   (torch.tensor(255.0), self.mean, self.std))
        scale, mean, std = self._constants[staged.device]
        return (staged.to(torch.float32) / scale - mean) / std


class OpenClipBackbone(Backbone):
    def __init__(self, backbone_id: str, spec: BackboneSpec, device: str | None = None):
        super().__init__(backbone_id, spec, device)
        if spec.config:
            if not Path(spec.config).is_file():
                raise BackboneUnavailable(f"open_clip model config {spec.config} of backbone {backbone_id!r} "
                                          "does not exist")
            open_clip.add_model_config(spec.config)
        if spec.model not in open_clip.list_models():
            raise BackboneUnavailable(f"open_clip has no model named {spec.model!r} (backbone {backbone_id!r}); "
                                      "give its model-config JSON as 'config'")
        pretrained, self.revision = _resolve_weights(backbone_id, spec)
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                spec.model, pretrained=pretrained, device=self.device, weights_only=True)
        except (RuntimeError, OSError, ValueError) as error:
            raise BackboneUnavailable(
                f"cannot load backbone {backbone_id!r} ({spec.uid}): "
                f"{textwrap.shorten(str(error), 240, placeholder=' ...')} " + how_to_provide(backbone_id, spec)
            ) from None
        self.model = model.eval()
        self.preprocess = preprocess
        self.tokenizer = open_clip.get_tokenizer(spec.model)
        self.context_length = getattr(self.tokenizer, "context_length", 77)
        self._preprocess_version = hashlib.sha256(repr(preprocess).encode()).hexdigest()[:12]
        self._preparation = ComposePreparation.of(preprocess)

    @property
    def preprocess_version(self) -> str:
        return f"open_clip-{self._preprocess_version}"

    @property
    def transform(self):
        return self.preprocess

    @property
    def preparation(self) -> Preparation:
        return self._preparation or super().preparation

    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(pixels)

    @torch.inference_mode()
    def embed_texts(self, texts: list[str]) -> np.ndarray:
        with self._autocast():
            features = self.model.encode_text(self.tokenizer(texts).to(self.device))
        return torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy()

    def truncated(self, texts: list[str]) -> list[bool]:
        """CLIP reads at most ``context_length`` (77) tokens, start and end markers included."""
        if hasattr(self.tokenizer, "encode"):
            return [len(self.tokenizer.encode(t)) + 2 > self.context_length for t in texts]
        return (self.tokenizer(texts)[:, -1] != 0).tolist()

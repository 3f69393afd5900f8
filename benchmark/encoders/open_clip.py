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
from benchmark.encoders.base import (
    Backbone,
    ComposePreparation,
    Preparation,
    how_to_provide,
)
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

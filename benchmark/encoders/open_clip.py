"""CLIP image and text encoders through ``open_clip``, from a pretrained tag or a local checkpoint.

The papers' default is CLIP ViT-B/32 (Radford et al., "Learning Transferable
Visual Models From Natural Language Supervision", arXiv:2103.00020): open_clip
model ``ViT-B-32`` with the ``openai`` weights. Any open_clip architecture
works, including one defined by a local model-config JSON (``config``), which is
how the tests build a tiny randomly initialised CLIP offline.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import numpy as np
import open_clip
import torch

from benchmark.encoders.spec import ENV_CONFIG, ENV_MODEL, ENV_PRETRAINED, BackboneUnavailable, ClipSpec


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _how_to_provide(spec: ClipSpec) -> str:
    return (f"Provide it by (1) running once with network access so the Hugging Face cache holds it, "
            f"(2) passing --clip-pretrained PATH to a local open_clip checkpoint (.safetensors or .bin), or "
            f"(3) setting {ENV_PRETRAINED}=PATH (and {ENV_MODEL}, {ENV_CONFIG} for a custom architecture).")


class ClipEncoder:
    """A loaded open_clip model: L2-normalised image and text embeddings, on CPU or GPU."""

    def __init__(self, spec: ClipSpec, device: str | None = None):
        self.spec = spec
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if spec.config:
            config = Path(spec.config)
            if not config.is_file():
                raise BackboneUnavailable(f"open_clip model config {config} does not exist")
            open_clip.add_model_config(config)
        if spec.model not in open_clip.list_models():
            raise BackboneUnavailable(f"open_clip has no model named {spec.model!r}; pass --clip-config with its JSON")
        if spec.is_local:
            checkpoint = Path(spec.pretrained)
            if not checkpoint.is_file():
                raise BackboneUnavailable(f"CLIP checkpoint {checkpoint} for {spec.model} does not exist. " + _how_to_provide(spec))
            self.revision = "sha256:" + _file_digest(checkpoint)[:16]
        else:
            if spec.pretrained not in open_clip.list_pretrained_tags_by_model(spec.model):
                raise BackboneUnavailable(f"open_clip has no pretrained tag {spec.pretrained!r} for {spec.model}")
            self.revision = f"open_clip-tag:{spec.pretrained}"
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                spec.model, pretrained=spec.pretrained, device=self.device, weights_only=True)
        except (RuntimeError, OSError, ValueError) as error:
            raise BackboneUnavailable(
                f"cannot load CLIP {spec.model} (pretrained={spec.pretrained!r}): "
                f"{textwrap.shorten(str(error), 240, placeholder=' ...')} "
                + _how_to_provide(spec)) from None
        self.model = model.eval()
        self.preprocess = preprocess
        self.tokenizer = open_clip.get_tokenizer(spec.model)
        self.context_length = getattr(self.tokenizer, "context_length", 77)

    @torch.inference_mode()
    def encode_images(self, pixels: torch.Tensor) -> np.ndarray:
        """(N, 3, H, W) preprocessed pixels -> (N, D) unit-norm float32 embeddings."""
        features = self.model.encode_image(pixels.to(self.device))
        return torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy()

    @torch.inference_mode()
    def encode_texts(self, texts: list[str]) -> tuple[np.ndarray, list[bool]]:
        """Texts -> ((N, D) unit-norm embeddings, whether each text was cut at the context length).

        CLIP reads at most ``context_length`` (77) tokens; longer prompts are truncated,
        and the flag lets results say so instead of scoring a cut prompt silently.
        """
        tokens = self.tokenizer(texts)
        if hasattr(self.tokenizer, "encode"):
            truncated = [len(self.tokenizer.encode(t)) + 2 > self.context_length for t in texts]
        else:
            truncated = (tokens[:, -1] != 0).tolist()
        features = self.model.encode_text(tokens.to(self.device))
        return torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy(), truncated

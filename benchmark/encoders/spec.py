"""Which backbone to load, as plain data (no torch import), so the CLI and the store stay light."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_MODEL = "CULTURELENS_CLIP_MODEL"
ENV_PRETRAINED = "CULTURELENS_CLIP_PRETRAINED"
ENV_CONFIG = "CULTURELENS_CLIP_CONFIG"


class BackboneUnavailable(RuntimeError):
    """A backbone's weights cannot be loaded; the message names it and how to provide it."""


@dataclass(frozen=True)
class ClipSpec:
    """Which CLIP to load: an open_clip model name, a pretrained tag or checkpoint path, an optional config."""

    model: str = "ViT-B-32"
    pretrained: str = "openai"
    config: str | None = None  # path to an open_clip model-config JSON for architectures open_clip lacks

    @classmethod
    def from_env(cls) -> ClipSpec:
        """The spec from CULTURELENS_CLIP_MODEL / _PRETRAINED / _CONFIG, defaulting to ViT-B-32 (openai)."""
        default = cls()
        return cls(os.environ.get(ENV_MODEL, default.model), os.environ.get(ENV_PRETRAINED, default.pretrained),
                   os.environ.get(ENV_CONFIG) or None)

    @property
    def is_local(self) -> bool:
        return Path(self.pretrained).suffix in (".safetensors", ".bin", ".pt", ".pth")

    @property
    def id(self) -> str:
        weights = Path(self.pretrained).name if self.is_local else self.pretrained
        return f"open_clip:{self.model}:{weights}"

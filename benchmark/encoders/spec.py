"""Which backbones exist and where their weights come from, as plain data (no torch import).

A backbone is addressed by a stable registry id (``clip-vit-b-32``) that names
its role in the papers; its ``BackboneSpec`` says how to load it. A JSON file
(``--backbones FILE`` or ``CULTURELENS_BACKBONES``) can point an id at other
weights (a local checkpoint, a mirror) or add ids, e.g.::

    {"clip-vit-b-32": {"family": "open_clip", "model": "ViT-B-32",
                       "weights": "/models/clip/open_clip_pytorch_model.bin"}}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal

from benchmark.errors import CultureLensError
from benchmark.settings import BACKBONES

LOCAL_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth")
FAMILIES = ("open_clip", "hf_vision", "dreamsim")
POOLINGS = ("cls", "mean")  # the first is the default
GRID_CUTS = ("rounded", "floor")  # the first is the default


class BackboneUnavailable(CultureLensError, RuntimeError):
    """A backbone cannot be loaded; the message names it and how to provide it."""


class BackbonesFileError(CultureLensError, ValueError):
    """A backbones file (or a recorded spec) that cannot be read as backbone specs; the message names the file,
    the backbone id and the problem."""


@dataclass(frozen=True)
class BackboneSpec:
    """How to load one backbone.

    ``open_clip``: ``model`` is an open_clip model name; ``weights`` a pretrained tag
    (``openai``), a local checkpoint path, or ``hf-file:ORG/REPO/FILE`` (a file of a Hub
    model repo, e.g. the HPSv2 checkpoint); ``config`` an optional model-config JSON for
    architectures open_clip does not ship. ``hf_vision``: ``model`` is a Hub repo id or a
    local folder of a ``transformers`` vision model (DINOv2, DINOv3) and its image processor.
    ``dreamsim``: ``model`` is a DreamSim type (``ensemble``); ``weights`` its download folder.

    ``pooling`` (``hf_vision`` only): ``cls``, the model's pooled CLS token (the default), or ``mean``, the
    mean of all output tokens, CLS included (the CRT authors' code, compute_VR.py, ``DINOEmbedder``).
    ``grid_cut``: how a ``grid`` need cuts an image, ``rounded`` (the default) or ``floor``
    (``encoders.base.grid_edges``). Both are part of ``uid`` when not the default.
    """

    family: Literal["open_clip", "hf_vision", "dreamsim"]
    model: str
    weights: str | None = None
    config: str | None = None
    revision: str | None = None
    pooling: Literal["cls", "mean"] | None = None
    grid_cut: Literal["rounded", "floor"] | None = None

    def __post_init__(self):
        if self.pooling not in (None, *POOLINGS):
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {self.pooling!r}")
        if self.pooling is not None and self.family != "hf_vision":
            raise ValueError(f"pooling is an option of hf_vision backbones, not of {self.family}")
        if self.grid_cut not in (None, *GRID_CUTS):
            raise ValueError(f"grid_cut must be one of {', '.join(GRID_CUTS)}, not {self.grid_cut!r}")

    @property
    def uid(self) -> str:
        """What the weights are, independent of the registry id (part of every cache key)."""
        if self.family == "open_clip":
            weights = Path(self.weights).name if self.weights and self.weights.endswith(LOCAL_WEIGHTS) else self.weights
            return f"open_clip:{self.model}:{weights}" + self._options
        return f"{self.family}:{self.model}" + (f"@{self.revision}" if self.revision else "") + self._options

    @property
    def _options(self) -> str:
        """The non-default embedding options, so that their embeddings are never cached as the default's."""
        options = [("pooling", self.pooling, POOLINGS[0]), ("grid_cut", self.grid_cut, GRID_CUTS[0])]
        return "".join(f"#{name}={value}" for name, value, default in options if value not in (None, default))

    @classmethod
    def from_dict(cls, data: dict, where: str = "backbone spec") -> BackboneSpec:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise BackbonesFileError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
        if data.get("family") not in FAMILIES or not data.get("model"):
            raise BackbonesFileError(f"{where}: needs 'family' (one of {', '.join(FAMILIES)}) and 'model'")
        try:
            return cls(**data)
        except ValueError as error:
            raise BackbonesFileError(f"{where}: {error}") from None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


# The backbones the papers use. Weights come from the Hugging Face cache (downloaded on first
# use where there is network) unless a backbones file points elsewhere.
DEFAULT_REGISTRY: dict[str, BackboneSpec] = {
    # CLIP ViT-B/32 and ViT-L/14 (Radford et al., arXiv:2103.00020): alignment, CRA (CRT Eq. 1).
    "clip-vit-b-32": BackboneSpec("open_clip", "ViT-B-32", "openai"),
    "clip-vit-l-14": BackboneSpec("open_clip", "ViT-L-14", "openai"),
    # CLIP ViT-B/16: the CRT authors' code's recognition encoder (compute_CRA.py, openai/clip-vit-base-patch16).
    "clip-vit-b-16": BackboneSpec("open_clip", "ViT-B-16", "openai"),
    # Multilingual SigLIP so400m (CAIRE's and CUBE's retrieval encoder).
    "msiglip-so400m": BackboneSpec("open_clip", "ViT-SO400M-16-SigLIP-i18n-256", "webli"),
    # DINO patch features for visual reuse (CRT Eq. 2; the paper uses DINOv3, size not stated).
    "dinov2-base": BackboneSpec("hf_vision", "facebook/dinov2-base"),
    "dinov3-vitb16": BackboneSpec("hf_vision", "facebook/dinov3-vitb16-pretrain-lvd1689m"),
    # DINOv2 as the CRT authors' code embeds grid cells (compute_VR.py): mean of all tokens, cuts at W // 4.
    "dinov2-base-mean-floor": BackboneSpec("hf_vision", "facebook/dinov2-base", pooling="mean", grid_cut="floor"),
    # HPS v2 quality scorer (Wu et al., arXiv:2306.09341): open_clip ViT-H-14, fine-tuned weights.
    "hpsv2": BackboneSpec("open_clip", "ViT-H-14", "hf-file:xswu/HPSv2/HPS_v2_compressed.pt"),
    # DreamSim ensemble (Fu et al., arXiv:2306.09344): W1KP's DreamSim_l2 distance. Optional extra.
    "dreamsim": BackboneSpec("dreamsim", "ensemble"),
}


def load_registry(path: str | Path | None = None) -> dict[str, BackboneSpec]:
    """The default registry, updated from the JSON file ``path`` (None: the one ``CULTURELENS_BACKBONES`` names,
    ``benchmark.settings.BACKBONES``)."""
    registry = dict(DEFAULT_REGISTRY)
    path = BACKBONES.resolve(path or None)
    if not path:
        return registry
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise BackbonesFileError(f"backbones file {path}: cannot be read as JSON ({error})") from None
    if not isinstance(data, dict):
        raise BackbonesFileError(f"backbones file {path}: expected an object mapping backbone ids to specs")
    for backbone_id, spec in data.items():
        if not isinstance(spec, dict):
            raise BackbonesFileError(f"backbones file {path}: {backbone_id}: expected an object")
        registry[backbone_id] = BackboneSpec.from_dict(spec, f"backbones file {path}: {backbone_id}")
    return registry

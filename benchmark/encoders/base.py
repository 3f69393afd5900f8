"""The interface every backbone implements, and the parts they share (grids, devices, revisions)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch
from PIL import Image

from benchmark.encoders.spec import (
    GRID_CUTS,
    BackboneSpec,
    BackboneUnavailable,
)
from benchmark.metric_marks import PREPARED_ON_DEVICE


def how_to_provide(backbone_id: str, spec: BackboneSpec) -> str:
    return (f"Provide backbone {backbone_id!r} ({spec.uid}) by (1) running once with network access so the "
            f"Hugging Face cache holds it, (2) pointing it at local weights in a backbones JSON file "
            f"(--backbones FILE or $CULTURELENS_BACKBONES; see docs/scoring.md, 'Backbones'), or (3) setting "
            f"HF_HOME to a cache that already has it.")


def grid_edges(size: int, grid: int, cut: str = GRID_CUTS[0]) -> list[int]:
    """The ``grid + 1`` cut positions along one side of ``size`` pixels.

    ``rounded``: round(i x size / grid), cells as even as whole pixels allow (CRT: De Rosa Palmini & Cetinic,
    arXiv:2511.11435, Sec. 4.2's 4x4 grid). ``floor``: i x (size // grid), the last cell taking the remainder
    (the authors' code, compute_VR.py, ``split_into_grid``; a step of at least one pixel).
    """
    if cut == "rounded":
        return [round(i * size / grid) for i in range(grid + 1)]
    if cut == "floor":
        step = max(1, size // grid)
        return [i * step for i in range(grid)] + [size]
    raise ValueError(f"grid cut must be one of {', '.join(GRID_CUTS)}, not {cut!r}")


def grid_tiles(image: Image.Image, grid: int, cut: str = GRID_CUTS[0]) -> list[Image.Image]:
    """Split an image into ``grid x grid`` tiles, row by row (CRT, Sec. 3.2: a 4x4 grid, K = 16), cut as
    ``grid_edges`` says."""
    width, height = image.size
    xs, ys = grid_edges(width, grid, cut), grid_edges(height, grid, cut)
    return [image.crop((xs[i], ys[j], xs[i + 1], ys[j + 1])) for j in range(grid) for i in range(grid)]


def prepare(transform: Callable[[Image.Image], torch.Tensor], image: Image.Image, kind: str,
            grid: int = 4, cut: str = GRID_CUTS[0]) -> torch.Tensor:
    """Model input for one need: (C, H, W) for ``image``, (grid^2, C, H, W) for ``grid`` tiles cut by ``cut``."""
    if kind == "image":
        return transform(image)
    if kind == "grid":
        return torch.stack([transform(tile) for tile in grid_tiles(image, grid, cut)])
    raise ValueError(f"cannot prepare {kind!r} inputs")


class Preparation:
    """A backbone's preprocessing of decoded images on the model's device, a batch at a time: ``images`` takes
    uint8 (N, 3, H, W) RGB pixels of one size, on any device, and returns the float model inputs there;
    ``grids`` cuts each image into ``grid x grid`` tiles first. The harness's DataLoader workers only decode, and
    one batch per backbone (one per ``key``: CLIP ViT-B/32 and ViT-L/14 both resize to 224 px) is prepared where
    the model runs.

    This base class is the fallback for a transform that cannot run on tensors: each image goes back to PIL on
    the CPU through ``transform`` itself, as before (``tag`` "pil": its inputs, and so its cache keys, are the
    transform's own). Subclasses run the transform's steps on tensors (``tag`` ``PREPARED_ON_DEVICE``)."""

    tag = "pil"

    def __init__(self, transform: Callable[[Image.Image], torch.Tensor], key: str):
        self.transform, self.key = transform, key

    def images(self, pixels: torch.Tensor) -> torch.Tensor:
        on_cpu = pixels.permute(0, 2, 3, 1).cpu().numpy()
        return torch.stack([self.transform(Image.fromarray(p, "RGB")) for p in on_cpu]).to(pixels.device)

    def grids(self, pixels: torch.Tensor, grid: int, cut: str) -> torch.Tensor:
        """(N, grid^2, C, h, w): each image's tiles row by row (``grid_edges``), each tile prepared as an image."""
        xs, ys = grid_edges(pixels.shape[-1], grid, cut), grid_edges(pixels.shape[-2], grid, cut)
        return torch.stack([self.images(pixels[..., ys[j]:ys[j + 1], xs[i]:xs[i + 1]])
                            for j in range(grid) for i in range(grid)], dim=1)

    def prepare(self, pixels: torch.Tensor, kind: str, grid: int = 4, cut: str = GRID_CUTS[0]) -> torch.Tensor:
        """Model inputs for one need: (N, C, h, w) for ``image``, (N, grid^2, C, h, w) for ``grid``."""
        if kind == "image":
            return self.images(pixels)
        if kind == "grid":
            return self.grids(pixels, grid, cut)
        raise ValueError(f"cannot prepare {kind!r} inputs")


class ComposePreparation(Preparation):
    """The ``Preparation`` of a torchvision ``Compose`` of resizes and centre crops, then ToTensor and, optionally,
    Normalize (open_clip's preprocessing; DreamSim's without Normalize), run on the device: the resize and crop
    steps on the uint8 pixels as torchvision runs them on tensors (antialiased, as PIL's resize always is; a
    bicubic or bilinear result rounded to whole levels, as PIL's uint8 output is), then x / 255 in float32 and
    (x - mean) / std, each one IEEE operation per element.

    Not bit for bit the PIL transform: PIL resizes in fixed point with a uint8 rounding between its horizontal and
    vertical passes, torchvision in floating point in one. Pixels differ by a level here and there
    (tests/test_encoder.py, ``test_device_transforms_*``, bounds what that does to the embeddings), so these
    inputs have their own cache key (``PREPARED_ON_DEVICE``)."""

    tag = PREPARED_ON_DEVICE
    _SAME_ON_RGB_TENSORS = ("MaybeConvertMode", "_convert_to_rgb")  # a PIL mode conversion; our pixels are RGB

    def __init__(self, transform, steps: list, normalize):
        super().__init__(transform, "compose:" + repr(steps) + repr(normalize))
        self.steps = steps
        self.mean = None if normalize is None else torch.tensor(normalize.mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = None if normalize is None else torch.tensor(normalize.std, dtype=torch.float32).view(-1, 1, 1)
        self._constants: dict[torch.device, tuple[torch.Tensor, ...]] = {}

    @classmethod
    def of(cls, transform) -> Preparation | None:
        """The preparation of ``transform`` if it has that shape, else None (the PIL fallback prepares it)."""
        from torchvision import transforms

        steps = list(getattr(transform, "transforms", []))
        at = next((i for i, step in enumerate(steps) if isinstance(step, transforms.ToTensor)), None)
        if at is None:
            return None
        after = steps[at + 1:]
        if after and (len(after) > 1 or not isinstance(after[0], transforms.Normalize) or after[0].inplace):
            return None
        kept = []
        for step in steps[:at]:
            if isinstance(step, transforms.CenterCrop) or (isinstance(step, transforms.Resize) and step.interpolation
                                                           in (transforms.InterpolationMode.BICUBIC,
                                                               transforms.InterpolationMode.BILINEAR)):
                kept.append(step)
            elif getattr(step, "__name__", type(step).__name__) not in cls._SAME_ON_RGB_TENSORS:
                return None
        return cls(transform, kept, after[0] if after else None)

    def images(self, pixels: torch.Tensor) -> torch.Tensor:
        from torchvision import transforms
        from torchvision.transforms import functional

        x = pixels
        for step in self.steps:
            x = functional.center_crop(x, step.size) if isinstance(step, transforms.CenterCrop) else \
                functional.resize(x, step.size, step.interpolation, step.max_size, antialias=True)
        # The constants are copied to a device once: a copy from pageable memory waits for the device's queue,
        # which would keep the next batch from being queued while the last one runs.
        if x.device not in self._constants:
            self._constants[x.device] = tuple(t.to(x.device) for t in (torch.tensor(255.0), self.mean, self.std)
                                              if t is not None)
        scale, *normalise = self._constants[x.device]
        x = x.to(torch.float32) / scale
        return (x - normalise[0]) / normalise[1] if normalise else x


def pixels_of(image: Image.Image) -> torch.Tensor:
    """An RGB PIL image as uint8 (3, H, W) pixels, what the harness's workers send."""
    return torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1)


class PendingEmbedding:
    """Embeddings on their way back from the device: ``result()`` waits for these only, not for work queued
    after them, so the harness can stage and queue the next batch meanwhile."""

    def __init__(self, host: torch.Tensor, event, lead: tuple[int, ...], pool: _PinnedPool | None = None):
        self.host, self.event, self.lead, self.pool = host, event, lead, pool

    def result(self) -> np.ndarray:
        if self.event is not None:
            self.event.synchronize()
        features = self.host.numpy()
        if self.pool is not None:  # the pinned buffer goes back to the pool: keep a copy
            features = features.copy()
            self.pool.give(self.host)
            self.pool = None
        return features.reshape(*self.lead, features.shape[-1])


class _PinnedPool:
    """Pinned host buffers for embeddings on their way back, reused once read, instead of a new pinned allocation
    per batch (a profile of a cold run on an H100 charged 5 s of 13 s to those allocations; benchmarks/README.md)."""

    def __init__(self):
        self.free: dict[tuple, list[torch.Tensor]] = {}

    def take(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        buffers = self.free.get((tuple(shape), dtype))
        return buffers.pop() if buffers else torch.empty(shape, dtype=dtype, pin_memory=True)

    def give(self, buffer: torch.Tensor) -> None:
        self.free.setdefault((tuple(buffer.shape), buffer.dtype), []).append(buffer)


class Backbone(ABC):
    """A loaded image (and maybe text) encoder that returns unit-norm float32 embeddings.

    ``key`` identifies exactly what produces an embedding (weights, revision and
    preprocessing); the embedding cache is keyed by it, never by the registry id alone.
    """

    def __init__(self, backbone_id: str, spec: BackboneSpec, device: str | None = None):
        self.id, self.spec = backbone_id, spec
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.revision = "unknown"
        self._pinned = _PinnedPool()

    @property
    @abstractmethod
    def preprocess_version(self) -> str:
        """Changes whenever preprocessing changes (size, crop, normalisation, interpolation)."""

    @property
    def key(self) -> str:
        return f"{self.spec.uid}@{self.revision}#{self.preprocess_version}"

    @property
    def image_key(self) -> str:
        """``key`` and where image inputs are prepared, the key of image and grid embeddings in the cache: a
        ``Preparation`` that runs on tensors adds its tag (``PREPARED_ON_DEVICE``), the PIL fallback none (its
        inputs are the transform's own). Text embeddings, and the indexes built of them, keep ``key``."""
        return self.key + ("" if self.preparation.tag == Preparation.tag else f"/{self.preparation.tag}")

    @property
    @abstractmethod
    def transform(self) -> Callable[[Image.Image], torch.Tensor]:
        """One RGB image -> (C, H, W) model input: the model library's own preprocessing, on PIL images (what
        ``preparation`` runs on tensors, and the reference it is measured against)."""

    @abstractmethod
    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) on the device -> (N, D) features."""

    @property
    def grid_cut(self) -> str:
        """How this backbone's ``grid`` needs cut an image (``grid_edges``); part of ``key`` through the spec."""
        return self.spec.grid_cut or GRID_CUTS[0]

    def prepare(self, image: Image.Image, kind: str, grid: int = 4) -> torch.Tensor:
        """Model input for one need, as the harness prepares it (``preparation``, on the model's device):
        (C, H, W) for ``image``, (grid^2, C, H, W) for ``grid``."""
        pixels = pixels_of(image).unsqueeze(0).to(self.device)
        return self.preparation.prepare(pixels, kind, grid, self.grid_cut)[0]

    def _autocast(self):
        if self.device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            return torch.autocast(device_type="cuda", dtype=dtype)
        return nullcontext()

    @property
    def preparation(self) -> Preparation:
        """How the harness prepares inputs for this backbone on its device (``Preparation``); the fallback runs
        ``transform`` on PIL images."""
        return Preparation(self.transform, f"backbone:{self.id}:{self.preprocess_version}")

    def embed(self, pixels: torch.Tensor) -> np.ndarray:
        """(N, C, H, W) or (N, K, C, H, W) model inputs (``prepare``) -> (N, D) or (N, K, D) unit-norm float32
        embeddings."""
        return self.embed_start(pixels).result()

    @torch.inference_mode()
    def embed_start(self, pixels: torch.Tensor) -> PendingEmbedding:
        """``embed`` without waiting: the inputs are copied to the device (without blocking when they are in
        pinned memory or there already), embedded, and the embeddings copied back into pinned memory behind an
        event."""
        shape = pixels.shape
        flat = pixels.reshape(-1, *shape[-3:]).to(self.device, non_blocking=True)
        with self._autocast():
            features = self._forward_images(flat)
        features = torch.nn.functional.normalize(features.float(), dim=-1)
        if features.device.type != "cuda":
            return PendingEmbedding(features, None, tuple(shape[:-3]))
        host = self._pinned.take(features.shape, features.dtype)
        host.copy_(features, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return PendingEmbedding(host, event, tuple(shape[:-3]), self._pinned)

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Texts -> (N, D) unit-norm embeddings."""
        raise BackboneUnavailable(f"backbone {self.id} ({self.spec.uid}) has no text encoder")

    def truncated(self, texts: list[str]) -> list[bool]:
        """Whether each text is longer than the text encoder reads (and so is embedded cut)."""
        raise BackboneUnavailable(f"backbone {self.id} ({self.spec.uid}) has no text encoder")

"""The interface every backbone implements, and the parts they share (grids, devices, revisions)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch
from PIL import Image

from benchmark.encoders.spec import GRID_CUTS, BackboneSpec, BackboneUnavailable


def how_to_provide(backbone_id: str, spec: BackboneSpec) -> str:
    return (f"Provide backbone {backbone_id!r} ({spec.uid}) by (1) running once with network access so the "
            f"Hugging Face cache holds it, (2) pointing it at local weights in a backbones JSON file "
            f"(--backbones FILE or $CULTURELENS_BACKBONES; see README, 'Backbones'), or (3) setting "
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
    """A backbone's preprocessing in two steps, so that the heavy part runs where it is cheapest: ``stage`` on
    the CPU, in the harness's DataLoader workers (decoded images -> (N, C, H, W), uint8 where the pixels are
    still whole numbers), then ``finish`` on the model's device (-> the float model input). ``finish(stage(x))``
    equals ``transform`` on each image bit for bit (tests/test_encoder.py; on a GPU, benchmarks/harness_speed.py).

    Two backbones whose preparations have the same ``key`` stage an image identically, so the harness stages it
    once for both (CLIP ViT-B/32 and ViT-L/14 both resize to 224 px). This base class is the fallback for any
    transform: it stages the finished float input and ``finish`` passes it through. Small and picklable: it
    travels to DataLoader worker processes.
    """

    def __init__(self, transform: Callable[[Image.Image], torch.Tensor], key: str):
        self.transform, self.key = transform, key

    def stage(self, images: list[Image.Image]) -> torch.Tensor:
        return torch.stack([self.transform(image) for image in images])

    def stage_grid(self, image: Image.Image, grid: int, cut: str) -> torch.Tensor:
        """The ``grid x grid`` tiles of ``image`` staged, (grid^2, C, H, W)."""
        return self.stage(grid_tiles(image, grid, cut))

    def finish(self, staged: torch.Tensor) -> torch.Tensor:
        """Staged inputs (on any device) -> model inputs; float inputs are already finished."""
        return staged


def stage(preparation: Preparation, image: Image.Image, kind: str, grid: int = 4, cut: str = GRID_CUTS[0]
          ) -> torch.Tensor:
    """``prepare`` up to the preparation's stage: (C, H, W) for ``image``, (grid^2, C, H, W) for ``grid``."""
    if kind == "image":
        return preparation.stage([image])[0]
    if kind == "grid":
        return preparation.stage_grid(image, grid, cut)
    raise ValueError(f"cannot prepare {kind!r} inputs")


def as_preparation(transform, key: str) -> Preparation:
    """``transform`` itself if it is a Preparation, else the fallback Preparation around it."""
    return transform if isinstance(transform, Preparation) else Preparation(transform, key)


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
    @abstractmethod
    def transform(self) -> Callable[[Image.Image], torch.Tensor]:
        """One RGB image -> (C, H, W) model input. A small picklable object (no model weights): the
        harness ships it to DataLoader worker processes."""

    @abstractmethod
    def _forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) on the device -> (N, D) features."""

    @property
    def grid_cut(self) -> str:
        """How this backbone's ``grid`` needs cut an image (``grid_edges``); part of ``key`` through the spec."""
        return self.spec.grid_cut or GRID_CUTS[0]

    def prepare(self, image: Image.Image, kind: str, grid: int = 4) -> torch.Tensor:
        """Model input for one need: (C, H, W) for ``image``, (grid^2, C, H, W) for ``grid``."""
        return prepare(self.transform, image, kind, grid, self.grid_cut)

    def _autocast(self):
        if self.device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            return torch.autocast(device_type="cuda", dtype=dtype)
        return nullcontext()

    @property
    def preparation(self) -> Preparation:
        """How the harness stages inputs for this backbone (``Preparation``); the fallback stages
        ``transform``'s finished inputs."""
        return Preparation(self.transform, f"backbone:{self.id}:{self.preprocess_version}")

    def embed(self, pixels: torch.Tensor) -> np.ndarray:
        """(N, C, H, W) or (N, K, C, H, W) inputs -> (N, D) or (N, K, D) unit-norm float32 embeddings. Inputs are
        finished model inputs (``prepare``) or, as uint8, staged ones (``preparation.stage``)."""
        return self.embed_start(pixels).result()

    @torch.inference_mode()
    def embed_start(self, pixels: torch.Tensor) -> PendingEmbedding:
        """``embed`` without waiting: the inputs are copied to the device (without blocking when they are in
        pinned memory), finished there, embedded, and the embeddings copied back into pinned memory behind an
        event."""
        shape = pixels.shape
        flat = self.preparation.finish(pixels.reshape(-1, *shape[-3:]).to(self.device, non_blocking=True))
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

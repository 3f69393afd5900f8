"""The harness on a GPU (skipped without one): fork-server workers, reused pinned memory, images prepared on the
device and batches queued ahead change no embedding. No dataset: a folder of shards is enough."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from benchmark.encoders import load_backbone
from benchmark.encoders.base import prepare
from benchmark.features import embeddings
from benchmark.images import open_as_viewed
from benchmark.metrics.base import Need
from benchmark.submission import ImageRecord
from benchmark.submission.shards import write_shards

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_workers_pinned_memory_and_queued_batches_give_the_embeddings_of_plain_batches(tiny_clip, tiny_dino,
                                                                                       tmp_path):
    rng = np.random.default_rng(0)
    paths, records = [], []
    for i, size in enumerate([64, 96, 80, 64, 120, 64, 70, 64, 100, 64]):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
        paths.append(f"{i}.png")
        records.append((ImageRecord("p", i, paths[-1], f"sha-{i}", size, size), (tmp_path / paths[-1]).read_bytes()))
    write_shards(tmp_path, records, max_shard_bytes=200_000)  # several shards, read by the workers as scoring does
    images = pd.DataFrame({"path": paths, "image_sha256": [f"sha-{i}" for i in range(len(paths))]})
    registry = {"clip-vit-b-32": tiny_clip, "dinov2-base": tiny_dino}
    backbones = {b: load_backbone(b, registry, device="cuda") for b in registry}
    needs = [Need("clip-vit-b-32", "image"), Need("dinov2-base", "grid")]
    features = embeddings.compute_features(tmp_path, images, needs, backbones, batch_size=4, num_workers=3)
    for need in needs:
        backbone = backbones[need.backbone]
        for start in range(0, len(paths), 4):  # the same batches, prepared on the GPU one image at a time
            pixels = torch.stack([backbone.prepare(open_as_viewed(tmp_path / path), need.kind)
                                  for path in paths[start:start + 4]])
            assert np.array_equal(features.arrays[need][start:start + 4], backbone.embed(pixels)), need


def test_queueing_a_batch_never_waits_for_the_device(tiny_clip, tiny_dino):
    """A pinned uint8 batch of decoded images is copied to the GPU, prepared there (resize, crop, normalise, the
    DINO grid's tiles) and embedded without reading anything back: any call that waits for the device raises under
    ``torch.cuda.set_sync_debug_mode("error")``. (A wait there would drain the device's queue every batch, so the
    GPU would idle while the next batch is decoded.)"""
    registry = {"clip-vit-b-32": tiny_clip, "dinov2-base": tiny_dino}
    backbones = {b: load_backbone(b, registry, device="cuda") for b in registry}
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)) for _ in range(3)]
    needs = (Need("clip-vit-b-32", "image"), Need("dinov2-base", "grid"))
    pixels = torch.stack([torch.from_numpy(np.array(i)) for i in images])  # (N, H, W, 3), as the workers send them
    decoded = embeddings.DecodedBatch([([0, 1, 2], [needs] * 3, pixels)])
    expected = [backbones[n.backbone].embed(inputs) for n, _, inputs in
                embeddings.prepared_batch(decoded.pin_memory(), backbones)]  # device constants made, buffers pooled
    torch.cuda.synchronize()
    pinned = decoded.pin_memory()
    torch.cuda.set_sync_debug_mode("error")
    try:
        pending = [backbones[n.backbone].embed_start(inputs)
                   for n, _, inputs in embeddings.prepared_batch(pinned, backbones)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for p, e in zip(pending, expected):
        assert np.array_equal(p.result(), e)


def test_device_transforms_on_the_gpu_stay_within_the_cpus_bound(tiny_clip, tiny_dino):
    """Inputs prepared on the GPU against the transforms' own on the CPU: within the few levels of 255 that
    tests/test_encoder.py allows open_clip's on the CPU, DINO's too (torch resizes uint8 in fixed point on the CPU,
    as PIL does, and in floating point on a GPU)."""
    registry = {"clip-vit-b-32": tiny_clip, "dinov2-base": tiny_dino}
    rng = np.random.default_rng(1)
    image = Image.fromarray(rng.integers(0, 256, (96, 72, 3), dtype=np.uint8)).resize((700, 900), Image.BICUBIC)
    for backbone_id, bound in (("clip-vit-b-32", 6), ("dinov2-base", 6)):
        backbone = load_backbone(backbone_id, registry, device="cuda")
        for kind in ("image", "grid"):
            prepared = backbone.prepare(image, kind).cpu()
            levels = (prepared - prepare(backbone.transform, image, kind)).abs() * 255 * _std(backbone)
            assert levels.max() <= bound + 1e-3, (backbone_id, kind)


def _std(backbone) -> torch.Tensor:
    processor = getattr(backbone, "processor", None)
    return torch.tensor(processor.image_std).view(-1, 1, 1) if processor is not None else backbone.preparation.std


def test_pinned_buffers_are_reused_once_the_copy_that_read_them_is_done():
    """A decoded batch goes into pinned memory a buffer at a time; a buffer given back behind its copy's event is
    handed out again (for a batch as large or smaller) instead of a new pinned allocation, and never while taken."""
    buffers = embeddings.PinnedBuffers()
    batch = torch.arange(2 * 8 * 8 * 3, dtype=torch.int64).remainder(251).to(torch.uint8).view(2, 8, 8, 3)
    first = buffers.pinned(batch)
    assert first.is_pinned() and torch.equal(first, batch)
    on_gpu = first.to("cuda", non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    buffers.release(first, copied)
    copied.synchronize()
    second = buffers.pinned(torch.ones(1, 8, 8, 3, dtype=torch.uint8))
    assert second.data_ptr() == first.data_ptr() and torch.equal(on_gpu.cpu(), batch)
    assert buffers.pinned(batch).data_ptr() != second.data_ptr()  # that buffer is taken: another one

"""The harness on a GPU (skipped without one): fork-server workers, pinned memory, inputs finished on the
device and batches queued ahead change no embedding. No dataset: a folder of shards is enough."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from benchmark.encoders import load_backbone
from benchmark.encoders.base import prepare, stage
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
        for start in range(0, len(paths), 4):  # the same batches, finished on the CPU by the transform itself
            pixels = torch.stack([prepare(backbone.transform, open_as_viewed(tmp_path / path), need.kind)
                                  for path in paths[start:start + 4]])
            assert np.array_equal(features.arrays[need][start:start + 4], backbone.embed(pixels)), need


def test_queueing_a_batch_never_waits_for_the_device(tiny_clip, tiny_dino):
    """``embed_start`` copies a pinned uint8 batch to the GPU, finishes and embeds it without reading anything
    back: any call that waits for the device raises under ``torch.cuda.set_sync_debug_mode("error")``. (A wait
    there would drain the device's queue every batch, so the GPU would idle while the next batch is decoded.)"""
    registry = {"clip-vit-b-32": tiny_clip, "dinov2-base": tiny_dino}
    backbones = {b: load_backbone(b, registry, device="cuda") for b in registry}
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)) for _ in range(3)]
    for backbone_id, kind in [("clip-vit-b-32", "image"), ("dinov2-base", "grid")]:
        backbone = backbones[backbone_id]
        staged = torch.stack([stage(backbone.preparation, image, kind) for image in images]).pin_memory()
        expected = backbone.embed(staged)  # once outside: device constants made, a pinned output buffer pooled
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            pending = backbone.embed_start(staged)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert np.array_equal(pending.result(), expected), backbone_id

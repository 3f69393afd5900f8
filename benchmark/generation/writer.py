"""Generated images written while the next batch runs: the pipeline never waits for the disk.

A diffusers pipeline asked for ``output_type="pil"`` copies its images to the CPU, converts them to PIL and returns;
the PNG encoding (~0.25 s of one core for a 1,024 px image) came after, and the GPU waited for all of it. Here
the pipeline returns its images as a tensor (``output_type="pt"``, where it has the usual ``image_processor``); the
copy to pinned host memory is queued on the device behind the batch, and a thread pool converts them exactly as
the pipeline's own ``postprocess`` converts for ``"pil"`` (``pt_to_numpy`` then ``numpy_to_pil``: the same
pixels, so the same PNG bytes) and writes each atomically (temporary file, then rename), while the main thread
queues the next batch. At most ``depth`` batches wait to be written; a write that fails raises in the main thread
at the next batch, or at ``close``.

Resume is unchanged: an image is in the submission only once complete, so a killed run loses at most the batches
still being written, and the rerun makes them again.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch
from PIL import Image

from benchmark.atomic import atomic_write


def output_type(pipeline) -> str:
    """``"pt"`` where the pipeline converts its images with diffusers' ``VaeImageProcessor`` (then ``as_pil``
    converts them as its ``"pil"`` output would), else ``"pil"``."""
    processor = getattr(pipeline, "image_processor", None)
    return "pt" if hasattr(processor, "pt_to_numpy") and hasattr(processor, "numpy_to_pil") else "pil"


def pending_images(pipeline, images) -> Callable[[], list[Image.Image]]:
    """A pipeline call's ``images`` as a function that gives them as PIL images, to be called on another thread.
    A tensor on a GPU is copied to pinned memory without blocking, behind an event the function waits for."""
    if not torch.is_tensor(images):
        return lambda: list(images)
    processor = pipeline.image_processor
    if images.device.type != "cuda":
        return lambda: processor.numpy_to_pil(processor.pt_to_numpy(images))
    host = torch.empty(images.shape, dtype=images.dtype, pin_memory=True)
    host.copy_(images, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()

    def as_pil() -> list[Image.Image]:
        copied.synchronize()
        return processor.numpy_to_pil(processor.pt_to_numpy(host))

    return as_pil


class ImageWriter:
    """Writes batches of images as PNG files on ``threads`` threads, at most ``depth`` batches behind."""

    def __init__(self, temp_dir: Path, threads: int | None = None, depth: int = 2):
        self.temp_dir, self.depth = temp_dir, depth
        self.pool = ThreadPoolExecutor(max_workers=threads or min(8, os.cpu_count() or 1),
                                       thread_name_prefix="png-writer")
        self.batches: deque[list[Future]] = deque()

    def write(self, paths: Sequence[Path], images: Callable[[], list[Image.Image]], keep: Sequence[bool]) -> None:
        """Write image i of ``images()`` to ``paths[i]`` where ``keep[i]``; returns once the oldest batches are
        written, so that at most ``depth`` wait."""
        converted = self.pool.submit(images)
        self.batches.append([self.pool.submit(self._save, converted, i, path)
                             for i, (path, wanted) in enumerate(zip(paths, keep)) if wanted])
        while len(self.batches) > self.depth:
            self._finish(self.batches.popleft())

    def _save(self, converted: Future, i: int, path: Path) -> None:
        image = converted.result()[i]
        atomic_write(path, functools.partial(image.save, format="PNG"), temp_dir=self.temp_dir)

    @staticmethod
    def _finish(batch: list[Future]) -> None:
        for future in batch:
            future.result()

    def close(self) -> None:
        """Wait for every image still being written (raising the first failure), then stop the threads."""
        try:
            while self.batches:
                self._finish(self.batches.popleft())
        finally:
            self.pool.shutdown(wait=True)

"""Producers: models that turn (image, context) into an array the metrics read, cached by content like embeddings.

A producer is typically a vision-language model constrained to a closed set of answers: diversity's
``benchmark.tagging.VLMTagger`` (context: the concept and the index's candidate artifacts; output: the
probability of each candidate) and relevance's judges (``benchmark.judges``; context: the culture label, the
linked entity and the rubric; output: the probability, or a probe's cosine, of each rubric level).

``produce`` looks every (image, context) item up in the products cache (``benchmark.cache.product_key``: image
sha256, ``Producer.id`` = model id and revision, sha256 of ``Producer.prompt``, ``Producer.label``), opens only
the images of the items missing, runs the producer on them a chunk at a time and caches each chunk as it
comes, so a crash loses at most one chunk and a rescore with the same cache makes no model call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image
from tqdm import tqdm

from benchmark.cache import EmbeddingCache, product_key


class Producer(Protocol):
    """Turns (image, context) pairs into arrays, one per pair, in order.

    ``id`` names the model exactly (id and revision); ``prompt(context)`` is the exact text the model reads for
    a context (template, rubric and candidates included: its hash is part of the cache key), ``label(context)``
    the culture label or candidate set it is about."""

    id: str

    def prompt(self, context: Any) -> str: ...

    def label(self, context: Any) -> str: ...

    def produce_batch(self, images: Sequence[Image.Image | Path], contexts: Sequence[Any]) -> Sequence[np.ndarray]: ...


class LazyImages(Sequence):
    """Image rows as a sequence whose item i is opened (``open_image``) only when asked for: a producer that reads
    pixels takes them a chunk at a time, never all at once, and a cached rescore opens none."""

    def __init__(self, open_image: Callable[[int], Image.Image], count: int):
        self.open_image, self.count = open_image, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, row: int) -> Image.Image:
        if not 0 <= row < self.count:
            raise IndexError(f"image row {row} of {self.count}")
        return self.open_image(row)


def produce(producer: Producer, items: Sequence[tuple[int, Any]], images: Sequence[Image.Image | Path],
            shas: Sequence[str] | None = None, cache: EmbeddingCache | None = None, chunk: int = 16,
            progress: str | None = None) -> list[np.ndarray]:
    """The producer's array for each (image row, context) item, in order: from ``cache`` where it holds them,
    the others computed ``chunk`` images at a time (each image opened once per chunk, for all its contexts) and
    cached. ``shas`` (each image row's content sha256) key the cache; without them, or without a cache,
    everything is computed. ``progress``: a progress bar's description (None: no bar)."""
    keyed = cache is not None and shas is not None
    keys = [product_key(shas[row], producer.id, producer.prompt(context), producer.label(context))
            for row, context in items] if keyed else []
    found = cache.get_many(keys) if keyed else {}
    out: list[np.ndarray | None] = [found.get(key) for key, _ in keys] if keyed else [None] * len(items)
    parts = _chunks([i for i, array in enumerate(out) if array is None], items, chunk)
    for part in tqdm(parts, desc=progress, unit="chunk", leave=False, disable=progress is None):
        opened = {row: images[row] for row in dict.fromkeys(items[i][0] for i in part)}
        arrays = producer.produce_batch([opened[items[i][0]] for i in part], [items[i][1] for i in part])
        for i, array in zip(part, arrays):
            out[i] = np.asarray(array)
        if keyed:
            cache.put_many((*keys[i], out[i]) for i in part)
    return out


def _chunks(missing: list[int], items: Sequence[tuple[int, Any]], size: int) -> list[list[int]]:
    """``missing`` item positions cut into runs that span at most ``size`` distinct image rows each."""
    parts: list[list[int]] = []
    rows: set[int] = set()
    for i in missing:
        row = items[i][0]
        if not parts or (row not in rows and len(rows) == size):
            parts.append([])
            rows = set()
        parts[-1].append(i)
        rows.add(row)
    return parts

"""Embeddings of images and texts, through the content-addressed cache (``benchmark.cache``): each image decoded
once, embedded once per backbone.

1. The union of the needs (``benchmark.features.Need``) is looked up in the embedding cache.
2. Images with anything missing are decoded once each (``images.decode_pixels``), in DataLoader worker
   processes (``default_num_workers``, a whole batch per worker), and sent as uint8 pixels at their own size:
   the CPU only decodes. On a GPU the batches come in reused pinned memory (``PinnedBuffers``) and are copied
   without blocking; there (or on the CPU, when the backbones run there) each batch is resized, cropped and
   normalised for every backbone that still needs it (``encoders.base.Preparation``, once for backbones that
   prepare alike: ``prepared_batch``). Each backbone embeds its batch under ``torch.inference_mode`` (autocast
   fp16/bf16 on GPU) while the previous batch's embeddings come back and go to the cache, so a crash loses at
   most two batches of work.

Scale-out, over processes and machines with nothing shared but ``torch.distributed`` (``accelerate launch``
sets it up; ``culturelens score`` wires this): with ``shard=(rank, world)`` every process looks in its own
cache, the processes tell one another what they hold (``all_gather_object`` of one bit per embedding), and
what no process holds is planned into the same batches as in one process; a process embeds the batches ``b``
with ``b % world == rank``, then sends rank 0 (``gather_object``) what it embedded and what only its cache
held. Rank 0 caches what it received: the features are identical to one process's.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmark.cache import EmbeddingCache, entry_key
from benchmark.encoders.base import Backbone
from benchmark.features import Need
from benchmark.images import decode_pixels
from benchmark.submission.shards import Shards

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class FileSource:
    """Row i -> the path of an image file under ``folder`` (a knowledge base's images; a submission's images are
    rows of its shards instead); picklable for DataLoader workers."""

    def __init__(self, folder: Path, paths: list[str]):
        self.folder, self.paths = Path(folder), paths

    def __call__(self, index: int) -> Path:
        return self.folder / self.paths[index]


class _Decode(torch.utils.data.Dataset):
    """Item i: plan row i's image decoded once, as uint8 (H, W, 3) pixels at its own size (as decoded: a plain copy
    into the batch, where (3, H, W) would cost a transposing one, ~5 ms of a 1,024 px image), and the needs it still
    lacks. Holds only the source and the plan (no transforms, no weights), so worker processes stay light: every
    resize, crop and normalisation runs on the model's device (``encoders.base.Preparation``)."""

    def __init__(self, source: Callable, plan: list[tuple[int, tuple[Need, ...]]]):
        self.source, self.plan = source, plan

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, index: int):
        row, needs = self.plan[index]
        pixels = decode_pixels(self.source(row), formats=None)  # references may be in any format Pillow reads
        return row, needs, torch.from_numpy(pixels)


class PinnedBuffers:
    """Pinned host memory for decoded batches, reused batch after batch: ``pinned`` copies a batch into a free
    buffer at least as large (a new one only when none is free), ``release`` gives it back behind the event that
    marks the end of the copy to the device that read it. On an H100 machine a pinned allocation per batch cost
    32 ms each, 18 of them in a cold run of 10 s (benchmarks/README.md). Used by the DataLoader's pinning thread
    and the main loop alike, hence the lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.free: list[tuple[torch.Tensor, object]] = []

    def pinned(self, pixels: torch.Tensor) -> torch.Tensor:
        size = pixels.numel()
        with self.lock:
            ready = [i for i, (buffer, event) in enumerate(self.free) if buffer.numel() >= size and event.query()]
            buffer = self.free.pop(min(ready, key=lambda i: self.free[i][0].numel()))[0] if ready else None
        if buffer is None:
            buffer = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        staged = buffer[:size].view(pixels.shape)
        staged.copy_(pixels)
        return staged

    def release(self, staged: torch.Tensor, event) -> None:
        with self.lock:
            self.free.append((torch.empty(0, dtype=torch.uint8).set_(staged.untyped_storage()), event))


_PINNED = PinnedBuffers()


class DecodedBatch:
    """A batch of decoded images grouped by size: ``groups`` [(rows, each row's needs, uint8 (n, H, W, 3))].
    ``pin_memory`` (the DataLoader's pinning thread calls it) copies each group into reused pinned memory."""

    def __init__(self, groups: list[tuple[list[int], list[tuple[Need, ...]], torch.Tensor]]):
        self.groups = groups

    def pin_memory(self) -> DecodedBatch:
        return DecodedBatch([(rows, needs, _PINNED.pinned(pixels)) for rows, needs, pixels in self.groups])


def _collate(items) -> DecodedBatch:
    """Decoded items -> one ``DecodedBatch``. Runs in the DataLoader worker that decoded the batch, so the batch
    reaches this process as one shared-memory tensor per image size."""
    by_size: dict[tuple[int, ...], list] = {}
    for item in items:
        by_size.setdefault(tuple(item[2].shape), []).append(item)
    return DecodedBatch([([row for row, _, _ in group], [needs for _, needs, _ in group],
                          _stacked([pixels for _, _, pixels in group])) for group in by_size.values()])


def _stacked(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack``, in a DataLoader worker straight into shared memory (as torch's ``default_collate`` does):
    the batch then reaches the main process without another copy."""
    if torch.utils.data.get_worker_info() is None:
        return torch.stack(tensors)
    shared = tensors[0].untyped_storage()._new_shared(sum(t.nbytes for t in tensors))
    out = torch.empty(0, dtype=tensors[0].dtype).set_(shared).view(len(tensors), *tensors[0].shape)
    return torch.stack(tensors, out=out)


def decoded_batches(source: Callable, plan: list[tuple[int, tuple[Need, ...]]], backbones: dict[str, Backbone],
                    batch_size: int, num_workers: int | None = None):
    """``plan`` (row, needs) decoded, in ``DecodedBatch``es of ``batch_size`` rows in plan order. Each DataLoader
    worker (``default_num_workers``) decodes and stacks whole batches; when a backbone is on a GPU, the loader's
    pinning thread copies them into reused pinned memory (``PinnedBuffers``; the GPU then copies without
    blocking). Measured on an H100 machine (benchmarks/README.md): stacking in this process instead, item by
    item, took 40% of a cold run and capped decoding at ~85 images/s."""
    on_gpu = any(b.device.startswith("cuda") for b in backbones.values())
    if num_workers is None:
        num_workers = default_num_workers("cuda" if on_gpu else "cpu")
    loader = torch.utils.data.DataLoader(
        _Decode(source, plan), batch_size=batch_size, shuffle=False, num_workers=num_workers, collate_fn=_collate,
        pin_memory=on_gpu, prefetch_factor=2 if num_workers else None,
        multiprocessing_context=_worker_context(on_gpu) if num_workers else None)
    yield from loader


def prepared_batch(batch: DecodedBatch, backbones: dict[str, Backbone]) -> list[tuple[Need, list[int], torch.Tensor]]:
    """[(need, rows, model inputs on the backbone's device)] for a decoded batch, the rows in batch order: each
    size group copied to each device once (without blocking from pinned memory; the buffer goes back to the pool
    behind an event), prepared once per preparation (``Preparation.key``), kind and grid for the rows that need
    it, and the groups' inputs joined, so that a backbone embeds the batch in one forward pass whatever the
    images' sizes. Nothing here reads a device value back, so the batch is queued while the device still works
    on the one before."""
    parts: dict[Need, tuple[list[int], list[torch.Tensor]]] = {}
    for rows, needs, pixels in batch.groups:
        devices = {backbones[n.backbone].device for row_needs in needs for n in row_needs}
        on = {device: pixels.to(device, non_blocking=True).permute(0, 3, 1, 2) for device in devices}
        if pixels.is_pinned() and torch.cuda.is_available():
            event = torch.cuda.Event()
            event.record()
            _PINNED.release(pixels, event)
        prepared: dict[tuple, torch.Tensor] = {}
        for need in dict.fromkeys(n for row_needs in needs for n in row_needs):
            backbone = backbones[need.backbone]
            members = [k for k, row_needs in enumerate(needs) if need in row_needs]
            alike = (backbone.preparation.key, backbone.device, need.kind, tuple(members)) + \
                ((need.grid, backbone.grid_cut) if need.kind == "grid" else ())
            if alike not in prepared:
                images = on[backbone.device]
                if len(members) < len(rows):
                    images = images[_indices(members, backbone.device)]
                prepared[alike] = backbone.preparation.prepare(images, need.kind, need.grid, backbone.grid_cut)
            need_rows, inputs = parts.setdefault(need, ([], []))
            need_rows.extend(rows[k] for k in members)
            inputs.append(prepared[alike])
    out = []
    for need, (rows, inputs) in parts.items():
        joined = inputs[0] if len(inputs) == 1 else torch.cat(inputs)
        order = sorted(range(len(rows)), key=rows.__getitem__)
        if order != list(range(len(rows))):
            joined = joined[_indices(order, backbones[need.backbone].device)]
        out.append((need, sorted(rows), joined))
    return out


def _indices(members: list[int], device: str) -> torch.Tensor:
    """An index tensor on ``device``, copied from pinned memory on a GPU so that the copy does not wait."""
    index = torch.tensor(members, dtype=torch.long)
    return index.pin_memory().to(device, non_blocking=True) if device.startswith("cuda") else index


# Cores per DataLoader worker when the backbones run on the CPU: the workers share the cores with the model's
# own threads, so decoding in the main process wins on a small machine (benchmarks/README.md, harness_speed.py
# on 2 cores: harness cold / baseline 1.04-1.05 with 0 workers, 1.22-1.25 with 1).
CPU_CORES_PER_WORKER = 4


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_num_workers(device: str) -> int:
    """DataLoader worker processes when the caller names none: one per core when the backbones run on a GPU
    (decoding can then be the bottleneck: decoding a 1024 px PNG costs ~25-50 ms of one core, against ~4 ms of an
    H100 for two CLIPs and a DINO grid; benchmarks/README.md), one per ``CPU_CORES_PER_WORKER`` cores on the CPU
    (none, decoding in the main process, below that)."""
    cores = available_cores()
    return cores if device.startswith("cuda") else cores // CPU_CORES_PER_WORKER


def _worker_context(on_gpu: bool):
    """How DataLoader workers start. Forked workers cannot use a process that has initialised CUDA; a fork
    server, started once with the module the workers unpickle already imported, forks them in milliseconds where
    spawning each would import torch again. Workers only decode: no model library is imported there."""
    if not on_gpu:
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["benchmark.features.embeddings"])
    return context


class Exchange:
    """What sharded processes tell one another, through ``torch.distributed`` object collectives on a gloo
    group (the default group when it is gloo; with NCCL, a gloo group beside it, so that embeddings travel as
    CPU bytes over TCP, between machines too)."""

    _group = None  # the gloo group made beside a non-gloo default group, made once by every process

    def __init__(self, shard: tuple[int, int]):
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("sharded scoring needs torch.distributed initialised in every process "
                             "(accelerate launch, torchrun, or culturelens score --num-processes N)")
        if shard != (dist.get_rank(), dist.get_world_size()):
            raise ValueError(f"shard {shard} is not this process's (rank, world size) "
                             f"({dist.get_rank()}, {dist.get_world_size()})")
        if dist.get_backend() != "gloo" and Exchange._group is None:
            Exchange._group = dist.new_group(backend="gloo")
        self.dist, self.rank, self.world = dist, shard[0], shard[1]
        self.group = None if dist.get_backend() == "gloo" else Exchange._group

    def all_gather(self, value) -> list:
        out = [None] * self.world
        self.dist.all_gather_object(out, value, group=self.group)
        return out

    def gather(self, value) -> list | None:
        """Every process's ``value`` on rank 0, in rank order; None elsewhere."""
        out = [None] * self.world if self.rank == 0 else None
        self.dist.gather_object(value, out, dst=0, group=self.group)
        return out


@dataclass
class Features:
    arrays: dict[Need, np.ndarray]
    truncated: dict[str, np.ndarray]
    cached: int = 0  # embeddings found in the cache
    computed: int = 0  # embeddings computed for this run, by all processes


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_texts(backbone: Backbone, texts: list[str], cache: EmbeddingCache | None,
                batch_size: int = 32) -> dict[str, np.ndarray]:
    """Text -> unit-norm embedding under ``backbone``, from the cache where it has them; new ones are cached."""
    keys = {text: entry_key(_text_sha(text), backbone.key, "text") for text in sorted(set(texts))}
    found = cache.get_many(keys.values()) if cache is not None else {}
    vectors = {text: found[key] for text, (key, _) in keys.items() if key in found}
    todo = [text for text in keys if text not in vectors]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        embedded = backbone.embed_texts(chunk)
        vectors.update(zip(chunk, embedded))
        if cache is not None:
            cache.put_many((*keys[t], v) for t, v in zip(chunk, embedded))
    return vectors


def compute_features(source: Path | Callable, images: pd.DataFrame, needs: list[Need],
                     backbones: dict[str, Backbone], cache: EmbeddingCache | None = None, *, batch_size: int = 32,
                     num_workers: int | None = None, shard: tuple[int, int] = (0, 1),
                     progress: Progress | None = None, stage: str = "embedding images") -> Features:
    """Features for every row of ``images`` (columns: image_sha256, and prompt for text needs) and every need.

    ``source`` opens row i's image: a validated submission folder (its shards hold the images the rows name by
    ``path``: ``submission.shards.Shards.source``) or a callable giving a file or the image's bytes.
    ``num_workers``: DataLoader processes (None: ``default_num_workers``). With ``shard=(rank, world)``, every
    process calls this with the same arguments but its own ``cache``; rank 0 gets the features, the others
    empty ``arrays`` (see the module).
    """
    rank, world = shard
    exchange = Exchange(shard) if world > 1 else None
    image_needs = [n for n in needs if n.kind != "text"]
    text_backbones = sorted({n.backbone for n in needs if n.kind == "text"})
    shas = images["image_sha256"].tolist()
    texts = images["prompt"].tolist() if text_backbones else []
    if isinstance(source, (str, Path)):
        source = Shards(Path(source)).source(images["path"].tolist())

    requests = {(row, need): entry_key(sha, backbones[need.backbone].image_key, need.name)
                for row, sha in enumerate(shas) for need in image_needs}
    unique_texts = sorted(set(texts))
    text_requests = {(text, b): entry_key(_text_sha(text), backbones[b].key, "text")
                     for text in unique_texts for b in text_backbones}
    everything = {**requests, **text_requests}
    found = cache.get_many(everything.values()) if cache is not None else {}
    values: dict[tuple, np.ndarray] = {k: found[key] for k, (key, _) in everything.items() if key in found}
    held_here = set(values)
    if exchange is not None:  # one bit per embedding and process: what every cache holds
        bits = np.fromiter((k in values for k in everything), dtype=bool, count=len(everything))
        held = np.stack([np.unpackbits(b, count=len(everything)).astype(bool)
                         for b in exchange.all_gather(np.packbits(bits))])
        holder = dict(zip(everything, np.where(held.any(axis=0), held.argmax(axis=0), -1).tolist()))
    else:
        holder = {k: 0 for k in values}
    available = {k for k, h in holder.items() if h >= 0}
    cached = len(available)
    computed = len(everything) - cached  # by all processes together

    # Texts are few: rank 0 embeds the missing ones, in sorted order.
    if rank == 0:
        for b in text_backbones:
            todo = [t for t in unique_texts if (t, b) not in available]
            values.update({(t, b): v for t, v in embed_texts(backbones[b], todo, cache, batch_size).items()})

    plan = [(row, missing) for row in range(len(images))
            if (missing := tuple(n for n in image_needs if (row, n) not in available))]
    batches = [plan[i:i + batch_size] for i in range(0, len(plan), batch_size)]
    mine = [item for b, batch in enumerate(batches) if b % world == rank for item in batch]
    embedded: set[tuple] = set()
    if mine:
        embedded = _embed_planned(source, mine, backbones, requests, values, cache, batch_size=batch_size,
                                  num_workers=num_workers, progress=progress, stage=stage)

    if exchange is not None:
        send = {} if rank == 0 else {i: values[k] for i, k in enumerate(everything)
                                     if k in embedded or holder.get(k) == rank}
        received = exchange.gather(send)
        if rank != 0:
            return Features({}, {}, cached, computed)
        keys = list(everything)
        fresh = {keys[i]: v for part in received[1:] for i, v in part.items()}
        values.update(fresh)
        if cache is not None:  # this machine's cache then holds every embedding of the run
            cache.put_many((*everything[k], v) for k, v in fresh.items() if k not in held_here)

    arrays = {need: np.stack([values[(row, need)] for row in range(len(images))]) for need in image_needs}
    for b in text_backbones:
        arrays[Need(b, "text")] = np.stack([values[(text, b)] for text in texts])
    truncated = {}
    for b in text_backbones:
        cut = dict(zip(unique_texts, backbones[b].truncated(unique_texts)))
        truncated[b] = np.array([cut[t] for t in texts], dtype=bool)
    return Features(arrays, truncated, cached, computed)


def _embed_planned(source: Callable, plan: list[tuple[int, tuple[Need, ...]]], backbones: dict[str, Backbone],
                   requests: dict, values: dict, cache: EmbeddingCache | None, *, batch_size: int,
                   num_workers: int | None, progress: Progress | None, stage: str) -> set[tuple]:
    """Decode, stage and embed ``plan`` (row, needs) into ``values``, caching batch by batch; returns the
    (row, need) keys embedded. Batch i + 1 is queued on the device before batch i's embeddings are read."""
    embedded: set[tuple] = set()
    done = 0

    def store(started) -> None:
        nonlocal done
        fresh = []
        for need, rows, pending in started:
            for row, vector in zip(rows, pending.result()):
                values[(row, need)] = vector
                embedded.add((row, need))
                fresh.append((*requests[(row, need)], vector))
        if cache is not None:
            cache.put_many(fresh)
        done += len({r for _, rows, _ in started for r in rows})
        if progress:
            progress(stage, done, len(plan))

    previous = None
    for batch in decoded_batches(source, plan, backbones, batch_size, num_workers):
        started = [(need, rows, backbones[need.backbone].embed_start(inputs))
                   for need, rows, inputs in prepared_batch(batch, backbones)]
        if previous is not None:
            store(previous)
        previous = started
    if previous is not None:
        store(previous)
    return embedded

"""Embeddings of images and texts, through the content-addressed cache (``benchmark.cache``): each image decoded
once, embedded once per backbone.

1. The union of the needs (``benchmark.features.Need``) is looked up in the embedding cache.
2. Images with anything missing are decoded once each (``images.decode_for_scoring``), in DataLoader worker
   processes (``default_num_workers``, a whole batch per worker), and staged for every backbone that still needs
   them (``encoders.base.Preparation``: uint8 pixels, staged once for backbones that prepare alike); on a GPU the
   batches come in pinned memory, are copied without blocking and finished (rescaled, normalised) there. Each
   backbone embeds its batch under ``torch.inference_mode`` (autocast fp16/bf16 on GPU) while the previous
   batch's embeddings come back and go to the cache, so a crash loses at most two batches of work.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmark.cache import EmbeddingCache, entry_key
from benchmark.encoders.base import Backbone, as_preparation
from benchmark.encoders.base import stage as stage_input
from benchmark.encoders.spec import GRID_CUTS
from benchmark.features import Need
from benchmark.images import decode_for_scoring
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
    """Item i: decode image once, stage it for each need it still lacks (``encoders.base.Preparation``; needs
    whose preparations stage alike share one staging). Holds only the source and the preparations (no
    weights), so worker processes stay light."""

    def __init__(self, source: Callable, plan: list[tuple[int, tuple[Need, ...]]], preparations: dict[str, Callable],
                 cuts: dict[str, str] | None = None):  # backbone -> grid cut (``grid_edges``), default rounded
        self.source, self.plan, self.cuts = source, plan, cuts or {}
        self.preparations = {b: as_preparation(p, f"backbone:{b}") for b, p in preparations.items()}

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, index: int):
        row, needs = self.plan[index]
        rgb = decode_for_scoring(self.source(row), formats=None)  # references may be in any format Pillow reads
        staged, out = {}, {}
        for need in needs:
            preparation = self.preparations[need.backbone]
            cut = self.cuts.get(need.backbone, GRID_CUTS[0])
            alike = (preparation.key, need.kind) + ((need.grid, cut) if need.kind == "grid" else ())
            if alike not in staged:
                staged[alike] = stage_input(preparation, rgb, need.kind, need.grid, cut)
            out[need] = staged[alike]
        return row, out


def _collate(items):
    """Decoded items -> [(need, rows, stacked inputs)] for each need present in the batch. Runs in the DataLoader
    worker that decoded the batch, so the batch reaches this process as one shared-memory tensor per need (needs
    staged alike share one)."""
    by_need: dict[Need, tuple[list[int], list[torch.Tensor]]] = {}
    for row, prepared in items:
        for need, tensor in prepared.items():
            rows, tensors = by_need.setdefault(need, ([], []))
            rows.append(row)
            tensors.append(tensor)
    stacked: dict[tuple[int, ...], torch.Tensor] = {}
    batch = []
    for need, (rows, tensors) in by_need.items():
        alike = tuple(map(id, tensors))
        if alike not in stacked:
            stacked[alike] = torch.stack(tensors)
        batch.append((need, rows, stacked[alike]))
    return batch


def decoded_batches(source: Callable, plan: list[tuple[int, tuple[Need, ...]]], backbones: dict[str, Backbone],
                    batch_size: int, num_workers: int | None = None):
    """``plan`` (row, needs) decoded and staged, in batches of ``batch_size`` rows in plan order:
    [(need, rows, stacked staged inputs)]. Each DataLoader worker (``default_num_workers``) decodes and stacks
    whole batches; when a backbone is on a GPU, the loader's pinning thread copies them into pinned memory
    (the GPU then copies without blocking). Measured on an H100 machine (benchmarks/README.md): stacking in
    this process instead, item by item, took 40% of a cold run and capped decoding at ~85 images/s."""
    on_gpu = any(b.device.startswith("cuda") for b in backbones.values())
    if num_workers is None:
        num_workers = default_num_workers("cuda" if on_gpu else "cpu")
    loader = torch.utils.data.DataLoader(
        _Decode(source, plan, {b: x.preparation for b, x in backbones.items()},
                {b: x.grid_cut for b, x in backbones.items()}),
        batch_size=batch_size, shuffle=False, num_workers=num_workers, collate_fn=_collate, pin_memory=on_gpu,
        prefetch_factor=2 if num_workers else None,
        multiprocessing_context=_worker_context(on_gpu) if num_workers else None)
    yield from loader


# Cores per DataLoader worker when the backbones run on the CPU: the workers share the cores with the model's
# own threads, so decoding in the main process wins on a small machine (benchmarks/README.md, harness_speed.py
# on 2 cores: harness cold / baseline 1.04-1.05 with 0 workers, 1.22-1.25 with 1).
CPU_CORES_PER_WORKER = 4


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_num_workers(device: str) -> int:
    """DataLoader worker processes when the caller names none: one per core when the backbones run on a GPU
    (decoding is then the bottleneck: on an H100 machine, decoding and staging a 1024 px PNG cost ~50-90 ms of
    one core, against ~4 ms of GPU time for two CLIPs and a DINO grid; benchmarks/README.md), one per ``CPU_CORES_PER_WORKER`` cores on the CPU (none, decoding in the main
    process, below that)."""
    cores = available_cores()
    return cores if device.startswith("cuda") else cores // CPU_CORES_PER_WORKER


def _worker_context(on_gpu: bool):
    """How DataLoader workers start. Forked workers cannot use a process that has initialised CUDA; a fork
    server, started once with the modules the workers unpickle already imported, forks them in milliseconds
    where spawning each would import torch, transformers and open_clip again."""
    if not on_gpu:
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["benchmark.features.embeddings", "benchmark.encoders.open_clip",
                                    "benchmark.encoders.hf_vision"])
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

    requests = {(row, need): entry_key(sha, backbones[need.backbone].key, need.name)
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
        started = [(need, rows, backbones[need.backbone].embed_start(inputs)) for need, rows, inputs in batch]
        if previous is not None:
            store(previous)
        previous = started
    if previous is not None:
        store(previous)
    return embedded

"""Score a validated submission: each image decoded once, embedded once per backbone, every metric fed
from memory.

1. The union of the metrics' needs is looked up in the embedding cache.
2. Images with anything missing are decoded once each (``images.decode_for_scoring``), in DataLoader worker
   processes (``default_num_workers``), and staged for every backbone that still needs them
   (``encoders.base.Preparation``: uint8 pixels, staged once for backbones that prepare alike); on a GPU the
   batches come in pinned memory, are copied without blocking and finished (rescaled, normalised) there. Each
   backbone embeds its batch under ``torch.inference_mode`` (autocast fp16/bf16 on GPU) while the previous
   batch's embeddings come back and go to the cache, so a crash loses at most two batches of work.
3. Every metric gets the same aligned arrays and returns one value (and note)
   per image, or per prompt for prompt-level metrics; aggregates, curves and
   derived rows follow (``benchmark.aggregate``).

Scale-out, over processes and machines with nothing shared but ``torch.distributed`` (``accelerate launch``
sets it up; ``culturelens score`` wires this): with ``shard=(rank, world)`` every process looks in its own
cache, the processes tell one another what they hold (``all_gather_object`` of one bit per embedding), and
what no process holds is planned into the same batches as in one process; a process embeds the batches ``b``
with ``b % world == rank``, then sends rank 0 (``gather_object``) what it embedded and what only its cache
held. Rank 0 caches what it received and scores: the numbers are identical to one process's.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from benchmark import __version__, results
from benchmark.aggregate import aggregate, aggregate_curves
from benchmark.cache import EmbeddingCache, entry_key
from benchmark.datasets.prompts import SLICE_COLUMNS, PromptSet
from benchmark.encoders.base import Backbone, as_preparation
from benchmark.encoders.base import stage as stage_input
from benchmark.encoders.spec import GRID_CUTS
from benchmark.images import decode_for_scoring, open_as_viewed
from benchmark.metrics.base import Inputs, Metric, Need
from benchmark.results import ERROR_NOTE
from benchmark.submission.manifest import Manifest

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class FileSource:
    """Row i -> the path of a submitted image (picklable for DataLoader workers)."""

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


def _collate(items, pin: bool = False):
    """-> [(need, rows, stacked inputs)] for each need present in the batch; stacked into pinned memory when
    ``pin`` (a GPU then copies it without blocking)."""
    by_need: dict[Need, tuple[list[int], list[torch.Tensor]]] = {}
    for row, prepared in items:
        for need, tensor in prepared.items():
            rows, tensors = by_need.setdefault(need, ([], []))
            rows.append(row)
            tensors.append(tensor)
    batch = []
    for need, (rows, tensors) in by_need.items():
        out = torch.empty((len(tensors), *tensors[0].shape), dtype=tensors[0].dtype, pin_memory=True) if pin else None
        batch.append((need, rows, torch.stack(tensors, out=out)))
    return batch


def _as_is(item):
    return item


def decoded_batches(source: Callable, plan: list[tuple[int, tuple[Need, ...]]], backbones: dict[str, Backbone],
                    batch_size: int, num_workers: int | None = None):
    """``plan`` (row, needs) decoded and staged, in batches of ``batch_size`` rows in plan order:
    [(need, rows, stacked staged inputs)]. DataLoader workers (``default_num_workers``) decode one image per
    item, so that every worker starts at once and none holds back a whole batch; this process stacks the
    batches (into pinned memory when a backbone is on a GPU)."""
    on_gpu = any(b.device.startswith("cuda") for b in backbones.values())
    if num_workers is None:
        num_workers = default_num_workers("cuda" if on_gpu else "cpu")
    loader = torch.utils.data.DataLoader(
        _Decode(source, plan, {b: x.preparation for b, x in backbones.items()},
                {b: x.grid_cut for b, x in backbones.items()}),
        batch_size=None, shuffle=False, num_workers=num_workers, collate_fn=_as_is,
        prefetch_factor=max(2, -(-2 * batch_size // num_workers)) if num_workers else None,
        multiprocessing_context=_worker_context(on_gpu) if num_workers else None)
    items = []
    for item in loader:
        items.append(item)
        if len(items) == batch_size:
            yield _collate(items, on_gpu)
            items = []
    if items:
        yield _collate(items, on_gpu)


# Cores per DataLoader worker when the backbones run on the CPU: the workers share the cores with the model's
# own threads, so decoding in the main process wins on a small machine (benchmarks/README.md, harness_speed.py
# on 2 cores: harness cold / baseline 1.04-1.05 with 0 workers, 1.22-1.25 with 1).
CPU_CORES_PER_WORKER = 4


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_num_workers(device: str) -> int:
    """DataLoader worker processes when the caller names none: one per core when the backbones run on a GPU
    (decoding is then the bottleneck: ~25-40 ms per 1024 px PNG on one core, against ~2 ms of GPU time for
    CLIP and a DINO grid), one per ``CPU_CORES_PER_WORKER`` cores on the CPU (none, decoding in the main
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
    context.set_forkserver_preload(["benchmark.harness", "benchmark.encoders.open_clip",
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

    ``source`` opens row i's image: a submission folder (rows then have ``path``) or a callable.
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
        source = FileSource(Path(source), images["path"].tolist())

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


def load_backbones(metrics: list[Metric], registry: dict, device: str | None = None
                   ) -> tuple[dict[str, Backbone], list[Metric], dict[str, str]]:
    """Load every backbone the metrics need, once. A metric whose backbone cannot be loaded is
    returned as disabled, with the reason, instead of failing the others."""
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import BackboneUnavailable

    backbones: dict[str, Backbone] = {}
    failures: dict[str, str] = {}
    for backbone_id in sorted({n.backbone for m in metrics for n in m.info.needs}):
        try:
            backbones[backbone_id] = load_backbone(backbone_id, registry, device)
        except BackboneUnavailable as error:
            failures[backbone_id] = str(error)
    enabled, disabled = [], {}
    for metric in metrics:
        missing = sorted({n.backbone for n in metric.info.needs} & set(failures))
        if missing:
            disabled[metric.info.name] = failures[missing[0]]
        elif reason := metric.check(backbones):
            disabled[metric.info.name] = reason
        else:
            enabled.append(metric)
    return backbones, enabled, disabled


def image_rows(images: pd.DataFrame, prompts: PromptSet) -> pd.DataFrame:
    """A submission's images (prompt_id, seed, path, sha256) in (prompt, seed) order, with their prompt columns."""
    if images.empty:
        raise ValueError("the submission has no image to score")
    images = images.sort_values(["prompt_id", "seed"]).reset_index(drop=True)
    return images.rename(columns={"sha256": "image_sha256"}).join(prompts.table, on="prompt_id")


@dataclass
class Scores:
    per_image: pd.DataFrame  # image-level rows, and prompt-level rows (seed and image columns null)
    aggregates: list[dict]
    curves: pd.DataFrame  # per prompt and per model (prompt_id null): metric, x, value, ...
    run: dict


def non_finite_rows(features: dict[Need, np.ndarray]) -> dict[Need, np.ndarray]:
    """Need -> per row, whether that row's features hold a NaN or an infinity (only needs with such a row)."""
    bad = {need: ~np.isfinite(array.reshape(len(array), -1)).all(axis=1) for need, array in features.items()}
    return {need: rows for need, rows in bad.items() if rows.any()}


def exclusions(metric: Metric, bad: dict[Need, np.ndarray], n: int) -> np.ndarray:
    """Per row, why ``metric`` cannot use it (the first of its needs with non-finite features there), or None."""
    reasons = np.full(n, None, dtype=object)
    for need in metric.info.needs:
        if need in bad:
            reasons[bad[need] & pd.isna(reasons)] = f"non-finite {need} embedding"
    return reasons


def _subset(inputs: Inputs, keep: np.ndarray) -> Inputs:
    """``inputs`` restricted to the rows where ``keep`` is true, renumbered from 0, with a memo of their own."""
    rows = np.flatnonzero(keep)
    open_image = inputs.open_image
    return replace(inputs, images=inputs.images.iloc[rows].reset_index(drop=True),
                   features={need: array[rows] for need, array in inputs.features.items()},
                   truncated={b: cut[rows] for b, cut in inputs.truncated.items()}, memo={},
                   open_image=open_image and (lambda row: open_image(int(rows[row]))))


def mark_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Metric rows -> the same with ``error`` set where the value is infinite (``non-finite <metric> value``) or
    the note starts with ``ERROR_NOTE`` (the rest of it); such rows lose their value, note and detail.
    NaN stays an undefined value (e.g. VR of an image not recognised), not an error."""
    values = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
    notes = frame["note"].tolist() if "note" in frame.columns else [None] * len(frame)
    error = np.array([note[len(ERROR_NOTE):] if isinstance(note, str) and note.startswith(ERROR_NOTE) else None
                      for note in notes], dtype=object)
    infinite = np.isinf(values) & pd.isna(error)
    error[infinite] = [f"non-finite {m} value" for m in frame["metric"].to_numpy()[infinite]]
    failed = ~pd.isna(error)
    frame = frame.assign(value=np.where(failed, np.nan, values),
                         note=pd.Series([note if isinstance(note, str) and not bad else None
                                         for note, bad in zip(notes, failed)], index=frame.index, dtype=object),
                         error=pd.Series(error, index=frame.index, dtype=object))
    if "detail" in frame.columns:
        frame.loc[failed, "detail"] = None
    return frame


def _metric_rows(metric: Metric, inputs: Inputs, base: pd.DataFrame) -> pd.DataFrame:
    info = metric.info
    if info.level == "image":
        values, notes = metric.per_image(inputs)
        details = metric.details(inputs)
        detail = [json.dumps(d) if d else None for d in details] if details is not None else None
        return base.assign(track=info.track, metric=info.name, value=values, note=notes, detail=detail)
    per_prompt = metric.per_prompt(inputs)
    firsts = base.drop_duplicates("prompt_id").set_index("prompt_id")
    rows = per_prompt.join(firsts.drop(columns=["seed", "image_path", "image_sha256"]), on="prompt_id")
    return rows.assign(track=info.track, metric=info.name, seed=None, image_path=None, image_sha256=None)


def _score_metric(metric: Metric, inputs: Inputs, base: pd.DataFrame, bad: dict[Need, np.ndarray],
                  views: dict[bytes, Inputs]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One metric's rows and curves over the rows whose features it needs are finite; the other rows become
    error rows (value null, ``error`` the reason). ``views``: the Inputs made so far, by usable rows, so that
    metrics with the same usable rows share one (and its memo)."""
    reasons = exclusions(metric, bad, len(base))
    keep = pd.isna(reasons)
    excluded = base[~keep].assign(track=metric.info.track, metric=metric.info.name, value=np.nan, note=None,
                                  detail=None, error=reasons[~keep])
    if not keep.any():
        return excluded, None
    view = views.setdefault(keep.tobytes(), inputs if keep.all() else _subset(inputs, keep))
    scored = mark_errors(_metric_rows(metric, view, base[keep]))
    if len(excluded):  # image-level rows keep the images' order: an excluded image's row sits where its score would
        scored = pd.concat([scored, excluded])
        scored = scored.sort_index() if metric.info.level == "image" else scored
    return scored, metric.curves(view)


def error_counts(per_image: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """How many images (or prompts, for a prompt-level value) error rows left out of at least one metric, and
    reason -> how many of them it left out."""
    errors = per_image[per_image["error"].notna()]
    keys = errors["prompt_id"].astype(str) + "/" + errors["seed"].astype(str)
    by_reason = keys.groupby(errors["error"]).nunique().sort_index()
    return keys.nunique(), {str(reason): int(n) for reason, n in by_reason.items()}


def score(folder: Path, manifest: Manifest, prompts: PromptSet, images: pd.DataFrame, metrics: list[Metric],
          backbones: dict[str, Backbone], cache: EmbeddingCache | None = None, *, submission_id: str,
          batch_size: int = 32, num_workers: int | None = None, shard: tuple[int, int] = (0, 1),
          progress: Progress | None = None,
          disabled: dict[str, str] | None = None, settings: dict | None = None) -> Scores | None:
    """Score one submission (``images``: prompt_id, seed, path, sha256 per image); None on ranks > 0 (every
    process of a ``shard`` calls this, each with its own ``cache``: see the module).

    ``settings``: how the caller built the metrics (``benchmark.reproduce.settings_record``), recorded in
    ``run["settings"]`` with the backbone specs and batch size so that ``culturelens reproduce`` can redo it.

    Metrics that do not apply to the submission (``Metric.applies``) are skipped, and
    ``run["skipped"]`` says why, together with the ``disabled`` ones the caller could not run at all.
    """
    metrics = [m for metric in metrics for m in metric.for_submission(manifest)]
    rows = image_rows(images, prompts)
    counts = prompts.reference_counts()
    probe = Inputs(rows, {}, {}, reference_counts=counts, catalogue=prompts.table)
    skipped = {m.info.name: reason for m in metrics if (reason := m.applies(probe))}
    metrics = [m for m in metrics if m.info.name not in skipped]
    needs = sorted({n for m in metrics for n in m.info.needs}, key=str)
    options = {"batch_size": batch_size, "num_workers": num_workers, "shard": shard, "progress": progress}
    features = compute_features(folder, rows, [n for n in needs if n.of == "generated"], backbones, cache,
                                **options)
    reference_needs = [n for n in needs if n.of == "reference"]
    references, reference_features = {}, None
    if reference_needs:
        source, reference_rows = prompts.references(set(rows["prompt_id"]))
        plain = {n: Need(n.backbone, n.kind, n.grid) for n in reference_needs}
        reference_features = compute_features(source, reference_rows, list(plain.values()), backbones, cache,
                                              stage="embedding references", **options)
        if shard[0] != 0:
            return None
        groups = reference_rows.groupby("prompt_id").indices
        references = {n: {prompt_id: reference_features.arrays[plain[n]][index] for prompt_id, index in groups.items()}
                      for n in reference_needs}
    if shard[0] != 0:
        return None
    def encode_text(backbone_id: str, texts: list[str]) -> np.ndarray:
        vectors = embed_texts(backbones[backbone_id], texts, cache, batch_size)
        return np.stack([vectors[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def open_image(row: int) -> Image.Image:
        return open_as_viewed(Path(folder) / rows["path"].iloc[row])

    inputs = Inputs(rows, features.arrays, features.truncated, references, counts, catalogue=prompts.table,
                    encode_text=encode_text, open_image=open_image)
    slices = [c for c in SLICE_COLUMNS if c in rows.columns]
    base = rows[["prompt_id", "seed", "path", "image_sha256", *slices]].rename(columns={"path": "image_path"})
    base = base.assign(submission_id=submission_id, model=manifest.model.name)
    bad = non_finite_rows(features.arrays)
    views: dict[bytes, Inputs] = {}  # one Inputs per set of usable rows, so metrics alike share their memo
    frames, curve_frames = [], []
    for done, metric in enumerate(metrics, start=1):
        frame, curve = _score_metric(metric, inputs, base, bad, views)
        frames.append(frame)
        if curve is not None:
            curve_frames.append(curve.assign(metric=metric.info.name))
        if progress:
            progress("metrics", done, len(metrics))
    per_image = pd.concat(frames, ignore_index=True) if frames else \
        base.iloc[0:0].assign(track=None, metric=None, value=None, note=None, error=None)
    per_prompt_curves = pd.concat(curve_frames, ignore_index=True) if curve_frames else None
    model_curves = aggregate_curves(per_prompt_curves) if per_prompt_curves is not None else None

    scored_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    used = {b: backbones[b] for b in sorted({n.backbone for n in needs})}
    run = {
        "submission_id": submission_id,
        "harness_version": __version__,
        "backbones": {b: {"uid": x.spec.uid, "revision": x.revision, "preprocess": x.preprocess_version}
                      for b, x in used.items()},
        "metrics": {m.info.name: m.info.version for m in metrics},
        "skipped": {**(disabled or {}), **skipped},
        "dataset": f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}",
        "seeds": list(manifest.seeds),
        "settings": settings,  # None: the caller did not say (culturelens reproduce refuses such a result)
        "backbone_specs": {b: x.spec.to_dict() for b, x in used.items()},
        # the prompt rows' content (the datasets fingerprint above stays the same when a local copy is rebuilt
        # with other rows); benchmark.reproduce.prompts_digest computes the same
        "dataset_digest": hashlib.sha256(prompts.table.to_json(orient="split", default_handler=str).encode()
                                         ).hexdigest()[:16],
        "batch_size": batch_size,
        "images": len(images),
        "missing": len(manifest.missing),
        "embeddings_cached": features.cached + (reference_features.cached if reference_features else 0),
        "embeddings_computed": features.computed + (reference_features.computed if reference_features else 0),
        "scored_at": scored_at,
    }
    # images (or prompt-level values) left out of some metric for an error, and reason -> how many
    run["excluded"], run["errors"] = error_counts(per_image)
    info = {m.info.name: m.info for m in metrics}
    context = {
        "provenance": "scored", "submission_id": submission_id, "model": manifest.model.name,
        "model_id": manifest.model.id, "model_type": manifest.model.type, "model_revision": manifest.model.revision,
        "parameters_billions": manifest.model.parameters_billions, "harness_version": __version__,
        "dataset": run["dataset"], "seeds": ",".join(map(str, manifest.seeds)), "scored_at": scored_at,
    }

    def provenance(metric_info) -> dict:
        ids = sorted({n.backbone for n in metric_info.needs})
        return {"backbone": "+".join(f"{b}={used[b].spec.uid}" for b in ids),
                "backbone_revision": "+".join(used[b].revision for b in ids)}

    def with_protocol(row: dict, version: str) -> dict:
        """The row with the protocol its value was scored under (``results.protocol_columns``): dataset without
        its local fingerprint, images per prompt, the metric's version (``version`` where the row names none:
        its thresholds, variant, calibration, tagger) and each backbone's uid@revision."""
        backbones = [f"{b}@{r}" for b, r in zip((row.get("backbone") or "").split("+"),
                                                 (row.get("backbone_revision") or "").split("+")) if b]
        return {**row, **results.protocol_columns({
            "dataset": run["dataset"].split("@")[0], "images_per_prompt": len(manifest.seeds),
            "metric_version": row.get("metric_version") or version, "backbones": backbones})}

    aggregates = []
    for row in aggregate(per_image):
        metric = info[row["metric"]]
        aggregates.append(with_protocol({**row, **context, **provenance(metric), "metric_label": metric.label,
                                         "metric_version": metric.version,
                                         "higher_is_better": metric.higher_is_better}, metric.version))
    ordinary = list(aggregates)
    for metric in metrics:
        curve = model_curves[model_curves["metric"] == metric.info.name] if model_curves is not None else None
        aggregates += [with_protocol({**row, **context, **provenance(metric.info)}, metric.info.version)
                       for row in metric.derived(ordinary, curve)]
    run["protocols"] = {row["metric"]: row["protocol"] for row in aggregates}  # metric -> its protocol
    curves = pd.concat([c for c in (per_prompt_curves, model_curves) if c is not None], ignore_index=True) \
        if per_prompt_curves is not None else pd.DataFrame(columns=["metric", "prompt_id", "x", "value"])
    return Scores(per_image, aggregates, curves.assign(submission_id=submission_id, model=manifest.model.name), run)

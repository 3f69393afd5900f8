"""Harness speed, as ratios measured in one run (absolute times on a shared machine mean little).

    python benchmarks/harness_speed.py [--images 240] [--size 256] [--device cpu] [--num-workers N]
    python benchmarks/harness_speed.py --device cuda --real-size --images 2000 --size 1024

Compares, on one synthetic submission:

- baseline: decode every image once and run each needed backbone once over it, batched, in one
  process, with nothing else (the floor a harness pays on one core);
- harness, cold: ``harness.score`` with an empty embedding cache (target: <= 1.15 x baseline on a CPU);
- harness, warm: the same submission again, everything cached (target: >= 20 x faster than cold);
- naive: what the papers' reference scripts do, each metric decoding and embedding for
  itself, one image at a time (CPU runs only: on a GPU it would take long and say little);
- decode floor: the harness's DataLoader alone (all its workers decoding and staging every image for
  every need, pinned, no model); forward floor: the backbones alone on pre-decoded, pre-staged batches
  already on the device. On a GPU the harness cannot beat the slower of the two: harness / min(floors)
  in images/s is the share of the attainable speed it reaches (target >= 0.85). GPU utilisation is
  sampled every 50 ms (NVML, as nvidia-smi reads it) during each phase.

Metrics: CLIP cosine and CLIPScore (awareness) plus a consumer of DINO 4x4-grid features
(the input of the iconicity track's visual reuse); with ``--real-size`` also a consumer of CLIP
ViT-L/14 image features. With ``--judge`` (``tiny``: the tests' random Qwen2.5-VL; or a VLM folder or Hub id)
also the relevance track itself (CAIRE: each image linked in a small knowledge base built here, then judged
for two culture labels), so cold / warm is a whole rescore including the VLM's outputs, and the warm run's
VLM forward passes are counted (0 expected). ``--profile DIR`` runs one more cold harness under
``torch.profiler`` (not timed) and writes its trace and the main process's top operations there.
Without ``--real-size`` it builds small random open_clip and DINOv2 models
(CPU-sized); with it, the real architectures with random weights: open_clip ViT-B-32 and ViT-L-14
with no pretrained tag and DINOv2-base from its configuration (facebook/dinov2-base's processor
settings). Timing needs no trained weights; ``--backbones FILE`` times the ones a backbones JSON names.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import tempfile
import threading
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from benchmark import harness
from benchmark.scoring_options import ScoringOptions
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import PromptSet
from benchmark.encoders import load_backbone
from benchmark.encoders.base import grid_edges, grid_tiles, pixels_of, prepare
from benchmark.encoders.spec import load_registry
from benchmark.features import embeddings
from benchmark.images import decode_pixels, open_as_viewed
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.submission import ImageRecord, Manifest
from benchmark.submission.shards import Shards, write_shards
from culturelens.testing.tiny_models import real_size_backbones, small_backbones

GRID = Need("dinov2-base", "grid")
LARGE = Need("clip-vit-l-14", "image")


class GridConsumer(Metric):
    """Stands in for the iconicity track: reads DINO 4x4-grid features (mean tile-to-first-tile cosine)."""

    info = MetricInfo("grid_consumer", "grid consumer", "benchmark", "1", True, "cosine", -1, 1, "-", (GRID,))

    def per_image(self, inputs: Inputs):
        grid = inputs.features[GRID]
        return np.einsum("nkd,nd->n", grid, grid[:, 0]) / grid.shape[1], [None] * len(grid)


class LargeClipConsumer(Metric):
    """Stands in for CRA robustness: reads CLIP ViT-L/14 image features (their first component)."""

    info = MetricInfo("large_clip_consumer", "large CLIP consumer", "benchmark", "1", True, "cosine", -1, 1, "-",
                      (LARGE,))

    def per_image(self, inputs: Inputs):
        return inputs.features[LARGE][:, 0].astype(float), [None] * len(inputs.features[LARGE])


def _write_image(job: tuple[str, int, int]) -> None:
    path, size, seed = job
    pixels = np.random.default_rng(seed).integers(0, 256, (size // 8, size // 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).resize((size, size), Image.BICUBIC).save(path)


def make_submission(folder: Path, n_images: int, size: int, seeds: int = 4):
    """Smooth random PNGs (noise upsampled 8x: they compress and decode like generated images, ~1.8 MB at
    1024 px), written by a process pool."""
    rows, prompts, jobs = [], {}, []
    for i in range(n_images // seeds):
        prompt_id = f"p{i:04d}"
        prompts[prompt_id] = {"prompt": f"A high resolution image of dish {i} from country {i % 8}",
                              "country": f"country {i % 8}", "concept": "cuisine"}
        for seed in range(seeds):
            path = f"images/{prompt_id}/{seed}.png"
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            jobs.append((str(folder / path), size, len(jobs)))
            rows.append({"prompt_id": prompt_id, "seed": seed, "path": path,
                         "sha256": f"{prompt_id}-{seed}-{size}"})
    made = folder / "made-by-harness-speed.json"  # a folder made before for the same images is used again
    if not made.exists() or json.loads(made.read_text()) != [n_images, size, seeds]:
        with Pool(embeddings.available_cores()) as pool:
            pool.map(_write_image, jobs, chunksize=8)
        # The harness reads a kept submission's images from its Parquet shards, as the store keeps them.
        write_shards(folder, ((ImageRecord(r["prompt_id"], r["seed"], r["path"], r["sha256"], size, size),
                               (folder / r["path"]).read_bytes()) for r in rows))
        made.write_text(json.dumps([n_images, size, seeds]))
    manifest = Manifest.model_validate({
        "format_version": 1, "model": {"name": "bench", "id": "bench", "type": "open"},
        "dataset": {"repo": "bench/prompts", "config": "bench"}, "images_per_prompt": seeds,
        "seeds": list(range(seeds)), "license": "CC0-1.0", "contact": "bench"})
    table = pd.DataFrame.from_dict(prompts, orient="index").rename_axis("prompt_id")
    return manifest, PromptSet("bench/prompts", "bench", "test", "bench", table), pd.DataFrame(rows)


def baseline(folder: Path, images: pd.DataFrame, prompts: PromptSet, backbones, needs: list[Need],
             batch_size: int) -> None:
    """Decode each image once; each backbone embeds what the metrics need, batched; texts once. One process,
    the harness's own decoder and preparations (once for backbones that prepare alike)."""
    plan = _plan(images, needs)
    for start in range(0, len(images), batch_size):
        batch = embeddings._collate([(row, wanted, torch.from_numpy(decode_pixels(folder / images["path"].iloc[row])))
                                     for row, wanted in plan[start:start + batch_size]])
        for need, _, inputs in embeddings.prepared_batch(batch, backbones):
            backbones[need.backbone].embed(inputs)
    clip = backbones["clip-vit-b-32"]
    texts = sorted(set(prompts.table["prompt"]))
    for start in range(0, len(texts), batch_size):
        clip.embed_texts(texts[start:start + batch_size])


def _plan(images: pd.DataFrame, needs: list[Need]) -> list:
    image_needs = tuple(n for n in needs if n.kind != "text")
    return [(row, image_needs) for row in range(len(images))]


def _batches(folder: Path, images: pd.DataFrame, backbones, needs, batch_size: int, num_workers: int):
    """The harness's own decoding (``features.embeddings.decoded_batches``) of every image for every need."""
    return embeddings.decoded_batches(Shards(folder).source(images["path"].tolist()), _plan(images, needs),
                                      backbones, batch_size, num_workers)


def decode_floor(folder: Path, images: pd.DataFrame, backbones, needs, batch_size: int, num_workers: int) -> None:
    for batch in _batches(folder, images, backbones, needs, batch_size, num_workers):
        for _, _, pixels in batch.groups:
            if pixels.is_pinned():  # the buffer goes back to the harness's pool, as the harness gives it back
                event = torch.cuda.Event()
                event.record()
                embeddings._PINNED.release(pixels, event)


def forward_floor(batches: list, backbones, n_images: int, batch_size: int) -> None:
    """The device alone: decoded batches already on the device, prepared there and embedded, as many as the
    submission has, reading each batch's embeddings after queueing the next as the harness does."""
    previous = None
    for b in range(math.ceil(n_images / batch_size)):
        started = [backbones[need.backbone].embed_start(inputs)
                   for need, _, inputs in embeddings.prepared_batch(batches[b % len(batches)], backbones)]
        if previous:
            [p.result() for p in previous]
        previous = started
    [p.result() for p in previous]


class Utilisation:
    """GPU utilisation (NVML, the figure nvidia-smi shows) sampled every 50 ms while in the ``with`` block."""

    def __init__(self, device: str):
        self.on = device.startswith("cuda")
        self.samples: list[int] = []

    def __enter__(self):
        self.running = self.on
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            try:
                self.samples.append(torch.cuda.utilization())
            except Exception:  # noqa: BLE001 - no NVML: utilisation not measured
                self.on = self.running = False
            time.sleep(0.05)

    def __exit__(self, *_):
        self.running = False
        self.thread.join()

    def __str__(self) -> str:
        return f"GPU busy {np.mean(self.samples):5.1f}% (median {np.median(self.samples):.0f}%)" if self.samples \
            else "GPU utilisation not measured"


def device_differences(device: str, backbones, folder: Path, images: pd.DataFrame, needs: list[Need]) -> list[str]:
    """Per need: the largest difference between the inputs prepared on ``device`` and the transforms' own on the
    CPU (in levels of 255), and between the two's embeddings (L2, unit vectors: every cosine a metric reads moves
    by at most that much)."""
    lines = []
    pictures = [open_as_viewed(folder / path) for path in images["path"].iloc[:4]]
    for need in (n for n in needs if n.kind != "text"):
        backbone = backbones[need.backbone]
        reference = torch.stack([prepare(backbone.transform, p, need.kind, need.grid, backbone.grid_cut)
                                 for p in pictures])
        pixels = torch.stack([pixels_of(p) for p in pictures]).to(device)
        prepared = backbone.preparation.prepare(pixels, need.kind, need.grid, backbone.grid_cut)
        std = getattr(backbone.preparation, "std", None)
        scale = 255 * (std if std is not None else torch.ones(3, 1, 1))
        levels = float(((prepared.cpu() - reference).abs() * scale).max())
        moved = float(np.linalg.norm(backbone.embed(prepared) - backbone.embed(reference), axis=-1).max())
        lines.append(f"  {need!s:28s} inputs differ by <= {levels:5.2f} levels; embeddings by <= {moved:.2e} (L2)")
    return lines


def staged_today(backbone, image: Image.Image, kind: str, grid: int = 4) -> torch.Tensor:
    """What a worker ran for one image and need before preparation moved to the device (the project at 30af314):
    the PIL steps of open_clip's Compose, or DINO's processor with rescaling and normalisation off, to uint8."""
    from torchvision import transforms

    if hasattr(backbone, "processor"):
        off = {"do_rescale": False, "do_normalize": False, "return_tensors": "pt"}
        if kind == "image":
            return backbone.processor(images=[image], **off)["pixel_values"][0]
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)
        xs, ys = grid_edges(image.width, grid, backbone.grid_cut), grid_edges(image.height, grid, backbone.grid_cut)
        return backbone.processor(images=[pixels[:, ys[j]:ys[j + 1], xs[i]:xs[i + 1]] for j in range(grid)
                                          for i in range(grid)], **off)["pixel_values"]
    steps = backbone.transform.transforms
    steps = steps[:next(i for i, s in enumerate(steps) if isinstance(s, transforms.ToTensor))]

    def stage(tile):
        for step in steps:
            tile = step(tile)
        return torch.from_numpy(np.asarray(tile).copy()).permute(2, 0, 1)

    return stage(image) if kind == "image" else torch.stack([stage(t) for t in grid_tiles(image, grid)])


def decoded_today(data: bytes) -> Image.Image:
    """A plain PNG as the workers decoded it before (the project at 30af314): libpng through torchvision, then a
    PIL image."""
    from torchvision.io import ImageReadMode, decode_png

    pixels = decode_png(torch.frombuffer(bytearray(data), dtype=torch.uint8), ImageReadMode.RGB)
    return Image.fromarray(pixels.permute(1, 2, 0).numpy(), "RGB")


def worker_cpu_ms(folder: Path, images: pd.DataFrame, backbones, needs: list[Need], count: int,
                  repeats: int = 3) -> tuple[float, float]:
    """CPU milliseconds per image of a DataLoader worker, one thread, in this process (``time.process_time``),
    over ``count`` images in batches of 8, the two ways taken in turn ``repeats`` times, the least of each:
    before, decoding (libpng) and staging every need on the CPU as the workers did (staged once per preparation,
    as they did), and stacking; now, ``features.embeddings``'s own worker (decode by libspng, stack)."""
    source = Shards(folder).source(images["path"].tolist())
    plan = _plan(images, needs)[:count]
    image_needs = [n for n in needs if n.kind != "text"]
    decode = embeddings._Decode(source, plan)

    def before():
        for first in range(0, len(plan), 8):
            by_need = {}
            for row, _ in plan[first:first + 8]:
                picture, staged = decoded_today(source(row)), {}
                for need in image_needs:
                    backbone = backbones[need.backbone]
                    alike = (backbone.preparation.key, need.kind)
                    if alike not in staged:
                        staged[alike] = staged_today(backbone, picture, need.kind, need.grid)
                    by_need.setdefault(alike, []).append(staged[alike])
            [torch.stack(tensors) for tensors in by_need.values()]

    def now():
        for first in range(0, len(plan), 8):
            embeddings._collate([decode[i] for i in range(first, min(first + 8, len(plan)))])

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a DataLoader worker
    times = {before: [], now: []}
    try:
        for _ in range(repeats):
            for way, spent in times.items():
                start = time.process_time()
                way()
                spent.append(time.process_time() - start)
    finally:
        torch.set_num_threads(threads)
    return min(times[before]) / len(plan) * 1e3, min(times[now]) / len(plan) * 1e3


def naive(folder: Path, images: pd.DataFrame, prompts: PromptSet, backbones) -> None:
    """Each of the three metrics decodes and embeds on its own, one image (and its prompt) at a time."""
    clip, dino = backbones["clip-vit-b-32"], backbones["dinov2-base"]
    for _metric in ("clip_cosine", "clip_score"):
        for row in images.itertuples():
            with Image.open(folder / row.path) as image:
                clip.embed(clip.prepare(image.convert("RGB"), "image").unsqueeze(0))
            clip.embed_texts([prompts.table.loc[row.prompt_id, "prompt"]])
    for row in images.itertuples():
        with Image.open(folder / row.path) as image:
            dino.embed(dino.prepare(image.convert("RGB"), "grid").unsqueeze(0))


KB_ENTITIES = ["Pysanka", "Djembe", "Feijoada", "Kente cloth", "Matryoshka", "Sushi", "Taj Mahal", "Sombrero"]
LABELS = ["Ukrainian", "Yoruba"]


def relevance_metrics(folder: Path, backbone_id: str, backbones, judge: str, device: str) -> list[Metric]:
    """The relevance track's metrics (``metrics.relevance``) for ``LABELS``: a knowledge base of ``KB_ENTITIES``
    (one 64 px image and a ~100-word Wikipedia text each) embedded with ``backbone_id``, and the judge ``judge``
    (``tiny``: the tests' random Qwen2.5-VL, written here)."""
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics import relevance
    from benchmark.relevance.kb import KnowledgeBase, build_index

    rng = np.random.default_rng(1)
    records = []
    for i, name in enumerate(KB_ENTITIES):
        image = f"e{i}/1.png"
        (folder / "kb-images" / image).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(folder / "kb-images" / image)
        records.append({"entity_id": f"bn:{i}", "name": name, "images": [image],
                        "wikipedia": f"{name} is a cultural artifact with a long tradition. " * 12})
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    build_index(folder / "records.jsonl", folder / "kb-images", folder / "kb", backbones[backbone_id],
                show_progress=False)
    if judge == "tiny":
        from culturelens.testing.tiny_qwen import save_tiny_vlm

        judge = str(save_tiny_vlm(folder / "tiny-judge"))
    return relevance.metrics(LABELS, KnowledgeBase.load(folder / "kb"), VLMJudge(judge, device=device))


def vlm_forwards(metrics: list[Metric]) -> list:
    """A counter of the judge's forward passes (one entry per batch), wrapped around its model's forward."""
    calls: list = []
    for model in {id(m.judge.model): m.judge.model for m in metrics if hasattr(m, "judge")}.values():
        real = model.forward

        def forward(*args, _real=real, **kwargs):
            calls.append(1)
            return _real(*args, **kwargs)

        model.forward = forward
    return calls


class LoopTimeline:
    """Where the harness's main loop (``embeddings._embed_planned``) spends its time, phase by phase, while in the
    ``with`` block: waiting on the DataLoader for decoded batches (and when each came), preparing inputs on the
    device, queueing the forward passes, reading the embeddings back (the waits for the device) and the cache
    writes. The functions are wrapped in place, so the run is the harness's own; the wrapping costs a clock
    read per call."""

    SPANS = ("waiting for decoded batches", "preparing inputs on the device", "queueing forward passes",
             "reading embeddings back (waits for the device)", "cache writes")

    def __init__(self):
        self.spent = dict.fromkeys(self.SPANS, 0.0)
        self.arrivals: list[float] = []
        self.loop = 0.0

    def __enter__(self) -> LoopTimeline:
        from benchmark.encoders.base import Backbone, PendingEmbedding

        _, prepare_, queue, read, write = self.SPANS  # the wait is timed by _batches
        self._undo = [(owner, name, getattr(owner, name)) for owner, name in [
            (embeddings, "_embed_planned"), (embeddings, "decoded_batches"), (embeddings, "prepared_batch"),
            (Backbone, "embed_start"), (PendingEmbedding, "result"), (EmbeddingCache, "put_many")]]
        wrapped = [self._loop, self._batches, self._spent(prepare_), self._spent(queue), self._spent(read),
                   self._spent(write)]
        for (owner, name, original), wrap in zip(self._undo, wrapped):
            setattr(owner, name, wrap(original))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in self._undo:
            setattr(owner, name, original)

    def _loop(self, original):
        def timed_loop(*args, **kwargs):
            self._start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.loop += time.perf_counter() - self._start
        return timed_loop

    def _batches(self, original):
        def timed_batches(*args, **kwargs):
            iterator = iter(original(*args, **kwargs))
            while True:
                asked = time.perf_counter()
                batch = next(iterator, None)
                came = time.perf_counter()
                self.spent[self.SPANS[0]] += came - asked
                if batch is None:
                    return
                self.arrivals.append(came - self._start)
                yield batch
        return timed_batches

    def _spent(self, span: str):
        def wrap(original):
            def timed(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.spent[span] += time.perf_counter() - start
            return timed
        return wrap

    def report(self, run_seconds: float) -> str:
        if not self.arrivals:
            return "main loop of the cold run: no batch (everything was cached)"
        came = np.array(self.arrivals)
        quarters = ", ".join(f"{q:.0%} by {np.quantile(came, q, method='inverted_cdf'):.2f} s"
                             for q in (0.25, 0.5, 0.75, 1.0))
        lines = [f"main loop of the cold run: {len(came)} batches in {self.loop:.2f} s of the run's "
                 f"{run_seconds:.2f} s; the first batch came after {came[0]:.2f} s, {quarters}; longest gap "
                 f"between two arrivals {np.diff(came, prepend=0.0).max():.2f} s"]
        lines += [f"  {span:48s} {seconds:6.2f} s" for span, seconds in self.spent.items()]
        lines.append(f"  {'the rest of the loop':48s} {self.loop - sum(self.spent.values()):6.2f} s")
        return "\n".join(lines)


def profiled(run, folder: Path, on_gpu: bool) -> None:
    """``run()`` under ``torch.profiler`` (this process: the loop that feeds the device; workers are not
    traced): the trace goes to ``folder/trace.json.gz`` (Perfetto, chrome://tracing), the top operations by time
    spent in them (on the CPU, and on the device where there is one) to ``folder/top.txt`` and the screen."""
    from torch.profiler import ProfilerActivity, profile

    folder.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as trace:
        run()
        if on_gpu:
            torch.cuda.synchronize()
    raw = folder / "trace.json"
    trace.export_chrome_trace(str(raw))
    with raw.open("rb") as plain, gzip.open(folder / "trace.json.gz", "wb") as packed:  # ~10x smaller: it travels
        shutil.copyfileobj(plain, packed)
    raw.unlink()
    averages = trace.key_averages()
    tables = [averages.table(sort_by="self_cpu_time_total", row_limit=20)]
    if on_gpu:
        tables.append(averages.table(sort_by="self_device_time_total", row_limit=15))
    (folder / "top.txt").write_text("\n\n".join(tables))
    print("profile of one more cold run (this process):\n" + "\n\n".join(tables))
    print(f"trace: {folder / 'trace.json.gz'}; tables: {folder / 'top.txt'}")


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=240)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=None,
                        help="DataLoader processes (default: the harness's, embeddings.default_num_workers)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--real-size", action="store_true", help="real architectures, random weights")
    parser.add_argument("--backbones", default=None, help="backbones JSON (default: small random models)")
    parser.add_argument("--naive", action=argparse.BooleanOptionalAction, default=None,
                        help="time the naive per-metric scoring (default: on the CPU only)")
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=None,
                        help="time the one-process baseline (default: on the CPU only; on a GPU it times one core)")
    parser.add_argument("--judge", default=None, metavar="tiny|PATH",
                        help="also score the relevance track with this VLM judge (tiny: the tests' random Qwen2.5-VL)")
    parser.add_argument("--submission", type=Path, default=None, metavar="DIR",
                        help="make the synthetic submission here, or use the one made here before (several runs)")
    parser.add_argument("--worker-cpu", type=int, default=32, metavar="IMAGES",
                        help="images over which a worker's CPU time per image is measured, before and now")
    parser.add_argument("--worker-cpu-only", action="store_true",
                        help="measure the workers' CPU time only (no model runs: real-size backbones on a CPU)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="profile one more cold run (torch.profiler) and write its trace and top operations here")
    args = parser.parse_args()
    workers = embeddings.default_num_workers(args.device) if args.num_workers is None else args.num_workers
    on_gpu = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        registry = load_registry(args.backbones) if args.backbones else \
            real_size_backbones(tmp) if args.real_size else small_backbones(tmp)
        ids = ["clip-vit-b-32", "dinov2-base"] + (["clip-vit-l-14"] if "clip-vit-l-14" in registry else [])
        backbones = {b: load_backbone(b, registry, args.device) for b in ids}
        metrics = [ClipCosine(), ClipScore(), GridConsumer()] + ([LargeClipConsumer()] if "clip-vit-l-14" in ids else [])
        if args.judge:
            metrics += relevance_metrics(tmp, "clip-vit-b-32", backbones, args.judge, args.device)
        needs = sorted({n for m in metrics for n in m.info.needs}, key=str)
        folder = args.submission or tmp / "submission"
        start = time.perf_counter()
        manifest, prompts, images = make_submission(folder, args.images, args.size)
        print(f"{len(images)} PNG images of {args.size}x{args.size} ready in {time.perf_counter() - start:.1f} s")
        before, now = worker_cpu_ms(folder, images, backbones, needs, min(args.worker_cpu, len(images)))
        print(f"worker CPU per image ({', '.join(str(n) for n in needs if n.kind != 'text')}; one thread): before "
              f"{before:6.1f} ms (decode + resize/crop on the CPU), now {now:6.1f} ms (decode only): now / before "
              f"{now / before:.2f} (target <= 0.5 for the three backbones at 1024 px)")
        if args.worker_cpu_only:
            return

        def run(with_cache):
            return harness.score(folder, manifest, prompts, images, metrics, backbones, with_cache,
                                 submission_id="bench",
                                 options=ScoringOptions(batch_size=args.batch_size, num_workers=workers))

        def synchronised(function):
            def timed_function():
                function()
                if on_gpu:
                    torch.cuda.synchronize()
            return timed_function

        # warm-ups: kernels and autocast, the worker fork server, the decoders
        head = images.head(args.batch_size)
        baseline(folder, head, prompts, backbones, needs, args.batch_size)
        decode_floor(folder, head, backbones, needs, args.batch_size, workers)
        first = next(_batches(folder, images, backbones, needs, args.batch_size, 0))
        batches = [embeddings.DecodedBatch([(rows, wanted, pixels.to(args.device))
                                            for rows, wanted, pixels in first.groups])]
        forward_floor(batches, backbones, args.batch_size * 2, args.batch_size)

        phases, scores, timeline = {}, {}, LoopTimeline()

        def cold(cache):
            with timeline:
                scores["cold"] = run(cache)
        for name, function in [
                ("decode floor", lambda: decode_floor(folder, images, backbones, needs, args.batch_size, workers)),
                ("forward floor", lambda: forward_floor(batches, backbones, len(images), args.batch_size)),
                ("harness cold", lambda: cold(EmbeddingCache(tmp / "cache.sqlite"))),
                ("harness warm", lambda: scores.setdefault("warm", run(EmbeddingCache(tmp / "cache.sqlite"))))]:
            if name == "harness warm":
                calls = vlm_forwards(metrics)
            with Utilisation(args.device) as busy:
                phases[name] = (timed(synchronised(function)), busy)
        warm_vlm_calls = len(calls)
        same = scores["cold"].per_image["value"].equals(scores["warm"].per_image["value"])
        if args.profile:
            profiled(lambda: run(EmbeddingCache(tmp / "profiled.sqlite")), args.profile, on_gpu)
        # the baseline and the naive run embed only: beside a judge's cost their ratios would say nothing
        baseline_on = (not on_gpu and not args.judge) if args.baseline is None else args.baseline
        t_base = timed(synchronised(lambda: baseline(folder, images, prompts, backbones, needs, args.batch_size))) \
            if baseline_on else None
        naive_on = (not on_gpu and not args.judge) if args.naive is None else args.naive
        t_naive = timed(lambda: naive(folder, images, prompts, backbones)) if naive_on else None
        differences = device_differences(args.device, backbones, folder, images, needs)

    n = len(images)
    device = torch.cuda.get_device_name() if on_gpu else "CPU"
    print(f"{n} images of {args.size}x{args.size}, metrics {', '.join(m.info.name for m in metrics)}; backbones "
          f"{', '.join(ids)} ({'real size, random weights' if args.real_size else 'small random' if not args.backbones else args.backbones}); "
          f"device {args.device} ({device}); {embeddings.available_cores()} cores, {workers} DataLoader workers, "
          f"batch {args.batch_size}, torch threads {torch.get_num_threads()}")
    for name, (seconds, busy) in phases.items():
        print(f"{name:15s} {seconds:8.2f} s  {n / seconds:8.1f} images/s   {busy}")
    t_cold, t_warm = phases["harness cold"][0], phases["harness warm"][0]
    floor = max(phases["decode floor"][0], phases["forward floor"][0])
    if not args.judge:  # the floors hold the embeddings only
        print(f"harness / min(decode floor, forward floor), images/s: {floor / t_cold:5.2f} (target >= 0.85 on a GPU)")
    if t_base is not None:
        print(f"baseline (decode once + each backbone once, one process): {t_base:7.2f} s   harness cold / baseline "
              f"{t_cold / t_base:5.2f} (target <= 1.15)")
    vlm = f", VLM forward passes in the warm run: {warm_vlm_calls}" if args.judge else ""
    print(f"harness cold / warm (everything cached{', VLM outputs included' if args.judge else ''}): "
          f"{t_cold / t_warm:6.1f} x (target >= 20); warm values == cold: {same}{vlm}")
    if t_naive is not None:
        print(f"naive (per metric, per image): {t_naive:7.2f} s   naive / harness cold {t_naive / t_cold:5.2f} x")
    print(timeline.report(t_cold))
    print(f"inputs prepared on {args.device} against the transforms on the CPU (first 4 images):")
    print("\n".join(differences))


if __name__ == "__main__":
    main()

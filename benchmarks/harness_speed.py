"""Harness speed, as ratios measured in one run (absolute times on a shared machine mean little).

    python benchmarks/harness_speed.py [--images 240] [--size 256] [--device cpu] [--backbones FILE]

Compares, on one synthetic submission:

- baseline: decode every image once and run each needed backbone once over it, batched,
  with nothing else (the floor any harness pays);
- harness, cold: ``harness.score`` with an empty embedding cache (target: <= 1.15 x baseline);
- harness, warm: the same submission again, everything cached (target: >= 20 x faster than cold);
- naive: what the papers' reference scripts do, each metric decoding and embedding for
  itself, one image at a time.

Metrics: CLIP cosine and CLIPScore (awareness) plus a consumer of DINO 4x4-grid features
(the input of the iconicity track's visual reuse), so two backbones and three needs.
Without --backbones it builds small random open_clip and DINOv2 models (CPU-sized); with a
backbones JSON (see README, "Backbones") it times the real ones, e.g. on a GPU:

    python benchmarks/harness_speed.py --device cuda --images 2000 --size 1024 --backbones real.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import open_clip
import pandas as pd
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

from benchmark import harness
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import PromptSet
from benchmark.encoders import load_backbone
from benchmark.encoders.spec import BackboneSpec, load_registry
from benchmark.metrics import ClipCosine, ClipScore
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.submission import Manifest

GRID = Need("dinov2-base", "grid")


class GridConsumer(Metric):
    """Stands in for the iconicity track: reads DINO 4x4-grid features (mean tile-to-first-tile cosine)."""

    info = MetricInfo("grid_consumer", "grid consumer", "benchmark", "1", True, "cosine", -1, 1, "-", (GRID,))

    def per_image(self, inputs: Inputs):
        grid = inputs.features[GRID]
        return np.einsum("nkd,nd->n", grid, grid[:, 0]) / grid.shape[1], [None] * len(grid)


def small_backbones(folder: Path) -> dict[str, BackboneSpec]:
    config = {"embed_dim": 256, "vision_cfg": {"image_size": 112, "layers": 6, "width": 256, "head_width": 64,
                                                "patch_size": 16},
              "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 256, "heads": 4, "layers": 6}}
    (folder / "bench-clip.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder / "bench-clip.json")
    torch.manual_seed(0)
    save_file({k: v.contiguous() for k, v in open_clip.create_model("bench-clip").state_dict().items()},
              str(folder / "clip.safetensors"))
    dino = folder / "dino"
    Dinov2Model(Dinov2Config(hidden_size=192, num_hidden_layers=6, num_attention_heads=3, intermediate_size=768,
                             patch_size=14, image_size=56)).save_pretrained(dino)
    BitImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}).save_pretrained(dino)
    return {"clip-vit-b-32": BackboneSpec("open_clip", "bench-clip", str(folder / "clip.safetensors"),
                                          str(folder / "bench-clip.json")),
            "dinov2-base": BackboneSpec("hf_vision", str(dino))}


def make_submission(folder: Path, n_images: int, size: int, seeds: int = 4):
    rng = np.random.default_rng(0)
    rows, prompts = [], {}
    for i in range(n_images // seeds):
        prompt_id = f"p{i:04d}"
        prompts[prompt_id] = {"prompt": f"A high resolution image of dish {i} from country {i % 8}",
                              "country": f"country {i % 8}", "concept": "cuisine"}
        for seed in range(seeds):
            path = f"images/{prompt_id}/{seed}.png"
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, (size // 8, size // 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).resize((size, size), Image.BICUBIC).save(folder / path)
            rows.append({"prompt_id": prompt_id, "seed": seed, "path": path,
                         "sha256": f"{prompt_id}-{seed}-{size}"})
    manifest = Manifest.model_validate({
        "format_version": 1, "model": {"name": "bench", "id": "bench", "type": "open"},
        "dataset": {"repo": "bench/prompts", "config": "bench"}, "images_per_prompt": seeds,
        "seeds": list(range(seeds)), "license": "CC0-1.0", "contact": "bench"})
    table = pd.DataFrame.from_dict(prompts, orient="index").rename_axis("prompt_id")
    return manifest, PromptSet("bench/prompts", "bench", "test", "bench", table), pd.DataFrame(rows)


def baseline(folder: Path, images: pd.DataFrame, prompts: PromptSet, backbones, batch_size: int) -> None:
    """Decode each image once; each backbone embeds what the metrics need, batched; texts once."""
    clip, dino = backbones["clip-vit-b-32"], backbones["dinov2-base"]
    for start in range(0, len(images), batch_size):
        decoded = []
        for path in images["path"].iloc[start:start + batch_size]:
            with Image.open(folder / path) as image:
                decoded.append(image.convert("RGB"))
        clip.embed(torch.stack([clip.prepare(i, "image") for i in decoded]))
        dino.embed(torch.stack([dino.prepare(i, "grid") for i in decoded]))
    texts = sorted(set(prompts.table["prompt"]))
    for start in range(0, len(texts), batch_size):
        clip.embed_texts(texts[start:start + batch_size])


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


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=240)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader processes (0: same as baseline)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backbones", default=None, help="backbones JSON (default: small random models)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        registry = load_registry(args.backbones) if args.backbones else small_backbones(tmp)
        backbones = {b: load_backbone(b, registry, args.device) for b in ("clip-vit-b-32", "dinov2-base")}
        folder = tmp / "submission"
        manifest, prompts, images = make_submission(folder, args.images, args.size)
        metrics = [ClipCosine(), ClipScore(), GridConsumer()]
        cache = EmbeddingCache(tmp / "cache.sqlite")

        def run(with_cache):
            return harness.score(folder, manifest, prompts, images, metrics, backbones, with_cache,
                                 submission_id="bench", batch_size=args.batch_size, num_workers=args.num_workers)

        baseline(folder, images.head(args.batch_size), prompts, backbones, args.batch_size)  # warm-up
        t_base = timed(lambda: baseline(folder, images, prompts, backbones, args.batch_size))
        t_cold = timed(lambda: run(cache))
        t_warm = timed(lambda: run(cache))
        t_naive = timed(lambda: naive(folder, images, prompts, backbones))
    print(f"{args.images} images of {args.size}x{args.size}, 3 metrics, 2 backbones, device {args.device}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"baseline (decode once + each backbone once): {t_base:7.2f} s")
    print(f"harness, cold cache:                        {t_cold:7.2f} s   ratio to baseline {t_cold / t_base:5.2f} "
          f"(target <= 1.15)")
    print(f"harness, everything cached:                 {t_warm:7.2f} s   cold / warm {t_cold / t_warm:6.1f} x "
          f"(target >= 20)")
    print(f"naive (per metric, per image):              {t_naive:7.2f} s   naive / harness cold {t_naive / t_cold:5.2f} x")


if __name__ == "__main__":
    main()

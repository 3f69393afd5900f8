"""A rescore's VLM cost: the relevance judge's outputs are cached by content (``benchmark.features.producers``),
so scoring the same images again, or with one more metric, makes no VLM call.

    python benchmarks/judge_cache.py [--images 24] [--labels Ukrainian Yoruba] [--repeats 3] [--judge PATH]

Measured in one run, on the same requests (CAIRE prompt with a ~200-word entity text, 64 px images):

- baseline: the first run, an empty cache: every (image, label) goes through the judge's forward pass;
- cached: a fresh judge and a fresh cache object over the same cache file, as a second ``culturelens score``
  or a worker's retry would open it. Ratio baseline / cached: how much a rescore saves; both runs' answers
  are checked equal.

Without ``--judge`` the model is the tiny random Qwen2.5-VL of the tests, so the forward pass is nearly free and
the ratio is the smallest it can be; a real judge (0.5 s per image-label for a 7B, ``judge_cost.py``) saves
proportionally more.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmark.cache import EmbeddingCache
from benchmark.digests import file_digest
from benchmark.features.producers import LazyImages, produce
from benchmark.judges.base import CAIRE_RUBRIC, JudgeRequest
from benchmark.judges.vlm import VLMJudge

ENTITY_TEXT = "A pysanka is a Ukrainian Easter egg, decorated with traditional folk designs in wax-resist. " * 12


def _images(folder: Path, count: int) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def _timed_produce(judge_path: str, items, images, shas, cache_file: Path) -> tuple[float, list]:
    judge = VLMJudge(judge_path, device="cpu")  # a fresh judge: nothing kept in memory from an earlier run
    start = time.perf_counter()
    answers = produce(judge, items, images, shas, EmbeddingCache(cache_file).beside("products"))
    return time.perf_counter() - start, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--labels", nargs="+", default=["Ukrainian", "Yoruba"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--judge", default=None, help="a VLM folder or Hub id (default: the tests' tiny Qwen2.5-VL)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="judge-cache-"))
    if args.judge is None:
        from culturelens.testing.tiny_qwen import save_tiny_vlm

        args.judge = str(save_tiny_vlm(work / "vlm"))
    paths = _images(work, args.images)
    shas = [file_digest(p) for p in paths]
    items = [(row, (JudgeRequest(None, label, "Pysanka", ENTITY_TEXT), CAIRE_RUBRIC))
             for row in range(len(paths)) for label in args.labels]
    images = LazyImages(lambda row: Image.open(paths[row]).convert("RGB"), len(paths))
    firsts, cached = [], []
    for trial in range(args.repeats):
        cache_file = work / f"cache-{trial}" / "cache.sqlite"
        first, expected = _timed_produce(args.judge, items, images, shas, cache_file)
        again, answers = _timed_produce(args.judge, items, images, shas, cache_file)
        assert all(np.array_equal(a, b) for a, b in zip(expected, answers)), "a cached answer differs"
        firsts.append(first)
        cached.append(again)
        print(f"run {trial + 1}: first {first:.3f} s, cached rescore {again:.4f} s, ratio {first / again:.1f}x")
    first, again = statistics.median(firsts), statistics.median(cached)
    print(f"{len(items)} image-labels, judge {args.judge}: median first {first:.3f} s "
          f"({1000 * first / len(items):.1f} ms per image-label), cached {again:.4f} s; baseline / cached "
          f"{first / again:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

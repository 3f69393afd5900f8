"""CPU generation with torch's default threads against one thread: what ``generate``'s hint on the CPU says.

    .venv/bin/python benchmarks/generate_threads.py                 # the tests' tiny Stable Diffusion, 64 px, 2 steps
    .venv/bin/python benchmarks/generate_threads.py --rounds 3 --images 24

On the CPU, torch starts one thread per core. Where other work keeps the cores busy (a shared machine), those
threads wait for each other at every operation, and a tiny pipeline's many small operations wait most. The same
pipeline object, prompts and seeds go through ``culturelens generate``'s own loop (``benchmark.generation.runner.run``)
with torch's default thread count and with one thread, in turns (``--rounds`` of each, so that both see the same
load), each into a fresh folder. It prints the 1-minute load average before and after, images/s of every run, and
one thread / default threads of the medians: the figure ``benchmark.generation.command.cpu_threads_hint`` quotes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPTS = ["A high resolution image of feijoada from Brazilian cuisine.", "A panoramic view of Hagia Sophia in Turkey.",
           "Image of a person in a kimono from Japan.", "A madhubani painting from India.",
           "An image of performance of capoeira from Brazil.", "A high resolution image of jollof rice from Nigeria."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=12, help="images per run (prompts x seeds)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each thread count, taken in turns")
    parser.add_argument("--size", type=int, default=64, help="image width and height (px)")
    parser.add_argument("--steps", type=int, default=2, help="inference steps")
    args = parser.parse_args()

    import torch

    from benchmark.generation.runner import Settings, load_pipeline, run
    from culturelens.testing.tiny_models import save_tiny_stable_diffusion

    work = Path(tempfile.mkdtemp(prefix="culturelens-generate-threads-"))
    default = torch.get_num_threads()
    settings = Settings(model=str(save_tiny_stable_diffusion(work / "tiny-sd")), revision=None, steps=args.steps,
                        guidance_scale=7.5, width=args.size, height=args.size, negative_prompt=None, dtype="float32",
                        max_sequence_length=None, batch_size=1)
    pipeline = load_pipeline(settings, device="cpu")
    seeds = list(range(-(-args.images // len(PROMPTS))))
    prompts = [(f"p{i}", text) for i, text in enumerate(PROMPTS)][:args.images]
    manifest = {"format_version": 1, "model": {"name": "tiny", "id": "tiny", "type": "open"},
                "dataset": {"repo": "culturelens/cube-1k", "config": "cube_1k", "split": "test"},
                "images_per_prompt": len(seeds), "seeds": seeds, "license": "none", "contact": "none"}
    print(f"{os.cpu_count()} cores; torch's default: {default} threads; load average {os.getloadavg()[0]:.1f}")
    rates: dict[int, list[float]] = {default: [], 1: []}
    for round_ in range(args.rounds):
        for threads in (default, 1):
            torch.set_num_threads(threads)
            out = work / f"run-{round_}-{threads}"
            started = time.perf_counter()
            outcome = run(pipeline, prompts, seeds, settings, out, manifest)
            rate = outcome.generated / (time.perf_counter() - started)
            rates[threads].append(rate)
            print(f"round {round_ + 1}, {threads} thread{'s' if threads > 1 else ''}: {outcome.generated} images, "
                  f"{rate:.2f} images/s")
            shutil.rmtree(out, ignore_errors=True)
    torch.set_num_threads(default)
    one, many = statistics.median(rates[1]), statistics.median(rates[default])
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"median images/s: {default} threads {many:.2f}, 1 thread {one:.2f}; one thread / default: {one / many:.1f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

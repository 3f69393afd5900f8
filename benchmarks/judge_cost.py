"""What the relevance judge costs per (image, label), measured on CPU with the tiny test VLM, and estimated
for a 7B judge on a GPU.

    python benchmarks/judge_cost.py [--requests 24] [--threads 1] [--judge PATH_OR_HUB_ID]

Measured in one run, on the same requests (CAIRE prompt with a ~200-word entity text, 224 px images):

- baseline: a plain forward pass of the same model over the same batches, prepared beforehand (chat prompt
  rendered, processor run, rows grouped by length as the judge groups them), i.e. the model's own cost;
- judge: ``VLMJudge.judge_batch`` end to end (prompt building, in-context tokenisation of the answers,
  processor, forward pass, constrained softmax). Ratio judge / baseline: the judge's overhead;
- VIEScore (0-10; "10]" needs a second pass) and P(Yes), per (image, prompt), for comparison.

Without ``--judge`` the model is the tiny random Qwen2.5-VL of the tests (2 layers, width 32), so the
forward pass is nearly free and the ratio shows the judge's fixed costs at their most visible. The 7B figure
is arithmetic, printed with its inputs (not run here: no GPU, no weights).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmark.judges.base import CAIRE_RUBRIC, JudgeRequest
from benchmark.judges.prompts import CAIRE_ANSWER_PREFIX, CAIRE_SYSTEM, caire_prompt
from benchmark.judges.vlm import VLMJudge

WORDS = "pysanka ukrainian easter egg decorated with wax resist batik folk designs ".split()


def requests(n: int, size: int) -> list[JudgeRequest]:
    rng = np.random.default_rng(0)
    labels = ["Japanese", "Yoruba", "Polish", "Mexican", "Ukrainian", "Brazilian"]
    return [JudgeRequest(Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)), labels[i % 6],
                         f"Entity {i}", " ".join(rng.choice(WORDS, 200))) for i in range(n)]


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def estimate_7b() -> None:
    """A documented estimate for Qwen2.5-VL-7B-Instruct (CAIRE's best judge) on one A100, not run."""
    lm_params, vision_params = 7.6e9, 0.67e9
    image_tokens = 37 * 37  # 1024 px image -> 1036 px (multiple of 28) -> 74 x 74 patches of 14 -> 2x2 merge
    patches = 74 * 74
    template_tokens = 380  # CAIRE's Fig. 9 prompt + system + chat markup, ~1,500 characters / ~4 per token
    entity_tokens = 1500  # a typical Wikipedia article body, under the judge's 2,048-token cap
    tokens = image_tokens + template_tokens + entity_tokens
    layers, width = 28, 3584
    flops = 2 * lm_params * tokens + 2 * vision_params * patches + 4 * layers * tokens ** 2 * width
    peak, utilisation = 312e12, 0.4  # A100 bf16 dense peak; prefill reaches ~40% of it in practice
    seconds = flops / (peak * utilisation)
    print("\n7B judge on one A100 (estimate, not run):")
    print(f"  tokens per prompt  = {image_tokens} image + {template_tokens} template + {entity_tokens} entity text"
          f" = {tokens}")
    print(f"  FLOPs              ~ 2 x {lm_params:.2g} x {tokens} (LM) + 2 x {vision_params:.2g} x {patches} "
          f"(vision) + 4 x {layers} x {tokens}^2 x {width} (attention) = {flops:.2e}")
    print(f"  time               ~ {flops:.2e} / ({peak / 1e12:.0f} TFLOP/s x {utilisation:.0%}) = {seconds:.2f} s "
          "per image-label (one forward pass; the output is one constrained token)")
    print(f"  10 labels x 1,000 images ~ {10_000 * seconds / 3600:.1f} GPU-hours; the LM part of the prompt up to "
          "the label is shared by an image's labels, which a prefix cache could reuse")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judge", help="a VLM folder or Hub id (default: build the tiny test model)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.judge:
        model = args.judge
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' tiny-model builder
        from tests.test_judges import save_tiny_vlm

        scratch = tempfile.TemporaryDirectory(prefix="judge-cost-")
        model = str(save_tiny_vlm(Path(scratch.name)))
    judge = VLMJudge(model, device="cpu", batch_size=args.batch_size)
    work = requests(args.requests, args.size)

    prompts = [judge.render(caire_prompt(r.label, CAIRE_RUBRIC, r.entity_name, r.entity_text), CAIRE_SYSTEM,
                            CAIRE_ANSWER_PREFIX) for r in work]
    order = sorted(range(len(work)), key=lambda i: len(prompts[i]))  # the judge's batches: by prompt length
    chunks = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    batches = [judge.processor(text=[prompts[i] for i in chunk], images=[work[i].image for i in chunk],
                               padding=True, return_tensors="pt") for chunk in chunks]

    def plain_forward():
        with torch.inference_mode():
            for inputs in batches:
                judge.model(**inputs, logits_to_keep=1)

    judge.judge_batch(work[:2])  # warm-up
    baseline = best_of(args.repeats, plain_forward)
    caire = best_of(args.repeats, lambda: judge.judge_batch(work))
    images = [r.image for r in work]
    vie = best_of(args.repeats, lambda: judge.viescore_batch(images, ["A wedding in Chile"] * len(work)))
    yes = best_of(args.repeats, lambda: judge.p_yes_batch(images, ["Is this Japanese?"] * len(work)))
    tokens = int(batches[0]["attention_mask"][0].sum())
    n = len(work)
    print(f"{judge.id}: {n} requests, batch {args.batch_size}, {args.threads} thread(s), ~{tokens} tokens per "
          f"CAIRE prompt (this tokenizer), best of {args.repeats}")
    print(f"  plain forward (baseline) {baseline / n * 1e3:8.1f} ms per image-label")
    print(f"  CAIRE judge              {caire / n * 1e3:8.1f} ms per image-label   ratio to baseline "
          f"{caire / baseline:.2f}")
    print(f"  VIEScore 0-10            {vie / n * 1e3:8.1f} ms per image-prompt  ratio {vie / baseline:.2f}")
    print(f"  P(Yes)                   {yes / n * 1e3:8.1f} ms per image-question ratio {yes / baseline:.2f}")
    estimate_7b()


if __name__ == "__main__":
    main()

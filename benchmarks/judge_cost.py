"""What the relevance judge costs per (image, label): measured on CPU with the tiny test VLM, on a GPU with a
real-size Qwen2.5-VL-7B of random weights, and estimated for a 7B judge by arithmetic.

    python benchmarks/judge_cost.py [--requests 24] [--threads 1] [--judge PATH_OR_HUB_ID]
    python benchmarks/judge_cost.py --real-size-7b --device cuda --size 1024    # on a GPU

Measured in one run, on the same requests (CAIRE prompt with a ~200-word entity text, 224 px images):

- baseline: a plain forward pass of the same model over the same batches, prepared beforehand (chat prompt
  rendered, processor run, rows grouped by length as the judge groups them), i.e. the model's own cost;
- judge: ``VLMJudge.judge_batch`` end to end (prompt building, in-context tokenisation of the answers,
  processor, forward pass, constrained softmax). Ratio judge / baseline: the judge's overhead;
- VIEScore (0-10; "10]" needs a second pass) and P(Yes), per (image, prompt), for comparison; and the
  expectations track's two ratings per image (explicit and implicit, each a VIEScore-style 0-10 distribution).

Without ``--judge`` the model is the tiny random Qwen2.5-VL of the tests (2 layers, width 32), so the
forward pass is nearly free and the ratio shows the judge's fixed costs at their most visible. The 7B figure
is arithmetic, printed with its inputs. ``--real-size-7b`` builds Qwen2.5-VL-7B-Instruct's architecture
(its published configuration) with random bf16 weights directly on the device and hands it to ``VLMJudge``
in place of loading (writing 15 GB of random weights to read them back would time the disk); the
tokenizer is the tests' byte-level one, so the entity text is cut to make a prompt about as long in tokens
as the real tokenizer's (~3,250 with a 1024 px image), and the printed token count says how long it was.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from PIL import Image

from benchmark.judges.base import CAIRE_RUBRIC, JudgeRequest
from benchmark.judges.expectations import ExpectationRequest, ExpectationsJudge
from benchmark.judges.prompts import CAIRE_ANSWER_PREFIX, CAIRE_SYSTEM, EXPECTATION_KINDS, caire_prompt
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


def save_real_size_processor(folder: Path) -> dict:
    """Qwen2.5-VL's processor with the real image settings (14 px patches, 2x2 merge, up to 12.8 Mpx) and the
    tests' byte-level tokenizer; returns the 7B configuration's arguments, with this tokenizer's ids."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from culturelens.testing.tiny_qwen import CHAT_TEMPLATE, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2,
                                                              min_pixels=56 * 56, max_pixels=14 * 14 * 4 * 16384),
                        tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(),
                        chat_template=CHAT_TEMPLATE).save_pretrained(folder)
    token = tokenizer.convert_tokens_to_ids
    special = {"bos_token_id": token("<|endoftext|>"), "eos_token_id": token("<|im_end|>"),
               "pad_token_id": token("<|endoftext|>")}
    # Qwen/Qwen2.5-VL-7B-Instruct's config.json
    return dict(
        text_config={"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                     "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 128000,
                     "rms_norm_eps": 1e-6, "tie_word_embeddings": False, **special,
                     "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24],
                                         "rope_theta": 1000000.0}},
        vision_config={"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                       "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "hidden_act": "silu"},
        image_token_id=token("<|image_pad|>"), video_token_id=token("<|video_pad|>"),
        vision_start_token_id=token("<|vision_start|>"), vision_end_token_id=token("<|vision_end|>"), **special)


@contextmanager
def random_7b_loaded(device: str, config_arguments: dict):
    """While open, loading any VLM gives Qwen2.5-VL-7B's architecture with random bf16 weights on ``device``."""
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    torch.manual_seed(0)
    try:
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(**config_arguments)).eval()
    finally:
        torch.set_default_dtype(default)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"random Qwen2.5-VL-7B architecture: {parameters / 1e9:.2f} B parameters, bf16, on {device}")
    with mock.patch.object(AutoModelForImageTextToText, "from_pretrained", return_value=model):
        yield


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
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--real-size-7b", action="store_true",
                        help="Qwen2.5-VL-7B's architecture with random weights (on a GPU)")
    parser.add_argument("--max-entity-tokens", type=int, default=None,
                        help="cut of the entity text (default: the judge's 2,048; 180 with --real-size-7b, see above)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scratch = tempfile.TemporaryDirectory(prefix="judge-cost-")
    loading = None
    if args.judge:
        model = args.judge
    elif args.real_size_7b:
        model = scratch.name
        loading = random_7b_loaded(args.device, save_real_size_processor(Path(model)))
    else:
        from culturelens.testing.tiny_qwen import save_tiny_vlm

        model = str(save_tiny_vlm(Path(scratch.name)))
    cut = args.max_entity_tokens or (180 if args.real_size_7b else 2048)
    if loading is not None:
        with loading:
            judge = VLMJudge(model, device=args.device, batch_size=args.batch_size, max_entity_tokens=cut)
    else:
        judge = VLMJudge(model, device=args.device, batch_size=args.batch_size, max_entity_tokens=cut)
    work = requests(args.requests, args.size)
    on_gpu = args.device.startswith("cuda")

    prompts = [judge.render(caire_prompt(r.label, CAIRE_RUBRIC, r.entity_name, judge.cut(r.entity_text)[0]),
                            CAIRE_SYSTEM, CAIRE_ANSWER_PREFIX) for r in work]
    order = sorted(range(len(work)), key=lambda i: len(prompts[i]))  # the judge's batches: by prompt length
    chunks = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    batches = [judge.processor(text=[prompts[i] for i in chunk], images=[work[i].image for i in chunk],
                               padding=True, return_tensors="pt").to(args.device, dtype=judge.model.dtype)
               for chunk in chunks]

    def plain_forward():
        with torch.inference_mode():
            for inputs in batches:
                judge.model(**inputs, logits_to_keep=1)
        if on_gpu:
            torch.cuda.synchronize()

    judge.judge_batch(work[:2])  # warm-up
    plain_forward()
    baseline = best_of(args.repeats, plain_forward)
    caire = best_of(args.repeats, lambda: judge.judge_batch(work))
    tokens = int(batches[0]["attention_mask"][0].sum())
    n = len(work)
    where = torch.cuda.get_device_name() if on_gpu else f"CPU, {args.threads} thread(s)"
    print(f"{judge.id}: {n} requests, {args.size} px images, batch {args.batch_size}, {where}, ~{tokens} tokens per "
          f"CAIRE prompt (this tokenizer), best of {args.repeats}")
    print(f"  plain forward (baseline) {baseline / n * 1e3:8.1f} ms per image-label")
    print(f"  CAIRE judge              {caire / n * 1e3:8.1f} ms per image-label   ratio to baseline "
          f"{caire / baseline:.2f}")
    if not args.real_size_7b:
        images = [r.image for r in work]
        vie = best_of(args.repeats, lambda: judge.viescore_batch(images, ["A wedding in Chile"] * len(work)))
        yes = best_of(args.repeats, lambda: judge.p_yes_batch(images, ["Is this Japanese?"] * len(work)))
        print(f"  VIEScore 0-10            {vie / n * 1e3:8.1f} ms per image-prompt  ratio {vie / baseline:.2f}")
        print(f"  P(Yes)                   {yes / n * 1e3:8.1f} ms per image-question ratio {yes / baseline:.2f}")
        kinds = [ExpectationRequest("A wedding in Chile", kind) for kind in EXPECTATION_KINDS]
        expectations = ExpectationsJudge(judge)
        both = best_of(args.repeats, lambda: expectations.produce_batch([i for i in images for _ in kinds],
                                                                        kinds * len(images)))
        print(f"  expectations, 2 kinds    {both / n * 1e3:8.1f} ms per image         ratio {both / baseline:.2f}")
    estimate_7b()


if __name__ == "__main__":
    main()

"""What the VLM judges cost: prompt tokens per image-label (machine-independent), then time per image-label.

    python benchmarks/judge_cost.py                       # token counts + the tiny judge's times, CPU
    python benchmarks/judge_cost.py --tokens-only --qwen-vocab dashscope-2.0.2-py3-none-any.whl   # Qwen's tokens
    python benchmarks/judge_cost.py --judge PATH_OR_HUB_ID
    python benchmarks/judge_cost.py --real-size-7b --device cuda --size 1024    # on a GPU

**Tokens.** The judge reads, for each image, one prompt per culture label (CAIRE, CUBE's 8 countries) or per kind
of expectation (CulturalFrames: explicit and implicit). Before, every prompt ran whole through the model, once per
branching node of the answers (CAIRE's digits: one pass; "0]".."10]": two, the second after "1"). Now an image's
prompts share one run of their common tokens (system text, image, entity text) and each runs only its own tail
(``benchmark.judges.vlm.SharedPrefix``). The script counts both for 1,024 px images: today's from each whole
prompt's length as the processor makes it, the new path's from what the judge actually runs (``tokens_fed``,
padding included). The image tokens follow Qwen2.5-VL-7B's processor (14 px patches, 2x2 merge, up to 12.8 Mpx:
1,369 tokens for 1,024 px). The text tokens are Qwen's own with ``--qwen-vocab FILE``: Qwen's 151,643 byte-level BPE
ranks (``qwen.tiktoken``, the vocabulary of Qwen2.5-VL's tokenizer, shipped on PyPI inside the ``dashscope`` wheel;
the file or the wheel itself), split as Qwen2's tokenizer splits text, with Qwen2.5-VL's special tokens. Without
it, the tiny judge's byte-level tokenizer stands in: one token per byte, about four times as many as Qwen's makes of
English, so the text (the tails above all) weighs more than in the real judge. The model that runs is the tiny
one, on the CPU, with Qwen2.5-VL's processor: the counts are the processor's and the judge's, not arithmetic.

**Time.** On the same requests (``--images`` images x the labels): the judge end to end (prompt building,
processor, the shared prefix, the tails, constrained softmax) against a plain forward pass over each whole prompt,
prepared beforehand (today's model cost), and the largest difference between the two's probabilities. Without
``--judge`` the model is the tiny random Qwen2.5-VL of the tests. ``--real-size-7b`` builds Qwen2.5-VL-7B-Instruct's
architecture (its published configuration) with random bf16 weights directly on the device and hands it to
``VLMJudge`` in place of loading (writing 15 GB of random weights to read them back would time the disk). With
``--qwen-vocab`` its prompts are as long as the real judge's; with the byte-level stand-in the entity text is cut
(``--max-entity-tokens``, 180 by default there) to make a whole prompt about as long in tokens (~3,250 with a
1024 px image).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from PIL import Image

from benchmark.judges.base import CAIRE_RUBRIC, JudgeRequest
from benchmark.judges.constrained import branching_nodes, restricted_softmax
from benchmark.judges.expectations import ExpectationRequest, ExpectationsJudge
from benchmark.judges.prompts import EXPECTATION_KINDS, VIESCORE_ANSWERS
from benchmark.judges.vlm import VLMJudge

WORDS = ("feijoada is a stew of black beans with beef and pork a typical dish of brazilian cuisine served with rice "
         "farofa collard greens and orange slices").split()
CUBE_COUNTRIES = ("Brazil", "France", "India", "Italy", "Japan", "Nigeria", "Turkey", "United States")
CF_PROMPT = "Grandchildren touching their grandfather's feet at a temple in India during Diwali"


def entity_text(chars: int, seed: int = 0) -> str:
    """Wikipedia-like filler text of about ``chars`` characters."""
    rng = np.random.default_rng(seed)
    words = rng.choice(WORDS, chars // 5 + 1)
    return " ".join(words)[:chars]


def test_image(seed: int, size: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))


def caire_requests(images: int, size: int, labels, chars: int) -> list[JudgeRequest]:
    """Each image (one PIL object, as the products pass it) x every label, one linked entity per image."""
    out = []
    for n in range(images):
        image = test_image(n, size)
        out += [JudgeRequest(image, label, f"Entity {n}", entity_text(chars, n)) for label in labels]
    return out


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


# Qwen2's pre-tokenizer split (its tokenizer.json; the dashscope wheel's PAT_STR) and Qwen2.5-VL's added tokens in
# id order from 151,643, after the 151,643 BPE tokens.
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN_ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
              "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
              "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
QWEN_RANKS_IN_WHEEL = "dashscope/resources/qwen.tiktoken"


def qwen_ranks_file(path: Path) -> bytes:
    """The bytes of a ``qwen.tiktoken`` file (a base64 token and its rank per line), or of the one in the dashscope
    wheel at ``path``; SystemExit naming what to pass where it is neither."""
    if not path.is_file():
        raise SystemExit(f"--qwen-vocab {path}: no such file; pass qwen.tiktoken or the dashscope wheel "
                         "(benchmarks/README.md, judge_cost.py, says how to download it)")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            if QWEN_RANKS_IN_WHEEL not in wheel.namelist():
                raise SystemExit(f"--qwen-vocab {path}: a zip without {QWEN_RANKS_IN_WHEEL}; pass the dashscope wheel")
            return wheel.read(QWEN_RANKS_IN_WHEEL)
    return path.read_bytes()


def qwen_ranks(path: Path) -> dict[bytes, int]:
    """Qwen's BPE ranks, token bytes -> rank, from ``qwen_ranks_file(path)``."""
    lines = qwen_ranks_file(path).splitlines()
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in lines if line)}


def qwen_tokenizer(path: Path):
    """Qwen2.5-VL's text tokenizer rebuilt from Qwen's ranks: the same BPE, split and added tokens as its
    tokenizer.json. Checked against an encoding Qwen2's tokenizer is known to give; SystemExit where it differs."""
    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class QwenRanks(TikTokenConverter):
        load_tiktoken_bpe = staticmethod(lambda _: qwen_ranks(path))

    backend = QwenRanks(vocab_file=str(path), pattern=QWEN_SPLIT, extra_special_tokens=QWEN_ADDED).converted()
    backend.normalizer = normalizers.NFC()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=list(QWEN_ADDED[1:]))
    known = tokenizer.encode("<|im_start|>hello<|im_end|>")  # Qwen2Tokenizer's: [151644, 14990, 151645]
    if known != [151644, 14990, 151645] or tokenizer.convert_tokens_to_ids("<|image_pad|>") != 151655:
        raise SystemExit(f"{path} does not give Qwen2's token ids (got {known}): pass Qwen's qwen.tiktoken")
    return tokenizer


def text_tokenizer(qwen_vocab: Path | None):
    """(tokenizer, what it is): Qwen's own from ``qwen_vocab``, else the tiny judge's byte-level stand-in."""
    from culturelens.testing.tiny_qwen import tiny_tokenizer

    if qwen_vocab is None:
        return tiny_tokenizer(), "the tiny judge's byte-level tokenizer (a stand-in: --qwen-vocab FILE for Qwen's)"
    digest = hashlib.sha256(qwen_ranks_file(qwen_vocab)).hexdigest()
    return qwen_tokenizer(qwen_vocab), f"Qwen's own BPE (qwen.tiktoken sha256 {digest[:16]})"


def save_real_size_processor(folder: Path, tokenizer) -> dict:
    """Qwen2.5-VL's processor with the real image settings (14 px patches, 2x2 merge, up to 12.8 Mpx) and
    ``tokenizer``; returns the 7B configuration's arguments, with this tokenizer's ids."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from culturelens.testing.tiny_qwen import CHAT_TEMPLATE

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


def whole_prompt_tokens(judge: VLMJudge, image: Image.Image, prompt: str, answers) -> tuple[int, int]:
    """(tokens, passes) today's path ran for one (image, prompt): the whole prompt once per branching node of the
    answers, each pass as long as the prompt plus the node's tokens."""
    length = len(judge.processor(text=[prompt], images=[image], return_tensors="pt")["input_ids"][0])
    nodes = branching_nodes(judge.answer_tokens(prompt, answers))
    return sum(length + len(node) for node in nodes), len(nodes)


def tiny_model(config_arguments: dict):
    """A randomly initialised Qwen2.5-VL of the tiny judge's sizes (``TINY_TEXT``, ``TINY_VISION``), with the
    vocabulary and token ids of ``config_arguments`` (``save_real_size_processor``'s): what runs while tokens are
    counted."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from culturelens.testing.tiny_qwen import TINY_TEXT, TINY_VISION

    text = {**config_arguments["text_config"], **TINY_TEXT}
    vision = {**config_arguments["vision_config"], **TINY_VISION}
    torch.manual_seed(0)
    config = Qwen2_5_VLConfig(**{**config_arguments, "text_config": text, "vision_config": vision})
    return Qwen2_5_VLForConditionalGeneration(config).eval()


def count_tokens(args) -> None:
    """Prompt tokens per image-label, today's and the shared prefix's, with the real image-token arithmetic."""
    tokenizer, what = text_tokenizer(args.qwen_vocab)
    with tempfile.TemporaryDirectory(prefix="judge-tokens-") as folder:
        model = tiny_model(save_real_size_processor(Path(folder), tokenizer))
        with mock.patch("transformers.AutoModelForImageTextToText.from_pretrained", return_value=model):
            judge = VLMJudge(folder, device="cpu", batch_size=len(CUBE_COUNTRIES), max_entity_tokens=None)
    size, images = args.token_size, args.token_images
    grid = judge.processor.image_processor(images=[test_image(0, size)], return_tensors="pt")["image_grid_thw"][0]
    patches = int(grid.prod())
    image_tokens = patches // judge.processor.image_processor.merge_size ** 2
    print(f"Prompt tokens per image-label, {size} px images ({image_tokens} image tokens and {patches} vision "
          f"patches each, Qwen2.5-VL-7B's processor), {images} images; text by {what}:")

    work = caire_requests(images, size, CUBE_COUNTRIES, args.entity_chars)
    today = sum(whole_prompt_tokens(judge, r.image, judge.prompt((r, CAIRE_RUBRIC)), ["1", "2", "3", "4", "5"])[0]
                for r in work)
    judge.tokens_fed = 0
    judge.judge_batch(work)
    _report("relevance (CAIRE), 8 labels", today, judge.tokens_fed, len(work), images, patches,
            f"entity text {args.entity_chars:,} characters")

    expectations = ExpectationsJudge(judge)
    pictures = [test_image(100 + n, size) for n in range(images)]
    paired = [image for image in pictures for _ in EXPECTATION_KINDS]
    requests = [ExpectationRequest(CF_PROMPT, kind) for _ in pictures for kind in EXPECTATION_KINDS]
    today = sum(whole_prompt_tokens(judge, image, expectations.prompt(r), VIESCORE_ANSWERS)[0]
                for image, r in zip(paired, requests))
    judge.tokens_fed = 0
    expectations.produce_batch(paired, requests)
    _report("expectations (CulturalFrames), 2 kinds", today, judge.tokens_fed, len(requests), images, patches,
            "answers 0..10: two branching nodes")


def _report(what: str, today: int, new: int, pairs: int, images: int, patches: int, note: str) -> None:
    print(f"  {what} ({note}):")
    print(f"    language-model tokens  today {today / pairs:8,.0f}   shared prefix {new / pairs:8,.0f}   "
          f"new / today {new / today:.3f}   (target <= 0.25)")
    print(f"    vision patches         today {patches:8,}   shared prefix {patches * images / pairs:8,.0f}   "
          f"new / today {images / pairs:.3f}")


def time_judge(args) -> None:
    scratch = tempfile.TemporaryDirectory(prefix="judge-cost-")
    loading = None
    if args.judge:
        model = args.judge
    elif args.real_size_7b:
        model = scratch.name
        tokenizer = text_tokenizer(args.qwen_vocab)[0]
        loading = random_7b_loaded(args.device, save_real_size_processor(Path(model), tokenizer))
    else:
        from culturelens.testing.tiny_qwen import save_tiny_vlm

        model = str(save_tiny_vlm(Path(scratch.name)))
    cut = args.max_entity_tokens or (180 if args.real_size_7b and args.qwen_vocab is None else 2048)
    if loading is not None:
        with loading:
            judge = VLMJudge(model, device=args.device, batch_size=args.batch_size, max_entity_tokens=cut)
    else:
        judge = VLMJudge(model, device=args.device, batch_size=args.batch_size, max_entity_tokens=cut)
    work = caire_requests(args.images, args.size, CUBE_COUNTRIES, args.entity_chars)
    on_gpu = args.device.startswith("cuda")

    prompts = [judge.prompt((r, CAIRE_RUBRIC)) for r in work]
    order = sorted(range(len(work)), key=lambda i: len(prompts[i]))  # today's batches: by prompt length
    chunks = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    batches = [judge.processor(text=[prompts[i] for i in chunk], images=[work[i].image for i in chunk],
                               padding=True, return_tensors="pt").to(args.device, dtype=judge.model.dtype)
               for chunk in chunks]
    digits = [judge.answer_tokens(prompts[0], [str(k)])[0][0] for k in range(1, 6)]

    def plain_forward() -> np.ndarray:
        out = np.zeros((len(work), 5))
        with torch.inference_mode():
            for chunk, inputs in zip(chunks, batches):
                logits = judge.model(**inputs, logits_to_keep=1).logits[:, -1].float().cpu().numpy()
                out[chunk] = restricted_softmax(logits, digits)
        if on_gpu:
            torch.cuda.synchronize()
        return out

    judge.judge_batch(work[:2])  # warm-up
    whole_probabilities = plain_forward()
    baseline = best_of(args.repeats, plain_forward)
    caire = best_of(args.repeats, lambda: judge.judge_batch(work))
    judge.tokens_fed = 0
    shared = np.array([j.probabilities for j in judge.judge_batch(work)])
    fed = judge.tokens_fed / len(work)
    tokens = int(batches[0]["attention_mask"][0].sum())
    whole = sum(int(b["attention_mask"].sum()) for b in batches) / len(work)
    n = len(work)
    where = torch.cuda.get_device_name() if on_gpu else f"CPU, {args.threads} thread(s)"
    print(f"\n{judge.id}: {args.images} images x {len(CUBE_COUNTRIES)} labels, {args.size} px, batch "
          f"{args.batch_size}, {where}, ~{tokens} tokens per whole CAIRE prompt (this tokenizer), best of "
          f"{args.repeats}")
    print(f"  plain forward of each whole prompt (today's cost)  {baseline / n * 1e3:8.1f} ms per image-label, "
          f"{whole:,.0f} tokens")
    print(f"  CAIRE judge, shared prefix                          {caire / n * 1e3:8.1f} ms per image-label, "
          f"{fed:,.0f} tokens (padding included)   judge / plain forward {caire / baseline:.2f}")
    print(f"  largest |P(k) shared prefix - P(k) whole prompt|    {np.abs(shared - whole_probabilities).max():.2e} "
          f"({judge.model.dtype})")
    if not args.real_size_7b:
        images = [r.image for r in work]
        kinds = [ExpectationRequest(CF_PROMPT, kind) for kind in EXPECTATION_KINDS]
        expectations = ExpectationsJudge(judge)
        pictures = list({id(i): i for i in images}.values())
        both = best_of(args.repeats, lambda: expectations.produce_batch([i for i in pictures for _ in kinds],
                                                                        kinds * len(pictures)))
        print(f"  expectations, 2 kinds                               {both / len(pictures) * 1e3:8.1f} ms per image")


def estimate_7b() -> None:
    """A documented estimate for Qwen2.5-VL-7B-Instruct (CAIRE's best judge) on one A100, not run."""
    lm_params, vision_params = 7.6e9, 0.67e9
    image_tokens = 37 * 37  # 1024 px image -> 1036 px (multiple of 28) -> 74 x 74 patches of 14 -> 2x2 merge
    patches = 74 * 74
    template_tokens = 380  # CAIRE's Fig. 9 prompt + system + chat markup, ~1,500 characters / ~4 per token
    tail_tokens = 300  # of which the part from the label on (rubric and answer prefix): ~1,250 characters
    entity_tokens = 1500  # a typical Wikipedia article body, under the judge's 2,048-token cap
    labels = len(CUBE_COUNTRIES)
    tokens = image_tokens + template_tokens + entity_tokens
    layers, width = 28, 3584
    flops = 2 * lm_params * tokens + 2 * vision_params * patches + 4 * layers * tokens ** 2 * width
    shared = tokens - tail_tokens
    flops_new = (2 * lm_params * (shared / labels + tail_tokens) + 2 * vision_params * patches / labels
                 + 4 * layers * width * (shared ** 2 / labels + tail_tokens * tokens))
    peak, utilisation = 312e12, 0.4  # A100 bf16 dense peak; prefill reaches ~40% of it in practice
    print("\n7B judge on one A100 (estimate, not run):")
    print(f"  tokens per prompt  = {image_tokens} image + {template_tokens} template + {entity_tokens} entity text"
          f" = {tokens}; the last ~{tail_tokens} (from the label on) differ between labels")
    print(f"  FLOPs, whole prompt ~ 2 x {lm_params:.2g} x {tokens} (LM) + 2 x {vision_params:.2g} x {patches} "
          f"(vision) + 4 x {layers} x {tokens}^2 x {width} (attention) = {flops:.2e} per image-label")
    print(f"  FLOPs, shared prefix over {labels} labels ~ {flops_new:.2e} per image-label "
          f"({flops_new / flops:.2f} of the whole prompt's)")
    for what, f in (("whole prompt", flops), ("shared prefix", flops_new)):
        seconds = f / (peak * utilisation)
        print(f"  {what:14s} ~ {seconds:.3f} s per image-label at {utilisation:.0%} of {peak / 1e12:.0f} TFLOP/s; "
              f"8 labels x 9,920 images ~ {79_360 * seconds / 3600:.1f} GPU-hours")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=3, help="images timed, each judged for the 8 labels")
    parser.add_argument("--size", type=int, default=224, help="pixels of the timed images")
    parser.add_argument("--token-images", type=int, default=2, help="images counted, each for every label")
    parser.add_argument("--token-size", type=int, default=1024, help="pixels of the counted images")
    parser.add_argument("--entity-chars", type=int, default=6000,
                        help="characters of entity text (6,000: ~1,500 tokens of Qwen's, the README's estimate)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judge", help="a VLM folder or Hub id (default: build the tiny test model)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--real-size-7b", action="store_true",
                        help="Qwen2.5-VL-7B's architecture with random weights (on a GPU)")
    parser.add_argument("--max-entity-tokens", type=int, default=None,
                        help="cut of the entity text (default: the judge's 2,048; 180 with --real-size-7b and the "
                             "byte-level stand-in, see above)")
    parser.add_argument("--qwen-vocab", type=Path,
                        help="Qwen's BPE ranks: a qwen.tiktoken file or the dashscope wheel holding one (see above)")
    parser.add_argument("--tokens-only", action="store_true", help="count tokens, time nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    count_tokens(args)
    if not args.tokens_only:
        time_judge(args)
    estimate_7b()


if __name__ == "__main__":
    main()

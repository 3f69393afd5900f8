"""Generation speed: ``culturelens generate`` against a plain diffusers loop and the GPU-only floor, on one pipeline.

    python benchmarks/generate_speed.py                                  # a tiny SDXL on the CPU (smoke)
    python benchmarks/generate_speed.py --device cuda --real-size        # SDXL's architecture, random fp16 weights

The same pipeline object, prompts and seeds go three ways, at each batch size (``--batch-sizes``, default 1 and 4,
the fastest that fitted an H100 in the last measurement):

- floor: the pipeline alone, ``output_type="pt"``, nothing converted or saved: what the device can do;
- plain loop: ``output_type="pil"``, then each image saved as PNG in line, as a diffusers user writes it;
- ``culturelens generate``: ``benchmark.generation.runner.run`` (the command's own loop: one CPU generator per
  image, refusals recorded, atomic files, PIL conversion and PNG encoding on other threads while the next batch
  runs, ``benchmark.generation.writer``).

It prints images/s of each, generate / plain and generate / floor (target >= 0.97 of the floor at equal batch),
the mean PNG size (random weights can make flat images that compress to little, which would hide the encoding's
cost: a real 1,024 px image is ~1.5-3 MB), and the GPU-hours of a whole suite (19,773 images) at each rate.
``--real-size`` builds Stable Diffusion XL's published architecture (UNet 2.57 B parameters, both CLIP text
encoders, the VAE) with random weights, in fp16 on the device: timing needs no trained weights. The tokenizers are
the tests' byte-level CLIP tokenizer (prompts cut at 77 tokens, like the real ones).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from benchmark.generation.runner import Settings, generation_record, run
from benchmark.suite import SUITE_V1
from culturelens.testing.tiny_models import byte_level_clip_tokenizer

PROMPTS = ["A high resolution image of feijoada from Brazilian cuisine.", "A panoramic view of Hagia Sophia in Turkey.",
           "Image of a person in a kimono from Japan.", "A madhubani painting from India.",
           "An image of performance of capoeira from Brazil.", "A high resolution image of jollof rice from Nigeria.",
           "A panoramic view of the Colosseum in Italy.", "A watercolour painting from France."]


def sdxl_pipeline(real_size: bool, device: str, dtype: torch.dtype):
    """StableDiffusionXLPipeline with random weights: SDXL base 1.0's published configuration, or a tiny one of
    the same classes."""
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    tokenizer = byte_level_clip_tokenizer()
    if real_size:  # stabilityai/stable-diffusion-xl-base-1.0: unet, vae, text_encoder, text_encoder_2 configs
        unet = {"block_out_channels": (320, 640, 1280), "transformer_layers_per_block": (1, 2, 10),
                "attention_head_dim": (5, 10, 20), "cross_attention_dim": 2048, "layers_per_block": 2,
                "sample_size": 128}
        vae = {"block_out_channels": (128, 256, 512, 512), "layers_per_block": 2, "sample_size": 1024}
        texts = [{"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12, "num_hidden_layers": 12,
                  "projection_dim": 768, "hidden_act": "quick_gelu"},
                 {"hidden_size": 1280, "intermediate_size": 5120, "num_attention_heads": 20, "num_hidden_layers": 32,
                  "projection_dim": 1280, "hidden_act": "gelu"}]
    else:
        unet = {"block_out_channels": (32, 64, 64), "transformer_layers_per_block": (1, 1, 1),
                "attention_head_dim": (2, 4, 4), "cross_attention_dim": 64, "layers_per_block": 1, "sample_size": 32}
        vae = {"block_out_channels": (32, 32, 64, 64), "layers_per_block": 1, "sample_size": 256}
        texts = [{"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4, "num_hidden_layers": 2,
                  "projection_dim": 32, "hidden_act": act} for act in ("quick_gelu", "gelu")]
    time_ids = unet["cross_attention_dim"] - texts[0]["hidden_size"]  # the pooled text embedding's width
    default = torch.get_default_dtype()
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            unet_model = UNet2DConditionModel(
                in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D",
                                                                 "CrossAttnDownBlock2D"),
                up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), use_linear_projection=True,
                addition_embed_type="text_time", addition_time_embed_dim=256,
                projection_class_embeddings_input_dim=time_ids + 6 * 256, **unet)
            vae_model = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4,
                                      down_block_types=("DownEncoderBlock2D",) * 4,
                                      up_block_types=("UpDecoderBlock2D",) * 4, scaling_factor=0.13025,
                                      force_upcast=True, **vae)
            ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                   "pad_token_id": tokenizer.eos_token_id}
            encoders = [cls(CLIPTextConfig(vocab_size=49408, max_position_embeddings=77, **ids, **config))
                        for cls, config in zip((CLIPTextModel, CLIPTextModelWithProjection), texts)]
    finally:
        torch.set_default_dtype(default)
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, timestep_spacing="leading")
    pipeline = StableDiffusionXLPipeline(vae=vae_model, text_encoder=encoders[0], text_encoder_2=encoders[1],
                                         tokenizer=tokenizer, tokenizer_2=tokenizer, unet=unet_model,
                                         scheduler=scheduler)
    pipeline.set_progress_bar_config(disable=True)
    parameters = sum(p.numel() for p in unet_model.parameters())
    print(f"SDXL architecture ({'real size' if real_size else 'tiny'}), random weights, {dtype}, on {device}: "
          f"UNet {parameters / 1e9:.3f} B parameters")
    return pipeline


def work(count: int, seeds_from: int = 0) -> list[tuple[str, str, int]]:
    """``count`` (prompt id, prompt, seed) items: every prompt of the first ``p`` with every one of ``count / p``
    seeds, ``p`` the largest divisor of ``count`` up to ``len(PROMPTS)`` (a whole grid, as ``generate`` makes
    each prompt once with its seeds)."""
    prompts = max(p for p in range(1, len(PROMPTS) + 1) if count % p == 0)
    return [(f"p{i % prompts:02d}", PROMPTS[i % prompts], seeds_from + i // prompts) for i in range(count)]


def call(pipeline, batch, options: dict, output: str):
    return pipeline(prompt=[text for _, text, _ in batch],
                    generator=[torch.Generator("cpu").manual_seed(seed) for *_, seed in batch],
                    output_type=output, **options)


def synchronised(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def floor(pipeline, items, batch_size: int, options: dict, device: str, _out: Path) -> int:
    for start in range(0, len(items), batch_size):
        call(pipeline, items[start:start + batch_size], options, "pt")
    synchronised(device)
    return 0


def plain_loop(pipeline, items, batch_size: int, options: dict, device: str, out: Path) -> int:
    written = 0
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        for (prompt_id, _, seed), image in zip(batch, call(pipeline, batch, options, "pil").images):
            path = out / f"{prompt_id}-{seed}.png"
            image.save(path, format="PNG")
            written += path.stat().st_size
    return written


def culturelens_generate(pipeline, items, batch_size: int, options: dict, device: str, out: Path) -> int:
    """``runner.run``, the command's loop, over the same items (each prompt once with its seeds)."""
    settings = Settings("bench/random-sdxl", None, options["num_inference_steps"], options["guidance_scale"],
                        options["width"], options["height"], None, "float16" if device.startswith("cuda")
                        else "float32", batch_size=batch_size)
    prompts = list(dict.fromkeys((prompt_id, text) for prompt_id, text, _ in items))
    seeds = sorted({seed for *_, seed in items})
    manifest = {"format_version": 1, "model": {"name": "random SDXL", "id": "bench/random-sdxl", "type": "open"},
                "dataset": {"repo": "bench/prompts", "config": "bench"}, "images_per_prompt": len(seeds),
                "seeds": seeds, "license": "CC0-1.0", "contact": "bench",
                "generation": generation_record(pipeline, settings, None)}
    outcome = run(pipeline, prompts, seeds, settings, out, manifest, tmp_dir=out.parent / f".{out.name}.tmp")
    synchronised(device)
    if outcome.generated != len(items):
        raise RuntimeError(f"culturelens generate made {outcome.generated} of {len(items)} images: {outcome}")
    return sum(p.stat().st_size for p in (out / "images").rglob("*.png"))


WAYS = {"floor (output_type=pt)": floor, "plain loop + PNG": plain_loop, "culturelens generate": culturelens_generate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--real-size", action="store_true", help="SDXL's real architecture (on a GPU)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--images", type=int, default=8, help="images per way and batch size")
    parser.add_argument("--steps", type=int, default=None, help="default: 30 (SDXL's preset) real size, 2 tiny")
    parser.add_argument("--size", type=int, default=None, help="pixels; default: 1024 real size, 128 tiny")
    args = parser.parse_args()
    steps = args.steps or (30 if args.real_size else 2)
    size = args.size or (1024 if args.real_size else 128)
    on_gpu = args.device.startswith("cuda")
    dtype = torch.float16 if on_gpu else torch.float32
    pipeline = sdxl_pipeline(args.real_size, args.device, dtype)
    options = {"num_inference_steps": steps, "guidance_scale": 7.5, "width": size, "height": size}
    where = torch.cuda.get_device_name() if on_gpu else f"CPU, {torch.get_num_threads()} threads"
    total = SUITE_V1.images
    print(f"{where}; {size} px, {steps} steps, guidance 7.5; {args.images} images per way and batch size")
    call(pipeline, work(1), options, "pt")  # warm-up: kernels, allocator
    synchronised(args.device)
    with tempfile.TemporaryDirectory(prefix="generate-speed-") as scratch:
        for batch_size in args.batch_sizes:
            rates = {}
            for n, (name, way) in enumerate(WAYS.items()):
                out = Path(scratch) / f"b{batch_size}-{n}"
                out.mkdir()
                items = work(args.images, seeds_from=1000 * n)  # fresh seeds: no way reads another's files
                start = time.perf_counter()
                written = way(pipeline, items, batch_size, options, args.device, out)
                seconds = time.perf_counter() - start
                rates[name] = len(items) / seconds
                png = f"; PNGs {written / len(items) / 1e6:.2f} MB each" if written else ""
                print(f"  batch {batch_size}  {name:24s} {rates[name]:7.3f} images/s   suite "
                      f"{total / rates[name] / 3600:7.1f} GPU-hours{png}")
                shutil.rmtree(out, ignore_errors=True)
            ours, plain, gpu = rates["culturelens generate"], rates["plain loop + PNG"], rates["floor (output_type=pt)"]
            print(f"  batch {batch_size}  generate / plain loop {ours / plain:.2f}   generate / floor {ours / gpu:.2f} "
                  "(target >= 0.97)")


if __name__ == "__main__":
    main()

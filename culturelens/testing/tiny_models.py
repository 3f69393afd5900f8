"""Tiny (and CPU-sized) randomly initialised models of the classes production loads, saved as a user saves real
weights, so that the same loading code runs: open_clip CLIP (``save_tiny_clip``: the tests' ``tiny_clip`` fixture,
and ``benchmarks/tiny_backbone.py``'s offline demo model), CLIP and DINOv2 at a size for speed measurements on a CPU
(``small_backbones``), and a Stable Diffusion pipeline (``save_tiny_stable_diffusion``) with the byte-level CLIP
tokenizer it needs offline. Their outputs are noise: for seeing the pipeline run, never for comparing models."""

from __future__ import annotations

import json
from pathlib import Path

NAME = "culturelens-tiny-clip"
CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def save_tiny_clip(folder: Path):
    """Save the tiny CLIP (config JSON + safetensors, seed 0) under ``folder``; return its ``BackboneSpec``.
    The tests' ``tiny_clip`` fixture is this model."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    from benchmark.encoders.spec import BackboneSpec

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{NAME}.json"
    config.write_text(json.dumps(CONFIG))
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    model = open_clip.create_model(NAME)
    weights = folder / "tiny-clip.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    return BackboneSpec("open_clip", NAME, str(weights.resolve()), str(config.resolve()))


def write_backbones_file(folder: Path) -> Path:
    """Save the tiny CLIP under ``folder``; return a backbones file pointing `clip-vit-b-32` at it."""
    spec = save_tiny_clip(folder)
    backbones = folder / "backbones.json"
    backbones.write_text(json.dumps({"clip-vit-b-32": spec.to_dict()}, indent=2))
    return backbones


def small_backbones(folder: Path) -> dict:
    """A CPU-sized random open_clip CLIP (256 wide, 6 layers, 112 px) and DINOv2 (192 wide, 56 px) saved under
    ``folder``: backbone id -> ``BackboneSpec`` (the speed benchmarks' and the crash soak's models)."""
    import open_clip
    import torch
    from safetensors.torch import save_file
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    from benchmark.encoders.spec import BackboneSpec

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


def real_size_backbones(folder: Path) -> dict:
    """open_clip ViT-B-32 and ViT-L-14 (no pretrained tag: random weights) and DINOv2-base (its configuration
    and image-processor settings as facebook/dinov2-base publishes them, random weights), saved under ``folder``:
    backbone id -> ``BackboneSpec`` (the speed benchmarks' real-size models and the device-transform tests')."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    from benchmark.encoders.spec import BackboneSpec

    dino = folder / "dinov2-base"
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4,
                             patch_size=14, image_size=518, layerscale_value=1.0)).save_pretrained(dino)
    BitImageProcessor(size={"shortest_edge": 256}, crop_size={"height": 224, "width": 224}, resample=3,
                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(dino)
    return {"clip-vit-b-32": BackboneSpec("open_clip", "ViT-B-32"),
            "clip-vit-l-14": BackboneSpec("open_clip", "ViT-L-14"),
            "dinov2-base": BackboneSpec("hf_vision", str(dino))}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte-level alphabet: printable bytes map to themselves, others above U+0100."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


def byte_level_clip_tokenizer():
    """A CLIPTokenizer over a byte-level vocabulary (no merges) written here: tokenises any text offline."""
    from transformers import CLIPTokenizer

    chars = list(bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def save_tiny_stable_diffusion(folder: Path, flag_everything: bool = False) -> Path:
    """A tiny randomly initialised StableDiffusionPipeline (same classes as the real one), saved with save_pretrained.

    ``flag_everything``: add a tiny StableDiffusionSafetyChecker whose concept thresholds flag every image.
    """
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPTextConfig, CLIPTextModel

    tokenizer = byte_level_clip_tokenizer()
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=32, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
        hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
        vocab_size=len(tokenizer), max_position_embeddings=77))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    checker, extractor = None, None
    if flag_everything:
        config = CLIPConfig(text_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                                         "num_hidden_layers": 1},
                            vision_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                                           "num_hidden_layers": 1, "image_size": 32, "patch_size": 8},
                            projection_dim=32)
        checker = StableDiffusionSafetyChecker(config)
        with torch.no_grad():
            checker.concept_embeds_weights.fill_(-10.0)  # every cosine exceeds the threshold: all flagged
        extractor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    pipeline = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                                       scheduler=scheduler, safety_checker=checker, feature_extractor=extractor,
                                       requires_safety_checker=flag_everything)
    pipeline.save_pretrained(folder)
    return folder

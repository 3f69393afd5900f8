"""Generation presets named after the models the papers evaluated, with their published settings.

Sources: CRT (De Rosa Palmini & Cetinic, arXiv:2511.11435, App. B: FLUX.1-schnell guidance 3.5,
4 steps, max_sequence_length 256; SD3 4.5 / 30; SDXL 7.5 / 30; SD 2.1 7.5 / 50; 1024x1024) and
CulturalFrames (Nayak et al., arXiv:2506.08835, App. A.4: FLUX.1-dev 3.5 / 50 / 512;
SD-3.5-Large 4.5 / 40; 1024x1024). Both papers use each model's default scheduler. SD 2.1 keeps
its native 768x768 here (the CRT paper ran every model at 1024x1024; pass --width/--height 1024
to match it).
CUBE's negative prompt (Kannen et al., arXiv:2407.06863, Table 12) is an option for any preset.
A preset is a default: every value can be overridden on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

CUBE_NEGATIVE_PROMPT = (
    "multiple items, blurry, painting, cartoon, people, human, man, woman, artificial, multiple images, nsfw, "
    "bad quality, bad anatomy, worst quality, low quality, low resolutions, extra fingers, blur, blurry, ugly, "
    "wrong proportions, watermark, image artifacts, lowres, jpeg artifacts, deformed, noisy"
)


@dataclass(frozen=True)
class Preset:
    name: str
    model: str
    steps: int
    guidance_scale: float
    width: int = 1024
    height: int = 1024
    max_sequence_length: int | None = None
    dtype: str = "float16"
    source: str = ""


PRESETS = {
    "sdxl": Preset("SDXL base 1.0", "stabilityai/stable-diffusion-xl-base-1.0", 30, 7.5,
                   source="CRT arXiv:2511.11435, App. B"),
    "sd-2.1": Preset("Stable Diffusion 2.1", "stabilityai/stable-diffusion-2-1", 50, 7.5, 768, 768,
                     source="CRT arXiv:2511.11435, App. B (native 768x768)"),
    "sd3": Preset("Stable Diffusion 3 Medium", "stabilityai/stable-diffusion-3-medium-diffusers", 30, 4.5,
                  source="CRT arXiv:2511.11435, App. B (the paper does not name the SD3 variant)"),
    "sd-3.5-large": Preset("Stable Diffusion 3.5 Large", "stabilityai/stable-diffusion-3.5-large", 40, 4.5,
                           dtype="bfloat16", source="CulturalFrames arXiv:2506.08835, App. A.4"),
    "flux.1-schnell": Preset("FLUX.1-schnell", "black-forest-labs/FLUX.1-schnell", 4, 3.5, max_sequence_length=256,
                             dtype="bfloat16", source="CRT arXiv:2511.11435, App. B"),
    "flux.1-dev": Preset("FLUX.1-dev", "black-forest-labs/FLUX.1-dev", 50, 3.5, max_sequence_length=512,
                         dtype="bfloat16", source="CulturalFrames arXiv:2506.08835, App. A.4"),
}

"""Write a tiny, randomly initialised CLIP (open_clip) and a backbones file that points `clip-vit-b-32` at it.

The tests score with this model (tests/conftest.py builds the same one); it lets the demo run offline, with no
weights to download. Its scores are noise: use it to see the pipeline work, never to compare models.

    python benchmarks/tiny_backbone.py /tmp/tiny            # writes /tmp/tiny/backbones.json
    make run CULTURELENS_BACKBONES=/tmp/tiny/backbones.json
"""

from __future__ import annotations

import argparse
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


def write(folder: Path) -> Path:
    """Save the tiny CLIP under ``folder``; return a backbones file pointing `clip-vit-b-32` at it."""
    spec = save_tiny_clip(folder)
    backbones = folder / "backbones.json"
    backbones.write_text(json.dumps({"clip-vit-b-32": spec.to_dict()}, indent=2))
    return backbones


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="where to write the model and backbones.json")
    print(write(Path(parser.parse_args().folder)))


if __name__ == "__main__":
    main()

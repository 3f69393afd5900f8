"""Stand-in submissions: upstream-format CUBE records for a 6-prompt dataset, random images, manifests, submission
folders and their zips, as the tests and ``benchmarks/`` scripts (load test, crash soak) make them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

# Upstream-format records (same keys and encodings as the authors' cube_1k.json) for a small dataset.
TINY_UPSTREAM = [
    {"id": "Q1", "name": "feijoada", "country": "Brazil", "domain": "cuisine",
     "prompt": "A high resolution image of feijoada from Brazilian cuisine, realistic"},
    {"id": "LLM", "name": "pão de queijo", "country": "Brazil", "domain": "cuisine",
     "prompt": "A high resolution image of pão de queijo from Brazilian cuisine, realistic"},
    {"id": "Q2", "name": "Christ the Redeemer", "country": "Brazil", "domain": "landmarks",
     "prompt": "A panoramic view of Christ the Redeemer in Brazil, realistic"},
    {"id": "Q3", "name": "jollof rice", "country": "Nigeria", "domain": "cuisine",
     "prompt": "A high resolution image of jollof rice from Nigerian cuisine, realistic"},
    {"id": "Q4", "name": "Zuma Rock", "country": "Nigeria", "domain": "landscapes",
     "prompt": "A panoramic view of Zuma Rock in Nigeria, realistic"},
    {"id": "LLM", "name": "atilogwu", "country": "Nigeria", "domain": "art",
     "prompt": "An image of atilogwu performance from Nigeria, realistic"},
]
for _record in TINY_UPSTREAM:
    for _key in ("P31", "P279", "P495", "P17", "P2012", "P361"):
        _record.setdefault(_key, "nan")


def write_image(path: Path, seed: int, size: int = 64, fmt: str = "PNG") -> None:
    """A ``size`` x ``size`` image of uniform random pixels drawn from ``seed``, saved as ``fmt``."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, format=fmt)

def manifest(prompts_repo: str = "culturelens/cube-1k", config: str = "cube_1k", seeds=(0, 1), **overrides) -> dict:
    data = {
        "format_version": 1,
        # No revision: the store rejects a second submission of one model revision for one dataset, and the
        # tests submit the tiny model many times.
        "model": {"name": "Tiny Test Model", "id": "local/tiny", "revision": None, "type": "open"},
        "dataset": {"repo": prompts_repo, "config": config, "split": "test"},
        "images_per_prompt": len(seeds),
        "seeds": list(seeds),
        "generation": {"pipeline": "StableDiffusionPipeline", "steps": 2, "guidance_scale": 7.5,
                       "width": 64, "height": 64},
        "license": "CC-BY-4.0",
        "contact": "tester@example.org",
    }
    data.update(overrides)
    return data

def make_submission(folder: Path, prompt_ids: list[str], seeds=(0, 1), model_name: str = "Tiny Test Model",
                    **overrides) -> Path:
    """A valid submission folder: manifest + one 64x64 PNG per (prompt, seed)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = manifest(seeds=seeds, **overrides)
    data["model"]["name"] = model_name
    (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    for i, prompt_id in enumerate(prompt_ids):
        for seed in seeds:
            write_image(folder / "images" / prompt_id / f"{seed}.png", seed=1000 * i + seed)
    return folder

def zip_folder(folder: Path, archive: Path, wrapper: str = "") -> Path:

    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, wrapper + path.relative_to(folder).as_posix())
    return archive

"""Stand-in submissions: upstream-format CUBE records for a 6-prompt dataset, random images, manifests, submission
folders and their zips, as the tests and ``benchmarks/`` scripts (load test, crash soak) make them."""

from __future__ import annotations

import json
import zipfile
import zlib
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


DEFAULT_MODEL_NAME = "Tiny Test Model"


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
        "model": {"name": DEFAULT_MODEL_NAME, "id": "local/tiny", "revision": None, "type": "open"},
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

def make_submission(folder: Path, prompt_ids: list[str], seeds=(0, 1), model_name: str = DEFAULT_MODEL_NAME,
                    **overrides) -> Path:
    """A valid submission folder: manifest + one 64x64 PNG per (prompt, seed), drawn from the model's name too, as
    two models make different images (the leaderboard refuses a second submission of the same images); the default
    model's images are drawn from (prompt, seed) alone."""
    folder.mkdir(parents=True, exist_ok=True)
    data = manifest(seeds=seeds, **overrides)
    data["model"]["name"] = model_name
    (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    model = 0 if model_name == DEFAULT_MODEL_NAME else zlib.crc32(model_name.encode("utf-8")) << 20
    for i, prompt_id in enumerate(prompt_ids):
        for seed in seeds:
            write_image(folder / "images" / prompt_id / f"{seed}.png", seed=model + 1000 * i + seed)
    return folder

def zip_folder(folder: Path, archive: Path, wrapper: str = "") -> Path:

    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, wrapper + path.relative_to(folder).as_posix())
    return archive


NOT_AN_IMAGE = b"NOTANIMG"  # each entry of ``many_entries_zip``: stored, its CRC-32 broken after writing


def many_entries_zip(archive: Path, entries: int, prompt_ids: list[str], seeds=(0, 1)) -> Path:
    """A hostile upload of ``entries`` small entries (issue 40): a valid manifest for ``prompt_ids`` and ``seeds``,
    then ``entries - 1`` images named in the layout, cycling over the prompts with seeds counting up, so that all but the first
    ``len(prompt_ids) * len(seeds)`` name seeds the manifest lacks. Every image entry holds ``NOT_AN_IMAGE`` under
    a CRC-32 that does not match it: unpacking any one of them fails, so an upload refused for its layout (the
    unknown seeds) shows it was refused before anything but its manifest was unpacked."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest(seeds=seeds)))
        for i in range(entries - 1):
            zf.writestr(f"images/{prompt_ids[i % len(prompt_ids)]}/{i // len(prompt_ids)}.png", NOT_AN_IMAGE)
    data = archive.read_bytes()
    archive.write_bytes(data.replace(NOT_AN_IMAGE, NOT_AN_IMAGE[:-1] + b"H"))  # the data, not the names or CRCs
    return archive

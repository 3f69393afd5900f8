"""Tiny stand-ins of every source a suite is built from, in the authors' formats, and suite submissions written
by hand: what the suite's fixtures (``tests/conftest.py``) and the suite tests build on."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from benchmark.datasets.prompts import load_prompts
from benchmark.layout import part_folder
from benchmark.suite import Suite
from culturelens.testing.submissions import make_submission, write_image

CSPACE_RECORDS = [  # the authors' CSpace layout: name, country, domain (one artifact per concept and country at least)
    {"id": "Q1", "name": "Feijoada", "country": "Brazil", "domain": "cuisine"},
    {"id": "Q2", "name": "Jollof rice", "country": "Nigeria", "domain": "cuisine"},
    {"id": "Q3", "name": "Christ the Redeemer", "country": "Brazil", "domain": "landmark"},
    {"id": "Q4", "name": "Zuma Rock", "country": "Nigeria", "domain": "landmark"},
    {"id": "Q5", "name": "Frevo", "country": "Brazil", "domain": "art"},
    {"id": "Q6", "name": "Agbada", "country": "Nigeria", "domain": "art"},
]

# `generate --suite` at the tiny pipeline's size.
SIZE = ["--width", "64", "--height", "64", "--steps", "2", "--guidance-scale", "7.5", "--device", "cpu"]
# A test's seeds: 2 per CUBE-1K prompt and reference, 4 per diversity prompt (v1: 10, 80 and 10).
TEST_SEEDS = {"cube-1k": (0, 1), "cube-diversity": (0, 1, 2, 3), "iconic-references": (0, 1)}


def write_backbones(folder: Path, tiny_clip, tiny_dino) -> Path:
    """The papers' backbone ids pointed at the tiny models (CLIP for recognition, quality and the KB)."""
    path = folder / "backbones.json"
    path.write_text(json.dumps({"clip-vit-b-32": tiny_clip.to_dict(), "hpsv2": tiny_clip.to_dict(),
                                "msiglip-so400m": tiny_clip.to_dict(), "dinov2-base": tiny_dino.to_dict()}))
    return path


def write_sources(root: Path, tiny_dino) -> dict[str, Path]:
    """Tiny stand-ins for every source the suite builds from, in the authors' formats."""
    from benchmark.encoders import load_backbone
    from benchmark.metrics.variability import Calibration
    from tests.test_culturalframes import release_rows, write_release
    from tests.test_relevance import write_kb_inputs

    sources = {"cspace": root / "cube_CSpace.json"}
    sources["cspace"].write_text(json.dumps(CSPACE_RECORDS))
    images, lines = root / "iconic", []
    for i, (title, modality) in enumerate([("Morning Coffee", "artwork"), ("Lift Off", "photograph"),
                                           ("A Cat Asleep", "album"), ("Space Walk", "film")]):
        qid = f"Q{100 + i}"
        names = [f"{qid}/{j}.png" for j in range(3 if modality == "film" else 1)]
        for j, name in enumerate(names):
            write_image(images / name, seed=100 * i + j)
        lines.append({"qid": qid, "title": title, "modality": modality, "sitelinks": 40, "images": names,
                      "image_licenses": ["CC0 (test image)"] * len(names), "wikidata_revision": 2000000000 + i})
    sources["iconic_records"], sources["iconic_images"] = root / "references.jsonl", images
    sources["iconic_records"].write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows, records = release_rows()
    sources["culturalframes"] = write_release(root / "CulturalFrames", rows, records)
    (root / "kb").mkdir()
    sources["kb_records"], sources["kb_images"] = write_kb_inputs(root / "kb")
    dino = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    sources["w1kp"] = root / "calibration.npz"
    Calibration.fit(np.linspace(0.0, 2.0, 50), backbone="dinov2-base", backbone_key=dino.key).save(sources["w1kp"])
    return sources


def build_arguments(out: Path, sources: dict, upstream: Path, backbones: Path) -> list:
    return ["suite", "build", "--out", out, "--cube-source", upstream, "--cspace-source", sources["cspace"],
            "--iconic-records", sources["iconic_records"], "--iconic-images", sources["iconic_images"],
            "--culturalframes-source", sources["culturalframes"], "--kb-records", sources["kb_records"],
            "--kb-images", sources["kb_images"], "--w1kp-source", sources["w1kp"], "--backbones", backbones,
            "--device", "cpu"]


def with_seeds(folder: Path, seeds: dict[str, tuple[int, ...]]) -> Suite:
    """Rewrite the suite folder's definition with fewer seeds per part (a test's suite: a suite is data)."""
    record = json.loads((folder / "suite.json").read_text())
    suite = Suite.from_dict(record["suite"])
    suite = dataclasses.replace(suite, parts=tuple(dataclasses.replace(p, seeds=seeds.get(p.name, p.seeds))
                                                   for p in suite.parts))
    (folder / "suite.json").write_text(json.dumps({**record, "suite": suite.to_dict()}))
    return suite


def write_part(submission: Path, suite: Suite, name: str, model: str = "Tiny Test Model", **overrides) -> None:
    """One part of a suite submission, as `generate --suite` writes it: the part's prompts x seeds."""
    part = suite.part(name)
    prompts = load_prompts(part.dataset.repo, part.dataset.config, local_root=submission.parent / "datasets")
    fields = {"prompts_repo": part.dataset.repo, "config": part.dataset.config, "seeds": part.seeds,
              "suite": {"repo": suite.repo, "version": suite.version, "part": name}, **overrides}
    make_submission(submission / part_folder(name), list(prompts.table.index), model_name=model, **fields)

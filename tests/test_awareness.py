"""Awareness proxies: zero-shot artifact and country recognition on hand-made embeddings whose answers are
known, and the same metrics through the real harness with a tiny open_clip model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import harness
from benchmark.cache import EmbeddingCache
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts
from benchmark.encoders import load_backbone
from benchmark.metrics import awareness
from benchmark.metrics.base import Inputs, Need
from benchmark.submission import stage
from tests.helpers import tiny_cube
from culturelens.testing.submissions import make_submission


def test_rank_of_truth_counts_ties_against_the_truth_and_respects_allowed():
    images = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    candidates = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [1.0, 0.0]])  # 0 and 3 are identical
    truth = np.array([1, 2, 0])
    rank, best = awareness.rank_of_truth(images, candidates, truth)
    # image 0 scores 1, .6, 0, 1: two candidates beat the truth (.6) -> rank 3
    # image 1 scores 0, .8, 1, 0: truth is best -> rank 1
    # image 2: truth 0 ties with candidate 3 -> rank 2 (ties count against)
    assert rank.tolist() == [3, 1, 2]
    assert best.tolist()[:2] == [0, 2]
    allowed = np.array([[False, True, True, False]] * 3)
    allowed[2] = [True, True, True, False]
    rank, _ = awareness.rank_of_truth(images, candidates, truth, allowed)
    assert rank.tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="not among its allowed"):
        awareness.rank_of_truth(images, candidates, np.array([0, 0, 0]), allowed)


AXES = {"a photo of sushi": 0, "a photo of ramen": 1, "a photo of pizza": 2, "a photo of Colosseum": 3,
        "food from Japan": 4, "food from Italy": 5, "a landmark from Japan": 6, "a landmark from Italy": 7}


def _encode(backbone: str, texts: list[str]) -> np.ndarray:
    """A hand-made text encoder: each known text is its own axis."""
    out = np.zeros((len(texts), len(AXES)), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i, AXES[text]] = 1.0
    return out


def _unit(*weights: tuple[str, float]) -> np.ndarray:
    v = np.zeros(len(AXES))
    for text, w in weights:
        v[AXES[text]] = w
    return v / np.linalg.norm(v)


def _inputs() -> Inputs:
    catalogue = pd.DataFrame({
        "prompt": ["p"] * 4, "artifact": ["sushi", "ramen", "pizza", "Colosseum"],
        "concept": ["cuisine", "cuisine", "cuisine", "landmarks"], "country": ["Japan", "Japan", "Italy", "Italy"],
    }, index=pd.Index(["s", "r", "p", "c"], name="prompt_id"))
    images = catalogue.loc[["s", "s", "p", "c"]].reset_index()
    embeddings = np.stack([
        _unit(("a photo of sushi", 1.0), ("food from Japan", 1.0)),  # sushi, clearly
        # Looks like pizza first, then Colosseum (not a cuisine candidate), sushi third: rank 2 of 3 among cuisine.
        _unit(("a photo of pizza", 3.0), ("a photo of Colosseum", 2.5), ("a photo of sushi", 1.0),
              ("food from Italy", 1.0)),
        _unit(("a photo of pizza", 1.0), ("food from Japan", 2.0), ("food from Italy", 1.0)),
        _unit(("a photo of Colosseum", 1.0), ("a landmark from Italy", 1.0)),
    ])
    return Inputs(images, {Need("clip", "image"): embeddings}, {}, catalogue=catalogue, encode_text=_encode)


def test_artifact_recognition_ranks_within_the_prompts_concept():
    inputs = _inputs()
    top1, notes = awareness.ArtifactRecognition("clip", top=1).per_image(inputs)
    top5, _ = awareness.ArtifactRecognition("clip", top=5).per_image(inputs)
    assert top1.tolist() == [1, 0, 1, 1]
    assert top5.tolist() == [1, 1, 1, 1]
    assert notes[0] == "ranked 1st of 3"
    assert notes[1] == "ranked 2nd of 3; nearest: pizza"  # the Colosseum is a landmark: not a candidate
    assert notes[3] == "ranked 1st of 1"


def test_country_recognition_uses_the_concepts_probe():
    values, notes = awareness.CountryRecognition("clip").per_image(_inputs())
    assert values.tolist() == [1, 0, 0, 1]  # image 1 (sushi prompt) leans to Italy, image 2 (pizza) to Japan
    assert notes[1] == "looks most like Italy (2nd)"
    assert notes[2] == "looks most like Japan (2nd)"


def test_recognition_explains_datasets_it_cannot_score():
    inputs = _inputs()
    bare = Inputs(inputs.images, inputs.features, {}, catalogue=inputs.catalogue.drop(columns="artifact"))
    assert "artifact" in awareness.ArtifactRecognition("clip").applies(bare)
    assert awareness.ArtifactRecognition("clip").applies(inputs) is None
    odd = inputs.catalogue.assign(concept="music")
    assert "music" in awareness.CountryRecognition("clip").applies(
        Inputs(odd.reset_index(), {}, {}, catalogue=odd))


def test_recognition_through_the_harness_with_a_tiny_clip(tmp_path, tiny_upstream, tiny_clip):
    """The production path: dataset catalogue, text embeddings through the cache, one row per image."""
    datasets_root = tmp_path / "datasets"
    tiny_cube(datasets_root, tiny_upstream)
    prompts = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root)
    ids = list(prompts.table.index)
    report = stage(make_submission(tmp_path / "source", ids, seeds=(0, 1)), tmp_path / "staging",
                   lambda m: prompts)
    assert report.ok, report.errors
    staged = report.keep(tmp_path / "staged")
    images = pq.read_table(staged / "images.parquet").to_pandas()
    backbones = {"clip-vit-b-32": load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")}
    metrics = awareness.metrics(clip="clip-vit-b-32")[:3]
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    scores = harness.score(staged, report.manifest, prompts, images, metrics, backbones, cache,
                           submission_id="s1")
    rows = scores.per_image
    assert set(rows["metric"]) == {"artifact_top1", "artifact_top5", "country_top1"}
    assert len(rows) == 3 * 12 and rows["value"].isin([0.0, 1.0]).all()
    # top-5 is never worse than top-1, image by image
    by = rows.pivot_table(index=["prompt_id", "seed"], columns="metric", values="value")
    assert (by["artifact_top5"] >= by["artifact_top1"]).all()
    # the candidates (every artifact of the dataset, every country probe) went through the cache once
    candidates = prompts.table[["artifact", "concept"]].drop_duplicates()
    countries = prompts.table["country"].nunique() * prompts.table["concept"].nunique()
    assert len(cache) == 12 + len(candidates) + countries  # 12 images + label texts
    again = harness.score(staged, report.manifest, prompts, images, metrics, backbones, cache,
                          submission_id="s1")
    assert again.run.embeddings_computed == 0 and len(cache) == 12 + len(candidates) + countries
    pd.testing.assert_frame_equal(again.per_image[["metric", "value"]], rows[["metric", "value"]])

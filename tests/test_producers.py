"""Producers (``benchmark.features.producers``): a VLM's outputs cached by content like embeddings. With the tiny
VLMs of the judge and tagger tests, a first run fills the products cache; a rescore with fresh objects and the
same cache folder makes no VLM call (counted on the real model's forward) and gives the same values as an
uncached run; a changed prompt template, label or model revision misses; a corrupt cache file is moved aside."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from benchmark.cache import EmbeddingCache
from benchmark.digests import file_digest
from benchmark.features import Need
from benchmark.metrics.base import Inputs
from tests.test_diversity import DISHES, basis, index, make_inputs, mix  # noqa: F401 - index: a fixture
from tests.test_relevance import backbone, kb, make_image  # noqa: F401 - fixtures: tiny open_clip and its KB

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def count_forward(model) -> list:
    """Wrap the real model's forward with a counter (one entry per batch it runs); returns the counter."""
    calls, real = [], model.forward

    def forward(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    model.forward = forward
    return calls


def products(folder: Path) -> EmbeddingCache:
    """The products cache as the harness makes it: a fresh object, beside the folder's embedding cache."""
    return EmbeddingCache(folder / "cache.sqlite").beside("products")


# --- relevance with the VLM judge -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pictures(tmp_path_factory, backbone) -> tuple[list[Path], np.ndarray]:
    import torch

    folder = tmp_path_factory.mktemp("pictures")
    paths = [folder / f"p{i}.png" for i in range(3)]
    for i, path in enumerate(paths):
        make_image(path, 200 + i)
    pixels = torch.stack([backbone.prepare(Image.open(p).convert("RGB"), "image") for p in paths])
    return paths, backbone.embed(pixels)


def relevance_inputs(kb_, pictures, cache: EmbeddingCache | None, opened: list) -> Inputs:
    paths, embedded = pictures

    def open_image(row: int) -> Image.Image:
        opened.append(row)
        return Image.open(paths[row]).convert("RGB")

    rows = pd.DataFrame({"prompt_id": ["a", "a", "b"], "seed": [0, 1, 0], "prompt": ["p", "p", "q"],
                         "image_sha256": [file_digest(p) for p in paths]})
    return Inputs(rows, {Need(kb_.backbone_id, "image"): embedded}, {}, open_image=open_image, products=cache)


def score_relevance(judge_folder, kb_, pictures, cache, labels=("Ukrainian",), **judge_options):
    """A fresh judge (its forward counted) scores every label: (values, notes, details per label, VLM calls,
    images opened)."""
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics.relevance import metrics

    settings = {"rubric": judge_options.pop("rubric")} if "rubric" in judge_options else {}
    judge = VLMJudge(str(judge_folder), device="cpu", **judge_options)
    calls, opened = count_forward(judge.model), []
    inputs = relevance_inputs(kb_, pictures, cache, opened)
    built = metrics(list(labels), kb_, judge, **settings)
    results = {m.label: (*m.per_image(inputs), m.details(inputs)) for m in built}
    return results, len(calls), len(opened)


def test_a_rescore_with_the_same_cache_makes_no_judge_call(tiny_qwen_vl, kb, pictures, tmp_path):
    uncached, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, None)
    assert calls > 0
    first, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path))
    assert calls > 0
    again, calls, opened = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path))
    assert (calls, opened) == (0, 0)  # no forward pass, not even an image decoded
    for run in (first, again):
        values, notes, details = run["Ukrainian"]
        assert np.array_equal(values, uncached["Ukrainian"][0])
        assert notes == uncached["Ukrainian"][1] and details == uncached["Ukrainian"][2]


def test_another_label_rubric_or_revision_misses_the_judge_cache(tiny_qwen_vl, kb, pictures, tmp_path):
    from benchmark.judges.base import CAIRE_RUBRIC, Rubric

    score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path))
    # One more label: only its judgements are computed, the cached label's are reused.
    both, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path), labels=("Ukrainian", "Yoruba"))
    alone, _, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, None, labels=("Yoruba",))
    assert calls > 0 and np.array_equal(both["Yoruba"][0], alone["Yoruba"][0])
    _, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path), labels=("Ukrainian", "Yoruba"))
    assert calls == 0
    # The rubric is part of the prompt the judge reads: a reworded level is another prompt.
    levels = (dataclasses.replace(CAIRE_RUBRIC.levels[0], description="Nothing of the culture."),
              *CAIRE_RUBRIC.levels[1:])
    _, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path), rubric=Rubric(levels))
    assert calls > 0
    _, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path), revision="another")
    assert calls > 0


def test_a_corrupt_products_file_is_moved_aside_and_recomputed(tiny_qwen_vl, kb, pictures, tmp_path):
    uncached, _, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, None)
    cache = products(tmp_path)
    score_relevance(tiny_qwen_vl, kb[0], pictures, cache)
    cache.path.write_bytes(b"this is not a SQLite file" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{cache.path}{suffix}").unlink(missing_ok=True)
    again, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path))
    assert calls > 0 and np.array_equal(again["Ukrainian"][0], uncached["Ukrainian"][0])
    assert [p.name.split("-")[0] for p in tmp_path.glob("cache.products.sqlite.corrupt-*")] == \
        ["cache.products.sqlite.corrupt"]
    _, calls, _ = score_relevance(tiny_qwen_vl, kb[0], pictures, products(tmp_path))
    assert calls == 0  # the fresh file holds the recomputed outputs


# --- diversity with the VLM tagger ----------------------------------------------------------------------------
def diversity_inputs(cache: EmbeddingCache | None, opened: list) -> Inputs:
    embeddings = [mix({d: 1.0, "pizza": 0.5}) if d != "pizza" else basis(d) for d in DISHES]
    rng = np.random.default_rng(1)
    pictures = [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in DISHES]

    def open_image(row: int) -> Image.Image:
        opened.append(row)
        return pictures[row]

    inputs = make_inputs({"p": ("cuisine", embeddings)})
    images = inputs.images.assign(image_sha256=[f"sha-{i}" for i in range(len(DISHES))])
    return dataclasses.replace(inputs, images=images, open_image=open_image, products=cache)


def score_diversity(tagger, cache) -> tuple[dict, int, int]:
    """Every diversity metric's row for the prompt with ``tagger`` (its forward counted): (rows, VLM calls,
    images opened)."""
    from benchmark.metrics.diversity import metrics

    calls, opened = count_forward(tagger.model), []
    inputs = diversity_inputs(cache, opened)
    rows = {m.info.name: m.per_prompt(inputs).iloc[0].to_dict() for m in metrics(tagger)}
    return rows, len(calls), len(opened)


def test_a_diversity_rescore_with_the_same_cache_makes_no_tagger_call(index, tiny_llava, tmp_path):
    from benchmark.tagging import VLMTagger

    def fresh(**options):
        return VLMTagger.from_pretrained(index, str(tiny_llava), k=3, batch_size=3, device="cpu", **options)

    uncached, calls, _ = score_diversity(fresh(), None)
    assert calls == 3  # 8 images, 3 per forward pass
    first, calls, _ = score_diversity(fresh(), products(tmp_path))
    again, calls_again, opened = score_diversity(fresh(), products(tmp_path))
    assert calls == 3 and (calls_again, opened) == (0, 0)
    assert first == uncached and again == uncached
    # Another question template, another model revision: other keys.
    _, calls, _ = score_diversity(fresh(question=VLMTagger.QUESTION.replace("Which", "What")), products(tmp_path))
    assert calls == 3
    revised = fresh()
    revised.model.config._commit_hash = "0123abc"
    _, calls, _ = score_diversity(VLMTagger(index, revised.model, revised.processor, k=3, batch_size=3),
                                  products(tmp_path))
    assert calls == 3


def test_the_harness_caches_the_vlm_tags_beside_the_embeddings(tiny_clip, tiny_upstream, tiny_llava, tmp_path):
    """``harness.score`` with an embedding cache: the tagger's outputs go to ``cache.products.sqlite`` beside it,
    and a second scoring with fresh objects makes no VLM call and gives the same rows."""
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions
    from benchmark.encoders import load_backbone
    from benchmark.tracks import build, metric_settings, select
    from benchmark.tagging import ArtifactIndex
    from tests.test_diversity import CLIP, CSPACE, HPS, staged_submission

    report, staged, images = staged_submission(tiny_upstream, tmp_path)
    clip = load_backbone(CLIP, {CLIP: tiny_clip}, device="cpu")
    quality = load_backbone(HPS, {HPS: tiny_clip}, device="cpu")
    folder = ArtifactIndex.from_backbone(CSPACE, clip, progress=False).save(tmp_path / "index")

    def run(cache: EmbeddingCache | None) -> tuple[pd.DataFrame, int]:
        built, unavailable = build(metric_settings(artifact_index=str(folder), diversity_tagger=str(tiny_llava)))
        chosen, _ = select(built, unavailable, ["diversity"])
        calls = count_forward(chosen[0].tagger.model)
        scores = harness.score(staged, report.manifest, report.prompts, images, chosen, {CLIP: clip, HPS: quality},
                               cache, submission_id="t", options=ScoringOptions(batch_size=16))
        return scores.per_image[["metric", "prompt_id", "value", "note"]], len(calls)

    uncached, _ = run(None)
    first, calls = run(EmbeddingCache(tmp_path / "out" / "cache.sqlite"))
    again, calls_again = run(EmbeddingCache(tmp_path / "out" / "cache.sqlite"))
    assert calls > 0 and calls_again == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.sqlite")) == ["cache.products.sqlite", "cache.sqlite"]
    pd.testing.assert_frame_equal(first, uncached)
    pd.testing.assert_frame_equal(again, uncached)

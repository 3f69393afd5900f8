"""Non-finite embeddings and scores become error rows with their reason, counted and excluded, never silent."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from benchmark import harness, results
from benchmark.aggregate import aggregate
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts
from benchmark.encoders import load_backbone
from benchmark.metric_marks import ERROR_NOTE
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.scoring_options import ScoringOptions
from benchmark.metrics.iconicity import (
    RecognitionPerImage,
    RecognitionPerReference,
    VisualReusePerImage,
    patch_similarity,
)
from benchmark.submission import stage
from tests.helpers import tiny_cube
from culturelens.testing.submissions import make_submission

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLIP = "clip-vit-b-32"
REASON = f"non-finite {CLIP}/image embedding"
# The (prompt, seed) whose image the poisoned CLIP turns into NaN: feijoada (Brazil), and a Nigerian prompt.
WHITE = ("br-cuisine-00f4a0622f", 1)
NIGERIAN = "ng-art-9261d9ba38"


class SeedAgreement(Metric):
    """A prompt-level test metric: the mean cosine between the CLIP embeddings of a prompt's images."""

    info = MetricInfo("seed_agreement", "seed agreement", "test", "1", True, "cosine", -1.0, 1.0, "test",
                      (Need(CLIP, "image"),), "prompt")

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        features = inputs.features[Need(CLIP, "image")]
        rows = []
        for prompt_id, index in inputs.images.groupby("prompt_id", sort=True).indices.items():
            x = features[index]
            similarity = x @ x.T
            pairs = len(x) * (len(x) - 1)
            rows.append({"prompt_id": prompt_id, "value": (similarity.sum() - np.trace(similarity)) / pairs,
                         "note": f"{len(x)} images"})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])


METRICS = [ClipCosine(), ClipScore(), SeedAgreement()]


@pytest.fixture(scope="module")
def poisoned_clip(tiny_clip, tmp_path_factory):
    """The tiny CLIP with one patch-embedding weight (blue channel, top-left pixel of a patch) set to 1e20: the
    patch token of a grey image (blue normalised below 0.7) stays finite, a white image's (2.14) overflows its
    layer norm into NaN. A real model whose one input path gives a NaN embedding."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(tiny_clip.weights)
    weights["visual.conv1.weight"][0, 2, 0, 0] = 1e20
    path = tmp_path_factory.mktemp("poisoned-clip") / "poisoned.safetensors"
    save_file(weights, str(path))
    backbone = load_backbone(CLIP, {CLIP: dataclasses.replace(tiny_clip, weights=str(path))}, device="cpu")
    assert isinstance(backbone.embed(torch.zeros(1, 3, 64, 64)), np.ndarray)
    return backbone


@pytest.fixture(scope="module")
def submission(tmp_path_factory, tiny_upstream):
    """6 prompts x 3 seeds of grey noise (pixels 100..150), except one white image (``WHITE``)."""
    root = tmp_path_factory.mktemp("non-finite")
    datasets_root = root / "datasets"
    tiny_cube(datasets_root, tiny_upstream)
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table.index)
    assert {WHITE[0], NIGERIAN} <= set(ids)  # the dataset's stable prompt ids
    folder = make_submission(root / "source", ids, seeds=(0, 1, 2))
    rng = np.random.default_rng(0)
    for path in sorted((folder / "images").rglob("*.png")):
        white = (path.parent.name, int(path.stem)) == WHITE
        pixels = np.full((64, 64, 3), 255, np.uint8) if white else rng.integers(100, 151, (64, 64, 3), np.uint8)
        Image.fromarray(pixels).save(path)
    report = stage(folder, root / "staging",
                   lambda m: load_prompts(m.dataset.repo, m.dataset.config, local_root=datasets_root))
    assert report.ok, report.errors
    staged = report.keep(root / "staged")
    return staged, report.manifest, report.prompts


def _score(submission, backbone, images):
    staged, manifest, prompts = submission
    # one image a batch: an image's embedding then does not depend on which images share its batch
    return harness.score(staged, manifest, prompts, images, METRICS, {CLIP: backbone}, submission_id="t",
                         options=ScoringOptions(batch_size=1))


@pytest.fixture(scope="module")
def runs(submission, poisoned_clip):
    """(with every image, without the white one)."""
    images = pq.read_table(submission[0] / "images.parquet").to_pandas()
    white = (images["prompt_id"] == WHITE[0]) & (images["seed"] == WHITE[1])
    assert white.sum() == 1
    return _score(submission, poisoned_clip, images), _score(submission, poisoned_clip, images[~white])


def test_the_nan_image_gets_an_error_row_for_every_metric_with_its_reason(runs):
    """The NaN image has an error row per metric; the prompt-level value of its prompt, which needs every declared
    image, is not scored either (not one over the two images left)."""
    full, _ = runs
    rows = full.per_image
    errors = rows[rows["error"].notna() & rows["seed"].notna()]
    assert sorted(errors["metric"]) == ["clip_cosine", "clip_score", "seed_agreement"]
    assert set(errors["error"]) == {REASON}
    assert set(zip(errors["prompt_id"], errors["seed"])) == {WHITE}
    assert errors["value"].isna().all() and errors["note"].isna().all()
    [refused] = rows[rows["error"].notna() & rows["seed"].isna()].itertuples()
    assert (refused.metric, refused.prompt_id, refused.error) == ("seed_agreement", WHITE[0], harness.UNUSABLE_IMAGES)
    assert np.isfinite(rows[rows["error"].isna()]["value"].to_numpy(dtype=float)).all()


def test_the_run_record_counts_the_excluded_image_by_reason(runs):
    """The image, and the prompt-level value of its prompt, which needs every declared image."""
    full, without = runs
    assert full.run.errors == {REASON: 1, harness.UNUSABLE_IMAGES: 1} and full.run.excluded == 2
    assert without.run.errors == {} and without.run.excluded == 0


def test_other_images_score_as_in_a_run_without_the_nan_image(runs):
    full, without = runs
    key = ["metric", "prompt_id", "seed"]
    scored = full.per_image[full.per_image["error"].isna()].sort_values(key, na_position="first")
    # The run without the image (its manifest not listing it) scores the prompt-level value of its prompt over the
    # other two images; the full run does not, as the image failed: the value needs every declared image.
    prompt_level = (without.per_image["metric"] == "seed_agreement") & (without.per_image["prompt_id"] == WHITE[0])
    reference = without.per_image[~prompt_level].sort_values(key, na_position="first")
    assert len(scored) == len(reference) == 2 * 17 + 5  # two image-level metrics, one prompt-level
    assert np.array_equal(scored["value"].to_numpy(dtype=float), reference["value"].to_numpy(dtype=float))
    assert scored["note"].tolist() == reference["note"].tolist()


def test_aggregates_count_the_excluded_image_and_leave_it_out_of_n(runs):
    """The image-level aggregates are the other images' (the run without it), the image counted in ``excluded``;
    the prompt-level value of its prompt is not scored (its row null, the image and the value excluded)."""
    full, without = runs
    by = {(r["metric"], r["slice"], r["slice_value"]): r for r in full.aggregates}
    clean = {(r["metric"], r["slice"], r["slice_value"]): r for r in without.aggregates}
    assert set(by) == set(clean)
    for key, row in by.items():
        assert clean[key]["excluded"] == 0
        if key[0] != "seed_agreement":
            assert (row["value"], row["n"]) == (clean[key]["value"], clean[key]["n"]), key
    white = by[("seed_agreement", "prompt", WHITE[0])]
    assert (white["value"], white["n"], white["excluded"]) == (None, 0, 2)
    assert by[("seed_agreement", "overall", "all")]["n"] == clean[("seed_agreement", "overall", "all")]["n"] - 1
    for metric in ("clip_cosine", "clip_score"):
        assert by[(metric, "prompt", WHITE[0])]["n"] == 2 and by[(metric, "prompt", WHITE[0])]["excluded"] == 1
        assert by[(metric, "prompt", NIGERIAN)]["excluded"] == 0
        assert by[(metric, "overall", "all")]["excluded"] == 1
        assert by[(metric, "country", "Brazil")]["excluded"] == 1
        assert by[(metric, "country", "Nigeria")]["excluded"] == 0
    assert by[("seed_agreement", "overall", "all")]["excluded"] == 2  # the image, and its prompt's value


def test_error_and_excluded_columns_survive_the_results_files(runs, tmp_path):
    full, _ = runs
    folder = results.write_folder(tmp_path / "r", results.records(full.per_image), full.aggregates,
                                  results.records(full.curves), full.run)
    per_image = pq.read_table(folder / "per_image.parquet").to_pandas()
    assert (per_image["error"] == REASON).sum() == 3 and (per_image["error"] == harness.UNUSABLE_IMAGES).sum() == 1
    aggregates = pq.read_table(folder / "aggregates.parquet").to_pandas()
    assert aggregates.set_index(["metric", "slice", "slice_value"]).loc[("clip_cosine", "overall", "all"),
                                                                         "excluded"] == 1
    assert json.loads((folder / "run.json").read_text())["errors"] == {REASON: 1, harness.UNUSABLE_IMAGES: 1}


def test_aggregating_rows_without_an_error_column_excludes_nothing():
    old = pd.DataFrame({"track": "t", "metric": "m", "prompt_id": ["a", "a", "b"], "value": [1.0, 3.0, 5.0]})
    overall = next(r for r in aggregate(old) if r["slice"] == "overall")
    assert (overall["value"], overall["n"], overall["excluded"]) == (3.5, 2, 0)


def test_an_infinite_metric_value_becomes_an_error_row():
    rows = pd.DataFrame({"metric": "m", "value": [0.5, np.inf, np.nan, 0.1],
                         "note": ["ok", "inf", None, ERROR_NOTE + "it broke"], "detail": ["{}"] * 4})
    marked = harness.mark_errors(rows)
    assert marked["error"].tolist() == [None, "non-finite m value", None, "it broke"]
    assert marked["note"].tolist() == ["ok", None, None, None]
    assert marked["value"].tolist()[0] == 0.5 and np.isnan(marked["value"].to_numpy()[1:]).all()


# --- iconicity --------------------------------------------------------------------------------------------
def _iconicity_inputs(clip: np.ndarray, grid: np.ndarray) -> Inputs:
    """One still reference (prompt ``p``): CLIP embedding e0, DINO grid of 16 patches e0..e15 (8-d one-hots
    and their negatives); generated images as given."""
    eye = np.eye(16, dtype=np.float32)
    images = pd.DataFrame({"prompt_id": "p", "seed": range(len(clip)), "kind": "still"})
    return Inputs(images, {Need(CLIP, "image"): clip, Need("dinov2-base", "grid", 4): grid}, {},
                  references={Need(CLIP, "image", of="reference"): {"p": eye[:1]},
                              Need("dinov2-base", "grid", 4, of="reference"): {"p": eye[None]}},
                  reference_counts=pd.Series({"p": 1}))


def test_a_nan_recognition_similarity_is_an_error_not_unrecognised():
    eye = np.eye(16, dtype=np.float32)
    clip = np.stack([eye[0], eye[1], np.full(16, np.nan, np.float32)])  # recognised, not, NaN
    grid = np.stack([eye, eye, eye])
    values, notes = RecognitionPerImage().per_image(_iconicity_inputs(clip, grid))
    assert values[:2].tolist() == [1.0, 0.0] and np.isnan(values[2])
    assert notes[2] == ERROR_NOTE + "non-finite recognition similarity"
    inputs = _iconicity_inputs(clip, grid)
    assert RecognitionPerImage().per_reference(inputs).loc["p", "failed"] == 1
    # A value per reference needs every declared image: none over the two images with a similarity (1 of 2, 0.5).
    [row] = RecognitionPerReference().per_prompt(inputs).itertuples()
    assert np.isnan(row.value) and row.note.startswith(ERROR_NOTE + "an image of the reference could not")


def test_faiss_patch_search_gives_nan_for_a_nan_patch_not_minus_float_max():
    eye = np.eye(16, dtype=np.float32)
    generated = np.stack([eye, eye])
    generated[1, 3] = np.nan
    similarity, match = patch_similarity(generated, eye[None])
    assert similarity[0].tolist() == [1.0] * 16 and match[0].tolist() == list(range(16))
    assert np.isnan(similarity[1, 3]) and match[1, 3] == -1
    assert np.delete(similarity[1], 3).tolist() == [1.0] * 15
    pool = eye[None].copy()
    pool[0, 5] = np.nan  # a NaN reference patch would be skipped silently: every similarity is undefined
    assert np.isnan(patch_similarity(generated[:1], pool)[0]).all()


def test_a_recognised_image_with_a_nan_patch_is_a_visual_reuse_error():
    eye = np.eye(16, dtype=np.float32)
    grid = np.stack([eye, eye])
    grid[1, 7] = np.nan
    inputs = _iconicity_inputs(np.stack([eye[0], eye[0]]), grid)
    values, notes = VisualReusePerImage().per_image(inputs)
    assert values[0] == 1.0 and notes[0] == "16 of 16 patches reused"
    assert np.isnan(values[1]) and notes[1] == ERROR_NOTE + "non-finite patch similarity"
    assert VisualReusePerImage().details(inputs)[1] is None
    marked = harness.mark_errors(pd.DataFrame({"metric": "vr_image", "value": values, "note": notes}))
    assert marked["error"].tolist() == [None, "non-finite patch similarity"]

"""Iconicity (arXiv:2511.11435): every formula on hand-made embeddings with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from benchmark.metrics.iconicity import (Transformation, coverage, crt, patch_similarity, perturbation_deltas,
                                         prune_references, recognised, recognition_scores, visual_reuse, vr_at_k)
from benchmark.pictures import REUSED, reuse_picture


def test_recognition_takes_the_best_reference_and_a_strict_threshold():
    generated = np.array([[1.0, 0.0], [0.0, 2.0]])  # lengths do not matter: cosines
    references = np.array([[0.8, 0.6], [1.0, 0.0]])
    scores, best = recognition_scores(generated, references)
    assert scores == pytest.approx([1.0, 0.6]) and best.tolist() == [1, 0]
    assert recognised(np.array([0.7, 0.7000001, 0.69])).tolist() == [False, True, False]


def _patches(rng, n=16, d=64):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("copied, expected", [(16, 1.0), (8, 0.5), (4, 0.25), (0, 0.0)])
def test_visual_reuse_reproduces_the_synthetic_study(copied, expected):
    """Table 2's design with hand-made patches: exact copy, 50%, 25% (moved around), unrelated."""
    rng = np.random.default_rng(copied)
    reference = _patches(rng)
    generated = _patches(rng)
    positions = rng.permutation(16)[:copied]
    generated[positions] = reference[rng.permutation(16)[:copied]]  # copied patches, anywhere in the grid
    similarity, _ = patch_similarity(generated[None], reference[None])
    assert visual_reuse(similarity) == expected


def test_patch_search_pools_every_reference_and_reports_the_match():
    rng = np.random.default_rng(0)
    first, second = _patches(rng), _patches(rng)
    generated = _patches(rng)
    generated[3] = second[9]
    similarity, match = patch_similarity(generated[None], np.stack([first, second]))
    assert similarity[0, 3] == pytest.approx(1.0) and divmod(int(match[0, 3]), 16) == (1, 9)
    brute = (generated @ np.concatenate([first, second]).T).max(axis=1)
    assert similarity[0] == pytest.approx(brute, abs=1e-6)


def test_visual_reuse_threshold_is_strict_and_undefined_without_recognised_images():
    assert visual_reuse(np.array([[0.6, 0.61, 0.2, 0.9]])) == 0.5
    assert visual_reuse(np.empty((0, 16))) is None


def test_crt_is_cra_times_one_minus_vr():
    assert crt(0.8, 0.25) == pytest.approx(0.6)
    assert crt(0.0, None) == 0.0 and crt(1.0, 1.0) == 0.0


def test_table_1_crt_is_eq_3_on_the_column_means():
    aggregates = [{"metric": "cra_reference", "slice": "kind", "slice_value": "still", "value": 0.572, "n": 374},
                  {"metric": "vr", "slice": "kind", "slice_value": "still", "value": 0.254, "n": 214}]
    (row,) = Transformation().derived(aggregates, None)
    assert row["metric"] == "crt_from_means" and row["value"] == pytest.approx(0.426, abs=0.0015)  # SDXL, Table 1


def test_coverage_counts_reference_depictions_matched():
    references = np.eye(3)
    # depiction 1 matched (cos 1), depiction 2 matched (cos .99), depiction 3 at best cos .6: not matched
    generated = np.array([[1.0, 0.0, 0.0], [0.0, 0.99, 0.14], [0.8, 0.0, 0.6]])
    assert coverage(generated, references) == pytest.approx(2 / 3)


def test_pruning_drops_the_image_unlike_the_rest():
    base = np.array([1.0, 0.0, 0.0])
    similar = [base + [0, 0.1 * i, 0.05 * i] for i in range(5)]  # cosines to each other about .99
    images = np.array(similar + [[0.0, 0.0, 1.0]])
    # each similar image: mean to the rest about (4 x .99 + ~.1) / 5 > .7; the outlier: about .2 < .7
    assert prune_references(images).tolist() == [True] * 5 + [False]
    assert prune_references(images[4:]).tolist() == [True, True]  # too few to judge


def test_vr_at_k_uses_only_references_every_model_recognised():
    rows = pd.DataFrame({"model": ["A", "A", "A", "B", "B", "B"], "prompt_id": ["r1", "r2", "r3"] * 2,
                         "vr": [0.1, 0.2, 0.3, None, 0.4, 0.6]})
    table = vr_at_k(rows).set_index("model")
    assert table.loc["A", "vr_at_k"] == pytest.approx(0.25) and table.loc["B", "vr_at_k"] == pytest.approx(0.5)
    assert (table["k"] == 2).all()


def test_perturbation_deltas_by_hand():
    before = pd.DataFrame({"prompt_id": ["a", "b", "c"], "cra": [1.0, 0.5, 0.8], "crt": [0.6, 0.4, 0.5]})
    after = pd.DataFrame({"prompt_id": ["a", "b", "c"], "cra": [0.5, 0.0, 0.8], "crt": [0.4, 0.0, 0.2]})
    result = perturbation_deltas(before, after)
    assert result["delta_cra"] == pytest.approx((-0.5 - 0.5 + 0.0) / 3)
    assert result["references_recognised_after"] == 2  # b is not recognised after: no delta-CRT for it
    assert result["delta_crt"] == pytest.approx((-0.2 - 0.3) / 2)
    low, high = result["delta_cra_ci"]
    assert low <= result["delta_cra"] <= high


def test_reuse_picture_outlines_the_reused_patches():
    generated = Image.new("RGB", (64, 64), (0, 0, 255))
    reference = Image.new("RGB", (128, 128), (0, 255, 0))
    picture = reuse_picture(generated, reference, reused=[5], matched=[0], height=128)
    assert picture.size == (128 + 8 + 128, 128)
    # patch 5 = row 1, column 1 of the generated image: its top-left corner is outlined, patch 0's is not
    assert picture.getpixel((33, 33)) == REUSED and picture.getpixel((1, 1)) != REUSED
    assert picture.getpixel((128 + 8 + 1, 1)) == REUSED  # matched patch 0 of the reference
    assert picture.getpixel((100, 100)) == (0, 0, 255)

"""Iconicity (arXiv:2511.11435): every formula on hand-made embeddings with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from benchmark.metrics import iconicity
from benchmark.metrics.base import Inputs, Need
from benchmark.metrics.iconicity import (VARIANTS, Transformation, coverage, crt, patch_similarity,
                                         perturbation_deltas, protocol, recognised,
                                         recognition_scores, visual_reuse, vr_at_k)
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


def test_vr_at_k_uses_only_references_every_model_recognised():
    rows = pd.DataFrame({"model": ["A", "A", "A", "B", "B", "B"], "prompt_id": ["r1", "r2", "r3"] * 2,
                         "vr": [0.1, 0.2, 0.3, None, 0.4, 0.6]})
    table = vr_at_k(rows).set_index("model")
    assert table.loc["A", "vr_at_k"] == pytest.approx(0.25) and table.loc["B", "vr_at_k"] == pytest.approx(0.5)
    assert (table["k"] == 2).all()


def test_perturbation_deltas_by_hand():
    ids = ["a", "b", "c", "d", "e"]
    before = pd.DataFrame({"prompt_id": ids, "cra": [1.0, 0.5, 0.8, 0.6, 0.9], "crt": [0.6, 0.4, 0.5, 0.3, 0.7]})
    after = pd.DataFrame({"prompt_id": ids, "cra": [0.5, 0.0, 0.8, 0.6, 0.4], "crt": [0.4, 0.0, 0.2, 0.3, 0.1]})
    result = perturbation_deltas(before, after)
    assert result["delta_cra"] == pytest.approx((-0.5 - 0.5 + 0.0 + 0.0 - 0.5) / 5)
    assert result["references_recognised_after"] == 4  # b is not recognised after: no delta-CRT for it
    assert result["delta_crt"] == pytest.approx((-0.2 - 0.3 + 0.0 - 0.6) / 4)
    low, high = result["delta_cra_ci"]
    assert low < result["delta_cra"] < high


def test_reuse_picture_outlines_the_reused_patches():
    generated = Image.new("RGB", (64, 64), (0, 0, 255))
    reference = Image.new("RGB", (128, 128), (0, 255, 0))
    picture = reuse_picture(generated, reference, reused=[5], matched=[0], height=128)
    assert picture.size == (128 + 8 + 128, 128)
    # patch 5 = row 1, column 1 of the generated image: its top-left corner is outlined, patch 0's is not
    assert picture.getpixel((33, 33)) == REUSED and picture.getpixel((1, 1)) != REUSED
    assert picture.getpixel((128 + 8 + 1, 1)) == REUSED  # matched patch 0 of the reference
    assert picture.getpixel((100, 100)) == (0, 0, 255)


# --- the paper's protocol and the authors' code's (iconicity.VARIANTS) ---------------------------------------
def test_a_score_equal_to_tau_is_recognised_under_the_authors_comparison_only():
    assert recognised(np.array([0.75]), 0.75, ">").tolist() == [False]  # Eq. 1: s > tau
    assert recognised(np.array([0.75]), 0.75, ">=").tolist() == [True]  # compute_CRA.py: cra_sim >= ic_tau
    assert recognised(np.array([0.7, 0.69]), 0.7, ">=").tolist() == [True, False]
    with pytest.raises(ValueError, match="comparison must be one of"):
        recognised(np.array([0.7]), 0.7, "=>")


def test_a_moving_reference_at_0_72_is_recognised_under_the_paper_not_under_the_authors_code():
    paper, authors = protocol("paper"), protocol("authors_code")
    assert (paper.threshold("moving"), paper.threshold("still"), paper.comparison) == (0.7, 0.7, ">")
    assert (authors.threshold("moving"), authors.threshold("still"), authors.comparison) == (0.75, 0.70, ">=")
    s = np.array([0.72])
    assert recognised(s, paper.threshold("moving"), paper.comparison).tolist() == [True]
    assert recognised(s, authors.threshold("moving"), authors.comparison).tolist() == [False]
    assert recognised(s, authors.threshold("still"), authors.comparison).tolist() == [True]


def test_explicit_settings_override_the_variant():
    assert protocol("authors_code", tau=0.8).threshold("moving") == 0.8  # tau alone sets both kinds
    chosen = protocol("authors_code", tau=0.8, tau_moving=0.9, comparison=">", dino="dinov3-vitb16")
    assert (chosen.tau, chosen.tau_moving, chosen.comparison, chosen.dino, chosen.clip) == (
        0.8, 0.9, ">", "dinov3-vitb16", "clip-vit-b-16")
    with pytest.raises(ValueError, match="variant must be one of paper, authors_code"):
        protocol("code")


def _inputs(kind: str, cosine: float) -> Inputs:
    """One generated image at cosine ``cosine`` to a reference of this kind; grid patches identical (VR = 1)."""
    images = pd.DataFrame({"prompt_id": ["r1"], "seed": [0], "kind": [kind]})
    patches = np.eye(16, 16)[None]
    features, references = {}, {}
    for settings in VARIANTS.values():
        features[Need(settings.clip, "image")] = np.array([[cosine, np.sqrt(1 - cosine ** 2)]])
        references[Need(settings.clip, "image", of="reference")] = {"r1": np.array([[1.0, 0.0]])}
        features[Need(settings.dino, "grid", 4)] = patches
        references[Need(settings.dino, "grid", 4, of="reference")] = {"r1": patches}
    return Inputs(images, features, {}, references, pd.Series({"r1": 1}))


@pytest.mark.parametrize("variant, kind, expected", [("paper", "moving", 1.0), ("authors_code", "moving", 0.0),
                                                     ("authors_code", "still", 1.0)])
def test_the_threshold_of_the_reference_kind_decides_recognition(variant, kind, expected):
    inputs = _inputs(kind, 0.72)
    metrics = {m.info.name: m for m in iconicity.metrics(protocol(variant))}
    values, _ = metrics["cra_image"].per_image(inputs)
    assert values.tolist() == [expected]
    vr = metrics["vr"].per_prompt(inputs)["value"].tolist()
    assert vr == [1.0] if expected else np.isnan(vr[0])  # VR only over recognised images: identical patches


def test_results_record_the_variant_and_its_thresholds():
    paper = {m.info.name: m.info for m in iconicity.metrics()}
    authors = {m.info.name: m.info for m in iconicity.metrics(protocol("authors_code"))}
    assert paper["crt"].version == "2 (paper: recognised s > 0.7 still, 0.7 moving; reused > 0.6); images tensor-1"
    assert authors["crt"].version == \
        "2 (authors_code: recognised s >= 0.7 still, 0.75 moving; reused > 0.6); images tensor-1"
    assert authors["crt"].label == paper["crt"].label + " (authors' code)"
    assert {n.backbone for n in authors["vr"].needs} == {"clip-vit-b-16", "dinov2-base-mean-floor"}
    assert {n.backbone for n in paper["vr"].needs} == {"clip-vit-b-32", "dinov2-base"}
    aggregates = [{"metric": "cra_reference", "slice": "overall", "slice_value": "all", "value": 0.5, "n": 2},
                  {"metric": "vr", "slice": "overall", "slice_value": "all", "value": 0.5, "n": 1}]
    (row,) = Transformation(protocol("authors_code")).derived(aggregates, None)
    assert row["metric_version"] == authors["crt"].version and row["metric_label"].endswith("(authors' code)")


def test_metric_settings_choose_the_variant_and_keep_explicit_choices():
    from benchmark.tracks import build, metric_settings

    def crt(settings):
        built, _ = build(settings, tracks=["iconicity"])
        return next(m for m in built if m.info.name == "crt").settings

    assert crt(metric_settings()) == VARIANTS["paper"]
    assert crt(metric_settings(clip_backbone="clip-vit-l-14")).clip == "clip-vit-l-14"  # paper: CRA follows --clip
    assert crt(metric_settings(crt_variant="authors_code", clip_backbone="clip-vit-l-14")) == VARIANTS["authors_code"]
    chosen = crt(metric_settings(crt_variant="authors_code", vr_backbone="dinov2-base", crt_comparison=">"))
    assert (chosen.dino, chosen.comparison, chosen.tau_moving) == ("dinov2-base", ">", 0.75)


# --- the patch search on every device ------------------------------------------------------------------------------
def _search_inputs(seed: int = 0):
    """Unit patches with what trips searches: a reference repeated (exact ties), patches copied from it, and
    pairs of pool patches a float32 rounding apart."""
    rng = np.random.default_rng(seed)
    references = rng.normal(size=(12, 16, 96)).astype(np.float32)
    references[5] = references[2]  # the same reference image twice: every match of it is a tie
    references[7, 3] = references[7, 4] + np.float32(1e-7)  # two pool patches within float32 rounding
    generated = rng.normal(size=(40, 16, 96)).astype(np.float32)
    generated[3, :8] = references[5, 8:]  # copies of the repeated reference: ties, the lowest position wins
    generated[4, 0] = references[7, 4]
    return generated, references


def test_patch_search_gives_the_exact_best_and_the_lowest_position_on_a_tie():
    generated, references = _search_inputs()
    similarity, match = patch_similarity(generated, references, device="cpu")
    queries = iconicity._unit(generated).reshape(-1, 96).astype(np.float64)
    pool = iconicity._unit(references).reshape(-1, 96).astype(np.float64)
    exact = queries @ pool.T
    assert np.abs(similarity.ravel() - exact.max(axis=1)).max() < 3e-8
    assert np.array_equal(match.ravel(), exact.argmax(axis=1))  # numpy's argmax: the first of equal maxima
    assert match[3, :8].tolist() == [2 * 16 + k for k in range(8, 16)]  # reference 3 of 12, not its copy (6)
    assert divmod(int(match[4, 0]), 16) in {(7, 3), (7, 4)}


def test_patch_search_is_the_same_bit_for_bit_on_the_cpu_and_through_torch():
    """``_best_on_gpu`` run on CPU tensors takes the GPU path's every step (chunked products, candidates,
    integer cosines); with CUDA present it also runs on the GPU. All must agree exactly with faiss's path."""
    import torch

    generated, references = _search_inputs(1)
    queries = np.ascontiguousarray(iconicity._unit(generated).reshape(-1, 96))
    pool = np.ascontiguousarray(iconicity._unit(references).reshape(-1, 96))
    on_cpu = iconicity._best_on_cpu(queries, pool)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        through_torch = iconicity._best_on_gpu(queries, pool, device)
        assert np.array_equal(on_cpu[0], through_torch[0]) and np.array_equal(on_cpu[1], through_torch[1]), device


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_patch_search_keeps_non_finite_patches_out():
    generated, references = _search_inputs()
    generated[0, 2, 5] = np.nan
    similarity, match = patch_similarity(generated, references, device="cpu")
    assert np.isnan(similarity[0, 2]) and match[0, 2] == -1 and np.isfinite(similarity[0, [0, 1, 3]]).all()
    references[1, 1, 1] = np.inf
    similarity, match = patch_similarity(generated, references, device="cpu")
    assert np.isnan(similarity).all() and (match == -1).all()

"""W1KP (arXiv:2406.08482): every formula on inputs with known answers, the real calibration file, the
metric through the harness, and the calibrate verb."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickletools
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import harness
from benchmark.scoring_options import ScoringOptions
from benchmark.aggregate import aggregate_curves
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts
from benchmark.encoders import load_backbone
from benchmark.tracks import build, metric_settings
from benchmark.metrics.base import Inputs, Need
from benchmark.metrics.variability import (W1KP, Calibration, eta_k_curve, eta_k_curve_authors_code, eta_k_exact,
                                           eta_mean, eta_mean_authors_code, level, pairwise_squared_l2, reusability,
                                           supported)
from benchmark.submission import stage
from tests.helpers import SHARED_DATA, culturelens_here, tiny_cube
from culturelens.testing.submissions import make_submission, write_image

W1KP_FILE = SHARED_DATA / "w1kp" / "cdf_xy.npz"
W1KP_PT = SHARED_DATA / "w1kp" / "cdf-xy.pt"  # the authors' torch.save((cdf_x, cdf_y)), as published


def _matrix(pairs: dict[tuple[int, int], float], n: int) -> np.ndarray:
    d = np.zeros((n, n))
    for (i, j), value in pairs.items():
        d[i, j] = d[j, i] = value
    return d


IDENTITY = Calibration(np.array([0.0, 1.0]), np.array([0.0, 1.0]))


def test_pairwise_squared_l2_of_hand_made_vectors():
    d = pairwise_squared_l2(np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    assert d == pytest.approx(np.array([[0, 25, 1], [25, 0, 18], [1, 18, 0]]))


def test_calibration_round_trip_on_the_authors_file():
    if not W1KP_FILE.exists():
        pytest.skip(f"W1KP calibration not found at {W1KP_FILE} (see ../shared/data/README.md)")
    calibration = Calibration.load(W1KP_FILE)
    x, y = calibration.cdf_x, calibration.cdf_y
    assert len(x) == 2663
    # A CDF at a tied x is P(X <= x): the last y of the tie (the file has one tie, at index 280-281).
    last_of_tie = np.append(np.diff(x) > 0, True)
    assert np.count_nonzero(~last_of_tie) == 1
    assert calibration.normalize(x[last_of_tie]) == pytest.approx(y[last_of_tie])
    midpoint = (calibration.cdf_x[100] + calibration.cdf_x[101]) / 2
    assert calibration.normalize(midpoint) == pytest.approx((calibration.cdf_y[100] + calibration.cdf_y[101]) / 2)
    assert calibration.normalize(0.0) == 0.0 and calibration.normalize(5.0) == pytest.approx(calibration.cdf_y[-1])


def test_a_bad_calibration_file_is_a_clear_error(tmp_path):
    np.savez(tmp_path / "bad.npz", cdf_x=np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="lacks the arrays \\['cdf_y'\\]"):
        Calibration.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "down.npz", cdf_x=np.array([0.0, 1.0]), cdf_y=np.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="non-decreasing"):
        Calibration.load(tmp_path / "down.npz")
    with pytest.raises(ValueError, match="cannot be read"):
        Calibration.load(tmp_path / "absent.npz")


def test_fitted_calibration_is_the_empirical_cdf():
    fitted = Calibration.fit(np.array([1.0, 2.0, 2.0, 3.0]))
    assert fitted.cdf_x.tolist() == [1.0, 2.0, 3.0] and fitted.cdf_y.tolist() == [0.25, 0.75, 1.0]
    assert fitted.normalize(2.5) == pytest.approx(0.875)


def test_eta_mean_and_the_w1kp_score_by_hand():
    d = _matrix({(0, 1): 0.2, (0, 2): 0.4, (1, 2): 0.6}, 3)
    assert eta_mean(d) == pytest.approx(0.4)
    assert level(1 - eta_mean(d)) == "medium"


def test_the_authors_published_pt_loads_and_equals_the_npz():
    if not (W1KP_PT.exists() and W1KP_FILE.exists()):
        pytest.skip(f"the authors' calibration not found at {W1KP_PT} and {W1KP_FILE} (see ../shared/data/README.md)")
    published, converted = Calibration.load(W1KP_PT), Calibration.load(W1KP_FILE)
    assert published.cdf_x.dtype == converted.cdf_x.dtype == np.float64
    assert np.array_equal(published.cdf_x, converted.cdf_x) and np.array_equal(published.cdf_y, converted.cdf_y)
    assert published.sha256 == hashlib.sha256(W1KP_PT.read_bytes()).hexdigest()
    assert published.backbone is converted.backbone is None and published.fitted_for == "dreamsim"
    version = W1KP(published).info.version
    assert version == f"2 (paper; calibration sha256 {published.sha256} for dreamsim, assumed: the file records " \
        "no backbone); images tensor-1"


def test_a_pt_written_by_torch_save_under_numpy_2_loads(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save((np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.5, 1.0])), tmp_path / "cdf.pt")
    calibration = Calibration.load(tmp_path / "cdf.pt")
    assert calibration.cdf_x.tolist() == [0.0, 1.0, 2.0] and calibration.normalize(1.5) == pytest.approx(0.75)


def _data_pkl(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))


def test_a_pt_whose_pickle_would_run_code_is_refused_without_running_it(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    torch.save((Payload(), np.array([0.0, 1.0])), tmp_path / "reduce.pt")
    globals_named = [arg for op, arg, _ in pickletools.genops(_data_pkl(tmp_path / "reduce.pt")) if op.name == "GLOBAL"]
    assert f"{os.system.__module__} system" in globals_named  # the payload is in the pickle
    with pytest.raises(ValueError, match=f"refused to unpickle the global {os.system.__module__}.system"):
        Calibration.load(tmp_path / "reduce.pt")
    assert not marker.exists()
    # A hand-made archive whose data.pkl is the classic GLOBAL os.system, REDUCE.
    with zipfile.ZipFile(tmp_path / "global.pt", "w") as archive:
        archive.writestr("global/data.pkl", b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    with pytest.raises(ValueError, match="refused to unpickle the global os.system"):
        Calibration.load(tmp_path / "global.pt")
    assert not marker.exists()


def test_a_pt_of_anything_but_two_numpy_arrays_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save((torch.zeros(2), torch.ones(2)), tmp_path / "tensors.pt")
    with pytest.raises(ValueError, match="refused to unpickle the global torch._utils._rebuild_tensor_v2"):
        Calibration.load(tmp_path / "tensors.pt")
    torch.save((np.zeros(2), np.ones(2), np.ones(2)), tmp_path / "three.pt")
    with pytest.raises(ValueError, match="holds a tuple of 3 items, not the tuple \\(cdf_x, cdf_y\\) of two numpy"):
        Calibration.load(tmp_path / "three.pt")


def test_authors_code_mean_drops_pairs_within_1e_4_and_normalises_the_mean():
    calibration = Calibration(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.9, 1.0]))
    raw = _matrix({(0, 1): 1e-4, (0, 2): 0.4, (0, 3): 0.8, (1, 2): 0.6, (1, 3): 1.0, (2, 3): 1.2}, 4)
    # castorini/w1kp: mean of d > 1e-4 = (.4 + .8 + .6 + 1.0 + 1.2) / 5 = .8, then F(.8) = .9 * .8
    assert eta_mean_authors_code(raw, calibration) == pytest.approx(0.72)
    # the paper: mean of F(d) over all six pairs
    assert eta_mean(calibration.normalize(raw)) == pytest.approx((0.9e-4 + .36 + .72 + .54 + .9 + .92) / 6)
    # identical images: no pair exceeds 1e-4, the mean of all pairs (0) is taken
    assert eta_mean_authors_code(np.zeros((3, 3)), calibration) == 0.0


def test_authors_code_curve_normalises_the_expected_minimum():
    calibration = Calibration(np.array([0.0, 0.15, 1.0]), np.array([0.0, 0.6, 1.0]))
    raw = _matrix({(0, 1): .1, (0, 2): .5, (0, 3): .9, (1, 2): .3, (1, 3): .7, (2, 3): .2}, 4)
    # E[min d]: k=2 the mean 2.7 / 6 = .45; k=3 (.1 + .1 + .2 + .2) / 4 = .15; k=4 .1 (as in test_eta_k_exact_by_hand)
    curve = eta_k_curve_authors_code(raw, calibration)
    assert curve.eta == pytest.approx([0.6 + (0.45 - 0.15) / 0.85 * 0.4, 0.6, 0.4])
    assert curve.exact.all() and not curve.standard_error.any()
    # the paper's E[min F(d)] at k = 3 differs: F(.1) = .4, F(.2) = .6 + .05 / .85 * .4
    f_of_02 = 0.6 + 0.05 / 0.85 * 0.4
    assert eta_k_curve(calibration.normalize(raw)).eta[1] == pytest.approx((0.4 + 0.4 + 2 * f_of_02) / 4)


def test_authors_code_curve_error_through_a_linear_calibration():
    rng = np.random.default_rng(5)
    raw = pairwise_squared_l2(rng.normal(size=(12, 3)))
    assert raw.max() < 100
    linear = Calibration(np.array([0.0, 100.0]), np.array([0.0, 1.0]))  # F(d) = d / 100 on the whole range
    curve = eta_k_curve_authors_code(raw, linear, exact_limit=0, n_permutations=200)
    plain = eta_k_curve(raw, exact_limit=0, n_permutations=200)
    assert curve.eta == pytest.approx(plain.eta / 100)
    assert curve.standard_error == pytest.approx(plain.standard_error / 100)
    assert not curve.exact[1:-1].any()


def test_authors_code_calibration_fit_pads_with_0_and_1():
    fitted = Calibration.fit_authors_code(np.array([0.5, 0.2, 2.0]))
    # castorini/w1kp compute_cdf: sort [0, .5, .2, 2.0, 1] -> [0, .2, .5, 1, 2], y = i / (3 + 2)
    assert fitted.cdf_x.tolist() == [0.0, 0.2, 0.5, 1.0, 2.0]
    assert fitted.cdf_y.tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert fitted.normalize(0.35) == pytest.approx(0.3) and fitted.normalize(3.0) == pytest.approx(0.8)


def test_eta_k_exact_by_hand():
    d = _matrix({(0, 1): .1, (0, 2): .5, (0, 3): .9, (1, 2): .3, (1, 3): .7, (2, 3): .2}, 4)
    # 3-subsets: {0,1,2} .1, {0,1,3} .1, {0,2,3} .2, {1,2,3} .2
    assert eta_k_exact(d, 3) == pytest.approx(0.15)
    assert eta_k_exact(d, 2) == pytest.approx(eta_mean(d)) and eta_k_exact(d, 4) == pytest.approx(0.1)
    curve = eta_k_curve(d)
    assert curve.k.tolist() == [2, 3, 4] and curve.eta == pytest.approx([eta_mean(d), 0.15, 0.1])
    assert curve.exact.all() and not curve.standard_error.any()


def test_the_estimator_agrees_with_enumeration_within_its_error():
    rng = np.random.default_rng(3)
    d = Calibration.fit(np.arange(1000) / 1000).normalize(pairwise_squared_l2(rng.normal(size=(14, 6))) / 40)
    estimated = eta_k_curve(d, n_permutations=2000, exact_limit=0)
    for index, k in enumerate(estimated.k):
        if 2 < k < 14:
            assert not estimated.exact[index]
            assert abs(estimated.eta[index] - eta_k_exact(d, int(k))) <= 4 * estimated.standard_error[index] + 1e-12


def test_identical_images_are_highly_similar():
    d = pairwise_squared_l2(np.ones((5, 8)))
    assert 1 - eta_mean(IDENTITY.normalize(d)) == 1.0 and level(1.0) == "high"
    assert reusability(*_curve_scores(d)) == 2


def _curve_scores(d):
    curve = eta_k_curve(IDENTITY.normalize(d))
    return curve.k, 1 - curve.eta


def test_levels_and_reusability_at_their_thresholds():
    assert [level(s) for s in (1.0, 0.85, 0.8499, 0.4, 0.3999, 0.2, 0.1999, 0.0)] == \
        ["high", "high", "medium", "medium", "low", "low", "none", "none"]
    assert reusability(np.array([2, 3, 4]), np.array([0.5, 0.85, 0.9])) == 3
    assert reusability(np.array([2, 3]), np.array([0.5, 0.84])) is None


def test_only_k_that_enough_prompts_reach_count_for_reusability():
    # n = prompts with at least k images; a k counts where n >= max(2, half of n at k = 2)
    assert supported(np.array([21] * 9 + [1] * 30)).tolist() == [True] * 9 + [False] * 30  # needs 10.5: 11
    assert supported(np.array([6, 3, 2])).tolist() == [True, True, False]  # half of 6: 3
    assert supported(np.array([2, 2, 1])).tolist() == [True, True, False]  # at least two prompts
    assert supported(np.array([1, 1])).tolist() == [False, False]  # one prompt decides nothing


def _prompt_curves(value_at) -> pd.DataFrame:
    """The issue's submission: 20 prompts with 10 seeds (k = 2..10) and one with 40 (k = 2..40), each prompt's
    W1KP_k given by ``value_at(prompt, k)``."""
    prompts = [(f"p{i}", 10) for i in range(20)] + [("long", 40)]
    return pd.DataFrame([{"metric": "w1kp", "prompt_id": p, "x": k, "value": value_at(p, k)}
                         for p, seeds in prompts for k in range(2, seeds + 1)])


def test_reusability_is_not_decided_by_the_one_prompt_with_extra_seeds():
    """Every prompt's W1KP_k is 0.5 up to k = 10; the 40-seed prompt's is 0.9 from k = 11. The model curve is
    0.5 over 21 prompts for k = 2..10, then 0.9 over that single prompt: k = 11 used to be the reusability."""
    model_curve = aggregate_curves(_prompt_curves(lambda p, k: 0.9 if k >= 11 else 0.5))
    by_k = model_curve.set_index("x")
    assert by_k.loc[[2, 10, 11, 40], "n"].tolist() == [21, 21, 1, 1]
    assert by_k.loc[[10, 11], "value"].tolist() == pytest.approx([0.5, 0.9])
    assert reusability(model_curve["x"].to_numpy(), model_curve["value"].to_numpy()) == 11  # the whole curve
    metric = W1KP(dataclasses.replace(IDENTITY, backbone="x"), backbone="x")
    [row] = metric.derived([], model_curve)
    assert row["metric"] == "w1kp_reusability" and row["value"] is None and row["n"] == 21
    assert row["ci_low"] == 10.0 and row["ci_high"] is None  # censored: more than 10, the largest k counted
    assert row["metric_label"] == ("W1KP reusability: seeds until W1KP_k >= 0.85, over the k that at least 11 of "
                                   "the 21 prompts reach (> 10 where no k up to 10 reaches it)")
    # Where all 21 prompts reach 0.9 at k = 6 (mean 0.9 over 21), reusability is 6.
    [row] = metric.derived([], aggregate_curves(_prompt_curves(lambda p, k: 0.9 if k >= 6 else 0.5)))
    assert row["value"] == 6.0


def test_w1kp_metric_on_hand_made_features():
    """Two prompts: one with identical images (score 1), one with spread images (known score)."""
    features = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    images = pd.DataFrame({"prompt_id": ["a", "a", "a", "b", "b", "b"], "seed": [0, 1, 2, 0, 1, 2]})
    calibration = Calibration(np.array([0.0, 4.0]), np.array([0.0, 1.0]), backbone="x")  # F(d) = d / 4 on [0, 4]
    metric = W1KP(calibration, backbone="x")
    inputs = Inputs(images, {Need("x", "image"): features}, {})
    rows = metric.per_prompt(inputs).set_index("prompt_id")
    assert rows.loc["a", "value"] == 1.0 and "high similarity" in rows.loc["a", "note"]
    # prompt b: squared distances 1, 1, 0.8 -> normalised .25, .25, .2 -> eta .2333 -> score .7667
    assert rows.loc["b", "value"] == pytest.approx(1 - (0.25 + 0.25 + 0.2) / 3)
    curves = metric.curves(inputs)
    b = curves[curves.prompt_id == "b"].set_index("x")["value"]
    assert b.loc[3] == pytest.approx(1 - 0.2)  # k = n: the closest pair
    derived = metric.derived([], aggregate_curves(curves.assign(metric="w1kp")))
    assert derived[0]["metric"] == "w1kp_reusability" and derived[0]["value"] == 2.0  # mean W1KP_2 = .88 >= .85
    single = Inputs(images.head(1), {Need("x", "image"): features[:1]}, {})
    assert "at least two images" in metric.applies(single)


def test_the_authors_code_variant_through_the_metric():
    """Prompt a: identical images; prompt b: squared distances 1, 1, .8. F has a knot at .9, between them."""
    features = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    images = pd.DataFrame({"prompt_id": ["a", "a", "a", "b", "b", "b"], "seed": [0, 1, 2, 0, 1, 2]})
    calibration = Calibration(np.array([0.0, 0.8, 0.9, 4.0]), np.array([0.0, 0.2, 0.8, 1.0]), backbone="x")

    def f(d):  # the calibration by hand, on [0.9, 4]
        return 0.8 + (d - 0.9) / 3.1 * 0.2

    metric = W1KP(calibration, backbone="x", variant="authors_code")
    assert metric.info.name == "w1kp_authors_code"
    assert metric.info.version == "3 (authors_code; calibration for x); images tensor-1"
    inputs = Inputs(images, {Need("x", "image"): features}, {})
    rows = metric.per_prompt(inputs).set_index("prompt_id")
    assert rows.loc["a", "value"] == 1.0
    assert rows.loc["b", "value"] == pytest.approx(1 - f(2.8 / 3))  # F(mean d); the paper: 1 - (2 f(1) + .2) / 3
    curves = metric.curves(inputs)
    b = curves[curves.prompt_id == "b"].set_index("x")["value"]
    assert b.loc[2] == pytest.approx(1 - f(2.8 / 3)) and b.loc[3] == pytest.approx(1 - 0.2)  # 1 - F(E[min d])
    derived = metric.derived([], aggregate_curves(curves.assign(metric="w1kp_authors_code")))
    # model curve: k=2 (1 + 1 - f(.9333)) / 2 = .599 < .85; k=3 (1 + .8) / 2 = .9
    assert derived[0]["metric"] == "w1kp_reusability_authors_code" and derived[0]["value"] == 3.0
    assert derived[0]["metric_version"] == "3 (authors_code; calibration for x); images tensor-1"


@pytest.fixture(scope="module")
def sample(tmp_path_factory, tiny_upstream):
    root = tmp_path_factory.mktemp("w1kp")
    tiny_cube(root / "datasets", tiny_upstream)
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=root / "datasets").table.index)
    folder = make_submission(root / "sample", ids, seeds=(0, 1, 2, 3))
    for seed in (1, 2, 3):  # the first prompt's seeds are all the same picture
        write_image(folder / "images" / ids[0] / f"{seed}.png", seed=0)
    return root, folder, ids


def test_w1kp_through_the_harness_with_a_fitted_calibration(sample, tiny_dino, tmp_path):
    root, folder, ids = sample
    backbones_json = tmp_path / "backbones.json"
    backbones_json.write_text('{"dinov2-base": %s}' % __import__("json").dumps(tiny_dino.to_dict()))
    out = tmp_path / "cdf.npz"
    fitted = culturelens_here("calibrate", folder, "--backbone", "dinov2-base", "--out", out, "--store", root,
                              "--backbones", backbones_json, "--device", "cpu")
    assert fitted.returncode == 0 and "fitted (empirical CDF) on 36 same-prompt pairs of 6 prompts" in fitted.stdout
    calibration = Calibration.load(out)
    backbone = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    assert calibration.backbone == "dinov2-base" and calibration.backbone_key == backbone.key
    padded_fit = culturelens_here("calibrate", folder, "--backbone", "dinov2-base", "--out", tmp_path / "a.npz",
                                  "--cdf", "authors_code", "--store", root, "--backbones", backbones_json, "--device",
                                  "cpu")
    padded = Calibration.load(tmp_path / "a.npz")  # 36 distances padded with 0 and 1, at i / 38
    assert padded_fit.returncode == 0
    assert padded.cdf_y.tolist() == pytest.approx(np.arange(38) / 38) and padded.cdf_x[0] == 0.0
    assert 1.0 in padded.cdf_x and set(calibration.cdf_x) <= set(padded.cdf_x)

    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=root / "datasets")

    report = stage(folder, tmp_path / "staging", loader)
    staged = report.keep(tmp_path / "staged")
    images = pq.read_table(staged / "images.parquet").to_pandas()
    scores = harness.score(staged, report.manifest, report.prompts, images, [W1KP(calibration, "dinov2-base")],
                           {"dinov2-base": backbone}, submission_id="t", options=ScoringOptions(batch_size=8))
    rows = scores.per_image[scores.per_image.metric == "w1kp"].set_index("prompt_id")
    assert len(rows) == 6 and rows["seed"].isna().all()
    assert rows.loc[ids[0], "value"] == pytest.approx(1 - calibration.normalize(0.0))  # identical seeds
    # Independent check of one prompt: DINO features by hand, distances, calibration, mean.
    other = ids[1]
    paths = sorted((folder / "images" / other).iterdir())  # the upload's files
    from PIL import Image

    feats = backbone.embed(__import__("torch").stack([backbone.prepare(Image.open(p).convert("RGB"), "image")
                                                       for p in paths]))
    expected = 1 - eta_mean(calibration.normalize(pairwise_squared_l2(feats)))
    assert rows.loc[other, "value"] == pytest.approx(expected, abs=1e-6)
    model_curve = scores.curves[scores.curves.prompt_id.isna()]
    assert model_curve["x"].tolist() == [2.0, 3.0, 4.0] and model_curve["n"].tolist() == [6, 6, 6]
    overall = [r for r in scores.aggregates if r["metric"] == "w1kp" and r["slice"] == "overall"]
    assert overall[0]["value"] == pytest.approx(rows["value"].mean())
    assert any(r["metric"] == "w1kp_reusability" for r in scores.aggregates)
    version = f"2 (paper; calibration sha256 {hashlib.sha256(out.read_bytes()).hexdigest()} for dinov2-base); " \
        "images tensor-1"
    assert scores.run.metrics["w1kp"] == version  # run.json
    assert {r["metric_version"] for r in scores.aggregates if r["metric"].startswith("w1kp")} == {version}


def test_w1kp_is_skipped_with_a_reason_when_each_prompt_has_one_image(sample, tiny_dino, tmp_path):
    root, _, ids = sample
    folder = make_submission(tmp_path / "one", ids, seeds=(0,))

    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=root / "datasets")

    report = stage(folder, tmp_path / "staging", loader)
    staged = report.keep(tmp_path / "staged")
    backbone = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    scores = harness.score(staged, report.manifest, report.prompts, pq.read_table(staged / "images.parquet").to_pandas(),
                           [W1KP(dataclasses.replace(IDENTITY, backbone="dinov2-base"), "dinov2-base")],
                           {"dinov2-base": backbone}, submission_id="t")
    assert "at least two images" in scores.run.skipped["w1kp"] and scores.per_image.empty


def test_the_dreamsim_backbone_needs_its_optional_package():
    from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneUnavailable

    pytest.importorskip("torch")
    try:
        import dreamsim  # noqa: F401
        pytest.skip("dreamsim is installed here; this test checks the message without it")
    except ImportError:
        pass
    with pytest.raises(BackboneUnavailable, match="culturelens\\[dreamsim\\]"):
        load_backbone("dreamsim", DEFAULT_REGISTRY)


def test_the_authors_calibration_is_dreamsims_and_refused_for_another_backbone():
    if not W1KP_FILE.exists():
        pytest.skip(f"W1KP calibration not found at {W1KP_FILE} (see ../shared/data/README.md)")
    built, unavailable = build(metric_settings(w1kp_calibration=str(W1KP_FILE), w1kp_backbone="dinov2-base"),
                               tracks=["variability"])
    assert not [m for m in built if m.info.track == "variability"]
    assert {u.name: u.reason for u in unavailable}["w1kp"] == (
        f"the W1KP calibration {W1KP_FILE} was fitted for backbone 'dreamsim' (the file records no backbone, so it "
        "is taken as the authors' DreamSim_l2 CDF), not for --w1kp-backbone 'dinov2-base': fit one for it with "
        "`culturelens calibrate --backbone dinov2-base`, or score with --w1kp-backbone dreamsim")
    built, unavailable = build(metric_settings(w1kp_calibration=str(W1KP_FILE)), tracks=["variability"])
    [metric] = [m for m in built if m.info.track == "variability"]
    assert metric.need.backbone == "dreamsim" and "w1kp" not in {u.name for u in unavailable}


@pytest.mark.slow
def test_a_calibration_records_its_backbone_and_scoring_refuses_another(sample, tiny_clip, tiny_dino, tmp_path):
    """Calibrate for the tiny CLIP's id: the .npz names it; --w1kp-backbone dinov2-base is refused with both ids
    named; clip-vit-b-32 scores, and the results record the calibration's sha256 and backbone."""
    root, folder, _ = sample
    backbones_json = tmp_path / "backbones.json"
    backbones_json.write_text(__import__("json").dumps({"clip-vit-b-32": tiny_clip.to_dict()}))
    out = tmp_path / "clip.npz"
    code = culturelens_here("calibrate", folder, "--backbone", "clip-vit-b-32", "--out", out, "--store", root,
                            "--backbones", backbones_json, "--device", "cpu").returncode
    clip = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    with np.load(out, allow_pickle=False) as saved:
        assert code == 0 and str(saved["backbone"]) == "clip-vit-b-32" and str(saved["backbone_key"]) == clip.key

    built, unavailable = build(metric_settings(w1kp_calibration=str(out), w1kp_backbone="dinov2-base"),
                               tracks=["variability"])
    assert not [m for m in built if m.info.track == "variability"]
    assert {u.name: u.reason for u in unavailable}["w1kp"] == (
        f"the W1KP calibration {out} was fitted for backbone 'clip-vit-b-32', not for --w1kp-backbone "
        "'dinov2-base': fit one for it with `culturelens calibrate --backbone dinov2-base`, or score with "
        "--w1kp-backbone clip-vit-b-32")

    built, unavailable = build(metric_settings(w1kp_calibration=str(out), w1kp_backbone="clip-vit-b-32"),
                               tracks=["variability"])
    [metric] = [m for m in built if m.info.track == "variability"]
    assert "w1kp" not in {u.name for u in unavailable} and metric.check({"clip-vit-b-32": clip}) is None
    # The same id pointed at other weights (a backbones file mapping it to DINOv2) is refused once loaded.
    other = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_dino}, device="cpu")
    assert metric.check({"clip-vit-b-32": other}) == (
        f"the W1KP calibration {out} was fitted on backbone 'clip-vit-b-32' with weights {clip.key}, but "
        f"'clip-vit-b-32' loads {other.key}: fit it again with `culturelens calibrate`")

    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=root / "datasets")

    report = stage(folder, tmp_path / "staging", loader)
    staged = report.keep(tmp_path / "staged")
    images = pq.read_table(staged / "images.parquet").to_pandas()
    scores = harness.score(staged, report.manifest, report.prompts, images, [metric], {"clip-vit-b-32": clip},
                           submission_id="t", options=ScoringOptions(batch_size=8))
    version = f"2 (paper; calibration sha256 {hashlib.sha256(out.read_bytes()).hexdigest()} for clip-vit-b-32); " \
        "images tensor-1"
    assert scores.run.metrics["w1kp"] == version  # run.json
    assert {r["metric_version"] for r in scores.aggregates if r["metric"].startswith("w1kp")} == {version}
    assert len(scores.per_image[scores.per_image.metric == "w1kp"]) == 6

"""Vendi scores, qVS and CUBE's CD (arXiv:2407.06863, Eq. 1-4): agreement with independent implementations
(singular values of a feature matrix, matrix powers, von Neumann entropy through the matrix logarithm), hand
cases, and the arithmetic that links the paper's Tables 5 and 6."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import linalg, optimize, stats

from benchmark.metrics.vendi import (KERNELS, DrawMean, draw_mean, normalised_cd, normalised_eigenvalues,
                                     quality_weighted_vendi, random_subsets, seed_batches, tag_kernel,
                                     vendi_score)

ORDERS = (0.5, 1.0, 2.0, 3.0, 2.5, math.inf)


# --- independent implementations -----------------------------------------------------------------
def vendi_from_features(X: np.ndarray, q: float) -> float:
    """VS_q from a feature matrix X with K = X X^T: the nonzero eigenvalues of K / N are the squared singular
    values of X / sqrt(N) (no eigendecomposition of K, no clipping)."""
    p = linalg.svdvals(X / math.sqrt(len(X))) ** 2
    p = p[p > 1e-15]
    if q == 1:
        return float(np.exp(stats.entropy(p)))  # scipy's Shannon entropy, natural log
    if math.isinf(q):
        return float(1 / p.max())
    return float(np.sum(p ** q) ** (1 / (1 - q)))


def vendi_from_matrix_functions(K: np.ndarray, q: float) -> float:
    """VS_q through dense matrix functions of rho = K / N (a density matrix): sum lambda^q = trace(rho^q),
    q = 1 via the von Neumann entropy -trace(rho logm rho), q = inf via the spectral norm. Needs full rank."""
    rho = K / len(K)
    if q == 1:
        return float(np.exp(-np.trace(rho @ linalg.logm(rho)).real))
    if math.isinf(q):
        return float(1 / linalg.norm(rho, 2))
    power = np.linalg.matrix_power(rho, int(q)) if float(q).is_integer() else linalg.fractional_matrix_power(rho, q)
    return float(np.trace(power).real ** (1 / (1 - q)))


def tag_features(tags: list[tuple[str, str, str]], weights) -> np.ndarray:
    """X with X X^T = the tag kernel: sqrt(w_level) x one-hot of each level's label."""
    blocks = []
    for level, weight in enumerate(weights):
        labels = sorted({t[level] for t in tags})
        onehot = np.array([[t[level] == label for label in labels] for t in tags], dtype=float)
        blocks.append(math.sqrt(weight) * onehot)
    return np.hstack(blocks)


def random_unit_features(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    X = rng.normal(size=(n, d)) + rng.normal(size=(1, d))  # a shared component: correlated items
    return X / np.linalg.norm(X, axis=1, keepdims=True)


TAGS = [("Asia", "Japan", "sushi"), ("Asia", "Japan", "ramen"), ("Asia", "India", "biryani"),
        ("Europe", "Italy", "pizza"), ("Europe", "Italy", "pizza"), ("Europe", "France", "ratatouille"),
        ("Africa", "Nigeria", "jollof rice"), ("Asia", "Japan", "sushi")]


# --- agreement with the independent implementations --------------------------------------------------
@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("seed", range(5))
def test_vendi_agrees_with_matrix_functions_on_random_full_rank_kernels(seed, q):
    X = random_unit_features(np.random.default_rng(seed), 8, 16)
    K = X @ X.T
    assert vendi_score(K, q) == pytest.approx(vendi_from_matrix_functions(K, q), abs=1e-6)


@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("shape", [(8, 16), (12, 4), (30, 3)])
def test_vendi_agrees_with_singular_values_on_random_kernels_of_any_rank(shape, q):
    X = random_unit_features(np.random.default_rng(sum(shape)), *shape)
    assert vendi_score(X @ X.T, q) == pytest.approx(vendi_from_features(X, q), abs=1e-6)


@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_vendi_of_tag_kernels_agrees_with_singular_values_of_their_one_hot_features(kernel, q):
    weights = KERNELS[kernel]
    expected = vendi_from_features(tag_features(TAGS, weights), q)
    assert vendi_score(tag_kernel(np.array(TAGS), weights), q) == pytest.approx(expected, abs=1e-6)


def test_tag_kernel_reads_a_dataframe_and_weights_each_shared_level():
    frame = pd.DataFrame(TAGS, columns=["continent", "country", "artifact"]).assign(confidence=0.3)
    K = tag_kernel(frame, KERNELS["uniform"])
    assert K[0, 7] == pytest.approx(1.0)  # same continent, country and artifact
    assert K[0, 1] == pytest.approx(2 / 3)  # Japan, different dishes
    assert K[0, 2] == pytest.approx(1 / 3)  # Asia only
    assert K[0, 3] == 0.0
    assert tag_kernel(frame, KERNELS["hierarchical"])[0, 2] == pytest.approx(0.5)


# --- hand cases ------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_identical_tags_have_vendi_one(kernel, q):
    assert vendi_score(tag_kernel([TAGS[0]] * 8, KERNELS[kernel]), q) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("q", ORDERS)
def test_distinct_artifacts_under_the_artifact_kernel_have_vendi_n(q):
    tags = [("Asia", "Japan", f"dish {i}") for i in range(8)]
    assert vendi_score(tag_kernel(tags, KERNELS["artifact"]), q) == pytest.approx(8.0, abs=1e-9)
    assert vendi_score(tag_kernel(tags, KERNELS["country"]), q) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("q", ORDERS)
def test_two_even_clusters_count_as_two(q):
    tags = [("Asia", "Japan", "sushi")] * 4 + [("Europe", "Italy", "pizza")] * 4
    assert vendi_score(tag_kernel(tags, KERNELS["country"]), q) == pytest.approx(2.0, abs=1e-9)


def test_two_uneven_clusters_by_hand():
    # Country kernel, 6 Japan + 2 Italy: K/N has eigenvalues 6/8 and 2/8, the rest 0.
    tags = [("Asia", "Japan", "sushi")] * 6 + [("Europe", "Italy", "pizza")] * 2
    K = tag_kernel(tags, KERNELS["country"])
    assert vendi_score(K, 1) == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))))
    assert vendi_score(K, 2) == pytest.approx(1 / (0.75 ** 2 + 0.25 ** 2))  # 1.6
    assert vendi_score(K, math.inf) == pytest.approx(4 / 3)
    assert vendi_score(K, 0.5) == pytest.approx((math.sqrt(0.75) + math.sqrt(0.25)) ** 2)
    assert normalised_eigenvalues(K)[-2:] == pytest.approx([0.25, 0.75])


def test_vendi_decreases_with_the_order():
    K = tag_kernel(TAGS, KERNELS["uniform"])
    scores = [vendi_score(K, q) for q in (0.5, 1.0, 2.0, math.inf)]
    assert all(a > b for a, b in zip(scores, scores[1:]))


# --- qVS and CD ----------------------------------------------------------------------------------
def test_qvs_and_cd_arithmetic():
    tags = [("Asia", "Japan", "sushi")] * 4 + [("Europe", "Italy", "pizza")] * 4
    K = tag_kernel(tags, KERNELS["country"])  # VS = 2 for every q
    s = np.array([0.2, 0.4, 0.3, 0.1, 0.5, 0.3, 0.2, 0.4])  # mean 0.3
    assert quality_weighted_vendi(K, s) == pytest.approx(0.6)
    assert normalised_cd(K, s) == pytest.approx(0.6 / 8)
    assert normalised_cd(np.eye(8), np.ones(8)) == pytest.approx(1.0)  # perfect quality, all distinct
    assert normalised_cd(np.eye(8), np.zeros(8)) == 0.0


def test_cd_duplication_scaling():
    """CUBE Sec. 5.1.3 and App. E: duplicating every item M times divides CD by M."""
    K = tag_kernel(TAGS, KERNELS["uniform"])
    s = np.linspace(0.1, 0.8, len(TAGS))
    duplicated_tags, duplicated_s = TAGS * 3, np.tile(s, 3)
    assert normalised_cd(K, s) == pytest.approx(3 * normalised_cd(tag_kernel(duplicated_tags, KERNELS["uniform"]),
                                                                  duplicated_s))


# --- Tables 5 and 6 of CUBE ------------------------------------------------------------------------
# Columns: Imagen 2, SDXL, Playground, Realistic Vision for cuisine, then landmarks, then art.
TABLE5_QUALITY = [.27, .21, .29, .27, .25, .22, .21, .23, .31, .30, .34, .33]
TABLE5_VS_BAR = {  # VS / N per kernel (Table 5)
    "continent": [.32, .23, .24, .27, .17, .27, .23, .25, .23, .14, .18, .16],
    "country": [.59, .53, .51, .51, .50, .65, .34, .52, .42, .29, .37, .23],
    "artifact": [.91, .71, .82, .74, .73, .84, .58, .81, .72, .60, .51, .44],
    "hierarchical": [.51, .44, .41, .38, .42, .53, .31, .45, .36, .24, .31, .22],
    "uniform": [.72, .58, .66, .59, .55, .66, .45, .52, .52, .39, .41, .30],
}
TABLE6_CD = {  # REFERENCE.md section 2; two cells are printed with three decimals
    "continent": ["0.08", "0.04", "0.07", "0.07", "0.04", "0.06", "0.04", "0.05", "0.07", "0.042", "0.06", "0.05"],
    "country": ["0.15", "0.11", "0.14", "0.13", "0.12", "0.14", "0.07", "0.12", "0.13", "0.08", "0.12", "0.07"],
    "artifact": ["0.24", "0.14", "0.23", "0.20", "0.18", "0.18", "0.12", "0.18", "0.22", "0.18", "0.17", "0.14"],
    "hierarchical": ["0.13", "0.09", "0.12", "0.10", "0.10", "0.11", "0.06", "0.10", "0.11", "0.07", "0.10",
                     "0.072"],
    "uniform": ["0.19", "0.12", "0.19", "0.16", "0.14", "0.15", "0.09", "0.12", "0.16", "0.12", "0.14", "0.10"],
}
N = 8


def equicorrelated_kernel(vs_bar: float, n: int = N) -> np.ndarray:
    """K = (1 - r) I + r 11^T with r chosen so that VS_1(K) / n = vs_bar (VS falls from n at r = 0 to 1 at r = 1):
    a valid kernel whose normalised Vendi score is any value in [1/n, 1]."""
    def kernel(r):
        return (1 - r) * np.eye(n) + r * np.ones((n, n))

    r = optimize.brentq(lambda r: vendi_score(kernel(r)) / n - vs_bar, 0.0, 1.0 - 1e-12, xtol=1e-14)
    return kernel(r)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_table6_cd_is_table5_quality_times_normalised_vendi(kernel):
    """Table 6 = q x VS-bar (Table 5) to the printed precision, 0.01. Not closer: the paper's CD is the mean
    over 50 draws of a product while Table 5 prints the mean of each factor, and all three are rounded (56 of
    the 60 cells fit the rounding box of the three numbers; 4 exceed it by < 0.005, as if truncated)."""
    for column, (q, vs_bar, printed) in enumerate(zip(TABLE5_QUALITY, TABLE5_VS_BAR[kernel], TABLE6_CD[kernel])):
        cd = float(printed)
        assert 1 / N <= cd / q <= 1, (kernel, column)  # the implied VS-bar is a possible VS / N
        assert 1 / N <= vs_bar <= 1, (kernel, column)
        # Compose as the paper does: qualities averaging q, and a kernel whose VS / N is Table 5's.
        K = equicorrelated_kernel(vs_bar)
        assert vendi_from_matrix_functions(K, 1) / N == pytest.approx(vs_bar, abs=1e-9)
        composed = normalised_cd(K, np.full(N, q))
        assert composed == pytest.approx(q * vs_bar, abs=1e-9)
        assert abs(composed - cd) <= 0.01, (kernel, column, composed, cd)


def test_table6_check_can_fail():
    """Composing with VS itself instead of VS / N (Eq. 2 instead of Eq. 3) misses Table 6 by far."""
    q, vs_bar = TABLE5_QUALITY[0], TABLE5_VS_BAR["artifact"][0]
    K = equicorrelated_kernel(vs_bar)
    assert abs(quality_weighted_vendi(K, np.full(N, q)) - float(TABLE6_CD["artifact"][0])) > 1.0


# --- the protocol: random subsets and their mean --------------------------------------------------
def test_random_subsets_are_seeded_subsets_without_repetition():
    subsets = random_subsets(80, 8, 50, np.random.default_rng(3))
    assert subsets.shape == (50, 8)
    assert all(len(set(row)) == 8 for row in subsets) and subsets.min() >= 0 and subsets.max() < 80
    assert np.array_equal(subsets, random_subsets(80, 8, 50, np.random.default_rng(3)))
    assert len({tuple(sorted(row)) for row in subsets}) > 45


def test_random_subsets_are_uniform():
    counts = np.bincount(random_subsets(10, 3, 20000, np.random.default_rng(0)).ravel(), minlength=10)
    assert counts / counts.sum() == pytest.approx(np.full(10, 0.1), abs=0.01)


def test_seed_batches_are_consecutive_seeds_in_seed_order():
    seeds = np.array([3, 0, 9, 1, 2, 8, 4, 5, 7, 6])
    batches = seed_batches(seeds, 4)
    assert [seeds[b].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # seeds 8 and 9 left over
    assert seed_batches(np.arange(80), 8).shape == (10, 8)
    with pytest.raises(ValueError, match="cannot make batches of 8 from 5 items"):
        seed_batches(np.arange(5), 8)


def test_draw_mean_estimates_the_mean_over_all_subsets():
    # 10 images: 5 Japan, 5 Italy. Exact mean of VS_1 / 8 over all C(10, 8) = 45 subsets, by enumeration.
    from itertools import combinations

    tags = np.array([("Asia", "Japan", "sushi")] * 5 + [("Europe", "Italy", "pizza")] * 5)
    exact = np.mean([vendi_score(tag_kernel(tags[list(c)], KERNELS["country"])) / 8
                     for c in combinations(range(10), 8)])
    subsets = random_subsets(10, 8, 4000, np.random.default_rng(1))
    estimate = draw_mean(np.array([vendi_score(tag_kernel(tags[s], KERNELS["country"])) / 8 for s in subsets]))
    assert estimate.ci_low < exact < estimate.ci_high
    assert estimate.mean == pytest.approx(exact, abs=0.005)


def test_draw_mean_of_constant_draws_is_exact():
    assert draw_mean(np.full(50, 0.25)) == DrawMean(0.25, 0.25, 0.25, 50)
    assert draw_mean(np.array([0.4])) == DrawMean(0.4, 0.4, 0.4, 1)


# --- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("K, message", [
    (np.ones((2, 3)), "square"),
    (np.array([[1.0, 0.5], [0.2, 1.0]]), "not symmetric"),
    (np.array([[1.0, 0.0], [0.0, 0.9]]), "diagonal is off"),
    (np.array([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]]), "not positive semi-definite"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "non-finite"),
])
def test_invalid_kernels_are_clear_errors(K, message):
    with pytest.raises(ValueError, match=message):
        vendi_score(K)


def test_round_off_within_tolerance_is_accepted():
    X = random_unit_features(np.random.default_rng(0), 8, 4)
    K = X @ X.T + 1e-9 * np.random.default_rng(1).normal(size=(8, 8))
    K = (K + K.T) / 2
    np.fill_diagonal(K, 1.0)
    assert vendi_score(K) == pytest.approx(vendi_from_features(X, 1), abs=1e-6)


def test_bad_orders_weights_and_qualities_are_clear_errors():
    with pytest.raises(ValueError, match="order q must be > 0"):
        vendi_score(np.eye(2), 0)
    with pytest.raises(ValueError, match="summing to 1"):
        tag_kernel(TAGS, (1.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="non-negative"):
        tag_kernel(TAGS, (1.5, -0.5, 0.0))
    with pytest.raises(ValueError, match="null"):
        tag_kernel([("Asia", None, "sushi")], KERNELS["country"])
    with pytest.raises(ValueError, match="one quality score per item"):
        normalised_cd(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        normalised_cd(np.eye(2), np.array([0.5, 1.5]))

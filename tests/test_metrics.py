"""Alignment metrics, aggregation and CIs on hand-made values whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from benchmark.aggregate import aggregate
from benchmark.metrics.alignment import clip_score, cosine_similarity
from benchmark.stats import mean_ci


def test_cosine_of_hand_made_embeddings():
    images = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 4.0]])
    texts = np.array([[2.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [4.0, 3.0]])
    assert cosine_similarity(images, texts) == pytest.approx([1.0, 0.0, -1.0, 24 / 25])


def test_clip_score_is_hessels_2_5_max_cos_0():
    assert clip_score(np.array([1.0, 0.0, -1.0, 0.96])) == pytest.approx([2.5, 0.0, 0.0, 2.4])
    assert clip_score(np.array([0.5]), weight=1.0) == pytest.approx([0.5])


def test_cosine_rejects_unpaired_or_zero_embeddings():
    with pytest.raises(ValueError, match="paired"):
        cosine_similarity(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="zero norm"):
        cosine_similarity(np.zeros((1, 2)), np.ones((1, 2)))


def _per_image():
    rows = [  # prompt a: two seeds (mean 2); b: one image (4); c: one image (6)
        ("a", 0, 1.0, "Brazil", "cuisine"), ("a", 1, 3.0, "Brazil", "cuisine"),
        ("b", 0, 4.0, "Brazil", "art"), ("c", 0, 6.0, "Nigeria", "cuisine"),
    ]
    frame = pd.DataFrame(rows, columns=["prompt_id", "seed", "value", "country", "concept"])
    return frame.assign(track="awareness", metric="m")


def test_aggregates_average_prompts_not_images():
    rows = {(r["slice"], r["slice_value"]): r for r in aggregate(_per_image(), slices=("country", "concept"))}
    assert rows[("overall", "all")]["value"] == pytest.approx(4.0)  # (2 + 4 + 6) / 3, not 3.5
    assert rows[("overall", "all")]["n"] == 3
    assert rows[("country", "Brazil")]["value"] == pytest.approx(3.0)
    assert rows[("concept", "cuisine")]["value"] == pytest.approx(4.0)
    crossed = {(r["slice"], r["slice_value"]): r for r in aggregate(_per_image())}
    assert crossed[("country_concept", "Brazil / cuisine")]["value"] == pytest.approx(2.0)  # prompt a only
    assert crossed[("country_concept", "Brazil / art")]["value"] == pytest.approx(4.0)
    assert ("country_domain", "Brazil / art") not in crossed  # no domain column: no such cross
    nigeria = rows[("country", "Nigeria")]
    assert nigeria["value"] == 6.0 and nigeria["n"] == 1 and math.isnan(nigeria["ci_low"])


def test_mean_ci_is_wider_than_t_at_small_n_near_normal_theory_at_large_n_and_absent_below_five_values():
    low, high = mean_ci(np.array([2.0, 4.0, 6.0, 8.0, 10.0]))
    # Student-t: mean 6, s = sqrt(10), t(0.975, 4) = 2.776445: 6 -/+ 3.926486; the percentile-t (1% tails) is wider
    assert low < 6 - 3.926486 and high > 6 + 3.926486
    assert all(math.isnan(v) for v in mean_ci(np.array([2.0, 4.0, 6.0])))  # n = 3: no interval
    rng = np.random.default_rng(1)
    sample = rng.normal(10, 1, size=400)
    low, high = mean_ci(sample)
    # normal theory at 1% in each tail (the percentile-t's tails): t(0.99, 399) s / sqrt(400), about 0.116 s
    half_width = scipy_stats.t.ppf(0.99, 399) * sample.std(ddof=1) / math.sqrt(400)
    assert high - low == pytest.approx(2 * half_width, rel=0.1)

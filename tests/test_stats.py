"""Shared statistics against scipy.stats and hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from benchmark.stats import bootstrap_mean_ci, holm, paired_comparisons


def test_bootstrap_ci_equals_scipy_with_the_same_seed():
    values = np.array([0.21, 0.35, 0.18, 0.42, 0.30, 0.27, 0.33, 0.25])
    expected = scipy_stats.bootstrap((values,), np.mean, confidence_level=0.95, n_resamples=2000,
                                     method="percentile", random_state=np.random.default_rng(0)).confidence_interval
    assert bootstrap_mean_ci(values) == pytest.approx((expected.low, expected.high))


def test_holm_on_hand_computed_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])


def test_paired_comparisons_use_shared_prompts_wilcoxon_and_holm():
    rng = np.random.default_rng(3)
    base = rng.normal(0.3, 0.05, size=40)
    per_prompt = pd.concat([
        pd.DataFrame({"model": "A", "prompt_id": [f"p{i}" for i in range(40)], "value": base + 0.05}),
        pd.DataFrame({"model": "B", "prompt_id": [f"p{i}" for i in range(40)], "value": base + rng.normal(0, 0.01, 40)}),
        pd.DataFrame({"model": "C", "prompt_id": [f"p{i}" for i in range(30)], "value": base[:30] + 0.05}),
    ])
    table = paired_comparisons(per_prompt).set_index(["model_a", "model_b"])
    ab = table.loc[("A", "B")]
    b_values = per_prompt[per_prompt.model == "B"]["value"].to_numpy()
    assert ab["n"] == 40
    assert ab["mean_difference"] == pytest.approx(np.mean(base + 0.05 - b_values))
    raw = scipy_stats.wilcoxon(base + 0.05, b_values).pvalue
    assert ab["p_value"] == pytest.approx(raw)
    assert table.loc[("A", "C")]["n"] == 30 and table.loc[("A", "C")]["mean_difference"] == pytest.approx(0.0)
    assert table.loc[("A", "C")]["p_value"] == 1.0  # identical on every shared prompt
    assert table["p_holm"].to_numpy() == pytest.approx(holm(table["p_value"].to_numpy()))
    assert ab["ci_low"] < ab["mean_difference"] < ab["ci_high"]

"""Shared statistics against scipy.stats and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from benchmark.stats import (
    MIN_CI_N,
    RESAMPLES,
    SEED,
    TAIL_SHARE,
    difference_ci,
    holm,
    mean_ci,
    paired_comparisons,
    sign_test,
    sign_test_rejects,
    wilson_interval,
)

SAMPLE = np.array([0.21, 0.35, 0.18, 0.42, 0.30, 0.27, 0.33, 0.25])


def percentile_t_by_hand(values: np.ndarray, tail: float) -> tuple[float, float]:
    """The percentile-t interval written out: the values sorted, each of the seeded resamples' t* = (m* - m) / se*
    one by one (no
    spread: +/-inf by the sign of m* - m), sorted, the t* at ranks ceil(B a) and ceil(B (1 - a)) (the inverse of
    their empirical CDF), then [m - t*_hi se, m - t*_lo se]."""
    values, n, count = np.sort(values), len(values), RESAMPLES
    mean, se = values.mean(), values.std(ddof=1) / math.sqrt(n)
    t_star = []
    for drawn in np.random.default_rng(SEED).integers(0, n, size=(count, n)):
        sample = values[drawn]
        spread = sample.std(ddof=1) / math.sqrt(n)
        shift = sample.mean() - mean
        t_star.append(shift / spread if spread > 0 else math.copysign(math.inf, shift) if shift else 0.0)
    t_star.sort()
    low, high = t_star[math.ceil(count * tail) - 1], t_star[math.ceil(count * (1 - tail)) - 1]
    return mean - high * se, mean - low * se


def test_mean_ci_is_the_percentile_t_bootstrap_with_one_percent_tails():
    assert TAIL_SHARE * 0.025 == pytest.approx(0.01)
    assert mean_ci(SAMPLE) == pytest.approx(percentile_t_by_hand(SAMPLE, 0.01), abs=1e-12)
    assert mean_ci(SAMPLE, confidence=0.90) == pytest.approx(percentile_t_by_hand(SAMPLE, 0.02), abs=1e-12)
    low, high = mean_ci(SAMPLE)
    t_low, t_high = scipy_stats.t.interval(0.95, len(SAMPLE) - 1, loc=SAMPLE.mean(), scale=scipy_stats.sem(SAMPLE))
    assert low < t_low < SAMPLE.mean() < t_high < high  # wider than Student-t, as its coverage asks
    assert mean_ci(SAMPLE) == mean_ci(SAMPLE[::-1])  # the same values in any order, the same interval


def test_an_interval_stays_inside_the_values_declared_range_and_an_unbounded_side_stays_unbounded():
    # Shares of 4 seeds, mostly 0: more than 1% of the resamples have no spread, and the upper side is unbounded.
    # The range of a share (at most 1) does not close it: shown as the range's end, it would read as if the
    # values had put it there (issue 49: a row of 3 answers in 200 read [0.0018, 2.5]).
    shares = np.array([0.25, 0, 0, 0, 0, 0, 0, 0, 0, 0.0])
    low, high = mean_ci(shares)
    assert low <= 0.025 and high == math.inf
    assert mean_ci(shares, bounds=(0.0, 1.0)) == (max(low, 0.0), math.inf)
    assert mean_ci(SAMPLE, bounds=(0.0, 0.3)) == (mean_ci(SAMPLE)[0], 0.3)  # a bounded side is held in the range


def test_zero_one_values_get_wilsons_interval_with_continuity_correction():
    # 2 of 10 (Newcombe 1998, method 4), z^2 = 3.8414588, 2np = 4, denominator 2 (n + z^2) = 27.6829176:
    # low  (4 + 3.8414588 - 1 - z sqrt(3.8414588 - 2 - 0.1 + 0.8 x 9 = 8.9414588)) / 27.6829176 = 0.0354269,
    # high (4 + 3.8414588 + 1 + z sqrt(3.8414588 + 2 - 0.1 + 0.8 x 7 = 11.3414588)) / 27.6829176 = 0.5578186.
    events = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0, 0], dtype=float)
    assert mean_ci(events, kind="rate") == pytest.approx((0.0354269, 0.5578186), abs=1e-7)
    assert wilson_interval(2, 10) == pytest.approx((0.0354269, 0.5578186), abs=1e-7)
    scipy_cc = scipy_stats.binomtest(2, 10).proportion_ci(0.95, method="wilsoncc")
    assert mean_ci(events, kind="rate") == pytest.approx((scipy_cc.low, scipy_cc.high))
    scipy_90 = scipy_stats.binomtest(2, 10).proportion_ci(0.90, method="wilsoncc")
    assert mean_ci(events, confidence=0.90, kind="rate") == pytest.approx((scipy_90.low, scipy_90.high))
    # The same values of a continuous score are no proportion: the percentile-t's interval, not Wilson's.
    assert mean_ci(events) == pytest.approx(percentile_t_by_hand(events, 0.01), abs=1e-12)
    # At 0 of n the low end is exactly 0, at n of n the high end exactly 1 (0 of 9: high (3.8414588 + 1 + z sqrt(
    # 3.8414588 + 2 - 1/9)) / 25.6829176 = 0.3711903).
    assert wilson_interval(0, 9) == (0.0, pytest.approx(0.3711903, abs=1e-7))
    assert wilson_interval(9, 9) == (pytest.approx(1 - 0.3711903, abs=1e-7), 1.0)


def test_a_rates_interval_covers_95_percent_where_wilsons_did_not():
    """Exact binomial coverage at the cells where Wilson's interval without the correction fell below 0.93 (n = 10
    at p = 0.985: 0.860; n = 50 at p = 0.01: 0.911; n = 5 at p = 0.965: 0.837, benchmarks/coverage.py)."""
    for n, p in ((10, 0.985), (50, 0.01), (5, 0.965), (200, 0.005), (20, 0.5)):
        covered = sum(scipy_stats.binom.pmf(k, n, p) for k in range(n + 1)
                      if wilson_interval(k, n)[0] <= p <= wilson_interval(k, n)[1])
        assert covered >= 0.95, (n, p, covered)


def test_no_interval_below_the_minimum_n():
    assert MIN_CI_N == 5
    for n in range(MIN_CI_N):
        low, high = mean_ci(SAMPLE[:n])
        assert np.isnan(low) and np.isnan(high)
        low, high = mean_ci(np.zeros(n))
        assert np.isnan(low) and np.isnan(high)
    low, high = mean_ci(SAMPLE[:MIN_CI_N])
    assert low < SAMPLE[:MIN_CI_N].mean() < high


def test_all_equal_values_bound_the_mean_only_where_the_range_does():
    # No spread: nothing in the sample bounds its mean (the percentile-t has no t* to read), so a side is unbounded,
    # unless the value is the range's end on that side (a mean of values in the range cannot pass it). A row that
    # refused every prompt, each counted at the worst value 0, is at least 0 and not bounded above.
    assert mean_ci(np.full(6, 0.3)) == (-math.inf, math.inf)
    assert mean_ci(np.full(6, 0.3), bounds=(0.0, 1.0)) == (-math.inf, math.inf)
    assert mean_ci(np.zeros(6), bounds=(0.0, 2.5)) == (0.0, math.inf)
    assert mean_ci(np.ones(6), bounds=(0.0, 1.0)) == (-math.inf, 1.0)
    # A rate's all 0 or all 1 are events that never or always happened: its interval, not a point nor unbounded.
    # 0 of 6: (0, (3.8414588 + 1 + z sqrt(3.8414588 + 2 - 1/6)) / 19.6829176 = 0.4831829); 5 of 5: (0.4629440, 1).
    assert mean_ci(np.zeros(6), kind="rate") == pytest.approx((0.0, 0.4831829), abs=1e-7)
    assert mean_ci(np.ones(5), kind="rate") == pytest.approx((0.4629440, 1.0), abs=1e-7)


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


def test_differences_of_paired_events_get_bonett_prices_interval_not_wilsons():
    # Model a beats b on 2 of 10 prompts and never loses. Wilson's interval of a proportion, [0.057, 0.510], would
    # exclude 0 while Wilcoxon gives p = 0.5. Bonett & Price: p+ = 3/12, p- = 1/12, d = 1/6,
    # se = sqrt((4/12 - 1/36) / 12) = 0.1595712, t_11 = 2.2009852, half-width 0.3512138: [-0.1845471, 0.5178805].
    differences = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    low, high = difference_ci(differences)
    assert (low, high) == pytest.approx((-0.1845471, 0.5178805), abs=1e-7)
    assert low < 0 < high
    assert scipy_stats.wilcoxon(differences).pvalue == pytest.approx(0.5)
    # Every pair tied: the interval is not the point (0, 0) (the t interval's), as a sparse difference may hide.
    # p+ = p- = 1/12: half-width t_11 sqrt((2/12) / 12) = 2.2009852 x 0.1178511 = 0.2593886.
    assert difference_ci(np.zeros(10)) == pytest.approx((-0.2593886, 0.2593886), abs=1e-7)
    # Shares of 10 images that differ by one image at most: the same interval in units of 0.1.
    assert difference_ci(differences / 10) == pytest.approx((-0.01845471, 0.05178805), abs=1e-8)
    # Other differences (shares, scores) get a mean's interval.
    assert difference_ci(SAMPLE - 0.3) == pytest.approx(mean_ci(SAMPLE - 0.3))
    assert np.isnan(difference_ci(np.ones(MIN_CI_N - 1))).all()


@pytest.mark.parametrize("step", [1.0, 0.1])
def test_paired_difference_interval_covers_95_percent_at_n_10_on_minus_c_zero_c_data(step):
    """Exact coverage (every outcome of n = 10 trinomial draws enumerated, as benchmarks/coverage.py does) at
    trinomials where the t interval and Wilson's fail: few differing prompts, and +/-c coin flips; c = 1 (0/1
    events) and c = 0.1 (shares of 10 images one image apart)."""
    n = 10
    for minus, plus in ((0.0, 0.1), (0.05, 0.0), (0.0, 0.3), (0.5, 0.5), (0.2, 0.2), (0.1, 0.6)):
        covered = 0.0
        for wins in range(n + 1):
            for losses in range(n + 1 - wins):
                sample = np.array([step] * wins + [-step] * losses + [0.0] * (n - wins - losses))
                low, high = difference_ci(sample)
                if low <= step * (plus - minus) + 1e-12 and step * (plus - minus) <= high + 1e-12:
                    covered += scipy_stats.multinomial.pmf([wins, losses, n - wins - losses], n,
                                                           [plus, minus, 1 - plus - minus])
        assert covered >= 0.93, (minus, plus, covered)


def test_holm_runs_over_every_pair_of_every_metric():
    rng = np.random.default_rng(4)
    prompts = [f"p{i}" for i in range(20)]
    rows = []
    for metric, shift in (("crt", 0.1), ("vr", 0.0), ("cra_image", 0.02)):
        base = rng.normal(0.5, 0.1, 20)
        for model, offset in (("A", shift), ("B", 0.0), ("C", rng.normal(0, 0.01))):
            rows.append(pd.DataFrame({"metric": metric, "model": model, "prompt_id": prompts,
                                      "value": base + offset + rng.normal(0, 0.02, 20)}))
    table = paired_comparisons(pd.concat(rows, ignore_index=True))
    assert len(table) == 9 and set(table["metric"]) == {"crt", "vr", "cra_image"}
    assert table["p_holm"].to_numpy() == pytest.approx(holm(table["p_value"].to_numpy()))  # one family of 9
    within = paired_comparisons(pd.concat(rows[:3], ignore_index=True))  # crt alone: a family of 3
    crt = table[table["metric"] == "crt"].reset_index(drop=True)
    assert (crt["p_value"] == within["p_value"]).all() and (crt["p_holm"] >= within["p_holm"]).all()
    assert (crt["p_holm"] > within["p_holm"]).any()


def test_sign_test_is_the_exact_binomial_tail_and_never_rises_with_a_win():
    # P(X >= w) for X ~ Binomial(w + l, 1/2), term by term over 2^12 = 4096 outcomes: 12-0: 1/4096; 7-5: (C(12,7)
    # + ... + C(12,12)) / 4096 = (792 + 495 + 220 + 66 + 12 + 1) / 4096 = 1586/4096; 9-3: 299/4096; no sign: 1.
    assert list(sign_test(np.array([12, 7, 9, 0]), np.array([0, 5, 3, 0]))) == pytest.approx(
        [1 / 4096, 1586 / 4096, 299 / 4096, 1.0])
    # A loss turned into a tie (w, l - 1) or a tie into a win (w + 1, l) never raises the p-value.
    for wins in range(15):
        for losses in range(15):
            p = sign_test(wins, losses)
            assert sign_test(wins + 1, losses) <= p and (losses == 0 or sign_test(wins, losses - 1) <= p)


def test_sign_test_rejects_exactly_where_the_tail_is_at_most_alpha():
    # Every (wins, losses) up to 60 signed prompts, at the levels a ranking of 2 to 40 models uses (0.025 to 0.05 /
    # 1560) and one between two attainable tails: the fast decision is the exact tail's, summed here term by term.
    for alpha in (0.025, 0.05 / 30, 0.05 / 1560, 1586 / 4096):
        for total in range(61):
            for wins in range(total + 1):
                tail = sum(math.comb(total, k) for k in range(wins, total + 1)) / 2 ** total
                assert sign_test_rejects(wins, total - wins, alpha) == (tail <= alpha), (alpha, wins, total)

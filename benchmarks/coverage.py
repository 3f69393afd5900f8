"""Coverage of 95% confidence intervals for a mean, per sample size and data kind.

    python benchmarks/coverage.py [--replicates 1000] [--resamples 999] [--seed 0]

For every data kind and every n in 3, 4, 5, 10, 20, 50, 100 the script draws
``--replicates`` samples of size n and counts how often each interval contains the
true mean. Kinds: normal; skewed (exponential, lognormal with sigma = 1); values in
[0, 1] like CLIP scores (Beta(2, 5)); per-prompt shares of 4 seeds for a rare event
(Binomial(4, 0.1) / 4, e.g. "artifact recognised" averaged over a prompt's seeds);
0/1 events with p = 0.1 and p = 0.5. Methods:

- ``percentile``: percentile bootstrap (scipy.stats.bootstrap);
- ``BCa``: bias-corrected and accelerated bootstrap (Efron 1987; scipy.stats.bootstrap);
- ``t``: Student-t interval, mean -/+ t_{n-1} s / sqrt(n) (CultureLens's rule until issue 39);
- ``boot-t``: studentized (percentile-t) bootstrap (Efron & Tibshirani 1993, ch. 12.5), 2.5% tails;
- ``Wilson``: Wilson (1927) score interval, 0/1 data only;
- ``ours``: ``benchmark.stats.mean_ci`` itself (Wilson for 0/1 samples of a rate, else the percentile-t with 1% tails);
  "-" below its minimum n, where it gives no interval.

The other columns treat a sample whose values are all equal as the interval (v, v)
(scipy's BCa gives nan there).

Second part: intervals of a mean of paired differences in {-c, 0, c}, by exact enumeration:
c = 1 (two models' 0/1 events on the same prompts: +1 where only a's happened, -1 where only
b's) and c = 0.1 (two shares of 10 images differing by one image at most, what ``compare`` and
the delta-CRA of a perturbation pass in). A sample of n such differences is summed up by its
counts of +c and -c, so each method's interval is computed once per count pair and its
coverage at a trinomial (P(-c), P(+c)) is the multinomial probability of the count pairs whose
interval holds c (P(+c) - P(-c)). Trinomials: every (P(-c), P(+c)) on a 0.05 grid with a sum
<= 1 (231). Methods: ``t``, ``BCa`` (scipy, 999 resamples), Bonett & Price's adjusted Wald
interval with the normal quantile (``BP z``), and ``ours``, ``benchmark.stats.difference_ci``
(Bonett & Price in units of c, with Student's t on n + 1 degrees of freedom). It prints, per c
and n, each method's smallest coverage over the grid (and where), its mean, and the share of
the grid below 0.93.

To run in about three minutes on two cores the script uses 1,000 replicates per cell (Monte
Carlo standard error of a coverage near 0.95: about 0.007) and 999 resamples for the scipy
bootstrap columns. It prints the coverage table, each coverage divided by the nominal 0.95,
each interval's median width divided by the t interval's, and last the issue-39 target:
``ours`` at 0.93 or more on exponential, lognormal and +-0.1 differences at n = 5, 10, 20, 50.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy import stats

from benchmark.stats import MIN_CI_N, difference_ci, mean_ci, wilson_interval

NOMINAL = 0.95
SIZES = (3, 4, 5, 10, 20, 50, 100)
# name -> (sampler(rng, shape), true mean, 0/1 data)
KINDS = {
    "normal": (lambda rng, shape: rng.normal(0.0, 1.0, shape), 0.0, False),
    "exponential": (lambda rng, shape: rng.exponential(1.0, shape), 1.0, False),
    "lognormal": (lambda rng, shape: rng.lognormal(0.0, 1.0, shape), float(np.exp(0.5)), False),
    "beta(2,5)": (lambda rng, shape: rng.beta(2.0, 5.0, shape), 2.0 / 7.0, False),
    "shares of 4, p=0.1": (lambda rng, shape: rng.binomial(4, 0.1, shape) / 4.0, 0.1, False),
    "events p=0.1": (lambda rng, shape: (rng.random(shape) < 0.1).astype(float), 0.1, True),
    "events p=0.5": (lambda rng, shape: (rng.random(shape) < 0.5).astype(float), 0.5, True),
}
METHODS = ("percentile", "BCa", "t", "boot-t", "Wilson", "ours")
TARGET = 0.93  # issue 39: on TARGET_KINDS and the +-0.1 differences at TARGET_SIZES
TARGET_KINDS = ("exponential", "lognormal")
TARGET_SIZES = (5, 10, 20, 50)


def scipy_bootstrap(samples: np.ndarray, method: str, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise scipy.stats.bootstrap interval of the mean; all-equal rows give (v, v)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate rows: handled below
        ci = stats.bootstrap((samples,), np.mean, axis=-1, vectorized=True, confidence_level=NOMINAL,
                             n_resamples=resamples, batch=50, method=method,
                             random_state=np.random.default_rng(seed)).confidence_interval
    low, high = np.array(ci.low, dtype=float), np.array(ci.high, dtype=float)
    constant = np.all(samples == samples[:, :1], axis=1)
    low[constant], high[constant] = samples[constant, 0], samples[constant, 0]
    return low, high


def t_interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise Student-t interval of the mean."""
    n = samples.shape[1]
    mean, se = samples.mean(axis=1), samples.std(axis=1, ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.5 + NOMINAL / 2, n - 1) * se
    return mean - half, mean + half


def bootstrap_t(samples: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise studentized (bootstrap-t) interval of the mean (Efron & Tibshirani 1993, ch. 12.5): quantiles
    of (mean* - mean) / se* replace t_{n-1}'s; resamples with se* = 0 count as +/-inf."""
    rng = np.random.default_rng(seed)
    n = samples.shape[1]
    mean, se = samples.mean(axis=1), samples.std(axis=1, ddof=1) / np.sqrt(n)
    low, high = np.empty(len(samples)), np.empty(len(samples))
    for start in range(0, len(samples), 50):
        rows = samples[start:start + 50]
        drawn = np.take_along_axis(rows[:, None, :], rng.integers(0, n, (len(rows), resamples, n)), axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = (drawn.mean(axis=2) - mean[start:start + 50, None]) / (drawn.std(axis=2, ddof=1) / np.sqrt(n))
        t_star = np.nan_to_num(t_star, nan=0.0, posinf=np.inf, neginf=-np.inf)
        q_low, q_high = np.quantile(t_star, [(1 - NOMINAL) / 2, (1 + NOMINAL) / 2], axis=1, method="inverted_cdf")
        low[start:start + 50] = mean[start:start + 50] - q_high * se[start:start + 50]
        high[start:start + 50] = mean[start:start + 50] - q_low * se[start:start + 50]
    constant = np.all(samples == samples[:, :1], axis=1)
    low[constant], high[constant] = samples[constant, 0], samples[constant, 0]
    return low, high


def coverage_cell(kind: str, n: int, replicates: int, resamples: int, seed: int) -> dict[str, tuple[float, float]]:
    """Method -> (coverage, median width) for one data kind and sample size."""
    sampler, truth, binary = KINDS[kind]
    samples = sampler(np.random.default_rng(seed), (replicates, n))
    intervals = {"percentile": scipy_bootstrap(samples, "percentile", resamples, seed),
                 "BCa": scipy_bootstrap(samples, "BCa", resamples, seed),
                 "t": t_interval(samples), "boot-t": bootstrap_t(samples, resamples, seed)}
    zero_one = np.all((samples == 0) | (samples == 1), axis=1)
    wilson = np.full((2, replicates), np.nan)
    for i in np.flatnonzero(zero_one):
        wilson[:, i] = wilson_interval(int(samples[i].sum()), n, confidence=NOMINAL)
    if binary:
        intervals["Wilson"] = tuple(wilson)
    if n >= MIN_CI_N:
        intervals["ours"] = tuple(np.array(bounds) for bounds in zip(*(mean_ci(row, kind="rate" if binary else
                                                                                   "continuous") for row in samples)))
    cell = {}
    for method, (low, high) in intervals.items():
        covered = (low <= truth) & (truth <= high)  # nan bounds: not covered
        cell[method] = (float(covered.mean()), float(np.nanmedian(high - low)) if np.isfinite(low).any() else np.nan)
    return cell


def print_table(title: str, results: dict, value) -> None:
    print(f"\n{title}")
    print(f"{'kind':<20}{'n':>5}" + "".join(f"{m:>12}" for m in METHODS))
    for (kind, n), cell in results.items():
        print(f"{kind:<20}{n:>5}" + "".join(f"{value(cell, m):>12.3f}" if m in cell else f"{'-':>12}"
                                          for m in METHODS))


DIFFERENCE_SIZES = (5, 10, 20, 50)
DIFFERENCE_STEPS = (1.0, 0.1)
DIFFERENCE_METHODS = ("t", "BCa", "BP z", "ours")


def bonett_price_z(wins: int, losses: int, n: int) -> tuple[float, float]:
    """Bonett & Price (2012) adjusted Wald interval of a paired difference, with the normal quantile."""
    more, fewer = (wins + 1) / (n + 2), (losses + 1) / (n + 2)
    half = stats.norm.ppf(0.5 + NOMINAL / 2) * np.sqrt((more + fewer - (more - fewer) ** 2) / (n + 2))
    return more - fewer - half, more - fewer + half


def difference_intervals(n: int, step: float, resamples: int, seed: int
                          ) -> dict[str, dict[tuple[int, int], tuple[float, float]]]:
    """Method -> (wins, losses) -> the interval of a sample of n differences with that many +step and -step."""
    outcomes = [(w, l) for w in range(n + 1) for l in range(n + 1 - w)]
    samples = np.array([[step] * w + [-step] * l + [0.0] * (n - w - l) for w, l in outcomes])
    t_low, t_high = t_interval(samples)
    bca_low, bca_high = scipy_bootstrap(samples, "BCa", resamples, seed)
    return {"t": dict(zip(outcomes, zip(t_low, t_high))), "BCa": dict(zip(outcomes, zip(bca_low, bca_high))),
            "BP z": {(w, l): tuple(step * b for b in bonett_price_z(w, l, n)) for w, l in outcomes},
            "ours": {o: difference_ci(x) for o, x in zip(outcomes, samples)}}


def difference_coverage(n: int, step: float, resamples: int, seed: int) -> dict[str, tuple[float, tuple, float, float]]:
    """Method -> (smallest coverage over the trinomial grid, where, mean coverage, share of the grid below 0.93)."""
    intervals = difference_intervals(n, step, resamples, seed)
    outcomes = list(intervals["t"])
    counts = np.array([[w, l, n - w - l] for w, l in outcomes])
    grid = [(minus / 20, plus / 20) for minus in range(21) for plus in range(21 - minus)]
    coverage = {m: [] for m in DIFFERENCE_METHODS}
    for minus, plus in grid:
        probability = stats.multinomial.pmf(counts, n, [plus, minus, max(0.0, 1 - plus - minus)])
        truth = step * (plus - minus)
        for method in DIFFERENCE_METHODS:
            bounds = np.array([intervals[method][o] for o in outcomes])
            held = (bounds[:, 0] <= truth + 1e-12) & (truth <= bounds[:, 1] + 1e-12)  # nan bounds: not held
            coverage[method].append(float(probability[held].sum()))
    out = {}
    for method, values in coverage.items():
        worst = int(np.argmin(values))
        out[method] = (values[worst], grid[worst], float(np.mean(values)), float(np.mean(np.array(values) < 0.93)))
    return out


def print_differences(resamples: int, seed: int) -> dict[tuple[float, int], float]:
    """Prints each step's table; returns (step, n) -> ``ours``' smallest coverage."""
    smallest = {}
    for step in DIFFERENCE_STEPS:
        print(f"\nPaired differences in {{-{step:g}, 0, {step:g}}}: exact coverage over 231 trinomials "
              "(P(-c), P(+c)) on a 0.05 grid")
        print(f"{'n':>4}  {'method':<8}{'smallest':>9}  {'at (P(-c), P(+c))':<20}{'mean':>7}{'share < 0.93':>14}")
        for n in DIFFERENCE_SIZES:
            for method, (worst, where, mean, below) in difference_coverage(n, step, resamples, seed + n).items():
                print(f"{n:>4}  {method:<8}{worst:>9.3f}  {str(where):<20}{mean:>7.3f}{below:>14.3f}")
                if method == "ours":
                    smallest[(step, n)] = worst
    return smallest


def print_target(results: dict, differences: dict[tuple[float, int], float]) -> None:
    """Issue 39's target: ``ours`` covers at least ``TARGET`` on the skewed kinds and the +-0.1 differences."""
    cells = {f"{kind}, n = {n}": results[(kind, n)]["ours"][0] for kind in TARGET_KINDS for n in TARGET_SIZES}
    cells |= {f"+-0.1 differences, n = {n} (smallest over the grid)": differences[(0.1, n)] for n in TARGET_SIZES}
    print(f"\nTarget: coverage >= {TARGET} for ``ours``")
    for cell, coverage in cells.items():
        print(f"  {cell:<52}{coverage:.3f}  {'ok' if coverage >= TARGET else 'BELOW'}")
    print("  all met" if min(cells.values()) >= TARGET else "  NOT MET")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=999)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    results = {(kind, n): coverage_cell(kind, n, args.replicates, args.resamples, args.seed + 1000 * i + n)
               for i, kind in enumerate(KINDS) for n in SIZES}
    print(f"{args.replicates} replicates per cell, {args.resamples} bootstrap resamples (scipy and boot-t columns); "
          f"'ours' is mean_ci as shipped (no interval below n = {MIN_CI_N}).")
    print_table("Coverage of the true mean (nominal 0.95)", results, lambda cell, m: cell[m][0])
    print_table("Coverage / nominal", results, lambda cell, m: cell[m][0] / NOMINAL)
    print_table("Median width / t interval's median width", results,
                lambda cell, m: cell[m][1] / cell["t"][1] if cell["t"][1] > 0 else np.nan)
    differences = print_differences(args.resamples, args.seed)
    print_target(results, differences)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

"""Coverage of the meta-evaluation's 95% interval, and of the human all-models mean's: resampling prompts vs. images.

Simulated CulturalFrames-like data (Nayak et al., arXiv:2506.08835: each prompt rendered by 4 models, 3 raters per
image, overall 1-5): latent quality = prompt effect + image effect; each rater = latent + noise; the metric =
latent + a prompt-level error it makes on all four images of the prompt + image noise. The true like-for-like
agreement (``meta_eval.leave_one_out_agreement`` of the metric) is estimated on one very large data set; each small
data set's percentile interval is checked for containing it. Seeded; prints one table row per resampling scheme.

The same simulated raters give the human aggregates' all-models mean overall score (``human.human_aggregates``,
grouping every model together): its interval resamples prompts (the four images of a prompt together), the former
one treated the images as independent (``mean_ci`` over the images' means); both are checked against the mean of
the very large data set.

    .venv/bin/python benchmarks/meta_eval_coverage.py            # 300 data sets of 60 prompts, 500 resamples
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from benchmark.expectations import human, meta_eval
from benchmark.stats import mean_ci

MODELS = 4


def simulate(rng: np.random.Generator, n_prompts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(metric score, images x 3 raters matrix, prompt of each image) of one simulated data set."""
    n = n_prompts * MODELS
    prompts = np.repeat(np.arange(n_prompts), MODELS)
    latent = rng.normal(0, 0.7, n_prompts)[prompts] + rng.normal(0, 0.7, n)
    raters = np.clip(np.round(3 + latent[:, None] + rng.normal(0, 1.5, (n, 3))), 1, 5)
    metric = latent + rng.normal(0, 1.0, n_prompts)[prompts] + rng.normal(0, 0.5, n)
    return metric, raters, prompts


def ratings_table(raters: np.ndarray, prompts: np.ndarray) -> pd.DataFrame:
    """The simulated overall scores as a CulturalFrames ratings table (one row per rater; other criteria constant)."""
    images = len(raters)
    return pd.DataFrame({"image_id": np.repeat(np.arange(images), 3).astype(str),
                         "prompt_id": np.repeat(prompts, 3).astype(str), "model": np.repeat(np.arange(images) % MODELS, 3),
                         "country": "X", "domain": "Y", "alignment": 1.0, "explicit_error": False,
                         "implicit_error": False, "quality": 1.0, "overall": raters.ravel(), "stereotype": False})


def human_intervals(raters: np.ndarray, prompts: np.ndarray, resamples: int) -> dict[str, tuple[float, float]]:
    """The all-models mean overall score's 95% interval as ``human_aggregates`` gives it, and over images."""
    table = human.human_aggregates(ratings_table(raters, prompts), groupings=((),), n_resamples=resamples)
    row = table[table["statistic"] == "mean_overall"].iloc[0]
    return {"prompts (human_aggregates)": (row["ci_low"], row["ci_high"]), "images": mean_ci(raters.mean(axis=1))}


def interval(metric: np.ndarray, raters: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """2.5th and 97.5th percentiles of the metric's like-for-like agreement over the resamples in ``weights``."""
    draws = meta_eval.leave_one_out_agreement(np.repeat(metric[:, None], 3, axis=1), raters, weights)
    low, high = np.percentile(draws[np.isfinite(draws)], [2.5, 97.5])
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=300)
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    metric, raters, _ = simulate(rng, 50_000)
    truth = float(meta_eval.leave_one_out_agreement(np.repeat(metric[:, None], 3, axis=1), raters)[0])
    human_truth = float(raters.mean())
    covered = {"prompts (cluster bootstrap)": 0, "images": 0}
    human_covered = {"prompts (human_aggregates)": 0, "images": 0}
    for _ in range(args.datasets):
        metric, raters, prompts = simulate(rng, args.prompts)
        by_prompt = meta_eval.prompt_resample_weights(prompts, args.resamples, rng)
        by_image = rng.multinomial(len(metric), np.full(len(metric), 1 / len(metric)), size=args.resamples)
        for scheme, weights in zip(covered, (by_prompt, by_image)):
            low, high = interval(metric, raters, weights)
            covered[scheme] += low <= truth <= high
        for scheme, (low, high) in human_intervals(raters, prompts, args.resamples).items():
            human_covered[scheme] += low <= human_truth <= high
    print(f"true agreement {truth:.3f}, true mean overall score {human_truth:.3f}; {args.datasets} data sets of "
          f"{args.prompts} prompts x {MODELS} models, {args.resamples} resamples")
    for title, counts in (("metric agreement", covered), ("human all-models mean overall score", human_covered)):
        print(f"\n{title}\n| resampled | coverage of the 95% interval |\n|---|---|")
        for scheme, hits in counts.items():
            share = hits / args.datasets
            print(f"| {scheme} | {share:.3f} (+/- {1.96 * np.sqrt(share * (1 - share) / args.datasets):.3f}) |")


if __name__ == "__main__":
    main()

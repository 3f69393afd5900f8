"""W1KP_k curve: our estimator against the authors' algorithm, on the same normalised distances.

    python benchmarks/w1kp_speed.py [--images 300] [--subsets 1000]

The authors' code (castorini/w1kp, ``ListwiseDreamSimDistanceMeasure``) estimates eta_k
by drawing 1,000 random subsets per size k and taking each subset's minimum by indexing
the distance matrix in a Python loop. Ours draws 1,000 random orders once and reads
eta_k for every k = 2..n off their running minima
(``benchmark.metrics.variability.eta_k_curve``). Both produce the whole reusability
curve, k = 2..300, and must agree within their combined Monte Carlo error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmark.metrics.variability import Calibration, eta_k_curve, pairwise_squared_l2


def authors_algorithm(normalized: np.ndarray, size: int, subsets: int, rng: np.random.Generator):
    """Per size: `subsets` random subsets, each min found by indexing in a Python loop (their method)."""
    values = []
    for _ in range(subsets):
        index = rng.permutation(len(normalized))[:size]
        block = normalized[index][:, index].copy()
        np.fill_diagonal(block, 1e7)
        values.append(block.min())
    values = np.asarray(values)
    return values.mean(), values.std(ddof=1) / np.sqrt(subsets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--subsets", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    # 300 images of one prompt: clustered features, so that eta_k falls steadily with k.
    centres = rng.normal(size=(40, 32))
    features = centres[rng.integers(0, 40, args.images)] + 0.6 * rng.normal(size=(args.images, 32))
    distances = pairwise_squared_l2(features)
    calibration = Calibration.fit(distances[np.triu_indices(args.images, 1)])
    normalized = calibration.normalize(distances)

    sizes = list(range(2, args.images + 1))
    start = time.perf_counter()
    theirs = {k: authors_algorithm(normalized, k, args.subsets, rng) for k in sizes}
    t_theirs = time.perf_counter() - start
    start = time.perf_counter()
    ours = eta_k_curve(normalized, n_permutations=args.subsets, seed=1, exact_limit=0)
    t_ours = time.perf_counter() - start

    z = []
    for k in sizes:
        mean, error = theirs[k]
        combined = np.hypot(error, ours.standard_error[k - 2])
        z.append(abs(mean - ours.eta[k - 2]) / combined if combined > 0 else 0.0)
        if k in (2, 5, 10, 25, 50, 100, 150, 200, args.images):
            print(f"k={k:4d}  authors {mean:.4f} +- {error:.4f}   ours {ours.eta[k - 2]:.4f} +- "
                  f"{ours.standard_error[k - 2]:.4f}   |diff| / combined SE = {z[-1]:.2f}")
    z = np.asarray(z)
    print(f"authors' algorithm, k = 2..{args.images}: {t_theirs:7.2f} s")
    print(f"ours, k = 2..{args.images}:               {t_ours:7.2f} s   speed-up {t_theirs / t_ours:6.1f}x "
          f"(target >= 50x)")
    print(f"|diff| / combined standard error over {len(sizes)} sizes: median {np.median(z):.2f}, "
          f"share above 3: {np.mean(z > 3):.3f} (about 0.003 expected by chance)")


if __name__ == "__main__":
    main()

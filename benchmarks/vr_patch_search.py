"""Visual-reuse patch search: faiss against a numpy loop, on the same patch embeddings.

    python benchmarks/vr_patch_search.py [--images 10000] [--references 50] [--dim 768]

Eq. 2 of the CRT paper (arXiv:2511.11435) needs, for every patch of every recognised
image, its best cosine over the pool of all reference patches. The workload here is
10,000 images x 16 patches against 50 references x 16 patches (a moving reference's
pool), DINO-base sized (768-d) vectors. Two numpy baselines: a loop over patches, each
compared with the whole pool (Eq. 2 written as it reads: s_k = max_q cos(p_k, q)), and a
loop over images, each image's (16 x 800) similarity matrix at once. Ours
(``benchmark.metrics.iconicity.patch_similarity``) sends every patch to one exact faiss
inner-product index. All must give the same maxima.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmark.metrics.iconicity import patch_similarity


def per_patch_loop(generated: np.ndarray, references: np.ndarray) -> np.ndarray:
    pool = references.reshape(-1, references.shape[-1])
    pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
    out = np.empty(generated.shape[:2])
    for i, patches in enumerate(generated):
        for k, patch in enumerate(patches):
            out[i, k] = (pool @ (patch / np.linalg.norm(patch))).max()
    return out


def per_image_loop(generated: np.ndarray, references: np.ndarray) -> np.ndarray:
    pool = references.reshape(-1, references.shape[-1])
    pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
    out = np.empty(generated.shape[:2])
    for i, patches in enumerate(generated):
        patches = patches / np.linalg.norm(patches, axis=1, keepdims=True)
        out[i] = (patches @ pool.T).max(axis=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--references", type=int, default=50)
    parser.add_argument("--dim", type=int, default=768)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    generated = rng.normal(size=(args.images, 16, args.dim)).astype(np.float32)
    references = rng.normal(size=(args.references, 16, args.dim)).astype(np.float32)
    patch_similarity(generated[:10], references)  # warm-up (faiss import, threads)
    start = time.perf_counter()
    ours, _ = patch_similarity(generated, references)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    by_image = per_image_loop(generated, references)
    t_image = time.perf_counter() - start
    start = time.perf_counter()
    by_patch = per_patch_loop(generated, references)
    t_patch = time.perf_counter() - start
    print(f"{args.images} images x 16 patches vs {args.references} references x 16 patches, {args.dim}-d")
    print(f"numpy loop over patches: {t_patch:7.2f} s   faiss speed-up {t_patch / t_ours:5.1f}x (target >= 10x)")
    print(f"numpy loop over images:  {t_image:7.2f} s   faiss speed-up {t_image / t_ours:5.1f}x")
    print(f"faiss, one exact index:  {t_ours:7.2f} s")
    print(f"largest difference of the maxima: {max(np.abs(ours - by_patch).max(), np.abs(ours - by_image).max()):.2e}")


if __name__ == "__main__":
    main()

"""Visual-reuse patch search: faiss (CPU) and the GPU search against numpy loops, on the same patch embeddings.

    python benchmarks/vr_patch_search.py [--images 10000] [--references 50] [--dim 768] [--device cuda]

Eq. 2 of the CRT paper (arXiv:2511.11435) needs, for every patch of every recognised
image, its best cosine over the pool of all reference patches. The workload here is
10,000 images x 16 patches against 50 references x 16 patches (a moving reference's
pool), DINO-base sized (768-d) vectors. Two numpy baselines: a loop over patches, each
compared with the whole pool (Eq. 2 written as it reads: s_k = max_q cos(p_k, q)), and a
loop over images, each image's (16 x 800) similarity matrix at once. Ours
(``benchmark.metrics.iconicity.patch_similarity``) sends every patch to one exact faiss
inner-product index, or with ``--device cuda`` to chunked float32 matrix products on the GPU; both then
settle near-ties with exact integer cosines, so the two must agree bit for bit, and with numpy to float32
rounding.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import torch

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
    parser.add_argument("--device", default="cpu", help="cuda: also time the GPU search")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    generated = rng.normal(size=(args.images, 16, args.dim)).astype(np.float32)
    references = rng.normal(size=(args.references, 16, args.dim)).astype(np.float32)
    patch_similarity(generated[:10], references, device="cpu")  # warm-up (faiss import, threads)
    start = time.perf_counter()
    ours, match = patch_similarity(generated, references, device="cpu")
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
    if args.device.startswith("cuda"):
        patch_similarity(generated[:1000], references, device=args.device)  # warm-up (context, cuBLAS)
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            on_gpu, gpu_match = patch_similarity(generated, references, device=args.device)
            times.append(time.perf_counter() - start)
        t_gpu = float(np.median(times))
        print(f"GPU ({torch.cuda.get_device_name()}), median of 5, host arrays in and out: {t_gpu * 1e3:7.1f} ms")
        print(f"  speed-up over the numpy loop over patches {t_patch / t_gpu:7.1f}x (target >= 10x), over images "
              f"{t_image / t_gpu:6.1f}x, over faiss {t_ours / t_gpu:6.1f}x")
        print(f"  GPU == CPU (faiss) bit for bit: maxima {np.array_equal(on_gpu, ours)}, "
              f"matches {np.array_equal(gpu_match, match)}")


if __name__ == "__main__":
    main()

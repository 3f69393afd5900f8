"""Tagging throughput: the faiss artifact index against brute-force numpy, on the same vectors.

    python benchmarks/tagging_speed.py [--artifacts 300000] [--queries 4000] [--dim 512] [--chunk 256]

CUBE-CSpace has ~300k artifacts (arXiv:2407.06863, Sec. 3.1). The workload: random unit text embeddings of
that many artifacts over CUBE's three concepts (equal shares), and a few thousand random unit image
embeddings, each tagged with its best artifact (k = 1) within its concept. Measured in one run:

- ``benchmark.tagging.ArtifactIndex.tag``: one exact faiss inner-product index per concept, the whole
  tagging path (grouping by concept, the result table);
- numpy, restricted to each concept: per concept, chunks of queries @ that concept's vectors, argmax;
- numpy over all artifacts, then the best within the concept (mask the others): the naive full scan.

All must find the same artifacts (random vectors have no ties).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmark.tagging import ArtifactIndex

CONCEPTS = ("cuisine", "landmarks", "art")


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def numpy_per_concept(vectors: np.ndarray, concept_of: np.ndarray, queries: np.ndarray, query_concepts: np.ndarray,
                      chunk: int) -> np.ndarray:
    best = np.empty(len(queries), dtype=np.int64)
    for concept in CONCEPTS:
        members = np.flatnonzero(concept_of == concept)
        block = vectors[members]
        chosen = np.flatnonzero(query_concepts == concept)
        for start in range(0, len(chosen), chunk):
            part = chosen[start:start + chunk]
            best[part] = members[np.argmax(queries[part] @ block.T, axis=1)]
    return best


def numpy_full_scan(vectors: np.ndarray, concept_of: np.ndarray, queries: np.ndarray, query_concepts: np.ndarray,
                    chunk: int) -> np.ndarray:
    best = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), chunk):
        similarity = queries[start:start + chunk] @ vectors.T
        similarity[concept_of[None, :] != query_concepts[start:start + chunk, None]] = -np.inf
        best[start:start + chunk] = np.argmax(similarity, axis=1)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=4000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--chunk", type=int, default=256, help="queries per numpy matrix product")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(args.artifacts, args.dim)))
    concept_of = np.array(CONCEPTS, dtype=object)[np.arange(args.artifacts) % len(CONCEPTS)]
    cspace = pd.DataFrame({"artifact_id": [f"Q{i}" for i in range(args.artifacts)],
                           "artifact": [f"artifact {i}" for i in range(args.artifacts)], "concept": concept_of,
                           "country": "Japan", "country_code": "JP", "continent": "Asia"})

    def encode(texts: list[str]) -> np.ndarray:  # "a photo of artifact i" -> the i-th random vector
        return vectors[[int(t.rsplit(" ", 1)[1]) for t in texts]]

    start = time.perf_counter()
    index = ArtifactIndex.build(cspace, encode, backbone_id="random", backbone_key="random", batch_size=4096)
    t_build = time.perf_counter() - start
    queries = unit(rng.normal(size=(args.queries, args.dim)))
    query_concepts = np.array(CONCEPTS, dtype=object)[rng.integers(0, len(CONCEPTS), args.queries)]
    index.tag(queries[:10], query_concepts[:10])  # warm-up (threads)

    start = time.perf_counter()
    tags = index.tag(queries, query_concepts)
    t_faiss = time.perf_counter() - start
    start = time.perf_counter()
    restricted = numpy_per_concept(vectors, concept_of, queries, query_concepts, args.chunk)
    t_restricted = time.perf_counter() - start
    start = time.perf_counter()
    full = numpy_full_scan(vectors, concept_of, queries, query_concepts, args.chunk)
    t_full = time.perf_counter() - start

    found = tags["artifact_id"].str[1:].astype(int).to_numpy()
    agree = np.mean(found == restricted), np.mean(found == full)
    print(f"{args.artifacts} artifacts in {len(CONCEPTS)} concepts, {args.queries} queries, {args.dim}-d, k = 1")
    print(f"index build (text embeddings given, dedup + 3 faiss indexes): {t_build:6.2f} s")
    print(f"ArtifactIndex.tag (faiss, per concept): {t_faiss:6.2f} s  {args.queries / t_faiss:8.0f} images/s")
    print(f"numpy, per concept:                     {t_restricted:6.2f} s  {args.queries / t_restricted:8.0f} images/s"
          f"   ratio numpy / faiss {t_restricted / t_faiss:5.2f}x")
    print(f"numpy, full scan + concept mask:        {t_full:6.2f} s  {args.queries / t_full:8.0f} images/s"
          f"   ratio numpy / faiss {t_full / t_faiss:5.2f}x")
    print(f"same artifact as numpy per concept: {agree[0]:.2%}; as the full scan: {agree[1]:.2%}")


if __name__ == "__main__":
    main()

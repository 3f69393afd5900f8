"""Visual entity linking (CAIRE, Yayavaram et al., arXiv:2506.09109, Sec. 3.1).

1. Eq. 1: ``N(I) = TopK(sim(E_I, E_KB))``: the K (20) knowledge-base images most similar to the query image
   (cosine), and the entities they belong to, pooled (an image may belong to several entities). After pooling
   the candidates are treated alike, whatever their image's rank (App. A.4).
2. Eq. 2: ``e* = argmax_{e in N(I)} sim(E_I, E_e^text)``: the candidate whose lemma text embedding is most
   similar to the query image. The nearest image's entity is therefore not always the pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

TOP_K = 20


@dataclass(frozen=True)
class Link:
    """e* for one query image: its entity row and id, ``score`` = cos(E_I, E_e*^text), and the pooled
    candidates N(I) (entity ids in first-retrieved order) with their lemma cosines."""

    entity: int
    entity_id: str
    score: float
    candidates: tuple[str, ...]
    candidate_scores: tuple[float, ...]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("a query embedding has zero norm: cosine is undefined")
    return x / norms


def link_entities(queries: np.ndarray, image_index, image_entities: Sequence[Sequence[int]],
                  lemma_embeddings: np.ndarray, entity_ids: Sequence[str], k: int = TOP_K) -> list[Link]:
    """Link each of the (N, D) query image embeddings to one knowledge-base entity (Eq. 1, then Eq. 2).

    ``image_index``: a faiss inner-product index over the unit-norm KB image embeddings; row r belongs to the
    entity rows ``image_entities[r]``. ``lemma_embeddings``: (E, D) unit-norm lemma text embeddings, row e
    being entity ``entity_ids[e]``. Ties in Eq. 2 go to the candidate retrieved first.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if image_index.ntotal == 0:
        raise ValueError("the knowledge base has no image: nothing to link to")
    queries = _unit(np.atleast_2d(queries))
    lemmas = np.asarray(lemma_embeddings, dtype=np.float32)
    if queries.shape[1] != image_index.d or lemmas.shape[1] != image_index.d:
        raise ValueError(f"dimension mismatch: queries {queries.shape[1]}, KB images {image_index.d}, "
                         f"lemmas {lemmas.shape[1]} (embed queries with the backbone the KB was built with)")
    _, neighbours = image_index.search(np.ascontiguousarray(queries), min(k, image_index.ntotal))
    links = []
    for query, rows in zip(queries, neighbours):
        candidates = list(dict.fromkeys(e for r in rows if r >= 0 for e in image_entities[r]))
        similarity = lemmas[candidates] @ query
        best = int(np.argmax(similarity))
        links.append(Link(candidates[best], entity_ids[candidates[best]], float(similarity[best]),
                          tuple(entity_ids[e] for e in candidates), tuple(float(s) for s in similarity)))
    return links

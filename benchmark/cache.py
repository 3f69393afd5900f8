"""Content-addressed cache of embeddings, and of producers' outputs: one SQLite file each, safe for several
workers on one machine.

An entry's key is the sha256 of (content sha256, backbone key, need): the image
or text bytes, the exact weights, revision and preprocessing that embedded them
(``Backbone.key``), and what was embedded (global image, 4x4 grid, text). File
paths never enter a key, so the same image in two submissions is embedded once.

Every entry stores its full key description and a checksum of its dtype, shape
and bytes; a read returns an array only if both match, so a corrupt or
half-written entry is a miss (and is recomputed), never a wrong vector. A cache
file SQLite itself finds corrupt (truncated, overwritten) is moved aside to
``<name>.corrupt-<time>`` and a fresh one started: the cache only holds derived
data, so the cost is recomputation. Writers use SQLite transactions (WAL mode):
two processes can fill one cache at the same time.

Producers' outputs (``benchmark.features.producers``: a VLM tagger's or judge's probabilities) are arrays too,
kept the same way in a file beside the embeddings (``EmbeddingCache.beside``), keyed by ``product_key``: the
image's content, the model id and revision, the sha256 of the exact prompt the model reads, and the label. A
crashed run, or one more metric over the same images, then reruns no VLM call.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from contextlib import closing
from pathlib import Path
from typing import TypeVar

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
_BROKEN_FILE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")  # the file is damaged, as opposed to busy or locked

log = logging.getLogger("culturelens.cache")
T = TypeVar("T")


def entry_key(content_sha256: str, backbone_key: str, need: str) -> tuple[str, str]:
    """(key, description) of one embedding."""
    description = f"{content_sha256}|{backbone_key}|{need}"
    return hashlib.sha256(description.encode()).hexdigest(), description


def _checksum(dtype: str, shape: str, data: bytes) -> str:
    return hashlib.sha256(f"{dtype}|{shape}|".encode() + data).hexdigest()


def _intact(description: str, row: tuple) -> np.ndarray | None:
    """The array of a stored row (description, dtype, shape, checksum, data), or None if anything in it is off."""
    stored, dtype, shape, checksum, data = row
    try:
        if stored != description or _checksum(dtype, shape, data) != checksum:
            return None
        dims = tuple(int(d) for d in shape.split(",") if d)
        return np.frombuffer(data, dtype=dtype).reshape(dims)
    except (AttributeError, TypeError, ValueError):  # a column overwritten with a value of another type
        return None


def product_key(image_sha256: str, model: str, prompt: str, label: str) -> tuple[str, str]:
    """(key, description) of one producer output: image content, model id and revision, the sha256 of the exact
    prompt text the model reads (template, rubric and candidates included) and the label (culture label or
    candidate set), so that changing any of them misses."""
    prompt_sha256 = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    return entry_key(image_sha256, model, f"prompt {prompt_sha256}|label {label}")


def _use_wal(db: sqlite3.Connection, timeout: float = 60.0) -> None:
    """Put the database file in WAL mode (kept in the file: once set, every later connection finds it). Switching
    takes an exclusive lock and SQLite answers "database is locked" at once, without its busy timeout, while another
    process (a second scoring process creating the same cache) holds one: retry until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")  # a file system without WAL keeps its mode: no error, no retry
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class EmbeddingCache:
    """Arrays by key in ``path`` (SQLite). ``get_many`` and ``put_many`` work in bulk."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._guarded(self._create)

    def _create(self) -> None:
        with closing(self._connect()) as db:
            _use_wal(db)
            db.execute(_SCHEMA)

    def beside(self, name: str) -> EmbeddingCache:
        """A cache in a file next to this one, ``<stem>.<name><suffix>`` (``cache.sqlite`` ->
        ``cache.products.sqlite``): wherever the embeddings are kept, moved or wiped, so are the producers' outputs."""
        return EmbeddingCache(self.path.with_name(f"{self.path.stem}.{name}{self.path.suffix}"))

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def _guarded(self, operation: Callable[[], T], if_broken: Callable[[], T] | None = None) -> T:
        """Run ``operation``; if SQLite finds the file damaged, move it aside, start afresh and run
        ``if_broken`` (default: ``operation`` again)."""
        inode = _inode(self.path)
        try:
            return operation()
        except sqlite3.DatabaseError as error:
            if getattr(error, "sqlite_errorname", None) not in _BROKEN_FILE:
                raise
            self._quarantine(inode, error)
        self._create()
        return (if_broken or operation)()

    def _quarantine(self, inode: int | None, error: sqlite3.DatabaseError) -> None:
        # Only the file that failed: another process may already have replaced it with a fresh one.
        if inode is None or _inode(self.path) != inode:
            return
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        log.warning("cache %s is damaged (%s): moved to %s, starting a fresh one", self.path, error, aside)
        for suffix in ("", "-wal", "-shm"):  # a stale WAL must not be replayed into the fresh file
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{aside}{suffix}")

    def get_many(self, requests: Iterable[tuple[str, str]]) -> dict[str, np.ndarray]:
        """Arrays for the (key, description) pairs present and intact; absent or corrupt ones are left out."""
        wanted = dict(requests)
        return self._guarded(lambda: self._get(wanted), if_broken=dict)

    def _get(self, wanted: dict[str, str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        corrupt: list[str] = []
        keys = list(wanted)
        with closing(self._connect()) as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = db.execute(f"SELECT key, description, dtype, shape, checksum, data FROM embeddings "
                                  f"WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                for key, *row in rows:
                    array = _intact(wanted[key], tuple(row))
                    if array is None:
                        corrupt.append(key)
                    else:
                        found[key] = array
            if corrupt:
                db.execute(f"DELETE FROM embeddings WHERE key IN ({','.join('?' * len(corrupt))})", corrupt)
        return found

    def put_many(self, entries: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Store (key, description, array) entries in one transaction; returns how many."""
        rows = []
        for key, description, array in entries:
            array = np.ascontiguousarray(array)
            data, dtype, shape = array.tobytes(), array.dtype.str, ",".join(map(str, array.shape))
            rows.append((key, description, dtype, shape, _checksum(dtype, shape, data), data))
        if not rows:
            return 0
        self._guarded(lambda: self._put(rows))
        return len(rows)

    def _put(self, rows: list[tuple]) -> None:
        with closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.execute("COMMIT")

    def __len__(self) -> int:
        def count() -> int:
            with closing(self._connect()) as db:
                return db.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        return self._guarded(count)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None

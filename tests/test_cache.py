"""The embedding cache: content keys, integrity checks, and two writers at once."""

from __future__ import annotations

import multiprocessing
import sqlite3

import numpy as np

from benchmark.cache import EmbeddingCache, entry_key


def test_round_trip_returns_exactly_what_was_stored(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    a = entry_key("sha-a", "open_clip:ViT-B-32:openai@tag:openai#p1", "image")
    b = entry_key("sha-b", "open_clip:ViT-B-32:openai@tag:openai#p1", "grid4x4")
    grid = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    cache.put_many([(*a, np.array([1.0, 2.0], dtype=np.float32)), (*b, grid)])
    got = cache.get_many([a, b])
    assert got[a[0]].tolist() == [1.0, 2.0] and got[b[0]].dtype == np.float32 and np.array_equal(got[b[0]], grid)
    assert len(cache) == 2


def test_keys_separate_content_weights_preprocessing_and_need():
    base = entry_key("sha", "clip@r1#p1", "image")[0]
    assert len({base, entry_key("sha2", "clip@r1#p1", "image")[0], entry_key("sha", "clip@r2#p1", "image")[0],
                entry_key("sha", "clip@r1#p2", "image")[0], entry_key("sha", "clip@r1#p1", "text")[0]}) == 5


def test_a_corrupt_entry_is_a_miss_and_is_removed(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    good, bad = entry_key("sha-good", "m", "image"), entry_key("sha-bad", "m", "image")
    cache.put_many([(*good, np.ones(4, dtype=np.float32)), (*bad, np.ones(4, dtype=np.float32))])
    with sqlite3.connect(tmp_path / "c.sqlite") as db:  # a torn write: half the bytes
        db.execute("UPDATE embeddings SET data = substr(data, 1, 8) WHERE key = ?", (bad[0],))
    assert set(cache.get_many([good, bad])) == {good[0]}
    assert len(cache) == 1


def test_an_entry_is_never_returned_for_another_description(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    key, description = entry_key("sha", "m", "image")
    cache.put_many([(key, description, np.ones(2, dtype=np.float32))])
    assert cache.get_many([(key, "sha|other-model|image")]) == {}


def _writer(path, offset, count, ready):
    ready.wait()
    cache = EmbeddingCache(path)
    for i in range(offset, offset + count, 10):
        cache.put_many([(*entry_key(f"sha-{j}", "m", "image"), np.full(8, j, dtype=np.float32))
                        for j in range(i, i + 10)])


def test_two_processes_can_write_at_once(tmp_path):
    path = tmp_path / "c.sqlite"
    EmbeddingCache(path)
    ready = multiprocessing.Event()
    writers = [multiprocessing.Process(target=_writer, args=(path, offset, 400, ready)) for offset in (0, 400)]
    for w in writers:
        w.start()
    ready.set()
    for w in writers:
        w.join(timeout=120)
        assert w.exitcode == 0
    requests = [entry_key(f"sha-{j}", "m", "image") for j in range(800)]
    got = EmbeddingCache(path).get_many(requests)
    assert len(got) == 800
    assert all(got[key][0] == j for j, (key, _) in enumerate(requests))

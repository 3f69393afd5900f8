"""Crash recovery: scoring workers SIGKILLed at random points (the fast part of ``benchmarks/crash_soak.py``),
and damaged embedding caches, which must cost recomputation and nothing else."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pyarrow.parquet as pq
import pytest

from benchmark import harness
from benchmark.scoring_options import ScoringOptions
from benchmark.cache import EmbeddingCache
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts, load_prompts_for
from benchmark.encoders import load_backbone
from benchmark.metrics.alignment import ClipCosine
from benchmark.submission import stage
from culturelens.testing.soak import Soak, build_store, figure_lines
from culturelens.testing.submissions import make_submission

pytestmark = pytest.mark.slow  # kills worker processes mid-scoring; the damaged-cache tests score through the harness


def _soak(root, backbones_file, queue, remote=None) -> Soak:
    """A soak over a store in ``root`` (its logs beside it), with a short lease and 6 prompts x 24 seeds of 96 px."""
    (root / "logs").mkdir()
    return Soak(build_store(root, queue), backbones_file, root / "logs", queue=queue, remote=remote,
                lease_seconds=2.0, seeds=24, size=96)


def _kill_and_check(soak: Soak, capsys, *, kills: int, workers: int) -> tuple[dict, list[str]]:
    """``kills`` SIGKILLs among ``workers`` first started (none replaced), then the soak's checks; the figures are
    printed (as the benchmark prints them)."""
    try:
        soak.run(kills=kills, workers=workers, rng=random.Random(0), max_delay=1.0, timeout=500, replace=False)
    finally:
        soak.stop_workers()
    figures, problems = soak.check()
    with capsys.disabled():
        print("\n" + "\n".join(figure_lines(figures)))
    return figures, problems


def test_killed_workers_lose_nothing_and_score_nothing_twice(tmp_path, backbones_file, capsys, store_queue):
    """On each queue backend: the store's SQLite file, or a PostgreSQL server (the store's disk still shared)."""
    soak = _soak(tmp_path, backbones_file, store_queue)
    figures, problems = _kill_and_check(soak, capsys, kills=3, workers=4)
    assert problems == [] and figures["scored_twice"] == 0
    assert figures["kills"] == 3 and len({k.job for k in soak.kills}) == 3  # three jobs, each killed once
    assert figures["failed"] == 0 and figures["takeovers"] >= 3
    assert figures["resumed_with_cache"] >= 1 and figures["embeddings_present_at_kill"] > 0
    assert figures["embeddings_reused"] == figures["embeddings_present_at_kill"]


def test_killed_remote_workers_on_separate_stores_lose_nothing_and_score_nothing_twice(tmp_path, backbones_file, capsys,
                                                                                      postgres_url):
    """Workers sharing only a PostgreSQL queue and two repos (folders standing in for the Hub's) with the app:
    each on a store of its own, fetching shards and publishing results; the app picks the results up."""
    soak = _soak(tmp_path, backbones_file, postgres_url, remote=tmp_path / "remote")
    figures, problems = _kill_and_check(soak, capsys, kills=2, workers=3)
    assert problems == [] and figures["scored_twice"] == 0
    assert figures["kills"] == 2 and figures["failed"] == 0 and figures["takeovers"] >= 2
    assert len(set(soak.machines.values())) == 3  # three stores, none of them the app's
    published = {p.name for p in (soak.results_repo / "results").iterdir()}
    assert published == {j.id for j in soak.store.queue.jobs() if j.state == "FINISHED"}


# --- damaged caches -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scoring(tmp_path_factory, tiny_dataset_root, tiny_clip):
    """score(cache) -> Scores for a staged 6-prompt x 2-seed submission, with the tiny CLIP."""
    root = tmp_path_factory.mktemp("damaged-cache")
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=tiny_dataset_root).table.index)
    report = stage(make_submission(root / "source", ids), root / "staging",
                   lambda manifest: load_prompts_for(manifest, tiny_dataset_root))
    assert report.ok, report.errors
    staged = report.keep(root / "staged")
    images = pq.read_table(staged / "images.parquet").to_pandas()
    backbones = {"clip-vit-b-32": load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")}

    def score(cache):
        return harness.score(staged, report.manifest, report.prompts, images, [ClipCosine()], backbones, cache,
                             submission_id="damaged", options=ScoringOptions(batch_size=4))
    return score


TOTAL = 12 + 6  # one CLIP image embedding per image, one text embedding per prompt

DAMAGES = {  # SQL applied to one entry each: torn, overwritten, re-typed, re-shaped, wrong type, bad checksum
    "torn write": "UPDATE embeddings SET data = substr(data, 1, 8) WHERE key = ?",
    "garbage bytes": "UPDATE embeddings SET data = randomblob(length(data)) WHERE key = ?",
    "another dtype": "UPDATE embeddings SET dtype = '<f8' WHERE key = ?",
    "another shape": "UPDATE embeddings SET shape = '2,' || (CAST(shape AS INTEGER) / 2) WHERE key = ?",
    "text instead of bytes": "UPDATE embeddings SET data = 'not an embedding' WHERE key = ?",
    "garbage checksum": "UPDATE embeddings SET checksum = 'x' WHERE key = ?",
}


def test_damaged_cache_entries_are_detected_and_recomputed(scoring, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    cold = scoring(cache)
    assert cold.run.embeddings_computed == TOTAL
    with sqlite3.connect(cache.path) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM embeddings ORDER BY key LIMIT ?", (len(DAMAGES),))]
        for sql, key in zip(DAMAGES.values(), keys):
            db.execute(sql, (key,))
    again = scoring(cache)
    assert again.run.embeddings_cached == TOTAL - len(DAMAGES)
    assert again.run.embeddings_computed == len(DAMAGES)
    # recomputed in other batches than the first time: equal up to float32 rounding
    np.testing.assert_allclose(again.per_image["value"].to_numpy(), cold.per_image["value"].to_numpy(), atol=1e-6)
    assert scoring(cache).run.embeddings_cached == TOTAL and len(cache) == TOTAL


@pytest.mark.parametrize("damage", ["truncated to half", "header overwritten"])
def test_a_damaged_cache_file_is_moved_aside_and_rebuilt(scoring, tmp_path, damage):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    cold = scoring(cache)
    with sqlite3.connect(cache.path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = cache.path.stat().st_size
    with open(cache.path, "r+b") as file:
        if damage == "truncated to half":
            file.truncate(size // 2)
        else:
            file.write(b"\xde\xad" * 50)
    again = scoring(cache)
    assert (again.run.embeddings_cached, again.run.embeddings_computed) == (0, TOTAL)
    assert np.array_equal(again.per_image["value"].to_numpy(), cold.per_image["value"].to_numpy())
    assert [p.name.split("-")[0] for p in tmp_path.glob("cache.sqlite.corrupt-*") if "-wal" not in p.name
            and "-shm" not in p.name] == ["cache.sqlite.corrupt"]
    assert scoring(EmbeddingCache(cache.path)).run.embeddings_cached == TOTAL

"""Concurrency: two worker processes on one store (its queue on each backend), uploads while they score, and app reads while results are
being written. Nothing is scored twice and no reader ever sees half a results folder."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmark import layout, results
from benchmark.run_record import RunRecord
from culturelens.testing.soak import Soak, build_store
from leaderboard.catalog import Catalog
from leaderboard.store import Store

_SCORING = re.compile(r"scoring (\S+) \(")


class Reader(threading.Thread):
    """Reads the store as fast as it can until stopped, the way the app does (its catalog) and the way any
    program listing ``results/`` would; records what it saw and every inconsistency. ``files``: what a complete
    results folder holds (a worker's: the result tables, run.json and its seal, ``layout.SEALED_FILES``)."""

    def __init__(self, store: Store, files=layout.SEALED_FILES):
        super().__init__(daemon=True)
        self.store, self.errors, self.counts = store, [], Counter()
        self.files = set(files)
        self.reads, self.stopped = 0, threading.Event()

    def run(self) -> None:
        catalog = Catalog(self.store)
        while not self.stopped.is_set():
            try:
                catalog.refresh(force=True)
                seen = catalog.query("SELECT submission_id, count(*) AS n FROM aggregates WHERE provenance = "
                                     "'scored' GROUP BY submission_id")
                for submission_id, n in zip(seen["submission_id"], seen["n"]):
                    self.counts[(submission_id, int(n))] += 1
                    pq.read_table(self.store.results / submission_id / "per_image.parquet")
                for entry in os.scandir(self.store.results):  # a results folder is complete whenever it is there
                    if entry.name.startswith("."):
                        continue
                    files = set(os.listdir(entry.path))
                    if files != self.files:
                        self.errors.append(f"{entry.name}: present with only {sorted(files)}")
                    else:
                        json.loads(Path(entry.path, "run.json").read_text())
                self.reads += 1
            except Exception as error:  # noqa: BLE001 - any failed read is a finding, reported by the test
                self.errors.append(f"{type(error).__name__}: {error}")


@pytest.mark.slow
def test_two_workers_share_a_store_without_scoring_anything_twice(tmp_path, backbones_file, store_queue):
    """On each queue backend: the store's SQLite file, or a PostgreSQL server (the store's disk still shared)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    soak = Soak(build_store(tmp_path, store_queue), backbones_file, logs, queue=store_queue, lease_seconds=5.0,
                seeds=8, size=96)
    first = [soak.submit() for _ in range(6)]
    reader = Reader(soak.store)
    reader.start()
    try:
        soak.start_worker()
        soak.start_worker()
        queue = soak.store.queue
        deadline = time.monotonic() + 400
        while not any(queue.get(i).state == "FINISHED" for i in first):  # uploads arrive while workers score
            assert time.monotonic() < deadline, "no submission was scored"
            soak.check_alive()
            time.sleep(0.2)
        later = [soak.submit() for _ in range(3)]
        while any(j.state in ("PENDING", "RUNNING") for j in queue.jobs()):
            assert time.monotonic() < deadline, "the queue did not drain"
            soak.check_alive()
            time.sleep(0.2)
    finally:
        soak.stop_workers()
        reader.stopped.set()
        reader.join()
    jobs = soak.store.queue.jobs()
    assert {j.id for j in jobs} == set(first + later)
    assert all(j.state == "FINISHED" and j.attempts == 1 for j in jobs), [(j.id, j.state, j.error) for j in jobs]
    scored_by = [Counter(_SCORING.findall(log.read_text(errors="replace"))) for log in sorted(logs.glob("worker-*"))]
    assert sum(scored_by, Counter()) == Counter({j.id: 1 for j in jobs}), "a submission was scored twice"
    assert all(scored_by), "each worker should have scored something"
    figures, problems = soak.check()
    assert problems == []
    # Each submission was seen with one row count only: its full results, never a part of them.
    counts = Counter(submission_id for submission_id, _ in reader.counts)
    assert reader.errors == [] and reader.reads > 0 and all(n == 1 for n in counts.values())


# --- readers against a writer, in-process and fast -------------------------------------------------------------
N_SLICES = 40


def _rows(submission_id: str) -> tuple[list[dict], list[dict], list[dict]]:
    per_image = [{"submission_id": submission_id, "model": submission_id, "prompt_id": f"p{i}", "seed": s,
                  "track": "awareness", "metric": "clip_cosine", "value": 0.1 * i + s} for i in range(50) for s in (0, 1)]
    aggregates = [{"provenance": "scored", "submission_id": submission_id, "model": submission_id,
                   "track": "awareness", "metric": "clip_cosine", "metric_label": "CLIP cosine",
                   "higher_is_better": True, "slice": "country", "slice_value": f"c{j}", "value": j / N_SLICES,
                   "n": 3} for j in range(N_SLICES)]
    curves = [{"submission_id": submission_id, "model": submission_id, "metric": "w1kp_k", "prompt_id": None,
               "x": float(k), "value": 1 / k} for k in range(2, 12)]
    return per_image, aggregates, curves


def _write_many(root: str, count: int) -> None:
    for i in range(count):
        per_image, aggregates, curves = _rows(f"sub-{i:03d}")
        results.write_folder(Path(root) / f"sub-{i:03d}", per_image, aggregates, curves,
                             RunRecord(submission_id=f"sub-{i:03d}"))


@pytest.mark.slow
def test_app_reads_during_result_writes_never_see_a_torn_state(tmp_path):
    store = Store(tmp_path / "store")
    writer = multiprocessing.get_context("spawn").Process(target=_write_many, args=(str(store.results), 150))
    reader = Reader(store, layout.RESULT_FILES)  # results.write_folder's own folders: no seal
    reader.start()
    writer.start()
    writer.join(timeout=300)
    reader.stopped.set()
    reader.join()
    assert writer.exitcode == 0
    assert reader.errors == []
    assert reader.reads > 10 and {n for _, n in reader.counts} == {N_SLICES}
    assert len({s for s, _ in reader.counts}) > 10, "the reader should have watched results appear"


def _killed_write(results_dir: Path, submission_id: str) -> Path:
    """What ``results.write_folder`` leaves when its process is killed before its rename: a hidden
    ``.<id>.<random>`` folder next to the results (made here by writing elsewhere and moving it there)."""
    elsewhere = results_dir.parent / "elsewhere"
    per_image, aggregates, curves = _rows(submission_id)
    results.write_folder(elsewhere / submission_id, per_image, aggregates, curves, RunRecord())
    leftover = results_dir / f".{submission_id}.k1ll3d"
    os.rename(elsewhere / submission_id, leftover)
    shutil.rmtree(elsewhere)
    return leftover


def test_a_killed_writers_leftover_is_invisible_to_the_app(tmp_path):
    store = Store(tmp_path / "store")
    per_image, aggregates, curves = _rows("sub-real")
    results.write_folder(store.results / "sub-real", per_image, aggregates, curves, RunRecord())
    _killed_write(store.results, "sub-ghost")
    catalog = Catalog(store)
    shown = catalog.query("SELECT DISTINCT submission_id FROM aggregates WHERE provenance = 'scored'")
    assert list(shown["submission_id"]) == ["sub-real"]
    assert set(catalog.curves("w1kp_k")["submission_id"]) == {"sub-real"}
    assert not store.has_results("sub-ghost")

"""The store's guarantees over its queue under hostile conditions, on both queue backends where they apply: the
quota under concurrent uploads, deletes and re-runs, server faults that are not the uploader's, and (SQLite) an
old queue file's quota and a damaged queue file rebuilt from the store's folders. The queue's own contract, leases
on the database's clock included, is tests/test_queue.py's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path

import pytest

from benchmark.datasets import cube_1k
from benchmark import results
from benchmark.run_record import RunRecord
from leaderboard import render, seal
from leaderboard.intake import PermissionDenied, kept_image_sets
from leaderboard.queue import open_queue
from leaderboard.store import Store
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from tests.helpers import serving_tiny_cube
from culturelens.testing.submissions import make_submission, write_image

REPO = Path(__file__).resolve().parents[1]


# --- the quota ---------------------------------------------------------------------------------------------
def _store(root: Path, tiny_upstream: Path, queue: str | None = None) -> Store:
    return serving_tiny_cube(Store(root, quota=5, quota_hours=24, attempt_quota=50, queue=queue), tiny_upstream)


@pytest.fixture()
def store(tmp_path, tiny_upstream, store_queue):
    """A store with a quota, its queue on each backend."""
    return _store(tmp_path / "store", tiny_upstream, store_queue)


@pytest.fixture()
def sqlite_store(tmp_path, tiny_upstream):
    """A store with a quota and its own SQLite queue file."""
    return _store(tmp_path / "store", tiny_upstream)


def _folder(store: Store, tmp_path: Path, name: str, image_size: int = 64) -> Path:
    """A valid submission of its own model revision and images (no duplicate of any other)."""
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    folder = make_submission(tmp_path / name, ids, model_name=name)
    data = json.loads((folder / "manifest.json").read_text())
    data["model"]["revision"] = name
    (folder / "manifest.json").write_text(json.dumps(data))
    for i, prompt_id in enumerate(ids):
        for seed in (0, 1):
            path = folder / "images" / prompt_id / f"{seed}.png"
            path.unlink()
            write_image(path, seed=zlib.crc32(f"{name}/{i}/{seed}".encode()), size=image_size)
    return folder


def _accepted(store: Store, tmp_path: Path, name: str, owner: str = "ada"):
    outcome = store.submit(_folder(store, tmp_path, name), owner)
    assert outcome.job is not None, outcome.report.errors
    return outcome.job


def test_concurrent_uploads_cannot_pass_the_quota_together(store, tmp_path):
    for n in range(4):
        _accepted(store, tmp_path, f"before-{n}")
    folders = [_folder(store, tmp_path, f"burst-{n}") for n in range(8)]
    start = threading.Barrier(len(folders))
    outcomes: list[object] = [None] * len(folders)

    def upload(n: int) -> None:
        start.wait()
        try:
            outcomes[n] = store.submit(folders[n], "ada").job
        except PermissionDenied as error:
            outcomes[n] = error

    threads = [threading.Thread(target=upload, args=(n,)) for n in range(len(folders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    accepted = [o for o in outcomes if o is not None and not isinstance(o, PermissionDenied)]
    assert len(accepted) == 1, outcomes
    assert all("the quota is 5" in str(o) for o in outcomes if isinstance(o, PermissionDenied))
    assert len(list(store.submissions.iterdir())) == 5 and list(store.staging.iterdir()) == []
    assert sum(job.owner == "ada" for job in store.queue.jobs()) == 5


def test_deleting_a_submission_does_not_give_the_quota_back(store, tmp_path):
    jobs = [_accepted(store, tmp_path, f"s{n}") for n in range(5)]
    store.delete(jobs[0].id, "ada")
    with pytest.raises(PermissionDenied, match="ada has made 5 submissions .* the quota is 5"):
        store.submit(_folder(store, tmp_path, "after-delete"), "ada")


def test_a_queue_from_before_the_submission_log_keeps_its_quota(tmp_path):
    path = tmp_path / "queue.sqlite"
    with sqlite3.connect(path) as db:  # the queue table as earlier versions wrote it, with no submission log
        db.execute("CREATE TABLE submissions (id TEXT PRIMARY KEY, content_hash TEXT NOT NULL UNIQUE, owner TEXT NOT"
                   " NULL, model TEXT NOT NULL, model_id TEXT, model_revision TEXT, dataset TEXT NOT NULL, state TEXT"
                   " NOT NULL, created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, updated_at TEXT NOT NULL,"
                   " attempts INTEGER NOT NULL DEFAULT 0, lease_owner TEXT, lease_expires REAL, progress REAL,"
                   " message TEXT, error TEXT, log_excerpt TEXT)")
        for n, owner in enumerate(["ada", "ada", "grace"]):
            db.execute("INSERT INTO submissions (id, content_hash, owner, model, dataset, state, created_at,"
                       " updated_at) VALUES (?, ?, ?, 'm', 'd', 'FINISHED', ?, ?)",
                       (f"s{n}", f"sha256:{n}", owner, f"2026-11-2{n}T00:00:00+00:00", "2026-11-22T00:00:00+00:00"))
    queue = open_queue(path)
    assert queue.count_since("ada", "2026-11-01") == 2 and queue.count_since("grace", "2026-11-01") == 1
    assert open_queue(path).count_since("ada", "2026-11-01") == 2  # opened again: logged once
    assert queue.count_since("ada", "2026-11-21") == 1  # the log keeps each submission's own date


def test_a_rerun_counts_against_the_quota(store, tmp_path):
    store.quota = 2
    job = _accepted(store, tmp_path, "first")
    assert store.queue.claim("w", 60).id == job.id and store.queue.finish(job.id, "w", "done")
    results = store.results / job.id
    results.mkdir()
    (results / "run.json").write_text("{}")
    store.rerun(job.id, "ada")  # the second of two: allowed
    assert store.queue.count_since("ada", "1970") == 2
    with pytest.raises(PermissionDenied, match="ada has made 2 submissions"):
        store.submit(_folder(store, tmp_path, "third"), "ada")
    assert store.queue.claim("w", 60).id == job.id and store.queue.finish(job.id, "w", "done again")
    results.mkdir()
    (results / "run.json").write_text("{}")
    with pytest.raises(PermissionDenied, match="ada has made 2 submissions"):
        store.rerun(job.id, "ada")
    assert store.queue.get(job.id).state == "FINISHED" and (results / "run.json").exists()  # refused: untouched


def test_a_failed_hub_fetch_counts_as_an_attempt(store):
    before = store.queue.count_attempts_since("ada", "1970")
    with pytest.raises(ValueError, match="cannot fetch Hub dataset someone/generations"):  # offline in tests
        store.submit_from_hub("someone/generations", "ada")
    assert store.queue.count_attempts_since("ada", "1970") == before + 1
    assert list(store.staging.iterdir()) == []


# --- server faults -------------------------------------------------------------------------------------------
FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from leaderboard.ui.site import Site
    from leaderboard.ui.submit import SubmitTab
    from leaderboard.store import Store

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, resource.RLIM_INFINITY))
    views = SubmitTab(Site(Store(Path(sys.argv[1])), "ada"))
    print(views.submit(sys.argv[2], "", None, lambda *args, **kwargs: None))
""")


@pytest.mark.slow
def test_a_server_that_cannot_store_an_upload_does_not_count_it_against_the_uploader(sqlite_store, tmp_path):
    store = sqlite_store
    folder = _folder(store, tmp_path, "big", image_size=256)  # ~200 kB per image: past the file-size limit
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(store.root), str(folder)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    message = result.stdout.strip().splitlines()[-1]
    assert render.plain("the server could not store the upload (File too large)") in message
    assert "It was not counted against you" in message and render.plain(tmp_path) not in message
    assert store.queue.count_attempts_since("ada", "1970") == 0
    assert list(store.staging.iterdir()) == [] and list(store.submissions.iterdir()) == []


# --- a damaged queue file --------------------------------------------------------------------------------------
def test_a_damaged_queue_file_is_kept_and_the_queue_rebuilt_from_the_folders(sqlite_store, tmp_path):
    store = sqlite_store
    jobs = {job.id: job for job in (_accepted(store, tmp_path, "one", owner="bo"), _accepted(store, tmp_path, "two"))}
    claimed = store.queue.claim("w", 60)
    scored = jobs.pop(claimed.id)
    (waiting,) = jobs.values()
    # Its worker's results, sealed as a worker seals them (leaderboard.seal).
    results.write_folder(store.results / scored.id, [], [], [],
                         RunRecord(submission_id=scored.id, request=1, lease=claimed.lease),
                         then=lambda tmp: seal.seal_folder(tmp, store.results_folders.keys))
    assert store.queue.finish(scored.id, "w", "done")
    path = store.root / "queue.sqlite"
    with open(path, "r+b") as file:
        file.write(bytes(100))

    reopened = Store(store.root)
    kept = [p.name for p in store.root.glob("queue.sqlite.damaged-*")]
    assert len(kept) == 1 and (store.root / kept[0]).read_bytes()[:100] == bytes(100)
    jobs = {job.id: job for job in reopened.queue.jobs()}
    assert {id: job.state for id, job in jobs.items()} == {scored.id: "FINISHED", waiting.id: "PENDING"}
    assert jobs[waiting.id].content_hash == waiting.content_hash
    assert (jobs[waiting.id].owner, jobs[scored.id].owner) == ("ada", "bo")  # from the queue's ledger
    assert jobs[waiting.id].model == waiting.model and jobs[waiting.id].dataset == waiting.dataset
    for id in (waiting.id, scored.id):  # each one's images are its own again: a copy would be refused
        [image_set] = kept_image_sets(store.submissions / id).values()
        assert reopened.queue.same_images([image_set]) == (jobs[id], image_set)
    assert kept[0] in reopened.rebuilt and "2 submissions restored (1 finished, 1 pending), owners from the queue's " \
        "ledger" in reopened.rebuilt
    markdown = QueueTab(Site(Store(store.root), "ada")).page()["workers"]  # another process opening the store later
    assert "queue rebuilt from disk at" in markdown and render.plain(kept[0]) in markdown
    assert reopened.queue.claim("w", 60).id == waiting.id  # and the pending one is scored

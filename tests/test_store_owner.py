"""What the store enforces for the people who submit: quota before any work, duplicates by content and by
model revision, and owner-only re-run and delete."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from benchmark.datasets import cube_1k
from leaderboard.catalog import Catalog
from leaderboard.intake import PermissionDenied
from leaderboard.store import Store
from tests.helpers import serving_tiny_cube
from culturelens.testing.submissions import make_submission


@pytest.fixture()
def store(tmp_path, tiny_upstream):
    store = serving_tiny_cube(Store(tmp_path / "store", quota=2, quota_hours=24), tiny_upstream)
    return store


def _ids(store: Store) -> list[str]:
    return list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)


def _submit(store, tmp_path, name: str, owner: str = "ada", revision: str = "r1", seeds=(0, 1)):
    folder = make_submission(tmp_path / name, _ids(store), seeds=seeds, model_name=name)
    data = json.loads((folder / "manifest.json").read_text())
    data["model"]["revision"] = revision
    (folder / "manifest.json").write_text(json.dumps(data))
    return store.submit(folder, owner)


def test_quota_is_checked_before_any_work(store, tmp_path):
    assert _submit(store, tmp_path, "a", revision="r1").job is not None
    assert _submit(store, tmp_path, "b", revision="r2").job is not None
    staged_before = list(store.staging.iterdir())
    with pytest.raises(PermissionDenied, match="ada has made 2 submissions in the last 24 hours; the quota is 2"):
        store.submit(tmp_path / "does-not-even-exist", "ada")  # refused before the path is read
    assert list(store.staging.iterdir()) == staged_before
    assert _submit(store, tmp_path, "c", owner="grace", revision="r3").job is not None  # quota is per user


def test_rejected_uploads_count_towards_a_limit_on_validation_work(tmp_path, tiny_upstream):
    store = serving_tiny_cube(Store(tmp_path / "store", quota=5, attempt_quota=3), tiny_upstream)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    for _ in range(2):
        assert store.submit(broken, "mallory").job is None  # rejected, but validated: that is work
    assert _submit(store, tmp_path, "ok", owner="mallory", revision="r1").job is not None  # the third attempt
    with pytest.raises(PermissionDenied, match="mallory has sent 3 uploads .* the limit is 3"):
        store.submit(broken, "mallory")
    assert _submit(store, tmp_path, "other", owner="grace", revision="r2").job is not None  # per user


def test_the_same_model_revision_for_the_same_dataset_is_a_duplicate(store, tmp_path):
    first = _submit(store, tmp_path, "first", revision="v1")
    again = _submit(store, tmp_path, "again", revision="v1", seeds=(5, 6))  # other images, same model revision
    assert again.job is None and again.report.folder is None
    assert "local/tiny at revision v1 was already submitted" in again.report.errors[-1]
    assert first.job.id in again.report.errors[-1]
    assert _submit(store, tmp_path, "newer", revision="v2", seeds=(7, 8)).job is not None


def test_only_the_owner_reruns_or_deletes_and_the_results_go_with_it(store, tmp_path):
    job = _submit(store, tmp_path, "mine").job
    with pytest.raises(PermissionDenied, match="only a finished or failed one can be re-run"):
        store.rerun(job.id, "ada")
    with pytest.raises(PermissionDenied, match="belongs to ada, not eve"):
        store.delete(job.id, "eve")
    # Pretend a worker finished it, with results on disk the catalog shows.
    claimed = store.queue.claim("w", 60)
    assert claimed.id == job.id and store.queue.finish(job.id, "w", "done")
    results = store.results / job.id
    results.mkdir()
    store.seed_reported()
    shutil.copy(store.reported, results / "aggregates.parquet")
    (results / "run.json").write_text("{}")
    catalog = Catalog(store)
    assert job.id in catalog.loaded
    store.rerun(job.id, "ada")
    assert store.queue.get(job.id).state == "PENDING" and not results.exists()
    catalog.refresh(force=True)
    assert job.id not in catalog.loaded
    store.delete(job.id, "ada")
    assert store.queue.get(job.id) is None and not (store.submissions / job.id).exists()
    with pytest.raises(PermissionDenied, match="no submission"):
        store.delete(job.id, "ada")


def test_a_hub_submission_is_checked_before_anything_is_downloaded(store):
    with pytest.raises(ValueError, match="not a Hub dataset repo id"):
        store.fetch_hub_submission("../etc/passwd")
    with pytest.raises(ValueError, match="cannot fetch Hub dataset someone/generations"):  # offline in tests
        store.fetch_hub_submission("someone/generations")
    assert list(store.staging.iterdir()) == []


def test_staging_leftovers_of_a_crashed_app_are_swept_but_a_live_upload_is_not(store):
    old_upload, old_file = store.staging / "upload-old", store.staging / "hub-x.part"
    live_upload = store.staging / "upload-new"
    old_upload.mkdir()
    (old_upload / "manifest.json").write_text("{}")
    old_file.write_bytes(b"x")
    live_upload.mkdir()
    day_ago = time.time() - 24 * 3600
    for entry in (old_upload, old_file):
        os.utime(entry, (day_ago, day_ago))
    assert store.sweep_staging(older_than_hours=6) == ["hub-x.part", "upload-old"]
    assert sorted(p.name for p in store.staging.iterdir()) == ["upload-new"]

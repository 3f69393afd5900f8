"""One image set, one row (issue 49, finding 10): a submission whose images for a dataset are another submission's,
whatever its model is called, is refused with a sentence naming that submission and its model, wherever submissions
enter: an upload (the Submit tab, `culturelens submit`), a Hub dataset repo, and, for one that entered another way (a
record restored from a requests repo, or queued before image sets were kept), the worker, which fails it unscored.
The first submission's owner can still re-run it, and the same model's new images are taken."""

from __future__ import annotations

import html
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from benchmark.datasets import cube_1k
from benchmark.encoders.spec import load_registry
from benchmark.metrics.alignment import ClipCosine
from benchmark.scoring_options import ScoringOptions
from benchmark.submission import stage
from leaderboard.queue import Job, now_iso
from leaderboard.repo import LocalRepo
from leaderboard.store import Store
from leaderboard.worker import Worker
from tests.helpers import culturelens_here, launched, serving_tiny_cube
from culturelens.testing.submissions import make_submission, zip_folder

DATASET = "culturelens/cube-1k:cube_1k:test"


def _refusal(first: Job) -> str:
    """The sentence a copy of ``first``'s images is refused with, written out here."""
    return (f"its images for {DATASET} are those of submission {first.id} (model 'Tiny Test Model', {first.state}, "
            f"submitted {first.created_at}): the same images are one row of the leaderboard, whatever the model is "
            "called; that submission's owner can re-run or delete it")


def _copy(original: Path, target: Path, name: str) -> Path:
    """``original``'s images under another model (name, id, licence), one prompt's two images filed under each
    other's seeds: another content, the same image set."""
    shutil.copytree(original, target)
    data = json.loads((target / "manifest.json").read_text())
    data["model"] = {"name": name, "id": "org/copycat", "revision": "v1", "type": "closed"}
    data["license"] = "proprietary"
    (target / "manifest.json").write_text(json.dumps(data))
    prompt = sorted(p.name for p in (target / "images").iterdir())[0]
    seed0, seed1 = target / "images" / prompt / "0.png", target / "images" / prompt / "1.png"
    seed0.rename(target / "swap.png")
    seed1.rename(seed0)
    (target / "swap.png").rename(seed1)
    return target


@pytest.fixture
def store(tmp_path, tiny_upstream, store_queue) -> Store:
    return serving_tiny_cube(Store(tmp_path / "store", queue=store_queue), tiny_upstream)


@pytest.fixture
def prompt_ids(store) -> list[str]:
    return list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)


def test_curation_the_same_images_under_another_model_name_are_refused_naming_the_first(store, prompt_ids, tmp_path):
    """On each queue backend: an upload and a Hub dataset repo holding the first submission's images under another
    model are refused, naming it, and leave nothing; the same model's new images are taken; once the first is
    deleted, the copy is taken."""
    original = make_submission(tmp_path / "original", prompt_ids)
    first = store.submit(original, "alice").job
    copy = _copy(original, tmp_path / "copy", "Copycat 9000")

    upload = store.submit(copy, "bob")
    assert upload.job is None and upload.report.errors == [_refusal(first)]
    assert upload.report.content_hash != first.content_hash  # not refused as identical content
    hub = store.submit_from_hub(LocalRepo(copy), "carol")
    assert hub.job is None and hub.report.errors == [_refusal(first)]
    assert [j.id for j in store.queue.jobs()] == [first.id]
    assert sorted(p.name for p in store.submissions.iterdir()) == [first.id] and list(store.staging.iterdir()) == []
    assert store.queue.count_since("bob", "1970") == store.queue.count_since("carol", "1970") == 0

    again = store.submit(make_submission(tmp_path / "new-seeds", prompt_ids, seeds=(2, 3)), "alice")
    assert again.job is not None, again.report.errors  # the same model's new images: another row
    store.delete(first.id, "alice")
    assert store.submit(copy, "bob").job is not None


def test_curation_a_copy_of_a_submission_queued_before_image_sets_were_kept_is_refused(tmp_path, tiny_upstream):
    """A store whose queue holds a submission with no image set (as one made before they were kept): its images
    are read from its kept image table when the next upload comes, and a copy of them is refused naming it."""
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    original = make_submission(tmp_path / "original", ids)
    first = store.submit(original, "alice").job
    with sqlite3.connect(store.root / "queue.sqlite") as db:
        db.execute("DELETE FROM image_sets")
    assert store.queue.without_image_sets() == [first.id]
    refused = store.submit(_copy(original, tmp_path / "copy", "Copycat"), "bob")
    assert refused.job is None and refused.report.errors == [_refusal(first)]
    assert store.queue.without_image_sets() == []


def test_curation_culturelens_submit_refuses_the_same_images_under_another_name(tmp_path, tiny_upstream):
    """`culturelens submit`: the copy's refusal printed, exit status 1, nothing queued."""
    root = tmp_path / "store"
    store = serving_tiny_cube(Store(root), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    original = make_submission(tmp_path / "original", ids)
    options = ["--store", root, "--cube-source", tiny_upstream]
    accepted = culturelens_here("submit", original, *options, "--owner", "alice")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    [first] = store.queue.jobs()
    refused = culturelens_here("submit", _copy(original, tmp_path / "copy", "Copycat"), *options, "--owner", "bob")
    assert refused.returncode == 1 and f"  - {_refusal(first)}" in refused.stdout.splitlines()
    assert [j.id for j in store.queue.jobs()] == [first.id]


@pytest.mark.slow
def test_curation_the_submit_tab_refuses_the_same_images_under_another_name(tmp_path, tiny_upstream):
    """The Submit tab of a served app, through its API as a browser's upload reaches it: rejected, naming the first
    submission and its model, nothing stored."""
    from gradio_client import Client, handle_file

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    original = make_submission(tmp_path / "original", ids)
    first = store.submit(original, "alice").job
    archive = zip_folder(_copy(original, tmp_path / "copy", "Copycat"), tmp_path / "copy.zip")
    with launched(store, "bob") as url:
        verdict = html.unescape(Client(url, verbose=False).predict(handle_file(str(archive)), api_name="/submit"))
    assert verdict.startswith("### Rejected: nothing was stored") and f"- {_refusal(first)}" in verdict.splitlines()
    assert [j.id for j in store.queue.jobs()] == [first.id]


@pytest.mark.slow
def test_curation_the_worker_fails_a_restored_copy_unscored_and_scores_the_firsts_rerun(tmp_path, tiny_upstream,
                                                                                        backbones_file):
    """A requests repo kept a copy of a scored submission's images under another model (accepted before image sets
    were kept): restored as hub_sync restores it, it is queued, and the worker fails it unscored with the sentence
    naming the first; the first's re-run is scored."""
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    original = make_submission(tmp_path / "original", ids)
    first = store.submit(original, "alice").job
    worker = Worker(store, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()],
                    lease_seconds=60)
    assert worker.load() and worker.run(once=True) == 1
    first = store.queue.get(first.id)
    assert first.state == "FINISHED"

    copy = _copy(original, tmp_path / "copy", "Copycat")
    content_hash = stage(copy, tmp_path / "hashing", store.prompts_for).content_hash
    record = Job(id="restored-copy", content_hash=content_hash, owner="bob", model="Copycat", model_id="org/copycat",
                 model_revision="v1", dataset=DATASET, state="PENDING", created_at=now_iso(), started_at=None,
                 finished_at=None, updated_at=now_iso(), attempts=0, lease_owner=None, lease_expires=None,
                 progress=None, message="restored", error=None, log_excerpt=None)
    assert store.intake.accept(copy, record=record).job == record  # a restore is not refused: it was accepted once
    assert worker.run(once=True) == 1
    failed = store.queue.get("restored-copy")
    assert failed.state == "FAILED" and failed.error == _refusal(first) and not store.has_results("restored-copy")

    store.rerun(first.id, "alice")
    assert worker.run(once=True) == 1
    assert store.queue.get(first.id).state == "FINISHED" and store.has_results(first.id)

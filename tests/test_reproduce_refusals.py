"""`culturelens reproduce` refusing a result it cannot reproduce as recorded, before anything is scored: a record
whose text would drive the terminal is quoted escaped, and a file fetched with --allow-fetch whose bytes are not the
pinned ones is named with both digests. A real store with the tiny CUBE dataset and a stored, validated submission;
the fetched file is served by the project's stand-in server on 127.0.0.1 (``culturelens.testing.public_sources``).
"""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest

from benchmark import __version__, layout, results
from benchmark.datasets import cube_1k
from benchmark.layout import SubmissionLayout
from benchmark.metrics.variability import W1KP, Calibration
from benchmark.run_record import RunRecord
from culturelens.testing.public_sources import PublicSources
from culturelens.testing.submissions import make_submission
from leaderboard.store import Store
from tests.helpers import culturelens_here, serving_tiny_cube


def stored_submission(root: Path, upstream: Path) -> tuple[Store, str, dict]:
    """A store serving the tiny CUBE dataset, one validated submission in it (seeds 0 and 1), and the dataset
    fields its run record holds when it is scored on that dataset (as the harness records them)."""
    store = serving_tiny_cube(Store(root / "store"), upstream)
    prompts = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG)
    sid = store.submit(make_submission(root / "sub", list(prompts.table.index)), "ada").job.id
    dataset = {"dataset": f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}",
               "dataset_digest": prompts.digest, "seeds": [0, 1]}
    return store, sid, dataset


def record(sid: str, dataset: dict, metrics: dict[str, str], settings: dict) -> RunRecord:
    return RunRecord.model_validate({
        "submission_id": sid, "harness_version": __version__, "batch_size": 4, "backbones": {},
        "backbone_specs": {}, "metrics": metrics, "settings": settings, **dataset})


def files_of(folder: Path) -> dict[str, str]:
    """Every file under ``folder``: relative path -> sha256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_reproduce_quotes_a_changed_datasets_recorded_name_escaped(tmp_path, tiny_upstream):
    """The record names a dataset (and rows) holding an ANSI escape and a line break: the refusal quotes them as
    their escapes (``\\x1b``, ``\\n``) on one line, never sending them to the terminal."""
    store, sid, dataset = stored_submission(tmp_path, tiny_upstream)
    hostile = {"dataset": "culturelens/cube-1k:cube_1k:test@abc\x1b[2J\nOK every metric reproduced",
               "dataset_digest": "0123\x1b]0;pwned\x07", "seeds": [0, 1]}
    results.write_folder(store.results / sid, [], [], [], record(
        sid, hostile, {"clip_score": "1"}, {"metric_settings": {}, "tracks": ["awareness"]}))

    done = culturelens_here("reproduce", sid, "--store", store.root)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert ("the dataset changed since the result was scored: it was culturelens/cube-1k:cube_1k:test@abc\\x1b[2J"
            "\\nOK every metric reproduced with rows 0123\\x1b]0;pwned\\x07, it is now "
            f"{dataset['dataset']} with rows {dataset['dataset_digest']}") in line
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr


def test_reproduce_allow_fetch_refuses_a_fetched_file_of_other_bytes_naming_both_digests(tmp_path, tiny_upstream,
                                                                                        monkeypatch):
    """The result was scored with a W1KP calibration fetched from a URL (its sha256 pinned in W1KP's version); the
    address now serves a calibration of other bytes. ``--allow-fetch`` fetches it, then refuses before scoring,
    naming the address and both sha256 digests, and writes nothing: the results and the store are as they were, no
    workspace is left in the temporary folder."""
    store, sid, dataset = stored_submission(tmp_path, tiny_upstream)
    pinned = Calibration.fit(np.linspace(0.1, 0.9, 9))
    pinned.save(tmp_path / "pinned.npz")
    served = io.BytesIO()
    Calibration.fit(np.linspace(0.2, 1.0, 9)).save(served)  # a calibration too, of other distances
    pinned_sha = hashlib.sha256((tmp_path / "pinned.npz").read_bytes()).hexdigest()
    served_sha = hashlib.sha256(served.getvalue()).hexdigest()
    assert pinned_sha != served_sha
    version = W1KP(Calibration.load(tmp_path / "pinned.npz")).info.version  # what scoring with it records
    assert f"sha256 {pinned_sha}" in version

    with PublicSources(raw={"w1kp/cdf.npz": served.getvalue()}) as sources:
        url = f"{sources.url}/raw/w1kp/cdf.npz"
        results.write_folder(store.results / sid, [], [], [], record(
            sid, dataset, {"w1kp": version}, {"metric_settings": {"w1kp_calibration": url}, "tracks": ["variability"]}))
        before = files_of(store.root)
        temp = tmp_path / "tmp"
        temp.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(temp))
        done = culturelens_here("reproduce", sid, "--store", store.root, "--allow-fetch")
        fetched = [r["path"] for r in sources.downloads()]

    assert done.returncode == 2, done.stdout + done.stderr
    assert fetched == ["/raw/w1kp/cdf.npz"]  # fetched once, as --allow-fetch allows
    assert (f"the file fetched from {url} (for w1kp_calibration) has sha256 {served_sha}, but the result was scored "
            f"with a file of sha256 {pinned_sha} (metric w1kp): it is not the file the result pins, so nothing was "
            "scored") in done.stderr
    assert "Traceback" not in done.stderr and "reproduced" not in done.stdout
    assert files_of(store.root) == before and list(temp.iterdir()) == []


# --- issue 48, finding 10: no link anywhere in the bundle, every table checked before scoring --------------------
def recorded_result(tmp_path: Path, upstream: Path) -> tuple[Store, str]:
    """``stored_submission`` with a result recorded for it (awareness on the tiny dataset, tables of no row)."""
    store, sid, dataset = stored_submission(tmp_path, upstream)
    results.write_folder(store.results / sid, [], [], [], record(
        sid, dataset, {"clip_score": "1"}, {"metric_settings": {}, "tracks": ["awareness"]}))
    return store, sid


def refused(*args) -> str:
    """The one line ``culturelens reproduce ARGS`` prints as it refuses (exit 2) before anything is scored."""
    done = culturelens_here("reproduce", *args)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "Traceback" not in line, line
    return line.removeprefix("error: ")


def test_edge_reproduce_a_linked_cache_is_refused_with_use_cache_and_what_it_points_to_is_untouched(tmp_path,
                                                                                                     tiny_upstream):
    """The store's embedding cache is a symbolic link to another SQLite file, then to a file that does not exist,
    then the cache folder is a link to another folder: `reproduce --use-cache` refuses each before anything is read
    or written, naming the link (before: the linked file gained the cache's table, and the missing one was created).
    Without --use-cache the cache is not read, and the result is reproduced past that point."""
    store, sid = recorded_result(tmp_path, tiny_upstream)
    cache = store.root / layout.STORE_CACHE
    cache.parent.mkdir(parents=True, exist_ok=True)
    elsewhere = tmp_path / "elsewhere.sqlite"
    with sqlite3.connect(elsewhere) as db:
        db.execute("CREATE TABLE mine (x)")
    kept = hashlib.sha256(elsewhere.read_bytes()).hexdigest()

    cache.symlink_to(elsewhere)
    assert refused(sid, "--store", store.root, "--use-cache").startswith(
        f"{cache} is a symbolic link: reproduce reads no link in a result, its submission, its datasets or its cache")
    cache.unlink()
    cache.symlink_to(tmp_path / "absent.sqlite")
    assert refused(sid, "--store", store.root, "--use-cache").startswith(f"{cache} is a symbolic link")
    cache.unlink()
    cache.parent.rmdir()
    (tmp_path / "other-cache").mkdir()
    cache.parent.symlink_to(tmp_path / "other-cache")
    assert refused(sid, "--store", store.root, "--use-cache").startswith(f"{cache.parent} is a symbolic link")
    # Without --use-cache nothing of the cache is read: the result is reproduced with a fresh one.
    done = culturelens_here("reproduce", sid, "--store", store.root)
    assert done.returncode == 0 and "with a fresh embedding cache" in done.stdout, done.stdout + done.stderr

    with sqlite3.connect(elsewhere) as db:
        assert [row[0] for row in db.execute("SELECT name FROM sqlite_master")] == ["mine"]
    assert hashlib.sha256(elsewhere.read_bytes()).hexdigest() == kept
    assert not (tmp_path / "absent.sqlite").exists() and list((tmp_path / "other-cache").iterdir()) == []


def test_edge_reproduce_a_link_in_the_result_or_the_submission_is_refused_without_use_cache(tmp_path, tiny_upstream):
    """A link where the result's run.json, its aggregates table, its whole folder, the submission's image table or
    one of its shards should be: each is refused, without --use-cache, naming the link, before the file it points
    to is read (a FIFO in run.json's place would block a reader: it is refused as a special file)."""
    store, sid = recorded_result(tmp_path, tiny_upstream)
    folder, submission = store.results / sid, store.root / layout.SUBMISSIONS / sid
    outside = tmp_path / "outside"
    outside.mkdir()

    def linked(path: Path) -> str:
        """``path`` moved outside the bundle and a link to it left in its place: the refusal; then put back."""
        moved = outside / path.name
        path.rename(moved)
        path.symlink_to(moved)
        try:
            return refused(sid, "--store", store.root)
        finally:
            path.unlink()
            moved.rename(path)

    shard = SubmissionLayout(submission).shards[0]
    for path in (folder / layout.RUN, folder / layout.AGGREGATES, submission / layout.IMAGES_TABLE, shard):
        assert linked(path).startswith(f"{path} is a symbolic link: reproduce reads no link"), path
    moved = outside / "result"
    folder.rename(moved)
    folder.symlink_to(moved)
    assert refused(folder, "--store", store.root).startswith(f"{folder} is a symbolic link")
    folder.unlink()
    moved.rename(folder)
    (folder / layout.RUN).rename(outside / layout.RUN)
    os.mkfifo(folder / layout.RUN)
    assert refused(sid, "--store", store.root).startswith(f"{folder / layout.RUN} is not a file nor a folder")


def test_edge_reproduce_a_damaged_table_is_refused_before_anything_is_scored(tmp_path, tiny_upstream, monkeypatch):
    """The result's aggregates.parquet damaged in the middle (before: an ArrowInvalid traceback after scoring), its
    per-image table without a column the comparison reads, the submission's image table cut short, a shard whose
    footer is gone, a manifest that is not one: each is refused in a sentence naming the file, before the backbones
    file given is even read (with every table whole, that file's refusal comes: the tables were checked first), and
    with nothing written (no workspace, no cache)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store, sid = recorded_result(tmp_path, tiny_upstream)
    folder, part = store.results / sid, SubmissionLayout(store.root / layout.SUBMISSIONS / sid)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    def damaged(path: Path, damage) -> str:
        """The refusal with ``path``'s bytes changed by ``damage``; its bytes put back after."""
        kept = path.read_bytes()
        path.chmod(0o644)
        path.write_bytes(damage(kept))
        try:
            return refused(sid, "--store", store.root, "--backbones", tmp_path / "absent.json")
        finally:
            path.write_bytes(kept)

    def middle(data: bytes) -> bytes:
        return data[:len(data) // 2] + b"\xff" * 64 + data[len(data) // 2 + 64:]

    aggregates = folder / layout.AGGREGATES
    assert damaged(aggregates, middle).startswith(f"{aggregates} cannot be read as a Parquet table (")
    assert damaged(aggregates, middle).endswith(": the result is damaged, so nothing was scored; restore the results "
                                                "folder, or rescore the submission")
    per_image = folder / layout.PER_IMAGE

    def without_seed(data: bytes) -> bytes:
        table = pq.read_table(pa.BufferReader(data))
        sink = pa.BufferOutputStream()
        pq.write_table(table.drop_columns(["seed"]), sink)
        return sink.getvalue().to_pybytes()

    assert damaged(per_image, without_seed) == (f"{per_image} has no column seed: it is not a result table, so "
                                                "nothing was scored")
    assert damaged(part.images_table, lambda data: data[:len(data) // 2]).startswith(
        f"{part.images_table} cannot be read as a Parquet table (")
    assert damaged(part.shards[0], lambda data: data[:-100]).endswith(
        ": the submission is damaged, so nothing was scored")
    assert damaged(part.manifest, lambda data: b'{"model": 1}').startswith(
        f"{part.manifest} is not a submission manifest (")
    # With every table whole, the next step refuses: the backbones file is read after the tables were checked.
    assert refused(sid, "--store", store.root, "--backbones", tmp_path / "absent.json").startswith(
        f"backbones file {tmp_path / 'absent.json'}: cannot be read")
    assert list(temp.iterdir()) == [] and not (store.root / layout.STORE_CACHE).exists()


def test_edge_reproduce_a_served_suites_dataset_link_is_read_and_any_other_link_refused(tmp_path):
    """A store serving a suite folder links each dataset to the folder's copy (``serve --suite``), and reproduce
    reads a result of that store (tests/test_suite_service.py reproduces one end to end): that one link is taken,
    to ``datasets/<same name>`` of a folder holding ``suite.json`` with no link inside. A link of the same name into
    a folder that is no suite, a link under another name and a link inside the suite's copy are refused."""
    from benchmark.reproduce import ReproduceError, refuse_dataset_links

    suite = tmp_path / "suite"
    (suite / "datasets" / "org__cube").mkdir(parents=True)
    (suite / "datasets" / "org__cube" / "README.md").write_text("rows")
    (suite / "suite.json").write_text("{}")
    store = tmp_path / "store" / "datasets"
    store.mkdir(parents=True)
    (store / "org__cube").symlink_to(suite / "datasets" / "org__cube", target_is_directory=True)
    refuse_dataset_links(store)  # the served suite's link: read

    not_a_suite = tmp_path / "elsewhere" / "datasets" / "org__other"
    not_a_suite.mkdir(parents=True)
    (store / "org__other").symlink_to(not_a_suite, target_is_directory=True)
    with pytest.raises(ReproduceError, match=r"org__other is a symbolic link, and not one a store serving a suite"):
        refuse_dataset_links(store)
    (store / "org__other").unlink()
    (store / "renamed").symlink_to(suite / "datasets" / "org__cube", target_is_directory=True)
    with pytest.raises(ReproduceError, match=r"renamed is a symbolic link"):
        refuse_dataset_links(store)
    (store / "renamed").unlink()
    (suite / "datasets" / "org__cube" / "data.parquet").symlink_to(tmp_path / "secret")
    with pytest.raises(ReproduceError, match=r"data.parquet is a symbolic link: reproduce reads no link"):
        refuse_dataset_links(store)

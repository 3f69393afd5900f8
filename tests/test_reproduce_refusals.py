"""`culturelens reproduce` refusing a result it cannot reproduce as recorded, before anything is scored: a record
whose text would drive the terminal is quoted escaped, and a file fetched with --allow-fetch whose bytes are not the
pinned ones is named with both digests. A real store with the tiny CUBE dataset and a stored, validated submission;
the fetched file is served by the project's stand-in server on 127.0.0.1 (``culturelens.testing.public_sources``).
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from pathlib import Path

import numpy as np

from benchmark import __version__, results
from benchmark.datasets import cube_1k
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

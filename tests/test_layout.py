"""The on-disk layout (``benchmark.layout``) and the one atomic-write rule (``benchmark.atomic``), on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark import layout
from benchmark.atomic import (
    atomic_folder,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    leftovers,
)


class Boom(Exception):
    """The failure each test injects."""


def test_a_failure_inside_atomic_folder_leaves_the_old_target_and_no_temporary(tmp_path):
    target = tmp_path / "results" / "sub-1"
    with atomic_folder(target) as tmp:
        (tmp / "run.json").write_text('{"old": true}')
    for replace in (False, True):
        with pytest.raises(Boom), atomic_folder(target, replace=replace) as tmp:
            (tmp / "run.json").write_text('{"new": true}')
            (tmp / "half.parquet").write_bytes(b"PAR1")
            raise Boom
        assert sorted(p.name for p in target.iterdir()) == ["run.json"]
        assert (target / "run.json").read_text() == '{"old": true}'
        assert leftovers(target) == [] and sorted(p.name for p in target.parent.iterdir()) == ["sub-1"]


def test_a_failed_first_write_leaves_nothing(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(Boom), atomic_folder(target) as tmp:
        (tmp / "a.txt").write_text("a")
        raise Boom
    assert list(tmp_path.iterdir()) == []


def test_an_existing_target_is_refused_unless_replaced_and_replace_swaps_it_whole(tmp_path):
    target = tmp_path / "index"
    with atomic_folder(target) as tmp:
        (tmp / "a.txt").write_text("old a")
        (tmp / "only-old.txt").write_text("gone after the swap")
    with pytest.raises(FileExistsError), atomic_folder(target) as tmp:
        (tmp / "a.txt").write_text("new a")
    assert (target / "a.txt").read_text() == "old a" and leftovers(target) == []
    with atomic_folder(target, replace=True) as tmp:
        (tmp / "a.txt").write_text("new a")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("new b")
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == ["a.txt", "sub", "sub/b.txt"]
    assert (target / "a.txt").read_text() == "new a" and (target / "sub" / "b.txt").read_text() == "new b"
    assert leftovers(target) == [] and [p.name for p in tmp_path.iterdir()] == ["index"]


def test_atomic_write_bytes_leaves_no_partial_file(tmp_path):
    """The temporary file exists when the write raises (text is not bytes): it goes, the old content stays."""
    path = tmp_path / "state.json"
    atomic_write_bytes(path, b'{"pushed": 1}')
    with pytest.raises(TypeError):
        atomic_write_bytes(path, '{"pushed": 2}')
    assert path.read_bytes() == b'{"pushed": 1}' and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_atomic_write_removes_the_temporary_when_the_writer_fails_mid_way(tmp_path):
    path = tmp_path / "meta_eval" / "clip.parquet"

    def half_then_fail(tmp: Path) -> None:
        tmp.write_bytes(b"PAR1 half a table")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(path, half_then_fail)
    assert not path.exists() and list(path.parent.iterdir()) == []
    atomic_write_text(path, "whole")
    assert path.read_text() == "whole" and [p.name for p in path.parent.iterdir()] == ["clip.parquet"]


def test_a_temporary_outside_the_target_folder_never_lands_in_it(tmp_path):
    """``culturelens generate`` keeps temporaries out of the submission: a killed run leaves no stray file."""
    submission, scratch = tmp_path / "sub", tmp_path / ".sub.tmp"
    image = submission / layout.image_name("p1", 0, "png")
    with pytest.raises(Boom):
        atomic_write(image, lambda tmp: (tmp.write_bytes(b"\x89PNG half"), (_ for _ in ()).throw(Boom)),
                     temp_dir=scratch)
    assert list(scratch.iterdir()) == [] and not image.exists()
    atomic_write_bytes(image, b"\x89PNG whole", temp_dir=scratch)
    assert image.read_bytes() == b"\x89PNG whole" and list(image.parent.iterdir()) == [image]


# --- ArtifactIndex.save ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def artifact_index():
    from benchmark.tagging import ArtifactIndex
    from tests.test_diversity import CLIP, CSPACE, fixed_encoder

    return ArtifactIndex.build(CSPACE, fixed_encoder, backbone_id=CLIP, backbone_key="fixed-vectors", progress=False)


def test_an_interrupted_artifact_index_save_leaves_the_earlier_index_whole(artifact_index, tmp_path):
    """The rows and faiss files are written before index.json: a save that fails at the manifest (here a template
    JSON cannot hold) must leave the earlier index as it was, not new rows under the old manifest."""
    from benchmark.tagging import ArtifactIndex

    folder = artifact_index.save(tmp_path / "index")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    moved = artifact_index.rows.assign(country="Atlantis")
    broken = ArtifactIndex(moved, artifact_index.indexes, artifact_index.backbone_id, "other-key", object())
    with pytest.raises(TypeError, match="not JSON serializable"):
        broken.save(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert set(ArtifactIndex.load(folder).rows["country"]) == set(artifact_index.rows["country"])
    with pytest.raises(TypeError):
        broken.save(tmp_path / "fresh")
    with pytest.raises(ValueError, match="no index.json; not an artifact index"):
        ArtifactIndex.load(tmp_path / "fresh")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_an_artifact_index_never_replaces_a_folder_that_is_not_one(artifact_index, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="is not an artifact index"):
        artifact_index.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


# --- one naming of result folders ------------------------------------------------------------------------------
@pytest.mark.usefixtures("one_torch_thread")
def test_score_and_the_worker_name_a_results_folder_alike(tmp_path, tiny_upstream, backbones_file):
    """`culturelens score --out OUT` and the worker both write ``<root>/results/<the submission id run.json
    records>``; scoring again into the same OUT replaces that folder whole (still one folder)."""
    from benchmark.datasets import cube_1k
    from leaderboard.store import Store
    from tests.helpers import serving_tiny_cube
    from culturelens.testing.submissions import make_submission
    from tests.helpers import culturelens

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    submission = make_submission(tmp_path / "sub", ids)
    job = store.submit(submission, "tester").job
    options = ["--backbones", str(backbones_file), "--batch-size", "4", "--tracks", "awareness"]
    worker = culturelens("worker", "--store", str(store.root), "--once", *options)
    assert worker.returncode == 0, worker.stderr
    out = tmp_path / "out"
    for _ in range(2):
        scored = culturelens("score", str(submission), "--out", str(out), "--store", str(store.root), *options)
        assert scored.returncode == 0, scored.stderr
    # The worker seals what it writes (leaderboard.seal); `score` writes the result files alone.
    for root, files in ((store.root, layout.SEALED_FILES), (out, layout.RESULT_FILES)):
        (folder,) = (root / "results").iterdir()
        run = json.loads((folder / "run.json").read_text())
        assert folder == layout.results_folder(root, run["submission_id"])
        assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    assert (store.root / "results" / job.id).is_dir()
    assert run["submission_id"].startswith("local-")

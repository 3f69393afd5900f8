"""Submission format v1: valid submissions pass; hostile and malformed ones are rejected with a reason
and leave nothing behind."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from benchmark.submission import Limits, json_schema
from leaderboard.store import Store
from tests.helpers import serving_tiny_cube
from culturelens.testing.submissions import make_submission, manifest, write_image, zip_folder

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path, tiny_upstream) -> Store:
    store = serving_tiny_cube(Store(tmp_path / "store", attempt_quota=10**6), tiny_upstream)  # these tests are about validation, not the upload limit
    return store


@pytest.fixture
def prompt_ids(store) -> list[str]:
    return list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith("queue.sqlite")}


def test_folder_and_zip_are_accepted_with_the_same_content_hash(store, prompt_ids, tmp_path):
    folder = make_submission(tmp_path / "sub", prompt_ids)
    archive = zip_folder(folder, tmp_path / "sub.zip", wrapper="my-submission/")
    first = store.submit(archive, "alice")
    assert first.report.ok, first.report.errors
    assert len(first.report.images) == len(prompt_ids) * 2
    job = first.job
    assert job.state == "PENDING" and job.owner == "alice" and job.model == "Tiny Test Model"
    stored = store.submissions / job.id
    # Kept as the manifest, the image table and the images as rows of one Parquet shard: no image file.
    assert sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*") if p.is_file()) == [
        "data/images-00000-of-00001.parquet", "images.parquet", "manifest.json"]
    # The same content as a folder is recognised as a resubmission and stores nothing new.
    again = store.submit(folder, "bob")
    assert again.job is None
    assert any(f"identical to submission {job.id}" in e for e in again.report.errors)
    assert [j.id for j in store.queue.jobs()] == [job.id]
    assert list(store.staging.iterdir()) == []


def test_declared_refusals_are_accepted(store, prompt_ids, tmp_path):
    folder = make_submission(tmp_path / "sub", prompt_ids, missing=[
        {"prompt_id": prompt_ids[0], "seed": 1, "reason": "safety_filter", "detail": "blocked by the API"}])
    (folder / "images" / prompt_ids[0] / "1.png").unlink()
    outcome = store.submit(folder, "alice")
    assert outcome.report.ok, outcome.report.errors
    assert len(outcome.report.images) == 11


def test_content_hash_changes_with_any_image_byte(store, prompt_ids, tmp_path):
    a = store.submit(make_submission(tmp_path / "a", prompt_ids), "alice")
    b_folder = make_submission(tmp_path / "b", prompt_ids)
    write_image(b_folder / "images" / prompt_ids[-1] / "1.png", seed=424242)
    b = store.submit(b_folder, "alice")
    assert a.report.ok and b.report.ok and a.report.content_hash != b.report.content_hash


def test_culture_labels_of_an_older_manifest_are_accepted_ignored_and_said_so(store, prompt_ids, tmp_path):
    """Relevance scores every image against the prompt set's countries: a manifest's own labels (repeated ones
    too) no longer refuse or change anything, and validation says they are ignored."""
    outcome = store.submit(make_submission(tmp_path / "sub", prompt_ids, culture_labels=["Yoruba", "yoruba"]),
                           "alice")
    assert outcome.report.ok, outcome.report.errors
    assert outcome.report.warnings == ["manifest.json: culture_labels is ignored: relevance scores every image "
                                       "against each country of the prompt set, the same labels for every "
                                       "submission; remove the field"]
    assert "warning: manifest.json: culture_labels is ignored" in outcome.report.text()
    plain = store.submit(make_submission(tmp_path / "plain", prompt_ids, model_name="Plain Model"), "alice")
    assert plain.report.ok and plain.report.warnings == []


def test_published_json_schema_is_current():
    published = (REPO_ROOT / "submissions" / "manifest.schema.json").read_text(encoding="utf-8")
    assert published == json_schema(), "run: culturelens schema --out submissions/manifest.schema.json"


def test_example_submission_answers_every_demo_prompt(cube_file, tmp_path):
    """The committed example is a complete submission for CUBE-1K's demo config: accepted, nothing missing."""
    store = Store(tmp_path / "store")
    cube_1k.build(str(cube_file), local_folder(store.datasets, cube_1k.HUB_REPO))
    outcome = store.submit(REPO_ROOT / "submissions" / "example", "example")
    assert outcome.report.ok and outcome.report.warnings == [], outcome.report.errors
    demo = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG_DEMO)
    assert len(demo) == 72 and sorted(i.prompt_id for i in outcome.report.images) == sorted(demo.table.index)
    assert outcome.report.manifest.missing == [] and outcome.job.dataset == "culturelens/cube-1k:cube_1k_demo:test"


# --- the hostile corpus ---------------------------------------------------------------------------
def _zip(path: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def _png(size: int = 64, seed: int = 0) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), (seed % 256, 10, 20)).save(buffer, format="PNG")
    return buffer.getvalue()


def _png_header_claiming(width: int, height: int) -> bytes:
    """A PNG whose IHDR declares a huge canvas (a decompression bomb if decoded)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


def _valid_members(prompt_ids: list[str], **manifest_overrides) -> list[tuple[str, bytes]]:
    members = [("manifest.json", json.dumps(manifest(**manifest_overrides)).encode())]
    members += [(f"images/{pid}/{seed}.png", _png(seed=i)) for i, pid in enumerate(prompt_ids) for seed in (0, 1)]
    return members


def _replace(members, name, data):
    return [(n, data if n == name else d) for n, d in members]


def _symlink_member(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (0o120777 << 16)
    return info, target.encode()


def _hostile_cases(prompt_ids: list[str], tmp: Path):
    """(name, path to submit, limits, expected words in the error). Each is built here, in the test."""
    first = f"images/{prompt_ids[0]}/0.png"
    ok = _valid_members(prompt_ids)
    jpeg = io.BytesIO()
    Image.new("RGB", (64, 64)).save(jpeg, format="JPEG")
    cases = [
        ("path traversal", _zip(tmp / "traversal.zip", ok + [("../../evil.txt", b"x")]), None, "'..' in path"),
        ("traversal inside images", _zip(tmp / "traversal2.zip", ok + [(f"images/{prompt_ids[0]}/../../x.png", b"x")]),
         None, "'..' in path"),
        ("absolute path", _zip(tmp / "absolute.zip", ok + [("/tmp/evil.png", b"x")]), None, "absolute path"),
        ("windows path", _zip(tmp / "windows.zip", ok + [("C:\\evil.png", b"x")]), None, "backslash"),
        ("symlink", _zip(tmp / "symlink.zip", ok + [_symlink_member(f"images/{prompt_ids[0]}/7.png", "/etc/passwd")]),
         None, "symbolic links"),
        ("zip bomb by ratio", _zip(tmp / "bomb.zip", _replace(ok, first, b"\x00" * (20 * 2**20))), None,
         "compression ratio"),
        ("zip bomb by file count", _zip(tmp / "many.zip", ok + [(f"images/{prompt_ids[0]}/{s}.png", b"x")
                                                               for s in range(100, 200)]),
         Limits(max_files=50), "more than the limit of 50"),
        ("total size", _zip(tmp / "big.zip", ok), Limits(max_total_bytes=1000), "limit"),
        ("duplicate entries", _zip(tmp / "dup.zip", ok + [(first, _png(seed=9))]), None, "appears more than once"),
        ("decompression-bomb image", _zip(tmp / "pixels.zip", _replace(ok, first, _png_header_claiming(60000, 60000))),
         None, "pixels"),
        ("truncated image", _zip(tmp / "truncated.zip", _replace(ok, first, _png()[:80])), None, "cannot be decoded"),
        ("content does not match extension", _zip(tmp / "jpeg.zip", _replace(ok, first, jpeg.getvalue())), None,
         "is JPEG, not PNG"),
        ("not an image", _zip(tmp / "text.zip", _replace(ok, first, b"this is not a picture")), None,
         "not an image (starts with b'this is"),
        ("too small", _zip(tmp / "small.zip", _replace(ok, first, _png(size=8))), None, "smaller than 64"),
        ("oversized manifest", _zip(tmp / "hugemanifest.zip",
                                    _replace(ok, "manifest.json", b" " * (2**20 + 1) + b"{}")), None,
         "limit for this file"),
        ("non-UTF-8 name", _zip(tmp / "cp437.zip", ok + [("images/caf\u00e9/0.png", _png())]), None, "unexpected file"),
        ("unexpected extra file", _zip(tmp / "extra.zip", ok + [("run.sh", b"rm -rf /")]), None, "unexpected file"),
        ("manifest not JSON", _zip(tmp / "badjson.zip", _replace(ok, "manifest.json", b"{model:")), None,
         "not valid JSON"),
        ("manifest not UTF-8", _zip(tmp / "latin1.zip", _replace(ok, "manifest.json", "{\"é\": 1}".encode("latin-1"))),
         None, "not UTF-8"),
        ("manifest missing", _zip(tmp / "nomanifest.zip", ok[1:]), None, "manifest.json: missing"),
        ("seed count mismatch", _zip(tmp / "seeds.zip", _valid_members(prompt_ids, images_per_prompt=3)), None,
         "seeds lists 2 seeds but images_per_prompt is 3"),
        ("control characters in text", _zip(tmp / "ctrl.zip", _replace(
            ok, "manifest.json", json.dumps(manifest(contact="a\nb")).encode())), None, "control characters"),
        ("right-to-left override in a model name", _zip(tmp / "bidi.zip", _replace(
            ok, "manifest.json", json.dumps(manifest(contact="evil\u202egnp.exe")).encode())), None, "U+202E"),
        ("unknown manifest field", _zip(tmp / "field.zip", _replace(
            ok, "manifest.json", json.dumps({**manifest(), "score": 1.0}).encode())), None, "score: Extra inputs"),
        ("unknown prompt id", _zip(tmp / "prompt.zip", ok + [("images/not-a-prompt/0.png", _png())]), None,
         "prompt id 'not-a-prompt' is not in"),
        ("unknown seed", _zip(tmp / "seed.zip", ok + [(f"images/{prompt_ids[0]}/7.png", _png())]), None,
         "seed 7 is not in the manifest's seeds"),
        ("two files for one image", _zip(tmp / "twice.zip", ok + [(f"images/{prompt_ids[0]}/0.jpg", jpeg.getvalue())]),
         None, "a second image"),
        ("missing image", _zip(tmp / "missing.zip", [m for m in ok if m[0] != first]), None,
         f"no image for prompt {prompt_ids[0]} seed 0"),
        ("present but declared missing", _zip(tmp / "declared.zip", _replace(ok, "manifest.json", json.dumps(manifest(
            missing=[{"prompt_id": prompt_ids[0], "seed": 0, "reason": "refused"}])).encode())), None,
         "manifest.missing lists it"),
        ("dataset this leaderboard does not serve", _zip(tmp / "dataset.zip", _valid_members(prompt_ids, dataset={
            "repo": "nobody/nothing", "config": "x", "split": "test"})), None,
         "dataset nobody/nothing is not served here; this leaderboard serves: culturelens/cube-1k"),
        ("dataset path instead of a repo id", _zip(tmp / "datasetpath.zip", _valid_members(prompt_ids, dataset={
            "repo": "../../etc", "config": "x", "split": "test"})), None, "must be a Hugging Face dataset repo id"),
        ("no image at all", _zip(tmp / "noimages.zip", [("manifest.json", json.dumps(manifest(seeds=[0], missing=[
            {"prompt_id": p, "seed": 0, "reason": "refused"} for p in prompt_ids])).encode())]), None,
         "no image at all"),
        ("not a zip", tmp / "random.zip", None, "not a readable zip archive"),
    ]
    (tmp / "random.zip").write_bytes(os.urandom(4096))
    return cases


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
def test_hostile_submissions_are_rejected_with_a_reason_and_leave_nothing(store, prompt_ids, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the unknown dataset must not be looked up on the network
    kept = store.submit(make_submission(tmp_path / "kept", prompt_ids), "alice")
    assert kept.report.ok
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    cases = _hostile_cases(prompt_ids, corpus)
    outside = tmp_path.parent
    before_store, before_outside = _tree(store.root), sorted(p.name for p in outside.iterdir())
    rejected = []
    for name, path, limits, expected in cases:
        store.limits = limits or Limits()
        outcome = store.submit(path, "mallory")
        assert outcome.job is None, f"{name}: accepted"
        assert any(expected in e for e in outcome.report.errors), f"{name}: {outcome.report.errors}"
        rejected.append(name)
    assert len(rejected) == len(cases) >= 32
    assert list(store.staging.iterdir()) == [], "a rejected upload left files in staging"
    assert _tree(store.root) == before_store, "a rejected upload changed the store"
    assert sorted(p.name for p in outside.iterdir()) == before_outside, "something was written outside the store"
    assert [j.id for j in store.queue.jobs()] == [kept.job.id]


def test_folder_with_links_or_special_files_is_rejected(store, prompt_ids, tmp_path):
    folder = make_submission(tmp_path / "links", prompt_ids)
    (folder / "images" / prompt_ids[0] / "7.png").symlink_to("/etc/passwd")
    outcome = store.submit(folder, "mallory")
    assert any("symbolic links are not allowed" in e for e in outcome.report.errors)
    fifo_folder = make_submission(tmp_path / "fifo", prompt_ids)
    os.mkfifo(fifo_folder / "images" / prompt_ids[0] / "7.png")
    outcome = store.submit(fifo_folder, "mallory")
    assert any("special files are not allowed" in e for e in outcome.report.errors)
    assert list(store.staging.iterdir()) == [] and store.queue.jobs() == []


def test_many_problems_are_listed_with_a_count(store, prompt_ids, tmp_path):
    members = [("manifest.json", json.dumps(manifest(seeds=list(range(10)))).encode())]
    outcome = store.submit(_zip(tmp_path / "empty.zip", members), "alice")
    missing = [e for e in outcome.report.errors if "no image for prompt" in e]
    # One line per prompt, its seeds listed; the 60 images still counted.
    assert missing == [f"images/{p}/*: no image for prompt {p} seeds 0-9, and manifest.missing does not list them"
                       for p in prompt_ids]
    assert outcome.report.images_missing == 60 and "60 images missing" in outcome.report.summary
    seeds = [(f"images/{prompt_ids[0]}/{seed}.png", _png(seed=seed)) for seed in range(10, 40)]  # 30 unknown seeds
    outcome = store.submit(_zip(tmp_path / "seeds.zip", members + seeds), "alice")
    unknown = [e for e in outcome.report.errors if "is not in the manifest's seeds" in e]
    assert len(unknown) == 20 and outcome.report.errors[outcome.report.errors.index(unknown[-1]) + 1] == (
        "... and 10 more like these")



def test_a_rejection_starts_with_what_was_answered_and_how_many_images_are_missing(store, prompt_ids, tmp_path):
    folder = make_submission(tmp_path / "partial", prompt_ids[:3], seeds=range(10))
    (folder / "images" / prompt_ids[0] / "0.png").write_bytes(b"GIF89a")
    (folder / "images" / prompt_ids[1] / "0.png").write_bytes(b"GIF89a")
    report = store.submit(folder, "alice").report
    assert report.summary == "REJECTED: answered 3 of 6 prompts; 30 images missing"
    assert report.text().splitlines()[0] == report.summary and len(report.errors) == 3  # one line per prompt
    # With every image there, the undecodable ones are the problems (images are decoded once the layout holds).
    complete = make_submission(tmp_path / "complete", prompt_ids)
    for prompt_id in prompt_ids[:2]:
        (complete / "images" / prompt_id / "0.png").write_bytes(b"GIF89a")
    assert store.submit(complete, "alice").report.summary == ("REJECTED: answered 6 of 6 prompts; no image missing; "
                                                              "2 other problems")
    (complete / "manifest.json").write_text("{}")
    assert store.submit(complete, "alice").report.summary == "REJECTED: 7 problems"  # seven required fields absent


def test_every_overlong_text_of_the_manifest_is_refused_in_characters(store, prompt_ids, tmp_path):
    """A 101-character name is 'at most 100 characters', never 'at most 100 items' (each bounded text field)."""
    folder = make_submission(tmp_path / "long", prompt_ids)
    data = json.loads((folder / "manifest.json").read_text())
    data["model"].update(name="n" * 101, id="i" * 201)
    data["generation"].update(negative_prompt="p" * 2001, extra={"k" * 65: 1})
    data.update(notes="o" * 2001, culture_labels=["c" * 101], license="l" * 201,
                missing=[{"prompt_id": prompt_ids[0], "seed": 0, "reason": "refused", "detail": "d" * 501}])
    (folder / "manifest.json").write_text(json.dumps(data))
    errors = store.submit(folder, "alice").report.errors
    assert sorted(errors) == sorted([
        "manifest.json: model.name: String should have at most 100 characters",
        "manifest.json: model.id: String should have at most 200 characters",
        "manifest.json: generation.negative_prompt: String should have at most 2000 characters",
        f"manifest.json: generation.extra.{'k' * 65}.[key]: String should have at most 64 characters",
        "manifest.json: license: String should have at most 200 characters",
        "manifest.json: missing.0.detail: String should have at most 500 characters",
        "manifest.json: notes: String should have at most 2000 characters",
        "manifest.json: culture_labels.0: String should have at most 100 characters"])

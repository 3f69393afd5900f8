"""A submission's images as Parquet shards: kept by the store and mirrored to the requests repo in the
``datasets`` layout, read back byte for byte, by ``load_dataset`` too, within a size bound; an upload in Parquet
form (a Hub dataset made with ``datasets``) accepted with the same checks as files, hostile rows refused."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from benchmark.submission import stage
from benchmark.submission.shards import MAX_SHARD_BYTES, Shards, write_shards
from benchmark.submission.validate import ImageRecord
from leaderboard import hub_sync
from leaderboard.repo import RepoError
from leaderboard.store import Store
from tests.helpers import serving_tiny_cube
from culturelens.testing.submissions import make_submission, write_image, zip_folder


@pytest.fixture
def store(tmp_path, tiny_upstream) -> Store:
    store = serving_tiny_cube(Store(tmp_path / "store", attempt_quota=None, quota=None), tiny_upstream)
    return store


@pytest.fixture
def prompt_ids(store) -> list[str]:
    return sorted(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)


def _upload(folder: Path) -> dict[str, bytes]:
    """The image files of an upload folder, by name."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "images").rglob("*.*"))}


def _mixed_submission(folder: Path, prompt_ids: list[str]) -> Path:
    """6 prompts x 2 seeds, the first prompt's images as JPEG and WebP: every format keeps its own bytes."""
    make_submission(folder, prompt_ids)
    for seed, fmt, ext in ((0, "JPEG", "jpg"), (1, "WEBP", "webp")):
        (folder / "images" / prompt_ids[0] / f"{seed}.png").unlink()
        write_image(folder / "images" / prompt_ids[0] / f"{seed}.{ext}", seed=77 + seed, fmt=fmt)
    return folder


def test_a_kept_submission_holds_its_uploaded_bytes_in_shards_that_load_dataset_decodes(store, prompt_ids, tmp_path):
    upload = _upload(_mixed_submission(tmp_path / "sub", prompt_ids))
    job = store.submit(zip_folder(tmp_path / "sub", tmp_path / "sub.zip"), "ada").job
    kept = store.submissions / job.id
    assert not (kept / "images").exists() and [p.name for p in (kept / "data").iterdir()] == [
        "images-00000-of-00001.parquet"]

    # Read back with pyarrow alone: every uploaded file, byte for byte, its sha256, in (prompt, seed) order.
    rows = pq.read_table(kept / "data").to_pylist()
    assert {r["image"]["path"]: r["image"]["bytes"] for r in rows} == upload
    assert all(r["sha256"] == hashlib.sha256(r["image"]["bytes"]).hexdigest() for r in rows)
    assert [(r["prompt_id"], r["seed"]) for r in rows] == [(p, s) for p in prompt_ids for s in (0, 1)]
    assert {(r["width"], r["height"]) for r in rows} == {(64, 64)}
    # The image table beside it lists the same images; the reader gives the same rows and bytes.
    table = pq.read_table(kept / "images.parquet").to_pylist()
    assert table == [{k: r[k] if k != "path" else r["image"]["path"] for k in table[0]} for r in rows]
    shards = Shards(kept)
    assert shards.table().to_pylist() == table
    assert {name: shards.read(name) for name in reversed(list(upload))} == upload
    assert [data for _, data in shards.rows()] == [r["image"]["bytes"] for r in rows]

    # load_dataset reads the shards as an image dataset and decodes each image as Pillow decodes the upload.
    loaded = datasets.load_dataset("parquet", data_files=str(kept / "data" / "*.parquet"), split="train")
    assert isinstance(loaded.features["image"], datasets.Image) and len(loaded) == 12
    by_key = {(name.split("/")[1], int(name.split("/")[2].split(".")[0])): data for name, data in upload.items()}
    for row in loaded:
        original = Image.open(io.BytesIO(by_key[(row["prompt_id"], row["seed"])]))
        assert np.array_equal(np.asarray(row["image"]), np.asarray(original))


def test_shards_stay_within_their_size_bound_in_row_groups_of_bounded_size(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        data = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(data, format="PNG")
        data = data.getvalue()  # 12.3 KB of noise
        rows.append((ImageRecord(f"p{i // 3:02d}", i % 3, f"images/p{i // 3:02d}/{i % 3}.png",
                                 hashlib.sha256(data).hexdigest(), 64, 64), data))
    bound = 150_000
    names = write_shards(tmp_path, iter(rows), max_shard_bytes=bound, rows_per_group=4)
    files = [tmp_path / name for name in names]
    assert names == [f"data/images-{i:05d}-of-{len(names):05d}.parquet" for i in range(len(names))]
    assert sorted((tmp_path / "data").iterdir()) == files  # no temporary left
    sizes = [f.stat().st_size for f in files]
    # Each shard keeps 64 KiB for its footer and 4 KiB for each row group's metadata: 150,000 - 65,536 - 2 x 4,096
    # = 76,272 bytes for rows, 6 images of 12.3 KB. 30 images: 5 shards, each of row groups of 4 and 2.
    assert len(files) == 5 and max(sizes) <= bound, sizes
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert meta.num_rows == 6 and [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [4, 2]
    stored = pq.read_table(tmp_path / "data").to_pylist()
    assert [(r["image"]["path"], r["image"]["bytes"]) for r in stored] == [(r.path, d) for r, d in rows]
    with pytest.raises(ValueError, match="cannot fit in a shard of at most 70,000 bytes"):
        write_shards(tmp_path / "again", iter(rows), max_shard_bytes=70_000)
    assert not (tmp_path / "again" / "data").exists()


def test_a_store_keeps_large_submissions_in_several_shards(store, prompt_ids, tmp_path):
    small = Store(store.root, quota=None, attempt_quota=None, max_shard_bytes=100_000)
    job = small.submit(make_submission(tmp_path / "sub", prompt_ids), "ada").job  # 12 x 12.3 KB
    files = Shards(store.submissions / job.id).files
    # 100,000 - 65,536 (footer) - 4,096 (one row group) = 30,368 bytes: 2 images a shard.
    assert len(files) == 6 and all(f.stat().st_size <= 100_000 for f in files)
    assert Shards(store.submissions / job.id).names() == set(_upload(tmp_path / "sub"))


def _as_parquet_upload(folder: Path, out: Path) -> Path:
    """The upload ``folder`` as a Hub dataset made with ``datasets``: the images cast to ``datasets.Image()``
    and embedded as ``push_to_hub`` embeds them (the file's bytes, its base name as path), in data/."""
    from datasets.table import embed_table_storage

    files = sorted((folder / "images").rglob("*.*"))
    dataset = datasets.Dataset.from_dict({
        "prompt_id": [f.parent.name for f in files], "seed": [int(f.stem) for f in files],
        "image": [str(f) for f in files], "sha256": [hashlib.sha256(f.read_bytes()).hexdigest() for f in files],
        "prompt": ["ignored: other columns may be there" for _ in files],
    }).cast_column("image", datasets.Image())
    dataset = dataset.with_format("arrow").map(embed_table_storage, batched=True).with_format(None)
    (out / "data").mkdir(parents=True)
    dataset.to_parquet(out / "data" / "train-00000-of-00001.parquet")
    shutil.copyfile(folder / "manifest.json", out / "manifest.json")
    return out


def test_an_upload_in_parquet_form_is_accepted_with_the_content_hash_of_its_files(store, prompt_ids, tmp_path):
    folder = _mixed_submission(tmp_path / "sub", prompt_ids)
    parquet_form = _as_parquet_upload(folder, tmp_path / "hub-dataset")
    assert pq.read_table(parquet_form / "data").column("image").to_pylist()[0]["path"] == "0.jpg"
    by_rows = store.submit(parquet_form, "ada")
    assert by_rows.job is not None, by_rows.report.text()
    # The same images as files: the same submission, refused as identical.
    by_files = store.submit(folder, "bo")
    assert by_files.job is None and f"identical to submission {by_rows.job.id}" in by_files.report.errors[0]
    kept = Shards(store.submissions / by_rows.job.id)
    assert {name: kept.read(name) for name in kept.names()} == _upload(folder)
    # And as a zip of the Parquet form, wrapped in a folder: staged the same way.
    report = stage(zip_folder(parquet_form, tmp_path / "p.zip", wrapper="mine/"), store.staging, store.prompts_for)
    assert report.ok and report.content_hash == by_rows.report.content_hash
    shutil.rmtree(report.folder)


def _hostile(parquet_form: Path, change) -> Path:
    shard = parquet_form / "data" / "train-00000-of-00001.parquet"
    table = pq.read_table(shard)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), shard)
    return parquet_form


def _bomb() -> bytes:
    """A 12,000 x 12,000 greyscale PNG: 144 megapixels in ~140 KB."""
    data = io.BytesIO()
    Image.new("L", (12000, 12000), 255).save(data, format="PNG")
    return data.getvalue()


def _set(row: dict, data: bytes) -> None:
    row["image"]["bytes"], row["sha256"] = data, hashlib.sha256(data).hexdigest()


HOSTILE = [
    ("bad sha256", lambda rows: rows[3].update(sha256="0" * 64),
     r"data/train-00000-of-00001.parquet: row 3 \(images/\S+/1.png\): its sha256 '0{64}' is not the sha256 of its "
     r"image's bytes"),
    ("image bomb", lambda rows: _set(rows[5], _bomb()),
     r"images/\S+/1.png: (too many pixels \(decompression bomb\?\)|12000x12000 pixels, over the limit)"),
    ("duplicate", lambda rows: rows.append({**rows[2], "image": {**rows[2]["image"], "path": "0.webp"}}),
     r"row 12: a second image for prompt \S+ seed 0 \(also data/train-00000-of-00001.parquet: row 2\)"),
    ("traversal", lambda rows: rows[0]["image"].update(path="../../../../etc/cron.d/0.jpg"),
     r"row 0: the image's file name \(image.path\) '../../../../etc/cron.d/0.jpg' is not 0.<ext> or "
     r"images/\S+/0.<ext>"),
    ("folder in the name", lambda rows: rows[0]["image"].update(path="images/other/0.jpg"),
     r"row 0: the image's file name \(image.path\) 'images/other/0.jpg' is not"),
    ("no bytes", lambda rows: rows[1]["image"].update(bytes=None),
     r"row 1 \(images/\S+/1.webp\): the image has no bytes"),
    ("bad prompt id", lambda rows: rows[0].update(prompt_id="../x"), r"row 0: prompt_id '../x' is not a prompt id"),
]


@pytest.mark.parametrize("name, change, message", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_rows_are_refused_with_the_reason_and_leave_nothing(store, prompt_ids, tmp_path, name, change,
                                                                     message):
    import re

    upload = _hostile(_as_parquet_upload(_mixed_submission(tmp_path / "sub", prompt_ids), tmp_path / "p"), change)
    outcome = store.submit(upload, "mallory")
    assert outcome.job is None and any(re.search(message, e) for e in outcome.report.errors), outcome.report.errors
    assert list(store.submissions.iterdir()) == [] and list(store.staging.iterdir()) == []


@pytest.mark.parametrize("name, make, message", [
    ("not Parquet", lambda f: (f / "data" / "train-00000-of-00001.parquet").write_bytes(b"\x89PNG\r\n\x1a\n..."),
     "data/train-00000-of-00001.parquet: not a readable Parquet file (ArrowInvalid)"),
    ("columns", lambda f: pq.write_table(pa.table({"prompt_id": ["a"], "image": [b"x"]}),
                                          f / "data" / "train-00000-of-00001.parquet"),
     "data/train-00000-of-00001.parquet: columns seed, sha256, image missing or of the wrong type"),
    ("both forms", lambda f: write_image(f / "images" / "x" / "0.png", seed=1),
     "a submission holds its images either as files under images/ or as rows of data/*.parquet, not both"),
    ("hidden name", lambda f: (f / "data" / "train-00000-of-00001.parquet").rename(f / "data" / "..x.parquet"),
     "'data/..x.parquet': unexpected file"),
])
def test_broken_parquet_uploads_are_refused_with_the_reason(store, prompt_ids, tmp_path, name, make, message):
    upload = _as_parquet_upload(make_submission(tmp_path / "sub", prompt_ids), tmp_path / "p")
    make(upload)
    outcome = store.submit(upload, "mallory")
    assert outcome.job is None and message in outcome.report.errors[0], outcome.report.errors
    assert list(store.submissions.iterdir()) == [] and list(store.staging.iterdir()) == []


def test_the_app_gets_exactly_the_listed_images_of_a_submission(store, prompt_ids, tmp_path):
    upload = _upload(make_submission(tmp_path / "sub", prompt_ids))
    job = store.submit(tmp_path / "sub", "ada").job
    names = list(upload)[:3]
    assert store.image_bytes(job.id, names + ["../../queue.sqlite", "manifest.json", "images.parquet"]) == {
        name: upload[name] for name in names}
    for forged in ("../submissions/" + job.id, str(store.submissions / job.id), "nope"):
        assert store.image_bytes(forged, names) == {}


def test_a_worker_downloads_exactly_one_submission_from_a_requests_repo(store, prompt_ids, tmp_path):
    first = store.submit(make_submission(tmp_path / "a", prompt_ids, model_name="A"), "ada").job
    second = store.submit(make_submission(tmp_path / "b", prompt_ids, model_name="B"), "bo").job
    repo = tmp_path / "repo"
    hub_sync.export(store, "requests", repo)
    assert sorted(p.relative_to(repo / "submissions").as_posix() for p in (repo / "submissions").rglob("*")
                  if p.is_file()) == sorted(f"{i}/{n}" for i in (first.id, second.id)
                                            for n in ("manifest.json", "data/images-00000-of-00001.parquet"))
    folder = hub_sync.download_submission(str(repo), second.id, tmp_path / "work" / second.id)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "data/images-00000-of-00001.parquet", "images.parquet", "manifest.json"]
    kept = store.submissions / second.id
    assert (folder / "manifest.json").read_bytes() == (kept / "manifest.json").read_bytes()
    assert pq.read_table(folder / "images.parquet").equals(pq.read_table(kept / "images.parquet"))
    assert {n: Shards(folder).read(n) for n in Shards(folder).names()} == _upload(tmp_path / "b")
    # The repo's copy of the requests folder loads as an image dataset.
    assert len(datasets.load_dataset(str(repo / "submissions" / second.id), split="images")) == 12  # the split: images-*

    with pytest.raises(FileExistsError):
        hub_sync.download_submission(str(repo), second.id, folder)
    with pytest.raises(RepoError, match=f"no submission {first.id}x"):
        hub_sync.download_submission(str(repo), first.id + "x", tmp_path / "work" / "x")
    with pytest.raises(RepoError, match="is not a submission id"):
        hub_sync.download_submission(str(repo), "../requests", tmp_path / "work" / "y")
    shard = repo / "submissions" / first.id / "data" / "images-00000-of-00001.parquet"
    table = pq.read_table(shard)
    sha = table.column("sha256").to_pylist()
    pq.write_table(table.set_column(table.schema.get_field_index("sha256"), "sha256", pa.array(sha[1:] + sha[:1])),
                   shard)
    with pytest.raises(RepoError, match=r"images/\S+/0.png: its bytes do not have the sha256 its row"):
        hub_sync.download_submission(str(repo), first.id, tmp_path / "work" / first.id)
    assert not (tmp_path / "work" / first.id).exists()
    (repo / "submissions" / first.id / "data" / "images-00001-of-00002.parquet").write_bytes(b"")
    shard.rename(shard.with_name("images-00000-of-00002.parquet"))
    shard.with_name("images-00000-of-00002.parquet").unlink()
    with pytest.raises(RepoError, match="not a complete set of shards"):
        hub_sync.download_submission(str(repo), first.id, tmp_path / "work" / first.id)


@pytest.mark.slow
def test_a_10_seed_cube_1k_submission_is_a_handful_of_files_in_the_requests_repo(cube_file, tmp_path):
    """992 real CUBE-1K prompts x 10 seeds = 9,920 images. Their files are ~100x smaller than 1024 px PNGs
    (~15 KB of noise instead of ~1.5 MB), so the shard bound is 100x smaller too: the same shard count."""
    store = Store(tmp_path / "store", quota=None, attempt_quota=None, max_shard_bytes=MAX_SHARD_BYTES // 100)
    cube_1k.build(str(cube_file), local_folder(store.datasets, cube_1k.HUB_REPO))
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    assert len(prompt_ids) == 992
    folder, rng = tmp_path / "sub", np.random.default_rng(0)
    folder.mkdir()
    seeds = list(range(10))
    (folder / "manifest.json").write_text(json.dumps({
        "format_version": 1, "model": {"name": "Noise", "id": "local/noise", "type": "open"},
        "dataset": {"repo": cube_1k.HUB_REPO, "config": cube_1k.CONFIG}, "images_per_prompt": 10, "seeds": seeds,
        "license": "CC0-1.0", "contact": "tester@example.org"}))
    for prompt_id in prompt_ids:
        (folder / "images" / prompt_id).mkdir(parents=True)
        for seed in seeds:
            pixels = rng.integers(0, 256, (72, 72, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / "images" / prompt_id / f"{seed}.png", compress_level=1)
    upload = sum(p.stat().st_size for p in (folder / "images").rglob("*.png"))
    started = time.monotonic()
    job = store.submit(folder, "ada").job
    kept_in = time.monotonic() - started
    assert job is not None
    repo = tmp_path / "repo"
    hub_sync.export(store, "requests", repo)
    files = sorted(p for p in (repo / "submissions" / job.id).rglob("*") if p.is_file())
    sizes = {p.name: p.stat().st_size for p in files}
    print(f"\n9,920 images, {upload / 1e6:.0f} MB uploaded, kept in {kept_in:.0f} s as {len(files)} files in the "
          f"requests repo: {sizes}")
    assert 3 <= len(files) <= 10  # the manifest and a few shards
    assert all(size <= MAX_SHARD_BYTES // 100 for size in sizes.values())
    assert pq.read_table(repo / "submissions" / job.id / "data", columns=["seed"]).num_rows == 9920

"""The Hub-backed store: requests and results mirrored to dataset repos and restored from them.

The Hub cannot be reached here, so the repo side is a folder laid out exactly like the repo (``hub_sync.export``
writes the files a push commits; ``pull`` reads such a folder as it reads a downloaded snapshot). The commits
themselves are checked as the ``huggingface_hub`` operations a push would send, and pushing offline as the
clear error it must be."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime

import datasets
import pandas as pd
import pyarrow.parquet as pq
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from benchmark.datasets import cube_1k
from benchmark.datasets.hub_layout import PushError
from benchmark.encoders.spec import load_registry
from benchmark.scoring_options import ScoringOptions
from benchmark.metrics.alignment import ClipCosine
from leaderboard import hub_sync, pickup
from leaderboard.catalog import Catalog
from leaderboard.repo import HubRepo, LocalRepo, RepoError
from leaderboard.store import Store
from leaderboard.worker import Worker
from tests.helpers import culturelens, culturelens_here, serving_tiny_cube
from culturelens.testing.submissions import make_submission

QUEUE_FIELDS = ["id", "content_hash", "owner", "model", "dataset", "state", "created_at", "attempts", "message"]


def _store(root, tiny_upstream) -> Store:
    store = serving_tiny_cube(Store(root), tiny_upstream)
    return store


def _worker(store: Store, backbones_file) -> Worker:
    worker = Worker(store, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()], lease_seconds=60)
    assert worker.load()
    return worker


@pytest.fixture()
def scored(tmp_path, tiny_upstream, backbones_file):
    """A store with one submission scored by a real worker (tiny CLIP) and one still PENDING."""
    store = _store(tmp_path / "store", tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    done = store.submit(make_submission(tmp_path / "a", prompt_ids, model_name="Model A"), "ada").job
    assert _worker(store, backbones_file).run(once=True) == 1
    waiting = store.submit(make_submission(tmp_path / "b", prompt_ids, model_name="Model B"), "bo").job
    assert store.queue.get(done.id).state == "FINISHED" and waiting.state == "PENDING"
    return store, done.id, waiting.id


def _files(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _leaderboard(store: Store) -> pd.DataFrame:
    catalog = Catalog(store)
    rows = catalog.con.execute("SELECT * FROM aggregates WHERE provenance = 'scored'").df()
    return rows.sort_values(["submission_id", "metric", "slice", "slice_value"]).reset_index(drop=True)


def test_a_fresh_store_restored_from_the_repos_has_the_same_queue_files_and_leaderboard(
        scored, tmp_path, tiny_upstream, backbones_file):
    store, done, waiting = scored
    repos = {kind: tmp_path / f"repo-{kind}" for kind in hub_sync.KINDS}
    for kind, folder in repos.items():
        hub_sync.export(store, kind, folder)
    fresh = _store(tmp_path / "fresh", tiny_upstream)  # a restarted Space: empty disk, datasets rebuilt

    # The requests first: a results folder is taken only for a submission the queue knows (issue 30). The scored
    # one's record says FINISHED, but no sealed results answer it yet: PENDING until they arrive (issue 40).
    assert hub_sync.pull(fresh, "requests", str(repos["requests"])) == {
        "added": 2, "present": 0, "without_files": 0, "refused": 0, "unsealed": 1, "edited": 0, "deleted": 0}
    assert fresh.queue.get(done).state == "PENDING"
    assert hub_sync.pull(fresh, "results", str(repos["results"])) == {"added": 1, "present": 0}
    assert fresh.queue.get(done).message == "scored (its sealed results were taken from the results repo)"

    before = {j.id: [getattr(j, f) for f in QUEUE_FIELDS if f != "message"] for j in store.queue.jobs()}
    assert {j.id: [getattr(j, f) for f in QUEUE_FIELDS if f != "message"] for j in fresh.queue.jobs()} == before
    for sub in (done, waiting):
        assert _files(fresh.submissions / sub) == _files(store.submissions / sub)
    assert _files(fresh.results / done) == _files(store.results / done)
    pd.testing.assert_frame_equal(_leaderboard(fresh), _leaderboard(store))

    # The restored PENDING submission is complete: a worker on the new machine scores it.
    assert _worker(fresh, backbones_file).run(once=True) == 1
    assert fresh.queue.get(waiting).state == "FINISHED" and fresh.has_results(waiting)
    # Pulling again adds nothing twice.
    assert hub_sync.pull(fresh, "results", str(repos["results"])) == {"added": 0, "present": 1}
    assert hub_sync.pull(fresh, "requests", str(repos["requests"]))["added"] == 0


def test_the_results_repo_loads_with_load_dataset(scored, tmp_path):
    store, done, _ = scored
    folder = tmp_path / "repo-results"
    hub_sync.export(store, "results", folder)
    pickup.publish(store, LocalRepo(folder), repo_id="org/culturelens-results")  # the card comes with a release
    card = (folder / "README.md").read_text()
    assert "license: cc-by-nc-sa-4.0" in card and 'load_dataset("org/culturelens-results", "aggregates"' in card
    for config in ("aggregates", "per_image"):
        loaded = datasets.load_dataset(str(folder), config, split="train").to_pandas()
        on_disk = pq.read_table(store.results / done / f"{config}.parquet").to_pandas()
        assert len(loaded) == len(on_disk) > 0
        assert sorted(loaded["metric"].unique()) == sorted(on_disk["metric"].unique())


def test_a_push_sends_only_what_changed_and_deletes_only_what_it_pushed(scored):
    store, done, waiting = scored
    files = hub_sync.mirror_files(store, "results")
    operations, pushed = hub_sync.plan(files, {})
    assert all(isinstance(op, CommitOperationAdd) for op in operations)
    # Awareness draws no curve: the folder's curves.parquet has no rows and stays home (one empty file would break
    # load_dataset on the whole config); the card and releases: pickup.publish.
    assert pq.read_metadata(store.results / done / "curves.parquet").num_rows == 0
    assert sorted(op.path_in_repo for op in operations) == sorted(
        f"results/{done}/{name}" for name in ("per_image.parquet", "aggregates.parquet", "seal.json", "run.json"))
    assert hub_sync.plan(files, pushed)[0] == []  # nothing changed: nothing to commit

    # Results the store quarantined (unreadable here) stay on the Hub, where the copy may be the good one.
    store.quarantine(store.results / done, "damaged on this disk")
    kept = hub_sync.kept_on_the_hub(store, "results")
    assert kept == ("README.md", "leaderboard/", f"results/{done}/") and hub_sync.kept_on_the_hub(store, "requests") == ()
    assert hub_sync.plan(hub_sync.mirror_files(store, "results"), pushed, kept) == ([], pushed)
    shutil.copytree(store.quarantined()[0].folder, store.results / done,
                    ignore=shutil.ignore_patterns("reason.txt"))  # the operator repaired and restored it
    shutil.rmtree(store.quarantined()[0].folder)

    # A file someone else put in the repo is not ours to delete; the owner's re-run drops our results folder.
    store.rerun(done, "ada")
    operations, _ = hub_sync.plan(hub_sync.mirror_files(store, "results"), pushed)
    assert all(isinstance(op, CommitOperationDelete) for op in operations)
    assert sorted(op.path_in_repo for op in operations) == sorted(
        f"results/{done}/{name}" for name in ("per_image.parquet", "aggregates.parquet", "seal.json", "run.json"))

    # A state change re-sends that one record, the table of the records (what load_dataset reads) and the seal
    # over the records (its digest of that record changed); the card (its counts unchanged) stays as pushed.
    requests, pushed = hub_sync.plan(hub_sync.mirror_files(store, "requests"), {})
    assert {op.path_in_repo for op in requests} >= {f"requests/{done}.json", f"requests/{waiting}.json",
                                                   f"submissions/{waiting}/manifest.json", "queue.parquet",
                                                   "README.md"}
    assert hub_sync.plan(hub_sync.mirror_files(store, "requests"), pushed)[0] == []  # nothing changed
    store.queue.claim("w", 60)
    changed, _ = hub_sync.plan(hub_sync.mirror_files(store, "requests"), pushed)
    claimed = next(j for j in store.queue.jobs() if j.state == "RUNNING")
    assert sorted(op.path_in_repo for op in changed) == ["queue.parquet", f"requests/{claimed.id}.json", "seal.json"]


def test_pushing_offline_is_a_clear_error_and_marks_nothing_pushed(scored):
    store, _, _ = scored
    with pytest.raises(PushError, match="HF_HUB_OFFLINE is set"):
        hub_sync.push(store, "results", "org/culturelens-results")
    assert not (store.root / "hub_sync.json").exists()  # the next push sends everything again
    result = culturelens("hub", "push", "--store", str(store.root), "--results", "org/culturelens-results")
    assert result.returncode == 2 and "HF_HUB_OFFLINE" in result.stderr and "Traceback" not in result.stderr


def test_a_snapshot_whose_records_are_damaged_or_hostile_is_refused_whole(scored, tmp_path, tiny_upstream):
    store, done, waiting = scored
    good = tmp_path / "good"
    for kind in hub_sync.KINDS:
        hub_sync.export(store, kind, good)

    def damaged(change) -> Store:
        folder = tmp_path / f"bad-{len(list(tmp_path.glob('bad-*')))}"
        shutil.copytree(good, folder)
        change(folder)
        return folder

    fresh = _store(tmp_path / "fresh", tiny_upstream)
    cases = [
        ("results", lambda f: (f / "results" / done / "notes.py").write_text("print('hi')"),
         "holds exactly per_image.parquet"),
        ("results", lambda f: (f / "results" / done / "aggregates.parquet").write_bytes(b"PAR1 not really"),
         "not a readable Parquet file"),
        ("results", lambda f: (f / "results" / done).rename(f / "results" / "a b"), "is not a submission id"),
        ("requests", lambda f: (f / "seal.json").write_text("{not json"), "seal.json: not readable JSON"),
        ("requests", lambda f: (f / "seal.json").unlink(), "the requests repo holds 2 record.s. but no seal.json"),
    ]
    for kind, change, message in cases:
        with pytest.raises(RepoError, match=message):
            hub_sync.pull(fresh, kind, str(damaged(change)))
    assert fresh.queue.jobs() == [] and list(fresh.results.iterdir()) == []  # nothing half-restored
    # A record that is not the one the app sealed (damaged, hostile) is refused alone; the others are restored.
    for change in (lambda f: (f / "requests" / f"{done}.json").write_text('{"id": "x", "state": "FINISHED"}'),
                   lambda f: (f / "requests" / f"{done}.json").write_text(json.dumps(
                       {**json.loads((f / "requests" / f"{done}.json").read_text()), "run_as": "root"})),
                   lambda f: (f / "requests" / f"{done}.json").write_text("{not json")):
        other = _store(tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}", tiny_upstream)
        counts = hub_sync.pull(other, "requests", str(damaged(change)))
        assert (counts["edited"], counts["added"]) == (1, 1) and [j.id for j in other.queue.jobs()] == [waiting]

    # A queued record whose images the repo lost cannot be scored: skipped and counted, never queued.
    lost = damaged(lambda f: shutil.rmtree(f / "submissions" / waiting))
    assert hub_sync.pull(fresh, "requests", str(lost)) == {"added": 1, "present": 0, "without_files": 1,
                                                           "refused": 0, "unsealed": 1, "edited": 0, "deleted": 0}
    assert [j.id for j in fresh.queue.jobs()] == [done]


def test_a_record_restored_while_running_waits_for_a_new_worker(scored, tmp_path, tiny_upstream):
    store, _, waiting = scored
    store.queue.claim("gone-with-the-old-machine", 60)
    for kind in hub_sync.KINDS:
        hub_sync.export(store, kind, tmp_path / kind)
    fresh = _store(tmp_path / "fresh", tiny_upstream)
    hub_sync.pull(fresh, "requests", str(tmp_path / "requests"))
    hub_sync.pull(fresh, "results", str(tmp_path / "results"))  # the scored one's sealed results: FINISHED again
    job = fresh.queue.get(waiting)
    assert job.state == "PENDING" and job.lease_owner is None and "restored from the Hub" in job.message
    assert fresh.queue.claim("new", 60).id == waiting


@pytest.mark.slow
def test_serve_mirrors_only_hub_repos_and_restores_at_start(scored, tmp_path, tiny_upstream):
    store, done, _ = scored
    folder = tmp_path / "repo-results"
    hub_sync.export(store, "results", folder)
    fresh = _store(tmp_path / "fresh", tiny_upstream)
    with pytest.raises(RepoError, match="not a Hub dataset repo id"):
        hub_sync.start(fresh, {"results": str(folder)})  # a folder can be pulled from, not mirrored to
    result = culturelens("serve", "--store", str(fresh.root), "--no-worker", "--hub-results", "not a repo")
    assert result.returncode == 2 and "not a Hub dataset repo id" in result.stderr
    assert "Traceback" not in result.stderr
    # Offline at start: the app starts on what the store has and says why nothing was restored.
    mirror, lines = hub_sync.start(fresh, {"requests": "org/culturelens-requests"}, interval=3600)
    try:
        assert mirror.is_alive() and len(lines) == 1 and "could not restore requests" in lines[0]
        assert "HF_HUB_OFFLINE" in lines[0]
        [line] = pickup.Pickup(fresh, HubRepo("org/culturelens-results")).start()
        assert line.startswith("warning: no leaderboard release from org/culturelens-results: HF_HUB_OFFLINE")
        with pytest.raises(PushError, match="HF_HUB_OFFLINE"):  # not "no such file": a worker would score again
            HubRepo("org/culturelens-results").read("results/x/run.json")
    finally:
        mirror.stop()  # its last push fails offline: logged, nothing raised
    assert not mirror.is_alive()


def test_an_empty_store_exports_a_repo_that_pulls_back(tmp_path, tiny_upstream):
    empty, fresh = _store(tmp_path / "empty", tiny_upstream), _store(tmp_path / "fresh", tiny_upstream)
    assert hub_sync.export(empty, "requests", tmp_path / "requests") == 0
    assert hub_sync.pull(fresh, "requests", str(tmp_path / "requests")) == {
        "added": 0, "present": 0, "without_files": 0, "refused": 0, "unsealed": 0, "edited": 0, "deleted": 0}


def _rewrite_rows(folder, submission_id: str, change) -> None:
    """Rewrite the one shard a snapshot holds for ``submission_id`` with ``change(rows)`` applied to its rows
    (dicts: prompt_id, seed, image {bytes, path}, sha256, ...), as a repo could hold it."""
    import pyarrow as pa

    (shard,) = (folder / "submissions" / submission_id / "data").glob("*.parquet")
    table = pq.read_table(shard)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), shard)


def _replace_image(folder, submission_id: str, image, *, sha256: bool = True) -> None:
    """Put ``image`` (a Pillow image, saved as TIFF or PNG by its mode) in place of the first image of a
    snapshot's submission, with its sha256 in its row too (unless not ``sha256``)."""
    import hashlib
    import io

    data = io.BytesIO()
    image.save(data, format=image.info["save_as"])

    def change(rows):
        rows[0]["image"]["bytes"] = data.getvalue()
        if sha256:
            rows[0]["sha256"] = hashlib.sha256(data.getvalue()).hexdigest()
    _rewrite_rows(folder, submission_id, change)


def _image(mode: str, size: tuple[int, int], save_as: str):
    from PIL import Image

    image = Image.new(mode, size, "white")
    image.info["save_as"] = save_as
    return image


def test_a_restored_submission_goes_through_the_upload_validator_and_a_refused_one_is_left_out(
        scored, tmp_path, tiny_upstream, caplog):
    store, done, waiting = scored
    good = tmp_path / "good"
    hub_sync.export(store, "requests", good)

    def record(f, **changes):
        path = f / "requests" / f"{waiting}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    def twice(rows):
        rows.append(dict(rows[0]))

    def traversal(rows):
        rows[0]["image"]["path"] = "../../../etc/cron.d/x.png"

    cases = [  # the first three keep every row's sha256 right: only the upload validator sees what is wrong
        (lambda f: _replace_image(f, waiting, _image("RGB", (64, 64), "TIFF")),
         r"images/[^:]+/0\.png: not an image \(starts with b'(II|MM)"),
        (lambda f: _replace_image(f, waiting, _image("L", (12000, 12000), "PNG")),
         r"images/[^:]+/0\.png: (too many pixels|12000x12000 pixels, over the limit)"),
        (lambda f: (f / "submissions" / waiting / "images").mkdir() or
         (f / "submissions" / waiting / "images" / "run.sh").write_text("rm -rf /"),
         r"'images/run.sh': unexpected file"),
        (lambda f: _replace_image(f, waiting, _image("RGB", (64, 64), "PNG"), sha256=False),
         r"data/images-00000-of-00001.parquet: row 0 \(images/[^)]+/0\.png\): its sha256 '[0-9a-f]+' is not the "
         r"sha256 of its image's bytes"),
        (lambda f: _rewrite_rows(f, waiting, twice),
         r"data/images-00000-of-00001.parquet: row 12: a second image for prompt \S+ seed 0 \(also "
         r"data/images-00000-of-00001.parquet: row 0\)"),
        (lambda f: _rewrite_rows(f, waiting, traversal),
         r"row 0: the image's file name \(image.path\) '../../../etc/cron.d/x.png' is not 0.<ext>"),
        (lambda f: (f / "submissions" / waiting / "data" / "images-00000-of-00001.parquet").write_bytes(
            b"PK\x03\x04 a zip, not Parquet"), r"images-00000-of-00001.parquet: not a readable Parquet file"),
    ]
    for number, (change, message) in enumerate(cases):
        snapshot = tmp_path / f"bad-{number}"
        shutil.copytree(good, snapshot)
        change(snapshot)
        fresh = _store(tmp_path / f"fresh-{number}", tiny_upstream)
        caplog.clear()
        with caplog.at_level("WARNING", logger="culturelens.hub_sync"):
            counts = hub_sync.pull(fresh, "requests", str(snapshot))
        # The good submission is restored, the refused one leaves nothing: no record, no files, no staging.
        assert counts == {"added": 1, "present": 0, "without_files": 0, "refused": 1, "unsealed": 1, "edited": 0,
                          "deleted": 0}, \
            message
        assert [j.id for j in fresh.queue.jobs()] == [done]
        assert sorted(p.name for p in fresh.submissions.iterdir()) == [done]
        assert list(fresh.staging.iterdir()) == []
        assert f"refused submission {waiting}: " in caplog.text
        assert re.search(message, caplog.text), caplog.text
    # A record whose content hash was changed is not the record the app sealed: refused before its files are read.
    snapshot = tmp_path / "bad-hash"
    shutil.copytree(good, snapshot)
    record(snapshot, content_hash="sha256:" + "0" * 64)
    fresh = _store(tmp_path / "fresh-hash", tiny_upstream)
    counts = hub_sync.pull(fresh, "requests", str(snapshot))
    assert (counts["edited"], counts["refused"], [j.id for j in fresh.queue.jobs()]) == (1, 0, [done])


def test_a_restored_submission_whose_dataset_is_not_served_here_is_refused_with_that_reason(scored, tmp_path,
                                                                                           caplog):
    store, done, waiting = scored
    hub_sync.export(store, "requests", tmp_path / "repo")
    bare = Store(tmp_path / "bare")  # no dataset built yet
    with caplog.at_level("WARNING", logger="culturelens.hub_sync"):
        counts = hub_sync.pull(bare, "requests", str(tmp_path / "repo"))
    assert counts == {"added": 0, "present": 0, "without_files": 0, "refused": 2, "unsealed": 1, "edited": 0,
                      "deleted": 0}
    assert bare.queue.jobs() == [] and list(bare.submissions.iterdir()) == []
    assert "dataset culturelens/cube-1k is not served here" in caplog.text
    assert "restore or build that dataset in this store's datasets/ first, then pull again" in caplog.text


# --- issue 50, finding 10: `hub push --requests REPO_OR_DIR`, as the README documents it -----------------------
def test_no_dead_end_hub_push_writes_a_folder_as_the_readme_documents(scored, tmp_path, tiny_upstream):
    """`culturelens hub push --requests DIR --results DIR` into folders (one there, one a path to make): each holds
    what a Hub repo would (the files `hub export` writes), a second push changes nothing, and `hub pull` restores
    a fresh store from them as from the Hub."""
    store, done, waiting = scored
    requests, results = tmp_path / "backup" / "requests", tmp_path / "backup" / "results"
    requests.mkdir(parents=True)  # one folder there already, the other made by the push
    first = culturelens_here("hub", "push", "--store", store.root, "--requests", requests, "--results", results)
    assert first.returncode == 0, first.stderr
    exported = {kind: tmp_path / f"exported-{kind}" for kind in hub_sync.KINDS}
    for kind, folder in exported.items():
        hub_sync.export(store, kind, folder)
    pushed = _files(requests)
    assert f'load_dataset("{requests}"'.encode() in pushed.pop("README.md")  # the card names where it is
    assert pushed == {path: data for path, data in _files(exported["requests"]).items() if path != "README.md"}
    assert _files(results) == {path: data for path, data in _files(exported["results"]).items()
                               if path.startswith("results/")}  # the card and releases: `hub snapshot`
    assert first.stdout.splitlines() == [f"requests: {len(_files(requests))} files changed in {requests}",
                                         f"results: {len(_files(results))} files changed in {results}"]
    again = culturelens_here("hub", "push", "--store", store.root, "--requests", requests, "--results", results)
    assert again.stdout.splitlines() == [f"requests: 0 files changed in {requests}",
                                         f"results: 0 files changed in {results}"]

    fresh = _store(tmp_path / "fresh", tiny_upstream)
    pulled = culturelens_here("hub", "pull", "--store", fresh.root, "--requests", requests, "--results", results)
    assert pulled.returncode == 0, pulled.stderr
    assert {j.id: j.state for j in fresh.queue.jobs()} == {done: "FINISHED", waiting: "PENDING"}
    assert _files(fresh.results / done) == _files(store.results / done)


# --- issue 50, finding 10: published tables typed and joinable ------------------------------------------------
def test_no_dead_end_published_tables_are_typed_and_join_by_submission_id(scored, tmp_path):
    """A researcher loads the requests repo's `requests` and `images` configs and the results repo's with
    `load_dataset`, as the cards show: each image names its submission (the record's id, the results'
    `submission_id`), so the two submissions' images, which answer the same (prompt, seed) pairs, are told apart
    and join their records and their scores; the records' times are timestamps; a column two configs share has one
    type in both. A submission kept before shards named it (its shards without the column) gets it when mirrored."""
    store, done, waiting = scored
    legacy = store.submissions / waiting / "data"
    for shard in legacy.glob("*.parquet"):  # as an earlier version wrote them: no submission_id, no part
        pq.write_table(pq.read_table(shard).drop_columns(["submission_id", "part"]), shard)
    for kind in hub_sync.KINDS:
        hub_sync.export(store, kind, tmp_path / kind)
    pickup.publish(store, LocalRepo(tmp_path / "results"), repo_id="org/culturelens-results")

    def load(kind: str, config: str) -> datasets.Dataset:  # a cache of its own: the shared one keys local folders
        return datasets.load_dataset(str(tmp_path / kind), config, split="train",  # by their files' names and sizes
                                     cache_dir=str(tmp_path / "datasets-cache"))

    requests, images = load("requests", "requests"), load("requests", "images")
    scores = {config: load("results", config) for config in ("leaderboard", "aggregates", "per_image")}
    table = images.remove_columns("image").to_pandas()
    assert set(table["submission_id"]) == {done, waiting} == set(requests["id"])
    assert table["part"].isna().all()  # plain submissions
    pairs = table[["prompt_id", "seed"]].drop_duplicates()
    assert len(pairs) == len(table) // 2  # the same pairs in both: only the submission id tells them apart
    assert not table.duplicated(["submission_id", "prompt_id", "seed"]).any()
    per_image = scores["per_image"].to_pandas()
    joined = per_image.merge(table, on=["submission_id", "prompt_id", "seed"], how="left", validate="many_to_one")
    assert set(per_image["submission_id"]) == {done} and joined["sha256"].eq(joined["image_sha256"]).all()

    recorded = {job.id: job for job in store.queue.jobs()}
    assert requests.features["created_at"] == datasets.Value("timestamp[ms, tz=UTC]")
    for row in requests:
        assert row["created_at"] == datetime.fromisoformat(recorded[row["id"]].created_at)
    types: dict[str, set[str]] = {}
    for features in (requests.features, images.features, *(d.features for d in scores.values())):
        for name, feature in features.items():
            types.setdefault(name, set()).add(str(feature))
    assert {name: kinds for name, kinds in types.items() if len(kinds) > 1} == {}

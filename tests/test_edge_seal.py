"""Issue 48, trust at the edges: a seal over every byte, repo writers who cannot pick the past, a key checked at start.

Each attack is the issue's, run against real stores, real repos (folders laid out as the Hub's, and a stand-in Hub
on 127.0.0.1 for a commit) and real `culturelens serve` / `worker` processes: a results-repo writer fills a table
sealed as empty under a footer that says it has no rows; a requests-repo writer lists an older run's lease, undoes a
deletion, rolls latest.json back; an operator's key file is missing, empty or a folder.
"""

from __future__ import annotations

import json
import re
import shutil
import struct

import pyarrow.parquet as pq
import pytest

from benchmark import results
from benchmark.datasets import cube_1k
from benchmark.run_record import RunRecord
from culturelens.testing.submissions import make_submission
from leaderboard import hub_sync, pickup, seal, snapshot
from leaderboard.operator_settings import SEAL_SECRET
from leaderboard.queue.base import lease_hash
from leaderboard.repo import RepoError, folder_repo
from leaderboard.store import Store
from leaderboard.ui.site import Site
from tests.helpers import culturelens, free_port, serving_tiny_cube

CURVE_ROWS = 10


def _store(root, tiny_upstream) -> Store:
    return serving_tiny_cube(Store(root, quota=None, attempt_quota=None), tiny_upstream)


def _submit(store: Store, folder, name: str) -> str:
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    return store.submit(make_submission(folder / name, prompt_ids, model_name=f"Model {name}"), name).job.id


def _row(sid: str, value: float) -> dict:
    return {"provenance": "scored", "submission_id": sid, "model": f"Model {sid}", "track": "awareness",
            "metric": "clip_score", "metric_label": "CLIPScore", "metric_version": "1", "higher_is_better": True,
            "harness_version": "0.1.0", "dataset": "culturelens/cube-1k:cube_1k:test", "seeds": "0,1",
            "scored_at": "2026-02-03T04:05:06+00:00", "slice": "overall", "slice_value": "all", "value": value,
            "ci_low": value - 0.1, "ci_high": value + 0.1, "n": 6, "excluded": 0}


def _score(store: Store, value: float) -> tuple[str, str]:
    """The next job scored as the store's worker does (``Results.write``): claimed under a lease, its results written
    answering the job's current request under it, sealed with the store's key, then FINISHED. Its curves table has no
    rows. Returns the job's id and lease."""
    job = store.queue.claim("gpu", 60)
    run = RunRecord(submission_id=job.id, harness_version="0.1.0", request=store.queue.request_number(job.id),
                    lease=job.lease)
    results.write_folder(store.results_folder(job.id), [], [_row(job.id, value)], [], run,
                         then=lambda tmp: seal.seal_folder(tmp, store.results_folders.keys))
    assert store.queue.finish(job.id, "gpu", "scored")
    return job.id, job.lease


def _served(store: Store) -> dict[str, float]:
    """What the leaderboard serves: each scored submission's overall value."""
    rows = Site(store, "ada").catalog.query("SELECT submission_id, value FROM aggregates WHERE provenance = 'scored' "
                                            "AND slice = 'overall'")
    return dict(zip(rows["submission_id"], rows["value"]))


def _footer_says_no_rows(path, sid: str, rows: int) -> None:
    """Write ``rows`` model-level curve rows of ``sid`` to ``path`` as pyarrow does, then set the file's row count in
    its footer (FileMetaData field 3, an i64 in Thrift's compact encoding, after the schema's last element) to 0:
    the row group still holds them, and every reader reads them."""
    rows_of = [{"submission_id": sid, "model": f"Model {sid}", "metric": "w1kp", "prompt_id": None, "x": float(k),
                "value": 0.9, "n": 1} for k in range(1, rows + 1)]
    pq.write_table(results.table(rows_of, results.CURVES), path)
    data = path.read_bytes()
    start = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    count = bytes([0x16, rows * 2])  # field 3 (delta 1), i64; zigzag varint of ``rows`` (< 64)
    at = data.index(b"\x00" + count + b"\x19", start) + 2  # the schema's stop byte; field 4, the row groups' list
    path.write_bytes(data[:at] + b"\x00" + data[at + 1:])


# --- finding 1: a seal over bytes, not claims -----------------------------------------------------------------------
def test_edge_seal_a_table_sealed_empty_then_filled_under_a_footer_that_says_0_rows_is_refused(tmp_path, tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    filled, honest = (_submit(store, tmp_path, name) for name in ("filled", "honest"))
    for _ in range(2):
        _score(store, 0.25)
    published = tmp_path / "results-repo"
    hub_sync.export(store, "results", published)
    lying = published / "results" / filled / "curves.parquet"
    assert not lying.exists()  # a table of no rows is no file in a repo
    # A writer of the results repo adds 10 curve rows to the table sealed as empty, under a footer that says 0.
    _footer_says_no_rows(lying, filled, CURVE_ROWS)
    assert results.parquet_rows(lying) == 0 and pq.read_table(lying).num_rows == CURVE_ROWS
    for sid in (filled, honest):  # the app's disk lost them (a Space restarted): the pickup brings them back
        store.results_folders.drop(sid)

    repo = folder_repo(published)
    assert pickup.fetch(store, repo, [filled, honest]) == [honest]
    assert {entry.name: entry.reason for entry in store.quarantined()} == {
        filled: "its seal: its curves.parquet is not the file sealed"}
    catalog = Site(store, "ada").catalog
    assert catalog.query("SELECT count(*) AS n FROM curves")["n"][0] == 0
    assert _served(store) == {honest: 0.25}
    # The app's next release, sealed with its own key, carries none of them.
    release = pickup.publish(store, repo)
    rows = pq.read_table(published / release.file).to_pandas()
    assert set(rows["submission_id"]) == {honest} and not (rows["part"] == "curves").any()


def test_edge_seal_an_empty_table_is_one_known_file_and_an_empty_one_of_other_bytes_is_refused(tmp_path,
                                                                                                tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    sid = _submit(store, tmp_path, "padded")
    _score(store, 0.25)
    written = (store.results_folder(sid) / "curves.parquet").read_bytes()  # by the worker: its table of no rows
    published = tmp_path / "results-repo"
    hub_sync.export(store, "results", published)
    # The same empty table, its bytes padded with 1 MB of key-value metadata: no row, other bytes.
    padded = results.CURVES.empty_table().replace_schema_metadata({"payload": "x" * 1_000_000})
    pq.write_table(padded, published / "results" / sid / "curves.parquet")
    assert results.parquet_rows(published / "results" / sid / "curves.parquet") == 0
    store.results_folders.drop(sid)

    assert pickup.fetch(store, folder_repo(published), [sid]) == []
    assert [entry.reason for entry in store.quarantined()] == ["its seal: its curves.parquet is not the file sealed"]
    assert store.queue.get(sid).state == "FINISHED" and _served(store) == {}
    assert written == results.empty_table("curves.parquet")  # the one file of no rows, which the seal calls "empty"


# --- finding 9: a key that cannot seal is found at start -------------------------------------------------------------
@pytest.fixture()
def own_key(tmp_path, tiny_upstream, monkeypatch):
    """A store sealing with its own key (``STORE/seal.key``, no secret configured): one submission scored and sealed
    with it, one waiting for a worker."""
    monkeypatch.delenv(SEAL_SECRET.env)
    store = _store(tmp_path / "store", tiny_upstream)
    for name in ("scored", "waiting"):
        _submit(store, tmp_path, name)
    _score(store, 0.25)
    assert (store.root / seal.KEY_FILE).is_file()
    return store


KEY_DAMAGE = {
    "missing": lambda key: key.unlink(),
    "empty": lambda key: key.write_text(""),
    "a folder": lambda key: (key.unlink(), key.mkdir()),
}
KEY_SAID = {
    "missing": "error: STORE/seal.key is missing, but this store holds sealed results (1 with key '{key}'): put back "
               "the key that sealed them, or set CULTURELENS_SEAL_SECRET to its secret",
    "empty": "error: STORE/seal.key: no seal secret in it",
    "a folder": "error: STORE/seal.key is a folder, not a key file: remove it (a new key is made) or put the store's "
                "key back in its place, or set CULTURELENS_SEAL_SECRET",
}


@pytest.mark.slow  # six `culturelens` processes
@pytest.mark.parametrize("damage", KEY_DAMAGE)
def test_edge_seal_a_key_missing_empty_or_a_folder_stops_serve_and_worker_with_exit_2_before_any_scoring(
        own_key, damage):
    store = own_key
    key_id = store.results_folders.keys.sealing
    KEY_DAMAGE[damage](store.root / seal.KEY_FILE)
    no_secret = {SEAL_SECRET.env: ""}
    for verb in (["serve", "--no-worker", "--port", str(free_port())], ["worker", "--once"]):
        done = culturelens(*verb, "--store", store.root, env=no_secret, timeout=120)
        assert done.returncode == 2, (verb, done.stderr[-2000:])
        said = done.stderr.strip().splitlines()[-1]
        assert said.startswith(KEY_SAID[damage].format(key=key_id)), said
        assert "Traceback" not in done.stderr
    waiting = [job for job in store.queue.jobs() if job.state != "FINISHED"]
    assert [(job.state, job.attempts) for job in waiting] == [("PENDING", 0)]  # nothing was scored, nor failed
    assert (store.root / seal.KEY_FILE).exists() == (damage != "missing")  # a lost key is never replaced


def test_edge_seal_a_new_key_on_a_store_with_sealed_results_says_what_becomes_of_them(own_key, monkeypatch):
    store = own_key
    old = store.results_folders.keys.sealing
    monkeypatch.setenv(SEAL_SECRET.env, "a-new-secret-for-this-server-0123456789")
    new = seal.key_id(b"a-new-secret-for-this-server-0123456789")
    [line] = seal.check_at_start(store.root)
    assert line == (
        f"warning: this store holds results sealed with keys this server does not hold (1 with key '{old}'; its "
        f"keys: {new}, from CULTURELENS_SEAL_SECRET): they are still served from this disk, but refused wherever a "
        "seal is checked: not taken from a repo, scored again if the queue is rebuilt or restored, a release sealed "
        "with them not installed. To keep them, give the old secret too, after the new one in "
        "CULTURELENS_SEAL_SECRET (space-separated)")
    # With the old secret after the new one, nothing is said: both verify.
    secret = (store.root / seal.KEY_FILE).read_text()
    monkeypatch.setenv(SEAL_SECRET.env, f"a-new-secret-for-this-server-0123456789 {secret}")
    assert seal.check_at_start(store.root) == []


def test_edge_seal_a_rebuilt_queue_keeps_finished_only_results_its_seal_covers_and_trusts_only_sealed_ledger_lines(
        tmp_path, tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    tampered, rerun, kept = (_submit(store, tmp_path, name) for name in ("tampered", "rerun", "kept"))
    for _ in range(3):
        _score(store, 0.25)
    store.rerun(rerun, "rerun")
    _score(store, 0.5)  # its second request
    # On the store's disk: the first's value changed under its run.json and seal; a ledger line nobody sealed.
    results.write_folder(tmp_path / "forged", [], [_row(tampered, 0.99)], [], RunRecord(submission_id=tampered))
    shutil.copyfile(tmp_path / "forged" / "aggregates.parquet", store.results_folder(tampered) / "aggregates.parquet")
    with open(store.queue.ledger, "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({"event": "delete", "id": kept, "at": "2026-01-01T00:00:00+00:00"}) + "\n")
    with open(store.root / "queue.sqlite", "r+b") as file:
        file.write(bytes(100))  # damaged: the next open keeps it aside and rebuilds from the folders and ledger

    rebuilt = Store(store.root)
    states = {job.id: (job.state, job.owner) for job in rebuilt.queue.jobs()}
    assert states == {tampered: ("PENDING", "tampered"), rerun: ("FINISHED", "rerun"), kept: ("FINISHED", "kept")}
    assert rebuilt.queue.request_number(rerun) == 2 and rebuilt.queue.deleted() == set()
    assert rebuilt.rebuilt.endswith(
        "3 submissions restored (2 finished, 1 pending), owners from the queue's ledger; 1 ledger line not trusted, "
        "not sealed with this store's keys (it carries no seal: ledger lines are taken only as this queue's app and "
        "workers sealed them)")


# --- finding 2: a requests-repo writer chooses no sealed run, and undoes no deletion -----------------------------
def _exported(store: Store, folder) -> tuple:
    """The store's requests and results repos as its mirror writes them, exported afresh into ``folder``."""
    requests, published = folder / "requests-repo", folder / "results-repo"
    hub_sync.export(store, "requests", requests)
    hub_sync.export(store, "results", published)
    return requests, published


def test_edge_repo_writer_an_older_sealed_run_after_a_re_run_is_refused_after_a_restore(tmp_path, tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    sid = _submit(store, tmp_path, "rerun")
    _, first_lease = _score(store, 0.25)
    before, _ = _exported(store, tmp_path / "before")
    first_run = tmp_path / "first-run"
    shutil.copytree(store.results_folder(sid), first_run)  # public: its run.json, lease included, and its seal
    store.rerun(sid, "rerun")
    _score(store, 0.5)
    requests, published = _exported(store, tmp_path / "after")
    assert json.loads((requests / "requests" / f"{sid}.json").read_text())["request"] == 2

    # The writer puts the first run back in the results repo and the sha256 of its lease in the record.
    shutil.rmtree(published / "results" / sid)
    shutil.copytree(first_run, published / "results" / sid)
    record = requests / "requests" / f"{sid}.json"
    edited = json.loads(record.read_text())
    edited["lease_hashes"] += f" {lease_hash(first_lease)}"
    record.write_text(json.dumps(edited, indent=1, sort_keys=True))
    fresh = _store(tmp_path / "fresh", tiny_upstream)
    counts = hub_sync.pull(fresh, "requests", str(requests))
    assert (counts["edited"], counts["added"]) == (1, 0) and fresh.queue.get(sid) is None
    hub_sync.pull(fresh, "results", str(published))
    assert _served(fresh) == {} and not fresh.has_results(sid)

    # The record rolled back to the one sealed before the re-run (request 1, the first lease): refused too.
    shutil.copyfile(before / "requests" / f"{sid}.json", record)
    fresh = _store(tmp_path / "fresh-2", tiny_upstream)
    assert hub_sync.pull(fresh, "requests", str(requests))["edited"] == 1 and fresh.queue.get(sid) is None

    # The record as the app sealed it: restored answering request 2, so the first run is refused, the job PENDING.
    hub_sync.export(store, "requests", requests)
    fresh = _store(tmp_path / "fresh-3", tiny_upstream)
    assert hub_sync.pull(fresh, "requests", str(requests))["edited"] == 0
    assert fresh.queue.request_number(sid) == 2
    hub_sync.pull(fresh, "results", str(published))
    [refused] = fresh.quarantined()
    assert refused.reason == ("its results do not answer the job: its run.json carries another of the leases the "
                              "queue issued for its request 2")
    assert fresh.queue.get(sid).state == "PENDING" and _served(fresh) == {}


def test_edge_repo_writer_an_undone_deletion_is_refused_after_a_restore(tmp_path, tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    gone, kept = (_submit(store, tmp_path, name) for name in ("gone", "kept"))
    for _ in range(2):
        _score(store, 0.25)
    before, published_before = _exported(store, tmp_path / "before")
    store.delete(gone, "gone")
    requests, published = _exported(store, tmp_path / "after")
    index = json.loads((requests / "seal.json").read_text())
    assert list(index["deletions"]) == [gone] and list(index["records"]) == [kept]

    # The writer puts back the deleted submission's record, its images and its sealed results folder.
    shutil.copyfile(before / "requests" / f"{gone}.json", requests / "requests" / f"{gone}.json")
    shutil.copytree(before / "submissions" / gone, requests / "submissions" / gone)
    shutil.copytree(published_before / "results" / gone, published / "results" / gone)
    fresh = _store(tmp_path / "fresh", tiny_upstream)
    counts = hub_sync.pull(fresh, "requests", str(requests))
    assert (counts["edited"], counts["added"], counts["deleted"]) == (1, 1, 1)
    hub_sync.pull(fresh, "results", str(published))
    assert fresh.queue.get(gone) is None and gone in fresh.queue.deleted() and not fresh.has_results(gone)
    assert _served(fresh) == {kept: 0.25}
    # A store that restored nothing (the repo was away at its start) and took a new submission writes the repo: its
    # record is sealed beside the repo's, and no deletion, no sealed record of the repo's is dropped.
    other = _store(tmp_path / "other", tiny_upstream)
    new = _submit(other, tmp_path, "new")
    hub_sync.export(other, "requests", requests)
    written = json.loads((requests / "seal.json").read_text())
    assert written["deletions"] == index["deletions"] and set(written["records"]) == {kept, new}
    assert written["records"][kept] == index["records"][kept]

    # ... and removes it from the deletions: the seal no longer matches, and nothing is restored.
    del index["deletions"][gone]
    (requests / "seal.json").write_text(json.dumps(index, indent=1))
    fresh = _store(tmp_path / "fresh-2", tiny_upstream)
    with pytest.raises(RepoError, match="seal.json: its seal does not match its records and deletions"):
        hub_sync.pull(fresh, "requests", str(requests))
    assert fresh.queue.jobs() == []


# --- finding 3: a release number never goes back, a release file is never overwritten --------------------------
def test_edge_repo_writer_a_rolled_back_latest_json_is_refused_after_a_restore(tmp_path, tiny_upstream):
    store = _store(tmp_path / "store", tiny_upstream)
    first, second = (_submit(store, tmp_path, name) for name in ("first", "second"))
    _score(store, 0.25)
    published = tmp_path / "results-repo"
    hub_sync.export(store, "results", published)
    repo = folder_repo(published)
    assert pickup.publish(store, repo).number == 1
    latest_1 = (published / snapshot.LATEST).read_bytes()
    _score(store, 0.5)
    hub_sync.export(store, "results", published)
    assert pickup.publish(store, repo).number == 2
    files = {path.name: path.read_bytes() for path in (published / "leaderboard").glob("*.parquet")}

    (published / snapshot.LATEST).write_bytes(latest_1)  # sealed by the app, once: release 1 rolled back to
    said = ("names release 1, but release 2 exists: a release number never goes back (leaderboard/latest.json rolled "
            "back, or written by someone else)")
    fresh = Store(tmp_path / "fresh")
    with pytest.raises(snapshot.SnapshotError, match=re.escape(said)):
        pickup.install_latest(fresh, repo)
    assert snapshot.installed(fresh) is None
    [line] = pickup.Pickup(fresh, repo).start()
    assert line.startswith("warning: no leaderboard release from") and said in line
    with pytest.raises(snapshot.SnapshotError, match=re.escape(said)):  # the app's own store, holding release 2
        pickup.install_latest(store, repo)
    assert snapshot.installed(store)[0].number == 2

    # The next release follows release 2, and no release file is written over.
    release = pickup.publish(store, repo)
    assert release.number == 3 and set(json.loads((published / snapshot.LATEST).read_text())["submissions"]) == {
        first, second}
    assert {name: (published / "leaderboard" / name).read_bytes() for name in files} == files


def test_edge_repo_writer_a_release_file_is_never_overwritten_on_a_folder_or_the_hub(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from culturelens.testing.public_sources import HubRepo as StandInRepo, PublicSources
    from leaderboard.repo import HubRepo

    release = snapshot.release_file(2)
    folder = folder_repo(tmp_path / "results-repo")
    folder.commit({release: b"release 2"}, "release 2")
    with pytest.raises(RepoError, match=f"{release} exists: a release is never overwritten"):
        folder.commit({release: b"another release 2", snapshot.LATEST: b"{}"}, "release 2 again")
    assert (folder.folder / release).read_bytes() == b"release 2" and not (folder.folder / snapshot.LATEST).exists()

    commit = "a" * 40
    with PublicSources(hub={"org/results": StandInRepo(commit, {release: b"release 2"})}) as hub:
        monkeypatch.setattr(constants, "ENDPOINT", f"{hub.url}/hub")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        with pytest.raises(RepoError, match=f"org/results: {release} exists: a release is never overwritten"):
            HubRepo("org/results").commit({release: b"another release 2"}, "release 2 again", parent=commit)
        # Refused on the Hub's listing of the revision the commit must follow, before any commit is sent (the
        # stand-in answers no POST: a commit tried would fail as unreachable, not be refused).
        assert f"/hub/api/datasets/org/results/revision/{commit}" in [call["path"] for call in hub.requests]

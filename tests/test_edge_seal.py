"""Issue 48, trust at the edges: a seal over every byte, repo writers who cannot pick the past, a key checked at start.

Each attack is the issue's, run against real stores, real repos (folders laid out as the Hub's, and a stand-in Hub
on 127.0.0.1 for a commit) and real `culturelens serve` / `worker` processes: a results-repo writer fills a table
sealed as empty under a footer that says it has no rows; a requests-repo writer lists an older run's lease, undoes a
deletion, rolls latest.json back; an operator's key file is missing, empty or a folder.
"""

from __future__ import annotations

import struct

import pyarrow.parquet as pq

from benchmark import results
from benchmark.datasets import cube_1k
from benchmark.run_record import RunRecord
from culturelens.testing.submissions import make_submission
from leaderboard import hub_sync, pickup, seal
from leaderboard.repo import folder_repo
from leaderboard.store import Store
from leaderboard.ui.site import Site
from tests.helpers import serving_tiny_cube

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

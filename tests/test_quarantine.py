"""A damaged results file is moved aside (quarantined) and the leaderboard keeps serving everything else.

Results folders are written by the production writer (``benchmark.results.write_folder``) into a real store and
damaged on disk as a full disk or a bad copy would (a truncated Parquet file); the catalog is the real in-memory
DuckDB the app uses, and the overview's tables are computed on it."""

from __future__ import annotations

import logging
import threading

from benchmark import results
from benchmark.run_record import RunRecord
from leaderboard import quarantine, tables
from leaderboard.catalog import Catalog
from leaderboard.store import Store

COUNTRIES = ("Brazil", "Nigeria")


def _write(store: Store, submission_id: str, value: float):
    """A scored results folder: awareness/clip_score per image, per prompt, per country and overall."""
    per_image = [{"submission_id": submission_id, "model": f"model {submission_id}", "prompt_id": f"p{i}", "seed": s,
                  "country": COUNTRIES[i % 2], "concept": "cuisine", "track": "awareness", "metric": "clip_score",
                  "value": value + 0.01 * i} for i in range(4) for s in (0, 1)]
    row = {"provenance": "scored", "submission_id": submission_id, "model": f"model {submission_id}",
           "track": "awareness", "metric": "clip_score", "metric_label": "CLIPScore", "higher_is_better": True,
           "n": 4, "ci_low": value - 0.1, "ci_high": value + 0.1, "scored_at": "2025-01-01T00:00:00+00:00"}
    aggregates = ([{**row, "slice": "overall", "slice_value": "all", "value": value}]
                  + [{**row, "slice": "country", "slice_value": c, "value": value} for c in COUNTRIES]
                  + [{**row, "slice": "prompt", "slice_value": f"p{i}", "value": value, "n": 2} for i in range(4)])
    curves = [{"submission_id": submission_id, "model": f"model {submission_id}", "metric": "w1kp", "prompt_id": None,
               "x": float(k), "value": value / k} for k in (2, 3)]
    return results.write_folder(store.results / submission_id, per_image, aggregates, curves,
                                RunRecord(submission_id=submission_id))


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _scored(catalog: Catalog) -> list[str]:
    return sorted(catalog.query("SELECT DISTINCT submission_id FROM aggregates WHERE provenance = 'scored'")
                  ["submission_id"])


def _store(tmp_path) -> Store:
    store = Store(tmp_path / "store")
    store.seed_reported()
    _write(store, "good-a", 0.6)
    _write(store, "good-b", 0.4)
    return store


def test_a_truncated_aggregates_file_is_quarantined_and_the_app_starts_on_the_rest(tmp_path, caplog):
    store = _store(tmp_path)
    _truncate(_write(store, "bad-c", 0.9) / "aggregates.parquet")

    with caplog.at_level(logging.WARNING, logger="culturelens.catalog"):
        catalog = Catalog(store)  # today: duckdb "No magic bytes found at end of file"

    assert _scored(catalog) == ["good-a", "good-b"]
    assert not (store.results / "bad-c").exists()
    [entry] = store.quarantined()
    assert (entry.kind, entry.name) == ("results", "bad-c") and entry.when.startswith("20")
    assert "results/bad-c/aggregates.parquet: not a readable Parquet file" in entry.reason
    assert str(store.root) not in entry.reason  # shown to the operator: the store's folder is not named
    assert entry.folder.parent == store.root / "quarantine"
    assert sorted(p.name for p in entry.folder.iterdir()) == ["aggregates.parquet", "curves.parquet",
                                                             "per_image.parquet", "reason.txt", "run.json"]
    assert "quarantined bad-c" in caplog.text
    note = quarantine.note(store.quarantined())
    assert note.startswith("1 unreadable store item moved to STORE/quarantine/") and "results bad-c" in note

    # The overview works on what is left: both good models ranked, the papers' rows still there.
    headline = tables.headline_rows(catalog)
    assert set(headline.loc[headline["provenance"] == "scored", "model"]) == {"model good-a", "model good-b"}
    papers, _ = tables.ranked(catalog, "expectations", "human_alignment")
    assert (papers["provenance"] == "reported").any()
    ranked, _ = tables.ranked(catalog, "awareness", "clip_score")
    assert list(ranked.loc[ranked["provenance"] == "scored", "model"]) == ["model good-a", "model good-b"]
    assert list(tables.submissions(catalog)["submission_id"]) == ["good-a", "good-b"]
    assert set(catalog.curves("w1kp")["submission_id"]) == {"good-a", "good-b"}

    # The next start does not see it again.
    assert _scored(Catalog(store)) == ["good-a", "good-b"] and len(store.quarantined()) == 1


def test_a_damaged_folder_that_appears_while_serving_is_quarantined_at_the_next_refresh(tmp_path):
    store = _store(tmp_path)
    catalog = Catalog(store)
    _truncate(_write(store, "bad-aggregates", 0.9) / "aggregates.parquet")
    _truncate(_write(store, "bad-curves", 0.8) / "curves.parquet")  # its aggregates read: all rows or none
    _write(store, "good-d", 0.5)

    catalog.refresh(force=True)

    assert _scored(catalog) == ["good-a", "good-b", "good-d"]
    assert set(catalog.curves("w1kp")["submission_id"]) == {"good-a", "good-b", "good-d"}
    reasons = {e.name: e.reason for e in store.quarantined()}
    assert sorted(reasons) == ["bad-aggregates", "bad-curves"]
    assert "results/bad-curves/curves.parquet: not a readable Parquet file" in reasons["bad-curves"]
    assert len(tables.headline_rows(catalog).query("provenance == 'scored'")) == 3


def test_a_damaged_per_image_file_does_not_break_compare_for_the_others(tmp_path):
    store = _store(tmp_path)
    _write(store, "good-c", 0.5)
    catalog = Catalog(store)
    _truncate(store.results / "good-b" / "per_image.parquet")  # read only when Compare asks for it

    rows = catalog.per_image(["good-a", "good-b", "good-c"], "prompt_id = ?", ["p1"])

    assert sorted(set(rows["submission_id"])) == ["good-a", "good-c"] and len(rows) == 4
    [entry] = store.quarantined()
    assert entry.name == "good-b" and "results/good-b/per_image.parquet" in entry.reason
    assert _scored(catalog) == ["good-a", "good-c"]  # its scores go with it: the folder is one unit
    _truncate(store.results / "good-c" / "per_image.parquet")
    assert catalog.prompts_of("good-c").empty and [e.name for e in store.quarantined()] == ["good-b", "good-c"]
    assert list(catalog.prompts_of("good-a")["prompt_id"]) == ["p0", "p1", "p2", "p3"]


def test_a_damaged_reported_file_is_quarantined_and_rewritten_at_the_next_start(tmp_path):
    store = _store(tmp_path)
    _truncate(store.reported)
    catalog = Catalog(store)
    assert _scored(catalog) == ["good-a", "good-b"]
    assert catalog.query("SELECT count(*) AS n FROM aggregates WHERE provenance = 'reported'")["n"][0] == 0
    [entry] = store.quarantined()
    assert (entry.kind, entry.name) == ("reported", "reported.parquet") and "not a readable Parquet" in entry.reason

    store.seed_reported()  # what `culturelens serve` does at each start
    catalog.refresh(force=True)
    assert catalog.query("SELECT count(*) AS n FROM aggregates WHERE provenance = 'reported'")["n"][0] > 0


def test_a_folder_removed_while_being_read_is_gone_not_damaged(tmp_path):
    """Re-runs and deletions drop a results folder in one rename, maybe while the catalog reads it: the catalog
    must neither fail nor quarantine it."""
    store = _store(tmp_path)
    catalog = Catalog(store)
    stop, errors = threading.Event(), []

    def churn():
        try:
            for _ in range(150):
                _write(store, "churn", 0.3)
                store._drop_results("churn")  # what Store.rerun and Store.delete call
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)
        finally:
            stop.set()

    writer = threading.Thread(target=churn)
    writer.start()
    while not stop.is_set():
        catalog.refresh(force=True)
        catalog.per_image(["good-a", "churn"])
        catalog.prompts_of("churn")
    writer.join()
    catalog.refresh(force=True)
    assert errors == [] and store.quarantined() == [] and _scored(catalog) == ["good-a", "good-b"]
    assert store.quarantine(store.results / "churn", "gone") is None  # nothing to move: nothing written
    assert not (store.root / "quarantine").exists() or list((store.root / "quarantine").iterdir()) == []

"""Leaderboard releases and the results pickup: an app on an empty disk starts from one release file and then
fetches only the results folders it lacks.

The results repo is a local folder laid out like the Hub repo (``repo.LocalRepo``: the same calls the
Hub repo answers), filled with synthetic results written by ``benchmarks/make_store.py`` (real Parquet, the
store's layout); the tables compared are the app's own (its tabs' views), built over real DuckDB catalogs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from benchmark.digests import file_digest
from benchmark.layout import SEALED_FILES
from leaderboard import display, hub_sync, pickup, seal, snapshot, tables
from leaderboard.operator_settings import SEAL_SECRET
from leaderboard.repo import LocalRepo
from leaderboard.store import Store
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.site import Site
from leaderboard.ui.slices import SlicesTab

ROOT = Path(__file__).resolve().parents[1]
LATEST, FIRST, SECOND = snapshot.LATEST, snapshot.release_file(1), snapshot.release_file(2)


def _make_store(folder: Path, submissions: int, seed: int) -> Store:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_store.py"), "--out", str(folder),
                    "--submissions", str(submissions), "--prompts", "40", "--images", "3", "--seed", str(seed)],
                   check=True, capture_output=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", SEAL_SECRET.env: SEAL_SECRET.resolve()})
    return Store(folder)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Store:
    """Five scored submissions (three tracks, eleven metrics, slices and per-prompt rows)."""
    return _make_store(tmp_path_factory.mktemp("original") / "store", 5, 0)


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> Path:
    """One results folder another machine scored (a remote worker), not in the original store."""
    store = _make_store(tmp_path_factory.mktemp("remote") / "store", 1, 7)
    return next(store.results.iterdir())


@pytest.fixture()
def repo(original, tmp_path) -> LocalRepo:
    """The results repo holding the original store's folders and release 1."""
    folder = tmp_path / "repo"
    hub_sync.export(original, "results", folder)
    assert pickup.publish(original, LocalRepo(folder), repo_id="org/results").number == 1
    return LocalRepo(folder)


def _fresh(tmp_path, name: str = "fresh", knows: tuple[Store, ...] = ()) -> Store:
    """A restarted Space: an empty disk, the papers' rows written from code, and the queue's records of the
    submissions of ``knows`` (restored from the requests repo, or kept by the PostgreSQL server): results count
    only for submissions the queue knows."""
    store = Store(tmp_path / name)
    store.seed_reported()
    for source in knows:
        for job in source.queue.jobs():
            store.queue.restore(job)
    return store


def _scored_by(folder: Path) -> Store:
    """The store a results folder was scored in (``newcomer``'s: another machine's)."""
    return Store(folder.parents[1])


def _columns(frame) -> dict[str, list]:
    """A table's columns, None for a missing value (NaN is not equal to itself)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("list")


def _pages(views: Site) -> dict[str, object]:
    """What the app shows: the Overview of every view (table and note), a Slices table on one country, the
    submissions a visitor can pick and the curves."""
    shown = {}
    for track in [None, *tables.tracks(views.catalog)]:
        out = OverviewTab(views).overview(track, None, "", [], None, None, "", [], display.RANK_COLUMNS)
        shown[f"overview {track}"] = (_columns(out[2]), out[3])
    shown["slices"] = _columns(SlicesTab(views).slices("awareness", "clip_score", "country", "Japan", "")[4])
    shown["submissions"] = _columns(tables.submissions(views.catalog))
    shown["curves"] = _columns(views.catalog.curves("w1kp").sort_values(["submission_id", "x"]))
    return shown


def test_a_fresh_store_started_from_the_release_shows_the_same_leaderboard_reading_two_files(original, repo,
                                                                                            tmp_path):
    fresh = _fresh(tmp_path, knows=(original,))
    source = LocalRepo(repo.folder)
    lines = pickup.Pickup(fresh, source, release_interval=None).start()

    assert source.downloaded == [LATEST, FIRST]  # whatever the number of submissions
    assert lines == [f"leaderboard release 1 from {repo.folder}: 5 submissions ({LATEST}, {FIRST} read)"]
    assert list(fresh.results.iterdir()) == []
    assert sorted(p.name for p in (fresh.root / "leaderboard").iterdir()) == ["latest.json", "leaderboard-00001.parquet"]

    before, after = _pages(Site(original, "x")), _pages(Site(fresh, "x"))
    assert after == before
    ranked = before["overview awareness"][0]
    assert len(ranked["Model"]) == 5 and all(ranked["Rank range (95%)"])  # the bootstrap's per-prompt rows came too
    assert len(before["slices"]["Model"]) == 5 and len(before["curves"]["x"]) > 0


def test_per_image_rows_are_fetched_for_the_one_submission_a_page_needs(original, repo, tmp_path):
    fresh = _fresh(tmp_path, knows=(original,))
    source = LocalRepo(repo.folder)
    fetcher = pickup.Pickup(fresh, source, release_interval=None)
    fetcher.start()
    views = Site(fresh, "x", fetcher.fetch)
    chosen = tables.submissions(views.catalog)["submission_id"].iloc[2]

    prompts = views.catalog.prompts_of(chosen)

    assert len(prompts) == 40
    assert [p.name for p in fresh.results.iterdir()] == [chosen]
    assert sorted(source.downloaded[2:]) == sorted(f"results/{chosen}/{name}" for name in SEALED_FILES)
    assert len(views.catalog.per_image([chosen], "prompt_id = ?", [prompts["prompt_id"].iloc[0]])) > 0
    assert len(source.downloaded) == 7  # read once


def test_a_new_result_is_picked_up_alone_and_the_next_release_leaves_the_first_unchanged(original, repo, newcomer,
                                                                                          tmp_path):
    fresh = _fresh(tmp_path, knows=(original, _scored_by(newcomer)))
    source = LocalRepo(repo.folder)
    app = pickup.Pickup(fresh, source, release_interval=0)
    app.start()
    views = Site(fresh, "x")
    assert len(tables.submissions(views.catalog)) == 5
    first = (repo.folder / FIRST).read_bytes()
    shutil.copytree(newcomer, repo.folder / "results" / newcomer.name)  # a remote worker pushed its results
    source.downloaded.clear()

    app.round()

    assert [p.name for p in fresh.results.iterdir()] == [newcomer.name]  # that folder, not the five others
    assert source.downloaded[0] == LATEST  # its run.json first, then the rest of that folder
    assert source.downloaded[1:6] == [f"results/{newcomer.name}/{n}"
                                      for n in sorted(SEALED_FILES, key="run.json".__ne__)]
    views.catalog.refresh(force=True)
    assert newcomer.name in set(tables.submissions(views.catalog)["submission_id"])
    # The same round published release 2: release 1 is unchanged, latest.json and the card name release 2.
    assert (repo.folder / FIRST).read_bytes() == first
    latest = json.loads((repo.folder / LATEST).read_text())
    assert latest["release"] == 2 and latest["file"] == SECOND and len(latest["submissions"]) == 6
    configs = {c["config_name"]: c for c in DatasetCard.load(repo.folder / "README.md").data.to_dict()["configs"]}
    assert configs["leaderboard"]["data_files"] == [{"split": "train", "path": SECOND}]
    assert 'load_dataset("org/results", "leaderboard"' not in (repo.folder / "README.md").read_text()
    # A researcher's load_dataset reads the newest release only, not the two concatenated.
    loaded = datasets.load_dataset(str(repo.folder), "leaderboard", split="train",  # its own cache: never a
                                   cache_dir=str(tmp_path / "hf-cache")).to_pandas()  # stale one of this path
    second = pq.read_table(repo.folder / SECOND).to_pandas()
    assert len(loaded) == len(second) > len(pq.read_table(repo.folder / FIRST))
    assert sorted(loaded["submission_id"].unique()) == sorted(latest["submissions"])
    # Release 2 holds the newcomer as its folder holds it; nothing new: no release 3.
    rows = second[(second["submission_id"] == newcomer.name) & (second["part"] == "aggregates")]
    assert len(rows) == pq.read_table(newcomer / "aggregates.parquet").num_rows
    assert pickup.publish(fresh, source) is None
    # Another app starting now reads release 2 and nothing else.
    later, again = _fresh(tmp_path, "later", (original, _scored_by(newcomer))), LocalRepo(repo.folder)
    pickup.Pickup(later, again).start()
    assert again.downloaded == [LATEST, SECOND]
    assert _pages(Site(later, "x")) == _pages(views)


def _schema_changed(repo: LocalRepo) -> None:
    table = pq.read_table(repo.folder / FIRST)
    pq.write_table(table.append_column("payload", pa.array(["x"] * table.num_rows)), repo.folder / FIRST)


def _latest(repo: LocalRepo, **changes) -> None:
    record = json.loads((repo.folder / LATEST).read_text())
    (repo.folder / LATEST).write_text(json.dumps({**record, **changes}))


def _one_listed(repo: LocalRepo) -> None:
    record = json.loads((repo.folder / LATEST).read_text())
    record["submissions"] = dict(list(record["submissions"].items())[:1])
    (repo.folder / LATEST).write_text(json.dumps(record))


def _digest_changed(repo: LocalRepo) -> None:
    record = json.loads((repo.folder / LATEST).read_text())
    record["submissions"] = {sid: "0" * 64 for sid in record["submissions"]}
    (repo.folder / LATEST).write_text(json.dumps(record))


def _reported_rows(repo: LocalRepo) -> None:
    table = pq.read_table(repo.folder / FIRST)
    column = pa.array(["reported"] * table.num_rows)
    pq.write_table(table.set_column(table.schema.get_field_index("provenance"), "provenance", column),
                   repo.folder / FIRST)


HOSTILE = [
    (lambda r: (r.folder / LATEST).write_text("{not json"), "latest.json: not readable JSON"),
    (lambda r: _latest(r, file="../../etc/passwd"), r"release 1's file is 'leaderboard/leaderboard-00001.parquet', "
                                                    r"not '../../etc/passwd'"),
    (lambda r: _latest(r, release=4, file=snapshot.release_file(4)), "names leaderboard/leaderboard-00004.parquet, "
                                                                     "which the repo does not hold"),
    (lambda r: _latest(r, submissions={"../results": "0" * 64}), "'../results' is not a submission id"),
    (lambda r: (r.folder / FIRST).write_bytes(b"PAR1 not really"), "not a readable Parquet file"),
    (_schema_changed, "not a leaderboard release table \\(columns payload string"),
    (_one_listed, "rows of submissions latest.json does not list"),
    (_digest_changed, "its run.json is not the one latest.json's digest names"),
    (_reported_rows, "aggregate row\\(s\\) not scored by the harness"),
]


def _sealed_again(repo: LocalRepo, store: Store) -> None:
    """Seal the release as it now is with the store's key, as an app holding the secret would (a release made by a
    faulty app): what is left for ``snapshot.read`` to refuse. A latest.json that cannot be read stays as it is."""
    try:
        record = json.loads((repo.folder / LATEST).read_text())
        file = repo.folder / record["file"]
        digest = file_digest(file)
    except (ValueError, OSError, KeyError, TypeError):
        return
    record["seal"] = seal.release_seal(store.results_folders.keys, record["release"], digest, record["submissions"])
    (repo.folder / LATEST).write_text(json.dumps(record))


@pytest.mark.parametrize("change, message", HOSTILE, ids=[m[:30] for _, m in HOSTILE])
def test_a_hostile_release_is_refused_with_the_reason_and_the_app_starts_from_the_folders(
        original, repo, change, message, tmp_path):
    change(repo)
    fresh = _fresh(tmp_path, knows=(original,))
    with pytest.raises(snapshot.SnapshotError, match=f"seal|{message}"):
        pickup.install_latest(fresh, LocalRepo(repo.folder))  # as any writer of the repo would leave it: unsealed
    _sealed_again(repo, fresh)
    with pytest.raises(snapshot.SnapshotError, match=message):
        pickup.install_latest(fresh, LocalRepo(repo.folder))
    assert not (fresh.root / "leaderboard").exists() and list(fresh.staging.iterdir()) == []

    app = pickup.Pickup(fresh, LocalRepo(repo.folder), release_interval=None)
    [line] = app.start()  # said, not raised
    assert line.startswith(f"warning: no leaderboard release from {repo.folder}: ") and "one by one" in line
    app.round()  # the fallback: every folder, checked, one by one
    assert sorted(p.name for p in fresh.results.iterdir()) == sorted(p.name for p in original.results.iterdir())
    assert _pages(Site(fresh, "x")) == _pages(Site(original, "x"))


def test_a_damaged_or_misnamed_results_folder_is_left_out_and_the_others_picked_up(original, repo, newcomer,
                                                                                   tmp_path):
    fresh = _fresh(tmp_path, knows=(original, _scored_by(newcomer)))
    app = pickup.Pickup(fresh, LocalRepo(repo.folder), release_interval=None)
    app.start()
    shutil.copytree(newcomer, repo.folder / "results" / newcomer.name)
    (repo.folder / "results" / newcomer.name / "aggregates.parquet").write_bytes(b"PAR1 not really")
    shutil.copytree(newcomer, repo.folder / "results" / "not an id")
    (repo.folder / "results" / "x-1").symlink_to(newcomer, target_is_directory=True)

    app.round()

    assert list(fresh.results.iterdir()) == [] and list(fresh.staging.iterdir()) == []
    assert len(tables.submissions(Site(fresh, "x").catalog)) == 5  # the release still serves the five


def test_culturelens_hub_snapshot_publishes_and_export_writes_a_release(original, newcomer, tmp_path):
    from tests.helpers import culturelens

    folder = tmp_path / "backup"
    result = culturelens("hub", "export", "--store", str(original.root), "--results", str(folder))
    assert result.returncode == 0, result.stderr
    assert f"results: release 1 written to {folder}" in result.stdout
    shutil.copytree(newcomer, folder / "results" / newcomer.name)
    operator = _fresh(tmp_path, "operator", (original, _scored_by(newcomer)))
    result = culturelens("hub", "snapshot", "--store", str(operator.root), "--results", str(folder))
    assert result.returncode == 0, result.stderr
    assert f"release 2 written to {folder}: 6 submissions" in result.stdout
    result = culturelens("hub", "snapshot", "--store", str(operator.root), "--results", "not a repo")
    assert result.returncode == 2 and "neither a folder nor a Hub dataset repo id" in result.stderr
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    result = culturelens("hub", "snapshot", "--store", str(_fresh(tmp_path, "new").root), "--results", str(empty))
    assert result.returncode == 0, result.stderr
    assert f"{empty}: no results yet; nothing written" in result.stdout and list(empty.iterdir()) == []



def test_a_re_run_submission_leaves_the_release_and_the_release_stays_served_while_the_queue_is_away(original, repo,
                                                                                                     tmp_path):
    """The app on PostgreSQL, started from release 1: a re-run drops that submission's rows of the release (they
    are the run before's) from the leaderboard; with the queue's database away the release is served whole."""
    from culturelens.testing.postgres import PostgresServer, missing as no_postgres

    if reason := no_postgres():
        pytest.skip(reason)
    server = PostgresServer().start()
    try:
        app = Store(tmp_path / "app", queue=server.database())
        pickup.Pickup(app, LocalRepo(repo.folder), release_interval=None).start()
        chosen = sorted(snapshot.installed(app)[0].submissions)[0]
        job = original.queue.get(chosen)
        assert all(app.queue.restore(known) for known in original.queue.jobs())  # as a deployment's queue does
        assert len(tables.submissions(Site(app, "x").catalog)) == 5
        app.rerun(chosen, job.owner)
        assert chosen not in set(tables.submissions(Site(app, "x").catalog)["submission_id"])
        server.stop()  # the database goes away
        assert len(tables.submissions(Site(app, "x").catalog)) == 5
    finally:
        server.stop()



def test_a_store_whose_queue_knows_none_of_the_repos_submissions_publishes_no_release(repo, tmp_path):
    stranger = _fresh(tmp_path)  # not the app's store: its queue knows none of the repo's submissions
    latest = (repo.folder / LATEST).read_bytes()
    with pytest.raises(snapshot.SnapshotError, match="knows none of the 5 submissions the repo holds"):
        pickup.publish(stranger, LocalRepo(repo.folder))
    assert (repo.folder / LATEST).read_bytes() == latest and stranger.quarantined() == []


def test_a_folder_refused_while_its_submission_was_unknown_is_taken_once_the_queue_knows_it(original, repo,
                                                                                          newcomer, tmp_path):
    fresh = _fresh(tmp_path, knows=(original,))  # its requests not restored yet: the newcomer's record is missing
    source = LocalRepo(repo.folder)
    app = pickup.Pickup(fresh, source, release_interval=None)
    app.start()
    shutil.copytree(newcomer, repo.folder / "results" / newcomer.name)
    app.round()
    [entry] = fresh.quarantined()
    assert entry.name == newcomer.name and entry.reason.endswith("the queue knows no such submission (never "
                                                                 "submitted here, or deleted)")
    before = len(source.downloaded)
    app.round()  # its run.json is read again, and nothing else
    assert source.downloaded[before:] == [LATEST, f"results/{newcomer.name}/run.json"]
    assert not fresh.has_results(newcomer.name) and len(fresh.quarantined()) == 1

    assert fresh.queue.restore(_scored_by(newcomer).queue.get(newcomer.name))  # the requests restored
    app.round()
    assert fresh.has_results(newcomer.name) and fresh.quarantined() == []

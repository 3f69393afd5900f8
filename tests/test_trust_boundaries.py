"""Issue 30, trust at the repo boundary: what a visitor's text, a killed worker and earlier runs can leave behind.

Bounded text: a real Gradio server (``build_app`` launched on loopback, in this process so that
``time.process_time`` counts the server's CPU, the client's small share included) is sent megabytes in every box a
visitor can type into, through gradio_client. Killed workers: a real supervisor and a real process killed with
SIGKILL. Download folders: real `culturelens serve` processes sharing one temporary folder.
"""

from __future__ import annotations

import gc
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmark import layout, results
from benchmark.run_record import RunRecord
from benchmark.datasets import cube_1k
from leaderboard import display, render, search
from leaderboard.app import build_app, launch_options
from leaderboard.store import Store
from leaderboard.supervisor import Supervisor
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from tests.helpers import free_port, serving, serving_tiny_cube, until

QUOTED = 200  # characters of a visitor's text that a reply may repeat (issue 30)
SCORED = "sub-bounded"  # a scored submission with aggregate rows only: Compare finds no image of any prompt
# 5 MB of words a search could read (letters and spaces: ``render.plain`` shows them as they are).
BIG = ("street food at night " * 250_000)[:5_000_000]
DATASET = [cube_1k.HUB_REPO, cube_1k.CONFIG, "(any)", "(any)", "", ""]  # /datasets: repo, config, column, value,
#                                                                           contains, semantic query
OVERVIEW = ["awareness", None, "", [], None, None, "", [], display.RANK_COLUMNS, None]
SLICES = ["awareness", None, None, None, ""]


def _aggregate_row() -> dict:
    return {"provenance": "scored", "submission_id": SCORED, "model": "Bounded model", "model_id": "org/bounded",
            "model_type": "open", "parameters_billions": 1.0, "track": "awareness", "metric": "clip_score",
            "metric_label": "CLIPScore (2.5 max(cos, 0))", "metric_version": "1", "higher_is_better": True,
            "harness_version": "0.1.0", "backbone": "clip-vit-b-32", "dataset": "culturelens/cube-1k:cube_1k:test",
            "seeds": "0,1", "scored_at": "2026-02-03T04:05:06+00:00", "slice": "overall", "slice_value": "all",
            "value": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 6, "excluded": 0}


@pytest.fixture(scope="module")
def bounded_app(tmp_path_factory, tiny_upstream):
    from gradio_client import Client

    store = serving_tiny_cube(Store(tmp_path_factory.mktemp("bounded") / "store"), tiny_upstream)
    results.write_folder(store.results / SCORED, [], [_aggregate_row()], [], RunRecord(submission_id=SCORED))
    app = build_app(store, owner="visitor")
    port = free_port()
    app.queue(default_concurrency_limit=8).launch(server_name="127.0.0.1", server_port=port,
                                                  prevent_thread_lock=True, quiet=True, **launch_options(store))
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        app.close()


def _cpu_seconds(client, *args, api_name: str):
    """The reply of one call (or the error it got), and the CPU seconds this process (server and client) spent.
    What earlier tests left in this process is collected first: a full garbage collection that the call's 5 MB set
    off would otherwise count as the box's (the likely cause of 1.3 CPU-s for a Slices box late in a whole test run,
    against 0.1 s with this module alone)."""
    from gradio_client.exceptions import AppError

    gc.collect()
    start = time.process_time()
    try:
        reply = client.predict(*args, api_name=api_name)
    except AppError as error:  # a picker's refusal of a value that is not one of its choices
        reply = error.message
    return reply, time.process_time() - start


@pytest.mark.slow  # loads the sentence model and builds its index
def test_a_5_mb_semantic_query_takes_under_1_cpu_second_and_its_note_quotes_at_most_200_characters(bounded_app):
    prefix = BIG[:search.MAX_QUERY_CHARS]
    # The search by the query's first 200 characters (this call also loads the model and builds the index).
    *_, expected, _, _ = bounded_app.predict(*DATASET[:5], prefix, api_name="/datasets")
    (*_, table, note, _), cpu = _cpu_seconds(bounded_app, *DATASET[:5], BIG, api_name="/datasets")
    assert cpu < 1.0, f"{cpu:.2f} CPU-s"
    assert table == expected and len(table["data"]) == 6  # what was searched: the first 200 characters
    note = html.unescape(note)
    assert f"“{BIG[:200]}…” (all-MiniLM-L6-v2, which read its first 200 characters)" in note
    assert BIG[:201] not in note and len(note) < 1000


BOXES = {  # every box a visitor can type into, by the API call that reads it: (api name, arguments)
    "overview track": ("/overview", [BIG, *OVERVIEW[1:]]),
    "overview metric": ("/overview", [*OVERVIEW[:1], BIG, *OVERVIEW[2:]]),
    "overview model search": ("/overview", [*OVERVIEW[:2], BIG, *OVERVIEW[3:]]),
    "overview scored since": ("/overview", [*OVERVIEW[:6], BIG, *OVERVIEW[7:]]),
    "overview protocol": ("/overview", [*OVERVIEW[:9], BIG]),
    "overview download": ("/download", [*OVERVIEW[:2], BIG, *OVERVIEW[3:]]),
    "slices track": ("/slices", [BIG, *SLICES[1:]]),
    "slices metric": ("/slices", [*SLICES[:1], BIG, *SLICES[2:]]),
    "slices slice": ("/slices", [*SLICES[:2], BIG, *SLICES[3:]]),
    "slices value": ("/slices", [*SLICES[:3], BIG, *SLICES[4:]]),
    "slices model search": ("/slices", [*SLICES[:4], BIG]),
    "compare submissions": ("/compare", [[BIG, SCORED], "p1"]),
    "compare prompt": ("/compare", [[SCORED], BIG]),
    "datasets dataset": ("/datasets", [BIG, *DATASET[1:]]),
    "datasets config": ("/datasets", [*DATASET[:1], BIG, *DATASET[2:]]),
    "datasets column": ("/datasets", [*DATASET[:2], BIG, *DATASET[3:]]),
    "datasets value": ("/datasets", [*DATASET[:3], BIG, *DATASET[4:]]),
    "datasets contains": ("/datasets", [*DATASET[:4], BIG, ""]),
    "metrics method page": ("/method", [BIG]),
    "submit hub repo": ("/submit_form", [None, BIG]),
    "queue details": ("/details", [BIG]),
    "queue re-run": ("/rerun", [BIG]),
    "queue delete": ("/delete", [BIG]),
}


@pytest.mark.parametrize("box", BOXES)
def test_every_box_reads_5_mb_in_under_1_cpu_second_and_quotes_at_most_200_characters(bounded_app, box):
    api_name, args = BOXES[box]
    reply, cpu = _cpu_seconds(bounded_app, *args, api_name=api_name)
    assert cpu < 1.0, f"{box}: {cpu:.2f} CPU-s"
    text = html.unescape(json.dumps(reply, ensure_ascii=False, default=str))
    assert BIG[:QUOTED + 1] not in text and len(text) < 100_000, f"{box}: {len(text)} characters back"


# --- finding 5: a killed worker's entry, and the download folders of earlier runs -----------------------------------
SCORING_WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from leaderboard.queue import open_queue

    open_queue(Path(sys.argv[1])).set_worker(sys.argv[-1], "scoring", "scoring sub-1")  # the last: its --supervised id
    time.sleep(600)
""")


@pytest.mark.slow
def test_a_killed_workers_entry_ends_as_soon_as_its_process_is_gone(tmp_path):
    store = Store(tmp_path / "store")
    queue, views = store.queue, QueueTab(Site(store, "ada"))
    supervisor = Supervisor([sys.executable, "-c", SCORING_WORKER, str(store.root / "queue.sqlite")], queue,
                            first_delay=600, beat=0.2)  # no restart while the test looks
    supervisor.start()
    try:
        until(lambda: [w for w in queue.workers() if w["state"] == "scoring"], 60, "the worker says it scores")
        assert "is up: scoring" in "\n".join(views.status())
        os.kill(queue.supervisors()[0]["pid"], signal.SIGKILL)
        # Its heartbeat is a second old: only the supervisor, which reaped it, can say it is gone.
        until(lambda: queue.workers()[0]["state"] == "stopped", 5, "the killed worker's entry ends")
        assert [(w["state"], w["message"]) for w in views.queue_api()["workers"]] == \
            [("stopped", "its process ended (killed by SIGKILL)")]
        assert "scoring" not in "\n".join(views.status())
    finally:
        supervisor.stop()


HOLDER = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    from leaderboard.app import build_app
    from leaderboard.store import Store

    # Ctrl-C stops it, as in a terminal, even where the test runs in a background job (which ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    build_app(Store(Path(sys.argv[1])))  # what `culturelens serve` does before it listens
    print("ready", flush=True)
    time.sleep(600)
""")


def _holder(store: Store) -> subprocess.Popen:
    """A process that built the app over ``store`` (so made its download folder) and waits."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.root)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process


@pytest.mark.slow
def test_start_up_removes_the_download_folders_of_earlier_runs_and_never_a_live_servers(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the servers' system temporary folder
    store = Store(tmp_path / "store")

    def folders() -> set[str]:
        return {p.name for p in temp.glob("culturelens-downloads-*")}

    killed = _holder(store)
    killed.kill()  # SIGKILL: no code of its own runs, its folder stays behind
    killed.wait()
    # Folders of an earlier version (no lock): one unused for two days, one written to now (a server may use it).
    for name in ("culturelens-downloads-old", "culturelens-downloads-recent"):
        (temp / name / "tmp1").mkdir(parents=True)
        (temp / name / "tmp1" / "culturelens-overall.csv").write_text("model\n", encoding="utf-8")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(temp / "culturelens-downloads-old", (two_days_ago, two_days_ago))
    assert len(folders()) == 3
    before = folders()
    with serving(store.root, tmp_path / "serve.log", "--no-worker"):
        served = folders() - before
        assert len(served) == 1 and folders() == served | {"culturelens-downloads-recent"}
        live = _holder(store)  # a second server on this machine, started while the first runs
        try:
            assert len(folders()) == 3 and served <= folders()  # the running server's folder is left alone
        finally:
            live.send_signal(signal.SIGINT)  # stopped as Ctrl-C stops it: its own folder goes at exit
            live.wait(timeout=60)
        assert folders() == served | {"culturelens-downloads-recent"}
    assert folders() == {"culturelens-downloads-recent"}  # serve's SIGTERM: its folder is removed at exit


# --- finding 1: a results folder is its job's results, or it is refused --------------------------------------------
def _row(**changes) -> dict:
    """An aggregate row as a worker writes it (``_aggregate_row``), changed."""
    return {**_aggregate_row(), **changes}


def _queued(store: Store, *ids: str) -> None:
    for sid in ids:
        store.queue.add(id=sid, content_hash=f"sha256:{sid}", owner="ada", model=f"Model {sid}", model_id=None,
                        model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")


def test_a_forged_results_folder_holding_another_ids_rows_and_reported_rows_is_refused_with_a_reason(tmp_path):
    from leaderboard import pickup
    from leaderboard.repo import folder_repo

    store = Store(tmp_path / "store")
    _queued(store, "sub-a", "sub-b", "sub-c")
    for _ in range(3):  # each scored by a worker
        job = store.queue.claim("gpu", 60)
        store.queue.finish(job.id, "gpu", "scored")
    results.write_folder(store.results / "sub-b", [], [_row(submission_id="sub-b", model="Model B", value=0.5)], [],
                         RunRecord(submission_id="sub-b", request=1))  # B's results, as its worker wrote them
    # Someone who can write the results repo publishes results/sub-a/ with B's rows and a paper's rows in it, and
    # results/sub-c/ with a paper's row under C's own id.
    repo = folder_repo(tmp_path / "results-repo")
    reported = _row(provenance="reported", submission_id=None, model="DALL-E 3", value=0.999)
    results.write_folder(repo.folder / "results" / "sub-a", [], [
        _row(submission_id="sub-a", model="Model A", value=0.4), _row(submission_id="sub-b", model="Model B"),
        reported], [], RunRecord(submission_id="sub-a", request=1))
    results.write_folder(repo.folder / "results" / "sub-c", [], [{**reported, "submission_id": "sub-c"}], [],
                         RunRecord(submission_id="sub-c", request=1))

    assert pickup.fetch(store, repo, pickup.missing(store, repo)) == []

    reasons = {entry.name: entry.reason for entry in store.quarantined()}
    assert reasons == {
        "sub-a": "aggregates.parquet holds rows of other submissions ('sub-b', None), not only of sub-a",
        "sub-c": "aggregates.parquet holds 1 row(s) whose provenance is not 'scored' (a paper's rows come only "
                 "from its track's declaration)"}
    assert render.plain("results sub-a") in QueueTab(Site(store, "ada")).page()["workers"]  # listed in the Queue tab
    catalog = Site(store, "ada").catalog
    served = catalog.query("SELECT submission_id, model, provenance FROM aggregates WHERE model IN "
                           "('DALL-E 3', 'Model A', 'Model B')")
    assert served.to_dict("records") == [{"submission_id": "sub-b", "model": "Model B", "provenance": "scored"}]
    # Not fetched again while the repo holds the same folder.
    assert pickup.fetch(store, repo, pickup.missing(store, repo)) == [] and len(store.quarantined()) == 2

    # A folder that reached results/ by another way still brings only its own scored rows, and leaves whole.
    shutil.copytree(repo.folder / "results" / "sub-a", store.results / "sub-a")
    catalog.refresh(force=True)
    rows = catalog.query("SELECT submission_id, model, provenance FROM aggregates WHERE provenance = 'reported' "
                         "OR submission_id IN ('sub-a', 'sub-b') ORDER BY submission_id")
    assert rows[rows["provenance"] == "scored"].to_dict("records") == [
        {"submission_id": "sub-a", "model": "Model A", "provenance": "scored"},
        {"submission_id": "sub-b", "model": "Model B", "provenance": "scored"}]
    assert "DALL-E 3" not in set(rows["model"])
    store.delete("sub-a", "ada")
    catalog.refresh(force=True)
    assert catalog.query("SELECT count(*) AS n FROM aggregates WHERE submission_id = 'sub-a'")["n"][0] == 0


@pytest.mark.slow  # scores with a tiny CLIP
def test_results_for_a_job_without_its_lease_token_are_refused(tmp_path, tiny_upstream, backbones_file):
    from benchmark.encoders.spec import load_registry
    from benchmark.scoring_options import ScoringOptions
    from benchmark.metrics.alignment import ClipCosine
    from leaderboard import pickup, seal
    from leaderboard.repo import folder_repo
    from leaderboard.worker import Worker
    from culturelens.testing.submissions import make_submission

    repo = folder_repo(tmp_path / "results-repo")
    store = serving_tiny_cube(Store(tmp_path / "store", results_repo=repo), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    job = store.submit(make_submission(tmp_path / "upload", prompt_ids), "ada").job
    # A token holder publishes results/<id>/ for the pending job: its own rows, scored, answering request 1.
    results.write_folder(repo.folder / "results" / job.id, [], [_row(submission_id=job.id, value=0.99)], [],
                         RunRecord(submission_id=job.id, request=1))

    # The app's pickup refuses them, with the reason: unsealed, they are refused for their seal first.
    assert pickup.fetch(store, repo, [job.id]) == []
    [unsealed] = store.quarantined()
    assert unsealed.name == job.id and unsealed.reason.startswith(
        f"its seal: it carries no seal ({layout.SEAL}): results are taken only as a worker of this queue sealed them")
    # Published again (a new run.json: the same one is not downloaded twice), sealed with the store's own key as a
    # worker of this queue would seal it: still refused, as the queue issued no lease for it.
    published = repo.folder / "results" / job.id
    shutil.rmtree(published)
    results.write_folder(published, [], [_row(submission_id=job.id, value=0.99)], [],
                         RunRecord(submission_id=job.id, request=1, scored_at="2025-01-01T00:00:00+00:00"))
    seal.seal_folder(published, store.results_folders.keys)
    assert pickup.fetch(store, repo, [job.id]) == []
    [_, unleased] = store.quarantined()
    assert unleased.name == job.id and unleased.reason == (
        "its results do not answer the job: the queue has issued no lease for its request 1 (PENDING): no worker "
        "has scored it")
    # The next worker does not take them for its job's results: it scores the submission.
    worker = Worker(store, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()],
                    lease_seconds=60)
    assert worker.load() and worker.run(once=True) == 1
    scored = store.queue.get(job.id)
    assert scored.state == "FINISHED" and scored.message.startswith("scored 12 images"), scored
    assert store.run_record(job.id).lease == scored.lease and len(scored.lease) == 32


# --- finding 2: a deleted submission is gone everywhere ------------------------------------------------------------
@pytest.mark.slow  # two `culturelens serve` starts, and a tiny CLIP scoring
def test_a_deleted_submission_stays_absent_after_a_restart_over_a_release_and_after_the_next_publish(
        tmp_path, tiny_upstream, backbones_file, postgres_url):
    """The deployment: an app whose disk does not last, a remote worker, a PostgreSQL queue and two repos (folders
    standing in for the Hub's). The owner deletes a submission the remote worker published and release 1 holds."""
    from gradio_client import Client

    from benchmark.encoders.spec import load_registry
    from benchmark.scoring_options import ScoringOptions
    from benchmark.metrics.alignment import ClipCosine
    from leaderboard import hub_sync, pickup
    from leaderboard.remote import Remote
    from leaderboard.repo import folder_repo
    from leaderboard.worker import Worker
    from culturelens.testing.submissions import make_submission

    requests, published = folder_repo(tmp_path / "requests-repo"), folder_repo(tmp_path / "results-repo")
    app = serving_tiny_cube(Store(tmp_path / "app", queue=postgres_url), tiny_upstream)
    prompt_ids = list(app.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    kept = app.submit(make_submission(tmp_path / "kept", prompt_ids, model_name="Kept model"), "bo").job.id
    gone = app.submit(make_submission(tmp_path / "gone", prompt_ids, model_name="Deleted model"), "ada").job.id
    hub_sync.push(app, "requests", requests)  # the app's mirror
    remote = Remote(requests, published)
    gpu = serving_tiny_cube(Store(tmp_path / "gpu", queue=postgres_url, results_repo=published), tiny_upstream)
    worker = Worker(gpu, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()], remote=remote)
    assert worker.load() and worker.run(once=True) == 2  # scored and published both
    assert pickup.publish(app, published).submissions.keys() == {kept, gone}  # release 1

    app.delete(gone, "ada")

    def scored_models(store: Store) -> set[str]:
        """What a visitor of a freshly started `culturelens serve` over ``store`` is shown ranked."""
        with serving(store.root, tmp_path / f"{store.root.name}.log", "--no-worker", "--queue", postgres_url) as url:
            rows = Client(url, verbose=False).predict("awareness", "clip_cosine", api_name="/leaderboard")
        return {row["model"] for row in rows if row["provenance"] == "scored"}

    # The app restarts on an empty disk: it installs the newest release, as `serve --hub-results` does at start.
    restarted = Store(tmp_path / "restarted", queue=postgres_url)
    assert pickup.install_latest(restarted, published).number == 1
    assert scored_models(restarted) == {"Kept model"}
    # Its mirror removes the folder the remote worker pushed; the next release is rebuilt without it.
    hub_sync.push(restarted, "results", published)
    assert not (published.folder / "results" / gone).exists() and (published.folder / "results" / kept).exists()
    release = pickup.publish(restarted, published)
    assert release.number == 2 and set(release.submissions) == {kept}
    assert scored_models(restarted) == {"Kept model"}
    # A third start reads release 2, which does not hold it.
    assert set(pickup.install_latest(Store(tmp_path / "again", queue=postgres_url), published).submissions) == {kept}


# --- finding 4: a queue file damaged while serving -----------------------------------------------------------------
REBUILDING = "The queue is being rebuilt: its database file was found damaged"  # what the Queue and Submit tabs say
def _damage(queue_file) -> None:
    """Overwrite everything after the queue file's first 4 KiB, as a failing disk would. SQLite's pages written
    lately are first checkpointed from its write-ahead log into the file, as SQLite itself does, so that the
    damage is in what every reader reads."""
    import sqlite3

    with sqlite3.connect(queue_file) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(queue_file, "r+b") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(4096)
        file.write(bytes(range(256)) * ((size - 4096) // 256 + 1))


def test_a_worker_waits_for_a_damaged_queue_to_be_rebuilt_rather_than_exit(tmp_path, caplog):
    import threading

    from benchmark.scoring_options import ScoringOptions
    from leaderboard.worker import Worker

    store = Store(tmp_path / "store")
    worker = Worker(store, ScoringOptions(), [])  # no job comes: it only claims
    _damage(store.root / "queue.sqlite")
    stop = threading.Event()
    running = threading.Thread(target=worker.run, kwargs={"stop": stop, "poll_seconds": 0.1})
    running.start()
    try:
        until(lambda: "waiting 1 s for the service to rebuild the queue" in caplog.text, 10, "the worker waits")
        assert running.is_alive()
        assert store.rebuild_damaged_queue().startswith("queue rebuilt from disk at ")  # what the service does
        until(lambda: [w for w in store.queue.workers() if (w["id"], w["state"]) == (worker.id, "idle")], 30,
               "the worker claims again")
    finally:
        stop.set()
        running.join()


@pytest.mark.slow  # a `culturelens serve` with its worker, a tiny CLIP scoring, and Chromium
def test_a_queue_file_damaged_under_a_live_app_gives_a_notice_and_is_rebuilt_without_restarting_serve(
        tmp_path, tiny_upstream, backbones_file):
    from gradio_client import Client, handle_file

    from tests.browser import chromium, open_page, wait_for_text
    from culturelens.testing.submissions import make_submission, zip_folder

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    first = store.submit(make_submission(tmp_path / "first", prompt_ids, model_name="First model"), "ada").job
    second = zip_folder(make_submission(tmp_path / "second", prompt_ids, model_name="Second model"),
                        tmp_path / "second.zip")
    queue_file, log = store.root / "queue.sqlite", tmp_path / "serve.log"

    def jobs(client) -> dict[str, str]:
        return {job["model"]: job["state"] for job in client.predict(api_name="/queue")["jobs"]}

    with serving(store.root, log, "--user", "ada", "--backbones", str(backbones_file)) as url:
        client = Client(url, verbose=False)
        until(lambda: jobs(client) == {"First model": "FINISHED"}, 300, "its worker scores the first submission")

        # The Queue tab, opened by a person: a notice, not an error; then the rebuilt queue.
        _damage(queue_file)
        with chromium() as browser:
            page = open_page(browser, f"{url}?tab=queue", shows=REBUILDING)
            assert "Error" not in page.evaluate("() => document.body.innerText")
            wait_for_text(page, "queue rebuilt from disk at")  # its timer redraws the Queue tab
            wait_for_text(page, "First model")
        # The rebuilt queue keeps the owner: the queue's ledger, beside its file, says who submitted it.
        assert jobs(client) == {"First model": "FINISHED"} and store.queue.get(first.id).owner == "ada"

        # The Submit tab, while the queue is damaged: a notice, nothing stored; once rebuilt, the same upload passes.
        _damage(queue_file)
        verdict = client.predict(handle_file(str(second)), api_name="/submit")
        assert verdict.startswith("### Not submitted: nothing was stored") and REBUILDING in verdict
        until(lambda: client.predict(api_name="/queue")["notice"] is None, 60, "the queue is rebuilt")
        assert sorted(p.name for p in store.submissions.iterdir()) == [first.id]
        assert client.predict(handle_file(str(second)), api_name="/submit").startswith("### Accepted")
        # Its worker, never restarted, scores it: it waited for the queue rather than exit.
        until(lambda: jobs(client).get("Second model") == "FINISHED", 300, "the worker scores the second one")
        [supervisor] = until(store.queue.supervisors, 30, "the supervisor records itself in the rebuilt queue")
        assert (supervisor["state"], supervisor["restarts"]) == ("running", 0)
        assert len(list(store.root.glob("queue.sqlite.damaged-*"))) == 2
    assert "restarting it in" not in log.read_text()


# --- issue 40, finding 1: trust that survives a restore ------------------------------------------------------------
def _sealed_results(store: Store, sid: str, lease: str, value: float) -> None:
    """``sid``'s results as the store's worker writes them (``Results.write``): its rows, run.json answering request 1
    under ``lease``, sealed with the store's key (``leaderboard.seal``)."""
    from leaderboard import seal

    results.write_folder(store.results / sid, [], [_row(submission_id=sid, model=f"Model {sid}", value=value)], [],
                         RunRecord(submission_id=sid, harness_version="0.1.0", request=1, lease=lease),
                         then=lambda tmp: seal.seal_folder(tmp, store.results_folders.keys))


def _forge(folder, sid: str, lease: str | None, value: float = 0.99, keep_seal: bool = False) -> None:
    """What a writer of the results repo who holds no seal secret leaves at ``folder`` (results/<sid>/): rows of its
    choosing, run.json naming ``sid`` under ``lease`` (None: none), and the seal.json that was there if
    ``keep_seal``."""
    kept = (folder / "seal.json").read_bytes() if keep_seal else None
    shutil.rmtree(folder, ignore_errors=True)
    results.write_folder(folder, [], [_row(submission_id=sid, model=f"Model {sid}", value=value)], [],
                         RunRecord(submission_id=sid, harness_version="0.1.0", request=1, lease=lease))
    if kept is not None:
        (folder / "seal.json").write_bytes(kept)


@pytest.fixture()
def attacked(tmp_path, tiny_upstream):
    """A served store whose six submissions were scored by its worker (sealed results, FINISHED) but ``pending``
    (never scored) and ``gone`` (scored, then deleted by its owner), exported to a requests and a results repo (the
    mirror's files and release 1); then someone who can write both repos but holds no seal secret: ``nolease``'s
    results replaced by a folder carrying no lease, ``guessed``'s by one with a guessed lease, ``copied``'s by its own
    run.json (its genuine lease) and seal with its value changed, ``pending``'s record edited to FINISHED beside a
    folder carrying no lease, ``gone``'s folder left in the results repo, and release 1's value of ``good`` changed."""
    from culturelens.testing.submissions import make_submission
    from leaderboard import hub_sync, pickup
    from leaderboard.repo import folder_repo

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    names = ["good", "nolease", "guessed", "copied", "gone", "pending"]
    ids = {}
    for name in names:  # each its own owner: one quota each; each scored before the next comes (the queue takes the
        # oldest first, and submissions of one second are ordered by their id: ``pending`` must come last to stay so)
        ids[name] = store.submit(make_submission(tmp_path / name, prompt_ids, model_name=f"Model {name}"), name).job.id
        if name != "pending":
            job = store.queue.claim("gpu", 60)
            assert job.id == ids[name]
            _sealed_results(store, job.id, job.lease, 0.022)
            assert store.queue.finish(job.id, "gpu", "scored")
    requests, published = tmp_path / "requests-repo", tmp_path / "results-repo"
    hub_sync.export(store, "results", published)
    assert pickup.publish(store, folder_repo(published)).number == 1
    store.delete(ids["gone"], "gone")
    hub_sync.export(store, "requests", requests)

    folder = published / "results"
    genuine = RunRecord.parse((folder / ids["copied"] / "run.json").read_bytes())
    _forge(folder / ids["nolease"], ids["nolease"], None)
    _forge(folder / ids["guessed"], ids["guessed"], "0" * 32)
    _forge(folder / ids["copied"], ids["copied"], genuine.lease, keep_seal=True)
    _forge(folder / ids["pending"], ids["pending"], None, 0.999)
    record = requests / "requests" / f"{ids['pending']}.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "state": "FINISHED", "progress": 1}))
    latest = json.loads((published / "leaderboard" / "latest.json").read_text())
    release = published / latest["file"]
    table = pq.read_table(release).to_pandas()
    table.loc[table["submission_id"] == ids["good"], "value"] = 0.99
    pq.write_table(pa.Table.from_pandas(table, schema=pq.read_schema(release), preserve_index=False), release)
    return store, ids, requests, published


def _forged_refused(store: Store, ids: dict[str, str], unknown: tuple[str, ...] = ()) -> None:
    """What a store must show after taking the attacked results repo: every forged folder quarantined with its
    seal's reason, the attacked jobs PENDING (to be scored again; those ``unknown`` to its queue, not at all), the
    genuine one FINISHED and served, no 0.99."""
    reasons = {entry.name: entry.reason for entry in store.quarantined()}
    assert reasons[ids["nolease"]] == reasons[ids["guessed"]] == reasons[ids["pending"]] == (
        "its seal: it carries no seal (seal.json): results are taken only as a worker of this queue sealed them "
        "(results written before seals: re-run the submission)")
    assert reasons[ids["copied"]] == "its seal: its aggregates.parquet is not the file sealed"
    for name in ("nolease", "guessed", "copied", "pending"):
        job = store.queue.get(ids[name])
        assert not store.has_results(ids[name]) and (job is None if name in unknown else job.state == "PENDING"), name
    assert store.queue.get(ids["good"]).state == "FINISHED"
    served = Site(store, "ada").catalog.query("SELECT submission_id, value FROM aggregates WHERE provenance = "
                                              "'scored'")
    assert served.to_dict("records") == [{"submission_id": ids["good"], "value": 0.022}]


def test_restore_from_the_requests_repo_refuses_forged_results_and_an_edited_record_and_keeps_deletions(
        attacked, tmp_path, tiny_upstream):
    from leaderboard import hub_sync

    _, ids, requests, published = attacked
    fresh = serving_tiny_cube(Store(tmp_path / "fresh"), tiny_upstream)  # `serve --hub-requests` on an empty disk
    counts = hub_sync.pull(fresh, "requests", str(requests))
    # Five records (gone's is left out: the repo's seal lists its deletion): the one edited to FINISHED is not the
    # record the app sealed, and is refused (issue 48); the four FINISHED ones come back PENDING until sealed results
    # answering them arrive.
    assert counts == {"added": 4, "present": 0, "without_files": 0, "refused": 0, "unsealed": 4, "edited": 1,
                      "deleted": 1}
    assert ids["gone"] in fresh.queue.deleted() and fresh.queue.get(ids["gone"]) is None
    assert hub_sync.pull(fresh, "results", str(published)) == {"added": 1, "present": 0}
    _forged_refused(fresh, ids, unknown=("pending",))
    assert not fresh.has_results(ids["gone"]) and fresh.queue.get(ids["gone"]) is None  # its folder: not taken
    # The next worker scores the attacked ones again (not the deleted one).
    claimed = {fresh.queue.claim("gpu", 60).id for _ in range(3)}
    assert claimed == {ids[n] for n in ("nolease", "guessed", "copied")}


def test_restore_of_a_release_with_a_changed_value_is_refused(attacked, tmp_path):
    from leaderboard import pickup, snapshot
    from leaderboard.repo import folder_repo

    _, _, _, published = attacked
    fresh = Store(tmp_path / "fresh")
    with pytest.raises(snapshot.SnapshotError, match="release 1: its seal does not match its file and submissions"):
        pickup.install_latest(fresh, folder_repo(published))
    assert snapshot.installed(fresh) is None


def test_restore_into_a_rebuilt_damaged_queue_refuses_forged_results_and_keeps_deletions_and_owners(attacked):
    from leaderboard import pickup
    from leaderboard.repo import folder_repo

    store, ids, _, published = attacked
    # Their results were scored by a remote worker: in the repo only, and no release installed here yet.
    for name in ("nolease", "guessed", "copied", "pending"):
        shutil.rmtree(store.results / ids[name], ignore_errors=True)
    shutil.rmtree(store.root / "leaderboard")
    with open(store.root / "queue.sqlite", "r+b") as file:
        file.write(bytes(100))  # damaged: the next open keeps it aside and rebuilds from the folders and ledger
    rebuilt = Store(store.root)
    assert rebuilt.queue.damaged is not None
    assert {job.id: job.owner for job in rebuilt.queue.jobs()} == {ids[n]: n for n in ids if n != "gone"}
    assert ids["gone"] in rebuilt.queue.deleted() and rebuilt.queue.get(ids["gone"]) is None
    assert rebuilt.queue.get(ids["good"]).state == "FINISHED"  # its sealed results answer it

    repo = folder_repo(published)
    assert pickup.fetch(rebuilt, repo, pickup.missing(rebuilt, repo)) == []
    _forged_refused(rebuilt, ids)


# --- issue 40, finding 2: uploads checked before they are unpacked -------------------------------------------------
def _refused_before_unpacking(store: Store, archive) -> None:
    """``archive`` (``many_entries_zip``) is refused for its layout, the seeds its manifest lacks, listed 20 at a
    time and counted, never for an entry that cannot be unpacked (each would be: its CRC-32 is broken): only its
    manifest was unpacked. Nothing is left in staging, nothing queued."""
    outcome = store.submit(archive, "mallory")
    assert outcome.job is None and not outcome.report.ok
    errors = outcome.report.errors
    assert errors[0].endswith("is not in the manifest's seeds [0, 1]") and errors[-1].startswith("... and ")
    assert not any("cannot be extracted" in e or "CRC" in e for e in errors)
    assert list(store.staging.iterdir()) == [] and store.queue.jobs() == []


def test_upload_scale_a_10k_entry_zip_is_refused_for_its_layout_before_anything_else_is_unpacked(
        tmp_path, tiny_upstream):
    from culturelens.testing.submissions import many_entries_zip

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    archive = many_entries_zip(tmp_path / "many.zip", 10_000, ids)
    _refused_before_unpacking(store, archive)
    # 9,999 images for 6 prompts x 2 seeds: 12 answer the prompt set, the other 9,987 name seeds 2 to 1,666.
    assert store.submit(archive, "mallory").report.problems == 9_999 - 12


@pytest.mark.slow  # builds a 24 MiB zip of 200,000 entries; benchmarks/upload_scale.py measures its CPU time
def test_upload_scale_a_200k_entry_zip_is_refused_for_its_layout_before_anything_else_is_unpacked(
        tmp_path, tiny_upstream):
    from culturelens.testing.submissions import many_entries_zip

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    _refused_before_unpacking(store, many_entries_zip(tmp_path / "many.zip", 200_000, ids))


# --- issue 40, finding 3: everything a queue client writes is text ------------------------------------------------
HOSTILE_TEXT = ('[live](http://evil.example/a) ![img](http://evil.example/x.png) <img src="http://evil.example/y.png">'
                ' <a href="http://evil.example/b">b</a> https://evil.example/c **bold**')


def _rendered(markdown: str) -> tuple[list[str], str]:
    """The tags an independent CommonMark renderer makes of ``markdown`` (HTML on, as Gradio's Markdown allows it),
    and its text."""
    import re

    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(markdown)
    return re.findall(r"<([a-z0-9]+)", rendered), html.unescape(re.sub(r"<[^>]+>", "", rendered))


def test_queue_text_every_field_a_queue_client_writes_shows_as_text(tmp_path):
    """A client of the queue (a fake worker, a supervisor, a restored record) writes Markdown and HTML into every
    field the Queue tab shows: the supervisor rows' pid and last exit, a worker's name, state, message and track
    reasons, a job's model, owner, state, message and error, a notice. The tab shows each as the text it is: no
    link, no image, no HTML element of the writer's."""
    store = Store(tmp_path / "store")
    queue = store.queue
    queue.set_supervisor("sup-run", "running", pid=HOSTILE_TEXT, restarts=1, last_exit=HOSTILE_TEXT)
    queue.set_supervisor("sup-restart", "restarting", pid=None, restarts=2, last_exit=HOSTILE_TEXT, retry_in=5)
    queue.set_supervisor("sup-gave-up", "gave up", pid=None, restarts=3, last_exit=HOSTILE_TEXT, message=HOSTILE_TEXT)
    queue.set_worker(HOSTILE_TEXT, HOSTILE_TEXT, HOSTILE_TEXT)
    queue.set_worker("unavailable-" + HOSTILE_TEXT, "unavailable", HOSTILE_TEXT)
    queue.set_worker_tracks(HOSTILE_TEXT, {"awareness": HOSTILE_TEXT, "relevance": None})
    queue.add_notice(HOSTILE_TEXT)
    for sid in ("q-a", "q-b"):
        queue.add(id=sid, content_hash=f"sha256:{sid}", owner=HOSTILE_TEXT, model=HOSTILE_TEXT, model_id=None,
                  model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")
    job = queue.claim(HOSTILE_TEXT, 60)
    queue.fail(job.id, HOSTILE_TEXT, HOSTILE_TEXT, HOSTILE_TEXT)
    queue.claim(HOSTILE_TEXT, 60)
    assert queue.heartbeat("q-b", HOSTILE_TEXT, 60, 0.5, HOSTILE_TEXT)  # a RUNNING job's message

    tab = QueueTab(Site(store, "ada"))
    page = tab.page()
    shown = [page["workers"], page["worker_details"], tab.track_lines([HOSTILE_TEXT]), *page["table"]["State"]]
    for markdown in shown:
        tags, text = _rendered(markdown)
        assert not {"a", "img"} & set(tags), markdown
        assert set(tags) <= {"p", "ul", "li", "strong", "code", "blockquote", "span", "em", "br"}, tags
    everything = " ".join(_rendered(m)[1] for m in shown)
    assert everything.count(HOSTILE_TEXT) >= 8, everything  # each field, as written
    # The supervisor rows: last exit of the running one (folded; its pid is a number, so text there is "invalid",
    # issue 48), the others' last exits (shown).
    assert f"worker pid invalid running (restarted 1 time, last exit: {HOSTILE_TEXT})" in \
        _rendered(page["worker_details"])[1]
    assert f"the worker stopped ({HOSTILE_TEXT})" in _rendered(page["workers"])[1]


def test_queue_text_a_track_a_worker_says_it_scores_is_off_without_its_asset_here(tmp_path, tiny_upstream):
    """A fake worker says it scores every track; this server serves CUBE-1K but holds no scoring asset: the tracks
    on CUBE-1K that need one (variability's calibration, relevance's knowledge base) stay off, with the server's
    reason; awareness, which needs none, is on."""
    from benchmark import tracks

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    store.queue.set_worker("fake", "idle", "ready")
    store.queue.set_worker_tracks("fake", {name: None for name in tracks.all_tracks()})
    lines = QueueTab(Site(store, "ada", metric_settings={})).track_lines(["fake"])
    state = {line.removeprefix("- **").split("** ", 1)[0]: line.split("** ", 1)[1] for line in lines.splitlines()[1:]}
    assert state["Awareness (CUBE)"] == "is on"
    assert state["Variability (W1KP)"].startswith("is off: no w1kp-calibration: ")
    assert state["Relevance (CAIRE)"].startswith("is off: no relevance-kb: ")


# --- issue 40, finding 4: `reproduce` takes no instruction from the record ----------------------------------------
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[1;1HOK every metric reproduced\r"  # a title, a cleared screen, a fake verdict


def _hostile_record(sid: str, calibration: str) -> RunRecord:
    return RunRecord.model_validate({
        "submission_id": sid, "harness_version": "0.1.0" + ESCAPES, "dataset": "culturelens/cube-1k:cube_1k:test",
        "dataset_digest": "0" * 16, "seeds": [0, 1], "batch_size": 4, "backbones": {}, "backbone_specs": {},
        "metrics": {"w1kp" + ESCAPES: "1"},
        "settings": {"metric_settings": {"w1kp_calibration": calibration}, "tracks": ["variability"]}})


@pytest.fixture()
def listening():
    """A local HTTP server standing in for wherever a record points: it serves anything and counts requests."""
    import http.server
    import threading

    heard = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            heard.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"not a calibration")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/calibration.npz", heard
    finally:
        server.shutdown()


def test_reproduce_hostile_record_fetches_nothing_and_prints_no_escape_byte(tmp_path, tiny_upstream, listening):
    from culturelens.testing.submissions import make_submission
    from tests.helpers import culturelens_here

    url, heard = listening
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    sid = store.submit(make_submission(tmp_path / "sub", ids), "ada").job.id
    results.write_folder(store.results / sid, [], [], [], _hostile_record(sid, url))

    done = culturelens_here("reproduce", sid, "--store", store.root)
    assert done.returncode == 2 and heard == []  # refused, and nothing was asked of the server the record names
    assert "reproduce fetches nothing a record names unless given --allow-fetch" in done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr


def test_reproduce_hostile_submission_id_reads_nothing_outside_the_store(tmp_path):
    from tests.helpers import culturelens_here

    store = tmp_path / "store"
    folder = store / "results" / "sub-x"
    results.write_folder(folder, [], [], [], _hostile_record("../elsewhere/x/y", "w1kp.npz"))
    elsewhere = store / "elsewhere" / "x" / "y"  # what the record points at: a validated submission's files
    elsewhere.mkdir(parents=True)
    (elsewhere / "manifest.json").write_text("{}")
    done = culturelens_here("reproduce", folder, "--store", store)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "which is not a submission id" in done.stderr and "a record never chooses a path" in done.stderr
    assert "\x1b" not in done.stdout + done.stderr


# --- finding 5: Gradio's upload cache is this server's, and goes with it --------------------------------------------
def _uploaded_copies(temp, payload: bytes) -> list:
    """Files under ``temp`` holding ``payload`` (an upload Gradio cached, wherever it put it)."""
    return [p for p in temp.rglob("*") if p.is_file() and p.stat().st_size == len(payload)
            and p.read_bytes() == payload]


def test_upload_cache_is_emptied_of_an_upload_when_serve_stops_and_stays_empty_through_a_restart(tmp_path, own_tmpdir):
    from gradio_client import Client, handle_file

    temp = own_tmpdir
    payload = os.urandom(300_000)  # not a zip: refused, but Gradio keeps the upload all the same
    upload = tmp_path / "upload.zip"
    upload.write_bytes(payload)
    store = Store(tmp_path / "store")
    with serving(store.root, tmp_path / "serve.log", "--no-worker") as url:
        verdict = Client(url, verbose=False).predict(handle_file(upload), api_name="/submit")
        assert "zip" in verdict.lower()  # refused for what it is
        cached = _uploaded_copies(temp, payload)
        assert cached and all(p.is_relative_to(next(temp.glob("culturelens-uploads-*"))) for p in cached)
        # The machine's shared Gradio cache holds nothing (Gradio makes an empty folder there when it is imported).
        assert not [p for p in temp.glob("gradio/**/*") if p.is_file()]
    assert _uploaded_copies(temp, payload) == [] and list(temp.glob("culturelens-uploads-*")) == []  # SIGTERM
    with serving(store.root, tmp_path / "serve2.log", "--no-worker"):
        assert _uploaded_copies(temp, payload) == []
    assert list(temp.glob("culturelens-uploads-*")) == []


def test_upload_cache_refuses_a_file_over_the_upload_limit_with_the_limit_in_the_message(tmp_path, own_tmpdir):
    import httpx

    temp = own_tmpdir
    store = Store(tmp_path / "store")
    with serving(store.root, tmp_path / "serve.log", "--no-worker", "--limit", "max_upload_bytes=100000") as url:
        refused = httpx.post(url + "gradio_api/upload", files={"files": ("a.zip", b"x" * 100_001)}, timeout=30)
        assert refused.status_code == 413
        assert refused.text == "File size exceeded maximum allowed size of 100000 bytes."
        accepted = httpx.post(url + "gradio_api/upload", files={"files": ("a.zip", b"x" * 100_000)}, timeout=30)
        assert accepted.status_code == 200
    assert [p for p in temp.rglob("*") if p.is_file()] == []  # nothing of either is left


# --- finding 7: a wrong-typed value is a visitor's mistake, answered in a sentence -----------------------------------
def test_wrong_types_sent_to_the_api_are_refused_with_what_each_box_takes_and_log_no_traceback(tmp_path, tiny_upstream):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    results.write_folder(store.results / SCORED, [], [_aggregate_row()], [], RunRecord(submission_id=SCORED))
    log = tmp_path / "serve.log"
    calls = {  # endpoint: (values, the refusal expected)
        "/leaderboard": ((7, "overall", "", "", None), "'track' takes text, not a number"),
        "/details": ((["sub-1", "sub-2"],), "'submission_id' takes text, not a list"),
        "/submit": (("not-a-file.zip",), "'file' takes an uploaded file (gradio_client's handle_file), "
                                         "not text"),
        "/compare": ((3.5, None), "'chosen' takes a list of texts, not a number"),
        "/overview": ((True, *OVERVIEW[1:]), "'track' takes text, not true or false"),
    }
    with serving(store.root, log, "--no-worker") as url:
        client = Client(url, verbose=False)
        for endpoint, (values, expected) in calls.items():
            with pytest.raises(AppError) as refused:
                client.predict(*values, api_name=endpoint)
            assert refused.value.message.startswith(expected), (endpoint, refused.value.message)
        # The same endpoints with the values a page sends are answered (no value refused for its type).
        assert client.predict(SCORED, api_name="/details")
        assert client.predict(*OVERVIEW, api_name="/overview")
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_wrong_types_a_box_of_no_single_type_takes_any_value():
    """A JSON box or a state (the Queue tab's timer sends one) has a schema, not one type, for its API type."""
    import gradio as gr

    from leaderboard.bounds import checked

    assert checked(gr.JSON(), {"jobs": [1]}) == {"jobs": [1]} and checked(gr.State(), ["a", 2]) == ["a", 2]
    with pytest.raises(gr.Error, match="'track' takes text, not a number"):
        checked(gr.Textbox(label="track"), 7)


def test_upload_cache_a_killed_servers_uploads_are_removed_when_the_next_server_starts(tmp_path, own_tmpdir):
    temp = own_tmpdir
    store = Store(tmp_path / "store")
    killed = _holder(store)  # built the app: made its upload cache, as serve does
    (cache,) = temp.glob("culturelens-uploads-*")
    (cache / "upload.zip").write_bytes(b"an upload")
    killed.kill()  # SIGKILL: nothing of its own runs at exit
    killed.wait()
    assert (cache / "upload.zip").exists()
    with serving(store.root, tmp_path / "serve.log", "--no-worker"):
        assert not cache.exists() and len(list(temp.glob("culturelens-uploads-*"))) == 1  # its own only


def test_wrong_types_the_pages_own_values_pass_every_events_check(tmp_path):
    """Every event of the page (the timer's included, whose inputs hold session states) takes the values its
    components start with, as a browser sends them: the type check refuses only what no page sends."""
    import gradio as gr

    from leaderboard import bounds
    from leaderboard.app import build_app

    app = build_app(Store(tmp_path / "store"))
    refused = []
    for fn in app.fns.values():
        for component in fn.inputs:
            value = component.get_config().get("value") if hasattr(component, "get_config") else None
            try:
                bounds.checked(component, value)
            except Exception as error:  # noqa: BLE001 - every refusal is listed, whatever it is
                refused.append((fn.name, type(component).__name__, repr(error)))
    assert any(isinstance(c, gr.State) for fn in app.fns.values() for c in fn.inputs)  # the case that broke
    assert refused == []

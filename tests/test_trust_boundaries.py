"""Issue 30, trust at the repo boundary: what a visitor's text, a killed worker and earlier runs can leave behind.

Bounded text: a real Gradio server (``build_app`` launched on loopback, in this process so that
``time.process_time`` counts the server's CPU, the client's small share included) is sent megabytes in every box a
visitor can type into, through gradio_client. Killed workers: a real supervisor and a real process killed with
SIGKILL. Download folders: real `culturelens serve` processes sharing one temporary folder.
"""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from benchmark import results
from benchmark.datasets import cube_1k
from leaderboard import search, tables
from leaderboard.app import build_app, launch_options
from leaderboard.store import Store
from leaderboard.supervisor import Supervisor
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from tests.helpers import free_port, serving, serving_tiny_cube

QUOTED = 200  # characters of a visitor's text that a reply may repeat (issue 30)
SCORED = "sub-bounded"  # a scored submission with aggregate rows only: Compare finds no image of any prompt
# 5 MB of words a search could read (letters and spaces: ``render.plain`` shows them as they are).
BIG = ("street food at night " * 250_000)[:5_000_000]
DATASET = [cube_1k.HUB_REPO, cube_1k.CONFIG, "(any)", "(any)", "", ""]  # /datasets: repo, config, column, value,
#                                                                           contains, semantic query
OVERVIEW = ["awareness", None, "", [], None, None, "", [], tables.RANK_COLUMNS, None]
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
    results.write_folder(store.results / SCORED, [], [_aggregate_row()], [], {"submission_id": SCORED})
    app = build_app(store, owner="visitor")
    port = free_port()
    app.queue(default_concurrency_limit=8).launch(server_name="127.0.0.1", server_port=port,
                                                  prevent_thread_lock=True, quiet=True, **launch_options(store))
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        app.close()


def _cpu_seconds(client, *args, api_name: str):
    """The reply of one call (or the error it got), and the CPU seconds this process (server and client) spent."""
    from gradio_client.exceptions import AppError

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


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


@pytest.mark.slow
def test_a_killed_workers_entry_ends_as_soon_as_its_process_is_gone(tmp_path):
    store = Store(tmp_path / "store")
    queue, views = store.queue, QueueTab(Site(store, "ada"))
    supervisor = Supervisor([sys.executable, "-c", SCORING_WORKER, str(store.root / "queue.sqlite")], queue,
                            first_delay=600, beat=0.2)  # no restart while the test looks
    supervisor.start()
    try:
        _until(lambda: [w for w in queue.workers() if w["state"] == "scoring"], 60, "the worker says it scores")
        assert "is up: scoring" in views.workers_markdown()
        os.kill(queue.supervisors()[0]["pid"], signal.SIGKILL)
        # Its heartbeat is a second old: only the supervisor, which reaped it, can say it is gone.
        _until(lambda: queue.workers()[0]["state"] == "stopped", 5, "the killed worker's entry ends")
        assert [(w["state"], w["message"]) for w in views.queue_api()["workers"]] == \
            [("stopped", "its process ended (killed by SIGKILL)")]
        assert "scoring" not in views.workers_markdown()
    finally:
        supervisor.stop()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from leaderboard.app import build_app
    from leaderboard.store import Store

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

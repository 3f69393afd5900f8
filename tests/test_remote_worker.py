"""A worker on another machine: the app and the worker share only a PostgreSQL queue and two repos (local folders
laid out like the Hub repos, read and written through the same code as the Hub's), never a store."""

from __future__ import annotations

import json
import subprocess
import time

import pyarrow.parquet as pq
import pytest

from benchmark import layout, results
from tests.helpers import culturelens, culturelens_command
from culturelens.testing.submissions import make_submission

pytestmark = pytest.mark.slow

CUBE = "culturelens__cube-1k"


def _build_dataset(root, source) -> None:
    """What the operator does on each machine: build the dataset the leaderboard serves into the store."""
    built = culturelens("data", "build", "cube-1k", "--source", source, "--out", root / "datasets" / CUBE)
    assert built.returncode == 0, built.stderr


def test_a_remote_worker_fetches_scores_and_publishes_and_the_app_picks_the_results_up(
        tmp_path, tiny_upstream, backbones_file, postgres_url):
    from leaderboard import hub_sync, pickup
    from leaderboard.repo import LocalRepo
    from leaderboard.store import Store

    app_root, gpu_root = tmp_path / "app", tmp_path / "gpu"
    requests_repo, results_repo = tmp_path / "requests-repo", tmp_path / "results-repo"
    requests_repo.mkdir()
    results_repo.mkdir()
    for root in (app_root, gpu_root):
        _build_dataset(root, tiny_upstream)
    app = Store(app_root, queue=postgres_url)
    prompt_ids = list(app.prompts("culturelens/cube-1k", "cube_1k").table.index)
    job = app.submit(make_submission(tmp_path / "upload", prompt_ids), "alice").job

    # The worker claims the job before the app's mirror has pushed the submission: it waits for it.
    worker = subprocess.Popen(
        culturelens_command("worker", "--store", gpu_root, "--once", "--queue", postgres_url, "--backbones",
                            backbones_file, "--hub-requests", requests_repo, "--hub-results", results_repo,
                            "--hub-wait", 120),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while app.queue.get(job.id).state == "PENDING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert app.queue.get(job.id).state == "RUNNING"
    time.sleep(2)
    staged = tmp_path / "push"  # what the app's mirror pushes, appearing at once as a Hub commit does
    hub_sync.export(app, "requests", staged)
    (staged / layout.SUBMISSIONS).rename(requests_repo / layout.SUBMISSIONS)
    log, _ = worker.communicate(timeout=240)
    assert worker.returncode == 0, log
    assert f"{job.id} is not in {requests_repo} yet" in log

    finished = app.queue.get(job.id)
    assert finished.state == "FINISHED", finished
    assert finished.message.startswith("scored 12 images")  # 6 prompts x 2 seeds
    published = results_repo / layout.RESULTS / job.id
    # Awareness draws no curve: the empty curves.parquet is not published (it would break load_dataset's "curves");
    # the worker's seal over the folder is.
    with_rows = ["per_image.parquet", "aggregates.parquet", "run.json", layout.SEAL]
    assert sorted(p.name for p in published.iterdir()) == sorted(with_rows)
    assert not (gpu_root / layout.SUBMISSIONS / job.id).exists()  # the scored submission left the worker's disk
    assert not (gpu_root / layout.RESULTS / job.id).exists()  # published: its results did too
    assert not app.has_results(job.id)  # nothing reached the app's store through a shared disk

    # The app's next pickup round downloads that folder, and only it.
    repo = LocalRepo(results_repo)
    assert pickup.missing(app, repo) == [job.id]
    assert pickup.fetch(app, repo, [job.id]) == [job.id]
    assert sorted(repo.downloaded) == sorted(f"{layout.RESULTS}/{job.id}/{name}" for name in with_rows)
    for name in with_rows:  # the worker's results, byte for byte
        assert (app.results_folder(job.id) / name).read_bytes() == (published / name).read_bytes()
    curves = pq.read_table(app.results_folder(job.id) / "curves.parquet")  # written back: every result file again
    assert curves.num_rows == 0 and curves.schema.names == results.CURVES.names
    ours = pq.read_table(app.results_folder(job.id) / "aggregates.parquet")
    overall = ours.to_pandas().query("metric == 'clip_score' and slice == 'overall'")
    assert len(overall) == 1 and overall.iloc[0]["n"] == 6
    assert json.loads((published / layout.RUN).read_text())["request"] == 1

    # The owner asks for a re-run, after the app published a release holding the first run's results.
    assert list(pickup.publish(app, repo).submissions) == [job.id]
    app.rerun(job.id, "alice")
    assert pickup.missing(app, repo) == [job.id]  # the release's rows of it are the run before's
    assert pickup.fetch(app, repo, [job.id]) == []  # and so is the repo's folder, until the worker replaces it
    rerun = culturelens("worker", "--store", gpu_root, "--once", "--queue", postgres_url, "--backbones",
                        backbones_file, "--hub-requests", requests_repo, "--hub-results", results_repo, timeout=240)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    again = app.queue.get(job.id)
    assert again.state == "FINISHED" and again.message.startswith("scored 12 images"), again  # scored anew
    assert json.loads((published / layout.RUN).read_text())["request"] == 2
    assert pickup.fetch(app, repo, pickup.missing(app, repo)) == [job.id]
    assert json.loads(app.results_folder(job.id).joinpath(layout.RUN).read_text())["request"] == 2


def test_a_remote_worker_is_refused_without_the_shared_queue(tmp_path, backbones_file):
    result = culturelens("worker", "--store", tmp_path / "gpu", "--once", "--backbones", backbones_file,
                         "--hub-requests", tmp_path, "--hub-results", tmp_path, env={"CULTURELENS_QUEUE": ""},
                         timeout=120)
    assert result.returncode == 2
    assert "needs the app's queue: --queue postgresql://" in result.stderr
    assert "Traceback" not in result.stderr

"""The console script: verbs, help with examples, and clear errors instead of tracebacks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

VERBS = [["data"], ["data", "build"], ["data", "build", "cube-1k"], ["data", "build", "iconic-references"],
         ["data", "push"], ["schema"], ["generate"], ["validate"], ["submit"], ["worker"], ["score"], ["compare"],
         ["calibrate"], ["serve"], ["data", "build", "cube-cspace"], ["data", "build", "cube-diversity"],
         ["data", "build", "culturalframes"], ["export-culturalframes"], ["artifact-index"], ["kb-index"],
         ["meta-eval"], ["human-aggregates"], ["hub"], ["hub", "push"], ["hub", "pull"], ["hub", "export"],
         ["reproduce"]]


def culturelens(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmark.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=300)


def test_help_lists_every_verb():
    result = culturelens("--help")
    assert result.returncode == 0
    for verb in ("data", "schema", "generate", "validate", "submit", "worker", "score", "compare", "calibrate", "serve"):
        assert verb in result.stdout


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_every_verb_has_help_with_an_example(verb):
    result = culturelens(*verb, "--help")
    assert result.returncode == 0 and "example:" in result.stdout and "culturelens " + verb[0] in result.stdout


def test_push_offline_is_a_clear_error_without_traceback(tmp_path, tiny_upstream):
    folder = tmp_path / "cube"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    offline = culturelens("data", "push", str(folder), "--repo", "org/cube-1k", env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 1 and "HF_HUB_OFFLINE" in offline.stderr and "Traceback" not in offline.stderr
    unreachable = culturelens("data", "push", str(folder), "--repo", "org/cube-1k", "--token", "hf_test",
                              env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert unreachable.returncode == 1 and "cannot reach the Hugging Face Hub" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_build_from_an_unreachable_source_is_a_clear_error(tmp_path):
    result = culturelens("data", "build", "cube-1k", "--source", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o"))
    assert result.returncode == 1 and "cannot read the CUBE-1K source" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "o").exists()


def test_validate_reports_and_keeps_nothing(tmp_path, tiny_upstream):
    from tests.helpers import make_submission

    store = tmp_path / "store"
    folder = store / "datasets" / "culturelens__cube-1k"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    import datasets

    ids = datasets.load_dataset(str(folder), "cube_1k", split="test", cache_dir=str(tmp_path / "c"))["prompt_id"]
    good = make_submission(tmp_path / "good", ids)
    result = culturelens("validate", str(good), "--store", str(store))
    assert result.returncode == 0 and result.stdout.startswith("OK: Tiny Test Model: 12 images for 6 prompts")
    (good / "images" / ids[0] / "0.png").write_bytes(b"GIF89a")
    result = culturelens("validate", str(good), "--store", str(store))
    assert result.returncode == 1 and f"images/{ids[0]}/0.png: not an image" in result.stdout
    assert sorted(p.name for p in store.iterdir()) == ["datasets"]  # validate stores nothing, not even a queue


def test_cli_submit_then_worker_scores_it(tmp_path, tiny_upstream, tiny_clip, backbones_file):
    """The CLI path of the skeleton: `submit` queues, a separate `worker --once` process scores it."""
    import pyarrow.parquet as pq

    from leaderboard.store import Store
    from tests.helpers import make_submission

    store = tmp_path / "store"
    folder = store / "datasets" / "culturelens__cube-1k"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    ids = list(Store(store).prompts("culturelens/cube-1k", "cube_1k").table.index)
    submitted = culturelens("submit", str(make_submission(tmp_path / "sub", ids)), "--store", str(store), "--owner", "cli")
    assert submitted.returncode == 0, submitted.stderr
    submission_id = submitted.stdout.split("queued as ")[1].split()[0]
    worker = culturelens("worker", "--store", str(store), "--once", "--backbones", str(backbones_file))
    assert worker.returncode == 0, worker.stderr
    job = Store(store).queue.get(submission_id)
    assert job.state == "FINISHED" and job.owner == "cli"
    aggregates = pq.read_table(store / "results" / submission_id / "aggregates.parquet").to_pandas()
    overall = aggregates[(aggregates["metric"] == "clip_score") & (aggregates["slice"] == "overall")]
    assert len(overall) == 1 and overall.iloc[0]["n"] == 6 and overall.iloc[0]["provenance"] == "scored"
    assert overall.iloc[0]["backbone"] == f"clip-vit-b-32={tiny_clip.uid}"
    assert overall.iloc[0]["backbone_revision"].startswith("sha256:")


def test_worker_without_weights_says_why_and_touches_no_submission(tmp_path):
    from leaderboard.store import Store

    store = tmp_path / "store"
    backbones = tmp_path / "backbones.json"
    backbones.write_text('{"clip-vit-b-32": {"family": "open_clip", "model": "ViT-B-32", "weights": "%s"}}'
                         % (tmp_path / "none.bin"))
    result = culturelens("worker", "--store", str(store), "--once", "--backbones", str(backbones))
    assert result.returncode == 2 and "none.bin" in result.stderr and "Traceback" not in result.stderr
    (worker,) = Store(store).queue.workers()
    assert worker["state"] == "unavailable" and "--backbones" in worker["message"]
    # One missing backbone disables several metrics: its reason is given once, after their names.
    assert worker["message"].count("does not exist") == 1
    assert re.search(r"artifact_top1, artifact_top5, clip_cosine, clip_score[^:]*: checkpoint \S*none.bin of "
                     r"backbone 'clip-vit-b-32' \(ViT-B-32\) does not exist", worker["message"])


def test_the_hub_probe_fails_fast_where_the_hub_cannot_be_reached(monkeypatch):
    import socket

    from huggingface_hub import constants

    from benchmark.cli import hub_reachable

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1, as huggingface_hub reads it
    assert not hub_reachable()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with socket.socket() as listening:  # a local "Hub" that accepts connections
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listening.getsockname()[1]}")
        assert hub_reachable()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert not hub_reachable(timeout=1)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # behind a proxy a direct probe proves nothing
    assert hub_reachable(timeout=1)


def test_validate_builds_the_default_dataset_when_neither_a_local_copy_nor_the_hub_has_it(tmp_path, tiny_upstream):
    from benchmark.datasets import cube_1k
    from tests.helpers import TINY_UPSTREAM, make_submission

    ids = [r.prompt_id for r in cube_1k.check_records(TINY_UPSTREAM) if r.duplicate_of is None]
    good = make_submission(tmp_path / "good", ids)
    store = tmp_path / "store"
    offline = {"HF_HUB_OFFLINE": "1"}
    first = culturelens("validate", str(good), "--store", str(store), "--cube-source", str(tiny_upstream), env=offline)
    assert first.returncode == 0 and first.stdout.startswith("OK: Tiny Test Model: 12 images for 6 prompts")
    said = [line for line in first.stderr.splitlines() if "cube-1k" in line]  # the rest: the images' progress bar
    assert said == [f"culturelens/cube-1k is neither in {store / 'datasets'} nor reachable on the Hub: building it "
                    f"from {tiny_upstream} into {store / 'datasets' / 'culturelens__cube-1k'}"]
    assert (store / "datasets" / "culturelens__cube-1k" / "README.md").exists()
    again = culturelens("validate", str(good), "--store", str(store), "--cube-source", str(tmp_path / "gone.json"),
                        env=offline)
    assert again.returncode == 0 and "building" not in again.stderr  # the local copy is used from now on

    missing = culturelens("validate", str(good), "--store", str(tmp_path / "empty"), "--cube-source",
                          str(tmp_path / "gone.json"), env=offline)
    assert missing.returncode == 1 and "cannot build the default dataset culturelens/cube-1k" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_submit_over_the_quota_is_one_sentence_not_a_traceback(tmp_path, tiny_upstream):
    from leaderboard.store import Store
    from tests.helpers import make_submission

    store = Store(tmp_path / "store")
    folder = store.datasets / "culturelens__cube-1k"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    for n in range(store.quota):  # the default quota, used up by earlier submissions of this owner
        store.queue.add(id=f"s{n}", content_hash=f"sha256:{n}", owner="ada", model="m", model_id=None,
                        model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")
    ids = list(store.prompts("culturelens/cube-1k", "cube_1k").table.index)
    result = culturelens("submit", str(make_submission(tmp_path / "sub", ids)), "--store", str(store.root),
                         "--owner", "ada")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"error: ada has made {store.quota} submissions in the last 24 hours" in result.stderr


EXAMPLE = Path(__file__).resolve().parents[1] / "submissions" / "example"


def test_the_example_submission_becomes_a_scored_demo_row(tmp_path, cube_file, backbones_file):
    """Five minutes to a scored row: the shipped example validates, queues and scores with a local backbone,
    offline, and its rows carry the demo config in their protocol (ranked apart from full CUBE-1K rows)."""
    import pyarrow.parquet as pq

    from benchmark.results import protocol_fields
    from leaderboard.store import Store

    store, offline = tmp_path / "store", {"HF_HUB_OFFLINE": "1"}
    validated = culturelens("validate", str(EXAMPLE), "--store", str(store), "--cube-source", str(cube_file),
                            env=offline)
    assert validated.returncode == 0 and "72 images for 72 prompts" in validated.stdout, validated.stderr
    submitted = culturelens("submit", str(EXAMPLE), "--store", str(store), "--owner", "demo", env=offline)
    assert submitted.returncode == 0, submitted.stderr
    submission_id = submitted.stdout.split("queued as ")[1].split()[0]
    worker = culturelens("worker", "--store", str(store), "--once", "--backbones", str(backbones_file), env=offline)
    assert worker.returncode == 0, worker.stderr
    assert Store(store).queue.get(submission_id).state == "FINISHED"
    aggregates = pq.read_table(store / "results" / submission_id / "aggregates.parquet").to_pandas()
    assert {protocol_fields(p)["dataset"] for p in aggregates["protocol"]} == {"culturelens/cube-1k:cube_1k_demo:test"}
    clip = aggregates[aggregates["metric"] == "clip_score"]
    assert clip.loc[clip["slice"] == "overall", "n"].tolist() == [72]
    assert sorted(clip.loc[clip["slice"] == "concept", "n"]) == [24, 24, 24]

"""The console script: verbs, help with examples, and clear errors instead of tracebacks."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import culturelens
from culturelens.testing.submissions import TINY_UPSTREAM

VERBS = [["data"], ["data", "build"], ["data", "build", "cube-1k"], ["data", "build", "iconic-references"],
         ["data", "push"], ["schema"], ["generate"], ["validate"], ["submit"], ["worker"], ["score"], ["compare"],
         ["calibrate"], ["serve"], ["data", "build", "cube-cspace"], ["data", "build", "cube-diversity"],
         ["data", "build", "culturalframes"], ["export-culturalframes"], ["artifact-index"], ["kb-index"],
         ["meta-eval"], ["human-aggregates"], ["hub"], ["hub", "push"], ["hub", "pull"], ["hub", "export"],
         ["reproduce"], ["suite"], ["suite", "build"], ["suite", "push"]]


def help_text(capsys, monkeypatch, *args: str) -> str:
    """What ``culturelens ARGS --help`` prints, run in this process (argparse exits 0 after printing it); at the
    80 columns a terminal-less process gets, so wrapping is the same wherever the tests run."""
    from culturelens.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_verb(capsys, monkeypatch):
    text = help_text(capsys, monkeypatch)
    for verb in ("data", "schema", "generate", "validate", "submit", "worker", "score", "compare", "calibrate", "serve"):
        assert verb in text


def test_importing_the_cli_and_its_help_load_neither_torch_nor_datasets():
    """`culturelens --help` answers at once: nothing heavy is imported to list the verbs (timed in
    benchmarks/README.md, not here)."""
    heavy = ("torch", "datasets", "huggingface_hub", "gradio", "pandas", "psycopg")
    loaded = f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    code = f"import sys\nfrom culturelens import cli\n{loaded}\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n{loaded}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and "usage: culturelens" in result.stdout
    assert lines[0] == "" and lines[-1] == "", result.stdout  # after the import, and after --help


@pytest.mark.slow
def test_the_service_modules_load_no_model_library():
    """The leaderboard (store, catalog, tables, app) reads Parquet and serves pages: importing it loads no torch,
    transformers, open_clip or diffusers, so a CPU Space starts in seconds and holds no model library in memory.
    (It loaded torch through ``file_digest``, a sha256 helper that lived with the encoders.)"""
    heavy = ("torch", "transformers", "open_clip", "diffusers")
    code = ("import sys\nimport leaderboard.store, leaderboard.catalog, leaderboard.tables, leaderboard.app\n"
            f"print(','.join(m for m in {heavy!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_every_verb_has_help_with_an_example(verb, capsys, monkeypatch):
    text = help_text(capsys, monkeypatch, *verb)
    assert "example:" in text and "culturelens " + verb[0] in text
    # A default is stated once, and never as None ("(default: the preset's, else 1024) (default: None)").
    assert "(default: None)" not in text and "(default: False)" not in text
    assert not re.search(r"default[^()]*\)\s+\(default:", text)


# --- user errors and bugs -----------------------------------------------------------------------------------
# Exception classes that are not user errors, and why: each is caught where it is raised and never reaches a person
# (a worker that lost its lease; a rankings thread asked to stop, ended by its own loop).
INTERNAL_SIGNALS = {"leaderboard.worker.LeaseLost", "leaderboard.stored_rankings.Stopped"}


def exception_classes() -> list[type]:
    """Every exception class defined in benchmark/ and leaderboard/, found in the source (so a new module counts
    without being listed here) and imported from its module."""
    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted([*(root / "benchmark").rglob("*.py"), *(root / "leaderboard").rglob("*.py")]):
        names = [node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef) and node.bases]
        if not names:
            continue
        module = importlib.import_module(".".join(path.relative_to(root).with_suffix("").parts))
        found += [c for name in names if isinstance(c := getattr(module, name, None), type)
                  and issubclass(c, BaseException) and c.__module__ == module.__name__]
    return found


def test_every_error_a_verb_reports_is_a_culturelens_error():
    """One base for user errors: `main` prints any CultureLensError as one line with status 2, so every exception
    class of ours is one, but the internal signals listed above; the classes that keep a standard base (ValueError,
    OSError, ...) for code that catches that keep it too."""
    from benchmark.errors import CultureLensError

    classes = {f"{c.__module__}.{c.__qualname__}": c for c in exception_classes()}
    assert {"benchmark.datasets.cube_1k.CubeSourceError", "benchmark.datasets.culturalframes.CulturalFramesSourceError",
            "leaderboard.intake.PermissionDenied", "benchmark.errors.OutputExists"} <= set(classes)
    assert INTERNAL_SIGNALS <= set(classes)
    assert sorted(name for name, c in classes.items()
                  if not issubclass(c, CultureLensError) and name not in INTERNAL_SIGNALS) == []
    assert not any(issubclass(classes[name], CultureLensError) for name in INTERNAL_SIGNALS)
    assert len({c.__name__ for c in classes.values()}) == len(classes)  # no two share a name
    assert issubclass(classes["leaderboard.intake.PermissionDenied"], PermissionError)


def test_a_user_error_is_one_line_and_status_2(tmp_path, capsys):
    from culturelens.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("not a dataset")
    assert main(["data", "build", "cube-diversity", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {out} exists and is not a dataset folder built by culturelens; choose another --out\n"
    assert (out / "mine.txt").exists()


def test_a_bug_in_a_verb_keeps_its_traceback_and_is_not_status_2(tmp_path, capsys):
    """`run` handles only CultureLensError: a verb called with a value of the wrong type (a caller's bug) raises
    its TypeError through `run`, and the console script then ends with the traceback and status 1."""
    from benchmark.datasets.cube_1k import CubeSourceError
    from culturelens import cli
    from culturelens.verbs import data

    with pytest.raises(TypeError):
        cli.run(argparse.Namespace(run=data.schema, out=7))

    def refuse(args):
        raise CubeSourceError("cube.json: not JSON")

    assert cli.run(argparse.Namespace(run=refuse)) == 2
    assert capsys.readouterr().err == "error: cube.json: not JSON\n"
    code = ("import argparse\nfrom culturelens import cli\nfrom culturelens.verbs import data\n"
            "cli.run(argparse.Namespace(run=data.schema, out=7))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1 and "Traceback" in result.stderr and "TypeError" in result.stderr
    assert "error: " not in result.stderr


def test_a_bad_culturalframes_source_is_one_line_and_status_2(tmp_path):
    result = culturelens("data", "build", "culturalframes", "--source", str(tmp_path / "nope"), "--out",
                         str(tmp_path / "cf"), env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"error: {tmp_path / 'nope'}: neither a folder nor a Hub dataset repo id "
                                          "(ORG/NAME)"]
    assert not (tmp_path / "cf").exists()


@pytest.mark.slow
def test_push_offline_is_a_clear_error_without_traceback(tmp_path, tiny_upstream):
    folder = tmp_path / "cube"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    offline = culturelens("data", "push", str(folder), "--repo", "org/cube-1k", env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "HF_HUB_OFFLINE" in offline.stderr and "Traceback" not in offline.stderr
    unreachable = culturelens("data", "push", str(folder), "--repo", "org/cube-1k", "--token", "hf_test",
                              env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert unreachable.returncode == 2 and "cannot reach the Hugging Face Hub" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_build_from_an_unreachable_source_is_a_clear_error(tmp_path):
    result = culturelens("data", "build", "cube-1k", "--source", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "cannot read the CUBE-1K source" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_validate_reports_and_keeps_nothing(tmp_path, tiny_upstream):
    from culturelens.testing.submissions import make_submission

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


@pytest.mark.slow
def test_cli_submit_then_worker_scores_it(tmp_path, tiny_upstream, tiny_clip, backbones_file, store_queue):
    """The CLI path of the skeleton: `submit` queues, a separate `worker --once` process scores it; on each queue
    backend (PostgreSQL: `submit --queue URL`, the worker finding it in CULTURELENS_QUEUE)."""
    import pyarrow.parquet as pq

    from leaderboard.store import Store
    from culturelens.testing.submissions import make_submission

    store = tmp_path / "store"
    folder = store / "datasets" / "culturelens__cube-1k"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    ids = list(Store(store).prompts("culturelens/cube-1k", "cube_1k").table.index)
    submitted = culturelens("submit", str(make_submission(tmp_path / "sub", ids)), "--store", str(store), "--owner", "cli",
                            *(["--queue", store_queue] if store_queue else []))
    assert submitted.returncode == 0, submitted.stderr
    submission_id = submitted.stdout.split("queued as ")[1].split()[0]
    worker = culturelens("worker", "--store", str(store), "--once", "--backbones", str(backbones_file),
                         env={"CULTURELENS_QUEUE": store_queue or ""})
    assert worker.returncode == 0, worker.stderr
    job = Store(store, queue=store_queue).queue.get(submission_id)
    assert (Store(store).queue.get(submission_id) is None) == bool(store_queue)  # never in the file when on the server
    assert job.state == "FINISHED" and job.owner == "cli"
    aggregates = pq.read_table(store / "results" / submission_id / "aggregates.parquet").to_pandas()
    overall = aggregates[(aggregates["metric"] == "clip_score") & (aggregates["slice"] == "overall")]
    assert len(overall) == 1 and overall.iloc[0]["n"] == 6 and overall.iloc[0]["provenance"] == "scored"
    assert overall.iloc[0]["backbone"] == f"clip-vit-b-32={tiny_clip.uid}"
    assert overall.iloc[0]["backbone_revision"].startswith("sha256:")


@pytest.mark.slow
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


@contextlib.contextmanager
def http_server(answer: bool = True):
    """A local HTTP server on a free port answering 200 to anything (answer=True), or a socket that accepts
    connections and never answers (a Hub behind a firewall that drops packets, as far as a client can tell)."""
    import http.server
    import socket
    import threading

    if not answer:
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)
            yield f"http://127.0.0.1:{silent.getsockname()[1]}"
        return

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_hub_probe_fails_fast_where_the_hub_cannot_be_reached(monkeypatch):
    from huggingface_hub import constants

    from culturelens.cli import hub_reachable

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1, as huggingface_hub reads it
    assert not hub_reachable()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "no_proxy",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with http_server() as hub:  # a "Hub" that answers
        monkeypatch.setenv("HF_ENDPOINT", hub)
        assert hub_reachable()
    with http_server(answer=False) as silent:  # connections open, nothing answers
        monkeypatch.setenv("HF_ENDPOINT", silent)
        assert not hub_reachable(timeout=1)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    assert not hub_reachable(timeout=1)
    # Behind a proxy the probe goes through it, as the Hub client will: a proxy that answers lets it through ...
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")
    with http_server() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        assert hub_reachable()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # ... one that cannot be reached does not
    assert not hub_reachable(timeout=1)


@pytest.mark.slow
def test_every_verb_works_offline_at_once_when_the_hub_does_not_answer(tmp_path, tiny_upstream):
    """validate (and submit, score, worker, generate: one check in `main`) find the Hub silent within seconds,
    say so, and go on offline: here the default dataset is built locally, and a worker started as the Queue tab
    advises says which weights it lacks instead of retrying the Hub."""
    from benchmark.datasets import cube_1k
    from culturelens.testing.submissions import make_submission

    ids = [r.prompt_id for r in cube_1k.check_records(TINY_UPSTREAM) if r.duplicate_of is None]
    good = make_submission(tmp_path / "good", ids)
    with http_server(answer=False) as silent:
        env = {"HF_HUB_OFFLINE": "", "HF_DATASETS_OFFLINE": "", "HF_ENDPOINT": silent, "HF_HOME": str(tmp_path / "hf")}
        validated = culturelens("validate", str(good), "--store", str(tmp_path / "store"), "--cube-source",
                                str(tiny_upstream), env=env)
        worker = culturelens("worker", "--store", str(tmp_path / "store"), "--once", env=env)
    offline = "the Hugging Face Hub cannot be reached: working offline"
    assert validated.returncode == 0 and validated.stdout.startswith("OK: Tiny Test Model: 12 images for 6 prompts")
    assert offline in validated.stderr and "building it from" in validated.stderr
    assert worker.returncode == 2 and offline in worker.stderr and "Traceback" not in worker.stderr
    assert "cannot load backbone 'clip-vit-b-32'" in worker.stderr


@pytest.mark.slow
def test_validate_builds_the_default_dataset_when_neither_a_local_copy_nor_the_hub_has_it(tmp_path, tiny_upstream):
    from benchmark.datasets import cube_1k
    from culturelens.testing.submissions import TINY_UPSTREAM, make_submission

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
    assert missing.returncode == 2 and "cannot build the default dataset culturelens/cube-1k" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_submit_holds_the_operator_to_a_quota_only_when_one_is_set(tmp_path, tiny_upstream):
    from leaderboard.store import Store
    from culturelens.testing.submissions import make_submission

    store = Store(tmp_path / "store")
    folder = store.datasets / "culturelens__cube-1k"
    assert culturelens("data", "build", "cube-1k", "--source", str(tiny_upstream), "--out", str(folder)).returncode == 0
    for n in range(5):  # five submissions of this owner today: the public quota's worth
        store.queue.add(id=f"s{n}", content_hash=f"sha256:{n}", owner="ada", model="m", model_id=None,
                        model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")
    ids = list(store.prompts("culturelens/cube-1k", "cube_1k").table.index)
    offline = {"HF_HUB_OFFLINE": "1"}
    over = culturelens("submit", str(make_submission(tmp_path / "a", ids)), "--store", str(store.root), "--owner",
                       "ada", "--quota", "5", env=offline)
    assert over.returncode == 2 and "Traceback" not in over.stderr
    assert over.stderr.splitlines()[-1] == ("error: ada has made 5 submissions in the last 24 hours; the quota is 5 "
                                            "(re-runs and deleted submissions count). Try again later or ask a "
                                            "maintainer.")
    from_environment = culturelens("submit", str(make_submission(tmp_path / "a", ids)), "--store", str(store.root),
                                   "--owner", "ada", env={**offline, "CULTURELENS_QUOTA": "5"})
    assert from_environment.returncode == 2 and "the quota is 5" in from_environment.stderr
    # Whoever runs `submit` holds the store's disk: without a quota set, the sixth goes in.
    operator = culturelens("submit", str(make_submission(tmp_path / "a", ids)), "--store", str(store.root),
                           "--owner", "ada", env=offline)
    assert operator.returncode == 0 and "queued as " in operator.stdout
    bad = culturelens("submit", str(make_submission(tmp_path / "a", ids)), "--store", str(store.root), "--quota",
                      "five", env=offline)
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1] == ("error: quota (its flag): 'five' is not a whole "
                                                                   "number >= 0 or 'none'")


EXAMPLE = Path(__file__).resolve().parents[1] / "submissions" / "example"


@pytest.mark.slow
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

"""Helpers for tests only: running the command line and a live server, waiting for a state, the tiny CUBE dataset in a
store, scored suite rows. What the ``benchmarks/`` scripts share with the tests (tiny models, stand-in submissions, a
PostgreSQL server) is in ``culturelens.testing``."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from culturelens.testing.live_app import free_port, launched  # noqa: F401  shared with benchmarks/

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CUBE_FILE = SHARED_DATA / "cube" / "cube_1k.json"



def culturelens_command(*args) -> list[str]:
    """The command line of ``culturelens ARGS`` run by this interpreter (so of this checkout: the tests'
    PYTHONPATH is inherited), for a process that runs beside the test (``subprocess.Popen``, a supervisor)."""
    return [sys.executable, "-m", "culturelens.cli", *map(str, args)]


def culturelens(*args, env: dict | None = None, cwd: Path | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``culturelens ARGS`` to its end, with this process's environment changed by ``env``; its output
    captured as text."""
    return subprocess.run(culturelens_command(*args), capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def culturelens_here(*args) -> subprocess.CompletedProcess:
    """``culturelens ARGS`` run in this process (tiny models load once per test session), its output captured as
    text: for commands whose steps a test inspects after they return."""
    from culturelens import cli

    argv = [str(a) for a in args]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(argv)
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def until(condition, timeout: float, what: str):
    """The first truthy value of ``condition()``, asked every 50 ms: a wait for a state, failing after ``timeout``
    seconds (a bound, never a pause) saying which state did not come."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


@contextlib.contextmanager
def serving(store_root: Path | None, log_path: Path, *options: str, timeout: float = 180, cwd: Path | None = None,
            env: dict | None = None) -> Iterator[str]:
    """A real `culturelens serve` on ``store_root`` (None: no ``--store``, the default store of ``cwd``; extra
    ``options``), on a free loopback port, run in ``cwd`` with this process's environment changed by ``env``,
    logging to ``log_path``: yields its URL once it answers, stops it (SIGTERM) afterwards."""
    import pytest

    port = free_port()
    store = ["--store", store_root] if store_root is not None else []
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            culturelens_command("serve", *store, "--port", port, *options), stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}, cwd=cwd)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.time() + timeout
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2)
                    break
                except OSError:
                    if process.poll() is not None:
                        pytest.fail(f"the app exited: {Path(log_path).read_text()[-3000:]}")
                    if time.time() > deadline:
                        pytest.fail(f"the app did not start within {timeout:.0f} s")
                    time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)


def readme_commands(heading: str, page: str = "README.md") -> list[list[str]]:
    """The commands of the first ``bash`` block under the heading ``heading`` (the whole heading line, e.g.
    "### An operator: one build, one push, one serve") of the README, or of ``page`` (a path from the repository's
    root: a page of the manual, ``docs/...``), each as its argument list: comments and line continuations removed,
    as a shell reads them. Tests run the documentation's own commands, so it cannot drift from what works."""
    import shlex

    from tests.doc_blocks import ROOT, blocks

    block = next(b for b in blocks(ROOT / page) if b.heading == heading and b.lang == "bash")
    return [shlex.split(line, comments=True) for line in block.code.replace("\\\n", " ").splitlines()
            if shlex.split(line, comments=True)]


def tiny_cube(datasets_root: Path, upstream: Path) -> Path:
    """``datasets_root`` (a store's ``datasets/``) holding the 6-prompt CUBE-format dataset built from ``upstream``
    (the ``tiny_upstream`` fixture's file) under the default repo name, as ``culturelens serve --cube-source``
    builds it. Every test that needs that dataset builds it here (``serving_tiny_cube`` for a ``Store``)."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    cube_1k.build(str(upstream), local_folder(datasets_root, cube_1k.HUB_REPO))
    return datasets_root


def serving_tiny_cube(store, upstream: Path):
    """``store`` (a ``leaderboard.store.Store``) with the tiny CUBE dataset (``tiny_cube``) in its datasets."""
    tiny_cube(store.datasets, upstream)
    return store


# Three models scored on the suite (``suite_results``): per track the values of their 10 prompts. A beats B beats C
# on every prompt of every track but relevance, where C beats B: each track's win rates are A 1, B 1/2, C 0, and on
# relevance A 1, C 1/2, B 0; over the five tracks of the mean (variability has no win rate), A 1, B 2/5, C 1/10.
SUITE_MODELS = {
    "Alpha": {"awareness": 0.8, "diversity": 0.6, "iconicity": 0.5, "relevance": 4.5, "expectations": 8.0,
              "variability": 0.70},
    "Beta": {"awareness": 0.6, "diversity": 0.4, "iconicity": 0.3, "relevance": 2.0, "expectations": 6.0,
             "variability": 0.50},
    "Gamma": {"awareness": 0.4, "diversity": 0.2, "iconicity": 0.1, "relevance": 3.0, "expectations": 4.0,
              "variability": 0.30},
}
SUITE_WIN_RATES = {"Alpha": 1.0, "Beta": 0.4, "Gamma": 0.1}


def suite_results(store, models: dict = SUITE_MODELS, prompts: int = 10, judges: dict | None = None) -> list[str]:
    """Write one results folder per model, as a scored suite submission leaves them: per track its headline
    metric under the suite's protocol for the track (``Suite.answered_by``), overall and per prompt (the model's
    value -0.01 and +0.01 in turn, the same for every model: the mean is the value, and the order on every prompt is
    the order of the values); ``judges``: track -> the judge (``id@revision``) a judged track's rows name instead of
    its protocol's (an operator's own judge: then not the suite's protocol). Returns the submission ids
    (sub-<model>), oldest first."""
    from benchmark import results
    from benchmark.run_record import RunRecord
    from benchmark import tracks as track_registry

    ids = []
    for rank, (model, values) in enumerate(models.items()):
        sid = f"sub-{model.lower()}"
        rows = []
        for track, value in values.items():
            part = store.suite.part_of_track(track)
            judge = track_registry.get(track).protocol.judge  # a judged track's suite rows name its judge
            version = f"1 (judge {(judges or {}).get(track) or judge + '@r1'})" if judge else "1"
            protocol = results.protocol_columns({
                "dataset": str(part.dataset), "dataset_revision": part.dataset.digest,
                "images_per_prompt": part.images_per_prompt, "missing_images": results.MISSING_AS_FAILURES,
                "metric_version": version, "backbones": [],
                **({"build": store.suite.build} if store.suite.build else {})})  # an unpinned build's, as scored
            headline = track_registry.get(track).headline
            per_prompt = [value + (0.01 if i % 2 else -0.01) for i in range(prompts)]
            common = {"provenance": "scored", "submission_id": sid, "model": model, "model_id": f"org/{model.lower()}",
                      "model_type": "open", "track": track, "metric": headline, "metric_label": headline,
                      "metric_version": version, "higher_is_better": True, "harness_version": "0.1.0",
                      "dataset": str(part.dataset), "seeds": ",".join(map(str, part.seeds)),
                      "scored_at": f"2026-03-0{rank + 1}T00:00:00+00:00", **protocol}
            mean = sum(per_prompt) / prompts
            rows.append({**common, "slice": "overall", "slice_value": "all", "value": mean, "ci_low": mean - 0.01,
                         "ci_high": mean + 0.01, "n": prompts, "excluded": 0})
            rows += [{**common, "slice": "prompt", "slice_value": f"{track}-{i}", "value": v, "n": 1}
                     for i, v in enumerate(per_prompt)]
        results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))
        ids.append(sid)
    return ids

"""Time from `make run` on an empty store to the example's demo row FINISHED, as a first-time submitter sees it.

Starts `culturelens serve` exactly as `make run` does (a fresh store, `--cube-source`, a local worker), waits for
the app to answer, submits `submissions/example` with `culturelens submit` as the README says, and polls the
queue until the job is FINISHED. With no `--backbones` the worker scores with the tests' tiny CLIP
(benchmarks/tiny_backbone.py), offline; `--backbones hub` uses the real CLIP ViT-B/32 from the Hub (or its cache).

    .venv/bin/python benchmarks/first_row.py
    .venv/bin/python benchmarks/first_row.py --backbones hub
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from culturelens.testing.live_app import free_port
from culturelens.testing.tiny_models import write_backbones_file  # after the repository is on the path: this checkout's

CUBE_SOURCE = ROOT.parent / "shared" / "data" / "cube" / "cube_1k.json"


def culturelens(*args: str) -> list[str]:
    return [sys.executable, "-m", "culturelens.cli", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbones", default=None, help="a backbones file, or 'hub' (default: the tiny CLIP)")
    parser.add_argument("--timeout", type=float, default=1800, help="give up after this many seconds")
    args = parser.parse_args()
    from benchmark.datasets import cube_1k
    from leaderboard.store import Store

    work = Path(tempfile.mkdtemp(prefix="culturelens-first-row-"))
    backbones = None if args.backbones == "hub" else args.backbones or str(write_backbones_file(work / "tiny"))
    store, port = work / "store", free_port()
    source = str(CUBE_SOURCE) if CUBE_SOURCE.exists() else cube_1k.DEFAULT_SOURCE
    serve = culturelens("serve", "--store", str(store), "--port", str(port), "--cube-source", source,
                        *(["--backbones", backbones] if backbones else []))
    log = open(work / "serve.log", "w")  # noqa: SIM115 - open while serve runs
    started = time.monotonic()
    process = subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                               env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    marks = {}
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() - started > args.timeout:
                    raise SystemExit(f"serve did not start; see {work / 'serve.log'}") from None
                time.sleep(0.2)
        marks["app answers"] = time.monotonic() - started
        submitted = subprocess.run(culturelens("submit", "submissions/example", "--store", str(store)), cwd=ROOT,
                                   capture_output=True, text=True, check=False)
        if submitted.returncode != 0:
            raise SystemExit(f"submit failed:\n{submitted.stdout}{submitted.stderr}")
        job_id = submitted.stdout.split("queued as ")[1].split()[0]
        marks["example queued"] = time.monotonic() - started
        queue = Store(store).queue
        while (job := queue.get(job_id)).state not in ("FINISHED", "FAILED"):
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"{job_id} still {job.state} after {args.timeout:g} s; see {work / 'serve.log'}")
            time.sleep(0.2)
        marks[f"demo row {job.state}"] = time.monotonic() - started
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()
    print(f"backbone: {'CLIP ViT-B/32 (Hub)' if backbones is None else backbones}; store {store}")
    for what, seconds in marks.items():
        print(f"{what:>22}: {seconds:6.1f} s after `serve` started")


if __name__ == "__main__":
    main()

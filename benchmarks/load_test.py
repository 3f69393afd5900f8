"""Load test: N concurrent API clients (gradio_client) and a browser against the running app, on loopback.

    python benchmarks/load_test.py [--clients 24] [--duration 60] [--think 0] [--submissions 200] [--prompts 100]
                                   [--worker] [--no-browser] [--store DIR] [--cold]

Starts ``culturelens serve`` on a free port of 127.0.0.1 (nothing else is contacted) with a store built here:
``make_store.py``'s synthetic results (``--submissions`` x ``--prompts``) plus the 6-prompt CUBE-format
dataset uploads answer; or ``--store DIR`` (given that dataset where it serves no CUBE-1K); waits until the app's
log says its rankings and first views are ready (printing how long after its page first answered; ``--cold``: not
waited for). Then ``--clients`` threads, each with its own gradio_client ``Client``, call the app's API for
``--duration`` seconds, each call a weighted random pick from ``ENDPOINTS`` (browsing mostly, some uploads: fresh
valid zips, and hostile ones), while headless Chromium (Debian's ``chromium`` through Playwright) reloads the page.
Reports per endpoint: calls, errors, p50 / p95 / max latency, and the browser's page loads. An error is an
exception from the client or a result of the wrong shape; a rejected upload is an answer, not an error.

To add an endpoint (a new tab's API), append an ``Endpoint``: its ``api_name``, a weight, a function making
the call's arguments from a ``Context`` and a function checking the result.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks.make_store: this checkout's

from benchmark.datasets import cube_1k  # noqa: E402
from benchmark.datasets.prompts import local_folder  # noqa: E402
from leaderboard import tables  # noqa: E402
from leaderboard.app import READY  # noqa: E402
from leaderboard.catalog import Catalog  # noqa: E402
from leaderboard.store import Store  # noqa: E402
from culturelens.testing.live_app import free_port, logged  # noqa: E402
from culturelens.testing.submissions import TINY_UPSTREAM, manifest  # noqa: E402


@dataclass
class Context:
    """What endpoints draw their arguments from: the store's tracks, metrics and submissions, and uploads."""

    store: Store
    folder: Path  # where uploads are written
    rng: random.Random
    metrics: list[tuple[str, str, str, str]]  # (track, metric id, a slice it has, a value of it)
    submission_ids: list[str]
    prompt_ids: list[str]
    uploads: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def upload(self, hostile: bool) -> str:
        """A new submission zip for the served dataset (distinct images and model id), or a hostile one."""
        with self.lock:
            self.uploads += 1
            n = self.uploads
        path = self.folder / f"upload-{n}.zip"
        with zipfile.ZipFile(path, "w") as zf:
            if hostile:
                zf.writestr("../../escape.txt", "x")
                return str(path)
            data = manifest(model={"name": f"Load model {n}", "id": f"load/model-{n}", "revision": "1",
                                   "type": "open"})
            zf.writestr("manifest.json", json.dumps(data))
            rng = np.random.default_rng(n)
            for prompt_id in self.prompt_ids:
                for seed in data["seeds"]:
                    buffer = io.BytesIO()
                    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buffer, "PNG")
                    zf.writestr(f"images/{prompt_id}/{seed}.png", buffer.getvalue())
        return str(path)


def _records(result: Any) -> str | None:
    return None if isinstance(result, list) and all(isinstance(r, dict) for r in result) else f"not records: {result!r:.200}"


def _queue(result: Any) -> str | None:
    return None if isinstance(result, dict) and isinstance(result.get("jobs"), list) else \
        f"not the queue's jobs: {result!r:.200}"


def _text(result: Any) -> str | None:
    return None if isinstance(result, str) and result else f"no text: {result!r:.200}"


def _verdict(result: Any) -> str | None:
    return None if isinstance(result, str) and ("Accepted" in result or "Rejected" in result) else \
        f"no verdict: {result!r:.300}"


def _anything(result: Any) -> str | None:
    return None


def _verdict_kind(result: Any) -> str:
    text = str(result)
    return ("accepted" if "Accepted" in text else "over quota" if "quota" in text else
            "rejected" if "Rejected" in text else "other")


@dataclass(frozen=True)
class Endpoint:
    api_name: str
    weight: float
    arguments: Callable[[Context], tuple]
    check: Callable[[Any], str | None]  # what is wrong with a result, or None
    kind: Callable[[Any], str] | None = None  # what kind of answer a result is, to count (e.g. a verdict)


def _a_slice(catalog: Catalog, track: str, metric: str) -> tuple[str, str]:
    """A slice and value the metric has rows on: its overall when it has one (a paper's metric may be reported
    per country only)."""
    names = tables.slice_names(catalog, track, metric)
    name = tables.OVERALL if tables.OVERALL in names else names[0]
    return name, tables.slice_values(catalog, track, metric, name)[0]


def _leaderboard_args(c: Context) -> tuple:
    return c.rng.choice(c.metrics)  # track, metric, slice, value


def _upload(hostile: bool) -> Callable[[Context], tuple]:
    def arguments(c: Context) -> tuple:
        from gradio_client import handle_file

        return (handle_file(c.upload(hostile)),)
    return arguments


def _overview_args(c: Context) -> tuple:
    """The Overview's controls at their first view (win rates, no filters). Through the API the track can only
    be the default one: the Dropdown's choices are filled per browser session, and the server checks the
    value against the choices it was built with."""
    return None, None, "", [], None, None, "", [], ["Rank", "Model", "Score", "95% CI", "n", "Provenance"]


ENDPOINTS = [
    Endpoint("/leaderboard", 6, _leaderboard_args, _records),
    Endpoint("/overview", 4, _overview_args, _anything),
    Endpoint("/queue", 3, lambda c: (), _queue),
    Endpoint("/details", 2, lambda c: (c.rng.choice(c.submission_ids),), _anything),
    Endpoint("/download", 1, _overview_args, _anything),
    Endpoint("/submit", 1, _upload(hostile=False), _verdict, _verdict_kind),
    Endpoint("/submit", 1, _upload(hostile=True), _verdict, _verdict_kind),
]


@dataclass
class Call:
    api_name: str
    seconds: float
    error: str | None
    kind: str | None = None
    first: bool = False  # the client's first call: made while all the clients connect at once


def client_loop(url: str, context: Context, endpoints: list[Endpoint], stop: float, calls: list[Call],
                seed: int, think: float = 0.0) -> None:
    """One client calling ``endpoints`` until ``stop``: back to back from the start, or at a person's pace: arriving
    after a wait and waiting between an answer and the next call, ``think`` seconds on average each (drawn uniformly
    from 0 to twice that), as people open the page at different moments and read it before a click."""
    from gradio_client import Client

    rng = random.Random(seed)
    if think:
        time.sleep(rng.uniform(0, 2 * think))
    client = Client(url, verbose=False)
    weights = [e.weight for e in endpoints]
    first = True
    while time.monotonic() < stop:
        endpoint = rng.choices(endpoints, weights)[0]
        start = time.perf_counter()
        kind = None
        try:
            result = client.predict(*endpoint.arguments(context), api_name=endpoint.api_name)
            error = endpoint.check(result)
            kind = endpoint.kind(result) if endpoint.kind else None
        except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
        calls.append(Call(endpoint.api_name, time.perf_counter() - start, error, kind, first=first))
        first = False
        if think:
            time.sleep(min(rng.uniform(0, 2 * think), max(stop - time.monotonic(), 0)))


def browser_loop(url: str, stop: float, loads: list[float], errors: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    header = "How well do text-to-image models know the world's cultures?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        while time.monotonic() < stop:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
            start = time.perf_counter()
            try:
                page.goto(url)
                page.get_by_text(header).wait_for(timeout=60_000)
                # The first view drawn: the papers' cards, or a ranked table (a visible one: hidden tabs' tables and
                # the table the papers' view hides as it opens do not count; waiting for a '.table-wrap' alone
                # timed out whenever the papers' view hid it before the check, a false error)
                page.wait_for_function("() => [...document.querySelectorAll('.cl-card, .table-wrap')]"
                                       ".some(e => e.checkVisibility())", timeout=60_000)
                loads.append(time.perf_counter() - start)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            page.close()
        browser.close()


# --- the store and the app ----------------------------------------------------------------------------------
def build_store(root: Path, submissions: int, prompts: int) -> Path:
    store = root / "store"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_store.py"), "--out", str(store),
                    "--submissions", str(submissions), "--prompts", str(prompts), "--images", "4",
                    "--per-image-for", "20"], check=True, capture_output=True)
    return store


def serve_uploads_dataset(root: Path, store: Store) -> None:
    """The 6-prompt CUBE-format dataset the test's uploads answer, installed where ``store`` serves no CUBE-1K (a
    ``make_store.py`` store holds results only: the one built here, or one given with ``--store``)."""
    folder = local_folder(store.datasets, cube_1k.HUB_REPO)
    if folder.exists():
        return
    upstream = root / "upstream.json"
    upstream.write_text(json.dumps(TINY_UPSTREAM, ensure_ascii=False), encoding="utf-8")
    cube_1k.build(str(upstream), folder)
    print(f"load test: {store.root} served no {cube_1k.HUB_REPO}: the uploads' 6-prompt dataset installed there")


def serve(store: Path, log: Path, worker: bool, backbones: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "culturelens.cli", "serve", "--store", str(store), "--host", "127.0.0.1",
               "--port", str(port), "--user", "load-tester"]
    command += (["--backbones", backbones] if backbones else []) if worker else ["--no-worker"]
    process = subprocess.Popen(command, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT,
                               env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
                                    "HF_DATASETS_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return process, url
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the app exited: {log.read_text()[-3000:]}") from None
            time.sleep(0.5)
    process.terminate()
    raise RuntimeError("the app did not start within 600 s")


def _ms(values: list[float], q: float) -> str:
    return f"{1000 * float(np.percentile(values, q)):.0f}" if values else "-"


def report(calls: list[Call], duration: float, clients: int, loads: list[float], browser_errors: list[str],
           browser: bool) -> tuple[list[str], int]:
    lines = [f"{'endpoint':14s} {'calls':>6s} {'errors':>6s} {'p50 ms':>7s} {'p95 ms':>7s} {'max ms':>7s}  answers"]
    for name in sorted({c.api_name for c in calls}):
        mine = [c for c in calls if c.api_name == name]
        times = [c.seconds for c in mine]
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(Counter(c.kind for c in mine if c.kind).items()))
        lines.append(f"{name:14s} {len(mine):6d} {sum(c.error is not None for c in mine):6d} {_ms(times, 50):>7s} "
                     f"{_ms(times, 95):>7s} {1000 * max(times):7.0f}  {kinds}")
    errors = sum(c.error is not None for c in calls) + len(browser_errors)
    times = [c.seconds for c in calls]
    lines.append(f"load test: {clients} API clients for {duration:.0f} s: {len(calls)} calls "
                 f"({len(calls) / duration:.1f}/s), {errors} errors, p50 {_ms(times, 50)} ms, p95 {_ms(times, 95)} ms")
    later = [c.seconds for c in calls if not c.first]  # once every client is connected: the steady state
    lines.append(f"load test: past each client's first call: {len(later)} calls, p50 {_ms(later, 50)} ms, "
                 f"p95 {_ms(later, 95)} ms")
    if browser:
        lines.append(f"load test: browser page loads {len(loads)}, p50 {_ms(loads, 50)} ms, p95 {_ms(loads, 95)} ms, "
                     f"{len(browser_errors)} errors")
    return lines, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=24, help="concurrent gradio_client clients (N)")
    parser.add_argument("--duration", type=float, default=60, help="seconds of load")
    parser.add_argument("--submissions", type=int, default=200, help="synthetic scored submissions in the store")
    parser.add_argument("--prompts", type=int, default=100, help="prompts per synthetic submission")
    parser.add_argument("--store", default=None, help="use this store instead of building one (it is not modified "
                                                      "except by the uploads the test makes, and the uploads' "
                                                      "6-prompt dataset where it serves no CUBE-1K)")
    parser.add_argument("--worker", action="store_true", help="run the app's worker too (needs --backbones)")
    parser.add_argument("--backbones", default=None, help="backbones JSON for the worker")
    parser.add_argument("--no-browser", action="store_true", help="API clients only")
    parser.add_argument("--think", type=float, default=0.0,
                        help="mean seconds each client waits between an answer and its next call (0: back to back)")
    parser.add_argument("--cold", action="store_true",
                        help="start the clients as soon as the page answers, while the app still makes its rankings "
                             "and first views (default: once its log says they are ready, as after any restart)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    browser = not args.no_browser and shutil.which("chromium") is not None
    root = Path(tempfile.mkdtemp(prefix="load-test-"))
    try:
        store_path = Path(args.store) if args.store else build_store(root, args.submissions, args.prompts)
        store = Store(store_path)
        serve_uploads_dataset(root, store)
        catalog = Catalog(store)
        metrics = [(track, metric, *_a_slice(catalog, track, metric)) for track in tables.tracks(catalog)
                   for _, metric in tables.metrics(catalog, track)]
        prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
        (root / "uploads").mkdir()
        context = Context(store, root / "uploads", random.Random(args.seed), metrics,
                          [j.id for j in store.queue.jobs()] or ["none"], prompt_ids)
        process, url = serve(store_path, root / "serve.log", args.worker, args.backbones)
        try:
            if not args.cold:
                print(f"load test: the app was ready {logged(root / 'serve.log', READY, process):.1f} s after its "
                      "page first answered", flush=True)
            calls: list[Call] = []
            loads: list[float] = []
            browser_errors: list[str] = []
            stop = time.monotonic() + args.duration
            threads = [threading.Thread(target=client_loop, args=(url, context, ENDPOINTS, stop, calls, args.seed + i,
                                                                   args.think))
                       for i in range(args.clients)]
            if browser:
                threads.append(threading.Thread(target=browser_loop, args=(url, stop, loads, browser_errors)))
            started = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            lines, errors = report(calls, time.monotonic() - started, args.clients, loads, browser_errors, browser)
        finally:
            process.terminate()
            process.wait(timeout=60)
        print("\n".join(lines))
        seen = Counter((c.api_name, c.error) for c in calls if c.error)
        seen.update(("browser", e) for e in browser_errors)
        for (name, error), count in seen.most_common(20):
            print(f"ERROR x{count} {name}: {error}")
        return 1 if errors else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Leaderboard app speed on a large store (``make_store.py``), against the same app on an empty store.

    python benchmarks/app_speed.py --store DIR [--repeats 200] [--loads 10] [--budget 60] [--no-browser]

Measures, on ``DIR`` and on a baseline store holding only the paper-reported rows (made in a temporary
folder in the same run, since the machine is shared and absolute times are noisy):

(r) the stored rankings (``leaderboard.stored_rankings``, issue 55): every ranking computed from nothing, a
    restart reading them back, and one more submission moved into ``DIR``: the time until the first page's
    rankings are fresh (with ``--every``, every ranking; it then stays); the views below read stored rankings, as
    in the app;
(r2) when results land every open page redraws at once: 20 pages asking the first Slices view while the rankings
    update, against one page alone (made once, the others waiting for it: near 1 times, not 20);

(a) the catalog's cold load (``Catalog(store)``: what the app does at start-up), 3 times;
(b) p50 / p95 of each query the Overview, Slices and Compare tabs run (``leaderboard.tables`` and the
    tab views that call them), ``--repeats`` times each or until ``--budget`` seconds are spent;
(c) first page interactive in headless Chromium (Debian's ``chromium``, driven by Playwright): the time from
    ``page.goto`` to the first view's content (the ranking across tracks showing its first model's name, or the
    papers' cards where no model is scored on the suite), ``--loads`` loads after one
    warm-up, each in a fresh browser context, against ``culturelens serve --no-worker`` in its own process;
    also the server's start-up time and the size of the first-paint payload.

Targets (issue 7): first page interactive < 2 s and DuckDB query p95 < 100 ms on 1,000 submissions x
1,000 prompts x 10 images.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from culturelens.testing.live_app import free_port, logged
from leaderboard import display, stored_rankings, tables
from leaderboard.app import READY
from leaderboard.catalog import Catalog
from leaderboard.store import Store
from leaderboard.ui import first_views
from leaderboard.ui.compare import CompareTab
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from leaderboard.ui.slices import SlicesTab

TRACK, METRIC, SLICE = "awareness", "clip_score", "country"


def target(name: str) -> float:
    """Issue 55's p95 target (s) for a row of the query table: a track's download 1 s, the Overview's and Slices'
    whole view functions 300 ms, every other query 100 ms."""
    if name.startswith("OverviewTab.download"):
        return 1.0
    return 0.3 if name.startswith(("OverviewTab.overview", "SlicesTab.slices")) else 0.1


def percentiles(times: list[float]) -> tuple[float, float]:
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def timed(function, repeats: int, budget: float, setup: callable = None) -> list[float]:
    """Wall times (s) of ``repeats`` calls, fewer if ``budget`` seconds run out (at least 3); ``setup()`` before
    each, not timed."""
    out, started = [], time.perf_counter()
    for i in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        function()
        out.append(time.perf_counter() - start)
        if i >= 2 and time.perf_counter() - started > budget:
            break
    return out


def workload(site: Site) -> dict[str, callable | tuple[callable, callable]]:
    """The reads behind the Overview, Slices and Compare tabs, as restore() and the controls call them: a call, or
    (a setup, not timed; the call)."""
    cat = site.catalog
    overview, slices, compare, queue = OverviewTab(site), SlicesTab(site), CompareTab(site), QueueTab(site)
    value = (tables.slice_values(cat, TRACK, METRIC, SLICE) or [None])[0]
    subs = tables.submissions(cat)["submission_id"].tolist()
    chosen = [s for s in subs if site.store.per_image_file(s)][:4]
    prompt = cat.prompts_of(chosen[0])["prompt_id"].iloc[0] if chosen else None
    none = tables.Filters()

    def made(function: callable) -> callable:
        """``function`` called as the first call after a change of the results: no view of the state made yet."""
        return lambda: (stored_rankings.of(cat).forget_views(), function())[-1]

    def visited(function: callable) -> tuple[callable, callable]:
        """``function`` as a visitor's first call of a choice the recompute's thread does not make, once it has made
        the first views (``leaderboard.ui.first_views``; the downloads aside: nothing else shares them): the
        parts that choice shares with them (a slice's heatmap, the charts) are read."""
        return (lambda: (stored_rankings.of(cat).forget_views(), first_views.make(overview, slices, downloads=False)),
                function)
    opens = tables.metric_id(cat, TRACK, None)  # the metric a track's first views show
    other = next((m for _, m in tables.metrics(cat, TRACK) if m != opens), opens)
    shown_values = tables.slice_values(cat, TRACK, opens, SLICE)
    other_value = shown_values[1] if len(shown_values) > 1 else None
    searched = tables.submissions(cat)["model"].iloc[0] if subs else ""
    # the records API names a metric and slice the store holds (a store of reported rows only has the papers')
    held = [m for _, m in tables.metrics(cat, TRACK)]
    api_metric = METRIC if METRIC in held else held[0]
    api_slice = tables.slice_names(cat, TRACK, api_metric)[0]
    api_slice = (api_slice, tables.slice_values(cat, TRACK, api_metric, api_slice)[0])
    return {
        "tables.tracks": lambda: tables.tracks(cat),
        "tables.metrics": lambda: tables.metrics(cat, TRACK),
        "tables.slice_names": lambda: tables.slice_names(cat, TRACK, METRIC),
        "tables.slice_values": lambda: tables.slice_values(cat, TRACK, METRIC, SLICE),
        "tables.ranked (overall)": lambda: tables.ranked(cat, TRACK, METRIC),
        "tables.ranked (country)": lambda: tables.ranked(cat, TRACK, METRIC, SLICE, value),
        "tables.ranked + display": lambda: display.display(tables.ranked(cat, TRACK, METRIC)[0]),
        "OverviewTab.leaderboard_api (records)": lambda: overview.leaderboard_api(TRACK, api_metric, *api_slice),
        "OverviewTab.download (a track's files)": lambda: overview.download(TRACK, None, "", [], None, None, "", [],
                                                                           display.RANK_COLUMNS),
        "tables.headline_rows": lambda: tables.headline_rows(cat, none),
        "tables.overall (win rates)": lambda: tables.overall(cat, none),
        "tables.heatmap (country)": lambda: tables.heatmap(cat, TRACK, METRIC, SLICE),
        "tables.submissions": lambda: tables.submissions(cat),
        "catalog.curves (w1kp)": lambda: cat.curves("w1kp"),
        "SlicesTab.charts": lambda: slices.charts(none),
        "OverviewTab.overview (default)": lambda: overview.overview(None, None, "", [], None, None, "", [],
                                                                   display.RANK_COLUMNS),
        "OverviewTab.overview (track)": lambda: overview.overview(TRACK, None, "", [], None, None, "", [],
                                                                 display.RANK_COLUMNS),
        "SlicesTab.slices (default)": lambda: slices.slices(None, None, None, None, ""),
        # Each of the above that is made once per state of the results (``StoredRankings.view``) and read after,
        # made with nothing of that state made yet: what the first call after a change pays (the recompute's thread
        # makes the first page's).
        "tables.ranked (overall), made": made(lambda: tables.ranked(cat, TRACK, METRIC)),
        "tables.ranked (country), made": made(lambda: tables.ranked(cat, TRACK, METRIC, SLICE, value)),
        "tables.overall (win rates), made": made(lambda: tables.overall(cat, none)),
        "tables.heatmap (country), made": made(lambda: tables.heatmap(cat, TRACK, METRIC, SLICE)),
        "tables.submissions, made": made(lambda: tables.submissions(cat)),
        "SlicesTab.charts, made": made(lambda: slices.charts(none)),
        "OverviewTab.download (a track's files), made": made(lambda: overview.download(
            TRACK, None, "", [], None, None, "", [], display.RANK_COLUMNS)),
        "OverviewTab.overview (track), made": made(lambda: overview.overview(TRACK, None, "", [], None, None, "", [],
                                                                            display.RANK_COLUMNS)),
        "SlicesTab.slices (default), made": made(lambda: slices.slices(None, None, None, None, "")),
        # A visitor's other choices in the seconds after a change, once the thread has made the first views.
        "SlicesTab.slices (another value), after the first views": visited(
            lambda: slices.slices(TRACK, opens, SLICE, other_value, "")),
        "SlicesTab.slices (another metric), after the first views": visited(
            lambda: slices.slices(TRACK, other, None, None, "")),
        "OverviewTab.overview (another metric), after the first views": visited(
            lambda: overview.overview(TRACK, other, "", [], None, None, "", [], display.RANK_COLUMNS)),
        "OverviewTab.download (one model searched), after the first views": visited(
            lambda: overview.download(TRACK, None, searched, [], None, None, "", [], display.RANK_COLUMNS)),
        "CompareTab.submission_choices": compare.submission_choices,
        "QueueTab.page": queue.page,
        "CompareTab.compare_prompts (4)": lambda: compare.compare_prompts(chosen),
        "CompareTab.compare (4 subs)": lambda: compare.compare(chosen, prompt),
    }


def bench_recompute(store: Store, work: Path, one_more: bool, every: bool = False) -> dict[str, tuple[float, int]]:
    """The stored rankings' costs (``leaderboard.stored_rankings``), seconds and rankings computed: every ranking
    from nothing (``STORE/rankings/`` removed first), a restart reading them back, and with ``one_more`` one more
    submission (a results folder ``make_store.py`` wrote elsewhere, moved in: another machine's result): the time
    until the first page's rankings are fresh (the overall and the Overview's table, computed as a view reads them),
    and with ``every`` the time until every ranking is (the submission then stays; else it is taken out again, and
    the rankings on disk are the store's again)."""
    shutil.rmtree(store.root / stored_rankings.FOLDER, ignore_errors=True)
    out = {}
    cat = Catalog(store)
    start = time.perf_counter()
    computed = tables.recompute(cat)
    out["every ranking, from nothing"] = (time.perf_counter() - start, computed)
    start = time.perf_counter()
    restarted = Catalog(store)
    computed = tables.recompute(restarted)
    out["restart: catalog + rankings read back"] = (time.perf_counter() - start, computed)
    if one_more:
        folder = _one_more(store, work)
        start = time.perf_counter()
        shutil.move(str(folder), store.results / folder.name)
        restarted.refresh(force=True)
        tables.overall(restarted)
        tables.ranked(restarted, TRACK, METRIC)
        out["one more: first page fresh"] = (time.perf_counter() - start, -1)  # -1: not counted
        if every:
            computed = tables.recompute(restarted)
            out["one more: every ranking fresh"] = (time.perf_counter() - start, computed)
        else:  # taken out again: the store is as its stored rankings say (its folder's stamp is gone with it)
            shutil.rmtree(store.results / folder.name)
    return out


def _one_more(store: Store, work: Path) -> Path:
    """A results folder of one submission the store does not hold, written by ``make_store.py`` under ``work``."""
    for seed in range(99, 199):  # (an earlier --every run left seed 99's in the store)
        shutil.rmtree(work / "more", ignore_errors=True)
        subprocess.run([sys.executable, str(Path(__file__).with_name("make_store.py")), "--out", str(work / "more"),
                        "--submissions", "1", "--prompts", str(_prompts(store)), "--images", "10", "--seed",
                        str(seed)], check=True, capture_output=True)
        folder = next((work / "more" / "results").iterdir())
        if not (store.results / folder.name).exists():
            return folder
    raise RuntimeError("no seed of 99-198 gave a submission the store does not hold")


def bench_redraws(store: Store, work: Path, pages: int = 20) -> dict[str, float]:
    """When results land, every open page redraws at once (the app's timer): ``pages`` threads asking the first
    Slices view while the rankings update (shown from the previous ones, saying so), against one page alone. Each
    view is made once and the pages that ask while it is made wait for it (``StoredRankings.view``), so the
    pages' wall time stays near one page's rather than ``pages`` times it. Seconds; the store is left as it was."""
    site = Site(store, "bench")
    gate = threading.Event()  # the update lasts until the pages are timed (then ends, recomputing nothing)
    stored = stored_rankings.attach(site.catalog, background=True, everything=lambda cat: gate.wait())
    tables.recompute(site.catalog)  # as the app's thread left them before the submission
    slices = SlicesTab(site)
    folder = _one_more(store, work)
    shutil.move(str(folder), store.results / folder.name)
    try:
        site.catalog.refresh(force=True)
        start = time.perf_counter()
        slices.slices(None, None, None, None, "")
        alone = time.perf_counter() - start
        stored.forget_views()
        waits = [0.0] * pages

        def page(i: int) -> None:
            begun = time.perf_counter()
            slices.slices(None, None, None, None, "")
            waits[i] = time.perf_counter() - begun
        threads = [threading.Thread(target=page, args=(i,)) for i in range(pages)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
    finally:
        gate.set()
        stored.wait()
        shutil.rmtree(store.results / folder.name)
    return {"one page alone": alone, f"{pages} pages at once: all answered": wall,
            f"{pages} pages at once: p95 of a page": float(np.percentile(waits, 95))}


def _prompts(store: Store) -> int:
    """How many prompts the store's submissions answered (``make_store.py --prompts``)."""
    folder = next(p for p in store.results.iterdir() if not p.name.startswith("."))
    rows = pq.read_table(folder / "aggregates.parquet", columns=["slice", "slice_value"]).to_pydict()
    return len({v for s, v in zip(rows["slice"], rows["slice_value"]) if s == "prompt"})


def bench_queries(store: Store, repeats: int, budget: float) -> tuple[list[float], dict[str, list[float]]]:
    colds = []
    for _ in range(3):
        start = time.perf_counter()
        Catalog(store)
        colds.append(time.perf_counter() - start)
    site = Site(store, "bench")
    tables.recompute(site.catalog)  # as the app's thread leaves them: every view reads stored rankings
    out = {}
    for name, call in workload(site).items():
        setup, function = call if isinstance(call, tuple) else (None, call)
        if setup is not None:
            setup()
        function()  # warm: first-call costs (imports, caches) are not what a visitor waits for
        out[name] = timed(function, repeats, budget, setup)
    return colds, out


# --- browser -----------------------------------------------------------------------------------------------
def serve(store: Path, log: Path) -> tuple[subprocess.Popen, str, float]:
    """``culturelens serve --no-worker`` on ``store``; returns the process, its URL and its start-up time: until its
    page answers and its log says the rankings and first views are ready (``leaderboard.app.READY``), so that no
    page load is timed against the thread still making them."""
    port = free_port()
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "culturelens.cli", "serve", "--store", str(store), "--port",
                                str(port), "--no-worker", "--user", "bench"], stdout=log.open("w"),
                               stderr=subprocess.STDOUT, env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    url = f"http://127.0.0.1:{port}/"
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the app exited: {log.read_text()[-2000:]}") from None
            if time.perf_counter() - start > 600:
                process.terminate()
                raise RuntimeError("the app did not start within 600 s") from None
            time.sleep(0.2)
    logged(log, READY, process, timeout=600)
    return process, url, time.perf_counter() - start


def page_loads(browser, url: str, expected: str | None, loads: int) -> tuple[list[float], list[float], int]:
    """Per load: seconds to the header, seconds to the first view's content (``expected`` in the Overview's
    ranked table, or, where ``expected`` is None, the papers' cards); and the bytes the server had sent on its
    event streams (the first paint's data) by then, on the last load."""
    header = "How well do text-to-image models know the world's cultures?"
    # Gradio's Dataframe draws its rows as divs inside ``.table-wrap``; hidden tabs' tables do not count.
    in_table = ("name => name === null ? [...document.querySelectorAll('.cl-card')].some(c => c.checkVisibility())"
                " : [...document.querySelectorAll('.table-wrap')]"
                ".some(t => t.checkVisibility() && t.innerText.includes(name))")
    shell, ready, payload = [], [], 0
    for i in range(loads + 1):  # the first load warms the browser and the server up and is not counted
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        streams, received = set(), [0]
        cdp.on("Network.responseReceived",
               lambda e: streams.add(e["requestId"]) if "/queue/data" in e["response"]["url"] else None)
        cdp.on("Network.dataReceived",
               lambda e: received.__setitem__(0, received[0] + e["dataLength"]) if e["requestId"] in streams
               else None)
        start = time.perf_counter()
        page.goto(url)
        page.get_by_text(header).wait_for(timeout=120_000)
        t_shell = time.perf_counter() - start
        page.wait_for_function(in_table, arg=expected, timeout=120_000, polling=20)
        t_ready = time.perf_counter() - start
        if i:
            shell.append(t_shell)
            ready.append(t_ready)
        payload = received[0]
        context.close()
    return shell, ready, payload


def first_model(store: Store) -> str | None:
    """The model the first view ranks first where it is the ranking across tracks; None where it is the papers'
    cards (no model scored on the suite)."""
    overview = OverviewTab(Site(store, "bench"))
    if overview.first_view() != "overall":
        return None
    model = str(overview.overview("overall", None, "", [], None, None, "", [], [])[2]["Model"].iloc[0])
    return re.sub(r"^\[(.*)\]\(.*\)$", r"\1", model)  # the name a Markdown link shows


def bench_browser(stores: dict[str, Path], loads: int, logs: Path) -> dict[str, dict]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Debian's chromium is not installed (apt-get install chromium); or pass --no-browser")
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for label, root in stores.items():
            process, url, startup = serve(root, logs / f"serve-{label}.log")
            try:
                expected = first_model(Store(root))
                shell, ready, payload = page_loads(browser, url, expected, loads)
            finally:
                process.terminate()
                process.wait(timeout=60)
            out[label] = {"startup": startup, "shell": shell, "ready": ready, "payload": payload,
                          "expected": expected}
        browser.close()
    return out


# --- report ------------------------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, type=Path, help="a store made by benchmarks/make_store.py")
    parser.add_argument("--repeats", type=int, default=200, help="calls per query")
    parser.add_argument("--budget", type=float, default=60, help="at most this many seconds per query")
    parser.add_argument("--loads", type=int, default=10, help="page loads per store, after one warm-up")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium page loads")
    parser.add_argument("--no-queries", action="store_true", help="skip the in-process query timings")
    parser.add_argument("--every", action="store_true", help="after one more submission, time every ranking "
                        "recomputed too (it then stays in the store)")
    args = parser.parse_args()
    store = Store(args.store)
    work = Path(tempfile.mkdtemp(prefix="culturelens-app-speed-"))
    try:
        baseline = Store(work / "empty")
        baseline.seed_reported()
        store.seed_reported()
        n_results = sum(1 for p in store.results.iterdir() if not p.name.startswith("."))
        print(f"store {store.root}: {n_results} results folders; baseline: paper-reported rows only\n")
        if not args.no_queries:
            recomputed = bench_recompute(store, work, one_more=True, every=args.every)
            recomputed_base = bench_recompute(baseline, work, one_more=False)
            print("(r) stored rankings: seconds (rankings computed)")
            for name, (seconds, count) in recomputed.items():
                base = recomputed_base.get(name)
                counted = f" ({count})" if count >= 0 else ""
                print(f"  {name}: {seconds:.2f} s{counted}" + (f"; baseline {base[0]:.2f} s ({base[1]})" if base
                                                                  else ""))
            print()
            redraws = bench_redraws(store, work)
            print("(r2) the first Slices view while the rankings update after one more submission, s")
            for name, seconds in redraws.items():
                print(f"  {name}: {seconds:.2f} s")
            print(f"  all pages / one page: {redraws['20 pages at once: all answered'] / redraws['one page alone']:.1f}"
                  "x (made once: near 1; made by each page: near 20)\n")
            cold_big, big = bench_queries(store, args.repeats, args.budget)
            cold_base, base = bench_queries(baseline, args.repeats, args.budget)
            print(f"(a) catalog cold load: {', '.join(f'{c:.2f}' for c in cold_big)} s "
                  f"(baseline {np.median(cold_base) * 1000:.0f} ms)\n")
            print("(b) query times, ms (target p95 < 100 ms; the Overview's and Slices' views 300 ms, a download 1 s)")
            print(f"| {'query':<28} | {'calls':>5} | {'p50':>8} | {'p95':>8} | {'baseline p50':>12} | "
                  f"{'p50 / baseline':>14} | target |")
            print(f"|{'-' * 30}|{'-' * 7}|{'-' * 10}|{'-' * 10}|{'-' * 14}|{'-' * 16}|--------|")
            for name, times in big.items():
                p50, p95 = percentiles(times)
                b50, _ = percentiles(base[name])
                ratio = f"{p50 / b50:.1f}x" if b50 > 1e-4 else "– (no rows)"  # compare: nothing to compare there
                print(f"| {name:<28} | {len(times):>5} | {ms(p50):>8} | {ms(p95):>8} | {ms(b50):>12} | "
                      f"{ratio:>14} | {'ok' if p95 < target(name) else 'MISSED':<6} |")
            print()
        if not args.no_browser:
            found = bench_browser({"baseline": baseline.root, "store": store.root}, args.loads, work)
            print(f"(c) first page interactive in headless Chromium, s ({args.loads} loads after a warm-up; "
                  "target < 2 s)")
            print("| store    | server start | header p50 | first view p50 | first view p95 | first-paint payload |")
            print("|----------|--------------|------------|----------------|----------------|---------------------|")
            for label, r in found.items():
                p50, p95 = percentiles(r["ready"])
                print(f"| {label:<8} | {r['startup']:>10.1f} s | {np.median(r['shell']):>10.2f} | {p50:>14.2f} | "
                      f"{p95:>14.2f} | {r['payload'] / 1024:>15,.0f} KiB |")
            big_p50, base_p50 = np.median(found["store"]["ready"]), np.median(found["baseline"]["ready"])
            print(f"\nratio store / baseline (first view p50): {big_p50 / base_p50:.2f}x; "
                  f"target {'met' if np.percentile(found['store']['ready'], 95) < 2 else 'MISSED'} "
                  f"(waited for {found['store']['expected'] or 'the papers cards'!r})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

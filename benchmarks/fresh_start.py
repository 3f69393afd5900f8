"""A fresh app start from a results repo: from its leaderboard release against today's full restore.

    python benchmarks/fresh_start.py [--submissions 1000] [--prompts 1000] [--images 10] [--work DIR]

Builds a synthetic store (``make_store.py``), writes its results into a local folder laid out like the results
repo (``culturelens hub export``: every ``results/<id>/`` folder, then release 1), and times, each on a new empty
store (a restarted Space), from nothing to the Overview's first table ready (``OverviewTab.overview`` on the default
view, the overall ranking with its bootstrap intervals):

- **full restore** (what ``culturelens serve --hub-results`` did before releases): ``hub_sync.pull`` of every
  results folder, then the app's catalog over them;
- **from the release** (``pickup.Pickup.start``): latest.json and the release file, then the catalog over them;

and prints the ratio measured in the same run, the files each read, and the cost of a periodic pickup round that
finds nothing new (listing the repo's folders) and of one that finds one new folder. The repo is a local folder:
on the Hub each file read is also a download, so the ratio in files (4 per submission against 2) is the one a
Space sees grow with the leaderboard.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from leaderboard import hub_sync, pickup
from leaderboard.repo import LocalRepo
from leaderboard.store import Store
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.site import Site

HERE = Path(__file__).resolve().parent


def first_table(store: Store) -> int:
    """Build the app's views over ``store`` and the Overview's default table; returns its rows."""
    return len(OverviewTab(Site(store, "bench")).overview(None, None, "", [], None, None, "", [], [])[2])


def fresh(root: Path, name: str, knows: Store) -> Store:
    """A restarted app on an empty disk whose queue knows the submissions of ``knows`` (restored from the requests
    repo, or kept by a PostgreSQL server): results count only for submissions the queue knows."""
    store = Store(root / name)
    store.seed_reported()
    for job in knows.queue.jobs():
        store.queue.restore(job)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--images", type=int, default=10)
    parser.add_argument("--work", type=Path, default=None, help="folder to work in (default: a temporary one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fresh-start-", dir=args.work))
    try:
        started = time.perf_counter()
        subprocess.run([sys.executable, str(HERE / "make_store.py"), "--out", str(work / "original"),
                        "--submissions", str(args.submissions), "--prompts", str(args.prompts), "--images",
                        str(args.images)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        original = Store(work / "original")
        made = time.perf_counter()
        repo = work / "repo"
        hub_sync.export(original, "results", repo)
        exported = time.perf_counter()
        release = pickup.publish(original, LocalRepo(repo))
        published = time.perf_counter()
        size = (repo / release.file).stat().st_size / 1024 ** 2
        print(f"{args.submissions} submissions x {args.prompts} prompts x {args.images} images; store made in {made - started:.0f} s, exported in "
              f"{exported - made:.1f} s; release 1 ({size:.0f} MB) written in {published - exported:.1f} s")

        start_full = time.perf_counter()
        full = fresh(work, "full", original)
        counts = hub_sync.pull(full, "results", str(repo))
        restored = time.perf_counter()
        rows_full = first_table(full)
        t_full = time.perf_counter() - start_full
        files_full = sum(1 for p in full.results.rglob("*") if p.is_file())

        start = time.perf_counter()
        quick = fresh(work, "release", original)
        source = LocalRepo(repo)
        pickup.Pickup(quick, source, release_interval=None).start()
        installed = time.perf_counter()
        rows_quick = first_table(quick)
        t_quick = time.perf_counter() - start
        assert rows_quick == rows_full, (rows_quick, rows_full)

        print(f"full restore:      {t_full:6.1f} s ({counts['added']} folders, {files_full} files read, restored in "
              f"{restored - start_full:.1f} s; "
              f"the first table {rows_full} rows)")
        print(f"from the release:  {t_quick:6.1f} s ({len(source.downloaded)} files read, installed in "
              f"{installed - start:.1f} s; the first table {rows_quick} rows)")
        print(f"full restore / from the release: {t_full / t_quick:.1f}x")

        app = pickup.Pickup(quick, source, release_interval=None)
        start = time.perf_counter()
        app.round()
        idle = time.perf_counter() - start
        subprocess.run([sys.executable, str(HERE / "make_store.py"), "--out", str(work / "remote"), "--submissions",
                        "1", "--prompts", str(args.prompts), "--images", str(args.images), "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        new = next((work / "remote" / "results").iterdir())
        quick.queue.restore(Store(work / "remote").queue.get(new.name))  # the app's queue holds every job
        shutil.copytree(new, repo / "results" / new.name)  # a remote worker pushed its results
        before = len(source.downloaded)
        start = time.perf_counter()
        app.round()
        one = time.perf_counter() - start
        print(f"pickup round: nothing new {idle * 1000:.0f} ms; one new folder {one * 1000:.0f} ms "
              f"({len(source.downloaded) - before} files read)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

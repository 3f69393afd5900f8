"""The Queue tab's cost per page and per tick when queue clients wrote megabytes, against short texts.

Issue 48 (finding 7): a 5 MB worker message, supervisor last exit and notice made the Queue tab a 15 MB page
(1.08 CPU-s), recomputed by every visitor's 5-second tick (0.9-1.1 CPU-s each). Every value a queue client writes is
now read as at most ``listing.TEXT_CHARS`` characters (``leaderboard.queue.listing``). This script fills a store's
queue as clients would (``culturelens.testing.queue_clients.fill``: a supervisor's last exit, a worker's message and
a track's reason, a notice, a running job's message, a failed job's error and log excerpt), once with short texts
and once with ``--field-mb`` MB in each, serves each store in this process (``culturelens.testing.live_app``) and
measures, through the page's own events as a browser sends them, the server's CPU seconds (every thread but the
client's) and the bytes the page receives:

- the page: opening the Queue tab (its select event);
- a tick: the timer's event with the Queue open, in one session past its first tick (the tab is recomputed every
  5 s, and sent only when it changed).

Each CPU figure is the mean of ``--repeats`` events (a thread's CPU time is counted in 10 ms steps: one event is
too short to time alone); the script prints long / short for each, and exits 1 when one is over ``TARGET``.

    .venv/bin/python benchmarks/queue_tick.py [--field-mb 5] [--repeats 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from culturelens.testing.live_app import Page, launched, server_cpu  # noqa: E402  after the repository is on the path
from culturelens.testing.queue_clients import TEXTS, fill  # noqa: E402
from leaderboard.store import Store  # noqa: E402

TARGET = 1.5  # at most this much more server CPU for megabyte fields than for short ones, per page and per tick


def measure(root: Path, text: str, repeats: int) -> dict[str, tuple[float, int]]:
    """For the page and a tick: (the server's CPU seconds per event, over ``repeats`` of each; the most bytes one
    brought)."""
    store = Store(root / "store")
    fill(store, text)
    with launched(store, "ada") as url:
        page = Page(url)
        tab = page.event(page.component("tabitem", "Queue"), "select")
        tick = page.event(page.component("timer"), "tick")
        ticked = page.initial(tick)
        ticked[0] = "queue"  # the open tab
        page.call(tick, ticked)  # the session's first tick: the results and the queue as this page first saw them
        figures = {}
        for name, fn, data in (("page", tab, page.initial(tab)), ("tick", tick, ticked)):
            before, size = server_cpu(), 0
            for _ in range(repeats):
                answer = page.call(fn, data)
                if not answer.success:
                    raise SystemExit(f"the {name} event failed: {answer.error}")
                size = max(size, answer.size)
            figures[name] = ((server_cpu() - before) / repeats, size)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--field-mb", type=float, default=5.0, help="megabytes in each text of the long run")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    long_text = "x" * int(args.field_mb * 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        short = measure(Path(tmp, "short"), "a short line", args.repeats)
        long = measure(Path(tmp, "long"), long_text, args.repeats)
    failed = False
    for name in ("page", "tick"):
        ratio = long[name][0] / short[name][0]
        failed |= ratio > TARGET
        print(f"{name}: short texts {short[name][0]:.3f} CPU-s, {short[name][1]:,} bytes; {TEXTS} texts of "
              f"{args.field_mb:g} MB {long[name][0]:.3f} CPU-s, {long[name][1]:,} bytes; long / short {ratio:.2f} "
              f"(target <= {TARGET})")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

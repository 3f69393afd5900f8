"""Crash soak: SIGKILL scoring workers at random points, K times, and check that nothing is lost or doubled.

    python benchmarks/crash_soak.py [--kills 20] [--workers 2] [--seeds 24] [--size 128] [--seed 0]
                                    [--backbones FILE] [--jobs N] [--queue URL | --postgres]

It builds a store (a 6-prompt CUBE-format dataset, submissions of distinct random images), starts
``--workers`` real ``culturelens worker`` processes with a short lease, and, K times, picks a job that is
being scored, waits a random time, and SIGKILLs its worker, starting a fresh one in its place. Submissions
keep arriving while workers score (one whenever fewer than ``workers + 1`` jobs are waiting), so there is
always something to kill; a job on its last attempt is never killed (that path, FAILED after repeated
crashes or FINISHED when the last attempt had written its results, is tests/test_queue.py's). Then it checks,
and prints as figures:

- every submission is FINISHED, or FAILED with a reason;
- each finished submission has one complete results folder: per-image rows unique per (prompt, seed, metric)
  and covering every image, aggregates unique per (metric, slice, value), and the leaderboard's DuckDB view
  shows exactly those rows (no leftovers of a killed write);
- no job was scored by two workers at once (attempt numbers in the worker logs are distinct), and none was
  scored to the end twice (each worker logs ``scored ID (attempt N)`` when its scoring completes; a worker
  killed after that line, while writing results, lost its work and is not counted);
- a job's last attempt found in the cache every embedding of its images that was there when its previous
  worker was killed (cache hits on resume), and jobs killed mid-scoring were taken over by another worker
  once the lease expired.

With ``--jobs N`` the N submissions are queued at the start and none arrive later: the workers race to claim
them while up to K of them are killed (fewer when the queue drains first).

The queue is the store's SQLite file, or with ``--queue postgresql://...`` a PostgreSQL database (the workers
get it in ``CULTURELENS_QUEUE``), or with ``--postgres`` a server this script starts in a temporary folder
(``culturelens.testing.postgres``, as the tests do). The workers share the store's disk either way (submissions, results
and the embedding cache); only the queue moves to the server.

Without ``--backbones`` it uses the small random CLIP of ``harness_speed.py``; ``tests/test_crash_recovery.py``
runs the same code with K = 3 and the test suite's tiny CLIP.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from culturelens.testing.soak import Soak, build_store, figure_lines, small_backbones_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of a scoring worker (K)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes running at once")
    parser.add_argument("--seeds", type=int, default=24, help="images per prompt (6 prompts per submission)")
    parser.add_argument("--size", type=int, default=128, help="image side in pixels")
    parser.add_argument("--lease-seconds", type=float, default=3.0, help="worker lease")
    parser.add_argument("--max-delay", type=float, default=3.0, help="longest random wait before a kill, seconds")
    parser.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the kill schedule")
    parser.add_argument("--backbones", default=None, help="backbones JSON (default: small random CLIP, built here)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store and logs")
    parser.add_argument("--jobs", type=int, default=None,
                        help="queue this many submissions at the start and no more (default: keep them arriving)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--queue", default=None, metavar="URL", help="the queue on this PostgreSQL database")
    where.add_argument("--postgres", action="store_true",
                       help="the queue on a PostgreSQL server started here, in a temporary folder")
    parser.add_argument("--remote", action="store_true",
                        help="remote workers (with --queue or --postgres): each on a store of its own, fetching "
                             "submissions from a requests repo and publishing results to a results repo (local "
                             "folders standing in for the Hub's)")
    args = parser.parse_args(argv)
    if args.remote and not (args.queue or args.postgres):
        parser.error("--remote needs the queue on PostgreSQL: --queue URL or --postgres")
    root = Path(tempfile.mkdtemp(prefix="crash-soak-"))
    (root / "logs").mkdir()
    backbones = Path(args.backbones) if args.backbones else small_backbones_file(root)
    server = None
    if args.postgres:
        from culturelens.testing.postgres import PostgresServer

        server = PostgresServer().start()
    queue = server.database() if server else args.queue
    soak = Soak(build_store(root, queue), backbones, root / "logs", queue=queue,
                remote=root / "remote" if args.remote else None,
                lease_seconds=args.lease_seconds, seeds=args.seeds, size=args.size)
    print(f"queue: {soak.store.queue!r}; {args.workers} workers"
          + (", each on a store of its own (no shared disk)" if args.remote else ""))
    started = time.monotonic()
    try:
        soak.run(args.kills, args.workers, random.Random(args.seed), args.max_delay, args.timeout, jobs=args.jobs)
        figures, problems = soak.check()
    finally:
        soak.stop_workers()
        soak.store.queue.close()
        if server:
            server.stop()
    for line in figure_lines(figures):
        print(line)
    print(f"({time.monotonic() - started:.0f} s; store and logs in {root})" if args.keep else
          f"({time.monotonic() - started:.0f} s)")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

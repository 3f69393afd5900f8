"""What checking seals over bytes costs: a results folder's seal against one read of its tables, and the start's check.

Issue 48 found a table sealed as "empty" by the row count its footer claimed; a seal is now over each table's bytes
(a table of no rows is one known file, ``benchmark.results.empty_table``), and a queue rebuilt or restored checks the
seal of every folder it keeps FINISHED (a lease's sha256 alone no longer does). This script writes one results folder
whose ``per_image.parquet`` holds ``--rows`` rows (a CUBE-1K submission of 10 seeds and 5 per-image metrics is about
50,000), sealed as a worker seals it, and prints:

- the seal check (``seal.folder_refusal``: the sha256 of each table's bytes, and the HMAC) against the baseline of
  reading that folder's tables once with pyarrow (what the catalog does to show a submission's per-image rows): their
  ratio, and the bytes hashed per second;
- telling a table of no rows by its bytes (``results.is_empty_table``) against reading its footer's row count
  (``results.parquet_rows``, what the seal read before);
- the start's check (``seal.check_at_start``: the key, and the key each sealed folder names) on a store of
  ``--folders`` sealed folders, against listing that store's results folders as the catalog's refresh does.

    .venv/bin/python benchmarks/seal_cost.py
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark import layout, results  # noqa: E402  after the repository is on the path
from benchmark.run_record import RunRecord  # noqa: E402
from leaderboard import seal  # noqa: E402
from leaderboard.operator_settings import SEAL_SECRET  # noqa: E402

SECRET = "seal-cost-benchmark-secret-0123456789"


def best(repeats: int, work) -> float:
    """The least wall-clock seconds of ``repeats`` runs of ``work()`` (files are in the page cache after the first)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def folder(target: Path, sid: str, rows: int, keys: seal.Keys) -> Path:
    per_image = [{"submission_id": sid, "model": "Model", "prompt_id": f"p{i // 50:05d}", "seed": i % 10,
                  "image_path": f"images/p{i // 50:05d}/{i % 10}.png",
                  "image_sha256": hashlib.sha256(str(i // 5).encode()).hexdigest(),  # an image's, for its 5 rows
                  "country": "Japan", "track": "awareness", "metric": f"metric_{i % 5}", "value": random.random()}
                 for i in range(rows)]
    aggregates = [{"provenance": "scored", "submission_id": sid, "model": "Model", "track": "awareness",
                   "metric": "clip_score", "slice": "overall", "slice_value": "all", "value": 0.5}]
    results.write_folder(target, per_image, aggregates, [], RunRecord(submission_id=sid, request=1, lease="0" * 32),
                         then=lambda tmp: seal.seal_folder(tmp, keys))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="per-image rows of the sealed folder")
    parser.add_argument("--folders", type=int, default=1_000, help="sealed folders of the store the start checks")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    SEAL_SECRET.put(SECRET)  # the start's check reads the configured secret
    keys = seal.Keys.parse(SECRET, SEAL_SECRET.env)
    with tempfile.TemporaryDirectory() as tmp:
        big = folder(Path(tmp) / "big" / "sub-big", "sub-big", args.rows, keys)
        size = sum((big / name).stat().st_size for name in layout.RESULT_PARQUET)
        assert seal.folder_refusal(big, keys) is None
        check = best(args.repeats, lambda: seal.folder_refusal(big, keys))
        read = best(args.repeats, lambda: [pq.read_table(big / name) for name in layout.RESULT_PARQUET])
        print(f"seal check of a folder of {args.rows:,} per-image rows ({size / 2**20:.1f} MiB of tables): "
              f"{check * 1000:.1f} ms, {size / check / 2**20:.0f} MiB/s; one read of its tables: {read * 1000:.1f} ms; "
              f"check / read: {check / read:.2f}")
        curves = big / layout.CURVES
        by_bytes = best(args.repeats * 200, lambda: results.is_empty_table(curves)) * 1e6
        by_footer = best(args.repeats * 200, lambda: pq.read_metadata(curves).num_rows) * 1e6
        print(f"an empty table told by its bytes: {by_bytes:.0f} us; by its footer's row count: {by_footer:.0f} us; "
              f"bytes / footer: {by_bytes / by_footer:.2f}")

        store = Path(tmp) / "store"
        small = folder(Path(tmp) / "small" / "sub-0", "sub-0", 10, keys)
        for i in range(args.folders):
            shutil.copytree(small, store / layout.RESULTS / f"sub-{i}")
        start = best(args.repeats, lambda: seal.check_at_start(store))
        listing = best(args.repeats, lambda: [entry.name for entry in os.scandir(store / layout.RESULTS)
                                               if os.path.exists(os.path.join(entry.path, layout.RUN))])
        print(f"start's check of a store of {args.folders:,} sealed folders: {start * 1000:.1f} ms; listing them as "
              f"the catalog does: {listing * 1000:.1f} ms; check / listing: {start / listing:.1f}")


if __name__ == "__main__":
    main()

"""CPU time to refuse an upload of many small entries: linear in its entries, and before anything is unpacked.

Issue 40 found a 190,000-entry zip (~25 MB) holding the server about 11 minutes: every entry was unpacked before the
manifest and the names were checked. Now the layout (manifest, names and counts against the prompt set) is checked
from the zip's directory, its manifest alone unpacked first (``benchmark.submission.validate.stage_with``). This
script builds hostile zips of 10,000 and 200,000 entries (``culturelens.testing.submissions.many_entries_zip``: each
entry a broken "image" whose unpacking would fail, so a refusal for the layout shows nothing else was unpacked),
stages each as the app does (``validate.stage``, in this process) and prints the CPU seconds of each and their ratio
over the ratio of entries. Linear: about 1; the target is at most 1.5 (exit 1 above it).

    .venv/bin/python benchmarks/upload_scale.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.datasets.prompts import PromptSet  # noqa: E402  after the repository is on the path
from benchmark.submission import validate  # noqa: E402
from culturelens.testing.submissions import many_entries_zip  # noqa: E402

TARGET = 1.5  # at most this much more CPU per entry at 200k than at 10k


def prompts(ids: list[str]) -> PromptSet:
    table = pd.DataFrame({"prompt": [f"prompt {i}" for i in ids]}, index=pd.Index(ids, name="prompt_id"))
    return PromptSet("culturelens/cube-1k", "cube_1k", "test", "benchmark", table)


def refuse(entries: int, folder: Path, repeats: int) -> tuple[float, int]:
    """The least CPU seconds of ``repeats`` stagings of an ``entries``-entry hostile zip, and its size in bytes."""
    ids = [f"p{i:03d}" for i in range(10)]
    archive = many_entries_zip(folder / f"upload-{entries}.zip", entries, ids)
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        report = validate.stage(archive, folder / "staging", lambda manifest: prompts(ids))
        best = min(best, time.process_time() - started)
        if report.ok or not any("is not in the manifest's seeds" in e for e in report.errors):
            raise SystemExit(f"{entries} entries: not refused for its layout: {report.text()[:500]}")
        if any((folder / "staging").iterdir()):
            raise SystemExit(f"{entries} entries: the refused upload left files in staging")
    return best, archive.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3, help="stagings of each zip; the least CPU time counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, small_bytes = refuse(args.small, Path(tmp), args.repeats)
        large, large_bytes = refuse(args.large, Path(tmp), args.repeats)
    ratio = (large / small) / (args.large / args.small)
    print(f"{args.small:>7,} entries ({small_bytes / 2**20:.1f} MiB): refused in {small:.2f} CPU-s")
    print(f"{args.large:>7,} entries ({large_bytes / 2**20:.1f} MiB): refused in {large:.2f} CPU-s")
    print(f"CPU per entry at {args.large:,} over at {args.small:,}: {ratio:.2f} (target <= {TARGET}; linear: 1)")
    if ratio > TARGET:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

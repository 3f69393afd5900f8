"""CPU time and memory to refuse hostile uploads: linear in their entries, and a refusal that costs no more than a valid
upload of the same size.

Issue 40 found a 190,000-entry zip (~25 MB) holding the server about 11 minutes: every entry was unpacked before the
manifest and the names were checked. Now the layout (manifest, names and counts against the prompt set) is checked
from the zip's directory, its manifest alone unpacked first (``benchmark.submission.validate.stage_with``). The first
part builds hostile zips of 10,000 and 200,000 entries (``culturelens.testing.submissions.many_entries_zip``: each
entry a broken "image" whose unpacking would fail, so a refusal for the layout shows nothing else was unpacked),
stages each as the app does (``validate.stage``, in this process) and prints the CPU seconds of each and their ratio
over the ratio of entries. Linear: about 1; the target is at most 1.5.

Issue 48 found a 103 MB zip of 2,000,000 entries costing 10.6 CPU-s and +800 MiB before it was refused for its count
(``zipfile`` parsed its whole directory first), and 1,000 part manifests of 1 MiB in an 11 MiB zip written to staging
(991 MiB) before they were refused for their part names. The second part stages each of them
(``culturelens.testing.hostile_zips``) and a valid submission zip of the same size (1024 px PNGs of random pixels,
every image decoded and hashed) as the app does (``suite.stage``, the suite served by default), each in a process of
its own, and prints the CPU seconds, the peak memory each added and the bytes each wrote; the target is that each
refusal costs at most what the valid upload of its size costs, in CPU and in memory (exit 1 above either).
``--before REF`` stages the hostile zips with that revision's code too, in the same run.

    .venv/bin/python benchmarks/upload_scale.py --before 4e27aee
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
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


def scale(args: argparse.Namespace) -> bool:
    """Part 1: the CPU per entry of a layout refusal at ``--large`` entries over at ``--small``; True on target."""
    with tempfile.TemporaryDirectory() as tmp:
        small, small_bytes = refuse(args.small, Path(tmp), args.repeats)
        large, large_bytes = refuse(args.large, Path(tmp), args.repeats)
    ratio = (large / small) / (args.large / args.small)
    print(f"{args.small:>7,} entries ({small_bytes / 2**20:.1f} MiB): refused in {small:.2f} CPU-s")
    print(f"{args.large:>7,} entries ({large_bytes / 2**20:.1f} MiB): refused in {large:.2f} CPU-s")
    print(f"CPU per entry at {args.large:,} over at {args.small:,}: {ratio:.2f} (target <= {TARGET}; linear: 1)")
    return ratio <= TARGET


# --- part 2: a refusal against a valid upload of the same size ------------------------------------------------------
def valid_zip(archive: Path, count: int) -> Path:
    """A valid submission zip of ``count`` 1024 px PNGs of random pixels (~3.15 MB each), one per prompt of the prompt
    set ``CHILD`` checks it against (``p000``, ``p001``, ...), seed 0."""
    import zipfile

    from culturelens.testing.submissions import manifest, write_image

    folder = archive.with_suffix("")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest(seeds=(0,))))
        for i in range(count):
            path = folder / f"{i}.png"
            write_image(path, seed=i, size=1024)
            zf.write(path, f"images/p{i:03d}/0.png")
            path.unlink()
    return archive


CHILD = textwrap.dedent("""
    import json, sys, tempfile, time
    from pathlib import Path

    code, archive, images = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    sys.path.insert(0, code)
    import pandas as pd
    from PIL import Image, PngImagePlugin  # loaded before the baseline, as a serving app has them

    from benchmark.datasets.prompts import PromptSet
    from benchmark.submission.suite import stage
    from benchmark.suite import SUITE_V1

    ids = [f"p{i:03d}" for i in range(max(images, 1))]
    table = pd.DataFrame({"prompt": ids}, index=pd.Index(ids, name="prompt_id"))
    prompt_set = PromptSet("culturelens/cube-1k", "cube_1k", "test", "benchmark", table)

    def field(name, where="status"):  # a number of /proc/self/status (KiB) or /proc/self/io (bytes)
        return next(int(line.split()[1]) for line in open(f"/proc/self/{where}") if line.startswith(name + ":"))

    Path("/proc/self/clear_refs").write_text("5")  # the peak resident size (VmHWM) starts again from now
    baseline, written = field("VmRSS"), field("wchar", "io")
    with tempfile.TemporaryDirectory() as staging:
        started = time.process_time()
        report = stage(archive, Path(staging), SUITE_V1, lambda manifest: prompt_set)
        cpu = time.process_time() - started
        written = field("wchar", "io") - written
    print(json.dumps({"ok": report.ok, "error": (report.errors or [""])[0][:150], "cpu": cpu,
                      "memory": (field("VmHWM") - baseline) / 1024, "written": written / 2**20}))
""")
"""Stages ARCHIVE with the code in CODE (a checkout), as the app does, checked against a prompt set of IMAGES prompts;
prints as JSON whether it was accepted, its first error, the CPU seconds, the most resident memory (MiB) staging
added to what the process held before (Linux's peak resident size, reset first) and the MiB it wrote (to staging)."""


def staged(archive: Path, images: int = 0, code: Path = ROOT) -> dict:
    """``CHILD`` run in a process of its own on ``archive``."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(code), str(archive), str(images)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def exported(ref: str, folder: Path) -> Path:
    """The tree of git revision ``ref`` of this repository, written under ``folder``."""
    tree = folder / f"code-{ref}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def edges(before: str | None) -> bool:
    """Part 2: each hostile zip of issue 48 against a valid zip of its size (and, with ``before``, staged by that
    revision's code too); True when neither refusal costs more than its valid upload."""
    from culturelens.testing.hostile_zips import directory_only_zip, part_manifests_zip

    on_target = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        old = exported(before, folder) if before else None
        print("| upload | zip | code | outcome | CPU-s | peak memory added | written to staging |")
        print("|---|--:|---|---|--:|--:|--:|")
        hostiles = directory_only_zip(folder / "entries.zip", 2_000_000), part_manifests_zip(folder / "parts.zip")
        for hostile in hostiles:
            size = hostile.stat().st_size
            images = max(1, round(size / 3_150_000))
            valid = valid_zip(folder / f"valid-{hostile.stem}.zip", images)
            refused, accepted = staged(hostile), staged(valid, images)
            if refused["ok"] or not accepted["ok"]:
                raise SystemExit(f"{hostile.name}: expected refused then accepted: {refused}, {accepted}")
            rows = [(hostile, "this", refused), (valid, "this", accepted)]
            if old is not None:
                rows.insert(0, (hostile, before, staged(hostile, code=old)))
            for path, code, outcome in rows:
                name = hostile.name if path == hostile else f"valid, {images} images"
                print(f"| {name} | {path.stat().st_size / 2**20:.1f} MiB | {code} | "
                      f"{(outcome['error'] or 'accepted')[:70]} | {outcome['cpu']:.3f} | {outcome['memory']:.1f} MiB | "
                      f"{outcome['written']:.1f} MiB |")
            cpu = refused["cpu"] / accepted["cpu"]
            print(f"| {hostile.name}'s refusal / valid | | | | {cpu:.4f} | "
                  f"{refused['memory']:.1f} / {accepted['memory']:.1f} | |")
            on_target &= cpu <= 1 and refused["memory"] <= max(accepted["memory"], 1)
    return on_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3, help="stagings of each zip; the least CPU time counts")
    parser.add_argument("--before", metavar="REF", help="also stage the hostile zips with this git revision's code "
                                                        "(4e27aee: before issue 48)")
    args = parser.parse_args()
    on_target = scale(args)
    print()
    on_target &= edges(args.before)
    if not on_target:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

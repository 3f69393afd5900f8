"""Uploads that cost what they weigh (issue 48, findings 4-6): an upload is refused from its zip's end record and
directory before ``zipfile`` parses them, and from its names before anything of it is staged; what is staged is
bounded by what the archive declares; the upload route takes no more than the upload limit in one request, holds every
byte in one space shared with staging (a clear 507 when it is full), and leaves nothing of a cut body; the routes
no component uses write nothing; and a stopped server leaves no file of any of it.

The hostile archives are built as the attacker built them (``culturelens.testing.hostile_zips``); the servers are
real (``culturelens serve`` in a process of its own, or the app launched in this one), driven over HTTP, raw sockets
and gradio_client.
"""

from __future__ import annotations

import contextlib
import os
import threading
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from benchmark.suite import SUITE_V1
from culturelens.testing.hostile_zips import directory_only_zip, extra_fields_zip, part_manifests_zip
from leaderboard.store import Store
from tests.helpers import launched

pytestmark = pytest.mark.slow  # archives of 11-101 MB and live servers

PARTS = ", ".join(SUITE_V1.names)
NO_PART_P0 = (f"parts/p0: {SUITE_V1.label} has no part 'p0' (its parts: {PARTS}); 999 more parts of this upload are "
              "not the suite's either")


@contextlib.contextmanager
def _staged_peak(folder: Path):
    """The most bytes the files under ``folder`` held at once while the block ran, looked at without pause from
    another thread (writing 1 GB takes seconds: a write of any size is seen)."""
    peak, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            total = 0
            for root, _, files in os.walk(folder):  # a folder removed meanwhile is passed over
                for name in files:
                    with contextlib.suppress(OSError):
                        total += os.lstat(os.path.join(root, name)).st_size
            peak[0] = max(peak[0], total)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield peak
    finally:
        done.set()
        watcher.join()


def _python_peak(call) -> tuple[object, int]:
    """``call()``'s outcome (or the exception it raised) and the most bytes of Python memory it held at once."""
    tracemalloc.start()
    try:
        outcome = call()
    except Exception as error:  # noqa: BLE001 - the refusal is the outcome the test looks at
        outcome = error
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return outcome, peak


# --- finding 4: part manifests are refused from the names, before any is staged -------------------------------------
def test_edge_upload_part_manifests_1000_of_1_mib_are_refused_before_any_is_staged(tmp_path):
    archive = part_manifests_zip(tmp_path / "parts.zip")  # 1,000 manifests of 1 MiB: 1,000 MiB unpacked
    size = archive.stat().st_size
    assert 10 * 2**20 < size < 12 * 2**20
    with zipfile.ZipFile(archive) as zf:  # a real zip, each entry under the 100:1 ratio refused as a bomb
        assert len(zf.infolist()) == 1000 and all(i.file_size == 2**20 < 100 * i.compress_size for i in zf.infolist())
    store = Store(tmp_path / "store")
    with _staged_peak(store.staging) as peak:
        outcome = store.submit(archive, "mallory")
    assert peak[0] == 0 <= size, f"{peak[0]:,} bytes staged"  # the code before wrote 991 MiB of manifests first
    assert outcome.job is None and outcome.report.errors == [NO_PART_P0]
    assert list(store.staging.iterdir()) == []


def test_edge_upload_part_manifests_sent_to_the_server_are_refused_before_any_is_staged(tmp_path):
    from gradio_client import Client, handle_file

    archive = part_manifests_zip(tmp_path / "parts.zip")
    store = Store(tmp_path / "store")
    with launched(store, "mallory") as url, _staged_peak(store.staging) as peak:
        verdict = Client(url, verbose=False).predict(handle_file(archive), api_name="/submit")
    assert peak[0] == 0, f"{peak[0]:,} bytes staged"
    assert verdict.startswith("### Rejected: nothing was stored")
    assert "has no part &#39;p0&#39;" in verdict and "999 more parts of this upload" in verdict
    assert list(store.staging.iterdir()) == []
    assert store.queue.jobs() == []


# --- finding 5: the end record and the directory are checked before zipfile parses them ----------------------------
def test_edge_upload_two_million_entries_are_refused_from_the_end_record(tmp_path):
    small = directory_only_zip(tmp_path / "small.zip", 70_000)  # the same build, small enough to parse here
    with zipfile.ZipFile(small) as zf:
        assert len(zf.namelist()) == 70_000 and zf.read("0000000") == b""
    archive = directory_only_zip(tmp_path / "entries.zip", 2_000_000)
    assert archive.stat().st_size > 100 * 10**6
    store = Store(tmp_path / "store")
    outcome, peak = _python_peak(lambda: store.submit(archive, "mallory"))
    # Reading the directory alone takes 106 MB (zipfile read it whole, then made 2,000,000 objects: +800 MiB).
    assert peak < 8 * 2**20, f"{peak:,} bytes"
    assert outcome.job is None and outcome.report.errors == [
        "entries.zip: 2,000,000 entries (as its end record declares), more than the limit of 200,000; refused before "
        "its directory was read"]
    assert list(store.staging.iterdir()) == []


def test_edge_upload_an_end_record_that_understates_its_entries_is_refused_before_the_directory_is_read(tmp_path):
    archive = directory_only_zip(tmp_path / "lying.zip", 2_000_000, declared=1000)
    store = Store(tmp_path / "store")
    outcome, peak = _python_peak(lambda: store.submit(archive, "mallory"))
    assert peak < 8 * 2**20, f"{peak:,} bytes"
    assert outcome.report.errors == [
        "lying.zip: a central directory of 106,000,000 bytes for the 1,000 entries its end record declares: more "
        "than 512 bytes an entry (zip writers use 50-300); refused before it was read"]
    # Within the size its count allows, the records are counted as they are read: the count must be the declared one.
    counted = directory_only_zip(tmp_path / "counted.zip", 3000, declared=2500)
    outcome = store.submit(counted, "mallory")
    assert outcome.report.errors == ["counted.zip: its central directory holds more than the 2,500 entries its end "
                                     "record declares (a damaged or forged archive)"]


def test_edge_upload_entries_with_64_kb_extra_fields_are_refused_before_zipfile_reads_them(tmp_path):
    store = Store(tmp_path / "store")
    # Every entry with 64 KB of 4-byte items: 0.22 CPU-s a MB for zipfile; the directory is over its size at once.
    every = extra_fields_zip(tmp_path / "every.zip", 100)
    outcome, peak = _python_peak(lambda: store.submit(every, "mallory"))
    assert peak < 4 * 2**20, f"{peak:,} bytes"  # zipfile held the 6.6 MB directory and 1.6 M items decoded from it
    assert outcome.report.errors == [
        "every.zip: a central directory of 6,559,390 bytes for the 100 entries its end record declares: more than 512 "
        "bytes an entry (zip writers use 50-300); refused before it was read"]
    # One such entry among small ones fits the directory's size: its record is refused as it is read.
    mixed = extra_fields_zip(tmp_path / "mixed.zip", 3001, heavy=1)
    assert zipfile.ZipFile(mixed).infolist()[-1].extra[:4] == b"\xfe\xca\x00\x00"
    assert store.submit(mixed, "mallory").report.errors == [
        "mixed.zip: entry 3,001 of its central directory has an extra field of 65,532 bytes, more than 1,024"]
    # 200 items of 4 bytes in 800 bytes: within the field's length, over its number of items.
    many = extra_fields_zip(tmp_path / "many.zip", 10, extra_bytes=800)
    assert store.submit(many, "mallory").report.errors == [
        "many.zip: entry 1 of its central directory has more than 16 items in its extra field"]
    assert list(store.staging.iterdir()) == []

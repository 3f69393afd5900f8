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
import socket
import tempfile
import threading
import tracemalloc
import zipfile
from pathlib import Path

import httpx
import pytest

from benchmark.datasets import cube_1k
from benchmark.submission import Limits
from benchmark.suite import SUITE_V1
from culturelens.testing.hostile_zips import directory_only_zip, extra_fields_zip, part_manifests_zip
from culturelens.testing.submissions import make_submission, zip_folder
from leaderboard import upload_cache
from leaderboard.store import Store
from tests.helpers import launched, serving, serving_tiny_cube, until

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


# --- finding 6: the routes that write a visitor's bytes -------------------------------------------------------------
def _cut_body(url: str, route: str, sent: int = 2**20, declared: int = 3 * 2**20) -> None:
    """A multipart POST to ``route`` that declares ``declared`` bytes, sends ``sent`` of them and hangs up."""
    host, port = url.removeprefix("http://").strip("/").split(":")
    with socket.create_connection((host, int(port))) as connection:
        head = (f"POST /gradio_api/{route} HTTP/1.1\r\nHost: {host}\r\nContent-Type: multipart/form-data; boundary=cut"
                f"\r\nContent-Length: {declared}\r\n\r\n--cut\r\nContent-Disposition: form-data; name=\"files\"; "
                f"filename=\"cut.zip\"\r\n\r\n")
        connection.sendall(head.encode() + os.urandom(sent))


def _files(folder: Path) -> list[Path]:
    """The files under ``folder`` now; a subfolder removed while it is listed (an upload's, as it ends) is skipped
    (``os.walk`` ignores a folder it can no longer read; ``rglob`` raised)."""
    return sorted(Path(root) / name for root, _, names in os.walk(folder) for name in names if name != ".lock")


def _holding(folders: list[Path], payload: bytes) -> list[Path]:
    """Files directly in ``folders`` that hold ``payload`` (what Gradio's recording and component routes wrote)."""
    return [p for folder in folders if folder.is_dir() for p in folder.iterdir()
            if p.is_file() and p.stat().st_size == len(payload) and p.read_bytes() == payload]


def test_edge_upload_routes_leave_no_file_after_a_stop(tmp_path, own_tmpdir):
    temp = own_tmpdir  # the server's system temporary folder: Gradio's shared cache, and this server's own
    store = Store(tmp_path / "store")
    recording = os.urandom(20 * 2**20)
    with serving(store.root, tmp_path / "serve.log", "--no-worker") as url:
        before = _files(temp)  # what the app made for its pages (the Submit tab's schema download)
        refused = httpx.post(url + "gradio_api/process_recording", files={"video": ("r.mp4", recording)}, timeout=60)
        assert (refused.status_code, refused.text) == (404, "this server takes no screen recordings: nothing was "
                                                            "stored")
        called = httpx.post(url + "gradio_api/component_server", files={"files": ("f.bin", recording[:2**20])},
                            data={"component_id": "1", "session_hash": "x", "fn_name": "ls"}, timeout=60)
        assert (called.status_code, called.text) == (404, "this server takes no component calls: nothing was stored")
        kept = httpx.post(url + "gradio_api/upload", files={"files": ("kept.zip", recording[:3 * 2**20])}, timeout=60)
        assert kept.status_code == 200
        for route in ("upload", "process_recording", "component_server"):
            _cut_body(url, route)
        (cache,) = temp.glob("culturelens-uploads-*")
        until(lambda: _files(temp) == sorted([*before, Path(kept.json()[0])]), 30,
              "nothing but the upload that succeeded")
        assert Path(kept.json()[0]).is_relative_to(cache)
    assert _files(temp) == []  # stopped (SIGTERM): nothing of any request is left


def test_edge_upload_routes_no_component_uses_write_nothing_and_a_cut_upload_is_removed_at_once(tmp_path):
    store = Store(tmp_path / "store")
    payload = os.urandom(2**20)
    with launched(store, "visitor") as url:
        cache = upload_cache.use_own()
        shared = [Path(tempfile.gettempdir()), Path(tempfile.gettempdir()) / "gradio", cache]
        for route, field in (("process_recording", "video"), ("component_server", "files")):
            answer = httpx.post(url + f"gradio_api/{route}", files={field: ("x.bin", payload)},
                                data={"component_id": "1", "session_hash": "x", "fn_name": "ls"}, timeout=60)
            assert answer.status_code == 404 and answer.text.endswith("nothing was stored")
        assert _holding(shared, payload) == []
        before = _files(cache)
        host, port = url.removeprefix("http://").strip("/").split(":")
        with socket.create_connection((host, int(port))) as connection:
            connection.sendall(b"POST /gradio_api/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                               b"boundary=cut\r\nContent-Length: 3000000\r\n\r\n--cut\r\nContent-Disposition: "
                               b"form-data; name=\"files\"; filename=\"cut.zip\"\r\n\r\n" + payload)
            partial = until(lambda: [p for p in _files(cache) if p not in before and p.stat().st_size == len(payload)],
                            30, "the cut upload's bytes received")
            assert store.upload_space.used >= len(payload)  # held while it arrives
        until(lambda: _files(cache) == before, 30, "the cut upload's partial file removed")
        assert not partial[0].parent.exists() and store.upload_space.used == 0


# --- all uploads in flight share one cap; the per-request limit counts every file ----------------------------------
def test_edge_upload_total_cap_answers_507_when_the_uploads_in_flight_fill_it(tmp_path):
    store = Store(tmp_path / "store", Limits(max_upload_bytes=5 * 2**20, max_in_flight_bytes=10 * 2**20))
    with launched(store, "visitor") as url:
        upload = url + "gradio_api/upload"
        cache = upload_cache.use_own()
        for name in ("a.zip", "b.zip"):  # 8 MB held of 10 MiB
            assert httpx.post(upload, files={"files": (name, os.urandom(4 * 10**6))}, timeout=60).status_code == 200
        before = _files(cache)
        full = httpx.post(upload, files={"files": ("c.zip", os.urandom(4 * 10**6))}, timeout=60)
        assert full.status_code == 507
        assert full.text.startswith("the server's space for uploads in progress is full: 8,000,")
        assert full.text.endswith("this is not a problem with the submission: try again later; nothing was stored")

        def chunked():  # no length declared: refused once the space cannot hold what arrives
            yield b"--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"d.zip\"\r\n\r\n"
            for _ in range(5):
                yield os.urandom(10**6)
            yield b"\r\n--x--\r\n"

        streamed = httpx.post(upload, content=chunked(), headers={"Content-Type": "multipart/form-data; boundary=x"},
                              timeout=60)
        assert streamed.status_code == 507 and "space for uploads in progress is full" in streamed.text
        assert _files(cache) == before and store.upload_space.used < 8_100_000  # nothing of either kept or held


def test_edge_upload_total_cap_holds_staging_too_and_its_refusal_is_not_counted(tmp_path, tiny_upstream):
    from gradio_client import Client, handle_file

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    archive = zip_folder(make_submission(tmp_path / "sub", prompt_ids), tmp_path / "sub.zip")
    with zipfile.ZipFile(archive) as zf:
        declared = sum(i.file_size for i in zf.infolist())
    # Room for the upload and the multipart framing around it, not for its staged copy as well.
    store.limits = Limits(max_in_flight_bytes=archive.stat().st_size + 4096 + declared // 2)
    with launched(store, "ada") as url:
        verdict = Client(url, verbose=False).predict(handle_file(archive), api_name="/submit")
        assert verdict.startswith("### Not stored\n\nthe server&#39;s space for uploads in progress is full")
        assert verdict.endswith("It was not counted against you.")
        assert store.queue.count_attempts_since("ada", "1970-01-01") == 0 and store.queue.jobs() == []
        assert list(store.staging.iterdir()) == []
        store.limits = Limits()  # the operator makes room: the same upload is accepted
        accepted = Client(url, verbose=False).predict(handle_file(archive), api_name="/submit")
        assert accepted.startswith("### Accepted"), accepted


def test_edge_upload_several_files_in_one_request_count_against_one_upload_limit(tmp_path):
    store = Store(tmp_path / "store", Limits(max_upload_bytes=5 * 10**6))
    with launched(store, "visitor") as url:
        upload = url + "gradio_api/upload"
        cache = upload_cache.use_own()
        before = _files(cache)
        two = httpx.post(upload, files=[("files", ("a.zip", os.urandom(4 * 10**6))),
                                        ("files", ("b.zip", os.urandom(4 * 10**6)))], timeout=60)
        assert two.status_code == 413
        assert two.text.startswith("this upload is 8,000,")
        assert two.text.endswith("bytes; this server takes at most 5,000,000 bytes in one request (its upload limit, "
                                 "max_upload_bytes), whatever the number of files: nothing was stored")
        assert _files(cache) == before and store.upload_space.used == 0
        one = httpx.post(upload, files={"files": ("a.zip", os.urandom(4 * 10**6))}, timeout=60)
        assert one.status_code == 200 and Path(one.json()[0]).stat().st_size == 4 * 10**6

"""Hostile uploads against a live store: a corpus of malicious and malformed submissions built here, and
property-based fuzzing (hypothesis) of the manifest reader, the archive reader and the image checker.

Everything goes through the real path (``Store.submit`` -> ``stage`` -> ``unpack`` -> ``check_folder``) into a
store that already holds an accepted, scored submission. Allowed outcomes: a rejection whose reason names the
file and the problem; never an unexpected exception, never a file outside staging, never a change to what
the store held before.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from benchmark.datasets import cube_1k
from benchmark.encoders.spec import load_registry
from benchmark.scoring_options import ScoringOptions
from benchmark.metrics.alignment import ClipCosine
from benchmark.submission import Limits, Manifest, Rejected, Report
from benchmark.submission.archive import Entry, unpack
from benchmark.submission.validate import check_image, read_manifest
from leaderboard.store import Store
from leaderboard.worker import Worker
from tests.browser import chromium, wait_for_text
from tests.helpers import serving, serving_tiny_cube
from culturelens.testing.submissions import make_submission, manifest, zip_folder
from tests.test_submission import _hostile_cases, _png, _png_header_claiming, _symlink_member

FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # zips that repeat a name, on purpose


# --- a store with one accepted, scored submission ---------------------------------------------------------
@pytest.fixture(scope="module")
def populated(tmp_path_factory, tiny_upstream, backbones_file):
    """(store, prompt ids, id of the kept submission, its source folder): scored by a real worker (tiny CLIP)."""
    root = tmp_path_factory.mktemp("hostile")
    # the corpus tests validation; the upload limit has its own
    store = serving_tiny_cube(Store(root / "store", attempt_quota=10**6), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    source = make_submission(root / "kept", prompt_ids, model_name="Kept Model",
                             model={"name": "Kept Model", "id": "local/kept", "revision": "1", "type": "open"})
    kept = store.submit(source, "alice")
    assert kept.job is not None, kept.report.errors
    worker = Worker(store, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()], lease_seconds=60)
    assert worker.load()
    assert worker.run(once=True) == 1
    assert store.queue.get(kept.job.id).state == "FINISHED" and store.has_results(kept.job.id)
    return store, prompt_ids, kept.job.id, source


def _digest(path: Path) -> str:
    if path.is_symlink():
        return "link->" + os.readlink(path)
    if path.is_dir():
        return "dir"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash. SQLite files are left out (a read may checkpoint them;
    the queue is compared by its rows) and so is the datasets library's own cache of the served dataset."""
    return {p.relative_to(root).as_posix(): _digest(p) for p in sorted(root.rglob("*"))
            if ".sqlite" not in p.name and ".hf-cache" not in p.parts}


def _landing_spots(archive: Path, staging: Path) -> set[Path]:
    """Where a naive extractor would have written each member of ``archive`` (absolute or with '..')."""
    try:
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
    except Exception:  # noqa: BLE001 - unreadable archives have no names to follow
        return set()
    spots = set()
    for name in names:
        target = Path(name) if name.startswith("/") else staging / "upload-x" / name
        spots.add(Path(os.path.normpath(target)))
    return {s for s in spots if staging not in s.parents}


# --- the corpus: cases beyond tests/test_submission.py's ---------------------------------------------------
def _member(name: str, data: bytes, *, mode: int) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    return info, data


def _write_zip(path: Path, members) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members:
            if isinstance(member, str):
                member = zipfile.ZipInfo(member)
                member.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(member, data)
    return path


def _members(prompt_ids: list[str], **manifest_overrides):
    members = [("manifest.json", json.dumps(manifest(**manifest_overrides)).encode())]
    members += [(f"images/{pid}/{seed}.png", _png(seed=i)) for i, pid in enumerate(prompt_ids) for seed in (0, 1)]
    return members


def _patch(data: bytes, name: str, local_offset: int | None, central_offset: int | None, fmt: str, value) -> bytes:
    """Overwrite one field of ``name``'s local header and/or central directory record (offsets into them)."""
    out = bytearray(data)
    encoded = name.encode()
    starts = {"local": [], "central": []}
    index = 0
    while (index := data.find(encoded, index + 1)) != -1:
        if data[index - 30:index - 26] == b"PK\x03\x04":
            starts["local"].append(index - 30)
        elif data[index - 46:index - 42] == b"PK\x01\x02":
            starts["central"].append(index - 46)
    for kind, offset in (("local", local_offset), ("central", central_offset)):
        if offset is not None:
            for start in starts[kind]:
                struct.pack_into(fmt, out, start + offset, value)
    return bytes(out)


def _overlapping(prompt_ids: list[str], path: Path) -> Path:
    """Two directory records pointing at the same local data (the 'non-recursive zip bomb' construction)."""
    members = _members(prompt_ids)
    data = _write_zip(path, members).read_bytes()
    with zipfile.ZipFile(path) as zf:
        first, second = (zf.getinfo(f"images/{prompt_ids[0]}/{seed}.png") for seed in (0, 1))
    data = _patch(data, second.filename, None, 42, "<I", first.header_offset)
    path.write_bytes(data)
    return path


def _many_small_bombs(prompt_ids: list[str], path: Path) -> Path:
    """Members each just under the per-member ratio floor (1 MiB of zeros), so only the archive's overall
    ratio gives them away: a few KB that would unpack to 48 MiB."""
    members = _members(prompt_ids)
    members += [(f"images/{prompt_ids[0]}/{seed}.png", b"\0" * 2**20) for seed in range(10, 58)]
    return _write_zip(path, members)


def _jpeg(size: int = 64) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), (5, 6, 7)).save(buffer, format="JPEG")
    return buffer.getvalue()


def _jpeg_claiming(width: int, height: int) -> bytes:
    data = bytearray(_jpeg())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, height, width)
    return bytes(data)


def _webp_claiming(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(buffer, format="WEBP", quality=50)
    data = bytearray(buffer.getvalue())
    frame = data.find(b"\x9d\x01\x2a")  # VP8 key frame start code, then 14-bit width and height
    struct.pack_into("<HH", data, frame + 3, width, height)
    return bytes(data)


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _png_with_text_bomb() -> bytes:
    """A valid PNG carrying a zTXt chunk that inflates to 64 MiB (Pillow stops at 1 MiB per text chunk)."""
    png = _png()
    bomb = _png_chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b"\0" * (64 * 2**20), 9))
    return png[:33] + bomb + png[33:]


def _other_format(fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buffer, format=fmt)
    return buffer.getvalue()


def _more_cases(prompt_ids: list[str], tmp: Path):
    """(name, path, limits, expected words in the reason) for attacks tests/test_submission.py does not build."""
    p0, first = prompt_ids[0], f"images/{prompt_ids[0]}/0.png"
    ok = _members(prompt_ids)

    def swap(name: str, data: bytes):
        return [(n, data if n == name else d) for n, d in ok]

    def zipped(label: str, members) -> Path:
        return _write_zip(tmp / f"{label}.zip", members)

    def patched(label: str, name: str, local: int | None, central: int | None, fmt: str, value) -> Path:
        path = zipped(label, ok)
        path.write_bytes(_patch(path.read_bytes(), name, local, central, fmt, value))
        return path

    bad_utf8 = zipped("badutf8", ok + [(f"images/{p0}/é.png", b"x")])
    bad_utf8.write_bytes(bad_utf8.read_bytes().replace("é".encode(), b"\xff\xfe"))
    cp437 = zipped("cp437", ok + [(f"images/{p0}/X.png", _png())])  # then X -> byte 0x81, no UTF-8 flag
    cp437.write_bytes(cp437.read_bytes().replace(f"images/{p0}/X.png".encode(), f"images/{p0}/".encode() + b"\x81.png"))
    nul = zipped("nul", ok + [(f"images/{p0}/0.pngX../../evil", b"x")])  # zipfile refuses to write a NUL itself
    nul.write_bytes(nul.read_bytes().replace(b".pngX../", b".png\0../"))
    corrupt_deflate = zipped("deflate", swap("manifest.json", json.dumps(manifest(notes="x" * 1500)).encode()))
    data = bytearray(corrupt_deflate.read_bytes())
    body = 30 + len("manifest.json")
    data[body + 4:body + 40] = bytes(b ^ 0x5A for b in data[body + 4:body + 40])
    corrupt_deflate.write_bytes(bytes(data))
    truncated = zipped("truncated", ok)
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    deep = b"[" * 200_000 + b"]" * 200_000
    huge_int = b'{"format_version": ' + b"9" * 5000 + b"}"
    return [
        ("symlinked folder", zipped("linkdir", ok + [_symlink_member(f"images/{p0}/", "/etc")]), None,
         "symbolic links"),
        ("symlinked wrapper", zipped("linkwrap", [_symlink_member("wrap", "/")] + [(f"wrap/{n}", d) for n, d in ok]),
         None, "symbolic links"),
        ("named pipe entry", zipped("fifo", ok + [_member(f"images/{p0}/7.png", b"", mode=stat.S_IFIFO | 0o644)]),
         None, "special files"),
        ("device entry", zipped("device", ok + [_member(f"images/{p0}/7.png", b"", mode=stat.S_IFCHR | 0o644)]),
         None, "special files"),
        ("encrypted entry", patched("encrypted", first, 6, 8, "<H", 0x1), None, "encrypted"),
        ("non-UTF-8 name (cp437)", cp437, None, "unexpected file"),
        ("name flagged UTF-8 that is not", bad_utf8, None, "not a readable zip archive"),
        # zipfile cuts a name at NUL: this one becomes a second 0.png
        ("NUL byte in a name", nul, None, "appears more than once"),
        ("traversal through the wrapper", zipped("wraptrav", [(f"wrap/{n}", d) for n, d in ok] +
                                                 [("wrap/../../../escaped.png", _png())]), None, "'..' in path"),
        ("deep traversal", zipped("deeptrav", ok + [("../" * 40 + "tmp/escaped.png", _png())]), None, "'..' in path"),
        ("drive letter", zipped("drive", ok + [("C:/Windows/evil.png", _png())]), None, "absolute path"),
        ("UNC path", zipped("unc", ok + [("//server/share/evil.png", _png())]), None, "absolute path"),
        ("look-alike dots", zipped("fullwidth", ok + [(f"images/{p0}/\uff0e\uff0e/0.png", _png())]), None,
         "unexpected file"),
        ("hidden file", zipped("hidden", ok + [(f"images/{p0}/.0.png", _png())]), None, "unexpected file"),
        ("upper-case extension", zipped("upper", ok + [(f"images/{p0}/7.PNG", _png())]), None, "unexpected file"),
        ("executable next to images", zipped("exe", ok + [(f"images/{p0}/0.png.exe", b"MZ")]), None,
         "unexpected file"),
        ("macOS resource fork", zipped("macosx", ok + [("__MACOSX/._manifest.json", b"x")]), None, "unexpected file"),
        ("zip bomb by overall ratio", _many_small_bombs(prompt_ids, tmp / "smallbombs.zip"), None,
         "over the whole archive"),
        ("overlapping entries", _overlapping(prompt_ids, tmp / "overlap.zip"), None, "cannot be extracted"),
        ("declared size smaller than the data", patched("sizelie", first, 22, 24, "<I", 10), None,
         "cannot be extracted"),
        ("declared size larger than the data", patched("sizelie2", first, 22, 24, "<I", 60_000_000), None,
         "compression ratio"),
        ("declared 4 GiB", patched("size4g", first, None, 24, "<I", 0xFFFFFFFF), None, "byte limit for this file"),
        ("unknown compression method", patched("method", first, 8, 10, "<H", 99), None, "cannot be extracted"),
        ("corrupt deflate stream", corrupt_deflate, None, "cannot be extracted"),
        ("truncated archive", truncated, None, "not a readable zip archive"),
        ("empty file", tmp / "empty.zip", None, "not a readable zip archive"),
        ("a zip inside as an image", zipped("nested", swap(first, zipped("inner", ok).read_bytes())), None,
         "not an image"),
        ("JPEG claiming 65000x65000", zipped("jpegbomb", [(n.replace(first, first[:-3] + "jpg"), d)
                                                          for n, d in swap(first, _jpeg_claiming(65000, 65000))]),
         None, "too many pixels"),
        ("WebP claiming 16383x16383", zipped("webpbomb", [(n.replace(first, first[:-3] + "webp"), d)
                                                          for n, d in swap(first, _webp_claiming(16383, 16383))]),
         None, "too many pixels"),
        ("PNG claiming 5000x5000", zipped("pngbig", swap(first, _png_header_claiming(5000, 5000))), None,
         "over the limit of 16777216 pixels"),
        ("PNG 64x100000 without its pixels", zipped("thin", swap(first, _png_header_claiming(64, 100_000))), None,
         "cannot be decoded"),
        ("PNG with a zTXt bomb", zipped("ztxt", swap(first, _png_with_text_bomb())), None, "cannot be decoded"),
        ("PostScript as PNG", zipped("eps", swap(first, b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\n")),
         None, "not an image"),
        ("SVG with a script as PNG", zipped("svg", swap(first, b'<svg xmlns="http://www.w3.org/2000/svg">'
                                                               b"<script>alert(1)</script></svg>")), None,
         "not an image"),
        ("HTML as PNG", zipped("html", swap(first, b"<html><script>alert(1)</script></html>")), None, "not an image"),
        ("GIF as PNG", zipped("gif", swap(first, _other_format("GIF"))), None, "not an image"),
        ("TIFF as PNG", zipped("tiff", swap(first, _other_format("TIFF"))), None, "not an image"),
        ("manifest nested 200000 deep", zipped("deep", swap("manifest.json", deep)), None, "not valid JSON"),
        ("manifest with a 5000-digit number", zipped("hugeint", swap("manifest.json", huge_int)), None,
         "not valid JSON"),
        ("manifest with a lone surrogate", zipped("surrogate", swap("manifest.json", json.dumps(
            manifest(notes="\ud800"), ensure_ascii=False).encode("utf-8", "surrogatepass"))), None, "not UTF-8"),
        ("manifest with an escaped lone surrogate", zipped("surrogate2", swap("manifest.json", json.dumps(
            manifest(notes="\ud800"), ensure_ascii=True).encode())), None, "not valid JSON"),
        ("manifest with Infinity", zipped("inf", swap("manifest.json", json.dumps(manifest(
            generation={"guidance_scale": float("inf")})).encode())), None, "guidance_scale"),
        ("manifest as a list", zipped("list", swap("manifest.json", b"[1, 2]")), None, "(top level)"),
        ("manifest with a BOM", zipped("bom", swap("manifest.json", b"\xef\xbb\xbf" + ok[0][1])), None,
         "not valid JSON"),
        ("HTML with a newline in the model name", zipped("htmlctrl", swap("manifest.json", json.dumps(manifest(
            model={"name": "<b>x</b>\n<script>alert(1)</script>", "id": "a/b", "type": "open"})).encode())), None,
         "control characters"),
        ("escape sequence in the notes", zipped("notesesc", swap("manifest.json", json.dumps(manifest(
            notes="ok\x1b[2J\x1b[31mfake verdict")).encode())), None, "U+001B"),
        ("Hangul fillers as the model name", zipped("filler", swap("manifest.json", json.dumps(manifest(
            model={"name": "\u3164\u3164", "id": "a/b", "type": "open"})).encode())), None, "U+3164"),
        ("right-to-left override in a generation.extra key", zipped("extrartl", swap("manifest.json", json.dumps(
            manifest(generation={"extra": {"lora\u202e": "x"}})).encode())), None, "U+202E"),
        ("upload over the size limit", zipped("toobig", ok), Limits(max_upload_bytes=1000), "over the upload limit"),
        ("validation over its time limit", zipped("slow", ok), Limits(max_validation_seconds=0),
         "validation took longer than 0 s"),
        ("a slice of the split", zipped("slice", _members(prompt_ids[:1], dataset={
            "repo": cube_1k.HUB_REPO, "config": cube_1k.CONFIG, "split": "test[:1]"})), None,
         "not a split name"),
        ("a percentage slice of the split", zipped("slice2", _members(prompt_ids, dataset={
            "repo": cube_1k.HUB_REPO, "config": cube_1k.CONFIG, "split": "test[50%:]"})), None, "not a split name"),
        ("unknown dataset config", zipped("config", _members(prompt_ids, dataset={
            "repo": cube_1k.HUB_REPO, "config": "../../../etc", "split": "test"})), None, "cannot be loaded"),
    ]


def _cases(prompt_ids: list[str], corpus: Path):
    (corpus / "more").mkdir()
    (corpus / "more" / "empty.zip").write_bytes(b"")
    return _hostile_cases(prompt_ids, corpus) + _more_cases(prompt_ids, corpus / "more")


@pytest.mark.slow
def test_the_hostile_corpus_is_rejected_and_changes_nothing(populated, tmp_path, monkeypatch, capsys):
    store, prompt_ids, kept, _ = populated
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    cases = _cases(prompt_ids, corpus)
    assert len({name for name, *_ in cases}) == len(cases) >= 80
    spots = set().union(*(_landing_spots(path, store.staging) for _, path, _, _ in cases))
    assert spots, "the corpus must aim somewhere outside staging"
    outside = store.root.parent
    before = _snapshot(outside)
    before_spots = {s: _digest(s) if s.exists() or s.is_symlink() else None for s in spots}
    before_jobs = store.queue.jobs()
    accepted, unexplained = [], []
    try:
        for name, path, limits, expected in cases:
            store.limits = limits or Limits()
            outcome = store.submit(path, "mallory")
            if outcome.job is not None:
                accepted.append(name)
            elif not outcome.report.errors or not any(expected in e for e in outcome.report.errors):
                unexplained.append(f"{name}: {outcome.report.errors}")
    finally:
        store.limits = Limits()
    after = _snapshot(outside)
    written = sorted(k for k in after.keys() - before.keys() if not k.startswith("store/staging/"))
    written += sorted(s.as_posix() for s, digest in before_spots.items()
                      if (_digest(s) if s.exists() or s.is_symlink() else None) != digest)
    mine = ("store/submissions/", "store/results/", "store/reported/", "store/cache/")
    touched = sorted(k for k in before if k.startswith(mine) and after.get(k) != before[k])
    touched += [j.id for j in before_jobs if store.queue.get(j.id) != j]
    touched += [j.id for j in store.queue.jobs() if j.id not in {b.id for b in before_jobs}]
    with capsys.disabled():
        print(f"\nhostile uploads: {len(cases)} tried, {len(accepted)} accepted, {len(written)} files written "
              f"outside staging, {len(touched)} existing submissions/results touched")
    assert unexplained == [], "\n".join(unexplained)
    assert accepted == [] and written == [] and touched == []
    assert list(store.staging.iterdir()) == []
    assert store.has_results(kept) and store.queue.get(kept).state == "FINISHED"


# --- text in the manifest is data ----------------------------------------------------------------------------
HTML_NAME = '<img src=x onerror="window.__xss=1"> **bold** [link](https://example.org) `code`'


def test_html_in_text_fields_is_stored_verbatim_as_data(populated, tmp_path):
    store, prompt_ids, _, _ = populated
    folder = make_submission(tmp_path / "html", prompt_ids, model_name=HTML_NAME[:100],
                             model={"name": "-", "id": "local/html", "revision": "7", "type": "open"},
                             notes="<script>alert(document.cookie)</script>",
                             contact="<a href='javascript:alert(1)'>me</a>")
    uploaded = (folder / "manifest.json").read_bytes()
    outcome = store.submit(zip_folder(folder, tmp_path / "html.zip"), "mallory")
    assert outcome.job is not None, outcome.report.errors
    assert (store.submissions / outcome.job.id / "manifest.json").read_bytes() == uploaded
    assert outcome.job.model == HTML_NAME[:100]
    stored = store.manifests(outcome.job.id)[None]
    assert stored.notes == "<script>alert(document.cookie)</script>"
    assert stored.contact == "<a href='javascript:alert(1)'>me</a>"


# --- property-based fuzzing --------------------------------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                max_size=4), max_leaves=12)
HOSTILE_TEXT = st.sampled_from(["<script>alert(1)</script>", "a\nb", "\x00", "\u202etxt.exe", "../../etc/passwd",
                                "x" * 300, "", "  ", "\ud800", "𝕏", "test[:1]", "null", "{}", "a\\b"])


def _paths(value, prefix=()):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield prefix + (key,)
            yield from _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield prefix + (index,)
            yield from _paths(inner, prefix + (index,))


def _set(value, path, new):
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def _read(raw: bytes) -> tuple[Manifest | None, Report]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "manifest.json").write_bytes(raw)
        report = Report()
        return read_manifest(Path(folder), report), report


def _assert_clean_outcome(raw: bytes) -> None:
    parsed, report = _read(raw)
    if parsed is None:
        assert report.errors and all(e.startswith("manifest.json: ") for e in report.errors)
        return
    assert report.errors == []
    # What the validator accepted is what the worker reads back from the stored file.
    assert Manifest.model_validate_json(raw) == parsed
    dumped = json.dumps(parsed.model_dump(mode="json"), ensure_ascii=False)
    dumped.encode("utf-8")  # storable and hashable as UTF-8 (no lone surrogates)
    lines = [parsed.model.name, parsed.model.id, parsed.license, parsed.contact, *parsed.culture_labels]
    assert not any(ch < " " or ch == "\x7f" for line in lines for ch in line), "control characters accepted"


@FUZZ
@given(st.binary(max_size=3000))
def test_manifest_reader_on_random_bytes(raw):
    _assert_clean_outcome(raw)


@FUZZ
@given(st.data())
def test_manifest_reader_on_mutated_manifests(data):
    value = manifest()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(value))))
        _set(value, path, data.draw(JSON | HOSTILE_TEXT))
    raw = json.dumps(value, ensure_ascii=data.draw(st.booleans())).encode("utf-8", "surrogatepass")
    _assert_clean_outcome(raw)


@FUZZ
@given(JSON)
def test_manifest_reader_on_random_json(value):
    _assert_clean_outcome(json.dumps(value).encode())


LAYOUT_NAMES = st.sampled_from(["manifest.json", "images/p1/0.png", "images/p1/1.jpg", "images/p2/0.webp",
                                "wrap/manifest.json", "wrap/images/p1/0.png", "images/", "images/p1/"])
HOSTILE_NAMES = st.sampled_from(["../x", "/etc/passwd", "a/../../b", "C:\\x", "images/../../x.png", "..", ".",
                                 "images/p1/0.png/", "images/p1/\x00.png", "\x00x", "\u2215etc\u2215passwd", "", "//x"])
MODES = st.sampled_from([None, stat.S_IFREG | 0o644, stat.S_IFLNK | 0o777, stat.S_IFDIR | 0o755,
                         stat.S_IFIFO | 0o644, stat.S_IFCHR | 0o600, stat.S_IFSOCK | 0o600, 0xFFFF])
COMPRESSION = st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
MEMBER = st.tuples(LAYOUT_NAMES | HOSTILE_NAMES | st.text(max_size=20), st.binary(max_size=200), MODES,
                   COMPRESSION)


@st.composite
def zip_bytes(draw) -> bytes:
    """A zip of random members (names, modes, compression), then maybe damaged (bytes flipped or cut)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, payload, mode, compress in draw(st.lists(MEMBER, max_size=6)):
            info = zipfile.ZipInfo(name)
            info.compress_type = compress
            if mode is not None:
                info.external_attr = mode << 16
            try:
                zf.writestr(info, payload)
            except (ValueError, UnicodeEncodeError):  # names zipfile itself refuses to write
                continue
    data = bytearray(buffer.getvalue())
    for _ in range(draw(st.integers(0, 4))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _unpack_in_a_box(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as box:
        box = Path(box)
        archive, dest = box / "upload.zip", box / "dest"
        archive.write_bytes(raw)
        dest.mkdir()
        try:
            entries = unpack(archive, dest, Limits(max_files=50, max_total_bytes=2**20))
        except Rejected as error:
            assert str(error)
            entries = None
        assert sorted(p.name for p in box.iterdir()) == ["dest", "upload.zip"]
        written = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if not p.is_dir()}
        for path in dest.rglob("*"):
            assert not path.is_symlink() and (path.is_dir() or path.is_file())
        if entries is not None:
            assert written == {e.path for e in entries}


@FUZZ
@given(st.binary(max_size=2000))
def test_archive_reader_on_random_bytes(raw):
    _unpack_in_a_box(raw)


@settings(FUZZ, max_examples=300)
@given(zip_bytes())
def test_archive_reader_on_random_zip_structures(raw):
    _unpack_in_a_box(raw)


IMAGE_BYTES = st.sampled_from([_png(), _jpeg(), _other_format("WEBP")])


@settings(FUZZ, max_examples=300)
@given(IMAGE_BYTES, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
       st.integers(0, 20_000))
def test_image_checker_on_damaged_images(original, flips, cut):
    data = bytearray(original)
    for position, value in flips:
        data[position % len(data)] = value
    ext = {b"\x89P": "png", b"\xff\xd8": "jpg", b"RI": "webp"}[bytes(original[:2])]
    with tempfile.TemporaryDirectory() as folder:
        entry = Entry(f"images/p/0.{ext}", "p", 0)
        (Path(folder) / "images" / "p").mkdir(parents=True)
        (Path(folder) / entry.path).write_bytes(bytes(data[:cut]))
        record, problem = check_image(Path(folder), entry, Limits())
    assert (record is None) != (problem is None)
    assert problem is None or problem.startswith(entry.path + ": ")


@settings(FUZZ, max_examples=40)
@given(st.data())
def test_damaged_uploads_through_the_store_change_nothing(populated, data):
    """The kept submission zipped again (so any intact variant is a duplicate), damaged at random, through
    ``Store.submit``: rejected with a reason, staging empty, the store unchanged."""
    store, _, _, source = populated
    with tempfile.TemporaryDirectory() as box:
        box = Path(box)
        archive = zip_folder(source, box / "up.zip")
        raw = bytearray(archive.read_bytes())
        for _ in range(data.draw(st.integers(1, 6))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        archive.write_bytes(bytes(raw))
        before = _snapshot(store.root)
        outcome = store.submit(archive, "fuzzer")
        assert outcome.job is None and outcome.report.errors
        assert list(store.staging.iterdir()) == []
        assert _snapshot(store.root) == before
        assert sorted(p.name for p in box.iterdir()) == ["up.zip"]


# --- and escaped wherever it is shown --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.browser
def test_html_in_a_model_name_is_shown_as_text_in_the_app(tmp_path, tiny_upstream):
    """Through the live app: the verdict, the details and the Queue tab (in Chromium) show the submitted HTML
    as text; no element it describes is created and its script never runs."""
    from gradio_client import Client, handle_file

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    name = HTML_NAME[:100]
    archive = zip_folder(make_submission(tmp_path / "html", prompt_ids, model_name=name, model={
        "name": "-", "id": "local/html", "revision": "7", "type": "open"}), tmp_path / "html.zip")
    with serving(store.root, tmp_path / "serve.log", "--no-worker", "--user", "mallory") as url:
        client = Client(url, verbose=False)
        verdict = client.predict(handle_file(str(archive)), api_name="/submit")
        assert "Accepted" in verdict and "<img" not in verdict and "&#60;img src&#61;x" in verdict, verdict
        job_id = re.search(r"Accepted: `([^`]+)`", verdict).group(1)
        details = client.predict(job_id, api_name="/details")[0]
        assert "<img" not in details and "&#60;img src&#61;x" in details, details
        with chromium() as browser:
            page = browser.new_page()
            page.goto(url + "?tab=queue")  # the view lives in the URL; a click could race the page's restore
            wait_for_text(page, '<img src=x onerror="', timeout=60_000)
            assert page.evaluate("window.__xss") is None
            assert page.locator('img[src="x"]').count() == 0
            assert page.locator("a[href='https://example.org']").count() == 0

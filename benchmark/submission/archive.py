"""Copy a submission (a folder or a ``.zip``) into a staging folder, safely.

Nothing from outside chooses a path on our disk: every entry name is checked
against the layout (``manifest.json`` and ``images/<prompt_id>/<seed>.<ext>``, or ``data/<name>.parquet`` for
an upload in Parquet form, which ``shards.expand`` unpacks next; optionally all inside one top-level folder) and written under a name we build
from its parsed parts. Zip members are checked before any byte is extracted
(absolute paths, ``..``, backslashes, symlinks and special files, encryption,
duplicates, file count, declared sizes, compression ratio of each member and of
the whole archive) and the limits are enforced again on the bytes actually
read, while streaming. The manifests are copied first and a caller's check of the
names, manifests and counts (``before``: ``validate.stage_with``) runs before any
other byte is: an upload whose layout is wrong is refused in time linear in its
entries, never after unpacking it. A damaged archive is a rejection with its reason, whatever
the layer that notices it (zip structure, name encoding, decompressor). Every check
on the archive's metadata is linear in its number of entries.

Reading the upload is the uploader's business; writing the staged copy is ours: a
failure to write (a full disk, an I/O error) is a ``ServerFault``, never a rejection.
"""

from __future__ import annotations

import lzma
import os
import re
import stat
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmark.errors import CultureLensError
from benchmark.layout import DATA_DIR, IMAGES_DIR, MANIFEST, PARTS_DIR, part_folder
from benchmark.submission.manifest import PART_NAME, PROMPT_ID

IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "webp")
_IMAGE_NAME = re.compile(r"(0|[1-9][0-9]{0,9})\.(png|jpg|jpeg|webp)")
_PARQUET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\.parquet")  # no "..", no hidden file
_CHUNK = 1 << 20
_RATIO_FLOOR = 1 << 20  # below this many uncompressed bytes the compression ratio is not checked
# What a damaged archive raises, from zipfile itself or the decompressors under it (``UnicodeDecodeError``
# for a name flagged UTF-8 that is not, ``zlib.error`` for a corrupt deflate stream, ...).
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError, ValueError,
            struct.error, zlib.error, lzma.LZMAError)


@dataclass(frozen=True)
class Limits:
    """Bounds on what a submission may hold; all enforced before or while reading. The byte limits are a whole
    suite submission's (``benchmark.suite``: 19,773 images, all parts in one upload), the validation time is each
    part's (a part is checked as a submission is)."""

    # The zip itself, and what it unpacks to: the suite v1's 19,773 images of 1024 px PNG at 2.5-3 MB are 46-55 GiB
    # (PNG does not compress further in a zip).
    max_upload_bytes: int = 64 * 2**30
    max_files: int = 200_000
    max_total_bytes: int = 64 * 2**30
    max_file_bytes: int = 64 * 2**20
    max_manifest_bytes: int = 2**20
    max_compression_ratio: float = 100.0  # uncompressed / compressed, of a member and of the archive, over 1 MiB
    max_pixels: int = 4096 * 4096
    min_side: int = 64
    # Per part: decoding its images, CUBE-1K's 9,920 of 1024 px PNG at 20-60 ms each, takes 3-10 min.
    max_validation_seconds: float = 1800


class Rejected(CultureLensError, ValueError):
    """The submission breaks the format or a limit; the message names the entry and the reason."""


class ServerFault(CultureLensError, OSError):
    """The server could not store an upload (full disk, I/O error): not the uploader's fault. The message
    says why without naming any server path."""

    def __init__(self, error: OSError):
        why = os.strerror(error.errno) if error.errno else type(error).__name__  # never the error's text: it has paths
        super().__init__(f"the server could not store the upload ({why}); this is not a problem with the submission: "
                         "try again later")


@contextmanager
def storing() -> Iterator[None]:
    """Turn an OSError raised while writing to our own disk into a ServerFault."""
    try:
        yield
    except OSError as error:
        raise ServerFault(error) from None


@dataclass(frozen=True)
class Entry:
    """A file of the submission, by its canonical relative path."""

    path: str  # "manifest.json", "images/<prompt_id>/<seed>.<ext>" or "data/<name>.parquet", or one of them
    prompt_id: str | None = None  # under "parts/<part>/" in a suite submission
    seed: int | None = None
    part: str | None = None

    @property
    def local(self) -> Entry:
        """The entry as its part's own submission folder names it (itself outside a suite submission)."""
        if self.part is None:
            return self
        return Entry(self.path[len(part_folder(self.part)) + 1:], self.prompt_id, self.seed)


def parse_name(name: str) -> Entry | None:
    """Canonical entry for a relative POSIX name, or None if it is not part of the layout."""
    top, _, rest = name.partition("/")
    if top == PARTS_DIR:
        part, _, inner = rest.partition("/")
        entry = parse_name(inner) if PART_NAME.fullmatch(part) and not inner.startswith(f"{PARTS_DIR}/") else None
        return Entry(name, entry.prompt_id, entry.seed, part) if entry else None
    if name == MANIFEST:
        return Entry(MANIFEST)
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == IMAGES_DIR and PROMPT_ID.fullmatch(parts[1]) and ".." not in parts[1]:
        match = _IMAGE_NAME.fullmatch(parts[2])
        if match:
            return Entry(name, prompt_id=parts[1], seed=int(match.group(1)))
    if len(parts) == 2 and parts[0] == DATA_DIR and _PARQUET_NAME.fullmatch(parts[1]):
        return Entry(name)
    return None


def _unsafe_reason(name: str) -> str | None:
    if not name:
        return "empty name"  # zipfile cuts names at NUL, so b"\0x" arrives as ""
    if "\\" in name:
        return "backslash in path"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "absolute path"
    if ".." in PurePosixPath(name).parts:
        return "'..' in path"
    if "\x00" in name:
        return "NUL byte in name"
    return None


def strip_wrapper(names: list[str]) -> str:
    """The single top-level folder all entries sit in (e.g. zipping a folder), or ''."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names) and not tops & {IMAGES_DIR, DATA_DIR, PARTS_DIR}:
        return tops.pop() + "/"
    return ""


def write_entry(dest: Path, entry: Entry, chunks: Iterator[bytes], limit: int, budget: list[int], origin: str) -> None:
    """Copy ``chunks`` (read from the upload: its errors pass through) to ``dest/entry.path`` (our disk: its
    errors are a ServerFault), within the file's ``limit`` and the submission's remaining ``budget``."""
    target = dest / entry.path
    with storing():
        target.parent.mkdir(parents=True, exist_ok=True)
        out = open(target, "xb")  # "x": never overwrite, never follow a planted link
    try:
        written = 0
        for chunk in chunks:
            written += len(chunk)
            budget[0] -= len(chunk)
            if written > limit:
                raise Rejected(f"{origin}: larger than the {limit // 2**20} MiB limit for this file")
            if budget[0] < 0:
                raise Rejected(f"{origin}: the submission exceeds its total size limit")
            with storing():
                out.write(chunk)
    finally:
        with storing():
            out.close()


def _limit_for(entry: Entry, limits: Limits) -> int:
    if entry.local.path == MANIFEST:
        return limits.max_manifest_bytes
    return limits.max_file_bytes if entry.prompt_id is not None else limits.max_total_bytes  # a Parquet file


Before = Callable[[list[Entry]], None]
"""A check of an upload's entries, run once its manifests are copied and before any other file is (it refuses by
raising)."""


def _manifests_first(plan: list[tuple[object, Entry]]) -> tuple[list, list]:
    first = [(source, entry) for source, entry in plan if entry.local.path == MANIFEST]
    return first, [(source, entry) for source, entry in plan if entry.local.path != MANIFEST]


def unpack_zip(archive: Path, dest: Path, limits: Limits = Limits(), before: Before | None = None) -> list[Entry]:
    """Check every member of ``archive`` and copy the layout's files into ``dest`` (empty): its manifests first,
    then ``before`` is called with the entries, then the other files are copied."""
    try:
        zf = zipfile.ZipFile(archive)
    except _DAMAGED as error:
        raise Rejected(f"{archive.name}: not a readable zip archive ({type(error).__name__}: "
                       f"{str(error).replace(str(archive), archive.name)})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_files:
            raise Rejected(f"{archive.name}: {len(infos)} entries, more than the limit of {limits.max_files}")
        names = [i.filename for i in infos]
        for info in infos:
            reason = _unsafe_reason(info.filename)
            if reason:
                raise Rejected(f"{info.filename!r}: {reason}")
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind == stat.S_IFLNK:
                raise Rejected(f"{info.filename!r}: symbolic links are not allowed")
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise Rejected(f"{info.filename!r}: special files are not allowed")
            if info.flag_bits & 0x1:
                raise Rejected(f"{info.filename!r}: encrypted entries are not allowed")
        twice = sorted(name for name, count in Counter(names).items() if count > 1)
        if twice:
            raise Rejected(f"{twice[0]!r}: appears more than once in the archive")
        declared = sum(i.file_size for i in infos)
        if declared > limits.max_total_bytes:
            raise Rejected(f"{archive.name}: {declared / 2**30:.1f} GiB uncompressed, over the "
                           f"{limits.max_total_bytes / 2**30:.0f} GiB limit")
        files = [i for i in infos if not i.is_dir()]
        wrapper = strip_wrapper([i.filename for i in files])
        plan: list[tuple[zipfile.ZipInfo, Entry]] = []
        for info in files:
            entry = parse_name(info.filename[len(wrapper):])
            if entry is None:
                raise Rejected(_unexpected(info.filename))
            if info.file_size > _limit_for(entry, limits):
                raise Rejected(f"{info.filename!r}: {info.file_size} bytes, over the "
                               f"{_limit_for(entry, limits)} byte limit for this file")
            if info.file_size > _RATIO_FLOOR and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
                raise Rejected(f"{info.filename!r}: compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 "
                               f"exceeds {limits.max_compression_ratio:.0f}:1 (zip bomb?)")
            plan.append((info, entry))
        packed = max(archive.stat().st_size, 1)  # images are already compressed: a real submission is near 1:1
        if declared > _RATIO_FLOOR and declared > limits.max_compression_ratio * packed:
            raise Rejected(f"{archive.name}: compression ratio {declared / packed:.0f}:1 over the whole archive "
                           f"({len(infos)} entries) exceeds {limits.max_compression_ratio:.0f}:1 (zip bomb?)")
        budget = [limits.max_total_bytes]
        manifests, others = _manifests_first(plan)
        for batch in (manifests, others):
            if batch is others and before is not None:
                before([entry for _, entry in plan])
            for info, entry in batch:
                try:
                    with zf.open(info) as member:
                        write_entry(dest, entry, iter(lambda: member.read(_CHUNK), b""), _limit_for(entry, limits),
                                    budget, repr(info.filename))
                except ServerFault:
                    raise
                except _DAMAGED as error:
                    raise Rejected(f"{info.filename!r}: cannot be extracted ({type(error).__name__}: {error})") \
                        from None
    return [entry for _, entry in plan]


def copy_folder(folder: Path, dest: Path, limits: Limits = Limits(), before: Before | None = None) -> list[Entry]:
    """Check every entry of ``folder`` (no links, no special files) and copy the layout's files into ``dest``: its
    manifests first, then ``before`` is called with the entries, then the other files are copied."""
    plan: list[tuple[Path, Entry]] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise Rejected(f"{rel!r}: symbolic links are not allowed")
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise Rejected(f"{rel!r}: special files are not allowed")
            entry = parse_name(rel)
            if entry is None:
                raise Rejected(_unexpected(rel))
            plan.append((path, entry))
            if len(plan) > limits.max_files:
                raise Rejected(f"{folder.name}: more than the limit of {limits.max_files} files")
    budget = [limits.max_total_bytes]
    manifests, others = _manifests_first(plan)
    for batch in (manifests, others):
        if batch is others and before is not None:
            before([entry for _, entry in plan])
        for path, entry in batch:
            with open(path, "rb") as source:
                write_entry(dest, entry, iter(lambda: source.read(_CHUNK), b""), _limit_for(entry, limits), budget,
                            repr(entry.path))
    return [entry for _, entry in plan]


def _unexpected(name: str) -> str:
    return (f"{name!r}: unexpected file; a submission holds only manifest.json and "
            f"images/<prompt_id>/<seed>.<{'|'.join(IMAGE_EXTENSIONS)}> (or, in Parquet form, data/<name>.parquet), "
            f"or, a suite submission, the same under {PARTS_DIR}/<part>/ for each part")


def unpack(source: Path, dest: Path, limits: Limits = Limits(), before: Before | None = None) -> list[Entry]:
    """Copy a submission folder or ``.zip`` into the empty folder ``dest``; raise Rejected if unsafe. ``before``:
    a check run once the manifests are copied, before any other file is."""
    source = Path(source)
    if source.is_symlink():
        raise Rejected(f"{source.name}: a submission path must not be a symbolic link")
    if source.is_dir():
        return copy_folder(source, dest, limits, before)
    if source.is_file():
        size = source.stat().st_size
        if size > limits.max_upload_bytes:
            raise Rejected(f"{source.name}: {size:,} bytes, over the upload limit of {limits.max_upload_bytes:,} "
                           f"bytes ({limits.max_upload_bytes / 2**30:g} GiB)")
        return unpack_zip(source, dest, limits, before)
    raise Rejected(f"{source.name}: no such file or folder")

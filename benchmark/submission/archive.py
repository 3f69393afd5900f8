"""Copy a submission (a folder or a ``.zip``) into a staging folder, safely.

Nothing from outside chooses a path on our disk: every entry name is checked against the layout (``manifest.json``
and ``images/<prompt_id>/<seed>.<ext>``, or ``data/<name>.parquet`` for an upload in Parquet form, which
``shards.expand`` unpacks next; a suite submission the same under ``parts/<part>/``; optionally all inside one
top-level folder) and written under a name we build from its parsed parts.

``listed`` lists an upload and checks it before any byte of it is written: a zip's end record and central directory
first, before ``zipfile`` parses them (``zip_directory``: the declared count, the directory's size, each record's
lengths), then every member (absolute paths, ``..``, backslashes, symlinks and special files, encryption, duplicates,
declared sizes, compression ratio of each member and of the whole archive). ``Listing.copy`` copies the members a
caller picks, never more bytes in all than the listing declares, the limits enforced again on the bytes actually
read: ``validate.stage_with`` checks the names, copies the manifests alone and checks them, then copies the rest, so
an upload whose layout is wrong is refused in time linear in its entries, never after unpacking it. A damaged archive
is a rejection with its reason, whatever the layer that notices it (zip structure, name encoding, decompressor).

Reading the upload is the uploader's business; writing the staged copy is ours: a
failure to write (a full disk, an I/O error) is a ``ServerFault``, never a rejection.
"""

from __future__ import annotations

import functools
import lzma
import os
import re
import stat
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from benchmark.errors import CultureLensError
from benchmark.layout import DATA_DIR, IMAGES_DIR, MANIFEST, PARTS_DIR, part_folder
from benchmark.submission.zip_directory import refusal as directory_refusal
from benchmark.submission.manifest import PART_NAME, PROMPT_ID

IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "webp")
_IMAGE_NAME = re.compile(r"(0|[1-9][0-9]{0,9})\.(png|jpg|jpeg|webp)")
_PARQUET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\.parquet")  # no "..", no hidden file
_CHUNK = 1 << 20
RATIO_FLOOR = 1 << 20  # below this many uncompressed bytes the compression ratio is not checked
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
    # What the uploads in flight on one server hold together (``space``): the files its upload route received (kept an
    # hour) and every upload staged for validation. The default takes one largest upload: its zip and, staged, its
    # copy and the shards it is kept in.
    max_in_flight_bytes: int = 192 * 2**30
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


class Budget:
    """Bytes a staged copy may still take (what its source declares: a zip's directory, a folder's files as listed),
    spent as bytes are written; ``over`` ends the refusal's sentence. ``hold``: a ``space.Hold`` grown by what is
    spent (None: the caller held the bytes beforehand, or there is no shared space)."""

    def __init__(self, size: int, over: str, hold=None):
        self.left, self.over, self.hold = size, over, hold

    def spend(self, size: int, origin: str) -> None:
        self.left -= size
        if self.left < 0:
            raise Rejected(f"{origin}: {self.over}")
        if self.hold is not None:
            self.hold.grow(size)


def write_entry(dest: Path, entry: Entry, chunks: Iterator[bytes], limit: int, budget: Budget, origin: str) -> None:
    """Copy ``chunks`` (read from the upload: its errors pass through) to ``dest/entry.path`` (our disk: its
    errors are a ServerFault), within the file's ``limit`` and the upload's remaining ``budget``."""
    target = dest / entry.path
    with storing():
        target.parent.mkdir(parents=True, exist_ok=True)
        out = open(target, "xb")  # "x": never overwrite, never follow a planted link
    try:
        written = 0
        for chunk in chunks:
            written += len(chunk)
            if written > limit:
                raise Rejected(f"{origin}: larger than the {limit // 2**20} MiB limit for this file")
            budget.spend(len(chunk), origin)
            with storing():
                out.write(chunk)
    finally:
        with storing():
            out.close()


def _limit_for(entry: Entry, limits: Limits) -> int:
    if entry.local.path == MANIFEST:
        return limits.max_manifest_bytes
    return limits.max_file_bytes if entry.prompt_id is not None else limits.max_total_bytes  # a Parquet file


@dataclass(frozen=True)
class Member:
    """A file of an upload as its directory lists it: its entry, its size (as the zip's directory declares it, or
    as the folder's file is) and how its bytes are read."""

    entry: Entry
    size: int
    origin: str  # the name as the upload holds it, quoted: how a refusal names it
    read: Callable[[], AbstractContextManager[BinaryIO]]


class Listing:
    """An upload's files, listed and checked from its directory before any byte of them is copied (``listed``):
    names in the layout, no link, special file, encryption or repeated name, counts, declared sizes and compression
    ratios within the limits. ``copy`` copies some of them into a staging folder; everything it copies, over all its
    calls, stays within what the listing declares (``declared``)."""

    def __init__(self, members: list[Member], over: str, damaged: tuple[type[BaseException], ...] = ()):
        """``over``: what a refusal says when the copy outgrows the declared bytes; ``damaged``: what reading a
        member raises when the upload is damaged (a rejection, not our fault)."""
        self.members, self.damaged = members, damaged
        self.budget = Budget(self.declared, over)

    @property
    def entries(self) -> list[Entry]:
        return [member.entry for member in self.members]

    @property
    def declared(self) -> int:
        """Bytes of the files listed: what their staged copy may take."""
        return sum(member.size for member in self.members)

    def copy(self, dest: Path, members: list[Member], limits: Limits) -> None:
        """Copy ``members`` (some of this listing's) into ``dest``."""
        for member in members:
            try:
                with member.read() as source:
                    write_entry(dest, member.entry, iter(lambda: source.read(_CHUNK), b""),
                                _limit_for(member.entry, limits), self.budget, member.origin)
            except (ServerFault, Rejected):
                raise
            except self.damaged as error:
                raise Rejected(f"{member.origin}: cannot be extracted ({type(error).__name__}: {error})") from None


def is_manifest(member: Member) -> bool:
    """Whether ``member`` is a manifest (of the submission, or of a part of a suite submission)."""
    return member.entry.local.path == MANIFEST


@contextmanager
def _zip_listing(archive: Path, limits: Limits) -> Iterator[Listing]:
    """The listing of a zip archive, open while the context lasts: its end record and directory checked first
    (``zip_directory.refusal``), then every member's metadata."""
    with open(archive, "rb") as raw:
        if reason := directory_refusal(raw, archive.name, limits.max_files):
            raise Rejected(reason)
        try:
            zf = zipfile.ZipFile(raw)
        except _DAMAGED as error:
            raise Rejected(f"{archive.name}: not a readable zip archive ({type(error).__name__}: "
                           f"{str(error).replace(str(archive), archive.name)})") from None
        with zf:
            yield Listing(_zip_members(zf, archive, limits), "more bytes than the archive's directory declares",
                          _DAMAGED)


def _zip_members(zf: zipfile.ZipFile, archive: Path, limits: Limits) -> list[Member]:
    infos = zf.infolist()
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
    members = []
    for info in files:
        entry = parse_name(info.filename[len(wrapper):])
        if entry is None:
            raise Rejected(_unexpected(info.filename))
        if info.file_size > _limit_for(entry, limits):
            raise Rejected(f"{info.filename!r}: {info.file_size} bytes, over the "
                           f"{_limit_for(entry, limits)} byte limit for this file")
        if info.file_size > RATIO_FLOOR and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
            raise Rejected(f"{info.filename!r}: compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 "
                           f"exceeds {limits.max_compression_ratio:.0f}:1 (zip bomb?)")
        members.append(Member(entry, info.file_size, repr(info.filename), functools.partial(zf.open, info)))
    packed = max(archive.stat().st_size, 1)  # images are already compressed: a real submission is near 1:1
    if declared > RATIO_FLOOR and declared > limits.max_compression_ratio * packed:
        raise Rejected(f"{archive.name}: compression ratio {declared / packed:.0f}:1 over the whole archive "
                       f"({len(infos)} entries) exceeds {limits.max_compression_ratio:.0f}:1 (zip bomb?)")
    return members


def _folder_listing(folder: Path, limits: Limits) -> Listing:
    """The listing of a folder: no link, no special file, every file in the layout, within the limits."""
    members: list[Member] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                raise Rejected(f"{rel!r}: symbolic links are not allowed")
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise Rejected(f"{rel!r}: special files are not allowed")
            entry = parse_name(rel)
            if entry is None:
                raise Rejected(_unexpected(rel))
            if info.st_size > _limit_for(entry, limits):
                raise Rejected(f"{rel!r}: {info.st_size} bytes, over the {_limit_for(entry, limits)} byte limit for "
                               "this file")
            members.append(Member(entry, info.st_size, repr(entry.path), functools.partial(open, path, "rb")))
            if len(members) > limits.max_files:
                raise Rejected(f"{folder.name}: more than the limit of {limits.max_files} files")
    listing = Listing(members, "more bytes than the folder's files held when it was listed (a file grew meanwhile)")
    if listing.declared > limits.max_total_bytes:
        raise Rejected(f"{folder.name}: {listing.declared / 2**30:.1f} GiB, over the "
                       f"{limits.max_total_bytes / 2**30:.0f} GiB limit")
    return listing


def _unexpected(name: str) -> str:
    return (f"{name!r}: unexpected file; a submission holds only manifest.json and "
            f"images/<prompt_id>/<seed>.<{'|'.join(IMAGE_EXTENSIONS)}> (or, in Parquet form, data/<name>.parquet), "
            f"or, a suite submission, the same under {PARTS_DIR}/<part>/ for each part")


@contextmanager
def listed(source: Path, limits: Limits = Limits()) -> Iterator[Listing]:
    """The listing of a submission folder or ``.zip`` (a zip stays open while the context lasts); Rejected if it is
    unsafe or over the limits. Nothing is written."""
    source = Path(source)
    if source.is_symlink():
        raise Rejected(f"{source.name}: a submission path must not be a symbolic link")
    if source.is_dir():
        yield _folder_listing(source, limits)
    elif source.is_file():
        size = source.stat().st_size
        if size > limits.max_upload_bytes:
            raise Rejected(f"{source.name}: {size:,} bytes, over the upload limit of {limits.max_upload_bytes:,} "
                           f"bytes ({limits.max_upload_bytes / 2**30:g} GiB)")
        with _zip_listing(source, limits) as listing:
            yield listing
    else:
        raise Rejected(f"{source.name}: no such file or folder")


def unpack(source: Path, dest: Path, limits: Limits = Limits()) -> list[Entry]:
    """Copy a submission folder or ``.zip`` into the empty folder ``dest``; raise Rejected if unsafe."""
    with listed(source, limits) as listing:
        listing.copy(dest, listing.members, limits)
        return listing.entries

"""A zip's end record and central directory, checked before ``zipfile`` parses them.

``zipfile.ZipFile`` reads the whole central directory into memory and makes an object of every record in it before
any count can be looked at: a 103 MB upload of 2,000,000 entries cost 10.6 CPU-s and +800 MiB before it was refused
for its number of entries, and records carrying 64 KB extra fields of 4-byte items cost ~0.22 CPU-s per MB (issue
48). ``refusal`` looks first, in the order the bytes allow:

1. the end record, found as ``zipfile`` finds it (``zipfile._EndRecData``, so that what is checked is what it then
   parses): the number of entries it declares (within ``Limits.max_files``) and the size of the directory (at most
   ``MEAN_RECORD_BYTES`` an entry on average, ``FLOOR_BYTES`` for a small archive: real records are 50-300 bytes);
2. the directory itself, read in chunks and kept nowhere: every record's signature, its name, extra field and comment
   within their bounds, its extra field of at most ``MAX_EXTRA_ITEMS`` items, and the number of records, which must be
   the declared one.

All of it costs at most a read of the directory (itself bounded by the declared count), so ``zipfile``'s parse after
it is bounded by ``max_files`` records of bounded size, whatever the file claims.
"""

from __future__ import annotations

import struct
import zipfile
from typing import BinaryIO

MAX_NAME_BYTES = 512  # the layout's longest name: ~230 bytes (parts/<part>/images/<prompt_id>/<seed>.jpeg), a folder
MAX_EXTRA_BYTES = 1024  # zip writers put 0-100 bytes (timestamps, Unix ids, ZIP64 sizes; a Unicode name once more)
MAX_EXTRA_ITEMS = 16  # ... in 1-4 items
MAX_COMMENT_BYTES = 1024  # no writer puts a comment on an entry unless asked
MEAN_RECORD_BYTES = 512  # the directory's size over its entries: 46 bytes of fields, a name, an extra field
FLOOR_BYTES = 2**20  # a directory this small is never refused for its size alone

_RECORD = struct.Struct("<4s24xHHH12x")  # signature, ..., name, extra and comment lengths, ...: 46 bytes
_SIGNATURE = b"PK\x01\x02"
_LARGEST = _RECORD.size + MAX_NAME_BYTES + MAX_EXTRA_BYTES + MAX_COMMENT_BYTES
_CHUNK = 2**20


def refusal(fp: BinaryIO, name: str, max_files: int) -> str | None:
    """Why the zip archive open as ``fp`` (called ``name`` in the sentence) is refused before ``zipfile`` parses its
    directory, or None. None too for a file that has no end record ``zipfile`` can find (it refuses it at once,
    reading nothing more)."""
    try:
        end = zipfile._EndRecData(fp)  # noqa: SLF001 - the record zipfile itself will use, found the same way
    except (OSError, ValueError, struct.error, zipfile.BadZipFile) as error:
        return f"{name}: not a readable zip archive ({type(error).__name__}: {error})"
    if not end:
        return None
    declared = max(end[zipfile._ECD_ENTRIES_THIS_DISK], end[zipfile._ECD_ENTRIES_TOTAL])  # noqa: SLF001
    size = end[zipfile._ECD_SIZE]  # noqa: SLF001
    if declared > max_files:
        return (f"{name}: {declared:,} entries (as its end record declares), more than the limit of {max_files:,}; "
                "refused before its directory was read")
    if size > max(FLOOR_BYTES, declared * MEAN_RECORD_BYTES):
        return (f"{name}: a central directory of {size:,} bytes for the {declared:,} entries its end record declares: "
                f"more than {MEAN_RECORD_BYTES} bytes an entry (zip writers use 50-300); refused before it was read")
    # Where zipfile reads the directory: right before the end record (and the ZIP64 end record and its locator).
    start = end[zipfile._ECD_LOCATION] - size  # noqa: SLF001
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # noqa: SLF001
        start -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
    if start < 0:
        return None  # zipfile refuses it ("Bad offset for central directory") before reading any record
    return _walk(fp, start, size, declared, name)


def _walk(fp: BinaryIO, start: int, size: int, declared: int, name: str) -> str | None:
    """Why the directory's records (``size`` bytes at ``start``) are refused, or None: read in chunks, each record's
    lengths checked (and its extra field's items, when it is long enough to hold more than ``MAX_EXTRA_ITEMS``),
    their number compared with ``declared``."""
    fp.seek(start)
    unpack, left, buffer, at, count = _RECORD.unpack_from, size, b"", 0, 0
    while True:
        if left:
            chunk = fp.read(min(_CHUNK, left))
            if not chunk:
                return f"{name}: not a readable zip archive (its central directory is cut short)"
            left -= len(chunk)
            buffer, at = buffer[at:] + chunk, 0
        stop = len(buffer) - _LARGEST if left else len(buffer)  # records sure to lie whole in the buffer
        while at < stop:
            count += 1
            if len(buffer) - at < _RECORD.size:
                return f"{name}: not a readable zip archive (entry {count:,} of its central directory is cut short)"
            signature, name_bytes, extra_bytes, comment_bytes = unpack(buffer, at)
            if (signature != _SIGNATURE or count > declared or name_bytes > MAX_NAME_BYTES
                    or extra_bytes > MAX_EXTRA_BYTES or comment_bytes > MAX_COMMENT_BYTES):
                return _record_refusal(name, count, declared, signature, name_bytes, extra_bytes, comment_bytes)
            at += _RECORD.size + name_bytes + extra_bytes + comment_bytes
            if extra_bytes > 4 * MAX_EXTRA_ITEMS and _items(buffer, at - comment_bytes - extra_bytes,
                                                            at - comment_bytes) > MAX_EXTRA_ITEMS:
                return (f"{name}: entry {count:,} of its central directory has more than {MAX_EXTRA_ITEMS} items in "
                        "its extra field")
        if at > len(buffer):
            return f"{name}: not a readable zip archive (entry {count:,} of its central directory is cut short)"
        if not left:
            break
    if count != declared:
        return (f"{name}: its end record declares {declared:,} entries but its central directory holds {count:,} "
                "(a damaged or forged archive)")
    return None


def _items(buffer: bytes, item: int, end: int) -> int:
    """The number of items of the extra field ``buffer[item:end]``, counted up to one more than ``MAX_EXTRA_ITEMS``."""
    items = 0
    while end - item >= 4 and items <= MAX_EXTRA_ITEMS:
        items += 1
        item += 4 + int.from_bytes(buffer[item + 2:item + 4], "little")
    return items


def _record_refusal(name: str, count: int, declared: int, signature: bytes, name_bytes: int, extra_bytes: int,
                    comment_bytes: int) -> str:
    """The sentence for the ``count``-th record, refused for its signature, its number or one of its lengths."""
    where = f"{name}: entry {count:,} of its central directory"
    if signature != _SIGNATURE:
        return f"{where} is damaged (no record signature): not a readable zip archive"
    if count > declared:
        return (f"{name}: its central directory holds more than the {declared:,} entries its end record declares "
                "(a damaged or forged archive)")
    if name_bytes > MAX_NAME_BYTES:
        return f"{where} has a name of {name_bytes:,} bytes, more than {MAX_NAME_BYTES:,}"
    if extra_bytes > MAX_EXTRA_BYTES:
        return f"{where} has an extra field of {extra_bytes:,} bytes, more than {MAX_EXTRA_BYTES:,}"
    return f"{where} has a comment of {comment_bytes:,} bytes, more than {MAX_COMMENT_BYTES:,}"

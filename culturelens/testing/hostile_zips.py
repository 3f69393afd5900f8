"""Hostile zip archives from issue 48, as an attacker builds them, for the tests and ``benchmarks/upload_scale.py``:
millions of directory entries in ~100 MB, an end record that lies about them, entries whose extra fields are 64 KB of
4-byte items, and a thousand part manifests of 1 MiB each in ~11 MiB. Each is a zip ``zipfile`` reads as such (the
code before the issue parsed and unpacked them), written with numpy or ``zipfile`` in seconds."""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

_LOCAL = struct.Struct("<4s5H3L2H")  # a local file header: 30 bytes
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")  # 56 bytes
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes
_END = struct.Struct("<4s4H2LH")  # 22 bytes
_DOS_DATE = 0x21  # 1980-01-01
_CENTRAL = np.dtype([("signature", "S4"), ("made_by", "<u2"), ("needs", "<u2"), ("flags", "<u2"), ("method", "<u2"),
                     ("time", "<u2"), ("date", "<u2"), ("crc", "<u4"), ("packed", "<u4"), ("size", "<u4"),
                     ("name_length", "<u2"), ("extra_length", "<u2"), ("comment_length", "<u2"), ("disk", "<u2"),
                     ("internal", "<u2"), ("external", "<u4"), ("offset", "<u4")])  # 46 bytes, then the name


def directory_only_zip(archive: Path, entries: int, declared: int | None = None) -> Path:
    """The cheapest zip of ``entries`` entries: one empty stored file, ``0000000``, and ``entries`` central directory
    records (named ``0000000``, ``0000001``, ...) all pointing at its header, with the ZIP64 end records a count over
    65,535 needs: 2,000,000 entries are ~106 MB. ``declared``: the count the end records state, if not ``entries``
    (a lying end record)."""
    width = 7
    numbers = np.arange(entries, dtype=np.int64)
    names = np.stack([(numbers // 10**k) % 10 + ord("0") for k in range(width - 1, -1, -1)], axis=1).astype(np.uint8)
    records = np.zeros(entries, _CENTRAL)
    records["signature"], records["made_by"], records["needs"], records["date"] = b"PK\x01\x02", 20, 20, _DOS_DATE
    records["name_length"] = width
    directory = np.concatenate([records.view(np.uint8).reshape(entries, _CENTRAL.itemsize), names], axis=1)
    local = _LOCAL.pack(b"PK\x03\x04", 20, 0, 0, 0, _DOS_DATE, 0, 0, 0, width, 0) + b"0" * width
    count = entries if declared is None else declared
    size, start = directory.size, len(local)
    with open(archive, "wb") as out:
        out.write(local)
        out.write(directory.tobytes())
        out.write(_ZIP64_END.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, start))
        out.write(_ZIP64_LOCATOR.pack(b"PK\x06\x07", 0, start + size, 1))
        out.write(_END.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, size, start, 0))
    return archive


def extra_fields_zip(archive: Path, entries: int, extra_bytes: int = 65_532, heavy: int | None = None) -> Path:
    """A zip of ``entries`` empty stored files, the last ``heavy`` of them (all by default) with ``extra_bytes`` of
    extra field made of 4-byte items (an id and a length of 0): 16,383 items an entry at the default, each one
    ``zipfile`` decodes."""
    extra = struct.pack("<HH", 0xCAFE, 0) * (extra_bytes // 4)
    first_heavy = 0 if heavy is None else entries - heavy
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for i in range(entries):
            info = zipfile.ZipInfo(f"images/p0/{i}.png")
            info.extra = extra if i >= first_heavy else b""
            zf.writestr(info, b"")
    return archive


def part_manifests_zip(archive: Path, parts: int = 1000, manifest_bytes: int = 2**20) -> Path:
    """``parts`` part manifests (``parts/p<i>/manifest.json``, parts no suite has) of ``manifest_bytes`` each, deflated
    ~94:1, under the 100:1 compression ratio refused as a zip bomb (of an entry, and of the archive): 1,000 of 1 MiB
    are ~11 MiB. Each is a JSON object whose ``notes`` repeat a random text of 1,600 letters and digits, one letter
    in 1,000 changed at random; it is deflated once and written ``parts`` times."""
    rng = np.random.default_rng(48)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
    head, tail = b'{"notes": "', b'"}'
    size = manifest_bytes - len(head) - len(tail)
    notes = np.resize(letters[rng.integers(0, len(letters), 1600)], size)
    changed = np.arange(0, size, 1000)
    notes[changed] = letters[rng.integers(0, len(letters), len(changed))]
    text = head + notes.tobytes() + tail
    assert len(text) == manifest_bytes and json.loads(text)
    deflate = zlib.compressobj(1, zlib.DEFLATED, -15)
    packed = deflate.compress(text) + deflate.flush()
    crc = zlib.crc32(text)
    directory = []
    with open(archive, "wb") as out:
        for i in range(parts):
            name = f"parts/p{i}/manifest.json".encode()
            offset = out.tell()
            out.write(_LOCAL.pack(b"PK\x03\x04", 20, 0, zipfile.ZIP_DEFLATED, 0, _DOS_DATE, crc, len(packed), len(text),
                                  len(name), 0) + name + packed)
            record = np.zeros(1, _CENTRAL)
            record[["signature", "made_by", "needs", "method", "date", "crc", "packed", "size", "name_length",
                    "offset"]] = (b"PK\x01\x02", 20, 20, zipfile.ZIP_DEFLATED, _DOS_DATE, crc, len(packed), len(text),
                                  len(name), offset)
            directory.append(record.tobytes() + name)
        start = out.tell()
        out.write(b"".join(directory))
        out.write(_END.pack(b"PK\x05\x06", 0, 0, parts, parts, out.tell() - start, start, 0))
    return archive

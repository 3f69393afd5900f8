"""The scoring decoder of plain PNGs (``benchmark.images``): image data inflated by ISA-L, rows unfiltered by
libspng. Its pixels must be the ones Pillow shows for every filter a PNG encoder may choose, however the image data
is split into chunks; anything it cannot read whole goes the way it went before."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from benchmark.images import _with_stored_image_data, decode_pixels, open_as_viewed

pytest.importorskip("isal")
pytest.importorskip("pyspng")


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _paeth(left: np.ndarray, up: np.ndarray, up_left: np.ndarray) -> np.ndarray:
    """PNG's Paeth predictor (PNG specification, 9.4), elementwise."""
    p = left + up - up_left
    pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - up_left)
    return np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, up_left))


def _filtered_rows(pixels: np.ndarray, filters: list[int]) -> bytes:
    """``pixels`` (H, W, 3) as PNG scanlines, row y filtered with ``filters[y]`` (0 None, 1 Sub, 2 Up, 3 Average,
    4 Paeth; PNG specification, 9.2): an encoder written here from the specification, not the decoder's code."""
    x = pixels.astype(np.int64).reshape(pixels.shape[0], -1)
    out = []
    for y, kind in enumerate(filters):
        row = x[y]
        left = np.concatenate([np.zeros(3, np.int64), row[:-3]])
        up = x[y - 1] if y else np.zeros_like(row)
        up_left = np.concatenate([np.zeros(3, np.int64), up[:-3]])
        predicted = [np.zeros_like(row), left, up, (left + up) // 2, _paeth(left, up, up_left)][kind]
        out.append(bytes([kind]) + ((row - predicted) % 256).astype(np.uint8).tobytes())
    return b"".join(out)


def _png(pixels: np.ndarray, filters: list[int], idat_size: int | None = None, stream: bytes | None = None) -> bytes:
    """An 8-bit RGB PNG of ``pixels``; its zlib stream (``stream``, else the filtered rows compressed) split into
    IDAT chunks of ``idat_size`` bytes (one chunk where None)."""
    height, width = pixels.shape[:2]
    stream = zlib.compress(_filtered_rows(pixels, filters), 6) if stream is None else stream
    size = idat_size or len(stream)
    idats = b"".join(_chunk(b"IDAT", stream[k:k + size]) for k in range(0, len(stream), size))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + idats + _chunk(b"IEND", b"")


def _fast(data: bytes) -> np.ndarray:
    """What libspng makes of the rewritten file: the ISA-L way's own pixels, with no fallback behind them."""
    import pyspng

    rewritten = _with_stored_image_data(data)
    assert rewritten is not None
    return pyspng.load(rewritten, "RGB")


@pytest.fixture
def pixels() -> np.ndarray:
    rng = np.random.default_rng(11)
    smooth = Image.fromarray(rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)).resize((70, 45), Image.BICUBIC)
    return np.asarray(smooth)


def test_png_fast_inflate_gives_pillows_pixels_for_every_filter(pixels):
    """Every row filter, alone and mixed row by row, in one IDAT chunk and in chunks of 7 bytes: the pixels are the
    ones encoded and the ones Pillow shows, and the ISA-L way is the one taken."""
    height = pixels.shape[0]
    for filters in [[kind] * height for kind in range(5)] + [[y % 5 for y in range(height)]]:
        for idat_size in (None, 7):
            data = _png(pixels, filters, idat_size)
            assert np.array_equal(_fast(data), pixels), (filters[:5], idat_size)
            decoded = decode_pixels(data)
            assert np.array_equal(decoded, pixels)
            assert np.array_equal(decoded, np.asarray(open_as_viewed(io.BytesIO(data))))


def test_png_fast_inflate_reads_what_pillow_writes(tmp_path, pixels):
    """A PNG saved by Pillow (its own filter choice, as a generator saves images), from the file and from its
    bytes."""
    Image.fromarray(pixels).save(tmp_path / "saved.png")
    data = (tmp_path / "saved.png").read_bytes()
    assert np.array_equal(_fast(data), pixels)
    assert np.array_equal(decode_pixels(tmp_path / "saved.png"), pixels)
    assert np.array_equal(decode_pixels(data), pixels)


def test_png_fast_inflate_inflates_no_more_than_the_rows(pixels):
    """Image data that inflates past the IHDR's rows (here 64 MiB of zeros after them) is cut at the rows: the
    rewritten file holds exactly them, and the pixels are Pillow's."""
    rows = _filtered_rows(pixels, [4] * pixels.shape[0])
    data = _png(pixels, [], stream=zlib.compress(rows + bytes(64 << 20), 9))
    assert len(_with_stored_image_data(data)) < len(rows) + 1024
    assert np.array_equal(_fast(data), pixels)
    assert np.array_equal(decode_pixels(data), pixels)
    assert np.array_equal(decode_pixels(data), np.asarray(open_as_viewed(io.BytesIO(data))))


def test_png_fast_inflate_leaves_what_it_cannot_read_whole_to_the_decoders_before_it(pixels):
    """A truncated stream, an interlaced image and corrupt image data are not rewritten; such a file is read, or
    refused, as before: a truncated PNG is refused as Pillow refuses it."""
    rows = _filtered_rows(pixels, [1] * pixels.shape[0])
    truncated = _png(pixels, [], stream=zlib.compress(rows)[:-200])
    assert _with_stored_image_data(truncated) is None
    with pytest.raises(OSError):
        np.asarray(open_as_viewed(io.BytesIO(truncated)))
    with pytest.raises(OSError):
        decode_pixels(truncated)
    corrupt = _png(pixels, [], stream=b"\x78\x01" + b"\xff" * 40)
    assert _with_stored_image_data(corrupt) is None
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    interlaced = bytearray(buffer.getvalue())
    interlaced[28] = 1  # the IHDR's interlace method: Adam7 (its CRC is not recomputed: nothing reads it here)
    assert _with_stored_image_data(bytes(interlaced)) is None

"""The scoring decoder of plain PNGs (``benchmark.images``): image data inflated by ISA-L, rows unfiltered by
libspng. Its pixels must be the ones Pillow shows for every filter a PNG encoder may choose, however the image data
is split into chunks; anything it cannot read whole goes the way it went before; and a PNG that holds an orientation
in any form Pillow reads (ImageMagick's raw profile, XMP) is scored turned, as the viewer shows it."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, ImageCms

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


# --- orientation in every form Pillow reads (issue 49, finding 9) ---------------------------------------------------
# What the viewer shows of an image stored with each EXIF orientation (EXIF 2.32, tag 0x0112), in numpy: 3 turns it
# half round, 5 swaps rows and columns, 6 turns it a quarter clockwise, 8 a quarter anticlockwise.
VIEWED = {3: lambda p: np.rot90(p, 2), 5: lambda p: p.transpose(1, 0, 2), 6: lambda p: np.rot90(p, -1),
          8: lambda p: np.rot90(p, 1)}


def _exif(orientation: int) -> bytes:
    """EXIF holding only an orientation, as JPEG's APP1 carries it: "Exif", two NULs, then a big-endian TIFF header
    and one IFD with one SHORT entry (TIFF 6.0, section 2), and no next IFD."""
    entry = struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0)
    return b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + entry + struct.pack(">I", 0)


def _raw_profile(data: bytes) -> bytes:
    """ImageMagick's "Raw profile type exif" text: a line feed, the profile's name, its length in 8 columns, then its
    bytes in hex, 72 digits a line."""
    digits = data.hex()
    lines = "\n".join(digits[k:k + 72] for k in range(0, len(digits), 72))
    return f"\nexif\n{len(data):8d}\n{lines}\n".encode("latin-1")


def _xmp(orientation: int, element: bool) -> bytes:
    """An XMP packet whose tiff:Orientation is an attribute of its rdf:Description or (``element``) a child of it."""
    value = (f"><tiff:Orientation>{orientation}</tiff:Orientation></rdf:Description>" if element
             else f' tiff:Orientation="{orientation}"/>')
    return ('<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
            'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
            f'xmlns:tiff="http://ns.adobe.com/tiff/1.0/"{value}</rdf:RDF></x:xmpmeta><?xpacket end="w"?>'
            ).encode("utf-8")


def _text(kind: bytes, keyword: bytes, text: bytes) -> bytes:
    """A text chunk (PNG specification, 11.3.4): tEXt, keyword NUL text; zTXt, keyword NUL, compression method 0,
    the text zlib-compressed; iTXt, keyword NUL, compression flag and method, language tag NUL, translated keyword
    NUL, then the UTF-8 text (compressed where the flag is 1: kind ``iTXz`` here)."""
    if kind == b"tEXt":
        body = keyword + b"\0" + text
    elif kind == b"zTXt":
        body = keyword + b"\0\0" + zlib.compress(text)
    else:
        compressed = kind == b"iTXz"
        body = keyword + b"\0" + bytes([compressed, 0]) + b"\0\0" + (zlib.compress(text) if compressed else text)
        kind = b"iTXt"
    return _chunk(kind, body)


def _with_chunk(data: bytes, chunk: bytes, after_image_data: bool) -> bytes:
    """``data`` (IHDR, IDATs, IEND) with ``chunk`` before the first IDAT or after the last (both allowed for text)."""
    at = data.index(b"IDAT") - 4 if not after_image_data else len(data) - 12
    return data[:at] + chunk + data[at:]


def _scored_and_viewed(data: bytes, tmp_path) -> tuple[list[np.ndarray], np.ndarray, tuple[int, int]]:
    """The pixels scored of ``data``: by the harness's DataLoader worker reading it as a shard row, and through the
    Python API (``culturelens.score`` given its file: ``plain_images.png_images``, then that worker's decoder); what
    Pillow's own ``ImageOps.exif_transpose`` shows of it (the viewer's); and the size the upload validator records."""
    from PIL import ImageOps

    from benchmark.features.embeddings import _Decode
    from benchmark.metrics.base import Need
    from benchmark.plain_images import png_images
    from benchmark.submission import Limits
    from benchmark.submission.archive import parse_name
    from benchmark.submission.validate import check_image

    need = Need("pixels", "image")
    (tmp_path / "images" / "p0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "images" / "p0" / "0.png").write_bytes(data)
    rows = [data, *png_images([tmp_path / "images" / "p0" / "0.png"])]
    decode = _Decode(rows.__getitem__, [(0, (need,)), (1, (need,))])
    scored = [np.asarray(decode[row][2]) for row in (0, 1)]
    with Image.open(io.BytesIO(data)) as image:
        viewed = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
    record, problem = check_image(tmp_path, parse_name("images/p0/0.png"), Limits(min_side=48))
    assert problem is None, problem
    return scored, viewed, (record.width, record.height)


@pytest.fixture
def upright() -> np.ndarray:
    """48 px wide, 80 high, every pixel different enough that any turn or flip shows."""
    rng = np.random.default_rng(49)
    return rng.integers(0, 256, (80, 48, 3), dtype=np.uint8)


def test_curation_png_orientation_in_an_imagemagick_raw_profile_is_scored_as_viewed(upright, tmp_path):
    """ImageMagick keeps a PNG's EXIF as a "Raw profile type exif" text chunk (zTXt by default, tEXt too): stored
    48 x 80 with orientation 6 (or 8), the viewer shows it 80 x 48, turned; the pixels scored and the size recorded
    are the turned ones, wherever the chunk lies (before or after the image data)."""
    for kind in (b"tEXt", b"zTXt"):
        for orientation in (6, 8):
            for after in (False, True):
                chunk = _text(kind, b"Raw profile type exif", _raw_profile(_exif(orientation)))
                data = _with_chunk(_png(upright, [1] * 80), chunk, after)
                scored, viewed, size = _scored_and_viewed(data, tmp_path)
                expected = VIEWED[orientation](upright)
                assert expected.shape == (48, 80, 3)
                assert np.array_equal(viewed, expected), (kind, orientation, after)  # Pillow turns it so
                assert all(np.array_equal(pixels, expected) for pixels in scored), (kind, orientation, after)
                assert size == (80, 48)


def test_curation_png_orientation_in_xmp_is_scored_as_viewed(upright, tmp_path):
    """XMP in an iTXt chunk keyed "XML:com.adobe.xmp" (plain or compressed; tEXt and zTXt as some tools write it),
    tiff:Orientation as an attribute or an element: scored as the viewer shows it, turned or flipped."""
    forms = [(b"iTXt", 6, False), (b"iTXz", 8, True), (b"iTXt", 5, True), (b"tEXt", 3, False), (b"zTXt", 6, True)]
    for kind, orientation, element in forms:
        chunk = _text(kind, b"XML:com.adobe.xmp", _xmp(orientation, element))
        data = _with_chunk(_png(upright, [4] * 80), chunk, after_image_data=kind == b"zTXt")
        scored, viewed, size = _scored_and_viewed(data, tmp_path)
        expected = VIEWED[orientation](upright)
        assert np.array_equal(viewed, expected), (kind, orientation, element)
        assert all(np.array_equal(pixels, expected) for pixels in scored), (kind, orientation, element)
        assert size == expected.shape[1::-1]


def test_curation_png_text_that_holds_no_orientation_keeps_the_fast_decoder(upright, tmp_path):
    """Text a generator writes (Stable Diffusion web UI's "parameters", ComfyUI's "workflow"), other raw profiles,
    and an orientation under a keyword Pillow does not read it from: the viewer shows the image as stored, and the
    file still takes the fast decoder (libspng after ISA-L), which gives those pixels."""
    from benchmark.images import _plain_png

    chunks = [_text(b"tEXt", b"parameters", b"a bowl of pho, Steps: 30, Seed: 7"),
              _text(b"zTXt", b"workflow", b'{"nodes": []}' * 50),
              _text(b"zTXt", b"Raw profile type iptc", _raw_profile(b"\x1c\x02\x05\x00\x04pho!")),
              _text(b"iTXt", b"Comment", _xmp(6, element=False))]
    data = _png(upright, [2] * 80)
    for chunk in chunks:
        data = _with_chunk(data, chunk, after_image_data=False)
    assert _plain_png(data)
    assert np.array_equal(_fast(data), upright)
    scored, viewed, size = _scored_and_viewed(data, tmp_path)
    assert np.array_equal(viewed, upright) and size == (48, 80)
    assert all(np.array_equal(pixels, upright) for pixels in scored)


def _chunk_types(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, walked by their lengths (PNG specification, 5.3)."""
    types, at = [], 8
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        types.append(data[at + 4:at + 8])
        at += 12 + length
    return types


def test_curation_the_page_serves_the_pixels_scored_whatever_the_form(upright, tmp_path):
    """What the Compare tab serves of a submitted image (``images.as_shown``): a PNG holding its orientation as a
    raw profile or XMP (which no browser reads) and a JPEG holding it as EXIF are served as a PNG of the turned
    pixels, with nothing but IHDR, IDAT and IEND (nothing a browser could apply again), and so are a PNG with a gamma
    and a JPEG with an ICC profile (a browser would convert their colours, scoring does not); a plain PNG (generator
    text and all) and a JPEG with none of these are served as they are."""
    from benchmark.images import as_shown

    for chunk, orientation in [(_text(b"zTXt", b"Raw profile type exif", _raw_profile(_exif(6))), 6),
                               (_text(b"iTXt", b"XML:com.adobe.xmp", _xmp(8, element=False)), 8)]:
        shown = as_shown(_with_chunk(_png(upright, [3] * 80), chunk, after_image_data=False))
        assert _chunk_types(shown) == [b"IHDR", b"IDAT", b"IEND"]
        with Image.open(io.BytesIO(shown)) as image:
            assert image.format == "PNG" and np.array_equal(np.asarray(image), VIEWED[orientation](upright))
    plain = _with_chunk(_png(upright, [3] * 80), _text(b"tEXt", b"parameters", b"Steps: 30"), after_image_data=False)
    assert as_shown(plain) is plain
    gamma = _with_chunk(plain, _chunk(b"gAMA", struct.pack(">I", 100000)), after_image_data=False)  # gamma 1.0
    assert _chunk_types(as_shown(gamma)) == [b"IHDR", b"IDAT", b"IEND"]
    assert np.array_equal(decode_pixels(as_shown(gamma)), upright)
    exif = Image.Exif()
    exif[0x0112] = 6
    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    for name, tags in (("turned", {"exif": exif}), ("profiled", {"icc_profile": profile}), ("upright", {})):
        Image.fromarray(upright).save(tmp_path / f"{name}.jpg", format="JPEG", quality=95, **tags)
    turned, profiled, kept = ((tmp_path / f"{name}.jpg").read_bytes() for name in ("turned", "profiled", "upright"))
    for data, size in ((turned, (80, 48)), (profiled, (48, 80))):
        with Image.open(io.BytesIO(as_shown(data))) as image:
            assert image.format == "PNG" and image.size == size and "icc_profile" not in image.info
            assert np.array_equal(np.asarray(image), decode_pixels(data))
    assert as_shown(kept) is kept

"""Open a submitted image as a person sees it: the one way validation and scoring read image files.

A browser or photo viewer does more than decode the pixels, and a metric must score what people see:

- **EXIF orientation** is applied (a phone photo stored sideways with "rotate 90° clockwise" is shown
  upright), wherever Pillow finds it (a JPEG's or WebP's EXIF; a PNG's eXIf chunk, ImageMagick's raw profile or
  XMP); the size of the viewed image is its size after rotation.
- **MPO** (a JPEG with extra frames, as many cameras write) shows its first frame, as browsers do.
- **16-bit greyscale** (Pillow modes ``I;16``, ``I;16B``, ``I;16L``, ``I;16N``, and ``I``, as which older Pillow
  opens 16-bit PNG) is scaled to 8 bits (value / 257, rounded), not clamped at 255.
- **Transparency** (an alpha channel, or a palette or colour marked transparent) is composited onto white,
  as on a white page (the leaderboard's background).
- **CMYK** JPEG is converted to RGB.

Any other pixel mode cannot be shown this way and is refused (``NotViewable``), so nothing is ever
scored differently from how it is shown.

Scoring reads images through ``decode_pixels``: the same pixels as ``open_as_viewed``, as an array, faster where a
faster decoder gives exactly them. An 8-bit RGB PNG with neither transparency nor an orientation in any form Pillow
reads (what image generators write) is decoded by libspng (``pyspng``), lossless like Pillow's own decoder and faster;
every other file takes ``open_as_viewed``. Pillow, and so the viewer, finds an orientation in an ``eXIf`` chunk and in
text chunks (``tEXt``, ``zTXt``, ``iTXt``) keyed ``Raw profile type exif`` (ImageMagick's hex-encoded EXIF),
``XML:com.adobe.xmp`` (XMP's ``tiff:Orientation``), ``xmp`` or ``exif``: a PNG holding any of these takes
``open_as_viewed``, which rotates it as the viewer does (``_plain_png``). Inflating the image data is the larger half
of decoding a PNG, and libspng inflates with zlib: the image data is inflated by ISA-L (``isal``, 3-4x faster) and
handed to libspng stored, uncompressed, so that libspng only unfilters it (``_with_stored_image_data``). A 1,024 px
PNG: 13-16 ms of one core, against 24 ms with libspng alone, 33 ms for libpng through torchvision and 38 ms for Pillow
(benchmarks/README.md, "harness_speed.py").
JPEG stays with Pillow: torchvision's libjpeg-turbo is another build whose IDCT and chroma upsampling may round
differently, and Pillow's ``draft`` (DCT-domain downscaling) changes the pixels.

A page shows a submitted image through ``as_shown``: the file itself where a browser draws the pixels scored from it,
else a PNG of those pixels (a browser reads no orientation from ImageMagick's raw profile or XMP, draws transparency
over its own background, and converts colours by an ICC profile or a gamma, which viewing leaves aside).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np
from PIL import ExifTags, Image, ImageOps

from benchmark.errors import CultureLensError

# The formats a submission may use; no other format's parser ever sees a submitted file's bytes. A JPEG with
# extra frames opens as "MPO" through the JPEG parser.
ALLOWED_FORMATS = ("JPEG", "PNG", "WEBP")
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")
_WITH_ALPHA = ("LA", "La", "PA", "RGBA", "RGBa")
_PLAIN = ("1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr")


class NotViewable(CultureLensError, ValueError):
    """The image's pixel mode has no faithful RGB rendering here."""


def open_as_viewed(source: Path | IO[bytes], formats: Sequence[str] | None = ALLOWED_FORMATS) -> Image.Image:
    """The image in ``source`` as an RGB image, decoded fully, as a viewer shows it. ``formats``: the parsers
    allowed to read it (``None``: any Pillow has, for the maintainers' own reference images)."""
    with Image.open(source, formats=formats) as image:
        return as_viewed(image)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def decode_pixels(source: Path | bytes | IO[bytes], formats: Sequence[str] | None = ALLOWED_FORMATS) -> np.ndarray:
    """``open_as_viewed(source, formats)``'s pixels as a (H, W, 3) uint8 array (what the harness's workers send),
    decoded by the fastest decoder that gives them exactly (see the module), with no PIL image in between where
    libspng decodes. ``source``: a file, an image file's bytes (a row of a submission's shards) or a binary
    stream."""
    pixels = _plain_png_pixels(source, formats)
    if pixels is not None:
        return pixels
    return np.array(open_as_viewed(io.BytesIO(source) if isinstance(source, bytes) else source, formats))


def _plain_png_pixels(source, formats: Sequence[str] | None) -> np.ndarray | None:
    """A plain PNG's pixels by libspng (``_plain_png``), or None: that file takes ``open_as_viewed``."""
    if isinstance(source, (str, Path, bytes)) and (formats is None or "PNG" in formats):
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        return _spng_rgb(data) if _plain_png(data) else None
    return None


def _spng_rgb(data: bytes) -> np.ndarray | None:
    """(H, W, 3) uint8 pixels of a plain PNG by libspng (``pyspng``, which applies no gamma, as Pillow applies
    none), its image data inflated by ISA-L where it can be; None where pyspng is not installed or libspng refuses
    a file Pillow may read."""
    try:
        import pyspng

        pixels = pyspng.load(_with_stored_image_data(data) or data, "RGB")
    except (ImportError, RuntimeError):
        return None
    return pixels if pixels.dtype == np.uint8 and pixels.ndim == 3 else None


_STORED_BLOCK = 65535  # the most bytes one stored (uncompressed) deflate block holds (RFC 1951, 3.2.4)


def _with_stored_image_data(data: bytes) -> bytes | None:
    """The plain, non-interlaced PNG ``data`` rewritten as IHDR, one IDAT holding its image data inflated (by ISA-L)
    into stored deflate blocks, and IEND: the same filtered rows, so libspng decodes it to the same pixels and only
    unfilters. No more is inflated than the IHDR's rows hold. None where ``isal`` is not installed, the image is
    interlaced or larger than Pillow's decompression-bomb limit, or the image data does not inflate to whole rows
    (libspng then reads the file as it is and says what is wrong)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return None
    width, height = struct.unpack_from(">II", data, 16)
    if data[8:12] != b"\x00\x00\x00\x0d" or data[28] != 0 or width * height > (Image.MAX_IMAGE_PIXELS or 2**31):
        return None
    rows = height * (1 + 3 * width)  # a filter-type byte, then 3 bytes a pixel
    compressed = [body for kind, body in _chunks(data) if kind == b"IDAT"]
    try:
        filtered = isal_zlib.decompressobj().decompress(b"".join(compressed), rows)
    except isal_zlib.error:
        return None
    if len(filtered) != rows:
        return None
    rows_view = memoryview(filtered)
    blocks = [rows_view[k:k + _STORED_BLOCK] for k in range(0, rows, _STORED_BLOCK)]
    stream = [b"IDAT\x78\x01"]  # zlib header: deflate, 32 KiB window, no dictionary
    for n, block in enumerate(blocks):
        stream += [struct.pack("<BHH", n == len(blocks) - 1, len(block), len(block) ^ 0xFFFF), block]
    body = b"".join(stream + [struct.pack(">I", isal_zlib.adler32(filtered))])
    return b"".join((data[:33], struct.pack(">I", len(body) - 4), body, struct.pack(">I", isal_zlib.crc32(body)),
                     b"\x00\x00\x00\x00IEND\xaeB`\x82"))


def _chunks(data: bytes) -> Iterator[tuple[bytes, memoryview]]:
    """The type and body of each chunk of the PNG ``data``, from the first after the signature to IEND, walked by
    their lengths as Pillow and libspng walk them (slices of a memoryview: nothing is copied). A file that ends
    before IEND yields (b"", empty) last."""
    view, at = memoryview(data), 8
    while at + 8 <= len(data):
        (length,) = struct.unpack_from(">I", data, at)
        kind = data[at + 4:at + 8]
        if at + 12 + length > len(data):
            break
        yield kind, view[at + 8:at + 8 + length]
        if kind == b"IEND":
            return
        at += 12 + length
    yield b"", view[:0]


# What Pillow's ``getexif`` reads an orientation from besides the eXIf chunk (and ``ImageOps.exif_transpose``, the
# viewer, applies): the text chunks with these keywords, a keyword being the chunk's data up to its first NUL.
_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
_ORIENTATION_KEYWORDS = (b"Raw profile type exif", b"XML:com.adobe.xmp", b"xmp", b"exif")
_LONGEST_KEYWORD = 79  # PNG specification, 11.3.4.2: a keyword is 1-79 bytes


def _plain_png(data: bytes) -> bool:
    """An 8-bit truecolour PNG (IHDR bit depth 8, colour type 2) that ends with IEND and holds no tRNS (transparent
    colour) and nothing Pillow reads an orientation from (an eXIf chunk, a text chunk keyed one of
    ``_ORIENTATION_KEYWORDS``), wherever it lies; any other file takes ``open_as_viewed``. Walking the chunk headers
    costs microseconds, where searching the whole file for a name cost milliseconds."""
    if not (data[:8] == _PNG_SIGNATURE and data[12:16] == b"IHDR" and data[24:26] == b"\x08\x02"):
        return False
    for kind, body in _chunks(data):
        if kind in (b"", b"tRNS", b"eXIf"):
            return False
        if kind in _TEXT_CHUNKS and bytes(body[:_LONGEST_KEYWORD + 1]).split(b"\0", 1)[0] in _ORIENTATION_KEYWORDS:
            return False
    return True


def as_shown(data: bytes) -> bytes:
    """The bytes a page serves of the image file ``data`` so that a browser draws the pixels scored
    (``decode_pixels``): ``data`` itself where viewing it changes nothing and it holds no colour conversion (a plain
    PNG, ``_plain_png``, with no ``_COLOUR_CHUNKS``; a JPEG or WebP in RGB or greyscale, of one frame, with no
    transparency, no orientation in any form Pillow reads and no ICC profile), else a lossless PNG of the viewed
    pixels, with no metadata a browser could apply."""
    if _plain_png(data) and not any(kind in _COLOUR_CHUNKS for kind, _ in _chunks(data)) or _viewed_as_stored(data):
        return data
    buffer = io.BytesIO()
    Image.fromarray(decode_pixels(data)).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


# The chunks by which a browser converts a PNG's colours (PNG specification, 11.3.2: an ICC profile, a gamma, the
# chromaticities, coding-independent code points); Pillow, and so scoring, leaves the stored values as they are.
_COLOUR_CHUNKS = (b"iCCP", b"gAMA", b"cHRM", b"cICP")


def _viewed_as_stored(data: bytes) -> bool:
    """A JPEG or WebP whose viewing (``as_viewed``) leaves its decoded pixels as they are."""
    try:
        with Image.open(io.BytesIO(data), formats=("JPEG", "WEBP")) as image:
            return (image.format in ("JPEG", "WEBP") and image.mode in ("RGB", "L") and "transparency" not in image.info
                    and not image.info.get("icc_profile") and getattr(image, "n_frames", 1) == 1
                    and image.getexif().get(ExifTags.Base.Orientation, 1) == 1)
    except (OSError, ValueError):
        return False


def as_viewed(image: Image.Image) -> Image.Image:
    """``image`` (just opened, not yet decoded) as a new RGB image, as a viewer shows it (see the module)."""
    if image.format == "MPO":
        image.seek(0)
    image = ImageOps.exif_transpose(image)  # decodes the (first) frame into a new image
    if image.mode in _SIXTEEN_BIT:
        levels = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
        return Image.fromarray(((levels + 128) // 257).astype(np.uint8), "L").convert("RGB")
    if image.mode in _WITH_ALPHA or (image.mode in _PLAIN and "transparency" in image.info):
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, image.convert("RGBA")).convert("RGB")
    if image.mode in _PLAIN:
        return image.convert("RGB")
    raise NotViewable(f"pixel mode {image.mode!r} cannot be shown as RGB; save the image as 8-bit RGB")

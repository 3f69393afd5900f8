"""Open a submitted image as a person sees it: the one way validation and scoring read image files.

A browser or photo viewer does more than decode the pixels, and a metric must score what people see:

- **EXIF orientation** is applied (a phone photo stored sideways with "rotate 90° clockwise" is shown
  upright); the size of the viewed image is its size after rotation.
- **MPO** (a JPEG with extra frames, as many cameras write) shows its first frame, as browsers do.
- **16-bit greyscale** (Pillow modes ``I;16``, ``I;16B``, ``I;16L``, ``I;16N``, and ``I``, as which older Pillow
  opens 16-bit PNG) is scaled to 8 bits (value / 257, rounded), not clamped at 255.
- **Transparency** (an alpha channel, or a palette or colour marked transparent) is composited onto white,
  as on a white page (the leaderboard's background).
- **CMYK** JPEG is converted to RGB.

Any other pixel mode cannot be shown this way and is refused (``NotViewable``), so nothing is ever
scored differently from how it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image, ImageOps

# The formats a submission may use; no other format's parser ever sees a submitted file's bytes. A JPEG with
# extra frames opens as "MPO" through the JPEG parser.
ALLOWED_FORMATS = ("JPEG", "PNG", "WEBP")
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")
_WITH_ALPHA = ("LA", "La", "PA", "RGBA", "RGBa")
_PLAIN = ("1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr")


class NotViewable(ValueError):
    """The image's pixel mode has no faithful RGB rendering here."""


def open_as_viewed(source: Path | IO[bytes], formats: Sequence[str] | None = ALLOWED_FORMATS) -> Image.Image:
    """The image in ``source`` as an RGB image, decoded fully, as a viewer shows it. ``formats``: the parsers
    allowed to read it (``None``: any Pillow has, for the maintainers' own reference images)."""
    with Image.open(source, formats=formats) as image:
        return as_viewed(image)


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

"""Pictures a person would rather look at than read: e.g. a generated image beside the reference it
reuses, with the reused patches outlined (the VR detail of the iconicity track)."""

from __future__ import annotations

from PIL import Image, ImageDraw

REUSED = (255, 140, 0)  # orange outline
HEIGHT = 384


def _cell(image_size: tuple[int, int], patch: int, grid: int) -> tuple[int, int, int, int]:
    width, height = image_size
    row, column = divmod(patch, grid)
    return (round(column * width / grid), round(row * height / grid),
            round((column + 1) * width / grid) - 1, round((row + 1) * height / grid) - 1)


def reuse_picture(generated: Image.Image, reference: Image.Image, reused: list[int],
                  matched: list[int] | None = None, grid: int = 4, height: int = HEIGHT) -> Image.Image:
    """The generated image (left) and a reference (right), both ``height`` pixels tall, with the generated
    image's reused patches outlined, and on the reference the patches they matched (``matched``: patch
    indices of this reference). Patches are numbered row by row, as in ``encoders.base.grid_tiles``."""
    def scaled(image: Image.Image) -> Image.Image:
        image = image.convert("RGB")
        return image.resize((max(1, round(image.width * height / image.height)), height))

    left, right = scaled(generated), scaled(reference)
    canvas = Image.new("RGB", (left.width + 8 + right.width, height), (255, 255, 255))
    canvas.paste(left, (0, 0))
    canvas.paste(right, (left.width + 8, 0))
    draw = ImageDraw.Draw(canvas)
    line = max(2, height // 128)
    for patch in reused:
        draw.rectangle(_cell(left.size, patch, grid), outline=REUSED, width=line)
    for patch in matched or []:
        x0, y0, x1, y1 = _cell(right.size, patch, grid)
        draw.rectangle((x0 + left.width + 8, y0, x1 + left.width + 8, y1), outline=REUSED, width=line)
    return canvas

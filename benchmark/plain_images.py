"""Plain images and prompts, as the harness scores a submission's: what the Python API (``culturelens.score``,
``culturelens.metrics``) makes of a researcher's PIL images, tensors, arrays or files and their prompt texts.

Every image is rendered as a viewer shows it (``benchmark.images.as_viewed``: EXIF orientation, transparency on
white, 16-bit greyscale to 8 bits) and kept as the bytes of a lossless PNG of those pixels, so the harness decodes
exactly the pixels a submission's file of that image gives (``benchmark.images.decode_for_scoring``), and the
embedding cache keys it by their sha256. Tensors follow torchvision's layout, ``(C, H, W)`` or ``(N, C, H, W)``;
arrays follow PIL's, ``(H, W)``, ``(H, W, C)`` or ``(N, H, W, C)``; both with 1, 3 or 4 channels, of ``uint8``
values, or floating-point values in [0, 1] (quantised to 8 bits as round(255 x), as an 8-bit PNG of them holds).

Two uses:

- ``ad_hoc``: the prompts are the texts given, a prompt set of their own (``AD_HOC_REPO``); images given with the
  same text are that prompt's seeds. A result on them is comparable only with results on the very same prompts:
  the protocol every aggregate row carries names the digest of the prompt rows.
- ``write_submission``: images answering a dataset's prompts by prompt id, written as a submission folder (a
  manifest and ``images/<prompt_id>/<seed>.png``), to be validated and scored as any upload is.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from PIL import Image

from benchmark import layout
from benchmark.errors import CultureLensError, OutputExists
from benchmark.images import as_viewed

if TYPE_CHECKING:  # both load the datasets library: imported where they are used
    from benchmark.datasets.prompts import PromptSet
    from benchmark.submission.manifest import Manifest

AD_HOC_REPO, AD_HOC_CONFIG, AD_HOC_SPLIT = "ad-hoc/prompts", "prompts", "test"
DEFAULT_MODEL = {"name": "unnamed model", "id": "unknown", "type": "open"}
PNG_LEVEL = 1  # zlib level of the PNGs kept in memory: lossless at every level, and 1 is the quickest


class PlainInputError(CultureLensError, ValueError):
    """Images or prompts given to the Python API that cannot be scored: the message says which and why."""


class PlainInputTypeError(CultureLensError, TypeError):
    """An image or prompt of a type the Python API does not take: the message names the types it takes."""


# --- images -------------------------------------------------------------------------------------------------------
def png_images(images: object) -> list[bytes]:
    """``images`` (a sequence of PIL images, tensors, arrays or paths; or one of them, a batch tensor or array
    included) as the bytes of a lossless PNG each, in order (see the module). PlainInputError / PlainInputTypeError
    say which image is wrong and why."""
    items = _as_list(images, "images")
    out = []
    for index, item in enumerate(items):
        out.extend(_png(image, f"images[{index}]") for image in _split_batch(item, f"images[{index}]"))
    if not out:
        raise PlainInputError("images is empty: give at least one image")
    return out


def _as_list(value: object, name: str) -> list:
    """``value`` as a list of items: a sequence as its items, one image (a PIL image, a path, a tensor or array,
    which may be a batch, split later) or one text as a list of one."""
    if _is_tensor(value) or isinstance(value, (np.ndarray, str, Path, Image.Image)):
        return [value]
    if isinstance(value, bytes):
        raise PlainInputTypeError(f"{name} must be a list (one item per image), not bytes: give a PIL image or a "
                                  "path")
    if not isinstance(value, Sequence) and not isinstance(value, pd.Series):
        raise PlainInputTypeError(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


def _is_tensor(value: object) -> bool:
    """A torch tensor, recognised without importing torch (the API stays importable where torch is not)."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _split_batch(item: object, where: str) -> list:
    """A 4-dimensional tensor or array as its images; anything else as itself."""
    if _is_tensor(item):  # channels first: (N, C, H, W) or (C, H, W); (H, W) has none
        item = item.detach().cpu().numpy()
        if item.ndim in (3, 4):
            item = np.moveaxis(item, -3, -1)
    if isinstance(item, np.ndarray) and item.ndim == 4:
        return list(item)
    return [item]


def _png(image: object, where: str) -> bytes:
    if isinstance(image, (str, Path)):
        try:
            with Image.open(image) as opened:
                rendered = as_viewed(opened)
        except FileNotFoundError:
            raise PlainInputError(f"{where}: no file {image}") from None
        except OSError as error:
            raise PlainInputError(f"{where}: {image} is not an image Pillow can read ({error})") from None
    elif isinstance(image, Image.Image):
        rendered = as_viewed(image)
    elif isinstance(image, np.ndarray):
        rendered = as_viewed(Image.fromarray(_eight_bit(image, where)))
    else:
        raise PlainInputTypeError(f"{where} is a {type(image).__name__}: give a PIL image, a torch tensor (C, H, W), "
                                  "a numpy array (H, W, C) or a path to an image file")
    buffer = io.BytesIO()
    rendered.save(buffer, format="PNG", compress_level=PNG_LEVEL)
    return buffer.getvalue()


def _eight_bit(array: np.ndarray, where: str) -> np.ndarray:
    """(H, W) or (H, W, C) with C in 1, 3, 4, as uint8 (floats in [0, 1] quantised as round(255 x))."""
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)) or 0 in array.shape:
        raise PlainInputError(f"{where}: an image of shape {tuple(array.shape)}; expected (H, W) or (H, W, C) with "
                              "C = 1, 3 or 4 (a tensor: (C, H, W))")
    if array.dtype == np.uint8:
        return array
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1:
            raise PlainInputError(f"{where}: floating-point pixels must lie in [0, 1] (got {array.min():g} to "
                                  f"{array.max():g}); give uint8 values for 0-255")
        return np.round(array * 255).astype(np.uint8)
    raise PlainInputError(f"{where}: pixels of type {array.dtype}; give uint8 (0-255) or floats in [0, 1]")


class ImageBytes:
    """Images held in memory by name, as a submission's shards hold them (``benchmark.harness.ImageStore``);
    picklable for DataLoader workers."""

    def __init__(self, images: dict[str, bytes]):
        self.images = images

    def source(self, names: list[str]) -> Callable[[int], bytes]:
        return _Source(self.images, list(names))


class _Source:
    def __init__(self, images: dict[str, bytes], names: list[str]):
        self.images, self.names = images, names

    def __call__(self, row: int) -> bytes:
        return self.images[self.names[row]]


# --- prompts ------------------------------------------------------------------------------------------------------
def _prompt_table(prompts: object, count: int) -> pd.DataFrame:
    """One row per image: ``prompt`` and the slice and label columns given (a DataFrame's), checked."""
    from benchmark.datasets.prompts import LABEL_COLUMNS, SLICE_COLUMNS

    if isinstance(prompts, pd.DataFrame):
        if "prompt" not in prompts.columns:
            raise PlainInputError("prompts is a DataFrame without a 'prompt' column")
        known = ["prompt", *[c for c in (*SLICE_COLUMNS, *LABEL_COLUMNS) if c in prompts.columns]]
        unknown = sorted(set(prompts.columns) - set(known))
        if unknown:
            raise PlainInputError(f"prompts has columns {unknown} the scoring does not read; it reads 'prompt' and "
                                  f"any of {', '.join((*SLICE_COLUMNS, *LABEL_COLUMNS))}")
        table = prompts[known].reset_index(drop=True)
    else:
        table = pd.DataFrame({"prompt": _as_list(prompts, "prompts")})
    if table.empty:
        raise PlainInputError("prompts is empty: give one prompt per image")
    if len(table) != count:
        raise PlainInputError(f"{count} images but {len(table)} prompts: give one prompt per image (the same "
                              "prompt for each of its seeds)")
    for index, text in enumerate(table["prompt"]):
        if not isinstance(text, str):
            raise PlainInputTypeError(f"prompts[{index}] is a {type(text).__name__}, not a string")
        if not text.strip():
            raise PlainInputError(f"prompts[{index}] is empty")
    return table


def _seeds(seeds: Sequence[int] | None, prompt_ids: list[str]) -> list[int]:
    """The seed of each image: given, else its rank among the images of its prompt (0, 1, ...)."""
    if seeds is None:
        return pd.Series(prompt_ids).groupby(prompt_ids).cumcount().tolist()
    seeds = _as_list(seeds, "seeds")
    if len(seeds) != len(prompt_ids):
        raise PlainInputError(f"{len(prompt_ids)} images but {len(seeds)} seeds: give one seed per image")
    for index, seed in enumerate(seeds):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
            raise PlainInputError(f"seeds[{index}] is {seed!r}: a seed is a whole number from 0 to 2^32 - 1")
    pairs = list(zip(prompt_ids, (int(s) for s in seeds)))
    if len(set(pairs)) != len(pairs):
        prompt, seed = next(p for p in pairs if pairs.count(p) > 1)
        raise PlainInputError(f"two images of prompt {prompt} have seed {seed}: a prompt's images need distinct "
                              "seeds")
    return [int(s) for s in seeds]


def ad_hoc_prompt_id(text: str) -> str:
    """An ad hoc prompt's id: from its text alone (``p-`` and 12 hex digits of its sha256), so the same prompts give
    the same prompt set (and protocol) whatever their order."""
    return "p-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _model(model: str | dict | None) -> dict:
    if model is None:
        return dict(DEFAULT_MODEL)
    if isinstance(model, str):
        return {**DEFAULT_MODEL, "name": model, "id": model}
    if isinstance(model, dict):
        return {**DEFAULT_MODEL, **model}
    raise PlainInputTypeError(f"model must be a name or a dict of the manifest's model fields, not "
                              f"{type(model).__name__}")


def _manifest(model: str | dict | None, dataset: dict, seeds: list[int]) -> Manifest:
    from benchmark.submission.manifest import Manifest

    chosen = sorted(set(seeds))
    try:
        return Manifest.model_validate({
            "format_version": 1, "model": _model(model), "dataset": dataset, "images_per_prompt": len(chosen),
            "seeds": chosen, "license": "unknown", "contact": "unknown",
            "generation": {"pipeline": "given to the Python API (culturelens.score)"}})
    except ValueError as error:
        raise PlainInputError(f"the images cannot be described as a submission: {error}") from None


@dataclass(frozen=True)
class AdHoc:
    """Images and their prompts as the harness takes a submission: its manifest, prompt set, image table
    (prompt_id, seed, path, sha256, and ``input``: each image's position in the list given) and images."""

    manifest: Manifest
    prompts: PromptSet
    images: pd.DataFrame
    store: ImageBytes

    @property
    def submission_id(self) -> str:
        """``adhoc-`` and the start of a digest of the images, their prompts and seeds: the same inputs, the
        same id."""
        content = self.images[["prompt_id", "seed", "sha256"]].sort_values(["prompt_id", "seed"])
        text = json.dumps([self.prompts.digest, content.values.tolist()], default=int)
        return "adhoc-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def ad_hoc(images: object, prompts: object, *, seeds: Sequence[int] | None = None,
           model: str | dict | None = None) -> AdHoc:
    """``images`` and their ``prompts`` (a list of texts, one per image, one text for one image, or a DataFrame with
    a ``prompt`` column and any slice or label column, e.g. ``country``, ``concept``, ``artifact``) as a submission
    to a prompt set of their own (see the module). ``seeds``: each image's seed (default: 0, 1, ... among its prompt's images)."""
    from benchmark.datasets.prompts import PromptSet

    pngs = png_images(images)
    table = _prompt_table(prompts, len(pngs))
    ids = [ad_hoc_prompt_id(text) for text in table["prompt"]]
    catalogue = table.assign(prompt_id=ids).drop_duplicates().set_index("prompt_id").sort_index()
    if not catalogue.index.is_unique:
        twice = catalogue.index[catalogue.index.duplicated()][0]
        raise PlainInputError(f"the prompt {catalogue.loc[twice, 'prompt'].iloc[0]!r} is given with different "
                              f"{', '.join(c for c in catalogue.columns if c != 'prompt')} values")
    image_seeds = _seeds(seeds, ids)
    paths = [layout.image_name(p, s, "png") for p, s in zip(ids, image_seeds)]
    frame = pd.DataFrame({"prompt_id": ids, "seed": image_seeds, "path": paths,
                          "sha256": [hashlib.sha256(data).hexdigest() for data in pngs], "input": range(len(pngs))})
    unnamed = PromptSet(AD_HOC_REPO, AD_HOC_CONFIG, AD_HOC_SPLIT, "", catalogue)
    prompt_set = replace(unnamed, fingerprint=unnamed.digest)  # no copy to tell apart but by its rows
    manifest = _manifest(model, {"repo": AD_HOC_REPO, "config": AD_HOC_CONFIG, "split": AD_HOC_SPLIT}, image_seeds)
    return AdHoc(manifest, prompt_set, frame, ImageBytes(dict(zip(paths, pngs))))


def write_submission(folder: Path, images: object, prompt_ids: Sequence[str], *, dataset: str,
                     seeds: Sequence[int] | None = None, model: str | dict | None = None) -> Path:
    """Write ``images`` answering the prompts ``prompt_ids`` of ``dataset`` (``REPO:CONFIG`` or
    ``REPO:CONFIG:SPLIT``) as a submission folder at ``folder``: ``manifest.json`` and
    ``images/<prompt_id>/<seed>.png``. ``seeds``: each image's seed (default: 0, 1, ... among its prompt's
    images). Nothing is checked against the dataset here: validation does that, as for any upload."""
    from benchmark.submission.manifest import PROMPT_ID

    pngs = png_images(images)
    ids = [str(p) for p in _as_list(prompt_ids, "prompt_ids")]
    if len(ids) != len(pngs):
        raise PlainInputError(f"{len(pngs)} images but {len(ids)} prompt ids: give one prompt id per image")
    image_seeds = _seeds(seeds, ids)
    repo, _, rest = str(dataset).partition(":")
    config, _, split = rest.partition(":")
    if not repo or not config:
        raise PlainInputError(f"dataset {dataset!r}: name it REPO:CONFIG or REPO:CONFIG:SPLIT, e.g. "
                              "culturelens/cube-1k:cube_1k")
    manifest = _manifest(model, {"repo": repo, "config": config, "split": split or "test"}, image_seeds)
    for index, prompt_id in enumerate(ids):
        if not PROMPT_ID.fullmatch(prompt_id) or ".." in prompt_id:
            raise PlainInputError(f"prompt_ids[{index}] is {prompt_id[:80]!r}, not a dataset prompt id (letters, "
                                  "digits, '-', '_', '.')")
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise OutputExists(f"{folder} is not empty: write the submission to a new folder")
    for prompt_id, seed, data in zip(ids, image_seeds, pngs):
        target = folder / layout.image_name(prompt_id, seed, "png")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (folder / layout.MANIFEST).write_text(manifest.model_dump_json(indent=2, exclude_none=True), encoding="utf-8")
    return folder

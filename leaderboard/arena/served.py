"""What the arena draws from and what it serves: the images of the store's scored submissions (``candidates``, the
one place they are gathered), and each battle side as a file no one can tell the model from (``ServedImages``).

- **Candidates**: one row per image a scored submission's per-image results name (``Catalog.images_of``) whose
  prompt names a country (the culture) and whose text the store still serves; the image is referred to as
  ``<submission>:<image path>`` (``reference``), a name the app alone resolves, through ``Store.image_bytes``, to
  bytes of the submission's own shards: a reference that a submission's validated image table does not list reads
  nothing, so no visitor reaches a file the store does not own.
- **Served images** (``reencoded``): the pixels as scored (``benchmark.images.decode_pixels``: orientation and
  colour applied), fitted into one ``SIDE`` x ``SIDE`` square on white, written as a fresh PNG: no EXIF, no text
  chunk, no ICC profile, and every image the same size, so neither the file's size in pixels nor its metadata
  tells the generator. Each is named by a keyed hash of its battle and side (``served_name``), never after the
  model, the submission or the image's content, and handed out from the app's download folder like every other
  file the app serves (``Site.serve``; Gradio is blocked from the store).
- **Gold items** (``gold``): the real images the gold battles set against each other (``benchmark.arena.gold``),
  from what this server holds: the iconic references' images, where the store serves that dataset (read from the
  dataset's own rows), and CUBE-CSpace's artifacts as the relevance knowledge base holds them, where the operator
  names the folder of its images (``CULTURELENS_ARENA_KB_IMAGES``: the ``--kb-images`` it was built from). A
  knowledge-base image is served only when its bytes hash to the sha256 the knowledge base recorded for it, and
  its path stays inside that folder: a changed or swapped file is never shown as the artifact.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from benchmark.arena import gold as gold_items
from benchmark.arena.matchmaking import CANDIDATE_COLUMNS, GOLD_COLUMNS
from benchmark.datasets import names
from benchmark.datasets.prompts import DatasetUnavailable, PromptSet
from benchmark.images import decode_pixels
from benchmark.relevance.kb_folder import KnowledgeBaseError, read_tables
from leaderboard import tables
from leaderboard.catalog import Catalog
from leaderboard.seal import Keys
from leaderboard.store import Store

SIDE = 512  # pixels: every served image is this square
BACKGROUND = (255, 255, 255)  # what surrounds an image that is not square


def reference(submission_id: str, image_path: str) -> str:
    """The arena's name for an image of a submission (what ``candidates`` and the votes hold)."""
    return f"{submission_id}:{image_path}"


def split_reference(ref: object) -> tuple[str, str] | None:
    """(submission id, image path) of a ``reference``; None for anything else (a gold item's ``kb:``/``iconic:``)."""
    if not isinstance(ref, str) or ":" not in ref:
        return None
    submission, path = ref.split(":", 1)
    return (submission, path) if submission and path.startswith("images/") else None


def candidates(catalog: Catalog, store: Store) -> pd.DataFrame:
    """The arena's candidates (``matchmaking.CANDIDATE_COLUMNS``): every image of every scored submission whose
    prompt names a country, with the prompt's text as its dataset says it (an image whose dataset is no longer
    served is left out: nobody can judge an image against a prompt they cannot read)."""
    scored = tables.submissions(catalog)
    images = catalog.images_of(list(scored["submission_id"]))
    frames = []
    for submission, rows in images.groupby("submission_id", sort=True):
        try:
            texts = pd.concat([p.table["prompt"] for p in store.prompt_sets(submission)])
        except (DatasetUnavailable, OSError, ValueError, KeyError):
            continue
        texts = texts[~texts.index.duplicated()]
        rows = rows.assign(prompt=rows["prompt_id"].map(texts)).dropna(subset=["prompt"])
        frames.append(pd.DataFrame({
            "submission": rows["submission_id"], "model": rows["model"], "prompt_id": rows["prompt_id"],
            "prompt": rows["prompt"].astype(str), "culture": rows["country"].astype(str),
            "image": [reference(submission, path) for path in rows["image_path"]]}))
    if not frames:
        return pd.DataFrame(columns=list(CANDIDATE_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(CANDIDATE_COLUMNS)]


@dataclass(frozen=True)
class Gold:
    """The gold items this server can serve (``items``: ``matchmaking.GOLD_COLUMNS``) and where their bytes are:
    the iconic references' prompt set, and the knowledge base's images (sha256 -> its file under the folder)."""

    items: pd.DataFrame
    references: PromptSet | None = None
    kb_files: dict[str, Path] = field(default_factory=dict)

    def bytes_of(self, ref: str) -> bytes | None:
        """The bytes of the gold item ``ref`` names (``iconic:<prompt_id>:<n>``, ``kb:<sha256>``), when it is one
        of ``items``; None otherwise, or when a knowledge-base file no longer hashes to its recorded sha256."""
        if ref not in set(self.items["image"]):
            return None
        kind, _, rest = ref.partition(":")
        if kind == "kb":
            try:
                data = self.kb_files[rest].read_bytes()
            except (KeyError, OSError):
                return None
            return data if hashlib.sha256(data).hexdigest() == rest else None
        prompt_id, _, n = rest.rpartition(":")
        source, table = self.references.references({prompt_id})
        return source(int(n)).read() if int(n) < len(table) else None


def gold(store: Store, kb_folder: str | Path | None = None, kb_images: str | Path | None = None) -> Gold:
    """The gold items of the iconic references the store serves, and of the knowledge base in ``kb_folder`` (its
    tables checked against its kb.json) whose images are in ``kb_images``; none from a source that is absent or
    unreadable (gold battles then come from the other, or are not issued)."""
    frames, references, files = [], None, {}
    try:
        references = store.prompts(*names.ICONIC_REFERENCES)
    except (DatasetUnavailable, OSError, ValueError):
        references = None
    if references is not None and references.has_references:
        rows = references.table
        titles = references.rows["title"] if "title" in references.rows.column_names else list(rows["prompt"])
        counts = references.reference_counts().reindex(rows.index).fillna(0)
        frames.append(gold_items.from_iconic_references(pd.DataFrame({
            "prompt_id": rows.index, "title": titles, "country": rows.get("country"), "kind": rows.get("kind"),
            "images": counts.to_numpy()})))
    if kb_folder and kb_images:
        try:
            entities, images = read_tables(kb_folder)
        except KnowledgeBaseError:
            entities = images = None
        if images is not None:
            root = Path(kb_images).resolve()
            paths = {sha: (root / str(path)).resolve() for sha, path in zip(images["image_sha256"], images["path"])}
            files = {sha: path for sha, path in paths.items() if path.is_relative_to(root) and path.is_file()}
            items = gold_items.from_knowledge_base(entities, images)
            frames.append(items[items["image"].str.removeprefix("kb:").isin(files)])
    found = [f for f in frames if len(f)]
    items = pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(GOLD_COLUMNS))
    return Gold(items, references, files)


def reencoded(data: bytes, side: int = SIDE) -> bytes:
    """The image file ``data`` as the arena serves it: its viewed pixels scaled to fit ``side`` x ``side`` (aspect
    kept, Lanczos), centred on ``BACKGROUND``, as a PNG that holds nothing but the pixels."""
    pixels = Image.fromarray(decode_pixels(data))
    scale = side / max(pixels.size)
    fitted = pixels.resize((max(1, round(pixels.width * scale)), max(1, round(pixels.height * scale))),
                           Image.Resampling.LANCZOS)
    square = Image.new("RGB", (side, side), BACKGROUND)
    square.paste(fitted, ((side - fitted.width) // 2, (side - fitted.height) // 2))
    buffer = io.BytesIO()
    # Built from the pixels alone: Pillow writes no text, EXIF or ICC chunk unless asked to.
    Image.fromarray(np.asarray(square)).save(buffer, format="PNG")
    return buffer.getvalue()


def served_name(keys: Keys, battle: str, side: str) -> str:
    """The file name of one side (``a`` or ``b``) of a battle: a keyed hash of both, so a name says nothing of the
    model, the submission or the image, and no two battles share one."""
    return keys.sign({"kind": "arena image", "battle": battle, "side": side})[:32] + ".png"


def owned_bytes(store: Store, known: set[str], ref: str) -> bytes | None:
    """The bytes of the image ``ref`` names, when it is one of ``known`` (the candidates' references) and the
    submission's validated image table lists it (``Store.image_bytes``); None otherwise."""
    parts = split_reference(ref) if ref in known else None
    if parts is None:
        return None
    submission, path = parts
    return store.image_bytes(submission, [path]).get(path)


def write_served(folder: Path, keys: Keys, battle: str, sides: dict[str, bytes | None]) -> dict[str, str | None]:
    """Each side's image (``side`` -> its bytes, or None) re-encoded into ``folder`` under its ``served_name``:
    side -> the served file's path (None where there were no bytes)."""
    served = {}
    for side, data in sides.items():
        if data is None:
            served[side] = None
            continue
        target = folder / served_name(keys, battle, side)
        target.write_bytes(reencoded(data))
        served[side] = str(target)
    return served

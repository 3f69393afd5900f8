"""The knowledge-base index for visual entity linking (CAIRE, Yayavaram et al., arXiv:2506.09109, Sec. 3.1,
"Step 0"): entities with a lemma, a description, Wikipedia text and images, embedded with one CultureLens
backbone (mSigLIP so400m, as in the paper, by default) into two faiss indices.

Input: a records file (JSONL, one object per line, or Parquet) with one entity per row::

    {"entity_id": "bn:03096581n", "name": "Pysanka", "description": "Ukrainian decorated Easter egg",
     "wikipedia": "A pysanka is a Ukrainian Easter egg ...", "images": ["pysanka/1.jpg", "pysanka/2.jpg"]}

``images`` are paths relative to an image folder; ``description`` and ``wikipedia`` may be empty. Two keys are
optional, for a knowledge base built from public sources (``benchmark.relevance.public_kb``): ``sources``, an
object of where the entity was read (its Wikidata and Wikipedia revisions, country, category ...: each key becomes
a column of ``entities.parquet``), and ``image_credits``, one line per image (licence, author, file and version:
the ``credit`` column of ``images.parquet``).

Output: a folder with ``image.faiss`` (one row per distinct KB image, by content), ``text.faiss`` (one row per
entity: its lemma's text embedding), ``images.parquet`` (path, image_sha256, entity_ids of each image row),
``entities.parquet`` (entity_id, name, description, wikipedia of each text row) and ``kb.json`` (backbone id,
the backbone's cache key, dimension, counts, the licence declared and a sha256 of every file, verified on load).
Both indices are exact inner-product indices over unit-norm vectors, so scores are cosines.

The folder is also a Hub dataset repo as it is (``culturelens data push``, or an asset of the suite repo): its
``README.md`` is its card (``card``, from ``data_cards/relevance_kb.md``), written with the files and from what
``kb.json`` records, declaring the two tables as configs, ``entities`` (the default) and ``images``, so that
``load_dataset(folder, "entities", split="train")`` reads them. The card is not among the checksummed files: a
folder saved before it existed loads as it did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import faiss
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from benchmark.atomic import atomic_folder
from benchmark.datasets import hub_layout
from benchmark.digests import file_digest
from benchmark.encoders.base import Backbone
from benchmark.errors import OutputExists
from benchmark.features import Need
from benchmark.features.embeddings import FileSource, compute_features, embed_texts
from benchmark.relevance.kb_folder import (FILES, FORMAT_VERSION, MANIFEST, TABLES, KnowledgeBaseError, manifest,
                                           tables)
from benchmark.relevance.linking import DEFAULT_LINKING, TOP_K, Link, link_entities

DEFAULT_BACKBONE = "msiglip-so400m"
RECORD_KEYS = ("entity_id", "name", "description", "wikipedia", "images")
OPTIONAL_KEYS = ("sources", "image_credits")

# --- records ----------------------------------------------------------------------------------------------------
def _rows(path: Path) -> list[tuple[str, object]]:
    """(where, raw row) for each row of a JSONL or Parquet file."""
    if path.suffix == ".parquet":
        try:
            frame = pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowException) as error:
            raise KnowledgeBaseError(f"{path}: cannot be read as Parquet ({error})") from None
        return [(f"{path.name} row {i}", row) for i, row in enumerate(frame, start=1)]
    if path.suffix != ".jsonl":
        raise KnowledgeBaseError(f"{path}: records must be a .jsonl or .parquet file")
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append((f"{path.name} line {n}", json.loads(line)))
            except json.JSONDecodeError as error:
                raise KnowledgeBaseError(f"{path.name} line {n}: not valid JSON ({error.msg})") from None
    return rows


def read_records(path: str | Path) -> pd.DataFrame:
    """The entities of a records file (columns ``RECORD_KEYS``), validated; KnowledgeBaseError naming the bad row."""
    path = Path(path)
    if not path.is_file():
        raise KnowledgeBaseError(f"records file {path} does not exist")
    records, seen = [], {}
    for where, row in _rows(path):
        if not isinstance(row, dict):
            raise KnowledgeBaseError(f"{where}: expected an object with keys {', '.join(RECORD_KEYS)}")
        entity_id = row.get("entity_id")
        if isinstance(entity_id, str) and entity_id.strip():
            where = f"{where} (entity {entity_id!r})"
        unknown = sorted(set(row) - set(RECORD_KEYS) - set(OPTIONAL_KEYS))
        if unknown:
            raise KnowledgeBaseError(f"{where}: unknown key(s) {unknown} (known: "
                                     f"{', '.join(RECORD_KEYS + OPTIONAL_KEYS)})")
        for key in ("entity_id", "name"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise KnowledgeBaseError(f"{where}: {key!r} must be a non-empty string")
        for key in ("description", "wikipedia"):
            if row.get(key) is not None and not isinstance(row[key], str):
                raise KnowledgeBaseError(f"{where}: {key!r} must be a string (or absent)")
        images = row.get("images")
        if not isinstance(images, (list, tuple)) or not images or not all(isinstance(p, str) and p for p in images):
            raise KnowledgeBaseError(f"{where}: 'images' must be a non-empty list of paths relative to the image "
                                     "folder")
        sources, credits = row.get("sources") or {}, row.get("image_credits")
        if not isinstance(sources, dict) or not all(isinstance(v, (str, int, type(None))) and not isinstance(v, bool)
                                                    for v in sources.values()):
            raise KnowledgeBaseError(f"{where}: 'sources' must be an object of texts and whole numbers")
        if credits is not None and (not isinstance(credits, list) or len(credits) != len(images)
                                    or not all(isinstance(c, str) for c in credits)):
            raise KnowledgeBaseError(f"{where}: 'image_credits' must be a list of texts, one per image")
        if entity_id in seen:
            raise KnowledgeBaseError(f"{where}: entity_id repeats {seen[entity_id]}")
        seen[entity_id] = where
        records.append({"entity_id": entity_id, "name": row["name"].strip(),
                        "description": row.get("description") or "", "wikipedia": row.get("wikipedia") or "",
                        "images": list(images), "where": where, "sources": sources, "image_credits": credits})
    if not records:
        raise KnowledgeBaseError(f"{path}: no entity records")
    return pd.DataFrame(records)


def image_table(records: pd.DataFrame, folder: str | Path, show_progress: bool = True) -> pd.DataFrame:
    """One row per distinct image (by content): path, image_sha256, entity_ids. Every image must exist inside
    ``folder`` and decode; KnowledgeBaseError naming the record otherwise."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise KnowledgeBaseError(f"image folder {folder} does not exist")
    by_sha: dict[str, dict] = {}
    pairs = [(r.where, r.entity_id, p, (r.image_credits or [None] * len(r.images))[i])
             for r in records.itertuples() for i, p in enumerate(r.images)]
    for where, entity_id, relative, credit in tqdm(pairs, desc="checking KB images", unit="image", leave=False,
                                                   disable=not show_progress):
        path = (folder / relative).resolve()
        if not path.is_relative_to(folder):
            raise KnowledgeBaseError(f"{where}: image {relative!r} is outside the image folder {folder}")
        if not path.is_file():
            raise KnowledgeBaseError(f"{where}: image {relative!r} not found in {folder}")
        try:
            with Image.open(path) as image:
                image.verify()
        except (UnidentifiedImageError, OSError, SyntaxError) as error:
            raise KnowledgeBaseError(f"{where}: image {relative!r} cannot be decoded ({error})") from None
        entry = by_sha.setdefault(file_digest(path), {"path": relative, "entity_ids": [], "credit": credit})
        if entity_id not in entry["entity_ids"]:
            entry["entity_ids"].append(entity_id)
    credited = any(e["credit"] is not None for e in by_sha.values())
    return pd.DataFrame([{"path": e["path"], "image_sha256": sha, "entity_ids": e["entity_ids"],
                          **({"credit": e["credit"]} if credited else {})} for sha, e in by_sha.items()])


# --- the index --------------------------------------------------------------------------------------------------
def _flat_index(vectors: np.ndarray) -> faiss.Index:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


@dataclass
class KnowledgeBase:
    """Entities (row e = text-index row e) and images (row r = image-index row r), with their indices."""

    entities: pd.DataFrame  # entity_id, name, description, wikipedia (and the records' ``sources`` columns)
    images: pd.DataFrame  # path, image_sha256, entity_ids (and credit, when the records give one)
    image_index: faiss.Index
    text_index: faiss.Index
    info: dict  # what kb.json records: backbone, backbone_key, dimension, counts, files (sha256 each)
    folder: Path | None = None
    _lemmas: np.ndarray | None = field(default=None, repr=False)

    @property
    def backbone_id(self) -> str:
        return self.info["backbone"]

    @property
    def fingerprint(self) -> str:
        """Identifies the saved contents (indices, tables, backbone): part of every relevance result's version."""
        described = json.dumps({"backbone_key": self.info["backbone_key"], "files": self.info.get("files")},
                               sort_keys=True)
        return hashlib.sha256(described.encode()).hexdigest()[:12]

    @property
    def lemma_embeddings(self) -> np.ndarray:
        """(E, D) unit-norm lemma text embeddings, read back from the text index."""
        if self._lemmas is None:
            self._lemmas = self.text_index.reconstruct_n(0, self.text_index.ntotal)
        return self._lemmas

    def image_entities(self) -> list[list[int]]:
        rows = {entity_id: i for i, entity_id in enumerate(self.entities["entity_id"])}
        return [[rows[e] for e in ids] for ids in self.images["entity_ids"]]

    def has_page(self) -> list[bool]:
        """Per entity row: whether it has Wikipedia text (non-blank ``wikipedia``)."""
        return [bool(text.strip()) for text in self.entities["wikipedia"]]

    def link(self, queries: np.ndarray, k: int = TOP_K, rule: str = DEFAULT_LINKING) -> list[Link]:
        """CAIRE's visual entity linking of (N, D) query image embeddings (Eq. 1 and 2), then the linking ``rule``
        (``benchmark.relevance.linking.choose``: by default the best-ranked candidate with a Wikipedia page)."""
        return link_entities(queries, self.image_index, self.image_entities(), self.lemma_embeddings,
                             self.entities["entity_id"].tolist(), k, self.has_page(), rule)

    def entity_text(self, row: int) -> str:
        """What the judge reads about entity ``row``: its Wikipedia text, or its description if it has none."""
        entity = self.entities.iloc[row]
        return entity["wikipedia"] or entity["description"]

    def require_backbone(self, backbone: Backbone) -> None:
        """KnowledgeBaseError unless ``backbone`` is exactly the one (weights, revision, preprocessing) that built
        this KB."""
        if backbone.key != self.info["backbone_key"]:
            raise KnowledgeBaseError(f"knowledge base {self.folder or ''} was built with backbone "
                                     f"{self.backbone_id!r} = {self.info['backbone_key']}, but {backbone.id!r} = "
                                     f"{backbone.key} is loaded: query embeddings would not be comparable; load the "
                                     "same weights or rebuild the index")

    # --- files ------------------------------------------------------------------------------------------------
    def save(self, out: str | Path) -> Path:
        """Write the folder atomically (built beside ``out``, then renamed); an existing ``out`` is replaced only
        if it is a knowledge base folder."""
        out = Path(out).resolve()
        if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
            raise OutputExists(f"{out} exists and is not a knowledge base folder; choose another output folder")
        with atomic_folder(out, replace=True) as staging:
            faiss.write_index(self.image_index, str(staging / "image.faiss"))
            faiss.write_index(self.text_index, str(staging / "text.faiss"))
            pq.write_table(pa.Table.from_pandas(self.images, preserve_index=False), staging / "images.parquet")
            pq.write_table(pa.Table.from_pandas(self.entities, preserve_index=False), staging / "entities.parquet")
            info = {**self.info, "files": {name: file_digest(staging / name) for name in FILES}}
            (staging / MANIFEST).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            (staging / "README.md").write_text(card(info), encoding="utf-8")
        self.info, self.folder = info, out
        return out

    @classmethod
    def load(cls, folder: str | Path) -> KnowledgeBase:
        """Read a saved folder, verifying every file against the checksums in kb.json."""
        folder = Path(folder)
        info = manifest(folder, FILES)
        entities, images = tables(folder)
        kb = cls(entities, images,
                 faiss.read_index(str(folder / "image.faiss")), faiss.read_index(str(folder / "text.faiss")), info,
                 folder.resolve())
        if (kb.image_index.ntotal, kb.text_index.ntotal) != (len(images), len(kb.entities)) or \
                kb.image_index.d != info["dimension"] or kb.text_index.d != info["dimension"]:
            raise KnowledgeBaseError(f"{folder}: the indices do not match the tables or kb.json; rebuild the index")
        return kb


def card(info: dict, public: dict | None = None) -> str:
    """The folder's card (``README.md``) from what ``kb.json`` records: the tables as configs, the licence declared
    (``unknown`` for a folder that records none), the size by entities, the BibTeX of CAIRE and CultureLens.
    ``public``: for a knowledge base built from public sources, what its card states besides (``public_kb.card``)."""
    from benchmark import __version__
    from benchmark.papers import CAIRE, bibtex

    licence = hub_layout.Licence.of_card(info.get("licence") or {})
    data = hub_layout.card_data(
        pretty_name="CultureLens relevance knowledge base", licence=licence,
        configs={name: {"train": file} for name, file in TABLES.items()}, default=next(iter(TABLES)),
        task_categories=["zero-shot-image-classification"], language=["en"],
        size_categories=[hub_layout.size_category(info["entities"])],
        tags=["culture", "knowledge-base", "entity-linking", "caire"])
    return hub_layout.render_card("relevance_kb", data, version=__version__, info=info, licence=licence,
                                  bibtex=bibtex(CAIRE), public=public)


def build_index(records: str | Path, image_folder: str | Path, out: str | Path,
                backbone: Backbone | str = DEFAULT_BACKBONE, *, registry: dict | None = None,
                device: str | None = None, cache=None, batch_size: int = 32, num_workers: int = 0,
                show_progress: bool = True, licence: hub_layout.Licence | None = None) -> KnowledgeBase:
    """Validate the records and images, embed every distinct image and every lemma with ``backbone`` (a loaded
    Backbone, or a registry id loaded from ``registry`` or the default registry), and save the index to ``out``.
    ``licence``: the records' (kb.json and the card record it; default ``unknown``: not declared).

    ``cache``: an ``EmbeddingCache``; embeddings found there are not recomputed (same keys as the harness's:
    ``benchmark.features.embeddings``).
    """
    from benchmark.progress import Bars

    entities = read_records(records)
    images = image_table(entities, image_folder, show_progress)
    if isinstance(backbone, str):
        from benchmark.encoders import load_backbone
        from benchmark.encoders.spec import load_registry

        backbone = load_backbone(backbone, registry if registry is not None else load_registry(), device)
    need = Need(backbone.id, "image")
    bars = Bars(enabled=show_progress, unit="image")
    features = compute_features(FileSource(Path(image_folder).resolve(), images["path"].tolist()), images, [need],
                                {backbone.id: backbone}, cache, batch_size=batch_size, num_workers=num_workers,
                                progress=bars, stage="embedding KB images")
    names = entities["name"].tolist()
    lemmas: dict[str, np.ndarray] = {}
    chunk = max(batch_size, 256)
    for start in tqdm(range(0, len(names), chunk), desc="embedding KB lemmas", unit="batch", leave=False,
                      disable=not show_progress):
        lemmas.update(embed_texts(backbone, names[start:start + chunk], cache, batch_size))
    bars.close()
    image_vectors = features.arrays[need]
    info = {"format_version": FORMAT_VERSION, "backbone": backbone.id, "backbone_uid": backbone.spec.uid,
            "backbone_key": backbone.key, "dimension": int(image_vectors.shape[1]), "entities": len(entities),
            "images": len(images), "records": Path(records).name, "records_sha256": file_digest(Path(records)),
            "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "licence": (licence or hub_layout.Licence("unknown")).fields()}
    columns = sorted({key for sources in entities["sources"] for key in sources})
    table = entities[["entity_id", "name", "description", "wikipedia"]].reset_index(drop=True)
    for column in columns:  # where each entity was read, when the records say (public_kb's)
        table[column] = [sources.get(column) for sources in entities["sources"]]
    kb = KnowledgeBase(table, images,
                       _flat_index(image_vectors), _flat_index(np.stack([lemmas[n] for n in names])), info)
    kb.save(out)
    return kb

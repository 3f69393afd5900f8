"""Tag each generated image with the CUBE-CSpace artifact it depicts: (continent, country, artifact).

CUBE's diversity track (Kannen et al., arXiv:2407.06863, Sec. 5.2.2 and App. H.2) maps every generated image
to its closest CSpace artifact, then scores the diversity of those tags (``benchmark.metrics.vendi``). The
paper retrieves the top 5 artifacts by mSigLIP image-image similarity against web reference images and asks
GPT-4-Turbo to pick one (~70% accurate on a human-checked sample). CultureLens offers:

- ``ArtifactIndex``: zero-shot retrieval by text. Every artifact is embedded as text ("a photo of
  {artifact}") by a backbone's text encoder; an image is tagged with the artifact whose text embedding has
  the highest cosine with the image embedding of the same backbone, searching only the artifacts of the
  prompt's concept (one exact faiss inner-product index per concept).
- ``VLMTagger``: the paper's second step with an open vision-language model: retrieve the top-k candidates
  with an ``ArtifactIndex``, then let the VLM choose among them (a constrained choice: the option numbers'
  next-token probabilities). It is a producer (``benchmark.features.producers``): given a products cache and
  the images' sha256, its probabilities are cached by image, model, prompt and candidate set.

Both follow the ``Tagger`` protocol; ``tagger_accuracy`` measures any tagger on images whose artifact is known.
A saved index is a Hub dataset folder as it is: its ``README.md`` card (``data_cards/artifact_index.md``) declares
``rows.parquet`` as the config ``artifacts``.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from PIL import Image
from tqdm import tqdm

from benchmark.atomic import atomic_folder
from benchmark.cache import EmbeddingCache
from benchmark.datasets import hub_layout
from benchmark.digests import file_digest
from benchmark.errors import CultureLensError
from benchmark.features.producers import produce

CSPACE_COLUMNS = ("artifact_id", "artifact", "concept", "country", "country_code", "continent")
TAG_COLUMNS = ("image", "rank", "continent", "country", "country_code", "artifact", "artifact_id", "confidence")
DEFAULT_TEMPLATE = "a photo of {artifact}"
MANIFEST = "index.json"
ROWS_FILE = "rows.parquet"
FORMAT_VERSION = 1


class ArtifactIndexError(CultureLensError, ValueError):
    """A CSpace table, text template or saved index folder that cannot make or be an artifact index; the
    message names the column, field or file and what to do."""


TextEncoder = Callable[[list[str]], np.ndarray]  # texts -> (N, D) unit-norm float32


class Tagger(Protocol):
    """Anything that tags images with CSpace artifacts: one row per image, in input order, with columns
    ``TAG_COLUMNS`` (``confidence``: the tagger's own score for its choice, documented by each tagger).

    ``image_embeddings`` are the images' embeddings under the index's backbone; ``images`` the images
    themselves (PIL images or paths), for taggers that look at pixels; ``shas`` (the images' sha256) and
    ``cache`` (a products cache, ``EmbeddingCache.beside``) let such a tagger reuse its earlier outputs. ``index``
    is the ``ArtifactIndex`` the tagger retrieves from (an ``ArtifactIndex`` is its own): its backbone must embed
    the images. ``id`` names the tagger in results."""

    index: ArtifactIndex
    id: str

    def tag(self, image_embeddings: np.ndarray, concepts: Sequence[str],
            images: Sequence[Image.Image | Path] | None = None, *, shas: Sequence[str] | None = None,
            cache: EmbeddingCache | None = None) -> pd.DataFrame: ...


def _unit_rows(x: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: expected a finite (N, D) array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{what}: a row has zero norm, so its cosine is undefined")
    return np.ascontiguousarray(x / norms)


def _check_cspace(cspace: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in CSPACE_COLUMNS if c not in cspace.columns]
    if missing:
        raise ArtifactIndexError(f"the CSpace table lacks the column(s) {missing} (expected {list(CSPACE_COLUMNS)})")
    if cspace.empty:
        raise ArtifactIndexError("the CSpace table is empty: nothing to index")
    rows = cspace[list(CSPACE_COLUMNS)].reset_index(drop=True)
    for column in ("artifact", "concept", "country", "continent"):
        empty = rows[column].isna() | (rows[column].astype(str).str.strip() == "")
        if empty.any():
            raise ArtifactIndexError(f"the CSpace table has {int(empty.sum())} row(s) without {column!r} "
                                     f"(first at row {int(np.flatnonzero(empty)[0])})")
    # Rows grouped by concept (stable): each concept's index holds a contiguous block of rows.
    return rows.sort_values("concept", kind="stable").reset_index(drop=True)


class ArtifactIndex:
    """CSpace artifacts embedded as text, with one exact inner-product (cosine) faiss index per concept.

    ``rows`` (artifact_id, artifact, concept, country, country_code, continent) are grouped by concept;
    concept c's index holds rows ``offsets[c]`` onward, in order. ``backbone_id`` and ``backbone_key``
    (``Backbone.key``: weights, revision, preprocessing) name the encoder whose image embeddings may query it.
    An artifact listed under several countries has one row per country with the same text, so their
    cosines tie and the tag names one of those rows; the artifact kernel still counts them as one artifact.
    """

    def __init__(self, rows: pd.DataFrame, indexes: dict, backbone_id: str, backbone_key: str, template: str):
        self.rows, self.indexes = rows, indexes
        self.backbone_id, self.backbone_key, self.template = backbone_id, backbone_key, template
        starts = rows.reset_index().groupby("concept", sort=False)["index"].min()
        self.offsets: dict[str, int] = {str(c): int(i) for c, i in starts.items()}

    @property
    def concepts(self) -> list[str]:
        return sorted(self.indexes)

    @property
    def dim(self) -> int:
        return next(iter(self.indexes.values())).d

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def index(self) -> ArtifactIndex:
        """Itself: the ``Tagger`` protocol's retrieval index (a ``VLMTagger`` wraps one)."""
        return self

    @property
    def id(self) -> str:
        """Names this index as a tagger in results: its size, backbone id and ``Backbone.key``, and text template."""
        return f"index of {len(self)} artifacts by {self.backbone_id} ({self.backbone_key}), {self.template!r}"

    # --- building -----------------------------------------------------------------------------------
    @classmethod
    def build(cls, cspace: pd.DataFrame, encode: TextEncoder, *, backbone_id: str, backbone_key: str,
              template: str = DEFAULT_TEMPLATE, batch_size: int = 512, progress: bool = True) -> ArtifactIndex:
        """Embed every artifact's text (``template`` with ``{artifact}``, and optionally ``{country}`` and
        ``{concept}``) in batches, each distinct text once, and index the embeddings per concept."""
        import faiss

        rows = _check_cspace(cspace)
        if "{artifact}" not in template:
            raise ArtifactIndexError(f"template {template!r} must contain {{artifact}}")
        try:
            texts = [template.format(artifact=r.artifact, country=r.country, concept=r.concept)
                     for r in rows.itertuples()]
        except (KeyError, IndexError) as error:
            raise ArtifactIndexError(f"template {template!r}: unknown field {error} (known: artifact, country, concept)"
                                     ) from None
        unique, inverse = np.unique(np.array(texts, dtype=object), return_inverse=True)
        batches = [list(unique[i:i + batch_size]) for i in range(0, len(unique), batch_size)]
        embedded = []
        for batch in tqdm(batches, desc=f"embedding {len(unique)} artifact texts", unit="batch", disable=not progress):
            vectors = np.asarray(encode(batch), dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(batch):
                raise ValueError(f"the text encoder returned shape {vectors.shape} for {len(batch)} texts")
            if not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
                raise ValueError("the text encoder must return unit-norm embeddings (cosine = inner product)")
            embedded.append(vectors)
        vectors = np.concatenate(embedded)[inverse]
        indexes = {}
        for concept, block in rows.groupby("concept", sort=False).indices.items():
            index = faiss.IndexFlatIP(vectors.shape[1])
            index.add(np.ascontiguousarray(vectors[block]))
            indexes[str(concept)] = index
        return cls(rows, indexes, backbone_id, backbone_key, template)

    @classmethod
    def from_backbone(cls, cspace: pd.DataFrame, backbone, *, template: str = DEFAULT_TEMPLATE,
                      batch_size: int = 512, progress: bool = True) -> ArtifactIndex:
        """Build with a loaded backbone's text encoder (``benchmark.encoders.load_backbone``), recording its
        registry id and cache key."""
        return cls.build(cspace, backbone.embed_texts, backbone_id=backbone.id, backbone_key=backbone.key,
                         template=template, batch_size=batch_size, progress=progress)

    def mismatch(self, backbone) -> str | None:
        """None if ``backbone`` (a loaded Backbone) is the encoder this index was built with, else why not."""
        if backbone.id != self.backbone_id or backbone.key != self.backbone_key:
            return (f"the artifact index was built with backbone {self.backbone_id!r} ({self.backbone_key}), "
                    f"not {backbone.id!r} ({backbone.key}): rebuild the index with the backbone that embeds "
                    "the images")
        return None

    # --- saving and loading -------------------------------------------------------------------------
    def _metadata(self) -> dict:
        return {"format": FORMAT_VERSION, "backbone_id": self.backbone_id, "backbone_key": self.backbone_key,
                "template": self.template, "rows": len(self.rows), "dim": self.dim,
                "concepts": {c: {"file": f"concept_{i}.faiss", "rows": int(self.indexes[c].ntotal)}
                             for i, c in enumerate(self.concepts)}}

    @staticmethod
    def _checksum(metadata: dict, files: dict[str, str]) -> str:
        content = json.dumps({"metadata": metadata, "files": files}, sort_keys=True)
        return hashlib.sha256(content.encode()).hexdigest()

    def save(self, folder: str | Path, *, licence: hub_layout.Licence | None = None, source: str | None = None
             ) -> Path:
        """Write ``rows.parquet``, one ``concept_<i>.faiss`` per concept and ``index.json`` (backbone id and key,
        template, each file's sha256, and a checksum over all of it), and the card ``README.md`` (``card``),
        atomically (``benchmark.atomic``): a save that fails leaves no index, or the earlier one. An existing
        ``folder`` is replaced only if it is an artifact index (FileExistsError otherwise). ``licence`` and
        ``source``: the CSpace build's licence (default ``unknown``) and where it came from, for the card."""
        import faiss

        folder = Path(folder)
        if folder.exists() and (not folder.is_dir() or (any(folder.iterdir()) and not (folder / MANIFEST).is_file())):
            raise FileExistsError(f"{folder} exists and is not an artifact index; choose another output folder")
        metadata = self._metadata()
        with atomic_folder(folder, replace=True) as tmp:
            self.rows.to_parquet(tmp / ROWS_FILE, index=False)
            for concept, entry in metadata["concepts"].items():
                faiss.write_index(self.indexes[concept], str(tmp / entry["file"]))
            files = {name: file_digest(tmp / name) for name in
                     [ROWS_FILE, *(entry["file"] for entry in metadata["concepts"].values())]}
            manifest = {**metadata, "files": files, "checksum": self._checksum(metadata, files)}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
            (tmp / "README.md").write_text(self.card(licence or hub_layout.Licence("unknown"), source),
                                           encoding="utf-8")
        return folder

    def card(self, licence: hub_layout.Licence, source: str | None = None) -> str:
        """The saved folder's card: ``rows.parquet`` as the config ``artifacts``, the CSpace build's licence, the
        size by rows, the BibTeX of CUBE and CultureLens."""
        from benchmark import __version__
        from benchmark.papers import CUBE, bibtex

        metadata = self._metadata()
        data = hub_layout.card_data(
            pretty_name="CultureLens artifact index", licence=licence, configs={"artifacts": {"train": ROWS_FILE}},
            default="artifacts", task_categories=["zero-shot-image-classification"], language=["en"],
            size_categories=[hub_layout.size_category(len(self.rows))],
            tags=["culture", "cultural-competence", "diversity", "cube"])
        return hub_layout.render_card(
            "artifact_index", data, version=__version__, rows=len(self.rows), concepts=self.concepts,
            text_template=self.template, backbone_id=self.backbone_id, backbone_key=self.backbone_key,
            files=metadata["concepts"], source=source, licence=licence, bibtex=bibtex(CUBE))

    @classmethod
    def load(cls, folder: str | Path) -> ArtifactIndex:
        """Read an index written by ``save``; an ArtifactIndexError names any missing or changed file."""
        import faiss

        folder = Path(folder)
        where = f"artifact index {folder}"
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ArtifactIndexError(f"{where}: no {MANIFEST}; not an artifact index (build one with "
                                     "ArtifactIndex.build(...).save(folder))") from None
        except json.JSONDecodeError as error:
            raise ArtifactIndexError(f"{where}: {MANIFEST} is not valid JSON ({error})") from None
        if manifest.get("format") != FORMAT_VERSION:
            raise ArtifactIndexError(f"{where}: format {manifest.get('format')!r}, this version reads {FORMAT_VERSION}")
        files = manifest.get("files", {})
        metadata = {k: v for k, v in manifest.items() if k not in ("files", "checksum")}
        if cls._checksum(metadata, files) != manifest.get("checksum"):
            raise ArtifactIndexError(f"{where}: {MANIFEST} was edited after saving (its checksum does not match its "
                                     "content); rebuild the index")
        for name, recorded in files.items():
            path = folder / name
            if not path.is_file():
                raise ArtifactIndexError(f"{where}: {name} is missing")
            found = file_digest(path)
            if found != recorded:
                raise ArtifactIndexError(f"{where}: {name} changed after the index was saved (sha256 {found[:12]}..., "
                                         f"recorded {recorded[:12]}...); rebuild the index")
        rows = pd.read_parquet(folder / ROWS_FILE)
        indexes = {concept: faiss.read_index(str(folder / entry["file"]))
                   for concept, entry in manifest["concepts"].items()}
        return cls(rows, indexes, manifest["backbone_id"], manifest["backbone_key"], manifest["template"])

    # --- tagging ------------------------------------------------------------------------------------
    def search(self, image_embeddings: np.ndarray, concepts: Sequence[str], k: int = 1
               ) -> tuple[np.ndarray, np.ndarray]:
        """(cosines, row positions), both (N, k), best first, searching each image among its concept's
        artifacts only; -1 / nan where a concept has fewer than k artifacts."""
        queries = _unit_rows(image_embeddings, "image embeddings")
        concepts = np.asarray(concepts, dtype=object)
        if len(concepts) != len(queries):
            raise ValueError(f"got {len(queries)} image embeddings but {len(concepts)} concepts")
        if queries.shape[1] != self.dim:
            raise ValueError(f"image embeddings have dimension {queries.shape[1]}, the index {self.dim} "
                             f"(backbone {self.backbone_id!r})")
        unknown = sorted(set(concepts) - set(self.indexes), key=str)
        if unknown:
            raise ValueError(f"the artifact index has no concept {unknown[0]!r} (concepts: {', '.join(self.concepts)})")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        scores = np.full((len(queries), k), np.nan, dtype=np.float64)
        rows = np.full((len(queries), k), -1, dtype=np.int64)
        for concept in np.unique(concepts):
            chosen = np.flatnonzero(concepts == concept)
            found_scores, found = self.indexes[concept].search(queries[chosen], k)
            hit = found >= 0
            rows[chosen] = np.where(hit, found + self.offsets[concept], -1)
            scores[chosen] = np.where(hit, found_scores, np.nan)
        return scores, rows

    def tag(self, image_embeddings: np.ndarray, concepts: Sequence[str],
            images: Sequence[Image.Image | Path] | None = None, k: int = 1, *, shas: Sequence[str] | None = None,
            cache: EmbeddingCache | None = None) -> pd.DataFrame:
        """The k best artifacts of each image's concept by cosine (``confidence``), best first: columns
        ``TAG_COLUMNS``, k rows per image (``image``: its position, ``rank``: 0 = best). ``images``, ``shas`` and
        ``cache`` are not read (retrieval uses embeddings only, and is cheap); they are part of the ``Tagger``
        protocol."""
        scores, rows = self.search(image_embeddings, concepts, k)
        image, rank = np.nonzero(rows >= 0)
        table = self.rows.iloc[rows[image, rank]].reset_index(drop=True)
        return table.assign(image=image, rank=rank, confidence=scores[image, rank])[list(TAG_COLUMNS)]


class VLMTagger:
    """CUBE's tagging (App. H.2) with an open vision-language model: an ``ArtifactIndex`` retrieves the top-k
    artifacts of the image's concept, the VLM sees the image and the numbered candidates, and the candidate
    whose number has the highest next-token probability wins (a constrained choice: only the k option
    tokens are compared). ``confidence`` is that probability, renormalised over the k options.

    The model is any ``transformers`` image-text-to-text model with a chat template (e.g. Qwen2.5-VL,
    LLaVA); load it with ``from_pretrained``. ``id`` names it (Hub id or folder, commit, k), so that results
    tagged by it record which tagger made them.
    """

    QUESTION = ("Which {concept} artifact does this image show? Options:\n{options}\n"
                "Answer with the number of the best option only.")

    def __init__(self, index: ArtifactIndex, model, processor, *, k: int = 5, batch_size: int = 4,
                 question: str = QUESTION):
        if not 1 <= k <= 9:
            raise ValueError(f"k must be between 1 and 9 (one digit per option), got {k}")
        self.index, self.model, self.processor = index, model, processor
        self.k, self.batch_size, self.question = k, batch_size, question
        self.id = f"{model.name_or_path}@{getattr(model.config, '_commit_hash', None) or 'local'}, top {k}"
        tokenizer = processor.tokenizer
        tokenizer.padding_side = "left"  # the next-token position is the last one of every row
        self.option_tokens = []
        for option in range(1, k + 1):
            ids = tokenizer.encode(str(option), add_special_tokens=False)
            if len(ids) != 1:
                raise ValueError(f"the VLM's tokenizer splits the option number {option} into {len(ids)} tokens; "
                                 "the constrained choice needs one token per option")
            self.option_tokens.append(ids[0])

    @classmethod
    def from_pretrained(cls, index: ArtifactIndex, model: str, *, revision: str | None = None,
                        device: str | None = None, **options) -> VLMTagger:
        """Load a Hub id or local folder with ``AutoProcessor`` and ``AutoModelForImageTextToText``."""
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float32  # half precision on GPU, as the relevance judge (a 7B VLM fits in 16 GB)
        if device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        try:
            processor = AutoProcessor.from_pretrained(model, revision=revision)
            vlm = AutoModelForImageTextToText.from_pretrained(model, revision=revision, dtype=dtype).to(device).eval()
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(
                f"cannot load the tagging VLM {model!r}: {textwrap.shorten(str(error), 200, placeholder=' ...')} "
                "Provide it by running once with network access (Hugging Face cache), by passing a local "
                "folder saved with save_pretrained, or by setting HF_HOME to a cache that has it.") from None
        return cls(index, vlm, processor, **options)

    # --- the producer (benchmark.features.producers): context = (concept, candidate rows) ----------------
    def prompt(self, context: tuple[str, pd.DataFrame]) -> str:
        """The exact chat text the VLM reads for one image (the image itself stands in as the template's image
        token): the question with the numbered candidates."""
        concept, candidates = context
        options = "\n".join(f"{i}. {r.artifact} ({r.country})" for i, r in enumerate(candidates.itertuples(), 1))
        text = self.question.format(concept=concept, options=options)
        conversation = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        return self.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)

    def label(self, context: tuple[str, pd.DataFrame]) -> str:
        """The candidate set: the concept and each candidate's artifact and country, in option order."""
        concept, candidates = context
        return f"{concept}: " + "; ".join(f"{r.artifact} ({r.country})" for r in candidates.itertuples())

    def produce_batch(self, images: Sequence[Image.Image | Path], contexts: Sequence[tuple[str, pd.DataFrame]]
                      ) -> np.ndarray:
        """(B, k) probability of each option number, the VLM's next-token distribution restricted to the options
        the image has (CUBE App. H.2's choice, constrained); options beyond its candidates get 0."""
        import torch

        opened = [_open(image) for image in images]
        # The template already writes the BOS token: the processor must not add a second one.
        batch = self.processor(text=[self.prompt(c) for c in contexts], images=opened, padding=True,
                               return_tensors="pt", add_special_tokens=False).to(self.model.device)
        with torch.inference_mode():
            logits = self.model(**batch).logits[:, -1, self.option_tokens].float()
        counts = torch.tensor([len(candidates) for _, candidates in contexts], device=logits.device)
        logits = logits.masked_fill(torch.arange(self.k, device=logits.device)[None, :] >= counts[:, None],
                                    float("-inf"))
        return torch.softmax(logits, dim=-1).cpu().numpy()

    def tag(self, image_embeddings: np.ndarray, concepts: Sequence[str],
            images: Sequence[Image.Image | Path] | None = None, *, shas: Sequence[str] | None = None,
            cache: EmbeddingCache | None = None) -> pd.DataFrame:
        """Each image's chosen candidate (``confidence``: its probability among the candidates), ``batch_size``
        images per forward pass; with ``shas`` and ``cache``, probabilities found there are not recomputed and
        the images they belong to are never opened."""
        if images is None or len(images) != len(image_embeddings):
            raise ValueError("the VLM tagger needs the images themselves, one per embedding")
        candidates = self.index.tag(image_embeddings, concepts, k=self.k)
        groups = [group.reset_index(drop=True) for _, group in candidates.groupby("image", sort=True)]
        items = [(i, (concepts[i], group)) for i, group in enumerate(groups)]
        probabilities = produce(self, items, images, shas, cache, chunk=self.batch_size)
        chosen = [group.iloc[[int(np.argmax(p))]].assign(rank=0, confidence=float(np.max(p)))
                  for group, p in zip(groups, probabilities)]
        return pd.concat(chosen, ignore_index=True)[list(TAG_COLUMNS)]


def _open(image: Image.Image | Path) -> Image.Image:
    if isinstance(image, Image.Image):
        return image.convert("RGB")
    with Image.open(image) as opened:
        return opened.convert("RGB")


def tagger_accuracy(predicted: pd.DataFrame, gold: pd.DataFrame) -> dict:
    """Accuracy of a tagger at the three levels of CUBE's kernel, on the images whose artifact is known.

    ``predicted`` (one row per image, e.g. ``Tagger.tag`` with k = 1) and ``gold`` are aligned by row and
    have columns artifact, country, continent; gold rows with a null artifact are left out. Names are
    compared case-insensitively, ignoring surrounding spaces. CUBE reports ~70% for its mapping (App. H.2).
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted tags for {len(gold)} gold tags: align them by image")
    for name, table in (("predicted", predicted), ("gold", gold)):
        missing = {"artifact", "country", "continent"} - set(table.columns)
        if missing:
            raise ValueError(f"{name} tags lack the column(s) {sorted(missing)}")
    known = gold["artifact"].notna().to_numpy()
    result = {"images": int(known.sum())}
    for level in ("artifact", "country", "continent"):
        a = predicted[level].astype(str).str.strip().str.casefold().to_numpy()[known]
        b = gold[level].astype(str).str.strip().str.casefold().to_numpy()[known]
        result[level] = float(np.mean(a == b)) if known.any() else float("nan")
    return result

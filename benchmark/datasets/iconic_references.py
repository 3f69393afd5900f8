"""Iconic references: the prompts and reference images of the CRT iconicity track, as a Hub dataset.

De Rosa Palmini & Cetinic, "The Persistence of Cultural Memory: Investigating
Multimodal Iconicity in Diffusion Models", arXiv:2511.11435, Sec. 3: Wikidata
items (artworks, albums, photographs, films, TV series, animation) whose title
is the prompt; kept when they have more than 20 sitelinks and a title without
named entities (the paper uses spaCy's NER); still references have one
canonical image (Wikidata P18), moving references several depictions, pruned of
images whose mean CLIP similarity to the others is below 0.7.

Input, offline: a records file (JSON Lines, one reference per line) and a
folder with the images it names. A record may name the Wikidata revision it was
read at (``wikidata_revision``): the records file then pins the prompt set,
whatever Wikidata holds later. ``fetch_public`` makes both from Wikidata (the
query is ``sparql/iconic_references.rq``, each item's revision recorded) and
Wikimedia Commons (each image's version, sha256, licence and author), where
there is network: ``culturelens suite build`` runs it as a step, and
``culturelens data build iconic-references --from-sparql`` for this dataset
alone. The paper's moving-image depictions were web images; from Wikidata alone
a moving reference has its P18 images, plus whatever a maintainer adds to its
record.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from benchmark.datasets import hub_layout, names
from benchmark.errors import CultureLensError

HUB_REPO, CONFIG, SPLIT = names.ICONIC_REFERENCES
CONFIG_ALL = "references_all"
PERTURBATIONS = {"synonym": "references_synonym", "description": "references_description"}
MODALITIES = {"artwork": "still", "album": "still", "photograph": "still",
              "film": "moving", "tv_series": "moving", "animation": "moving"}
MODALITY_CLASSES = {"artwork": "Q3305213", "album": "Q482994", "photograph": "Q125191", "film": "Q11424",
                    "tv_series": "Q5398426", "animation": "Q202866"}
"""The Wikidata class (P31) of each modality's items: the query runs once per class."""
MIN_SITELINKS = 20  # kept when sitelinks > 20
QUERY = Path(__file__).with_name("sparql") / "iconic_references.rq"
PINS = "pins/iconic-references.json"  # under the downloads folder: a killed build goes on from the pins it made
PINNED_FIELDS = ("qid", "title", "modality", "sitelinks", "year", "country", "wikidata_revision")
QID = re.compile(r"Q[1-9][0-9]*")


class RecordsError(CultureLensError, ValueError):
    """The records file or its images are not usable; the message names the line and the problem."""


@dataclass
class Reference:
    qid: str
    title: str
    kind: str
    modality: str
    sitelinks: int
    year: int | None
    country: str | None
    images: list[Path]
    image_sources: list[str]
    image_licenses: list[str]
    synonym: str | None
    description: str | None
    removed_by: list[str]
    images_pruned: int = 0
    wikidata_revision: int | None = None

    @property
    def prompt_id(self) -> str:
        return f"ref-{self.qid.lower()}"


def read_records(path: Path, images_root: Path) -> list[Reference]:
    """Parse and check the records file; every problem names its line."""
    references, seen = [], set()
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordsError(f"{where}: not JSON ({error})") from None
        for key in ("qid", "title", "modality", "sitelinks", "images"):
            if key not in record:
                raise RecordsError(f"{where}: missing {key!r}")
        if not QID.fullmatch(str(record["qid"])):
            raise RecordsError(f"{where}: qid {record['qid']!r} is not a Wikidata id")
        if record["qid"] in seen:
            raise RecordsError(f"{where}: {record['qid']} appears twice")
        seen.add(record["qid"])
        modality = record["modality"]
        if modality not in MODALITIES:
            raise RecordsError(f"{where}: modality {modality!r} is not one of {sorted(MODALITIES)}")
        kind = record.get("kind", MODALITIES[modality])
        if kind != MODALITIES[modality]:
            raise RecordsError(f"{where}: kind {kind!r} contradicts modality {modality!r}")
        images = [images_root / name for name in record["images"]]
        for image in images:
            if not image.resolve().is_relative_to(images_root.resolve()):
                raise RecordsError(f"{where}: image {image} is outside the images folder")
            if not image.is_file():
                raise RecordsError(f"{where}: image {image} does not exist")
        count = len(images)
        sources = record.get("image_sources") or [str(name) for name in record["images"]]
        licenses = record.get("image_licenses") or ["unknown"] * count
        if len(sources) != count or len(licenses) != count:
            raise RecordsError(f"{where}: image_sources and image_licenses must have one entry per image")
        references.append(Reference(
            record["qid"], " ".join(str(record["title"]).split()), kind, modality, int(record["sitelinks"]),
            int(record["year"]) if record.get("year") is not None else None, record.get("country"), images,
            list(sources), list(licenses), record.get("synonym"), record.get("description"), [],
            wikidata_revision=int(record["wikidata_revision"]) if record.get("wikidata_revision") is not None
            else None))
    if not references:
        raise RecordsError(f"{path}: no records")
    return references


def apply_sitelinks_filter(references: list[Reference], minimum: int = MIN_SITELINKS) -> None:
    for reference in references:
        if reference.sitelinks <= minimum:
            reference.removed_by.append(f"sitelinks: {reference.sitelinks} <= {minimum}")


def apply_ner_filter(references: list[Reference], model: str) -> None:
    """Drop titles that contain a named entity, with a transformers token-classification model."""
    from transformers import pipeline

    try:
        tagger = pipeline("token-classification", model=model, aggregation_strategy="simple")
    except (OSError, ValueError) as error:
        raise RecordsError(f"cannot load the NER model {model!r}: {str(error).splitlines()[0][:200]}") from None
    for reference, entities in zip(references, tagger([r.title for r in references])):
        if entities:
            names = ", ".join(sorted({e["word"].strip() for e in entities}))
            reference.removed_by.append(f"named_entity: {names}")


def prune_references(embeddings: np.ndarray, threshold: float = 0.7) -> np.ndarray:
    """Keep-mask over a moving reference's images: drop an image whose mean cosine to the others is below
    ``threshold`` (the CRT paper's pruning of web images, 0.7 with CLIP ViT-B/32, arXiv:2511.11435 Sec. 3)."""
    x = np.asarray(embeddings, dtype=np.float32)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    n = len(x)
    if n < 3:
        return np.ones(n, dtype=bool)
    similarity = x @ x.T
    mean_to_rest = (similarity.sum(axis=1) - np.diag(similarity)) / (n - 1)
    return mean_to_rest >= threshold


def apply_pruning(references: list[Reference], backbone, threshold: float, batch_size: int = 32) -> None:
    """Moving references: drop depictions whose mean similarity to the others is below ``threshold``."""
    import torch
    from PIL import Image


    for reference in references:
        if reference.kind != "moving" or len(reference.images) < 3 or reference.removed_by:
            continue
        embeddings = []
        for start in range(0, len(reference.images), batch_size):
            pixels = []
            for path in reference.images[start:start + batch_size]:
                with Image.open(path) as image:
                    pixels.append(backbone.prepare(image.convert("RGB"), "image"))
            embeddings.append(backbone.embed(torch.stack(pixels)))
        keep = prune_references(np.concatenate(embeddings), threshold)
        reference.images_pruned = int((~keep).sum())
        reference.images = [x for x, k in zip(reference.images, keep) if k]
        reference.image_sources = [x for x, k in zip(reference.image_sources, keep) if k]
        reference.image_licenses = [x for x, k in zip(reference.image_licenses, keep) if k]


def _year(date: str | None) -> int | None:
    """The year of a Wikidata time value ('1889-06-01T00:00:00Z', '-0500-01-01T...'); None if absent."""
    match = re.match(r"([+-]?\d+)-", date or "")
    return int(match.group(1)) if match else None


def records_from_sparql(bindings: list[dict]) -> list[dict]:
    """Rows of a Wikidata SPARQL JSON result (``results.bindings``) -> records (images named by Commons file)."""
    records: dict[str, dict] = {}
    for row in bindings:
        qid = row["item"]["value"].rsplit("/", 1)[-1]
        title = row.get("itemLabel", {}).get("value", "")
        if not QID.fullmatch(qid) or not title or QID.fullmatch(title):
            continue  # no English label
        record = records.setdefault(qid, {
            "qid": qid, "title": title, "modality": row["modality"]["value"],
            "sitelinks": int(row["sitelinks"]["value"]),
            "year": _year(row.get("date", {}).get("value")),
            "country": row.get("countryLabel", {}).get("value"), "images": [], "image_sources": [],
            **({"wikidata_revision": int(row["revision"]["value"])} if "revision" in row else {})})
        file_name = urllib.parse.unquote(row["image"]["value"].rsplit("/", 1)[-1])
        if file_name not in record["image_sources"]:
            record["image_sources"].append(file_name)
            suffix = Path(file_name).suffix.lower() or ".jpg"
            record["images"].append(f"{qid}/{hashlib.sha1(file_name.encode()).hexdigest()[:10]}{suffix}")
    return list(records.values())


def fetch_public(downloads, *, pins: dict | None = None, progress: bool = True) -> tuple[Path, Path, dict]:
    """The references from Wikidata and Wikimedia Commons, as a records file and an images folder under
    ``downloads`` (``benchmark.downloads.Downloads``), and the pins they were made at: ``pins`` when given (an
    earlier build's: its records, each at its Wikidata revision, and every image's Commons version and sha256),
    else those a killed build left in the downloads folder, else new ones (the SPARQL query run now, each
    image's current version). Returns (records file, images root, pins)."""
    from benchmark.datasets.wikimedia import Commons, ImagePin, Wikidata, fetch_images, file_name
    from benchmark.downloads import Step

    template = QUERY.read_text(encoding="utf-8")
    query_sha256 = hashlib.sha256(template.encode("utf-8")).hexdigest()
    if pins is None:
        kept = downloads.load_json(PINS)
        pins = kept if isinstance(kept, dict) and kept.get("query_sha256") == query_sha256 else None
    if pins is None:
        wikidata = Wikidata()
        bindings = [row for modality, qid in MODALITY_CLASSES.items()  # one query per class: each within the limit
                    for row in wikidata.sparql(template.replace("{class}", qid).replace("{modality}", modality),
                                               what=f"the iconic references' query for {modality} (wd:{qid})")]
        rows = sorted(records_from_sparql(bindings), key=lambda record: int(record["qid"][1:]))
        names = sorted({file_name(source) for row in rows for source in row["image_sources"]})
        step = Step("iconic-references: Commons files", len(names), enabled=progress)
        try:
            files = Commons().current(names, step)
        finally:
            step.close()
        records = []
        for row in rows:
            images = [files[file_name(s)].to_dict() for s in row["image_sources"] if file_name(s) in files]
            if images:  # a file Commons lacks, or that is no image, is left out; a record without one too
                records.append({**{k: row.get(k) for k in PINNED_FIELDS}, "images": images})
        pins = {"query_sha256": query_sha256, "records": records}
        downloads.save_json(PINS, pins)
    images = [ImagePin.from_dict(i) for record in pins["records"] for i in record["images"]]
    fetched = {(p.file, p.version): p for p in fetch_images(
        images, downloads, what="iconic-references", progress=progress,
        refresh_hint="; rebuild from the current sources with --refresh iconic-references to pin the new bytes")}
    lines = []
    for record in pins["records"]:
        record["images"] = [fetched[(i["file"], i["version"])].to_dict() for i in record["images"]]
        shown = [ImagePin.from_dict(i) for i in record["images"]]
        lines.append({**{k: record.get(k) for k in PINNED_FIELDS}, "images": [p.local for p in shown],
                      "image_sources": [f"File:{p.file}" for p in shown],
                      "image_licenses": [p.credit for p in shown]})
    downloads.save_json(PINS, pins)
    records_path = downloads.path("iconic-references/records.jsonl")
    records_path.parent.mkdir(parents=True, exist_ok=True)
    records_path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return records_path, downloads.root, pins


def fetch_from_wikidata(records_path: Path, images_root: Path) -> int:
    """``--from-sparql``: run the query, download each image from Wikimedia Commons into ``images_root``
    (resumable, each recorded with its version, sha256, licence and author), write the records file."""
    from benchmark.downloads import Downloads

    made, _, pins = fetch_public(Downloads(images_root))
    Path(records_path).write_text(made.read_text(encoding="utf-8"), encoding="utf-8")
    return len(pins["records"])


def _features() -> datasets.Features:
    return datasets.Features({
        "prompt_id": datasets.Value("string"), "prompt": datasets.Value("string"),
        "prompt_original": datasets.Value("string"), "qid": datasets.Value("string"),
        "title": datasets.Value("string"), "kind": datasets.Value("string"), "modality": datasets.Value("string"),
        "sitelinks": datasets.Value("int32"), "year": datasets.Value("int32"), "country": datasets.Value("string"),
        "images": datasets.List(datasets.Image()), "image_sources": datasets.List(datasets.Value("string")),
        "image_licenses": datasets.List(datasets.Value("string")), "images_pruned": datasets.Value("int32"),
        "wikidata_revision": datasets.Value("int64"),
    })


def _row(reference: Reference, prompt: str) -> dict:
    return {"prompt_id": reference.prompt_id, "prompt": prompt, "prompt_original": reference.title,
            "qid": reference.qid, "title": reference.title, "kind": reference.kind, "modality": reference.modality,
            "sitelinks": reference.sitelinks, "year": reference.year, "country": reference.country,
            "images": [{"bytes": p.read_bytes(), "path": p.name} for p in reference.images],
            "image_sources": reference.image_sources, "image_licenses": reference.image_licenses,
            "images_pruned": reference.images_pruned, "wikidata_revision": reference.wikidata_revision}


LICENCE = hub_layout.Licence("other", "per-image-licences", "https://commons.wikimedia.org/wiki/Commons:Licensing")
"""Each image keeps its own licence (``image_licenses``), as on Wikimedia Commons, where the images come from."""


def build(records_path: Path, images_root: Path, out: Path, *, ner_model: str | None = None, prune_backbone=None,
          prune_threshold: float = 0.7, repo: str = HUB_REPO,
          max_shard_bytes: int = hub_layout.MAX_SHARD_BYTES) -> dict:
    """Build the dataset folder; ``prune_backbone`` is a loaded backbone (None: no pruning, and the card says so);
    ``max_shard_bytes``: a Parquet shard's size at most (the reference images are most of it)."""
    from benchmark import __version__
    from benchmark.papers import CRT, bibtex

    references = read_records(Path(records_path), Path(images_root))
    apply_sitelinks_filter(references)
    if ner_model:
        apply_ner_filter([r for r in references if not r.removed_by], ner_model)
    if prune_backbone is not None:
        apply_pruning(references, prune_backbone, prune_threshold)
    kept = [r for r in references if not r.removed_by]
    if not kept:
        raise RecordsError(f"{records_path}: no reference passes the filters")
    tables = {(CONFIG, SPLIT): datasets.Dataset.from_list([_row(r, r.title) for r in kept], features=_features())}
    perturbed = {}
    for field, config in PERTURBATIONS.items():
        rows = [_row(r, getattr(r, field)) for r in kept if getattr(r, field)]
        if rows:
            tables[(config, SPLIT)] = datasets.Dataset.from_list(rows, features=_features())
            perturbed[config] = len(rows)
    everything = [{"prompt_id": r.prompt_id, "qid": r.qid, "title": r.title, "kind": r.kind, "modality": r.modality,
                   "sitelinks": r.sitelinks, "kept": not r.removed_by, "removed_by": r.removed_by,
                   "images": len(r.images), "images_pruned": r.images_pruned} for r in references]
    tables[(CONFIG_ALL, SPLIT)] = datasets.Dataset.from_list(everything)

    removed = Counter(r.removed_by[0].split(":")[0] for r in references if r.removed_by)  # by first reason
    data = hub_layout.card_data(
        pretty_name="Iconic references (CultureLens build)", licence=LICENCE,
        configs={config: [split] for config, split in tables}, default=CONFIG,
        task_categories=["text-to-image"], language=["en"], tags=["culture", "iconicity", "wikidata", "benchmark"],
        size_categories=[hub_layout.size_category(len(references))])  # references_all: every record
    card = hub_layout.render_card(
        "iconic_references", data, version=__version__, repo=repo, config=CONFIG, config_all=CONFIG_ALL,
        split=SPLIT, n_kept=len(kept), n_records=len(references),
        by_kind=Counter(r.kind for r in kept), by_modality=Counter(r.modality for r in kept),
        images=sum(len(r.images) for r in kept), pruned=sum(r.images_pruned for r in references),
        removed=dict(removed), ner_model=ner_model, prune=prune_backbone.spec.uid if prune_backbone else None,
        prune_threshold=prune_threshold, perturbed=perturbed, min_sitelinks=MIN_SITELINKS,
        licenses=Counter(lic for r in kept for lic in r.image_licenses).most_common(10), licence=LICENCE,
        bibtex=bibtex(CRT))
    hub_layout.write_folder(out, tables, card, max_shard_bytes=max_shard_bytes)
    return {"records": len(references), "kept": len(kept), "removed": dict(removed), "perturbed": perturbed,
            "images": sum(len(r.images) for r in kept), "pruned": sum(r.images_pruned for r in references),
            "out": str(out)}

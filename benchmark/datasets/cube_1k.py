"""CUBE-1K: the cultural-awareness prompts of CUBE, checked, cleaned and laid out as a Hub dataset.

Source: "Beyond Aesthetics: Cultural Competence in Text-to-Image Models",
Kannen, Ahmad, Andreetto, Prabhakaran, Prabhu, Dieng, Bhattacharyya, Dave
(NeurIPS 2024 Datasets and Benchmarks, arXiv:2407.06863); file
``dataset/cube_1k.json`` of github.com/google-deepmind/cube (CC BY-NC-SA 4.0).

The upstream file has data-quality defects. Each check below was written from
what the file actually contains (see ``data_cards/cube_1k.md`` for counts and
examples). The builder fixes a defect only when the fix is unambiguous, records
every defect code on the affected record, keeps the upstream record verbatim
in ``source_record`` and never drops a record: the ``cube_1k_all`` config holds
every upstream row; the ``cube_1k`` config (the prompt set a submission
answers) holds one row per distinct prompt, and every row left out of it says
which row it duplicates (``duplicate_of``). The ``cube_1k_demo`` config is a
stratified handful of those prompts (``demo_prompts``): a submission small
enough to make and score in minutes, ranked only among demo submissions
(its dataset id is part of every score's protocol).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import unicodedata
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark import geo
from benchmark.datasets import names
from benchmark.errors import CultureLensError

if TYPE_CHECKING:
    import datasets

# ``datasets`` and ``hub_layout`` (which loads huggingface_hub) are imported where a build needs them: the CLI
# reads this module's names to describe its options, and `culturelens --help` must not wait for them.

DEFAULT_SOURCE = names.CUBE_1K_SOURCE  # the authors' file at the commit the suite pins
HUB_REPO, CONFIG, SPLIT = names.CUBE_1K
CONFIG_ALL = "cube_1k_all"
CONFIG_DEMO = "cube_1k_demo"
DEMO_PER_CELL = 3  # prompts per country x concept in the demo config
CONCEPTS = ("cuisine", "landmarks", "art")

# Upstream keys for the Wikidata properties, and the column names we publish them under.
PROPERTIES = {
    "P31": "p31_instance_of",
    "P279": "p279_subclass_of",
    "P495": "p495_country_of_origin",
    "P17": "p17_country",
    "P2012": "p2012_cuisine",
    "P361": "p361_part_of",
}
UPSTREAM_KEYS = ("id", "name", "country", "domain", "prompt", *PROPERTIES)

# Wikidata items of the CUBE countries, to check P495/P17 against the record's country.
COUNTRY_QIDS = {
    "BR": "Q155", "FR": "Q142", "IN": "Q668", "IT": "Q38",
    "JP": "Q17", "NG": "Q1033", "TR": "Q43", "US": "Q30",
}

QID = re.compile(r"Q[1-9][0-9]*")
MISSING_MARKERS = ("nan", "", " ")

# The prompt templates the upstream file uses (they differ from Table 12 of the paper:
# ", realistic" suffix, demonyms for cuisine and clothing). {a} = artifact, {c} =
# country, {d} = demonym. A prompt that fits none of them is flagged, not rewritten.
TEMPLATES = {
    "cuisine": ("cuisine", "A high resolution image of {a} from {d} cuisine, realistic"),
    "landmarks": ("landmarks", "A panoramic view of {a} in {c}, realistic"),
    "art_performance": ("art", "An image of {a} performance from {c}, realistic"),
    "art_clothing": ("art", "An image of {a} from {d} clothing, realistic"),
    "art_painting": ("art", "An image of {a} painting from {c}, realistic"),
}


# Each defect class: (what was found, what the builder did). The card prints these.
DEFECTS = {
    "nonstandard_concept_label": (
        "`domain` is 'landscapes', not one of cuisine / landmarks / art; every such record uses the "
        "landmarks template ('A panoramic view of ...').",
        "fixed: concept set to 'landmarks'",
    ),
    "stray_whitespace": (
        "leading, trailing or doubled spaces in the artifact name or the prompt",
        "fixed: whitespace collapsed and stripped",
    ),
    "prompt_missing_space": (
        "the artifact name is glued to the next template word ('matefrom Brazilian cuisine')",
        "fixed: the space restored (the prompt then matches its template exactly)",
    ),
    "prompt_names_other_artifact": (
        "the prompt depicts a different artifact than the record's name, QID and concept "
        "(e.g. landmark records whose prompt names a dish)",
        "fixed: prompt rebuilt from the concept's template with the record's artifact; "
        "`prompt_original` keeps the upstream text",
    ),
    "qid_shifted_into_p361": (
        "`id` is blank or holds the artifact name while P361 holds a bare QID (or 'LLM') instead of a "
        "list: the record's identifier slid one column (e.g. Eiffel Tower: id ' ', P361 'Q243')",
        "fixed: the value moved to `wikidata_qid`; P361 of these records is unknown (null)",
    ),
    "qid_missing": (
        "`id` is blank and no QID can be recovered from the record",
        "left: `wikidata_qid` is null and `source` is 'unknown'",
    ),
    "malformed_property_token": (
        "a Wikidata property list holds a token that is not a QID (e.g. '{=#3')",
        "fixed: the token dropped from the list (the verbatim record is in `source_record`)",
    ),
    "blank_missing_marker": (
        "a property is '' or ' ' where the file elsewhere writes 'nan' for a missing value",
        "fixed: read as missing (null)",
    ),
    "country_property_conflict": (
        "P495 (country of origin) or P17 (country) name countries, none of them the record's country",
        "left: the record keeps its upstream country",
    ),
    "duplicate_record": (
        "the same artifact (country, concept, name, QID) appears more than once",
        "fixed: the first occurrence stays in `cube_1k`; repeats are only in `cube_1k_all`, with "
        "`duplicate_of`",
    ),
    "duplicate_prompt_distinct_items": (
        "the same prompt text stands for different Wikidata items (same label, different QIDs)",
        "left unresolved: a prompt cannot tell the items apart; the first stays in `cube_1k`, the "
        "others are only in `cube_1k_all`, with `duplicate_of`",
    ),
    "artifact_in_several_countries": (
        "the same artifact name is listed under more than one country",
        "left: each country keeps its record",
    ),
    "nonstandard_prompt_template": (
        "the prompt fits none of the file's templates for its concept (e.g. 'Image of gele head tie "
        "from Nigeria clothing')",
        "left: the wording is the authors' and is not unambiguous to rewrite",
    ),
    "prompt_doubled_word": (
        "the artifact name ends with the template's own noun, so the prompt says it twice ('futurism "
        "painting painting', 'fuji performances performance')",
        "fixed: the template's repeated noun dropped",
    ),
    "country_missing_article": (
        "the template puts a country name that takes 'the' in English without it ('in United States')",
        "fixed: 'the' inserted before the country name",
    ),
    "lowercase_demonym": (
        "the artifact name writes a country name or demonym of the file in lower case ('turkish delight')",
        "fixed: that word capitalised, in the artifact name and the prompt",
    ),
    "near_duplicate_artifact": (
        "two artifacts of one country and concept whose names differ only by diacritics and case, or by one "
        "letter ('kisir' / 'kısır', 'fes' / 'fez'): possibly one artifact spelled two ways",
        "left: both prompts stay (one letter can also tell two dishes apart); listed for review",
    ),
}

# Country names that take the definite article in English ("the United States", "the Philippines").
ARTICLE_COUNTRY = re.compile(r"\b(?:United|Republic|Kingdom|States|Islands|Emirates|Netherlands|Philippines)\b")


class CubeSourceError(CultureLensError, RuntimeError):
    """The CUBE-1K source cannot be read or does not look like the authors' file."""


@dataclass
class CubeRecord:
    """One CUBE-1K record after checking: the published row plus its defects."""

    source_index: int
    source_record: dict
    artifact: str
    country: str
    country_code: str
    continent: str
    concept: str
    prompt_original: str
    prompt: str
    template: str
    wikidata_qid: str | None
    source: str  # "wikidata", "llm" or "unknown"
    properties: dict[str, list[str] | None]
    defects: list[str] = field(default_factory=list)
    prompt_id: str = ""
    duplicate_of: str | None = None
    similar_to: str = ""  # for near_duplicate_artifact: the other spelling (the card's examples; not published)

    def row(self) -> dict:
        """The record as a dataset row (column order = the card's schema order)."""
        return {
            "prompt_id": self.prompt_id,
            "prompt": self.prompt,
            "prompt_original": self.prompt_original,
            "artifact": self.artifact,
            "country": self.country,
            "country_code": self.country_code,
            "continent": self.continent,
            "concept": self.concept,
            "template": self.template,
            "wikidata_qid": self.wikidata_qid,
            "source": self.source,
            **{PROPERTIES[k]: v for k, v in self.properties.items()},
            "defects": sorted(set(self.defects)),
            "duplicate_of": self.duplicate_of,
            "source_index": self.source_index,
            "source_record": json.dumps(self.source_record, ensure_ascii=False, sort_keys=True),
        }


def read_source(source: str, how: str = "--source PATH") -> list[dict]:
    """Read the upstream JSON from a path or an http(s) URL and check its shape; ``how``: how the caller is given
    a local copy instead, named when the source cannot be read (``data build``'s flag by default)."""
    try:
        if re.match(r"https?://", source):
            with urllib.request.urlopen(source, timeout=30) as response:  # noqa: S310 (http(s) only)
                text = response.read().decode("utf-8")
        else:
            text = Path(source).read_text(encoding="utf-8")
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise CubeSourceError(
            f"cannot read the CUBE-1K source {source}: {getattr(error, 'reason', error)}; offline, give a local "
            f"copy of the authors' cube_1k.json: {how}"
        ) from None
    except UnicodeDecodeError as error:
        raise CubeSourceError(f"{source}: not UTF-8 text ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CubeSourceError(f"{source}: not JSON ({error})") from None
    if not isinstance(data, list) or not data:
        raise CubeSourceError(f"{source}: expected a non-empty JSON list of records")
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise CubeSourceError(f"{source}: record {index} is not an object")
        missing = [k for k in UPSTREAM_KEYS if k not in record]
        if missing:
            raise CubeSourceError(f"{source}: record {index} lacks the keys {missing}")
        bad = [k for k in UPSTREAM_KEYS if not isinstance(record[k], str)]
        if bad:
            raise CubeSourceError(f"{source}: record {index}: {bad} are not strings")
    return data


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _key(text: str) -> str:
    return _squash(text).casefold()


def _parse_property(value: str) -> tuple[list[str] | None, list[str]]:
    """Upstream property string -> (QID list or None when missing, defect codes)."""
    if value in MISSING_MARKERS:
        return None, (["blank_missing_marker"] if value != "nan" else [])
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        items = None
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise CubeSourceError(f"property value {value!r} is neither a QID list nor a missing marker")
    qids = [t for t in items if QID.fullmatch(t)]
    return qids, (["malformed_property_token"] if len(qids) != len(items) else [])


def _demonyms(raw: list[dict]) -> dict[str, str]:
    """Each country's demonym as the file uses it in cuisine and clothing prompts (most common wins)."""
    seen: dict[str, Counter] = defaultdict(Counter)
    for record in raw:
        match = re.search(r"from (\w+) (?:cuisine|clothing),", record["prompt"])
        if match:
            seen[record["country"]][match.group(1)] += 1
    return {country: counts.most_common(1)[0][0] for country, counts in seen.items()}


def _match_template(prompt: str, artifact: str, country: str, demonym: str | None) -> str | None:
    for name, (_, template) in TEMPLATES.items():
        if prompt == template.format(a=artifact, c=country, d=demonym or country):
            return name
    return None


def _clean_prompt(record: dict, artifact: str, concept: str, demonym: str | None, defects: list[str]) -> tuple[str, str]:
    """Return (cleaned prompt, template name or 'nonstandard'), appending defect codes."""
    country = record["country"]
    prompt = _squash(record["prompt"])
    if prompt != record["prompt"] or artifact != record["name"]:
        defects.append("stray_whitespace")
    template = _match_template(prompt, artifact, country, demonym)
    if template:
        return prompt, template
    if artifact.casefold() in prompt.casefold():
        # Glued words: the only change is one space after the artifact, and it makes the prompt
        # match a template exactly. Anything else is not unambiguous and stays as written.
        at = prompt.casefold().index(artifact.casefold()) + len(artifact)
        if at < len(prompt) and prompt[at] != " ":
            spaced = prompt[:at] + " " + prompt[at:]
            template = _match_template(spaced, artifact, country, demonym)
            if template:
                defects.append("prompt_missing_space")
                return spaced, template
        defects.append("nonstandard_prompt_template")
        return prompt, "nonstandard"
    # The prompt does not mention the record's artifact. If it fits a template of the
    # record's concept with some other filler, it names another artifact: rebuild it.
    for name, (template_concept, template) in TEMPLATES.items():
        pattern = re.escape(template).replace(re.escape("{a}"), "(.+)")
        pattern = pattern.replace(re.escape("{c}"), re.escape(country))
        pattern = pattern.replace(re.escape("{d}"), re.escape(demonym or country))
        if template_concept == concept and re.fullmatch(pattern, prompt):
            defects.append("prompt_names_other_artifact")
            return template.format(a=artifact, c=country, d=demonym or country), name
    defects.append("nonstandard_prompt_template")
    return prompt, "nonstandard"


def _capitalise_proper_words(artifact: str, prompt: str, proper: set[str], defects: list[str]) -> tuple[str, str]:
    """Capitalise words of the artifact name that are a country name or demonym of the file written in lower case
    ('turkish delight' -> 'Turkish delight'), in the name and in the prompt; return (artifact, prompt)."""
    lookup = {name.casefold(): name for name in proper if " " not in name}
    fixed = " ".join(lookup.get(word, word) if word.islower() else word for word in artifact.split(" "))
    if fixed == artifact:
        return artifact, prompt
    defects.append("lowercase_demonym")
    return fixed, prompt.replace(artifact, fixed, 1)


def _drop_doubled_word(prompt: str, artifact: str, defects: list[str]) -> str:
    """Drop the template noun that repeats the artifact's last word ('futurism painting painting' -> 'futurism
    painting'; a plural 's' is ignored: 'fuji performances performance' -> 'fuji performances')."""
    at = prompt.find(artifact)
    following = re.match(r" (\w+)", prompt[at + len(artifact):]) if at >= 0 else None
    last = artifact.split(" ")[-1].casefold().removesuffix("s")
    if following is None or following.group(1).casefold().removesuffix("s") != last:
        return prompt
    defects.append("prompt_doubled_word")
    end = at + len(artifact)
    return prompt[:end] + prompt[end + len(following.group(0)):]


def _add_country_article(prompt: str, country: str, template: str, defects: list[str]) -> str:
    """Insert 'the' before a country name that takes it where a template names the country ('in United
    States,' -> 'in the United States,')."""
    if template not in TEMPLATES or "{c}" not in TEMPLATES[template][1] or not ARTICLE_COUNTRY.search(country):
        return prompt
    head, found, tail = prompt.rpartition(f" {country},")
    if not found or head.endswith(" the"):
        return prompt
    defects.append("country_missing_article")
    return f"{head} the {country},{tail}"


def _identify(record: dict, properties: dict, defects: list[str]) -> tuple[str | None, str]:
    """Return (wikidata_qid, source) and fix the id-shifted-into-P361 defect in `properties`."""
    raw_id, raw_p361 = record["id"], record["P361"]
    if QID.fullmatch(raw_id):
        return raw_id, "wikidata"
    if raw_id == "LLM":
        return None, "llm"
    shifted = raw_p361 if (QID.fullmatch(raw_p361) or raw_p361 == "LLM") else None
    if shifted and (raw_id.strip() == "" or _key(raw_id) == _key(record["name"])):
        defects.append("qid_shifted_into_p361")
        properties["P361"] = None
        return (None, "llm") if shifted == "LLM" else (shifted, "wikidata")
    defects.append("qid_missing")
    return None, "unknown"


def check_record(index: int, record: dict, demonyms: dict[str, str]) -> CubeRecord:
    """Check one upstream record, fix what is unambiguous, and list its defects."""
    defects: list[str] = []
    artifact = _squash(record["name"])
    domain = record["domain"].strip()
    if domain == "landscapes":
        defects.append("nonstandard_concept_label")
        concept = "landmarks"
    elif domain in CONCEPTS:
        concept = domain
    else:
        raise CubeSourceError(f"record {index} ({artifact!r}): unknown domain {domain!r}")

    try:
        code = geo.country_code(record["country"])
    except geo.UnknownCountry as error:
        raise CubeSourceError(f"record {index} ({artifact!r}): {error}") from None
    properties: dict[str, list[str] | None] = {}
    for key in PROPERTIES:
        if key == "P361" and (QID.fullmatch(record[key]) or record[key] == "LLM"):
            properties[key] = None  # a shifted identifier, handled by _identify
            continue
        properties[key], found = _parse_property(record[key])
        defects.extend(found)
    qid, source = _identify(record, properties, defects)

    countries = set((properties["P495"] or []) + (properties["P17"] or []))
    known = set(COUNTRY_QIDS.values())
    if countries & known and COUNTRY_QIDS.get(code) not in countries:
        defects.append("country_property_conflict")

    prompt, template = _clean_prompt(record, artifact, concept, demonyms.get(record["country"]), defects)
    artifact, prompt = _capitalise_proper_words(artifact, prompt, {*demonyms, *demonyms.values()}, defects)
    prompt = _drop_doubled_word(prompt, artifact, defects)
    prompt = _add_country_article(prompt, record["country"], template, defects)
    return CubeRecord(
        source_index=index,
        source_record=record,
        artifact=artifact,
        country=record["country"],
        country_code=code,
        continent=geo.continent(code),
        concept=concept,
        prompt_original=record["prompt"],
        prompt=prompt,
        template=template,
        wikidata_qid=qid,
        source=source,
        properties=properties,
        defects=defects,
    )


def _assign_ids_and_duplicates(records: list[CubeRecord]) -> None:
    """Stable ids from (country, concept, artifact name); duplicates point at their first row.

    The id does not depend on the row's position, the QID or the prompt wording, so a rebuild
    after upstream fixes keeps the ids of unchanged artifacts. Repeats of one artifact key get
    a ``-2``, ``-3`` suffix in file order.
    """
    seen: Counter = Counter()
    for record in records:
        key = f"{record.country_code}|{record.concept}|{_key(record.artifact)}"
        seen[key] += 1
        digest = hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]
        suffix = f"-{seen[key]}" if seen[key] > 1 else ""
        record.prompt_id = f"{record.country_code.lower()}-{record.concept}-{digest}{suffix}"

    first_by_prompt: dict[str, CubeRecord] = {}
    for record in records:
        first = first_by_prompt.setdefault(_key(record.prompt), record)
        if first is record:
            continue
        record.duplicate_of = first.prompt_id
        same_item = record.wikidata_qid == first.wikidata_qid or None in (record.wikidata_qid, first.wikidata_qid)
        code = "duplicate_record" if same_item else "duplicate_prompt_distinct_items"
        record.defects.append(code)
        if code not in first.defects:
            first.defects.append(code)

    countries_by_name: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in records:
        countries_by_name[(record.concept, _key(record.artifact))].add(record.country_code)
    for record in records:
        if len(countries_by_name[(record.concept, _key(record.artifact))]) > 1:
            record.defects.append("artifact_in_several_countries")


def _fold(name: str) -> str:
    """Case- and diacritic-free form of a name ('Kısır' -> 'kisir'; Turkish dotless i read as i)."""
    decomposed = unicodedata.normalize("NFKD", name.replace("ı", "i").replace("İ", "I"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether one letter substituted, inserted or deleted turns ``a`` into ``b`` (and they differ)."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long = sorted((a, b), key=len)
    return len(long) - len(short) == 1 and any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _flag_near_duplicates(records: list[CubeRecord]) -> None:
    """Flag prompt-set artifacts of one country and concept whose folded names are equal or one edit apart."""
    groups: dict[tuple[str, str], list[CubeRecord]] = defaultdict(list)
    for record in records:
        if record.duplicate_of is None:
            groups[(record.country_code, record.concept)].append(record)
    for group in groups.values():
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                a, b = _fold(first.artifact), _fold(second.artifact)
                if a == b or _one_edit_apart(a, b):
                    for record in (first, second):
                        if "near_duplicate_artifact" not in record.defects:
                            record.defects.append("near_duplicate_artifact")
                    second.similar_to = first.artifact


def check_records(raw: list[dict]) -> list[CubeRecord]:
    """Check every upstream record (in file order) and assign ids and duplicate links."""
    demonyms = _demonyms(raw)
    records = [check_record(i, r, demonyms) for i, r in enumerate(raw)]
    _assign_ids_and_duplicates(records)
    _flag_near_duplicates(records)
    return records


def features() -> datasets.Features:
    """The published schema (see the card's Schema section)."""
    import datasets

    qids = datasets.Sequence(datasets.Value("string"))
    return datasets.Features({
        "prompt_id": datasets.Value("string"),
        "prompt": datasets.Value("string"),
        "prompt_original": datasets.Value("string"),
        "artifact": datasets.Value("string"),
        "country": datasets.Value("string"),
        "country_code": datasets.Value("string"),
        "continent": datasets.Value("string"),
        "concept": datasets.Value("string"),
        "template": datasets.Value("string"),
        "wikidata_qid": datasets.Value("string"),
        "source": datasets.Value("string"),
        **{column: qids for column in PROPERTIES.values()},
        "defects": datasets.Sequence(datasets.Value("string")),
        "duplicate_of": datasets.Value("string"),
        "source_index": datasets.Value("int32"),
        "source_record": datasets.Value("string"),
    })


def _example(record: CubeRecord, code: str) -> str:
    where = f"`{record.prompt_id}` ({record.artifact!r}, {record.country}, row {record.source_index})"
    if code in ("stray_whitespace", "prompt_missing_space", "prompt_names_other_artifact", "prompt_doubled_word",
                "country_missing_article", "lowercase_demonym"):
        return f"{where}: {record.prompt_original!r} -> {record.prompt!r}"
    if code == "nonstandard_concept_label":
        return f"{where}: domain {record.source_record['domain']!r} -> concept {record.concept!r}"
    if code == "qid_shifted_into_p361":
        return f"{where}: id {record.source_record['id']!r}, P361 {record.source_record['P361']!r} -> wikidata_qid {record.wikidata_qid!r}"
    if code in ("duplicate_record", "duplicate_prompt_distinct_items"):
        return f"{where}: QID {record.wikidata_qid}, duplicate of `{record.duplicate_of}`"
    if code == "near_duplicate_artifact":
        return f"{where}: {record.artifact!r} ~ {record.similar_to!r}"
    if code == "malformed_property_token":
        bad = {k: record.source_record[k] for k in PROPERTIES if "{" in record.source_record[k]}
        return f"{where}: {bad}"
    if code == "blank_missing_marker":
        blank = sorted(k for k in PROPERTIES if record.source_record[k] in ("", " "))
        return f"{where}: {blank} are blank"
    return f"{where}: {record.prompt!r}"


def defect_summary(records: list[CubeRecord]) -> list[dict]:
    """Per defect class: count of records, what was found, what was done, examples."""
    summary = []
    for code, (found, done) in DEFECTS.items():
        hits = [r for r in records if code in r.defects]
        shown = [r for r in hits if r.duplicate_of] if code.startswith("duplicate") else \
            [r for r in hits if r.similar_to] if code == "near_duplicate_artifact" else hits
        examples = [_example(r, code) for r in shown[:3]]
        summary.append({"code": code, "count": len(hits), "found": found, "done": done, "examples": examples})
    return summary


def demo_prompts(prompts: list[dict], per_cell: int = DEMO_PER_CELL) -> list[dict]:
    """The demo config's rows: for each country x concept, the ``per_cell`` prompts with the smallest
    ``prompt_id`` among those that fit one of the file's templates (a nonstandard prompt only where a cell has
    too few), in the order of ``prompts``. Prompt ids hash (country, concept, artifact), so the choice is
    deterministic, spread over the cell's artifacts, and kept by rebuilds that keep those artifacts."""
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in prompts:
        cells[(row["country_code"], row["concept"])].append(row)
    chosen = set()
    for rows in cells.values():
        ranked = sorted(rows, key=lambda r: (r["template"] == "nonstandard", r["prompt_id"]))
        chosen.update(r["prompt_id"] for r in ranked[:per_cell])
    return [row for row in prompts if row["prompt_id"] in chosen]


def has_every_config(folder: Path) -> bool:
    """Whether ``folder`` holds a build with every config this builder writes (an older build may lack the
    demo config: rebuild it then)."""
    from benchmark.datasets import hub_layout

    configs = (CONFIG, CONFIG_ALL, CONFIG_DEMO)
    return (Path(folder) / "README.md").exists() and all(
        hub_layout.parquet_files(Path(folder), config, SPLIT) for config in configs)


def build(source: str, out: Path, *, repo: str = HUB_REPO, how: str = "--source PATH") -> dict:
    """Build the CUBE-1K dataset folder from the authors' JSON; return a summary. ``how``: ``read_source``'s."""
    import datasets

    from benchmark import __version__
    from benchmark.datasets import hub_layout
    from benchmark.papers import CUBE, bibtex

    raw = read_source(source, how)
    records = check_records(raw)
    rows = [r.row() for r in records]
    prompts = [row for row in rows if row["duplicate_of"] is None]
    demo = demo_prompts(prompts)

    coverage: dict[str, Counter] = defaultdict(Counter)
    for row in prompts:
        coverage[row["country"]][row["concept"]] += 1
        coverage[row["country"]]["total"] += 1
    summary = defect_summary(records)
    source_bytes = json.dumps(raw, ensure_ascii=False, sort_keys=True).encode("utf-8")

    data = hub_layout.card_data(
        pretty_name="CUBE-1K (CultureLens build)",
        licence=hub_layout.Licence("cc-by-nc-sa-4.0"),
        configs={CONFIG: [SPLIT], CONFIG_ALL: [SPLIT], CONFIG_DEMO: [SPLIT]},
        default=CONFIG,
        task_categories=["text-to-image"],
        language=["en"],
        size_categories=[hub_layout.size_category(len(rows))],  # cube_1k_all: every upstream record
        tags=["culture", "benchmark", "cultural-competence", "wikidata"],
        source_datasets=["https://github.com/google-deepmind/cube"],
    )
    card = hub_layout.render_card(
        "cube_1k", data,
        version=__version__, source=source,
        source_sha256=hashlib.sha256(source_bytes).hexdigest(), repo=repo,
        config=CONFIG, config_all=CONFIG_ALL, config_demo=CONFIG_DEMO, split=SPLIT,
        n_prompts=len(prompts), n_records=len(rows), n_demo=len(demo), demo_per_cell=DEMO_PER_CELL,
        concepts=CONCEPTS, coverage=dict(sorted(coverage.items())),
        templates=", ".join(f"`{t}`" for t in TEMPLATES), properties=PROPERTIES,
        defects=[d for d in summary if d["count"]],
        clean_checks=[f"`{d['code']}`" for d in summary if not d["count"]],
        bibtex=bibtex(CUBE),
    )
    schema = features()
    hub_layout.write_folder(out, {
        (CONFIG, SPLIT): datasets.Dataset.from_list(prompts, features=schema),
        (CONFIG_ALL, SPLIT): datasets.Dataset.from_list(rows, features=schema),
        (CONFIG_DEMO, SPLIT): datasets.Dataset.from_list(demo, features=schema),
    }, card)
    return {"records": len(rows), "prompts": len(prompts), "demo_prompts": len(demo),
            "defects": {d["code"]: d["count"] for d in summary}, "out": str(out)}

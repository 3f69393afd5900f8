"""CUBE-CSpace builder on a hand-drawn Wikidata dump slice (plain, gz, bz2), the CSpace-file path, and the CUBE
diversity prompt set."""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import tarfile
import zipfile

import datasets
import pytest

from benchmark.datasets import cspace, cube_diversity
from benchmark.datasets.prompts import load_prompts

DISH, FOOD, MONUMENT, CLOTHING = "Q746549", "Q2095", "Q4989906", "Q11460"  # Table 9 roots
ITALY, INDIA, JAPAN, FRANCE, CHINA, OTTOMAN = "Q38", "Q668", "Q17", "Q142", "Q148", "Q12560"
KINGDOM = "Q172579"  # given the code IT here too: two country items, one ISO code


def statement(prop, qid, *, rank="normal", snaktype="value"):
    snak = {"snaktype": snaktype, "property": prop, "datatype": "wikibase-item"}
    if snaktype == "value":
        snak["datavalue"] = {"value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid},
                             "type": "wikibase-entityid"}
    return {"mainsnak": snak, "type": "statement", "rank": rank}


def entity(qid, label=None, *, labels=None, iso=None, **claims):
    """A dump entity; claims given as P31=[qid, ...] or P31=[(qid, rank)] / [(None, 'somevalue')]."""
    body = {"type": "item", "id": qid,
            "labels": labels if labels is not None else ({"en": {"language": "en", "value": label}} if label else {}),
            "claims": {}}
    for prop, values in claims.items():
        for value in values:
            if isinstance(value, tuple):
                target, mode = value
                made = statement(prop, target or "Q1", snaktype=mode) if mode == "somevalue" else \
                    statement(prop, target, rank=mode)
            else:
                made = statement(prop, value)
            body["claims"].setdefault(prop, []).append(made)
    if iso:
        body["claims"]["P297"] = [{"mainsnak": {"snaktype": "value", "property": "P297",
                                                "datavalue": {"value": iso, "type": "string"}},
                                   "type": "statement", "rank": "normal"}]
    return body


# The hand-drawn graph. Hops are counted from the root (a direct child of a root is at hop 1).
ENTITIES = [
    {"type": "property", "id": "P31", "labels": {"en": {"language": "en", "value": "instance of"}}},
    entity(ITALY, "Italy", iso="IT", P17=[ITALY]), entity(INDIA, "India", iso="IN", P17=[INDIA]),
    entity(JAPAN, "Japan", iso="JP", P17=[JAPAN]), entity(FRANCE, "France", iso="FR", P17=[FRANCE]),
    entity(CHINA, "China", iso="CN", P17=[CHINA]), entity(OTTOMAN, "Ottoman Empire"),
    entity(KINGDOM, "Kingdom of Italy", iso="IT"),
    entity(DISH, "dish"), entity(FOOD, "food"), entity(MONUMENT, "monument"), entity(CLOTHING, "clothing"),
    # cuisine
    entity("Q7802", "bread", P279=[DISH]),                                   # hop 1, no country: expanded
    entity("Q5449200", "Filone", P279=["Q7802"], P495=[ITALY]),             # hop 2 artifact
    entity("Q900001", "Filone di Altamura", P279=["Q5449200"], P495=[ITALY]),  # child of an artifact: not reached
    entity("Q271555", "Biryani", P31=[DISH], P495=[INDIA]),                 # hop 1 artifact
    entity("Q900011", "class one", P279=[DISH]),
    entity("Q900012", "class two", P279=["Q900011"]),
    entity("Q900013", "class three", P279=["Q900012"]),
    entity("Q900014", "class four", P279=["Q900013"]),                      # hop 4, no country
    entity("Q900015", "Deep Dish", P31=["Q900014"], P495=[JAPAN]),           # hop 5: beyond H = 4
    entity("Q900016", "Edge Dish", P31=["Q900013"], P495=[JAPAN]),           # hop 4: reached
    entity("Q900020", "Onigiri", P31=[FOOD, DISH], P495=[JAPAN]),            # two roots, same hop: Table 9 order
    entity("Q900021", "Crepe", P31=[DISH], P279=["Q7802"], P495=[FRANCE]),   # hops 1 and 2: first reach
    entity("Q900022", "Baguette", P279=["Q7802"], P31=[FOOD], P495=[FRANCE]),  # via food at hop 1
    entity("Q900030", "Pasta", P31=[FOOD], P495=[ITALY, CHINA], P17=[ITALY]),  # two countries: two rows
    entity("Q900031", "Risotto", P31=[DISH], P495=[KINGDOM], P17=[ITALY]),   # two items, one code: one row
    entity("Q900040", labels={"fr": {"language": "fr", "value": "Plat"}}, P31=[DISH], P495=[FRANCE]),
    entity("Q900041", labels={"mul": {"language": "mul", "value": "Dosa"}}, P31=[DISH], P495=[INDIA]),
    entity("Q900050", "Lokum", P31=[DISH], P495=[OTTOMAN]),                  # country without ISO code
    entity("Q900060", "Deprecated Dish", P31=[(DISH, "deprecated")], P495=[JAPAN]),
    entity("Q900061", "Somewhere Dish", P31=[DISH], P17=[(None, "somevalue")]),  # no item country: expanded
    entity("Q900062", "Galette", P31=["Q900061"], P495=[FRANCE]),            # hop 2 artifact
    # landmarks and art
    entity("Q900100", "Eiffel Tower", P31=[MONUMENT], P17=[FRANCE]),
    entity("Q900200", "Kimono", P279=[CLOTHING], P495=[JAPAN]),
]

# (artifact_id, concept, country_code, hops, root) found with H = 4, worked out by hand from the graph above.
EXPECTED = {
    ("Q5449200", "cuisine", "IT", 2, DISH), ("Q271555", "cuisine", "IN", 1, DISH),
    ("Q900016", "cuisine", "JP", 4, DISH), ("Q900020", "cuisine", "JP", 1, DISH),
    ("Q900021", "cuisine", "FR", 1, DISH), ("Q900022", "cuisine", "FR", 1, FOOD),
    ("Q900030", "cuisine", "IT", 1, FOOD), ("Q900030", "cuisine", "CN", 1, FOOD),
    ("Q900031", "cuisine", "IT", 1, DISH),
    ("Q900041", "cuisine", "IN", 1, DISH), ("Q900062", "cuisine", "FR", 2, DISH),
    ("Q900100", "landmarks", "FR", 1, MONUMENT), ("Q900200", "art", "JP", 1, CLOTHING),
}
CONTINENTS = {"IT": "Europe", "FR": "Europe", "IN": "Asia", "JP": "Asia", "CN": "Asia"}


def dump_text() -> bytes:
    """The standard dump layout: '[', one entity per line ending in ',', the last without, ']'."""
    return ("[\n" + ",\n".join(json.dumps(e) for e in ENTITIES) + "\n]\n").encode()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("dumps")
    text = dump_text()
    (root / "slice.json").write_bytes(text)
    (root / "slice.json.gz").write_bytes(gzip.compress(text))
    (root / "slice.json.bz2").write_bytes(bz2.compress(text))
    return root


def load(folder, config, **options):
    """``load_dataset(folder, config)`` with a cache of its own (datasets keys a local folder's cache by name)."""
    return datasets.load_dataset(str(folder), config, cache_dir=str(folder) + ".cache", **options)


@pytest.fixture(scope="module")
def built(dumps, tmp_path_factory):
    out = tmp_path_factory.mktemp("built")
    return {name: cspace.build_cspace(dumps / name, out / name.replace(".", "-"), progress=False)
            for name in ("slice.json", "slice.json.gz", "slice.json.bz2")}


def found(table) -> set[tuple]:
    return {(r["artifact_id"], r["concept"], r["country_code"], r["hops"], r["root"]) for r in table}


@pytest.mark.parametrize("name", ["slice.json", "slice.json.gz", "slice.json.bz2"])
def test_walk_finds_exactly_the_hand_drawn_artifacts(built, name):
    table = load(built[name], cspace.CONFIG, split="test")
    assert found(table) == EXPECTED
    assert len(table) == len(EXPECTED)  # one row per (artifact, concept, country): no duplicates


def test_every_compression_gives_the_same_rows(built):
    tables = [load(built[name], cspace.CONFIG, split="test").to_list()
              for name in ("slice.json", "slice.json.gz", "slice.json.bz2")]
    assert tables[0] == tables[1] == tables[2]


def test_country_maps_to_iso_code_and_continent(built):
    rows = load(built["slice.json.gz"], cspace.CONFIG, split="test")
    for row in rows:
        assert row["continent"] == CONTINENTS[row["country_code"]]
    pasta = {r["country_code"]: r for r in rows if r["artifact_id"] == "Q900030"}
    assert pasta["IT"]["country"] == "Italy" and pasta["IT"]["country_qid"] == ITALY
    assert pasta["IT"]["country_property"] == "P495+P17" and pasta["CN"]["country_property"] == "P495"
    assert pasta["CN"]["country"] == "China"
    risotto = [r for r in rows if r["artifact_id"] == "Q900031"]
    assert [(r["country_qid"], r["country_property"]) for r in risotto] == [(KINGDOM, "P495+P17")]
    eiffel = next(r for r in rows if r["artifact_id"] == "Q900100")
    assert (eiffel["artifact"], eiffel["country"], eiffel["country_property"]) == ("Eiffel Tower", "France", "P17")


def test_labels_come_from_en_then_mul_and_unlabelled_artifacts_are_counted(built):
    rows = load(built["slice.json"], cspace.CONFIG, split="test")
    labels = {r["artifact_id"]: r["artifact"] for r in rows}
    assert labels["Q900041"] == "Dosa" and "Q900040" not in labels
    card = (built["slice.json"] / "README.md").read_text()
    assert "| `no_english_label` | 1 |" in card
    assert "| `country_without_iso_code` | 1 |" in card
    assert "Q12560 (1)" in card
    assert "1 labelled artifacts\nhave no row at all" in card


def test_card_has_counts_parameters_licence_and_citation(built):
    card = (built["slice.json.bz2"] / "README.md").read_text()
    assert "license: cc0-1.0" in card and "CC0 1.0" in card
    assert "| France (FR) | 3 | 1 | 0 | 4 |" in card
    assert "| Japan (JP) | 2 | 0 | 1 | 3 |" in card
    assert "H = **4**" in card and "Q746549 Dish" in card
    assert "arXiv:2407.06863" in card and "one row per country" in card
    assert "| Italy (IT) | 3 | 0 | 0 | 3 |" in card
    assert "| cuisine | 12 | 9 | 2 | 0 | 1 |" in card  # artifacts per hop 1..4, Q900040 and Q900050 included


def test_hop_limit_and_stop_at_artifact(dumps, tmp_path):
    index = cspace.scan_dump(dumps / "slice.json.gz", tmp_path, progress=False)
    roots = {"cuisine": list(cspace.ROOTS["cuisine"])}
    at4 = cspace.walk(index.edges, index.artifact_bits, roots, 4, progress=False)["cuisine"]
    at5 = cspace.walk(index.edges, index.artifact_bits, roots, 5, progress=False)["cuisine"]
    assert 900015 not in at4 and at5[900015] == (5, 0)
    assert at4[900016] == (4, 0)
    assert 900001 not in at5  # the child of an artifact is never reached, whatever H
    assert 900060 not in at5  # a deprecated P31 is no edge
    assert set(at5) - set(at4) == {900015}
    assert cspace.walk(index.edges, index.artifact_bits, roots, 1, progress=False)["cuisine"].keys() == {
        271555, 900020, 900021, 900022, 900030, 900031, 900040, 900041, 900050}


def test_dump_pass_keeps_only_the_compact_parts(dumps, tmp_path):
    index = cspace.scan_dump(dumps / "slice.json.bz2", tmp_path, progress=False)
    items = len(ENTITIES) - 1
    assert index.stats["entities"] == len(ENTITIES) and index.stats["items"] == items
    edges = sum(len(e.get("claims", {}).get(p, [])) for e in ENTITIES for p in ("P31", "P279"))
    assert index.stats["edges"] == edges - 1  # the deprecated P31 is dropped
    assert index.iso_codes == {38: "IT", 668: "IN", 17: "JP", 142: "FR", 148: "CN", 172579: "IT"}
    assert index.sha256 == hashlib.sha256((dumps / "slice.json.bz2").read_bytes()).hexdigest()


def test_a_broken_dump_line_is_named(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n{"type": "item", "id": "Q1"},\n{"type": "item", "id": \n]\n')
    with pytest.raises(cspace.DumpError, match=r"broken.json, line 3: not an entity JSON"):
        cspace.build_cspace(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    fake = tmp_path / "fake.json.gz"
    fake.write_text("not gzip")
    with pytest.raises(cspace.DumpError, match=r"fake.json.gz: reading failed"):
        cspace.build_cspace(fake, tmp_path / "out", progress=False)


def test_countries_option_keeps_only_those_countries(dumps, tmp_path):
    folder = cspace.build_cspace(dumps / "slice.json", tmp_path / "eight", countries=cspace.CUBE_COUNTRIES,
                                 progress=False)
    rows = load(folder, cspace.CONFIG, split="test")
    assert found(rows) == {row for row in EXPECTED if row[2] != "CN"}
    card = (folder / "README.md").read_text()
    assert "| `outside_requested_countries` | 1 |" in card
    assert "keeps the countries BR, FR, IN, IT, JP, NG, TR, US only" in card


# --- a CSpace file the user provides ---------------------------------------------------------------
FILE_RECORDS = [
    {"id": "Q1", "name": "Sushi", "country": "Japan", "domain": "cuisine"},
    {"id": "LLM", "name": "Katsu sandwich", "country": "Japan", "domain": "cuisine"},
    {"id": "Q2", "name": "Eiffel Tower", "country": "France", "domain": "landmark"},
    {"id": "Q2", "name": "Eiffel Tower", "country": "FR", "domain": "landmark"},  # duplicate of the one above
    {"id": "Q3", "name": "Kurta", "country": "India", "domain": "art"},
]


def test_authors_release_format_maps_into_the_schema(tmp_path):
    inner = json.dumps(FILE_RECORDS).encode()
    archive = tmp_path / "cube_CSpace.json.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("CUBE_CSpace.json", inner), ("._CUBE_CSpace.json", b"\x00\x05")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    folder = cspace.build_cspace_from_file(archive, tmp_path / "from-file")
    rows = load(folder, cspace.CONFIG, split="test")
    assert {(r["artifact_id"], r["artifact"], r["concept"], r["country_code"], r["continent"]) for r in rows} == {
        ("Q1", "Sushi", "cuisine", "JP", "Asia"), (None, "Katsu sandwich", "cuisine", "JP", "Asia"),
        ("Q2", "Eiffel Tower", "landmarks", "FR", "Europe"), ("Q3", "Kurta", "art", "IN", "Asia")}
    card = (folder / "README.md").read_text()
    assert "license: cc-by-nc-sa-4.0" in card
    assert "| duplicates dropped | 1 |" in card and "read as 'landmarks' | 2 |" in card


def test_csv_and_extraction_output_formats(tmp_path):
    path = tmp_path / "cspace.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["artifact", "country", "concept", "artifact_id"])
        writer.writeheader()
        writer.writerow({"artifact": "Feijoada", "country": "BR", "concept": "cuisine", "artifact_id": "Q4"})
    rows, _, _ = cspace.cspace_file_rows(path)
    assert rows[0]["country"] == "Brazil" and rows[0]["continent"] == "South America"

    merged = tmp_path / "cuisine_artifacts.json"  # the authors' extraction output: {country: [nodes]}
    merged.write_text(json.dumps({"Italy": [{"id": "Q5", "name": "Filone", "root": "dish"}]}))
    rows, _, _ = cspace.cspace_file_rows(merged, concept="cuisine")
    assert (rows[0]["artifact_id"], rows[0]["country_code"], rows[0]["root"]) == ("Q5", "IT", DISH)
    with pytest.raises(cspace.CSpaceFileError, match=r"record 1 of 'Italy': no concept"):
        cspace.cspace_file_rows(merged)


def test_missing_column_is_named_with_its_row(tmp_path):
    path = tmp_path / "cspace.jsonl"
    path.write_text(json.dumps({"name": "Sushi", "country": "Japan", "domain": "cuisine"}) + "\n"
                    + json.dumps({"name": "Ramen", "domain": "cuisine"}) + "\n")
    with pytest.raises(cspace.CSpaceFileError, match=r"cspace.jsonl, line 2: no country \(expected a non-empty "
                                                     r"column 'country' or 'country_code'"):
        cspace.build_cspace_from_file(path, tmp_path / "out")
    bad_concept = tmp_path / "bad.json"
    bad_concept.write_text(json.dumps([{"name": "Samba", "country": "Brazil", "domain": "music"}]))
    with pytest.raises(cspace.CSpaceFileError, match=r"record 1: concept 'music' is not one of"):
        cspace.cspace_file_rows(bad_concept)


def test_records_without_a_name_are_skipped_with_count_and_examples(tmp_path):
    path = tmp_path / "cube_CSpace.json"
    path.write_text(json.dumps([
        {"id": "Q1", "name": "Sushi", "country": "Japan", "domain": "cuisine"},
        {"id": "Q7", "name": "None", "country": "Japan", "domain": "cuisine"},
        {"id": "Q8", "country": "Italy", "domain": "art"},
        {"id": "Q9", "name": "", "country": "India", "domain": "landmark"},
    ]))
    rows, counts, nameless = cspace.cspace_file_rows(path)
    assert [r["artifact_id"] for r in rows] == ["Q1"]
    assert counts[cspace.NAMELESS] == 3 and counts["records"] == 4
    assert [e.split(":")[0] for e in nameless] == ["record 2", "record 3", "record 4"] and '"Q7"' in nameless[0]
    card = (cspace.build_cspace_from_file(path, tmp_path / "out") / "README.md").read_text()
    assert f"| {cspace.NAMELESS} | 3 |" in card and "Records skipped for having no artifact name (first 3)" in card
    assert '- record 2: {"country": "Japan", "domain": "cuisine", "id": "Q7", "name": "None"}' in card


def test_root_named_as_in_the_authors_code_maps_to_its_qid(tmp_path):
    path = tmp_path / "art_artifacts.json"  # root names as in the authors' constants.py
    path.write_text(json.dumps({"Brazil": [{"id": "Q10", "name": "samba", "root": "performing art genre"},
                                           {"id": "Q11", "name": "frevo", "root": "type of dance"}]}))
    rows, _, _ = cspace.cspace_file_rows(path, concept="art")
    assert [r["root"] for r in rows] == ["Q45971958", "Q107357104"]


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_archive_resource_forks_are_skipped_and_counted(tmp_path, kind):
    members = [("cube_CSpace.json", json.dumps(FILE_RECORDS).encode()),
               ("._cube_CSpace.json", b"\x00\x05\x16\x07AppleDouble"),  # not JSON: reading it would fail
               ("__MACOSX/._cube_CSpace.json", b"\x00\x05\x16\x07")]
    archive = tmp_path / f"cube_CSpace.json.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as z:
            for name, data in members:
                z.writestr(name, data)
    else:
        with tarfile.open(archive, "w:gz") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    rows, counts, _ = cspace.cspace_file_rows(archive)
    assert len(rows) == 4 and counts[cspace.RESOURCE_FORKS] == 2 and counts["records"] == 5
    card = (cspace.build_cspace_from_file(archive, tmp_path / "out") / "README.md").read_text()
    assert f"| {cspace.RESOURCE_FORKS} | 2 |" in card
    two = tmp_path / f"two.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(two, "w") as z:
            z.writestr("a.json", "[]")
            z.writestr("b.json", "[]")
        with pytest.raises(cspace.CSpaceFileError, match=r"expected exactly one .json file inside"):
            cspace.cspace_file_rows(two)


# --- the diversity prompts -------------------------------------------------------------------------
def test_diversity_prompts_are_three_concepts_by_five_with_stable_ids():
    rows = cube_diversity.diversity_prompts()
    assert [r["prompt_id"] for r in rows] == [f"div-{c}-{i}" for c in ("cuisine", "landmarks", "art")
                                              for i in range(1, 6)]
    assert rows == cube_diversity.diversity_prompts()
    assert len({r["prompt"] for r in rows}) == 15
    quoted = {r["prompt"] for r in rows if r["source"].startswith("paper")}
    assert {"Produce a high quality image of a dish.", "High definition photo of a monument.",
            "Image of traditional clothing."} <= quoted
    assert cube_diversity.seed_batches()[0] == tuple(range(8)) and len(cube_diversity.seed_batches()) == 10


def test_diversity_folder_loads_with_load_prompts_and_load_dataset(tmp_path):
    folder = cube_diversity.build_diversity(tmp_path / "cube-diversity")
    table = load(folder, cube_diversity.CONFIG, split="test")
    assert table.to_list() == cube_diversity.diversity_prompts()
    prompts = load_prompts(cube_diversity.HUB_REPO, cube_diversity.CONFIG, folder=folder)
    assert len(prompts) == 15 and "div-art-1" in prompts
    assert prompts.table.loc["div-landmarks-1", "concept"] == "landmarks"
    card = (folder / "README.md").read_text()
    assert "--seeds 0-79" in card and "10 batches of 8" in card and "400 images per concept" in card
    assert "= 50 scores" in card

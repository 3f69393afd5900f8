"""CUBE-1K builder: the real upstream file (counts found by hand, independent re-counts) and each defect check."""

from __future__ import annotations

import json
import re

import datasets
import pytest

from benchmark.datasets import cube_1k
from culturelens.testing.submissions import TINY_UPSTREAM

# Found by reading the upstream file record by record before the builder existed (see the
# data card). Each is re-derived independently from the raw JSON in the tests below where a
# one-line rule can do it.
EXPECTED_DEFECTS = {
    "nonstandard_concept_label": 222,
    "stray_whitespace": 11,
    "prompt_missing_space": 24,
    "prompt_names_other_artifact": 9,
    "qid_shifted_into_p361": 161,
    "qid_missing": 2,
    "malformed_property_token": 23,
    "blank_missing_marker": 324,
    "country_property_conflict": 0,
    "duplicate_record": 10,
    "duplicate_prompt_distinct_items": 9,
    "artifact_in_several_countries": 2,
    "nonstandard_prompt_template": 9,
    # Found by reading all 992 served prompts of the build (2026-11): 3 'painting painting', 1 'performance
    # performance', 3 'performances performance'; every United States prompt ('in United States'; 57 served
    # + 1 duplicate row); 4 'turkish ...' and 1 'italian gothic painting'; 5 pairs kisir/kısır, fes/fez,
    # Zuccotto/Zuccoto, Boli/bole (one dish, two spellings) and cuca/cuxá (two dishes: the flag is for review).
    "prompt_doubled_word": 7,
    "country_missing_article": 58,
    "lowercase_demonym": 5,
    "near_duplicate_artifact": 10,
}


@pytest.fixture(scope="module")
def built(cube_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("cube") / "cube-1k"
    summary = cube_1k.build(str(cube_file), out)
    return out, summary


def load(folder, config, **options):
    """``load_dataset(folder, config)`` as a user types it, with a cache of its own: datasets keys the cache
    of a local folder by the folder's name (huggingface/datasets#2956), and the tests build several."""
    return datasets.load_dataset(str(folder), config, cache_dir=str(folder) + ".cache", **options)


@pytest.fixture(scope="module")
def raw(cube_file):
    return json.loads(cube_file.read_text(encoding="utf-8"))


def test_every_upstream_record_is_kept_and_duplicates_leave_the_prompt_set(built, raw):
    out, summary = built
    every = load(out, cube_1k.CONFIG_ALL, split="test")
    prompts = load(out, cube_1k.CONFIG, split="test")
    assert len(raw) == 1002
    assert summary["records"] == len(every) == 1002
    assert sorted(every["source_index"]) == list(range(1002))
    # Independent count: distinct upstream prompts after collapsing whitespace and case.
    distinct = {re.sub(r"\s+", " ", r["prompt"]).strip().casefold() for r in raw}
    assert summary["prompts"] == len(prompts) == len(distinct) == 992
    left_out = [r for r in every if r["duplicate_of"] is not None]
    assert len(left_out) == 10
    assert {r["duplicate_of"] for r in left_out} <= set(prompts["prompt_id"])


def test_load_dataset_round_trip_returns_the_prompts(built):
    out, _ = built
    prompts = load(out, cube_1k.CONFIG)["test"]
    assert prompts.features["defects"] == datasets.Sequence(datasets.Value("string"))
    assert set(prompts["concept"]) == {"cuisine", "landmarks", "art"}
    assert set(prompts["country"]) == {"Brazil", "France", "India", "Italy", "Japan", "Nigeria", "Turkey",
                                       "United States"}
    assert set(prompts["country_code"]) == {"BR", "FR", "IN", "IT", "JP", "NG", "TR", "US"}
    pairs = {(r["country"], r["concept"]) for r in prompts}
    assert len(pairs) == 24  # every country has every concept
    assert len(set(prompts["prompt_id"])) == len(prompts)


def test_defect_counts_match_the_hand_count(built):
    _, summary = built
    assert summary["defects"] == EXPECTED_DEFECTS


def test_defect_counts_match_independent_rules(built, raw):
    out, _ = built
    every = load(out, cube_1k.CONFIG_ALL, split="test")
    flagged = lambda code: sum(code in r["defects"] for r in every)  # noqa: E731
    assert flagged("nonstandard_concept_label") == sum(r["domain"] == "landscapes" for r in raw)
    shifted = sum(bool(re.fullmatch(r"Q\d+|LLM", r["P361"])) for r in raw)
    assert flagged("qid_shifted_into_p361") == shifted
    blank = sum(any(r[k] in ("", " ") for k in cube_1k.PROPERTIES) for r in raw)
    assert flagged("blank_missing_marker") == blank
    malformed = sum(any("{=#" in r[k] for k in cube_1k.PROPERTIES) for r in raw)
    assert flagged("malformed_property_token") == malformed


def test_known_fixes_on_real_records(built):
    out, _ = built
    every = {r["source_index"]: r for r in load(out, cube_1k.CONFIG_ALL, split="test")}
    mate = every[48]
    assert mate["prompt"] == "A high resolution image of mate from Brazilian cuisine, realistic"
    assert "prompt_missing_space" in mate["defects"]
    eiffel = next(r for r in every.values() if r["artifact"] == "Eiffel Tower")
    assert eiffel["wikidata_qid"] == "Q243" and eiffel["p361_part_of"] is None
    stupa = every[246]
    assert stupa["artifact"] == "Shanti Stupa"
    assert stupa["prompt"] == "A panoramic view of Shanti Stupa in India, realistic"
    assert stupa["prompt_original"] == "A panoramic view of Chingri fry in India, realistic"
    assert every[88]["artifact"] == "Pelourinho"
    assert every[0]["source"] == "llm" and every[0]["wikidata_qid"] is None
    assert json.loads(every[246]["source_record"])["prompt"] == stupa["prompt_original"]


def test_prompt_wording_fixes_on_real_records(built):
    out, _ = built
    prompts = {r["artifact"]: r for r in load(out, cube_1k.CONFIG, split="test")}
    assert prompts["futurism painting"]["prompt"] == "An image of futurism painting from Italy, realistic"
    assert prompts["fuji performances"]["prompt"] == "An image of fuji performances from Nigeria, realistic"
    assert prompts["drag performance"]["prompt"] == "An image of drag performance from the United States, realistic"
    assert prompts["Grand Canyon"]["prompt"] == "A panoramic view of Grand Canyon in the United States, realistic"
    delight = "A high resolution image of Turkish delight from Turkish cuisine, realistic"
    assert prompts["Turkish delight"]["prompt"] == delight
    assert prompts["Italian gothic painting"]["prompt"] == "An image of Italian gothic painting from Italy, realistic"
    assert prompts["Turkish delight"]["prompt_original"].startswith("A high resolution image of turkish delight")
    served = [r["prompt"] for r in prompts.values()]
    assert not [p for p in served if re.search(r"\b(\w+?)s? \1s?\b from", p, re.IGNORECASE)
                and not re.search(r"Puff Puff|Chin chin|can can", p)]
    assert not [p for p in served if re.search(r"(in|from) United States", p)]
    near = sorted(r["artifact"] for r in prompts.values() if "near_duplicate_artifact" in r["defects"])
    assert near == sorted(["kisir", "kısır", "fes", "fez", "Zuccotto", "Zuccoto", "Boli", "bole", "cuca", "cuxá"])


def test_ids_are_stable_across_rebuilds(built, cube_file, tmp_path):
    out, _ = built
    again = tmp_path / "again"
    cube_1k.build(str(cube_file), again)
    first = load(out, cube_1k.CONFIG_ALL, split="test")
    second = load(again, cube_1k.CONFIG_ALL, split="test")
    assert first["prompt_id"] == second["prompt_id"]


def test_demo_config_is_three_real_prompts_per_country_and_concept(built):
    out, summary = built
    prompts = load(out, cube_1k.CONFIG, split="test").to_pandas().set_index("prompt_id")
    demo = load(out, cube_1k.CONFIG_DEMO, split="test").to_pandas().set_index("prompt_id")
    assert summary["demo_prompts"] == len(demo) == 8 * 3 * 3
    assert demo.groupby(["country_code", "concept"]).size().eq(3).all()
    # The same rows as the full prompt set, ids and all.
    assert demo.drop(columns="defects").equals(prompts.loc[demo.index].drop(columns="defects"))
    # The choice: per cell, the smallest ids among prompts that fit a template (every cell has 3 such prompts).
    clean = prompts[prompts["template"] != "nonstandard"]
    expected = clean.reset_index().sort_values("prompt_id").groupby(["country_code", "concept"]).head(3)
    assert sorted(demo.index) == sorted(expected["prompt_id"])
    assert "br-cuisine-00f4a0622f" in demo.index  # 'Pão de queijo', as submissions/example answers it


def test_demo_config_of_a_small_source_keeps_every_prompt_of_its_cells(tmp_path, tiny_upstream):
    out = tmp_path / "tiny"
    summary = cube_1k.build(str(tiny_upstream), out)
    assert summary["demo_prompts"] == summary["prompts"] == 6  # no cell has more than 3 prompts
    assert cube_1k.has_every_config(out)


def test_card_has_front_matter_licence_counts_and_citation(built):
    out, _ = built
    card = (out / "README.md").read_text(encoding="utf-8")
    front = card.split("---")[1]
    assert "license: cc-by-nc-sa-4.0" in front and "text-to-image" in front and "pretty_name:" in front
    assert "config_name: cube_1k" in front and "config_name: cube_1k_all" in front
    assert "config_name: cube_1k_demo" in front and "| `cube_1k_demo` | 72 |" in card
    for code, count in EXPECTED_DEFECTS.items():
        if count:
            assert f"| `{code}` | {count} |" in card
    assert "arXiv:2407.06863" in card and "@inproceedings" in card


# --- each check on hand-made records -----------------------------------------------------------
def _check(**changes) -> cube_1k.CubeRecord:
    record = {**TINY_UPSTREAM[0], **changes}
    return cube_1k.check_records([record])[0]


def test_landscapes_becomes_landmarks():
    r = _check(name="Zuma Rock", country="Nigeria", domain="landscapes",
               prompt="A panoramic view of Zuma Rock in Nigeria, realistic")
    assert r.concept == "landmarks" and r.defects == ["nonstandard_concept_label"]


def test_glued_space_is_restored_only_when_the_template_then_matches():
    r = _check(prompt="A high resolution image of feijoadafrom Brazilian cuisine, realistic")
    assert r.prompt == "A high resolution image of feijoada from Brazilian cuisine, realistic"
    assert "prompt_missing_space" in r.defects
    odd = _check(prompt="A high resolution image of feijoadas from Brazil, realistic")
    assert odd.prompt == odd.prompt_original and "nonstandard_prompt_template" in odd.defects


def test_prompt_naming_another_artifact_is_rebuilt_from_the_template():
    r = _check(prompt="A high resolution image of moqueca from Brazilian cuisine, realistic")
    assert r.prompt == "A high resolution image of feijoada from Brazilian cuisine, realistic"
    assert r.defects == ["prompt_names_other_artifact"]


def test_identifier_shifted_into_p361_is_recovered():
    blank = _check(id=" ", P361="Q243")
    assert blank.wikidata_qid == "Q243" and blank.properties["P361"] is None
    named = _check(id="feijoada", P361="LLM")
    assert named.wikidata_qid is None and named.source == "llm"
    assert "qid_shifted_into_p361" in blank.defects and "qid_missing" not in blank.defects
    lost = _check(id=" ")
    assert lost.wikidata_qid is None and lost.source == "unknown" and "qid_missing" in lost.defects


def test_property_lists_drop_non_qid_tokens_and_blank_means_missing():
    r = _check(P31="['Q1', '{=#3']", P279="[]", P2012=" ")
    assert r.properties["P31"] == ["Q1"] and r.properties["P279"] == [] and r.properties["P2012"] is None
    assert {"malformed_property_token", "blank_missing_marker"} <= set(r.defects)


def test_country_properties_that_name_another_country_are_flagged():
    r = _check(P495="['Q142']")  # France, on a Brazilian dish
    assert "country_property_conflict" in r.defects


def test_duplicates_are_linked_not_dropped():
    first = {**TINY_UPSTREAM[0]}
    same = {**TINY_UPSTREAM[0]}
    other_item = {**TINY_UPSTREAM[0], "id": "Q999"}
    records = cube_1k.check_records([first, same, other_item])
    assert records[0].duplicate_of is None
    assert records[1].duplicate_of == records[0].prompt_id and "duplicate_record" in records[1].defects
    assert records[2].duplicate_of == records[0].prompt_id
    assert "duplicate_prompt_distinct_items" in records[2].defects
    assert len({r.prompt_id for r in records}) == 3


def test_doubled_template_noun_is_dropped():
    r = _check(name="baroque painting", country="Italy", domain="art",
               prompt="An image of baroque painting painting from Italy, realistic")
    assert r.prompt == "An image of baroque painting from Italy, realistic" and r.defects == ["prompt_doubled_word"]
    plural = _check(name="fuji performances", country="Nigeria", domain="art",
                    prompt="An image of fuji performances performance from Nigeria, realistic")
    assert plural.prompt == "An image of fuji performances from Nigeria, realistic"
    kept = _check(name="Puff Puff", country="Nigeria",
                  prompt="A high resolution image of Puff Puff from Nigerian cuisine, realistic")
    assert kept.prompt == kept.prompt_original and kept.defects == []


def test_country_that_takes_the_article_gets_it():
    r = _check(name="Space Needle", country="United States", domain="landmarks",
               prompt="A panoramic view of Space Needle in United States, realistic")
    assert r.prompt == "A panoramic view of Space Needle in the United States, realistic"
    assert r.defects == ["country_missing_article"]
    cuisine = _check(name="meatloaf", country="United States",
                     prompt="A high resolution image of meatloaf from American cuisine, realistic")
    assert cuisine.prompt == cuisine.prompt_original and cuisine.defects == []


def test_lowercase_demonym_in_the_artifact_is_capitalised():
    records = cube_1k.check_records([
        {**TINY_UPSTREAM[0], "name": "turkish delight", "country": "Turkey",
         "prompt": "A high resolution image of turkish delight from Turkish cuisine, realistic"},
        {**TINY_UPSTREAM[0], "name": "brazilian bread", "country": "Brazil",
         "prompt": "A high resolution image of brazilian bread from Brazilian cuisine, realistic"},
        {**TINY_UPSTREAM[0], "name": "pide", "country": "Turkey",
         "prompt": "A high resolution image of pide from Turkish cuisine, realistic"}])
    assert [r.artifact for r in records] == ["Turkish delight", "Brazilian bread", "pide"]
    assert records[0].prompt == "A high resolution image of Turkish delight from Turkish cuisine, realistic"
    assert [r.defects for r in records] == [["lowercase_demonym"], ["lowercase_demonym"], []]


def test_near_duplicate_spellings_are_flagged_and_kept():
    def dish(name, country="Turkey", demonym="Turkish"):
        return {**TINY_UPSTREAM[0], "name": name, "country": country,
                "prompt": f"A high resolution image of {name} from {demonym} cuisine, realistic"}
    records = cube_1k.check_records([dish("kisir"), dish("kısır"), dish("pide"), dish("pilav"),
                                     dish("kısır", "Brazil", "Brazilian")])
    assert ["near_duplicate_artifact" in r.defects for r in records] == [True, True, False, False, False]
    assert records[1].similar_to == "kisir" and all(r.duplicate_of is None for r in records)


def test_unreadable_source_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{\"id\": 1}]")
    with pytest.raises(cube_1k.CubeSourceError, match="record 0 lacks the keys"):
        cube_1k.read_source(str(bad))
    with pytest.raises(cube_1k.CubeSourceError, match="cannot read the CUBE-1K source"):
        cube_1k.read_source(str(tmp_path / "absent.json"))


def test_build_refuses_to_overwrite_a_foreign_folder(tmp_path, tiny_upstream):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        cube_1k.build(str(tiny_upstream), foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"

"""Relevance (CAIRE, arXiv:2506.09109): the knowledge-base index built with the tiny open_clip, visual entity
linking on hand-made embeddings (Eq. 1-2), the evaluation (P/R/F1, Pearson) against hand-computed values, and
the metric adapter."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import faiss
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

from benchmark import ranking
from benchmark.metrics.base import Inputs, Need
from benchmark.relevance.evaluation import (mean_by_group, pearson_summary, per_image_pearson,
                                            precision_recall_f1)
from benchmark.relevance.kb import KnowledgeBase, build_index, read_records
from benchmark.relevance.linking import choose, link_entities

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_image(path, seed: int, size: int = 64) -> None:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)).save(path)


ENTITIES = [
    {"entity_id": "bn:1", "name": "Pysanka", "description": "decorated egg", "wikipedia": "A pysanka is an egg.",
     "images": ["pysanka/1.png", "pysanka/2.png"]},
    {"entity_id": "bn:2", "name": "Easter egg", "wikipedia": "Easter eggs are eggs.",
     "images": ["easter/1.png", "pysanka/1.png"]},  # shares an image with Pysanka
    {"entity_id": "bn:3", "name": "Djembe", "description": "a West African drum", "images": ["djembe/1.png"]},
]


def write_kb_inputs(folder, entities=ENTITIES, fmt: str = "jsonl"):
    images = folder / "images"
    seeds = {}
    for entity in entities:
        for relative in entity["images"]:
            if relative not in seeds:
                seeds[relative] = len(seeds)
                make_image(images / relative, seeds[relative])
    if fmt == "jsonl":
        records = folder / "records.jsonl"
        records.write_text("".join(json.dumps(e) + "\n" for e in entities), encoding="utf-8")
    else:
        records = folder / "records.parquet"
        pq.write_table(pa.Table.from_pylist(entities), records)
    return records, images


@pytest.fixture(scope="module")
def backbone(tiny_clip):
    from benchmark.encoders import load_backbone

    return load_backbone("msiglip-so400m", {"msiglip-so400m": tiny_clip}, device="cpu")


@pytest.fixture(scope="module")
def kb(tmp_path_factory, tiny_clip):
    folder = tmp_path_factory.mktemp("kb-inputs")
    records, images = write_kb_inputs(folder)
    out = folder / "kb"
    build_index(records, images, out, "msiglip-so400m", registry={"msiglip-so400m": tiny_clip}, device="cpu",
                show_progress=False)
    return KnowledgeBase.load(out), images


# --- records --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("broken, message", [
    ({"name": ""}, r"records.jsonl line 2 \(entity 'bn:2'\): 'name' must be a non-empty string"),
    ({"entity_id": "bn:1"}, r"line 2 \(entity 'bn:1'\): entity_id repeats records.jsonl line 1"),
    ({"images": []}, r"line 2 .*'images' must be a non-empty list"),
    ({"wiki": "x"}, r"line 2 .*unknown key\(s\) \['wiki'\]"),
])
def test_bad_records_are_named_by_line(tmp_path, broken, message):
    records, _ = write_kb_inputs(tmp_path)
    rows = [dict(ENTITIES[0]), {**ENTITIES[1], **broken}]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_records(records)


def test_missing_and_broken_images_are_named_by_row(tmp_path, tiny_clip):
    records, images = write_kb_inputs(tmp_path, fmt="parquet")
    (images / "djembe" / "1.png").write_text("not an image")
    with pytest.raises(ValueError, match=r"records.parquet row 3 \(entity 'bn:3'\): image 'djembe/1.png' cannot be "
                                         r"decoded"):
        build_index(records, images, tmp_path / "kb", "msiglip-so400m", registry={"msiglip-so400m": tiny_clip},
                    show_progress=False)
    (images / "djembe" / "1.png").unlink()
    with pytest.raises(ValueError, match=r"row 3 \(entity 'bn:3'\): image 'djembe/1.png' not found"):
        build_index(records, images, tmp_path / "kb", "msiglip-so400m", registry={"msiglip-so400m": tiny_clip},
                    show_progress=False)
    assert not (tmp_path / "kb").exists()


# --- the index ------------------------------------------------------------------------------------------------
def test_index_holds_each_distinct_image_once_with_all_its_entities(kb, backbone):
    base, images = kb
    assert base.images["path"].tolist() == ["pysanka/1.png", "pysanka/2.png", "easter/1.png", "djembe/1.png"]
    assert base.images["entity_ids"].tolist() == [["bn:1", "bn:2"], ["bn:1"], ["bn:2"], ["bn:3"]]
    assert base.image_entities() == [[0, 1], [0], [1], [2]]
    assert base.entity_text(0) == "A pysanka is an egg." and base.entity_text(2) == "a West African drum"
    # rows hold the backbone's embeddings of those very images and lemmas
    with Image.open(images / "easter/1.png") as image:
        expected = backbone.embed(backbone.prepare(image.convert("RGB"), "image")[None])[0]
    assert base.image_index.reconstruct(2) == pytest.approx(expected, abs=1e-5)
    assert base.lemma_embeddings[2] == pytest.approx(backbone.embed_texts(["Djembe"])[0], abs=1e-5)
    assert base.info["backbone"] == "msiglip-so400m" and base.info["backbone_key"] == backbone.key
    base.require_backbone(backbone)


def test_saved_index_reloads_equal_and_detects_tampering(kb, tmp_path):
    base, _ = kb
    again = KnowledgeBase.load(base.folder)
    pd.testing.assert_frame_equal(again.entities, base.entities)
    pd.testing.assert_frame_equal(again.images, base.images)
    assert again.info == base.info and again.fingerprint == base.fingerprint
    assert np.array_equal(again.image_index.reconstruct_n(0, 4), base.image_index.reconstruct_n(0, 4))
    assert np.array_equal(again.lemma_embeddings, base.lemma_embeddings)
    copy = tmp_path / "copy"
    again.save(copy)
    faiss.write_index(faiss.IndexFlatIP(again.image_index.d), str(copy / "image.faiss"))
    with pytest.raises(ValueError, match="image.faiss: does not match its checksum"):
        KnowledgeBase.load(copy)


def test_a_kb_refuses_query_embeddings_from_other_weights(kb, tiny_dino):
    from benchmark.encoders import load_backbone

    other = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    with pytest.raises(ValueError, match="built with backbone 'msiglip-so400m'"):
        kb[0].require_backbone(other)


def test_a_query_image_from_the_kb_links_to_an_entity_of_that_image(kb, backbone):
    base, images = kb
    with Image.open(images / "djembe/1.png") as image:
        query = backbone.embed(backbone.prepare(image.convert("RGB"), "image")[None])
    link = base.link(query, k=1)[0]
    assert link.candidates == ("bn:3",) and link.entity_id == "bn:3"
    assert link.score == pytest.approx(float(base.lemma_embeddings[2] @ query[0]), abs=1e-5)


# --- linking on hand-made embeddings --------------------------------------------------------------------------
def _unit(rows):
    x = np.asarray(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _index(vectors):
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def test_lemma_text_decides_among_the_retrieved_candidates():
    # images 0 and 1 belong to "Easter" (e0) and "Pysanka" (e1); image 2 to "Djembe" (e2)
    images = _unit([[1.0, 0.1, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]])
    lemmas = _unit([[0.0, 1.0, 0.3], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    ids = ["e0", "e1", "e2"]
    query = _unit([[1.0, 0.3, 0.0]])  # nearest image: 0 (Easter), then 1 (Pysanka)
    top1, top2 = (link_entities(query, _index(images), [[0], [1], [2]], lemmas, ids, k=k)[0] for k in (1, 2))
    assert top1.entity_id == "e0" and top1.candidates == ("e0",)  # with K = 1 only the nearest image's entity
    assert top2.candidates == ("e0", "e1")
    assert top2.entity_id == "e1"  # Eq. 2: Pysanka's lemma is closer to the image than Easter's
    q = query[0]
    assert top2.candidate_scores == pytest.approx([lemmas[0] @ q, lemmas[1] @ q], abs=1e-6)
    assert top2.score == pytest.approx(lemmas[1] @ q, abs=1e-6)


def test_candidates_pool_every_entity_of_the_retrieved_images_once():
    images = _unit([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    lemmas = _unit([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
    link = link_entities(_unit([[1.0, 0.05]]), _index(images), [[0, 2], [2, 1], [1]], lemmas, ["a", "b", "c"],
                         k=20)[0]
    assert link.candidates == ("a", "c", "b") and link.entity_id == "a"
    with pytest.raises(ValueError, match="dimension mismatch"):
        link_entities(np.ones((1, 3)), _index(images), [[0], [1], [2]], lemmas, ["a", "b", "c"])


def test_linking_rule_takes_the_best_ranked_candidate_with_a_page():
    # lemma cosines 0.5, 0.9, 0.5: ranking positions 1, 0, 2 (the tie goes to the candidate retrieved first)
    assert choose([0.5, 0.9, 0.5], [True, False, True], "first_with_page") == (0, 2)
    assert choose([0.5, 0.9, 0.5], [True, False, True], "top") == (1, 1)
    assert choose([0.5, 0.9, 0.5], [True, True, False], "first_with_page") == (1, 1)
    assert choose([0.2, 0.9, 0.5], [False, False, False], "first_with_page") == (1, 1)  # no page anywhere: top
    with pytest.raises(ValueError, match=r"unknown linking rule 'best' \(known: first_with_page, top\)"):
        choose([0.5], [True], "best")


def _hand_kb() -> KnowledgeBase:
    """Three entities with one image each; "Easter egg" has no Wikipedia page, only a description."""
    entities = pd.DataFrame({"entity_id": ["bn:1", "bn:2", "bn:3"], "name": ["Pysanka", "Easter egg", "Djembe"],
                             "description": ["decorated egg", "an egg dyed for Easter", "a West African drum"],
                             "wikipedia": ["A pysanka is a Ukrainian Easter egg.", "", "A djembe is a drum."]})
    images = pd.DataFrame({"path": ["p.png", "e.png", "d.png"], "image_sha256": ["a", "b", "c"],
                           "entity_ids": [["bn:1"], ["bn:2"], ["bn:3"]]})
    lemmas = _unit([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    return KnowledgeBase(entities, images, _index(_unit(np.eye(3))), _index(lemmas),
                         {"backbone": "hand", "backbone_key": "hand", "dimension": 3})


def test_a_kb_links_past_a_top_candidate_without_a_page_unless_told_to_keep_it():
    kb = _hand_kb()
    assert kb.has_page() == [True, False, True]
    query = _unit([[0.5, 1.0, 0.1]])  # lemma cosines x |q|: Pysanka 0.5, Easter egg 1.1, Djembe 0.1
    authors, = kb.link(query, k=3)
    assert (authors.entity_id, authors.rank) == ("bn:1", 2)  # Easter egg ranks first but has no page
    assert kb.entity_text(authors.entity) == "A pysanka is a Ukrainian Easter egg."
    assert authors.score == pytest.approx(0.5 / np.sqrt(1.26), abs=1e-6)
    top, = kb.link(query, k=3, rule="top")
    assert (top.entity_id, top.rank) == ("bn:2", 1)
    assert kb.entity_text(top.entity) == "an egg dyed for Easter"  # today's fallback: the description
    assert top.candidates == authors.candidates == ("bn:2", "bn:1", "bn:3")  # retrieval order, unchanged


def test_authors_label_casing_and_text_cut_off_on_hand_made_strings():
    from benchmark.judges.prompts import AUTHORS_TEXT_CHARS, case_label, cut_text

    assert case_label("south KOREAN", "capitalize") == "South korean"  # Python's str.capitalize, as the authors
    assert case_label("south KOREAN") == "south KOREAN"
    assert AUTHORS_TEXT_CHARS == 15_000
    assert cut_text("abcdef", 4) == ("abcd", True) and cut_text("abcd", 4) == ("abcd", False)
    assert cut_text("abcdef", None) == ("abcdef", False)
    with pytest.raises(ValueError, match="unknown label case 'upper'"):
        case_label("x", "upper")
    with pytest.raises(ValueError, match="at least 1 character, got 0"):
        cut_text("x", 0)


# --- evaluation -----------------------------------------------------------------------------------------------
def test_precision_recall_f1_micro_and_macro_by_hand():
    scores = np.array([[5, 2, 4], [4, 4, 1], [1, 3, 5]])  # >= 4 is positive
    gold = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=bool)
    result = precision_recall_f1(scores, gold, labels=["A", "B", "C"])
    # per label: A tp 2 fp 0 fn 0; B tp 1 fp 0 fn 1; C tp 0 fp 2 fn 0
    table = result["per_label"].set_index("label")
    assert table.loc["B", ["precision", "recall", "f1"]].tolist() == pytest.approx([1.0, 0.5, 2 / 3])
    assert table.loc["C", "precision"] == 0.0 and np.isnan(table.loc["C", "recall"])  # no gold positive for C
    assert result["micro"] == pytest.approx({"precision": 3 / 5, "recall": 3 / 4, "f1": 6 / 9})
    assert result["macro"]["precision"] == pytest.approx((1 + 1 + 0) / 3)
    assert result["macro"]["recall"] == pytest.approx((1 + 0.5) / 2) and result["macro"]["recall_labels"] == 2
    assert result["macro"]["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert precision_recall_f1(scores, gold, threshold=5)["micro"]["precision"] == pytest.approx(1 / 2)


def test_pearson_per_image_by_hand_and_undefined_rows():
    scores = np.array([[1, 2, 3], [2, 2, 2], [1, 5, 3], [4, 1, 2]], dtype=float)
    human = np.array([[1, 2, 4], [1, 3, 5], [2, np.nan, 1], [3.0, 1.0, 2.0]])
    r = per_image_pearson(scores, human)
    assert r[0] == pytest.approx(3 / np.sqrt(2 * 14 / 3))  # sum dxdy = 3, sum dx^2 = 2, sum dy^2 = 14/3
    assert np.isnan(r[1])  # constant scores: r undefined
    assert np.isnan(r[2])  # two pairs left after the missing human mean
    assert r[3] == pytest.approx(np.corrcoef([4, 1, 2], [3, 1, 2])[0, 1])
    summary = pearson_summary(scores, human)
    assert summary["macro"] == pytest.approx((r[0] + r[3]) / 2) and summary["images_defined"] == 2
    keep = ~np.isnan(human.ravel())
    assert summary["micro"] == pytest.approx(np.corrcoef(scores.ravel()[keep], human.ravel()[keep])[0, 1])
    by_country = mean_by_group(r, ["Brazil", "Brazil", "India", "India"])
    assert by_country["Brazil"] == pytest.approx(r[0]) and by_country["India"] == pytest.approx(r[3])


# --- the metric adapter ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PixelInputs(Inputs):
    """Inputs plus the image opener the harness is to provide (``Inputs.open_image``, see the report)."""

    open_image: Callable[[int], Image.Image] | None = None


def _inputs(kb, backbone, folder) -> PixelInputs:
    paths = []
    for i in range(3):
        make_image(folder / f"p{i}.png", 100 + i)
        paths.append(folder / f"p{i}.png")
    pixels = torch.stack([backbone.prepare(Image.open(p).convert("RGB"), "image") for p in paths])
    rows = pd.DataFrame({"prompt_id": ["a", "a", "b"], "seed": [0, 1, 0], "image_sha256": ["x", "y", "z"],
                         "prompt": ["p", "p", "q"]})
    return PixelInputs(rows, {Need(kb.backbone_id, "image"): backbone.embed(pixels)}, {},
                       open_image=lambda row: Image.open(paths[row]).convert("RGB"))


def test_relevance_metrics_score_each_label_through_linking_and_the_judge(kb, backbone, tmp_path):
    from benchmark.judges.probe import ProbeJudge
    from benchmark.metrics.relevance import metrics

    base, _ = kb
    judge = ProbeJudge(backbone)
    inputs = _inputs(base, backbone, tmp_path)
    built = metrics(["Japanese", "Yoruba"], base, judge)
    assert [m.info.name for m in built] == ["relevance[Japanese]", "relevance[Yoruba]"]
    assert all(m.info.track == "relevance" and m.info.level == "image" and m.applies(inputs) is None for m in built)
    assert built[0].info.needs == (Need("msiglip-so400m", "image"),)
    links = base.link(inputs.features[Need("msiglip-so400m", "image")])
    for metric, label in zip(built, ["Japanese", "Yoruba"]):
        values, notes = metric.per_image(inputs)
        expected = [judge.score(inputs.open_image(row), None, metric.rubric, label) for row in range(3)]
        assert values.tolist() == expected
        for row, (note, detail) in enumerate(zip(notes, metric.details(inputs))):
            name = base.entities.iloc[links[row].entity]["name"]
            assert note.startswith(f"linked {name} ({links[row].entity_id}, cos ") and "probe cos" in note
            assert detail["entity_id"] == links[row].entity_id and detail["label"] == label


def test_relevance_with_the_vlm_judge_reads_the_linked_wikipedia_text(kb, backbone, tiny_qwen_vl, tmp_path_factory):
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics.relevance import metrics

    base, _ = kb
    judge = VLMJudge(str(tiny_qwen_vl), device="cpu")
    inputs = _inputs(base, backbone, tmp_path_factory.mktemp("images"))
    (metric,) = metrics(["Ukrainian"], base, judge)
    values, notes = metric.per_image(inputs)
    links = base.link(inputs.features[Need("msiglip-so400m", "image")])
    for row, link in enumerate(links):
        j = judge.judge(inputs.open_image(row), base.entity_text(link.entity), metric.rubric, "Ukrainian",
                        entity_name=base.entities.iloc[link.entity]["name"])
        assert values[row] == j.score and "P(1..5) " + " ".join(f"{p:.2f}" for p in j.probabilities) in notes[row]


def test_relevance_without_labels_says_why(kb, backbone):
    from benchmark.judges.probe import ProbeJudge
    from benchmark.metrics.relevance import metrics

    (metric,) = metrics([], kb[0], ProbeJudge(backbone))
    assert metric.info.name == "relevance"
    assert "country" in metric.applies(Inputs(pd.DataFrame(), {}, {}))


def test_relevance_settings_reach_the_judge_and_are_recorded(kb, backbone, tmp_path):
    from benchmark.judges.probe import ProbeJudge
    from benchmark.metrics.relevance import metrics

    base, _ = kb
    judge = ProbeJudge(backbone)
    inputs = _inputs(base, backbone, tmp_path)
    (metric,) = metrics(["japanese"], base, judge, linking="top", label_case="capitalize", text_chars=5)
    assert metric.info.name == "relevance[japanese]"
    assert metric.info.version.endswith("linking top, label capitalize, text 5); images tensor-1")
    values, _ = metric.per_image(inputs)
    assert values.tolist() == [judge.score(inputs.open_image(row), None, metric.rubric, "Japanese") for row in range(3)]
    links = base.link(inputs.features[Need("msiglip-so400m", "image")], rule="top")
    assert [d["truncated"] for d in metric.details(inputs)] == [len(base.entity_text(x.entity)) > 5 for x in links]
    assert metric.info.version != metrics(["japanese"], base, judge)[0].info.version
    assert metrics(["japanese"], base, judge)[0].info.version.endswith("linking first_with_page, label as_given, "
                                                                     "text whole); images tensor-1")
    with pytest.raises(ValueError, match="unknown linking rule 'best'"):
        metrics(["japanese"], base, judge, linking="best")


def test_cli_relevance_flags_are_recorded_in_the_metric_version(kb, tiny_clip, tmp_path):
    from culturelens import cli, options

    backbones = tmp_path / "backbones.json"
    backbones.write_text(json.dumps({"msiglip-so400m": tiny_clip.to_dict()}))
    args = cli.parser().parse_args([
        "score", "sub.zip", "--out", str(tmp_path / "out"), "--backbones", str(backbones), "--tracks", "relevance",
        "--relevance-kb", str(kb[0].folder), "--relevance-judge", "probe", "--relevance-linking", "top",
        "--relevance-label-case", "capitalize", "--relevance-text-chars", "15000"])
    (metric,), reasons = options.scoring_options(vars(args)).build_metrics()
    assert reasons == {}
    assert (metric.linking, metric.label_case, metric.text_chars) == ("top", "capitalize", 15000)
    assert metric.info.version.endswith("k 20, linking top, label capitalize, text 15000); images tensor-1")
    default = cli.parser().parse_args(["score", "sub.zip", "--out", "x"])
    assert (default.relevance_linking, default.relevance_label_case, default.relevance_text_chars) == (
        "first_with_page", "as_given", None)


@pytest.mark.slow
def test_kb_index_verb_names_the_flag_score_takes(tmp_path, tiny_clip):
    """`culturelens kb-index` ends by saying how to score with the index: the flag it names is one `score` has."""
    import json

    from tests.helpers import culturelens

    records, images = write_kb_inputs(tmp_path)
    backbones = tmp_path / "backbones.json"
    backbones.write_text(json.dumps({"msiglip-so400m": tiny_clip.to_dict()}))
    built = culturelens("kb-index", "--records", str(records), "--images", str(images), "--out",
                        str(tmp_path / "kb"), "--backbones", str(backbones))
    assert built.returncode == 0, built.stderr
    flag = built.stdout.split("score relevance with ")[1].split()[0]
    assert flag == "--relevance-kb"
    assert flag in culturelens("score", "--help").stdout


# --- labels from the prompt set, and the headline -------------------------------------------------------------
def test_culture_labels_are_every_country_of_the_prompt_set():
    from benchmark.metrics.relevance import culture_labels

    catalogue = pd.DataFrame({"country": ["Nigeria", "Brazil", "Nigeria", None], "prompt": list("abcd")})
    assert culture_labels(catalogue) == ["Brazil", "Nigeria"]  # every prompt's, once each, sorted; none is no label
    assert culture_labels(catalogue[["prompt"]]) == [] and culture_labels(None) == []


@pytest.fixture(scope="module")
def cube_submission(tmp_path_factory, tiny_upstream):
    """A staged tiny CUBE-1K submission (6 prompts of Brazil and Nigeria, seeds 0 and 1) whose manifest names
    culture labels of its own."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import load_prompts, local_folder
    from benchmark.submission import stage
    from culturelens.testing.submissions import make_submission

    root = tmp_path_factory.mktemp("relevance-cube")
    datasets_root = root / "datasets"
    cube_1k.build(str(tiny_upstream), local_folder(datasets_root, cube_1k.HUB_REPO))
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table.index)
    folder = make_submission(root / "source", ids, culture_labels=["Yoruba", "Japanese"])
    report = stage(folder, root / "staging", lambda m: load_prompts(m.dataset.repo, m.dataset.config,
                                                                   local_root=datasets_root))
    assert report.ok, report.errors
    return report.keep(root / "staged"), report.manifest, report.prompts


def _score_cube(cube_submission, kb, backbone, manifest):
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions
    from benchmark.judges.probe import ProbeJudge
    from benchmark.metrics.relevance import metrics

    staged, _, prompts = cube_submission
    (relevance,) = metrics([], kb[0], ProbeJudge(backbone))  # what the track's factory builds
    images = pq.read_table(staged / "images.parquet").to_pandas()
    return harness.score(staged, manifest, prompts, images, [relevance], {"msiglip-so400m": backbone},
                         submission_id=manifest.model.name.replace(" ", "-"), options=ScoringOptions(batch_size=4))


def test_relevance_labels_are_the_prompt_sets_countries_and_the_headline_is_the_own_country(
        kb, backbone, cube_submission, tmp_path):
    """Every image is scored against Brazil and Nigeria (the tiny CUBE-1K's countries), never against the labels
    the manifest names; relevance_intended is each image's score for its own prompt's country; a submission
    without labels gets the same metrics and values; the headline enters the overall ranking."""
    from benchmark import results, tracks
    from leaderboard import tables
    from leaderboard.catalog import Catalog
    from leaderboard.store import Store

    _, manifest, _ = cube_submission
    scores = _score_cube(cube_submission, kb, backbone, manifest)
    rows = scores.per_image
    assert sorted(rows["metric"].unique()) == ["relevance[Brazil]", "relevance[Nigeria]", "relevance_intended"]
    wide = rows.pivot_table(index=["prompt_id", "seed"], columns="metric", values="value")
    country = rows.drop_duplicates(["prompt_id", "seed"]).set_index(["prompt_id", "seed"])["country"]
    assert sorted(set(country)) == ["Brazil", "Nigeria"]
    assert wide["relevance_intended"].tolist() == [wide.loc[key, f"relevance[{country[key]}]"] for key in wide.index]
    headline = tracks.get("relevance").headline
    assert headline == "relevance_intended"
    overall = [r for r in scores.aggregates if r["metric"] == headline and r["slice"] == "overall"]
    assert len(overall) == 1 and overall[0]["higher_is_better"] and overall[0]["value"] == pytest.approx(
        wide.groupby(level="prompt_id")["relevance_intended"].mean().mean())

    plain = manifest.model_copy(update={"culture_labels": [], "model": manifest.model.model_copy(
        update={"name": "Other Model"})})
    again = _score_cube(cube_submission, kb, backbone, plain)
    assert again.per_image[["metric", "value"]].equals(rows[["metric", "value"]])  # the same labels, comparable

    store = Store(tmp_path / "store")
    for outcome in (scores, again):
        sid = outcome.run.submission_id
        results.write_folder(store.results / sid, results.records(outcome.per_image), outcome.aggregates,
                             results.records(outcome.curves), outcome.run)
    cat = Catalog(store)
    ranked, _ = tables.ranked(cat, "relevance", headline)  # two models on the same labels: one table
    # (on this dataset's 6 prompts, too few to rank: one table that shows both values, no order)
    assert sorted(ranked["model"]) == ["Other Model", "Tiny Test Model"] and ranked["value"].notna().all()
    assert (ranked["not_ranked"] == f"{ranking.TOO_FEW} (6; a ranking needs {ranking.MIN_PROMPTS})").all()
    # The tiny judge is not the protocol's (Qwen2.5-VL-7B-Instruct): its rows never feed the overall ranking.
    assert not tables.protocols(cat, "relevance", headline)["on_protocol"].any()
    wide, sets, chosen, off = tables.overall(cat)
    assert wide.empty and sets == [] and len(off) == 2


def test_every_cube_1k_image_is_scored_against_its_eight_countries(cube_file, tmp_path):
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import load_prompts, local_folder
    from benchmark.metrics.relevance import culture_labels

    cube_1k.build(str(cube_file), local_folder(tmp_path, cube_1k.HUB_REPO))
    for config in (cube_1k.CONFIG, cube_1k.CONFIG_DEMO):  # the demo's labels are the full set's: rows compare
        prompts = load_prompts(cube_1k.HUB_REPO, config, local_root=tmp_path)
        assert culture_labels(prompts.table) == ["Brazil", "France", "India", "Italy", "Japan", "Nigeria", "Turkey",
                                                 "United States"]

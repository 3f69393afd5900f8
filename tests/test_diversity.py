"""The CUBE diversity track: tagging images with CSpace artifacts (retrieval index, VLM choice), and the CD /
normalised-Vendi metrics on hand-made inputs whose answer is known."""

from __future__ import annotations

import json
import math
from collections import Counter
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from benchmark import harness
from benchmark.encoders import load_backbone
from benchmark.metrics.base import Inputs, Need
from benchmark.metrics.diversity import CulturalDiversity, NormalisedVendi, metrics
from benchmark.metrics.vendi import KERNELS, tag_kernel, vendi_score
from benchmark.tagging import TAG_COLUMNS, ArtifactIndex, VLMTagger, tagger_accuracy

CLIP, HPS = "clip-vit-b-32", "hpsv2"
# A tiny CSpace: eight dishes (one per country, five continents), two landmarks, two art forms.
CSPACE = pd.DataFrame([
    ("Q1", "sushi", "cuisine", "Japan", "JP", "Asia"),
    ("Q2", "biryani", "cuisine", "India", "IN", "Asia"),
    ("Q3", "kebab", "cuisine", "Turkey", "TR", "Asia"),
    ("Q4", "pizza", "cuisine", "Italy", "IT", "Europe"),
    ("Q5", "croissant", "cuisine", "France", "FR", "Europe"),
    (None, "jollof rice", "cuisine", "Nigeria", "NG", "Africa"),
    ("Q7", "feijoada", "cuisine", "Brazil", "BR", "South America"),
    ("Q8", "hamburger", "cuisine", "United States", "US", "North America"),
    ("Q9", "Eiffel Tower", "landmarks", "France", "FR", "Europe"),
    ("Q10", "Taj Mahal", "landmarks", "India", "IN", "Asia"),
    ("Q11", "atilogwu", "art", "Nigeria", "NG", "Africa"),
    ("Q12", "capoeira", "art", "Brazil", "BR", "South America"),
], columns=["artifact_id", "artifact", "concept", "country", "country_code", "continent"])
DISHES = CSPACE["artifact"][:8].tolist()
DIM = 12


def basis(artifact: str) -> np.ndarray:
    """Artifact i's text embedding: the i-th unit vector."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[CSPACE["artifact"].tolist().index(artifact)] = 1.0
    return vector


def fixed_encoder(texts: list[str]) -> np.ndarray:
    """'a photo of X' -> basis(X): a plain function standing in for a text encoder, so the math is under test."""
    return np.stack([basis(text.removeprefix("a photo of ")) for text in texts])


def mix(weights: dict[str, float]) -> np.ndarray:
    vector = sum(w * basis(a) for a, w in weights.items())
    return vector / np.linalg.norm(vector)


@pytest.fixture(scope="module")
def index() -> ArtifactIndex:
    return ArtifactIndex.build(CSPACE, fixed_encoder, backbone_id=CLIP, backbone_key="fixed-vectors", progress=False)


# --- the retrieval index ---------------------------------------------------------------------------------
def test_tag_picks_the_artifact_with_the_highest_cosine(index):
    images = np.stack([mix({"sushi": 0.9, "pizza": 0.3}), mix({"pizza": 0.5, "croissant": 0.7}),
                       mix({"Taj Mahal": 1.0})])
    tags = index.tag(images, ["cuisine", "cuisine", "landmarks"])
    assert list(tags.columns) == list(TAG_COLUMNS)
    assert tags["artifact"].tolist() == ["sushi", "croissant", "Taj Mahal"]
    assert tags["country"].tolist() == ["Japan", "France", "India"]
    assert tags["continent"].tolist() == ["Asia", "Europe", "Asia"]
    assert tags["confidence"].to_numpy() == pytest.approx([0.9 / math.hypot(0.9, 0.3), 0.7 / math.hypot(0.5, 0.7),
                                                           1.0], abs=1e-6)


def test_search_is_restricted_to_the_prompts_concept(index):
    # Closest to the Eiffel Tower overall, but a cuisine prompt's image is tagged with a dish.
    image = mix({"Eiffel Tower": 0.9, "pizza": 0.3, "sushi": 0.1})
    tags = index.tag(np.stack([image, image]), ["cuisine", "landmarks"])
    assert tags["artifact"].tolist() == ["pizza", "Eiffel Tower"]
    assert tags["confidence"][0] == pytest.approx(0.3 / math.sqrt(0.81 + 0.09 + 0.01), abs=1e-6)


def test_top_k_tags_are_ranked_and_stop_where_a_concept_runs_out(index):
    image = mix({"Taj Mahal": 0.8, "Eiffel Tower": 0.6})
    tags = index.tag(np.stack([image]), ["landmarks"], k=3)  # only two landmarks exist
    assert tags["artifact"].tolist() == ["Taj Mahal", "Eiffel Tower"]
    assert tags["rank"].tolist() == [0, 1] and tags["image"].tolist() == [0, 0]
    assert tags["confidence"].to_numpy() == pytest.approx([0.8, 0.6], abs=1e-6)


def test_image_embeddings_are_normalised_before_the_cosine(index):
    tags = index.tag(np.stack([5.0 * mix({"sushi": 0.6, "pizza": 0.8})]), ["cuisine"])
    assert tags["artifact"][0] == "pizza" and tags["confidence"][0] == pytest.approx(0.8, abs=1e-6)


def test_bad_queries_are_clear_errors(index):
    with pytest.raises(ValueError, match="no concept 'music'"):
        index.tag(np.stack([basis("sushi")]), ["music"])
    with pytest.raises(ValueError, match="dimension 4, the index 12"):
        index.tag(np.ones((1, 4)), ["cuisine"])
    with pytest.raises(ValueError, match="2 image embeddings but 1 concepts"):
        index.tag(np.ones((2, DIM)), ["cuisine"])
    with pytest.raises(ValueError, match="zero norm"):
        index.tag(np.zeros((1, DIM)), ["cuisine"])


def test_bad_cspace_tables_and_encoders_are_clear_errors():
    with pytest.raises(ValueError, match="lacks the column\\(s\\) \\['continent'\\]"):
        ArtifactIndex.build(CSPACE.drop(columns="continent"), fixed_encoder, backbone_id=CLIP, backbone_key="k")
    with pytest.raises(ValueError, match="1 row\\(s\\) without 'country' \\(first at row 2\\)"):
        ArtifactIndex.build(CSPACE.assign(country=CSPACE["country"].where(CSPACE.index != 2)), fixed_encoder,
                            backbone_id=CLIP, backbone_key="k", progress=False)
    with pytest.raises(ValueError, match="unit-norm"):
        ArtifactIndex.build(CSPACE, lambda texts: 2 * fixed_encoder(texts), backbone_id=CLIP, backbone_key="k",
                            progress=False)
    with pytest.raises(ValueError, match="must contain \\{artifact\\}"):
        ArtifactIndex.build(CSPACE, fixed_encoder, backbone_id=CLIP, backbone_key="k", template="a photo")


def test_template_fields_and_batched_encoding_embed_each_distinct_text_once():
    seen = []

    def encoder(texts):
        seen.extend(texts)
        return fixed_encoder([t.split(" from ")[0] for t in texts])

    doubled = pd.concat([CSPACE, CSPACE.iloc[[0]]], ignore_index=True)  # sushi twice: one text, one embedding
    index = ArtifactIndex.build(doubled, encoder, backbone_id=CLIP, backbone_key="k", batch_size=3,
                                template="a photo of {artifact} from {country}", progress=False)
    assert len(index) == 13 and len(seen) == 12 and "a photo of sushi from Japan" in seen
    assert index.tag(np.stack([basis("kebab")]), ["cuisine"])["artifact"][0] == "kebab"


# --- saving and loading ----------------------------------------------------------------------------------
def test_save_and_load_round_trip(index, tmp_path):
    folder = index.save(tmp_path / "index")
    manifest = json.loads((folder / "index.json").read_text())
    assert manifest["backbone_id"] == CLIP and manifest["backbone_key"] == "fixed-vectors"
    assert manifest["template"] == "a photo of {artifact}" and manifest["rows"] == 12
    assert set(manifest["concepts"]) == {"art", "cuisine", "landmarks"}
    loaded = ArtifactIndex.load(folder)
    images = np.stack([mix({"sushi": 0.9, "pizza": 0.3}), mix({"Eiffel Tower": 1.0})])
    pd.testing.assert_frame_equal(loaded.tag(images, ["cuisine", "landmarks"], k=2),
                                  index.tag(images, ["cuisine", "landmarks"], k=2))
    assert (loaded.backbone_id, loaded.backbone_key, loaded.template) == (CLIP, "fixed-vectors",
                                                                        "a photo of {artifact}")


def test_a_changed_rows_file_fails_the_checksum(index, tmp_path):
    folder = index.save(tmp_path / "index")
    rows = pd.read_parquet(folder / "rows.parquet")
    rows.loc[0, "country"] = "Korea"
    rows.to_parquet(folder / "rows.parquet", index=False)
    with pytest.raises(ValueError, match="rows.parquet changed after the index was saved"):
        ArtifactIndex.load(folder)


def test_an_edited_manifest_or_a_missing_file_is_named(index, tmp_path):
    folder = index.save(tmp_path / "index")
    manifest = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**manifest, "template": "a painting of {artifact}"}))
    with pytest.raises(ValueError, match="index.json was edited after saving"):
        ArtifactIndex.load(folder)
    folder = index.save(tmp_path / "again")
    (folder / manifest["concepts"]["landmarks"]["file"]).unlink()
    with pytest.raises(ValueError, match="concept_2.faiss is missing"):
        ArtifactIndex.load(folder)
    with pytest.raises(ValueError, match="no index.json; not an artifact index"):
        ArtifactIndex.load(tmp_path / "nothing")


def test_the_production_path_with_a_real_tiny_open_clip(tiny_clip, tmp_path):
    backbone = load_backbone(CLIP, {CLIP: tiny_clip}, device="cpu")
    built = ArtifactIndex.from_backbone(CSPACE, backbone, progress=False)
    assert built.mismatch(backbone) is None and built.backbone_key == backbone.key
    loaded = ArtifactIndex.load(built.save(tmp_path / "clip-index"))
    rng = np.random.default_rng(0)
    pictures = [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(4)]
    embeddings = backbone.embed(torch.stack([backbone.prepare(p, "image") for p in pictures]))
    concepts = ["cuisine", "cuisine", "landmarks", "cuisine"]
    tags = loaded.tag(embeddings, concepts)
    # Independent check: brute-force cosines against the backbone's own text embeddings, per concept.
    for row, concept in enumerate(concepts):
        candidates = CSPACE[CSPACE["concept"] == concept]
        texts = backbone.embed_texts([f"a photo of {a}" for a in candidates["artifact"]])
        cosines = texts @ embeddings[row]
        assert tags["artifact"][row] == candidates["artifact"].iloc[int(np.argmax(cosines))]
        assert tags["confidence"][row] == pytest.approx(float(cosines.max()), abs=1e-5)
    other = load_backbone("clip-other", {"clip-other": tiny_clip}, device="cpu")
    assert "rebuild the index" in loaded.mismatch(other)


# --- the VLM tagger --------------------------------------------------------------------------------------
def _pictures(n: int, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(n)]


def test_vlm_tagger_chooses_the_option_with_the_highest_next_token_probability(index, tiny_llava):
    tagger = VLMTagger.from_pretrained(index, str(tiny_llava), k=3, batch_size=2, device="cpu")
    embeddings = np.stack([mix({"sushi": 0.9, "pizza": 0.5, "kebab": 0.2}), mix({"feijoada": 1.0, "pizza": 0.1}),
                           mix({"Taj Mahal": 1.0}), mix({"croissant": 1.0, "hamburger": 0.9, "pizza": 0.3})])
    concepts = ["cuisine", "cuisine", "landmarks", "cuisine"]
    pictures = _pictures(4)
    tags = tagger.tag(embeddings, concepts, pictures)
    assert list(tags.columns) == list(TAG_COLUMNS) and tags["image"].tolist() == [0, 1, 2, 3]
    candidates = index.tag(embeddings, concepts, k=3)
    processor, model = tagger.processor, tagger.model
    for i, picture in enumerate(pictures):
        options = candidates[candidates["image"] == i].reset_index(drop=True)
        # Independent: render the prompt by hand, run the model on this one image, softmax the option digits.
        text = (processor.tokenizer.bos_token + "user: <image>Which " + concepts[i] + " artifact does this image "
                "show? Options:\n" + "\n".join(f"{n}. {r.artifact} ({r.country})" for n, r in
                                                enumerate(options.itertuples(), 1))
                + "\nAnswer with the number of the best option only.\nassistant:")
        single = processor(images=[picture], text=[text], return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            logits = model(**single).logits[0, -1]
        digits = [processor.tokenizer.encode(str(n), add_special_tokens=False)[0] for n in range(1, len(options) + 1)]
        probabilities = torch.softmax(logits[digits], dim=0).numpy()
        assert tags["artifact"][i] == options["artifact"][int(probabilities.argmax())]
        assert tags["confidence"][i] == pytest.approx(float(probabilities.max()), abs=1e-4)
    assert tags["artifact"][2] in {"Taj Mahal", "Eiffel Tower"}  # only landmarks are offered for a landmark


def test_vlm_tagger_needs_the_images_and_one_token_options(index, tiny_llava):
    tagger = VLMTagger.from_pretrained(index, str(tiny_llava), k=2, device="cpu")
    with pytest.raises(ValueError, match="needs the images themselves"):
        tagger.tag(np.stack([basis("sushi")]), ["cuisine"])
    with pytest.raises(ValueError, match="between 1 and 9"):
        VLMTagger(index, tagger.model, tagger.processor, k=12)
    with pytest.raises(ValueError, match="cannot load the tagging VLM"):
        VLMTagger.from_pretrained(index, str(tiny_llava / "missing"), device="cpu")


def test_tagger_accuracy_counts_each_level_on_images_with_a_known_artifact():
    predicted = pd.DataFrame({"artifact": ["Sushi", "ramen", "pizza", "kebab"],
                              "country": ["Japan", "Japan", "France", "Turkey"],
                              "continent": ["Asia", "Asia", "Europe", "Asia"]})
    gold = pd.DataFrame({"artifact": ["sushi ", "udon", "pizza", None],
                         "country": ["Japan", "Japan", "Italy", "Turkey"],
                         "continent": ["Asia", "Asia", "Europe", "Asia"]})
    assert tagger_accuracy(predicted, gold) == {"images": 3, "artifact": pytest.approx(2 / 3), "country":
                                                pytest.approx(2 / 3), "continent": 1.0}
    with pytest.raises(ValueError, match="align them by image"):
        tagger_accuracy(predicted.iloc[:2], gold)


# --- the metrics -----------------------------------------------------------------------------------------
def make_inputs(prompts: dict[str, tuple[str, list[np.ndarray]]], quality: float | list[float] = 0.3,
                **columns) -> Inputs:
    """prompt_id -> (concept, image embeddings). Quality features are built so that cos(image, prompt) under
    the quality backbone is exactly ``quality`` (per image, or one value for all)."""
    rows, clip = [], []
    for prompt_id, (concept, embeddings) in prompts.items():
        for seed, embedding in enumerate(embeddings):
            rows.append({"prompt_id": prompt_id, "seed": seed, "prompt": f"Image of {concept}", "concept": concept,
                         **columns})
            clip.append(embedding)
    cos = np.broadcast_to(np.asarray(quality, dtype=float), (len(rows),))
    text = np.tile([1.0, 0.0], (len(rows), 1))
    image = np.stack([cos, np.sqrt(1 - cos ** 2)], axis=1)
    features = {Need(CLIP, "image"): np.stack(clip).astype(np.float32), Need(HPS, "image"): image,
                Need(HPS, "text"): text}
    return Inputs(pd.DataFrame(rows), features, {HPS: np.zeros(len(rows), dtype=bool)})


def by_name(inputs: Inputs, index: ArtifactIndex, **settings) -> dict[str, pd.DataFrame]:
    return {m.info.name: m.per_prompt(inputs).set_index("prompt_id") for m in metrics(index, **settings)}


def test_metrics_are_named_per_kernel_and_declare_their_needs(index):
    built = metrics(index)
    assert [m.info.name for m in built] == [f"{p}_{k}" for p in ("cd", "vendi") for k in KERNELS]
    cd, vendi = built[0].info, built[5].info
    assert cd.level == vendi.level == "prompt" and cd.track == vendi.track == "diversity"
    assert set(cd.needs) == {Need(CLIP, "image"), Need(HPS, "image"), Need(HPS, "text")}
    assert vendi.needs == (Need(CLIP, "image"),)
    assert (cd.low, cd.high, vendi.low, vendi.high) == (0.0, 1.0, 1 / 8, 1.0)
    assert "(1/3, 1/3, 1/3)" in built[4].info.label and "Eq. 3" in cd.citation
    assert metrics(index, q=2.0)[0].info.name == "cd_continent_q2"


def test_cd_and_vendi_on_prompts_with_a_known_answer(index):
    every_dish = [basis(d) for d in DISHES]  # 8 images, 8 dishes, 8 countries, continents 3+2+1+1+1
    inputs = make_inputs({"all-dishes": ("cuisine", every_dish), "only-sushi": ("cuisine", [basis("sushi")] * 8),
                          "too-few": ("cuisine", every_dish[:5])})
    results = by_name(inputs, index)
    continent = math.exp(-(3 / 8 * math.log(3 / 8) + 2 / 8 * math.log(2 / 8) + 3 * (1 / 8) * math.log(1 / 8)))
    # With exactly N = 8 images every draw is the same set: the value is exact.
    expected_vendi = {"continent": continent / 8, "country": 1.0, "artifact": 1.0,
                      "hierarchical": vendi_score(tag_kernel(CSPACE.iloc[:8], KERNELS["hierarchical"])) / 8,
                      "uniform": vendi_score(tag_kernel(CSPACE.iloc[:8], KERNELS["uniform"])) / 8}
    for kernel, value in expected_vendi.items():
        assert results[f"vendi_{kernel}"].loc["all-dishes", "value"] == pytest.approx(value, abs=1e-9)
        assert results[f"cd_{kernel}"].loc["all-dishes", "value"] == pytest.approx(0.3 * value, abs=1e-6)
        assert results[f"vendi_{kernel}"].loc["only-sushi", "value"] == pytest.approx(1 / 8)
        assert results[f"cd_{kernel}"].loc["only-sushi", "value"] == pytest.approx(0.3 / 8, abs=1e-6)
        assert math.isnan(results[f"cd_{kernel}"].loc["too-few", "value"])
    assert results["cd_country"].loc["too-few", "note"] == "not scored: 5 images, fewer than N=8"
    note = results["cd_country"].loc["all-dishes", "note"]
    assert note.startswith("N=8, 50 draws over 8 images; 95% CI over draws")
    assert "mean HPS quality 0.300" in note and "country tags: Japan 1" in note and "+3 more" in note
    assert "artifact tags: sushi 8" in results["vendi_artifact"].loc["only-sushi", "note"]


def test_the_value_is_the_mean_over_random_sets_of_n(index):
    # 10 images, 5 sushi and 5 pizza: the exact mean of VS / 8 over all C(10, 8) sets, by enumeration.
    images = [basis("sushi")] * 5 + [basis("pizza")] * 5
    quality = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.5]
    inputs = make_inputs({"p": ("cuisine", images)}, quality=quality)
    tags = np.array([("Asia", "Japan", "sushi")] * 5 + [("Europe", "Italy", "pizza")] * 5)
    sets = [list(c) for c in combinations(range(10), 8)]
    exact_vendi = np.mean([vendi_score(tag_kernel(tags[s], KERNELS["country"])) / 8 for s in sets])
    exact_cd = np.mean([np.mean(np.array(quality)[s]) * vendi_score(tag_kernel(tags[s], KERNELS["country"])) / 8
                        for s in sets])
    vendi = NormalisedVendi(index, "country", draws=3000).per_prompt(inputs)["value"][0]
    cd = CulturalDiversity(index, "country", draws=3000).per_prompt(inputs)["value"][0]
    assert vendi == pytest.approx(exact_vendi, abs=0.003)
    assert cd == pytest.approx(exact_cd, abs=0.002)
    # Seeded per prompt: the same value again, and the default 50 draws give a CI around the estimate.
    assert NormalisedVendi(index, "country", draws=3000).per_prompt(inputs)["value"][0] == vendi
    note = NormalisedVendi(index, "country").per_prompt(inputs)["note"][0]
    assert note.startswith("N=8, 50 draws over 10 images")


def test_seed_batches_are_the_papers_protocol(index):
    # Seeds 0-7 all sushi, seeds 8-15 eight different dishes, rows in a shuffled order: two batches, VS / N
    # of 1/8 and 1 under the artifact kernel, so the mean is exactly 9/16.
    order = np.random.default_rng(0).permutation(16)
    embeddings = ([basis("sushi")] * 8 + [basis(d) for d in DISHES])
    inputs = make_inputs({"p": ("cuisine", [embeddings[i] for i in order])})
    inputs.images["seed"] = order
    metric = NormalisedVendi(index, "artifact", sampling="seed_batches")
    row = metric.per_prompt(inputs).iloc[0]
    assert row["value"] == pytest.approx(9 / 16)
    assert row["note"].startswith("N=8, 2 seed batches over 16 images; 95% CI over seed batches")
    assert "consecutive seed batches" in metric.info.label and metric.info.name == "vendi_artifact"
    with pytest.raises(ValueError, match="sampling must be"):
        NormalisedVendi(index, "artifact", sampling="bootstrap")


def test_curation_of_seeds_no_longer_lifts_the_vendi_score(index):
    """Issue 49, finding 1: with N = 4 seed batches and eight seeds declared, four different dishes (seeds 0-3) and
    four sushi (4-7) give VS / N of 1 and 1/4 under the country kernel, 0.625; sending only seeds 0-3 gave 1. The
    prompt is now not scored, and counts as refused at the worst, 1/4 (CD: 0), wherever it is ranked."""
    honest = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES[:4]] + [basis("sushi")] * 4)})
    curated = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES[:4]])})
    built = metrics(index, size=4, sampling="seed_batches")
    vendi = next(m for m in built if m.info.name == "vendi_country")
    assert vendi.per_prompt(honest)["value"].tolist() == [pytest.approx(0.625)]
    assert vendi.per_prompt(curated)["value"].tolist() == [1.0]  # the finding: over the images sent
    base = curated.images.assign(image_path="p.png", image_sha256="sha", submission_id="s", model="s")
    missing = pd.DataFrame({"prompt_id": "p", "seed": [4, 5, 6, 7]})  # its manifest's missing: seeds 0-7 declared
    per_image, _ = harness.metric_rows(built, curated, base, missing)
    assert per_image["value"].isna().all() and set(per_image["error"]) == {harness.MISSING_IMAGES}
    rows = [r for r in harness.aggregate_scores(per_image, missing, built) if r["slice"] == "prompt"]
    assert len(rows) == 10 and all(r["value"] is None and r["excluded"] == 1 for r in rows)
    assert (vendi.info.failure, next(m for m in built if m.info.name == "cd_country").info.failure) == (0.25, 0.0)


def test_the_tagging_and_the_draws_are_shared_through_the_memo(index):
    inputs = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES])})
    for metric in metrics(index):
        metric.per_prompt(inputs)
    kinds = sorted(key[0] for key in inputs.memo)
    assert kinds == ["diversity-draws", "diversity-quality", "diversity-tags"]


def test_a_vlm_tagger_reads_each_image_once_and_is_named_in_the_results(index, tiny_llava):
    # CUBE App. H.2's tagging in the metrics: the images come from Inputs.open_image, one row at a time.
    embeddings = [mix({d: 1.0, "pizza": 0.5}) if d != "pizza" else basis(d) for d in DISHES]
    pictures = _pictures(8, seed=1)
    opened = []

    def open_image(row: int) -> Image.Image:
        opened.append(row)
        return pictures[row]

    inputs = make_inputs({"p": ("cuisine", embeddings)})
    inputs = Inputs(inputs.images, inputs.features, inputs.truncated, open_image=open_image)
    tagger = VLMTagger.from_pretrained(index, str(tiny_llava), k=3, batch_size=3, device="cpu")
    assert tagger.index is index and index.index is index
    assert tagger.id == f"{tiny_llava}@local, top 3"
    expected = tagger.tag(np.stack(embeddings), ["cuisine"] * 8, pictures)["artifact"]  # independent call
    built = metrics(tagger)
    results = {m.info.name: m.per_prompt(inputs).iloc[0] for m in built}
    assert sorted(opened) == list(range(8))  # ten metrics, one tagging: each image opened once
    index_id = f"index of 12 artifacts by {CLIP} (fixed-vectors), 'a photo of {{artifact}}'"
    assert index.id == index_id
    assert {m.info.version for m in built} == {f"2 (N = 8, 50 random draws, seed 0; tagger {tagger.id} over {index_id}; "
                                               "tagging accuracy not measured); images tensor-1"}
    counts = ", ".join(f"{a} {n}" for a, n in Counter(expected).most_common()[:5])
    assert f"artifact tags by {tagger.id}: {counts}" in results["vendi_artifact"]["note"]
    # The index's own tags on the same inputs are memoised apart, and its version names the index.
    assert {m.info.version for m in metrics(index)} == {f"2 (N = 8, 50 random draws, seed 0; tagger {index_id}; "
                                                        "tagging accuracy not measured); images tensor-1"}
    NormalisedVendi(index, "artifact").per_prompt(inputs)
    assert sum(key[0] == "diversity-tags" for key in inputs.memo) == 2


def test_negative_quality_counts_as_zero_and_the_note_says_so(index):
    inputs = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES])}, quality=[-0.2] + [0.4] * 7)
    row = CulturalDiversity(index, "artifact").per_prompt(inputs).iloc[0]
    assert row["value"] == pytest.approx(0.4 * 7 / 8, abs=1e-6)  # mean quality (0 + 7 x 0.4) / 8, VS / N = 1
    assert "1 negative cosines counted as 0" in row["note"]


def test_applies_says_why_a_metric_cannot_run(index):
    metric = CulturalDiversity(index, "country")
    good = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES])})
    assert metric.applies(good) is None
    no_concept = Inputs(good.images.drop(columns="concept"), {}, {})
    assert "no concept" in metric.applies(no_concept)
    assert "no artifacts for concept 'music'" in metric.applies(Inputs(good.images.assign(concept="music"), {}, {}))
    few = make_inputs({"p": ("cuisine", [basis(d) for d in DISHES[:5]])})
    assert metric.applies(few) == "needs at least N=8 images per prompt (seeds); the most any prompt has is 5"
    other = CulturalDiversity(index, "country", clip="clip-vit-l-14")
    assert "built with backbone 'clip-vit-b-32', but this metric tags with 'clip-vit-l-14'" in other.applies(good)
    with pytest.raises(ValueError, match="unknown diversity kernel"):
        CulturalDiversity(index, "religion")


def staged_submission(tiny_upstream, tmp_path):
    """A CUBE-layout dataset with a concept column and a staged submission of 8 seeds per prompt: (staging
    report, staged folder, its images table)."""
    import pyarrow.parquet as pq

    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import load_prompts
    from benchmark.submission import stage
    from tests.helpers import tiny_cube
    from culturelens.testing.submissions import make_submission

    tiny_cube(tmp_path / "datasets", tiny_upstream)
    prompts = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=tmp_path / "datasets")
    folder = make_submission(tmp_path / "submission", list(prompts.table.index), seeds=range(8))
    report = stage(folder, tmp_path / "staging", lambda m: prompts)
    staged = report.keep(tmp_path / "staged")
    return report, staged, pq.read_table(staged / "images.parquet").to_pandas()


def test_the_diversity_track_through_the_harness(tiny_clip, tiny_upstream, tmp_path):
    """The real path: a CUBE-layout dataset with a concept column, a submission of 8 seeds per prompt, the
    tiny CLIP as both the tagging and the quality backbone; every prompt's value checked by hand."""
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions

    report, staged, images = staged_submission(tiny_upstream, tmp_path)
    prompts = report.prompts
    clip = load_backbone(CLIP, {CLIP: tiny_clip}, device="cpu")
    quality = load_backbone(HPS, {HPS: tiny_clip}, device="cpu")
    index = ArtifactIndex.from_backbone(CSPACE, clip, progress=False)
    scores = harness.score(staged, report.manifest, report.prompts, images, metrics(index),
                           {CLIP: clip, HPS: quality}, submission_id="t", options=ScoringOptions(batch_size=16))
    rows = scores.per_image.set_index(["metric", "prompt_id"])
    assert len(rows) == 10 * len(prompts) and rows["seed"].isna().all()

    table = prompts.table
    for prompt_id in table.index:
        paths = sorted((tmp_path / "submission" / "images" / prompt_id).iterdir())  # the upload's files
        pictures = [Image.open(p).convert("RGB") for p in paths]
        embedded = clip.embed(torch.stack([clip.prepare(p, "image") for p in pictures]))
        candidates = CSPACE[CSPACE["concept"] == table.loc[prompt_id, "concept"]].reset_index(drop=True)
        texts = clip.embed_texts([f"a photo of {a}" for a in candidates["artifact"]])
        tags = candidates.iloc[np.argmax(embedded @ texts.T, axis=1)]
        tags = tags.assign(artifact=tags["artifact_id"].fillna(tags["artifact"]))  # one artifact: one id
        cos = embedded @ quality.embed_texts([table.loc[prompt_id, "prompt"]])[0]
        for kernel, weights in KERNELS.items():
            vendi = vendi_score(tag_kernel(tags, weights)) / 8
            assert rows.loc[(f"vendi_{kernel}", prompt_id), "value"] == pytest.approx(vendi, abs=1e-6)
            assert rows.loc[(f"cd_{kernel}", prompt_id), "value"] == pytest.approx(
                np.clip(cos, 0, 1).mean() * vendi, abs=1e-5)
    assert {a["metric"] for a in scores.aggregates} == {m.info.name for m in metrics(index)}
    # The results record the tagger: the index's size, backbone id and weights key, and template.
    version = f"2 (N = 8, 50 random draws, seed 0; tagger index of {len(CSPACE)} artifacts by {CLIP} ({clip.key}), " \
        "'a photo of {artifact}'; tagging accuracy not measured); images tensor-1"
    assert set(scores.run.metrics.values()) == {version}  # run.json
    assert {a["metric_version"] for a in scores.aggregates} == {version}


@pytest.mark.slow
def test_the_vlm_tagger_through_the_harness(tiny_clip, tiny_upstream, tiny_llava, tmp_path):
    """The ``diversity_tagger`` setting set to a VLM folder (CUBE App. H.2): the harness tags each image with the
    VLM's choice among the index's top 5, the same as an independent ``VLMTagger.tag`` call on the images, and
    the results name the tagger."""
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions
    from benchmark.tracks import build, metric_settings, select

    report, staged, images = staged_submission(tiny_upstream, tmp_path)
    clip = load_backbone(CLIP, {CLIP: tiny_clip}, device="cpu")
    quality = load_backbone(HPS, {HPS: tiny_clip}, device="cpu")
    folder = ArtifactIndex.from_backbone(CSPACE, clip, progress=False).save(tmp_path / "index")
    built, unavailable = build(metric_settings(artifact_index=str(folder), diversity_tagger=str(tiny_llava)))
    chosen, _ = select(built, unavailable, ["diversity"])
    scores = harness.score(staged, report.manifest, report.prompts, images, chosen, {CLIP: clip, HPS: quality},
                           submission_id="t", options=ScoringOptions(batch_size=16))
    rows = scores.per_image.set_index(["metric", "prompt_id"])

    tagger = VLMTagger.from_pretrained(ArtifactIndex.load(folder), str(tiny_llava), device="cpu")
    version = f"2 (N = 8, seed batches; tagger {tiny_llava}@local, top 5 over index of {len(CSPACE)} artifacts by " \
        f"{CLIP} ({clip.key}), 'a photo of {{artifact}}'; tagging accuracy not measured); images tensor-1"
    assert set(scores.run.metrics.values()) == {version}
    assert {a["metric_version"] for a in scores.aggregates} == {version}
    table, chose_other = report.prompts.table, False
    for prompt_id in table.index:
        paths = sorted((tmp_path / "submission" / "images" / prompt_id).iterdir())  # the upload: seeds 0-7, in order
        pictures = [Image.open(p).convert("RGB") for p in paths]
        embedded = clip.embed(torch.stack([clip.prepare(p, "image") for p in pictures]))
        concepts = [table.loc[prompt_id, "concept"]] * len(pictures)
        tags = tagger.tag(embedded, concepts, pictures)
        chose_other |= bool((tags["artifact"] != tagger.index.tag(embedded, concepts)["artifact"]).any())
        counts = ", ".join(f"{a} {n}" for a, n in Counter(tags["artifact"]).most_common()[:5])
        assert f"artifact tags by {tagger.id}: {counts}" in rows.loc[("vendi_artifact", prompt_id), "note"]
        tags = tags.assign(artifact=tags["artifact_id"].fillna(tags["artifact"]))  # one artifact: one id
        for kernel, weights in KERNELS.items():
            vendi = vendi_score(tag_kernel(tags, weights)) / 8
            assert rows.loc[(f"vendi_{kernel}", prompt_id), "value"] == pytest.approx(vendi, abs=1e-6)
    assert chose_other  # the VLM did not always take the nearest artifact: the check tells the taggers apart


def test_a_vlm_tagger_that_cannot_load_makes_the_diversity_track_unavailable(index, tmp_path):
    from benchmark.tracks import build, metric_settings

    folder = str(index.save(tmp_path / "index"))
    missing = str(tmp_path / "no-such-vlm")
    built, unavailable = build(metric_settings(artifact_index=folder, diversity_tagger=missing))
    assert not [m for m in built if m.info.track == "diversity"]
    reason = {u.name: u.reason for u in unavailable}["diversity"]
    assert reason.startswith(f"cannot load the tagging VLM {missing!r}")
    built, _ = build(metric_settings(artifact_index=folder))  # the default: the index tags, and is named
    tracked = [m for m in built if m.info.track == "diversity"]
    version = f"2 (N = 8, seed batches; tagger index of 12 artifacts by {CLIP} (fixed-vectors), " \
        "'a photo of {artifact}'; tagging accuracy not measured); images tensor-1"
    assert len(tracked) == 10 and all(isinstance(m.tagger, ArtifactIndex) and m.info.version == version
                                      for m in tracked)
    # Scoring other tracks never loads the tagger (nor its index): no diversity metric, no reason to give.
    built, unavailable = build(metric_settings(artifact_index=folder, diversity_tagger=missing), tracks=["awareness"])
    assert {m.info.track for m in built}.isdisjoint({"diversity", "relevance"})
    assert not [u for u in unavailable if u.track in ("diversity", "relevance")]

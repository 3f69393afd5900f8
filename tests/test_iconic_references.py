"""The iconic-references builder (records + images made here from scikit-image's sample photos) and the
iconicity track through the harness, checked against an independent computation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

from benchmark import harness
from benchmark.scoring_options import ScoringOptions
from benchmark.datasets import iconic_references as iconic
from benchmark.datasets.prompts import load_prompts, local_folder
from benchmark.encoders import load_backbone
from benchmark.metrics import iconicity
from benchmark.submission import stage
from leaderboard.store import Store
from leaderboard.ui.compare import CompareTab
from leaderboard.ui.site import Site
from tests.helpers import tiny_cube
from culturelens.testing.submissions import make_submission

skimage_data = pytest.importorskip("skimage.data")

STILL = [("Q1", "The Lonely Astronaut", "photograph", "astronaut"), ("Q2", "Morning Coffee", "artwork", "coffee"),
         ("Q3", "A Cat Asleep", "album", "chelsea"), ("Q4", "Lift Off", "photograph", "rocket")]


def _save(array: np.ndarray, path: Path, size: int | None = None) -> str:
    image = Image.fromarray(array).convert("RGB")
    if size:
        image = image.resize((size, size))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path.name


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("iconic")
    images = root / "images"
    lines = []
    for qid, title, modality, photo in STILL:
        _save(getattr(skimage_data, photo)(), images / qid / "0.png")
        lines.append({"qid": qid, "title": title, "modality": modality, "sitelinks": 40, "images": [f"{qid}/0.png"],
                      "image_licenses": ["public domain (scikit-image sample)"], "year": 1969,
                      "synonym": title.replace("The ", "A "), "description": f"a picture: {title.lower()}"})
    # A moving reference: four crops of one photo, and one unrelated depiction that pruning should catch.
    astronaut = skimage_data.astronaut()
    names = [_save(astronaut[y:y + 400, x:x + 400], images / "Q5" / f"{i}.png", 256)
             for i, (y, x) in enumerate([(0, 0), (50, 60), (100, 20), (20, 100)])]
    names.append(_save(np.stack([skimage_data.camera()] * 3, axis=-1), images / "Q5" / "4.png", 256))
    lines.append({"qid": "Q5", "title": "Space Walk", "modality": "film", "sitelinks": 80,
                  "images": [f"Q5/{n}" for n in names], "image_licenses": ["public domain"] * 5})
    lines.append({"qid": "Q6", "title": "Obscure Sketch", "modality": "artwork", "sitelinks": 12,
                  "images": ["Q1/0.png"]})
    path = root / "references.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path, images


@pytest.fixture(scope="module")
def built(records, tmp_path_factory, tiny_clip):
    path, images = records
    root = tmp_path_factory.mktemp("iconic-built")
    out = local_folder(root, iconic.HUB_REPO)
    clip = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    summary = iconic.build(path, images, out, prune_backbone=clip)
    return root, out, summary, clip


def load(folder: Path, config: str):
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(folder) + ".cache")


def test_build_applies_the_filters_and_keeps_every_record_in_the_all_config(built):
    _, out, summary, _ = built
    assert (summary["records"], summary["kept"]) == (6, 5) and summary["removed"] == {"sitelinks": 1}
    references = load(out, iconic.CONFIG)
    assert references["prompt_id"] == ["ref-q1", "ref-q2", "ref-q3", "ref-q4", "ref-q5"]
    assert references["prompt"][0] == "The Lonely Astronaut" and references["kind"] == ["still"] * 4 + ["moving"]
    assert isinstance(references[0]["images"][0], Image.Image)
    everything = load(out, iconic.CONFIG_ALL).to_pandas().set_index("qid")
    assert not everything.loc["Q6", "kept"] and everything.loc["Q6", "removed_by"].tolist() == ["sitelinks: 12 <= 20"]
    synonym = load(out, "references_synonym")
    assert synonym["prompt"][0] == "A Lonely Astronaut" and synonym["prompt_original"][0] == "The Lonely Astronaut"
    card = (out / "README.md").read_text()
    assert "arXiv:2511.11435" in card and "**not applied in this build** (no NER model was given)" in card


def test_pruning_drops_exactly_what_the_rule_says_on_independent_embeddings(built, records):
    _, out, summary, clip = built
    _, images = records
    paths = sorted((images / "Q5").glob("*.png"))
    with torch.no_grad():
        embeddings = clip.embed(torch.stack([clip.prepare(Image.open(p).convert("RGB"), "image") for p in paths]))
    keep = iconic.prune_references(embeddings)
    moving = load(out, iconic.CONFIG).to_pandas().set_index("qid").loc["Q5"]
    assert summary["pruned"] == int((~keep).sum()) == moving["images_pruned"]
    assert len(moving["images"]) == int(keep.sum())


def _token_classifier(folder: Path, label: str) -> Path:
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz:")
    (folder / "vocab.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab))
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    labels = ["O", "B-PER", "I-PER"]
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, id2label=dict(enumerate(labels)), label2id={x: i for i, x in enumerate(labels)})
    model = BertForTokenClassification(config)
    with torch.no_grad():  # a classifier that answers `label` for every token
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([10.0 if x == label else -10.0 for x in labels]))
    model.save_pretrained(folder)
    return folder


def test_ner_filter_removes_titles_with_entities(records, tmp_path):
    path, images = records
    nobody = _token_classifier(tmp_path / "ner-o", "O")
    summary = iconic.build(path, images, tmp_path / "a", ner_model=str(nobody))
    assert summary["kept"] == 5
    everyone = _token_classifier(tmp_path / "ner-per", "B-PER")
    with pytest.raises(iconic.RecordsError, match="no reference passes the filters"):
        iconic.build(path, images, tmp_path / "b", ner_model=str(everyone))


@pytest.mark.parametrize("line, message", [
    ({"qid": "X1", "title": "t", "modality": "film", "sitelinks": 30, "images": ["a.png"]}, "not a Wikidata id"),
    ({"qid": "Q9", "title": "t", "modality": "poem", "sitelinks": 30, "images": ["a.png"]}, "modality 'poem'"),
    ({"qid": "Q9", "title": "t", "modality": "film", "sitelinks": 30, "images": ["../../etc/passwd"]}, "outside"),
    ({"qid": "Q9", "title": "t", "modality": "film", "sitelinks": 30, "images": ["missing.png"]}, "does not exist"),
    ({"qid": "Q9", "title": "t", "modality": "film", "sitelinks": 30}, "missing 'images'"),
])
def test_bad_records_are_clear_errors_with_their_line(tmp_path, line, message):
    (tmp_path / "images").mkdir()
    (tmp_path / "r.jsonl").write_text("\n" + json.dumps(line) + "\n")
    with pytest.raises(iconic.RecordsError, match=f"line 2: .*{message}"):
        iconic.read_records(tmp_path / "r.jsonl", tmp_path / "images")


def test_sparql_results_become_records():
    binding = {"item": {"value": "http://www.wikidata.org/entity/Q45585"}, "itemLabel": {"value": "The Starry Night"},
               "modality": {"value": "artwork"}, "sitelinks": {"value": "120"},
               "image": {"value": "http://commons.wikimedia.org/wiki/Special:FilePath/Van%20Gogh%20-%20Starry%20Night.jpg"},
               "date": {"value": "1889-06-01T00:00:00Z"}, "countryLabel": {"value": "Netherlands"}}
    unlabelled = {**binding, "item": {"value": "http://www.wikidata.org/entity/Q7"}, "itemLabel": {"value": "Q7"}}
    (record,) = iconic.records_from_sparql([binding, binding, unlabelled])
    assert record["qid"] == "Q45585" and record["year"] == 1889 and record["sitelinks"] == 120
    assert record["image_sources"] == ["Van Gogh - Starry Night.jpg"] and record["images"][0].startswith("Q45585/")
    assert iconic.QUERY.read_text().count("wikibase:sitelinks") == 1


@pytest.mark.slow
def test_iconicity_through_the_harness_matches_an_independent_computation(built, tiny_clip, tiny_dino, tmp_path):
    root, out, _, clip = built
    dino = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    references = load(out, iconic.CONFIG)
    ids = references["prompt_id"]
    folder = make_submission(tmp_path / "sub", ids, seeds=(0, 1), dataset={"repo": iconic.HUB_REPO,
                                                                            "config": iconic.CONFIG, "split": "test"})
    for seed in (0, 1):  # ref-q1: both images are the reference itself (regurgitation)
        references[0]["images"][0].convert("RGB").save(folder / "images" / "ref-q1" / f"{seed}.png")

    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=root)

    report = stage(folder, tmp_path / "staging", loader)
    assert report.ok, report.errors
    staged = report.keep(tmp_path / "staged")
    scores = harness.score(staged, report.manifest, report.prompts, pq.read_table(staged / "images.parquet").to_pandas(),
                           iconicity.metrics(), {"clip-vit-b-32": clip, "dinov2-base": dino}, submission_id="t",
                           options=ScoringOptions(batch_size=4))
    rows = scores.per_image.set_index(["metric", "prompt_id"])
    assert rows.loc[("cra_reference", "ref-q1"), "value"] == 1.0 and rows.loc[("vr", "ref-q1"), "value"] == 1.0
    assert rows.loc[("crt", "ref-q1"), "value"] == 0.0  # recognised and fully reused: regurgitation

    # Independent: embed with the backbones directly and apply the pure functions.
    def embed(backbone, images, kind):
        return backbone.embed(torch.stack([backbone.prepare(i.convert("RGB"), kind) for i in images]))

    for record in references:
        prompt_id = record["prompt_id"]
        generated = [Image.open(folder / "images" / prompt_id / f"{s}.png") for s in (0, 1)]  # the upload's
        s, _ = iconicity.recognition_scores(embed(clip, generated, "image"), embed(clip, record["images"], "image"))
        hit = iconicity.recognised(s)
        assert rows.loc[("cra_reference", prompt_id), "value"] == float(hit.any())
        image_rows = scores.per_image[(scores.per_image.metric == "cra_image") & (scores.per_image.prompt_id == prompt_id)]
        assert image_rows["value"].tolist() == hit.astype(float).tolist()
        if hit.any():
            similarity, _ = iconicity.patch_similarity(embed(dino, generated, "grid")[hit],
                                                       embed(dino, record["images"], "grid"))
            vr = iconicity.visual_reuse(similarity)
            assert rows.loc[("vr", prompt_id), "value"] == pytest.approx(vr, abs=1e-6)
            assert rows.loc[("crt", prompt_id), "value"] == pytest.approx(iconicity.crt(hit.mean(), vr), abs=1e-6)
    crc = rows.loc[("crc", "ref-q5"), "value"]
    assert 0.0 <= crc <= 1.0 and ("crc", "ref-q1") not in rows.index  # coverage is for moving references
    detail = scores.per_image[(scores.per_image.metric == "vr_image") & (scores.per_image.prompt_id == "ref-q1")]
    assert json.loads(detail["detail"].iloc[0])["reused"] == list(range(16))
    derived = [r for r in scores.aggregates if r["metric"] == "crt_from_means" and r["slice"] == "overall"]
    cra = next(r for r in scores.aggregates if r["metric"] == "cra_reference" and r["slice"] == "overall")
    vr = next(r for r in scores.aggregates if r["metric"] == "vr" and r["slice"] == "overall")
    assert derived[0]["value"] == pytest.approx(cra["value"] * (1 - vr["value"]))
    assert {"still", "moving"} <= {r["slice_value"] for r in scores.aggregates if r["slice"] == "kind"}

    # The leaderboard's Compare view shows the references and draws each recognised image's reused patches.
    store = Store(tmp_path / "store")
    shutil.copytree(out, local_folder(store.datasets, iconic.HUB_REPO))
    shutil.copytree(staged, store.submissions / "t")
    store.write_results("t", scores)
    gallery, shown_references, table, reuse, note = CompareTab(Site(store, "me")).compare(["t"], "ref-q1")
    assert len(gallery) == 2 and len(shown_references) == len(references[0]["images"])
    assert [caption for _, caption in reuse] == [
        f"Tiny Test Model · seed {s}: VR 1.000, 16 reused patches outlined" for s in (0, 1)]
    assert reuse[0][0].width > reuse[0][0].height  # generated | reference, side by side


def test_iconicity_is_skipped_with_a_reason_on_a_dataset_without_references(tiny_upstream, tiny_clip, tiny_dino,
                                                                            tmp_path):
    from benchmark.datasets import cube_1k

    tiny_cube(tmp_path / "d", tiny_upstream)
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=tmp_path / "d").table.index)
    report = stage(make_submission(tmp_path / "s", ids), tmp_path / "staging",
                   lambda m: load_prompts(m.dataset.repo, m.dataset.config, local_root=tmp_path / "d"))
    staged = report.keep(tmp_path / "staged")
    backbones = {"clip-vit-b-32": load_backbone("c", {"c": tiny_clip}), "dinov2-base": load_backbone("d", {"d": tiny_dino})}
    scores = harness.score(staged, report.manifest, report.prompts, pq.read_table(staged / "images.parquet").to_pandas(),
                           iconicity.metrics(), backbones, submission_id="t")
    assert set(scores.run.skipped) == {"cra_image", "cra_reference", "vr", "vr_image", "crt", "crc"}
    assert "no reference images" in scores.run.skipped["crt"]


def test_pruning_drops_the_image_unlike_the_rest():
    base = np.array([1.0, 0.0, 0.0])
    similar = [base + [0, 0.1 * i, 0.05 * i] for i in range(5)]  # cosines to each other about .99
    images = np.array(similar + [[0.0, 0.0, 1.0]])
    # each similar image: mean to the rest about (4 x .99 + ~.1) / 5 > .7; the outlier: about .2 < .7
    assert iconic.prune_references(images).tolist() == [True] * 5 + [False]
    assert iconic.prune_references(images[4:]).tolist() == [True, True]  # too few to judge

"""A researcher calls ``datasets.load_dataset`` on what the project publishes, config by config, with no custom
code: every dataset, the suite repo, the knowledge base and the artifact index, the results repo and the requests
repo, each written by the project's own writers into local folders laid out as the Hub repos are (``suite push
--to-folder``, ``kb-index``, ``artifact-index``, ``hub export``: the mirror's files, with a release and the card
as ``hub snapshot`` publishes them). Every config a card declares
loads, with ``Image`` features where it holds images, and every card carries what the Hub's card checks ask for:
a licence (named and linked where it is ``other``), task and size categories, a language, and the BibTeX of the
source paper and of CultureLens. Row counts are those of the stand-in sources, known in advance."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from benchmark.datasets import culturalframes as cf
from benchmark.expectations.rated_images import export_submission
from benchmark.metrics.alignment import ClipCosine
from benchmark.encoders.spec import load_registry
from benchmark.scoring_options import ScoringOptions
from culturelens.testing.submissions import make_submission
from leaderboard.store import Store
from leaderboard.worker import Worker
from tests.helpers import culturelens_here, serving_tiny_cube
from tests.test_culturalframes import release_rows, write_release
from tests.test_relevance import ENTITIES, write_kb_inputs

BIBTEX_KEYS = {"cube": "kannen2024beyond", "crt": "derosapalmini2025persistence", "w1kp": "tang2024words",
               "caire": "yayavaram2025caire", "culturalframes": "nayak2025culturalframes"}
SIZES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M")


def card(folder: Path) -> tuple[dict, str]:
    """A folder's card: its metadata and its prose."""
    loaded = DatasetCard.load(folder / "README.md")
    return loaded.data.to_dict(), loaded.text


def configs(metadata: dict) -> dict[str, dict]:
    return {c["config_name"]: c for c in metadata.get("configs") or []}


def load(folder: Path, config: str | None, split: str, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split=split, cache_dir=str(cache))


def bibtex_keys(text: str) -> set[str]:
    """The keys of the BibTeX entries in the card's ```bibtex blocks."""
    blocks = re.findall(r"```bibtex\n(.*?)```", text, flags=re.S)
    return set(re.findall(r"^@\w+\{([^,\s]+),", "\n".join(blocks), flags=re.M))


def assert_complete(metadata: dict, text: str, *, licence: tuple, tasks: list[str], size: str, papers: set[str],
                    folder: Path):
    """The card's metadata as the Hub's card checks read it, against the values known for this repo."""
    found = (metadata.get("license"), metadata.get("license_name"), metadata.get("license_link"))
    assert found == licence, found
    if found[0] == "other":  # a link to the terms: a URL, or a file the repo holds
        assert found[2].startswith("https://") or (folder / found[2]).is_file(), found
    assert metadata["task_categories"] == tasks and metadata["size_categories"] == [size] and size in SIZES
    assert metadata["language"] == ["en"]
    assert bibtex_keys(text) == {BIBTEX_KEYS[p] for p in papers} | {"culturelens"}


def loaded_every_config(folder: Path, cache: Path) -> dict[str, datasets.Dataset]:
    """Every config the card declares, loaded by its one split."""
    loaded = {}
    for name, entry in configs(card(folder)[0]).items():
        (split,) = {files["split"] for files in entry["data_files"]}
        loaded[name] = load(folder, name, split, cache)
    return loaded


@pytest.fixture(scope="module")
def published(built_suite, tmp_path_factory) -> Path:
    """``culturelens suite push --to-folder``: the suite repo and each dataset's repo, as the Hub would hold them."""
    out, _, _ = built_suite
    hub = tmp_path_factory.mktemp("hub")
    result = culturelens_here("suite", "push", out, "--repo", "culturelens/suite", "--to-folder", hub)
    assert result.returncode == 0, result.stderr
    return hub


def test_load_dataset_on_every_dataset_config_with_image_features_and_complete_cards(published, tmp_path):
    """Each dataset repo `suite push` writes: every config loads, its rows those of the stand-in source (6 CUBE
    prompts, 6 CSpace artifacts, 15 diversity prompts, 3 CulturalFrames prompts with 8 rated images and 24 ratings,
    4 iconic references); images as ``Image`` features; CulturalFrames and the iconic references, whose licence is
    ``other``, name it and link to its terms."""
    expected = {
        "cube-1k": ({"cube_1k": 6, "cube_1k_all": 6, "cube_1k_demo": 6}, "test",
                    ("cc-by-nc-sa-4.0", None, None), ["text-to-image"], {"cube"}),
        "cube-cspace": ({"cspace": 6}, "test", ("cc-by-nc-sa-4.0", None, None),
                        ["zero-shot-image-classification"], {"cube"}),
        "cube-diversity": ({"diversity": 15}, "test", ("cc-by-4.0", None, None), ["text-to-image"], {"cube"}),
        "culturalframes": ({"prompts": 3, "images": 8, "ratings": 24}, "test",
                           ("other", "culturalframes-no-licence-declared",
                            "https://huggingface.co/datasets/mair-lab/CulturalFrames"), ["text-to-image"],
                           {"culturalframes"}),
        "iconic-references": ({"references": 4, "references_all": 4}, "test",
                              ("other", "per-image-licences", "https://commons.wikimedia.org/wiki/Commons:Licensing"),
                              ["text-to-image"], {"crt"}),
    }
    for name, (rows, split, licence, tasks, papers) in expected.items():
        folder = published / f"culturelens__{name}"
        metadata, text = card(folder)
        assert sorted(configs(metadata)) == sorted(rows), name
        loaded = loaded_every_config(folder, tmp_path / "cache")
        assert {c: len(d) for c, d in loaded.items()} == rows and all(d.split == split for d in loaded.values())
        assert_complete(metadata, text, licence=licence, tasks=tasks, size="n<1K", papers=papers, folder=folder)
    frames = loaded_every_config(published / "culturelens__culturalframes", tmp_path / "cache")
    assert isinstance(frames["images"].features["image"], datasets.Image)
    assert frames["images"][0]["image"].size[0] > 0  # decoded
    references = loaded_every_config(published / "culturelens__iconic-references", tmp_path / "cache")["references"]
    assert isinstance(references.features["images"].feature, datasets.Image)
    assert [len(r) for r in references["images"]] == [1, 1, 1, 3]  # the film has 3 depictions


def test_load_dataset_reads_image_shards_cut_at_the_shard_size(tmp_path):
    """A dataset of images is cut into Parquet shards of at most ``max_shard_bytes`` (500 MB by default, as the
    Hub's writer): at one byte, CulturalFrames' 8 rated images are 8 shards of one image; at the default they are
    one. ``load_dataset`` reads the 8 shards as one split, each image's bytes those of the release, and the
    builder's own readers (a model's images exported as a submission) read every shard."""
    rows, records = release_rows()
    source = write_release(tmp_path / "release", rows, records)
    cf.build(source, tmp_path / "one", revision=None)
    cf.build(source, tmp_path / "many", revision=None, max_shard_bytes=1)
    assert [p.name for p in sorted((tmp_path / "one" / "images").iterdir())] == ["test-00000-of-00001.parquet"]
    shards = sorted((tmp_path / "many" / "images").iterdir())
    assert [p.name for p in shards] == [f"test-{i:05d}-of-00008.parquet" for i in range(8)]
    assert [pq.read_metadata(p).num_rows for p in shards] == [1] * 8
    images = load(tmp_path / "many", "images", "test", tmp_path / "cache").cast_column(
        "image", datasets.Image(decode=False))
    release = sorted(hashlib.sha256(row["image"]["bytes"]).hexdigest() for row in rows)
    assert sorted(hashlib.sha256(i["bytes"]).hexdigest() for i in images["image"]) == release
    assert len(load(tmp_path / "many", "ratings", "test", tmp_path / "cache")) == 24
    exported = export_submission(tmp_path / "many", "imagegen3", tmp_path / "imagen3")
    assert len(list((exported / "images").rglob("*.png"))) == 2  # 3 prompts, one refused


def test_load_dataset_on_the_suite_repo_reads_its_assets_tables(published, tmp_path):
    """The suite repo (`suite push`): its card declares the assets' tables as named configs (the artifact index's
    6 artifacts, the knowledge base's 3 entities and 4 distinct images), none the default (load_dataset asks for
    one, naming them); its licence, ``other``, is named and linked to the LICENSE.md it holds; BibTeX of the five
    papers and CultureLens."""
    folder = published / "culturelens__suite"
    metadata, text = card(folder)
    loaded = loaded_every_config(folder, tmp_path / "cache")
    assert {name: len(d) for name, d in loaded.items()} == {
        "artifact_index_artifacts": 6, "relevance_kb_entities": 3, "relevance_kb_images": 4}
    assert sorted(loaded["relevance_kb_entities"]["name"]) == sorted(e["name"] for e in ENTITIES)
    with pytest.raises(ValueError, match="artifact_index_artifacts"):
        datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    assert_complete(metadata, text, licence=("other", "culturelens-suite-sources", "LICENSE.md"),
                    tasks=["text-to-image"], size="n<1K", papers=set(BIBTEX_KEYS), folder=folder)
    assert "| `w1kp-calibration` |" in (folder / "LICENSE.md").read_text() and not (folder / "datasets").exists()


def test_load_dataset_on_the_knowledge_base_kb_index_writes(tiny_clip, tmp_path):
    """`culturelens kb-index` writes a folder that is a Hub dataset as it is: configs ``entities`` (the default:
    the 3 records' entities in order) and ``images`` (4 distinct images; the one two entities share lists both),
    the licence given on the command line, CAIRE's BibTeX and CultureLens's. A licence ``other`` without its name
    and link is refused before any work."""
    records, images = write_kb_inputs(tmp_path)
    backbones = tmp_path / "backbones.json"
    backbones.write_text(json.dumps({"msiglip-so400m": tiny_clip.to_dict()}))
    command = ["kb-index", "--records", records, "--images", images, "--backbones", backbones, "--device", "cpu"]
    refused = culturelens_here(*command, "--out", tmp_path / "none", "--license", "other")
    assert refused.returncode == 2 and "--license-name and --license-link" in refused.stderr
    assert not (tmp_path / "none").exists()
    built = culturelens_here(*command, "--out", tmp_path / "kb", "--license", "cc-by-sa-4.0")
    assert built.returncode == 0, built.stderr
    folder = tmp_path / "kb"
    entities = load(folder, None, "train", tmp_path / "cache")  # the default config
    assert entities["entity_id"] == ["bn:1", "bn:2", "bn:3"] and entities["name"] == ["Pysanka", "Easter egg", "Djembe"]
    shared = load(folder, "images", "train", tmp_path / "cache").to_pandas().set_index("path")
    assert len(shared) == 4 and list(shared.loc["pysanka/1.png", "entity_ids"]) == ["bn:1", "bn:2"]
    metadata, text = card(folder)
    assert sorted(configs(metadata)) == ["entities", "images"] and configs(metadata)["entities"]["default"]
    assert_complete(metadata, text, licence=("cc-by-sa-4.0", None, None), tasks=["zero-shot-image-classification"],
                    size="n<1K", papers={"caire"}, folder=folder)
    assert json.loads((folder / "kb.json").read_text())["licence"] == {"license": "cc-by-sa-4.0"}


def test_load_dataset_on_the_artifact_index_artifact_index_writes(built_suite, tiny_clip, tmp_path):
    """`culturelens artifact-index` on a built CSpace: config ``artifacts`` holds the CSpace rows the index embeds
    (6), grouped by concept as the indices are; the licence is the CSpace card's (CC BY-NC-SA 4.0, the authors')."""
    out, _, backbones = built_suite
    cspace = out / "datasets" / "culturelens__cube-cspace"
    result = culturelens_here("artifact-index", "--cspace", cspace, "--backbone", "clip-vit-b-32", "--backbones",
                              backbones, "--device", "cpu", "--out", tmp_path / "index")
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "index"
    artifacts = load(folder, "artifacts", "train", tmp_path / "cache")
    source = load(cspace, "cspace", "test", tmp_path / "cache")
    assert sorted(artifacts["artifact"]) == sorted(source["artifact"]) and len(artifacts) == 6
    assert artifacts["concept"] == sorted(artifacts["concept"])
    metadata, text = card(folder)
    assert_complete(metadata, text, licence=("cc-by-nc-sa-4.0", None, None),
                    tasks=["zero-shot-image-classification"], size="n<1K", papers={"cube"}, folder=folder)


@pytest.fixture(scope="module")
def leaderboard_store(tmp_path_factory, tiny_upstream, backbones_file) -> tuple[Store, str, str]:
    """A store with one submission scored by a real worker (awareness, tiny CLIP: no curves) and one PENDING."""
    root = tmp_path_factory.mktemp("leaderboard")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    prompt_ids = list(store.prompts("culturelens/cube-1k", "cube_1k").table.index)
    done = store.submit(make_submission(root / "a", prompt_ids, model_name="Model A"), "ada").job
    worker = Worker(store, ScoringOptions(registry=load_registry(str(backbones_file))), [ClipCosine()],
                    lease_seconds=60)
    assert worker.load() and worker.run(once=True) == 1
    waiting = store.submit(make_submission(root / "b", prompt_ids, model_name="Model B"), "bo").job
    return store, done.id, waiting.id


def test_load_dataset_on_the_results_repo_reads_the_leaderboard_first_and_no_empty_file(leaderboard_store,
                                                                                        tmp_path):
    """The results repo as the app publishes it (`hub export`: the mirror's files, a release and the card): no
    Parquet file of no rows (the awareness submission has no curves, so no curves.parquet and no ``curves``
    config), ``leaderboard`` the default config (the newest release, every row of it), ``aggregates`` and
    ``per_image`` the scored folder's rows; CC BY-NC-SA 4.0 as CUBE-1K's."""
    store, done, _ = leaderboard_store
    folder = tmp_path / "results"
    result = culturelens_here("hub", "export", "--results", folder, "--store", store.root)  # files, release, card
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (folder / "results" / done).iterdir()) == [
        "aggregates.parquet", "per_image.parquet", "run.json", "seal.json"]
    assert all(pq.read_metadata(p).num_rows > 0 for p in folder.rglob("*.parquet"))
    metadata, text = card(folder)
    assert sorted(configs(metadata)) == ["aggregates", "leaderboard", "per_image"]
    assert configs(metadata)["leaderboard"]["default"]
    newest = load(folder, None, "train", tmp_path / "cache")
    release = json.loads((folder / "leaderboard" / "latest.json").read_text())["file"]
    assert len(newest) == pq.read_metadata(folder / release).num_rows and set(newest["submission_id"]) == {done}
    for name in ("aggregates", "per_image"):
        rows = load(folder, name, "train", tmp_path / "cache")
        assert len(rows) == pq.read_metadata(store.results / done / f"{name}.parquet").num_rows > 0
    assert_complete(metadata, text, licence=("cc-by-nc-sa-4.0", None, None), tasks=["text-to-image"],
                    size="n<1K", papers=set(BIBTEX_KEYS), folder=folder)


def test_load_dataset_on_the_requests_repo_reads_its_records_and_images(leaderboard_store, tmp_path):
    """The requests repo as the app mirrors it (`hub export --requests`): a card whose ``requests`` config reads
    the two queue records (typed, the PENDING one's nulls included) and ``images`` the 24 images of the two kept
    submissions (6 prompts x seeds 0 and 1 each), as ``Image`` features whose bytes have their row's sha256; no
    lease token."""
    store, done, waiting = leaderboard_store
    folder = tmp_path / "requests"
    result = culturelens_here("hub", "export", "--requests", folder, "--store", store.root)
    assert result.returncode == 0, result.stderr
    loaded = load(folder, "requests", "train", tmp_path / "cache")
    records = {row["id"]: row for row in loaded}
    assert (records[done]["state"], records[waiting]["state"]) == ("FINISHED", "PENDING")
    assert records[waiting]["started_at"] is None and records[done]["attempts"] == 1
    assert loaded.features["attempts"] == datasets.Value("int64") and loaded.features["progress"].dtype == "float64"
    assert not {"lease_owner", "lease_expires", "lease_tokens"} & set(loaded.column_names)
    images = load(folder, "images", "train", tmp_path / "cache")
    assert isinstance(images.features["image"], datasets.Image) and len(images) == 24
    raw = images.cast_column("image", datasets.Image(decode=False))
    assert all(hashlib.sha256(r["image"]["bytes"]).hexdigest() == r["sha256"] for r in raw)
    metadata, text = card(folder)
    assert configs(metadata)["requests"]["default"]
    assert_complete(metadata, text, licence=("unknown", None, None), tasks=["text-to-image"], size="n<1K",
                    papers=set(), folder=folder)

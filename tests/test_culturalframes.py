"""CulturalFrames builder (on a small copy laid out like the authors' Hub release) and the human aggregates."""

from __future__ import annotations

import copy
import hashlib
import io
import json

import datasets
import krippendorff
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image
from scipy import stats

from benchmark import harness, results
from benchmark.run_record import RunRecord
from benchmark.datasets import culturalframes as cf
from benchmark.datasets.prompts import load_prompts
from benchmark.encoders import load_backbone
from benchmark.scoring_options import ScoringOptions
from benchmark.expectations import human, meta_eval
from benchmark.expectations.rated_images import export_submission
from benchmark.metrics.alignment import ClipCosine
from benchmark.stats import mean_ci
from benchmark.submission.validate import stage

# The release's image files: id, prompt, image, country, model (Hub card of mair-lab/CulturalFrames).
RELEASE_FEATURES = datasets.Features({
    "id": datasets.Value("string"), "prompt": datasets.Value("string"), "image": datasets.Image(),
    "country": datasets.Value("string"), "model": datasets.Value("string")})
PROMPTS = [  # (upstream prompt key, country, category, prompt)
    ("3f1a_India_0", "India", "family", "Grandchildren touching grandfather's feet at an Indian temple"),
    ("9c2b_Iran_1", "Iran", "religion", "Elderly  Iranian man praying in a quiet mosque"),
    ("77de_Japan_0", "Japan", "dates-of-significance", "Traditional Japanese tea ceremony in autumn garden"),
]
# model_name in the annotations -> model in the image files
MODELS = {"flux": "Flux.1-Dev", "SD35": "SD-3.5-Large", "imagegen3": "Imagen3"}
REFUSED = {("9c2b_Iran_1", "imagegen3")}  # the safety filter's refusal: no image, no record


def rating(score, explicit=None, implicit=None, quality=1, overall=4, stereotype=False, words=None):
    return {"prompt_alignment": {"score": score, "missing_explicit": explicit, "missing_implicit": implicit,
                                 "incorrect_words": words or [],
                                 "feedback": "looks fine" if score == 1 else "wrong attire"},
            "stereotype": {"is_stereotypical": stereotype, "comment": "turbans everywhere" if stereotype else ""},
            "image_quality": {"score": quality, "issues": {"artifacts": quality < 1, "unnatural_impression": False}},
            "overall_score": overall}


def release_rows(seed: int = 0):
    """Image rows and annotation records of a small release (3 prompts x 3 models, one refusal)."""
    rng = np.random.default_rng(seed)
    rows, records = [], []
    for p, (key, country, category, prompt) in enumerate(PROMPTS):
        for m, (model_name, model) in enumerate(MODELS.items()):
            if (key, model_name) in REFUSED:
                continue
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buffer, format="PNG")
            image_id = f"{key}_{model_name}"
            rows.append({"id": image_id, "prompt": prompt, "image": {"bytes": buffer.getvalue(), "path": None},
                         "country": country, "model": model})
            records.append({"id": image_id, "prompt": prompt, "country": country, "model_name": model_name,
                            "category": category, "human_annotations": [
                                rating(1), rating(0.5, explicit=True, implicit=False, quality=0.5, overall=3,
                                                  words=["feet"]),
                                rating((p + m) % 2 * 0.5, explicit=False, implicit=True, overall=1 + p + m,
                                       stereotype=p == 1)]})
    return rows, records


def write_release(folder, rows, records):
    """The release's layout: README.md, data/train-*.parquet, culturalframes_human_annotations.json."""
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                      "    path: data/train-*\n---\n# CulturalFrames\n", encoding="utf-8")
    datasets.Dataset.from_list(rows, features=RELEASE_FEATURES).to_parquet(
        str(folder / "data" / "train-00000-of-00001.parquet"))
    (folder / cf.ANNOTATIONS_FILE).write_text(json.dumps(records), encoding="utf-8")
    return folder


def load(folder, config):
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(folder) + ".cache")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    rows, records = release_rows()
    return write_release(tmp_path_factory.mktemp("release") / "CulturalFrames", rows, records), rows, records


@pytest.fixture(scope="module")
def built(release, tmp_path_factory):
    folder, _, _ = release
    out = tmp_path_factory.mktemp("built") / "culturalframes"
    return out, cf.build(folder, out)


def build_broken(tmp_path, change):
    rows, records = release_rows()
    change(records)
    return cf.build(write_release(tmp_path / "release", rows, records), tmp_path / "out")


# --- builder ------------------------------------------------------------------------------------
def test_build_round_trip_through_load_dataset(built, release):
    out, summary = built
    _, rows, records = release
    assert summary["prompts"] == 3 and summary["images"] == 8 and summary["ratings"] == 24
    prompts, images, ratings = load(out, "prompts"), load(out, "images"), load(out, "ratings")
    assert (len(prompts), len(images), len(ratings)) == (3, 8, 24)

    key = {p["source_prompt_key"]: p for p in prompts}
    iran = key["9c2b_Iran_1"]
    assert iran["prompt"] == "Elderly Iranian man praying in a quiet mosque"  # whitespace cleaned
    assert iran["prompt_id"] == "cf-" + hashlib.sha256(b"9c2b_Iran_1").hexdigest()[:12]
    assert (iran["country_code"], iran["continent"], iran["domain"]) == ("IR", "Asia", "religion")
    assert iran["models"] == ["FLUX.1-dev", "SD-3.5-Large"] and iran["n_images"] == 2
    assert key["77de_Japan_0"]["domain"] == "dates-of-significance"

    by_id = {r["id"]: r for r in rows}
    for image in images:
        raw = by_id[image["image_id"]]
        assert image["model"] == cf.canonical_model(raw["model"]) and image["model_source"] == raw["model"]
        assert image["image_sha256"] == hashlib.sha256(raw["image"]["bytes"]).hexdigest()
        assert image["image"].size == (64, 64) and image["n_ratings"] == 3
    assert sorted(set(images["model"])) == ["FLUX.1-dev", "Imagen 3", "SD-3.5-Large"]

    first = records[0]
    rows_of_first = [r for r in ratings if r["image_id"] == first["id"]]
    assert [r["rater_slot"] for r in rows_of_first] == [0, 1, 2]
    second = rows_of_first[1]
    assert (second["alignment"], second["explicit_error"], second["implicit_error"]) == (0.5, True, False)
    assert (second["quality"], second["quality_artifacts"], second["overall"]) == (0.5, True, 3.0)
    assert second["flagged_words"] == ["feet"] and second["justification"] == "wrong attire"
    assert second["rater_id"] == f"{first['id']}#1"  # the release has no rater id: the slot stands in
    assert sum(r["stereotype"] for r in ratings) == 2 and ratings["stereotype_comment"].count("turbans everywhere") == 2


def test_prompts_config_is_a_prompt_set_the_harness_can_score(built):
    out, _ = built
    prompts = load_prompts(cf.HUB_REPO, "prompts", folder=out)
    assert len(prompts) == 3 and {"country", "country_code", "continent", "domain"} <= set(prompts.table.columns)
    assert set(prompts.table["country"]) == {"India", "Iran", "Japan"}


def test_card_states_counts_licence_layout_and_what_is_missing(built):
    out, summary = built
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "license: other" in card and "declares no licence" in card
    assert "| `ratings` | 24 |" in card and "| `images` | 8 |" in card
    assert "| `alignment` | `prompt_alignment.score` or `image_prompt_alignment.score` | confirmed |" in card
    assert "| `stereotype` | `stereotype.is_stereotypical` or `stereotypes.present` | confirmed |" in card
    assert "| `rater_id` | `annotator_id` | unverified |" in card
    assert summary["fields_never_found"] == ["rater_id", "source_excerpt"]
    assert "Never found in this build (null in every row): `rater_id`, `source_excerpt`" in card
    assert "`rater_id` missing in 24 of 24 ratings" in card and "`source_excerpt` missing in 8 of 8 records" in card
    assert "`flagged_words` missing in 0 of 24 ratings" in card
    assert "arXiv:2506.08835" in card


@pytest.mark.parametrize("change, message", [
    (lambda r: r[4]["human_annotations"][2]["prompt_alignment"].update(score=0.7),
     "record 4 (id '9c2b_Iran_1_SD35'), rating 2: column 'alignment' = 0.7 is not one of 0, 0.5, 1"),
    (lambda r: r[0]["human_annotations"][0].update(overall_score=0.5),
     "rating 0: column 'overall' = 0.5 is outside [1, 5]"),
    (lambda r: r[0]["human_annotations"][2].update(overall_score=6), "rating 2: column 'overall' = 6 is outside [1, 5]"),
    (lambda r: r[0]["human_annotations"][0].update(overall_score="4"), "column 'overall' = '4' is outside [1, 5]"),
    (lambda r: r[0]["human_annotations"][0].update(stereotypes={"present": True}),
     "column 'stereotype' is given twice with different values (stereotype.is_stereotypical = False, "
     "stereotypes.present = True)"),
    (lambda r: r[1]["human_annotations"][1]["image_quality"].update(score=True), "column 'quality' = True"),
    (lambda r: r[0]["human_annotations"][1]["prompt_alignment"].update(missing_explicit="yes"),
     "column 'explicit_error' = 'yes' is not true/false"),
    (lambda r: r[0]["human_annotations"][1]["prompt_alignment"].update(incorrect_words="feet"),
     "column 'flagged_words' = 'feet' is not a list of words"),
    (lambda r: r[2].update(category="food"), "record 2 (id '3f1a_India_0_imagegen3'): domain 'food' is not one of"),
    (lambda r: r[3].update(country="Atlantis"), "country 'Atlantis' matches no ISO 3166-1 country"),
    (lambda r: r[0].update(prompt="Something else"), "prompt or country differs from the image file's row"),
    (lambda r: r[0].update(annotations=r[0].pop("human_annotations")), "no 'human_annotations'; the release layout "
     "changed: edit RECORD_FIELDS"),
    (lambda r: [a["image_quality"].pop("score") for x in r for a in x["human_annotations"]],
     "no rating has image_quality.score; the release layout changed: edit RATING_FIELDS"),
    (lambda r: r.append(copy.deepcopy(r[0])), "the image id appears twice"),
])
def test_invalid_release_values_are_rejected_naming_record_and_column(tmp_path, change, message):
    with pytest.raises(cf.CulturalFramesSourceError) as error:
        build_broken(tmp_path, change)
    assert message in str(error.value)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_record_without_its_image_keeps_its_ratings_and_is_counted(tmp_path):
    rows, records = release_rows()
    summary = cf.build(write_release(tmp_path / "release", rows[1:], records), tmp_path / "out")
    assert summary["notes"]["records_without_image"] == 1
    assert (summary["images"], summary["ratings"]) == (7, 24)
    assert "1 annotation record(s) name an image id that is not in the image files" in (
        tmp_path / "out" / "README.md").read_text(encoding="utf-8")


def site_rating(score, explicit, implicit, overall, stereotype=False):
    """A rating spelled as the authors' project page spells its example annotations."""
    return {"image_prompt_alignment": {"score": score, "missing_elements": {"explicit": explicit, "implicit": implicit},
                                       "incorrect_words": ["temple"], "feedback": "no temple"},
            "image_quality": {"score": 1, "issues": {"artifacts": False, "unnatural_impression": True}},
            "stereotypes": {"present": stereotype, "comment": "only saris"}, "overall_score": overall}


def test_fractional_overall_both_spellings_extra_and_missing_optional_fields_load(tmp_path):
    rows, records = release_rows()
    first = records[0]["human_annotations"]
    first[0]["overall_score"] = 3.5  # any value in [1, 5] is kept as it is
    first[1] = site_rating(0.5, explicit=True, implicit=False, overall=2.25, stereotype=True)
    first[2]["rater_age"] = 31  # keys the mapping table does not name are ignored
    records[0]["annotation_round"] = 2
    for annotation in records[1]["human_annotations"]:  # no unverified field at all
        del annotation["prompt_alignment"]["incorrect_words"], annotation["prompt_alignment"]["feedback"]
        del annotation["stereotype"]["comment"], annotation["image_quality"]["issues"]
    summary = cf.build(write_release(tmp_path / "release", rows, records), tmp_path / "out")
    assert (summary["images"], summary["ratings"]) == (8, 24)
    ratings = load(tmp_path / "out", "ratings").to_pandas().set_index("rating_id")
    one = records[0]["id"]
    assert ratings.loc[f"{one}#0", "overall"] == 3.5 and ratings.loc[f"{one}#1", "overall"] == 2.25
    site = ratings.loc[f"{one}#1"]
    assert (site["alignment"], site["explicit_error"], site["implicit_error"], site["stereotype"]) == (
        0.5, True, False, True)
    assert (list(site["flagged_words"]), site["justification"], site["stereotype_comment"]) == (
        ["temple"], "no temple", "only saris")
    assert (site["quality"], site["quality_artifacts"], site["quality_unnatural"]) == (1.0, False, True)
    bare = ratings.loc[f"{records[1]['id']}#0"]
    assert bare["flagged_words"] is None and pd.isna(bare["justification"]) and pd.isna(bare["quality_artifacts"])
    # 3 ratings lack each of these; the stereotype comment is also empty (so null) in every non-stereotype rating,
    # but only a missing key counts as missing
    assert summary["optional_missing"] == {
        "rater_id": 24, "flagged_words": 3, "justification": 3, "stereotype_comment": 3, "quality_artifacts": 3,
        "quality_unnatural": 3, "source_excerpt": 8}
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert ("`flagged_words` missing in 3 of 24 ratings, `justification` missing in 3 of 24 ratings, "
            "`stereotype_comment` missing in 3 of 24 ratings, `quality_artifacts` missing in 3 of 24 ratings, "
            "`quality_unnatural` missing in 3 of 24 ratings, `source_excerpt` missing in 8 of 8 records") in card


def test_hub_source_offline_is_a_clear_error():
    with pytest.raises(cf.CulturalFramesSourceError, match=r"cannot download the Hub dataset mair-lab/CulturalFrames .*--source DIR"):
        cf.resolve_source(cf.SOURCE_REPO)


def test_model_names_map_to_the_leaderboard_names():
    assert [cf.canonical_model(m) for m in ("flux", "Flux.1-Dev", "SD35", "imagegen3", "gpt-image", "Other")] == [
        "FLUX.1-dev", "FLUX.1-dev", "SD-3.5-Large", "Imagen 3", "GPT-Image", "Other"]


def score_export(out, model, tiny_clip, tmp_path):
    """Export one model's images as a submission, validate and score it with the harness (CLIP cosine, tiny CLIP)."""
    folder = export_submission(out, model, tmp_path / f"export-{model}")
    report = stage(folder, tmp_path / f"staging-{model}",
                   lambda m: load_prompts(m.dataset.repo, m.dataset.config, folder=out))
    assert report.ok, report.errors
    staged = report.keep(tmp_path / f"staged-{model}")
    clip = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    submitted = pq.read_table(staged / "images.parquet").to_pandas()
    scores = harness.score(staged, report.manifest, report.prompts, submitted, [ClipCosine()], {"clip-vit-b-32": clip},
                           submission_id=model, options=ScoringOptions(batch_size=4))
    return folder, scores


def test_exported_images_are_scored_by_the_harness_and_map_back_to_image_ids(built, tiny_clip, tmp_path):
    out, _ = built
    folder, scores = score_export(out, "imagegen3", tiny_clip, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    iran = "cf-" + hashlib.sha256(b"9c2b_Iran_1").hexdigest()[:12]
    assert manifest["model"]["name"] == "Imagen 3" and [m["prompt_id"] for m in manifest["missing"]] == [iran]
    images = load(out, "images").remove_columns("image").to_pandas()
    mapped = meta_eval.scores_from_results(scores.per_image, images, "clip_cosine")
    rated = images[images["model"] == "Imagen 3"]
    assert sorted(mapped["image_id"]) == sorted(rated["image_id"])
    by_prompt = scores.per_image[scores.per_image.metric == "clip_cosine"].set_index("prompt_id")["value"]
    expected = rated.set_index("image_id")["prompt_id"].map(by_prompt)
    assert mapped.set_index("image_id")["score"].to_dict() == expected.to_dict()
    with pytest.raises(cf.CulturalFramesSourceError, match="no CulturalFrames image is from 'GPT-Image'; models: FLUX.1-dev, "):
        export_submission(out, "gpt-image", tmp_path / "gpt")
    assert not (tmp_path / "gpt").exists()


def test_meta_evaluation_of_a_harness_metric_over_every_model(built, tiny_clip, tmp_path):
    out, _ = built
    folders = []
    for model in ("flux", "SD35", "imagegen3"):
        _, scores = score_export(out, model, tiny_clip, tmp_path)
        folders.append(results.write_folder(tmp_path / f"results-{model}", results.records(scores.per_image), [], [],
                                            RunRecord()))
    collected = meta_eval.collect_scores(out, results=folders, metrics=["clip_cosine"])
    assert len(collected["clip_cosine"]) == 8
    ratings = cf.load_config(out, "ratings")
    table = meta_eval.meta_evaluate(collected, ratings, min_images=5, by_country=False, n_resamples=200)
    row = table[table.criterion == "overall"].iloc[0]
    means = ratings.groupby("image_id")["overall"].mean()
    joined = collected["clip_cosine"].set_index("image_id")["score"]
    assert row.n == 8 and row.spearman == pytest.approx(stats.spearmanr(joined, means[joined.index]).statistic)


# --- human aggregates on a hand-made table -------------------------------------------------------
# 4 images x 3 raters. Flags: E = explicit error, I = implicit error.
#   img1  A  India family    alignment 1, .5(E), 0(E+I)   quality 1, 1, .5     overall 5, 3, 1   stereotype F, T, F
#   img2  A  Japan religion  alignment .5(I), .5(E), 1    quality .5, .5, .5   overall 3, 3, 4   stereotype F, F, F
#   img3  B  India family    alignment 0(E), 0(I), .5()   quality 0, .5, 0     overall 1, 2, 2   stereotype T, T, F
#   img4  B  Japan religion  alignment 1, 1, .5(I)        quality 1, 1, 1      overall 5, 4, 5   stereotype F, F, F
HAND = [  # image, model, country, domain, alignment, explicit, implicit, quality, overall, stereotype
    ("img1", "A", "India", "family", 1.0, False, False, 1.0, 5, False),
    ("img1", "A", "India", "family", 0.5, True, False, 1.0, 3, True),
    ("img1", "A", "India", "family", 0.0, True, True, 0.5, 1, False),
    ("img2", "A", "Japan", "religion", 0.5, False, True, 0.5, 3, False),
    ("img2", "A", "Japan", "religion", 0.5, True, False, 0.5, 3, False),
    ("img2", "A", "Japan", "religion", 1.0, None, None, 0.5, 4, False),
    ("img3", "B", "India", "family", 0.0, True, False, 0.0, 1, True),
    ("img3", "B", "India", "family", 0.0, False, True, 0.5, 2, True),
    ("img3", "B", "India", "family", 0.5, False, False, 0.0, 2, False),
    ("img4", "B", "Japan", "religion", 1.0, False, False, 1.0, 5, False),
    ("img4", "B", "Japan", "religion", 1.0, False, False, 1.0, 4, False),
    ("img4", "B", "Japan", "religion", 0.5, False, True, 1.0, 5, False),
]


@pytest.fixture
def hand():
    columns = ["image_id", "model", "country", "domain", "alignment", "explicit_error", "implicit_error", "quality",
               "overall", "stereotype"]
    table = pd.DataFrame(HAND, columns=columns)
    return table.assign(rater_id=[f"r{i}" for i in range(len(table))])


def value(table, statistic, model="all", country="all", domain="all"):
    row = table[(table.statistic == statistic) & (table.model == model) & (table.country == country)
                & (table.domain == domain)]
    assert len(row) == 1
    return row.iloc[0]


def test_aggregates_match_the_hand_computation(hand):
    table = human.human_aggregates(hand, n_resamples=500)
    # Per-image mean alignment: img1 (1+.5+0)/3 = 1/2, img2 (.5+.5+1)/3 = 2/3, img3 (0+0+.5)/3 = 1/6,
    # img4 (1+1+.5)/3 = 5/6; all images: (1/2 + 2/3 + 1/6 + 5/6) / 4 = (13/6) / 4 = 13/24.
    assert value(table, "mean_alignment").value == pytest.approx(13 / 24)
    # Failures (< 1): img1 2 of 3, img2 2/3, img3 3/3, img4 1/3 -> (2/3 + 2/3 + 1 + 1/3) / 4 = 2/3; 8 failures.
    failure = value(table, "failure_rate")
    assert failure.value == pytest.approx(2 / 3) and (failure.n_images, failure.n_ratings) == (4, 12)
    # Of the 8 failures: explicit only 3 (img1 r2, img2 r2, img3 r1), implicit only 3 (img2 r1, img3 r2,
    # img4 r3), both 1 (img1 r3), no flag 1 (img3 r3).
    assert value(table, "explicit_only_share").value == pytest.approx(3 / 8)
    assert value(table, "implicit_only_share").value == pytest.approx(3 / 8)
    assert value(table, "both_share").value == pytest.approx(1 / 8)
    assert value(table, "unflagged_share").value == pytest.approx(1 / 8)
    assert value(table, "explicit_share").value == pytest.approx(4 / 8)  # explicit only + both
    assert value(table, "implicit_share").value == pytest.approx(4 / 8)
    assert value(table, "explicit_share").n_ratings == 8
    # Stereotype: img1 1/3, img2 0, img3 2/3, img4 0 -> 1/4.
    assert value(table, "stereotype_rate").value == pytest.approx(1 / 4)
    # Quality: img1 2.5/3 = 5/6, img2 1/2, img3 .5/3 = 1/6, img4 1 -> (5/6 + 3/6 + 1/6 + 6/6) / 4 = 5/8.
    assert value(table, "mean_quality").value == pytest.approx(5 / 8)
    # Overall: img1 9/3 = 3, img2 10/3, img3 5/3, img4 14/3 -> (9/3 + 10/3 + 5/3 + 14/3) / 4 = 38/12 = 19/6.
    assert value(table, "mean_overall").value == pytest.approx(19 / 6)


def test_aggregates_per_model_and_per_cell(hand):
    table = human.human_aggregates(hand, n_resamples=500)
    # Model A: img1 1/2, img2 2/3 -> 7/12; failures 4: explicit only 2, implicit only 1, both 1.
    assert value(table, "mean_alignment", model="A").value == pytest.approx(7 / 12)
    assert value(table, "failure_rate", model="A").value == pytest.approx(2 / 3)
    assert value(table, "explicit_share", model="A").value == pytest.approx(3 / 4)
    assert value(table, "both_share", model="A").value == pytest.approx(1 / 4)
    # Model B: img3 1/6, img4 5/6 -> 1/2; failures 4: explicit only 1, implicit only 2, none 1.
    assert value(table, "mean_alignment", model="B").value == pytest.approx(1 / 2)
    assert value(table, "implicit_only_share", model="B").value == pytest.approx(2 / 4)
    assert value(table, "unflagged_share", model="B").value == pytest.approx(1 / 4)
    # Model B x Japan x religion is img4 alone: 5/6, and one image has no interval.
    cell = value(table, "mean_alignment", model="B", country="Japan", domain="religion")
    assert cell.value == pytest.approx(5 / 6) and cell.n_images == 1 and np.isnan(cell.ci_low)
    assert set(table.columns) == {"model", "country", "domain", "statistic", "value", "ci_low", "ci_high",
                                  "n_images", "n_ratings"}


def test_intervals_resample_images_not_ratings(hand):
    table = human.human_aggregates(hand, n_resamples=700, seed=3)
    row = value(table, "mean_alignment")
    assert row.value == pytest.approx(np.mean([1 / 2, 2 / 3, 1 / 6, 5 / 6]))  # the mean of the 4 images' means
    # 4 images are too few for an interval (benchmark.stats.MIN_CI_N); 12 ratings would not be
    assert np.isnan(row.ci_low) and np.isnan(row.ci_high)
    assert not np.isnan(mean_ci(hand["alignment"].to_numpy())[0])


def test_the_all_models_interval_resamples_prompts_not_their_images():
    """8 prompts, each drawn by 4 models whose images got the same ratings: 32 images but 8 independent values.
    Pooling every model, the interval is the cluster bootstrap over prompts (``ratio_ci`` of the per-prompt sums
    and counts), about twice as wide as one that takes the 32 images as independent; per model (one image per
    prompt) it stays ``mean_ci`` over images."""
    overall = [1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0, 5.0]
    rows = [{"image_id": f"{p}-{m}-{i}", "prompt_id": f"p{p}", "model": m, "country": "X", "domain": "Y",
             "alignment": 1.0, "explicit_error": False, "implicit_error": False, "quality": 1.0,
             "overall": score, "stereotype": False}
            for p, score in enumerate(overall) for m in "ABCD" for i in range(3)]
    ratings = pd.DataFrame(rows).assign(image_id=lambda t: t["image_id"].str.rsplit("-", n=1).str[0])
    table = human.human_aggregates(ratings, n_resamples=1000, seed=5)
    pooled = value(table, "mean_overall")
    images = np.repeat(overall, 4)
    assert pooled.value == pytest.approx(images.mean()) and pooled.n_images == 32
    clustered = human.ratio_ci(np.array(overall) * 4, np.full(8, 4.0), n_resamples=1000, seed=5)
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(clustered[1:])
    naive_low, naive_high = stats.t.interval(0.95, len(images) - 1, loc=images.mean(), scale=stats.sem(images))
    assert pooled.ci_high - pooled.ci_low > 1.6 * (naive_high - naive_low)  # images taken as independent
    one_model = value(table, "mean_overall", model="A")
    assert (one_model.ci_low, one_model.ci_high) == pytest.approx(mean_ci(np.array(overall)))


def test_ratio_interval_is_degenerate_when_every_image_has_the_same_share():
    assert human.ratio_ci(np.array([1, 2, 0]), np.array([2, 4, 0])) == (0.5, 0.5, 0.5)
    value_, low, high = human.ratio_ci(np.array([1, 0, 2, 3]), np.array([2, 1, 2, 3]), n_resamples=500)
    assert value_ == pytest.approx(6 / 8) and low < value_ < high


def test_krippendorff_alpha_matches_the_package_on_a_raters_by_images_matrix(hand):
    for criterion, (level, scale) in human.CRITERIA.items():
        slots = hand[criterion].to_numpy(float).reshape(4, 3).T  # 3 rater slots x 4 images
        expected = krippendorff.alpha(reliability_data=slots, level_of_measurement=level, value_domain=list(scale))
        # the same ratings with a different rater on every image: alpha does not depend on who rated
        sparse = np.full((12, 4), np.nan)
        sparse[np.arange(12), np.repeat(np.arange(4), 3)] = hand[criterion].to_numpy(float)
        assert krippendorff.alpha(reliability_data=sparse, level_of_measurement=level,
                                  value_domain=list(scale)) == pytest.approx(expected)
        assert human.krippendorff_alpha(hand, criterion) == pytest.approx(expected)
    rows = human.agreement(hand).set_index("criterion")
    assert rows.loc["alignment", "level_of_measurement"] == "ordinal"
    assert rows.loc["overall", "level_of_measurement"] == "interval"
    assert rows.loc["quality", "n_ratings"] == 12


def test_perfect_agreement_gives_alpha_one_and_values_off_the_scale_are_refused(hand):
    same = hand.assign(alignment=np.repeat([0.0, 0.5, 1.0, 1.0], 3))
    assert human.krippendorff_alpha(same, "alignment") == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"alignment has value\(s\) \[0.7\] outside its scale"):
        human.krippendorff_alpha(hand.assign(alignment=0.7), "alignment")


def test_fractional_overall_scores_are_interval_values_in_1_to_5(hand):
    overall = np.array([3.5, 4.0, 2.25, 1.0, 1.5, 2.0, 5.0, 4.5, 4.5, 2.0, 3.0, 2.5])  # release-like fractions
    fractional = hand.assign(overall=overall)
    slots = overall.reshape(4, 3).T  # 3 rater slots x 4 images, as the package takes them
    expected = krippendorff.alpha(reliability_data=slots, level_of_measurement="interval")
    assert human.krippendorff_alpha(fractional, "overall") == pytest.approx(expected)
    with pytest.raises(ValueError, match=r"overall has value\(s\) \[6.0\] outside its scale"):
        human.krippendorff_alpha(hand.assign(overall=6.0), "overall")


@pytest.mark.slow
def test_cli_meta_eval_and_human_aggregates_on_the_built_copy(built, tmp_path):
    """The console verbs over the built folder: a score file ranked against the raters into a store's Metrics
    table; human aggregates and alpha as CSV; a malformed --scores is a clear error."""
    from leaderboard.store import Store
    from tests.helpers import culturelens

    out, _ = built
    ratings = cf.load_config(out, "ratings")
    means = ratings.groupby("image_id")["overall"].mean()
    scores = tmp_path / "scores.csv"
    pd.DataFrame({"image_id": means.index, "score": means.to_numpy()}).to_csv(scores, index=False)

    store = tmp_path / "store"
    result = culturelens("meta-eval", "--ratings", str(out), "--scores", f"oracle={scores}", "--min-images", "3",
                 "--resamples", "50", "--no-countries", "--store", str(store))
    assert result.returncode == 0, result.stderr
    table = Store(store).meta_evaluation()
    oracle = table[(table["metric"] == "oracle") & (table["criterion"] == "overall")]
    assert oracle["spearman"].iloc[0] == pytest.approx(1.0)  # the human mean itself correlates perfectly
    assert {"reported", "scored"} == set(table["provenance"])  # beside the paper's numbers
    bad = culturelens("meta-eval", "--ratings", str(out), "--scores", str(scores))
    assert bad.returncode == 2 and "expected NAME=FILE" in bad.stderr and "Traceback" not in bad.stderr
    result = culturelens("human-aggregates", "--ratings", str(out), "--resamples", "50", "--out", str(tmp_path / "h"))
    assert result.returncode == 0, result.stderr
    aggregates = pd.read_csv(tmp_path / "h" / "human_aggregates.csv")
    assert {"model", "country", "domain", "statistic", "value", "ci_low", "ci_high"} <= set(aggregates.columns)
    assert set(pd.read_csv(tmp_path / "h" / "agreement.csv")["criterion"]) == {"alignment", "quality", "overall"}

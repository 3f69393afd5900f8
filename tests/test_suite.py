"""The suite (``benchmark.suite``): one definition for every track, its datasets and scoring assets built by
``culturelens suite build`` from tiny stand-in sources (as the builders' own tests make them), one suite submission
made by ``culturelens generate --suite`` with a tiny random pipeline, validated part by part and scored with each
part's tracks."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import socket
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from benchmark import suite as definition
from benchmark.datasets.prompts import load_prompts
from benchmark.layout import part_folder
from benchmark.submission.suite import SuiteReport, stage
from benchmark.suite import SUITE_V1, Suite
from benchmark.suite_assets import Assets
from benchmark.suite_build import card, git_blob_id, pin_matches
from tests.helpers import CUBE_FILE, SHARED_DATA, culturelens_here
from culturelens.testing.submissions import zip_folder
from tests.suite_stand_ins import SIZE, write_part

pytestmark = pytest.mark.usefixtures("one_torch_thread")

W1KP_FILE = SHARED_DATA / "w1kp" / "cdf-xy.pt"


# --- the definition ---------------------------------------------------------------------------------------------
def test_suite_v1_answers_each_papers_prompts_with_its_seeds_and_totals_19773_images():
    parts = {p.name: p for p in SUITE_V1.parts}
    # CUBE-1K 992 x 10, CUBE diversity 15 x 80 (seeds 0-79), CRT 767 x 10, CulturalFrames 983 x 1.
    assert {n: (p.dataset.prompts, p.images_per_prompt, p.images) for n, p in parts.items()} == {
        "cube-1k": (992, 10, 9920), "cube-diversity": (15, 80, 1200), "iconic-references": (767, 10, 7670),
        "culturalframes": (983, 1, 983)}
    assert SUITE_V1.images == 9920 + 1200 + 7670 + 983 == 19773
    assert parts["cube-diversity"].seeds == tuple(range(80))
    assert {t: SUITE_V1.part_of_track(t).name for p in SUITE_V1.parts for t in p.tracks} == {
        "awareness": "cube-1k", "variability": "cube-1k", "relevance": "cube-1k", "diversity": "cube-diversity",
        "iconicity": "iconic-references", "expectations": "culturalframes"}
    assert [str(p.dataset) for p in SUITE_V1.parts] == [
        "culturelens/cube-1k:cube_1k:test", "culturelens/cube-diversity:diversity:test",
        "culturelens/iconic-references:references:test", "culturelens/culturalframes:prompts:test"]
    assert Suite.from_dict(json.loads(json.dumps(SUITE_V1.to_dict()))) == SUITE_V1


def test_generation_gpu_hours_are_images_times_the_stated_seconds():
    costs = {c.preset: c for c in definition.COSTS}
    assert SUITE_V1.gpu_hours(costs["sdxl"]) == pytest.approx(19773 * 2.496 / 3600)  # 13.7 h
    assert SUITE_V1.gpu_hours(costs["flux.1-dev"]) == pytest.approx(19773 * 12.7 / 3600)  # 69.8 h
    assert costs["flux.1-dev"].seconds_per_image == pytest.approx(round(7.11 * 50 / 28, 1))  # 28 -> 50 steps
    assert not any(c.measured for c in definition.COSTS)


def test_the_card_states_total_images_gpu_hours_and_marks_unmeasured_seconds():
    text = card(SUITE_V1)
    assert "**19,773**" in text and "| `sdxl` | 2.496 | H100 | 13.7 |" in text and "| `flux.1-dev` | 12.7 | H100 | 69.8 |" in text
    assert text.count("**not measured**") == 2
    assert "| `cube-1k` | `culturelens/cube-1k:cube_1k:test` | 992 | 10 (seeds 0-9) | 9,920 |" in text
    assert "45 pairs per prompt" in text and "20 seeds would add 9,920 images" in text
    assert "| `cube-diversity` | `culturelens/cube-diversity:diversity:test` | 15 | 80 (seeds 0-79) | 1,200 |" in text
    assert "`1389460b8c1434bf`" in text and "not pinned yet" in text  # CUBE-1K's rows pinned, CRT's not yet


def test_pins_are_checked_as_sha256_or_git_blob_ids():
    # `printf 'hello\n' | git hash-object --stdin` and `printf 'hello\n' | sha256sum`
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert pin_matches(b"hello\n", "git-blob:ce013625030ba8dba906f756967f9e9ca394464a") is True
    assert pin_matches(b"hello\n", "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03") is True
    assert pin_matches(b"hello!\n", "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03") is False
    assert pin_matches(b"hello\n", None) is None


def test_the_pinned_sources_are_the_authors_files_at_their_commits():
    """The shared copies are the files of the GitHub trees (git blob ids read from each repository at its pinned
    commit), and the pins hold for them."""
    if not (CUBE_FILE.exists() and W1KP_FILE.exists()):
        pytest.skip(f"the authors' files are not in {SHARED_DATA} (see ../shared/data/README.md)")
    assert git_blob_id(CUBE_FILE.read_bytes()) == "51ecf59e57b39a74bb0808463005d08cc533da16"
    assert git_blob_id(W1KP_FILE.read_bytes()) == "a3b7e26852af9cf1d535f48dfbe6057f0f8f09dc"
    assert pin_matches(CUBE_FILE.read_bytes(), definition.source("cube-1k").pin)
    assert pin_matches(W1KP_FILE.read_bytes(), definition.source("w1kp-calibration").pin)
    assert definition.CUBE_COMMIT in definition.source("cube-1k").default


# --- suite build ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_suite_build_makes_every_dataset_and_scoring_asset_from_stand_in_sources(built_suite, tiny_upstream):
    out, result, _ = built_suite
    assets = Assets(out)
    assert [line.split(":")[0] for line in result.stdout.splitlines()[:7]] == [
        f"built {a}" for a in ("cube-1k", "cube-diversity", "iconic-references", "culturalframes", "artifact-index",
                               "relevance-kb", "w1kp-calibration")]
    assert assets.tracks() == {t: None for t in ("awareness", "variability", "relevance", "diversity", "iconicity",
                                                 "expectations")}  # every track's assets are present
    settings = assets.settings()
    assert settings == {"artifact_index": str(out / "assets" / "artifact-index"),
                        "relevance_kb": str(out / "assets" / "relevance-kb"),
                        "w1kp_calibration": str(out / "assets" / "w1kp-calibration" / "calibration.npz"),
                        "w1kp_backbone": "dinov2-base"}  # the backbone the stand-in calibration was fitted for
    # Each part's dataset loads from the folder, and the folder's definition pins what was built there.
    for part in assets.suite.parts:
        prompts = load_prompts(part.dataset.repo, part.dataset.config, local_root=assets.datasets_root)
        assert (part.dataset.prompts, part.dataset.digest) == (len(prompts), prompts.digest)
    counts = {p.name: p.dataset.prompts for p in assets.suite.parts}
    assert counts == {"cube-1k": 6, "cube-diversity": 15, "iconic-references": 4, "culturalframes": 3}
    references = load_prompts("culturelens/iconic-references", "references", local_root=assets.datasets_root)
    assert references.rows["wikidata_revision"] == [2000000000, 2000000001, 2000000002, 2000000003]
    assert references.rows["image_licenses"][0] == ["CC0 (test image)"]
    # The stand-ins are not the pinned files: recorded, and said in the card, never passed off as the suite's.
    assert sorted(assets.unpinned) == ["artifact-index", "cube-1k", "culturalframes", "iconic-references",
                                      "relevance-kb", "w1kp-calibration"]  # all but the package's own prompts
    assert assets.built["cube-1k"]["sha256"] == hashlib.sha256(tiny_upstream.read_bytes()).hexdigest()
    text = (out / "README.md").read_text()
    assert "| `cube-1k` |" in text and "**no**: results on it are not the suite's" in text
    assert f"(built here: `{assets.suite.part('cube-1k').dataset.digest}`)" in text


def test_a_public_source_out_of_reach_leaves_its_asset_unbuilt_and_names_the_command(tmp_path, monkeypatch):
    from benchmark import settings

    with socket.socket() as closed:  # a port nothing listens on: Wikidata and Commons refuse, as offline
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    for setting in (settings.WIKIDATA_API, settings.WIKIDATA_SPARQL, settings.WIKIPEDIA_API, settings.COMMONS_API):
        monkeypatch.setenv(setting.env, f"http://127.0.0.1:{port}/w")
    out = tmp_path / "suite"
    result = culturelens_here("suite", "build", "--out", out, "--only", "cube-diversity", "iconic-references")
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "built cube-diversity: from benchmark/datasets/cube_diversity.py"
    unbuilt = result.stdout.splitlines()[1]
    assert unbuilt.startswith("NOT BUILT iconic-references: cannot reach Wikidata's SPARQL service (the iconic "
                              "references' query for ")  # one query per class: the error names which one
    assert f") (http://127.0.0.1:{port}/w): " in unbuilt
    assert unbuilt.endswith("where there is no network, give the source as a file instead (the command's --help "
                            "names the option)")
    state = Assets(out).tracks()
    weights = ("(it needs the weights of clip-vit-b-32: where the Hub cannot be reached, add `--backbones FILE` "
               "naming local copies)")  # the build embeds both with CLIP: offline, its weights are needed too
    assert state["diversity"] == (f"no artifact-index in {out}: `culturelens suite build --out {out} --only "
                                  f"artifact-index` {weights}")
    assert state["iconicity"] == (f"no iconic-references in {out}: `culturelens suite build --out {out} --only "
                                  f"iconic-references` {weights}")
    assert Assets(out).settings() == {}
    assert "`iconic-references`: cannot reach Wikidata's SPARQL service" in (out / "README.md").read_text()


def test_building_cube_1k_from_the_pinned_file_gives_the_pinned_prompt_rows(tmp_path):
    if not CUBE_FILE.exists():
        pytest.skip(f"real CUBE-1K file not found at {CUBE_FILE} (see ../shared/data/README.md)")
    out = tmp_path / "suite"
    result = culturelens_here("suite", "build", "--out", out, "--only", "cube-1k", "--cube-source", CUBE_FILE)
    assert result.returncode == 0, result.stderr
    assets = Assets(out)
    assert assets.built["cube-1k"]["pinned"] is True and assets.unpinned == []
    assert assets.suite.part("cube-1k").dataset == SUITE_V1.part("cube-1k").dataset


def test_a_folder_that_is_not_a_suite_folder_is_never_built_into(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = culturelens_here("suite", "build", "--out", tmp_path, "--only", "cube-diversity")
    assert result.returncode == 2 and "is not a suite folder (no suite.json); choose another --out" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


@pytest.mark.slow
def test_suite_push_to_a_folder_publishes_the_suite_repo_and_one_repo_per_dataset(built_suite, tmp_path):
    out, _, _ = built_suite
    hub = tmp_path / "hub"
    result = culturelens_here("suite", "push", out, "--repo", "org/suite", "--to-folder", hub)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in hub.iterdir()) == ["org__cube-1k", "org__cube-cspace", "org__cube-diversity",
                                                      "org__culturalframes", "org__iconic-references", "org__suite"]
    assert sorted(p.name for p in (hub / "org__suite").iterdir()) == ["LICENSE.md", "README.md", "assets",
                                                                    "suite.json"]
    assert Assets(hub / "org__suite").settings()["artifact_index"] == str(hub / "org__suite" / "assets" /
                                                                         "artifact-index")
    pushed = load_prompts("org/cube-1k", "cube_1k", local_root=hub)  # the layout of a store's datasets/
    assert pushed.digest == Assets(out).suite.part("cube-1k").dataset.digest


def test_suite_push_to_the_hub_offline_is_a_clear_error(tmp_path):
    culturelens_here("suite", "build", "--out", tmp_path / "suite", "--only", "cube-diversity")
    from tests.helpers import culturelens as run_cli

    result = run_cli("suite", "push", str(tmp_path / "suite"), "--repo", "org/suite", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "HF_HUB_OFFLINE is set: unset it to publish to org/suite on the Hub" in result.stderr


# --- suite submissions made by hand: validation ---------------------------------------------------------------
def check(path: Path, folder: Path, suite: Suite, tmp_path: Path):
    return stage(path, tmp_path / "staging", suite,
                 lambda m: load_prompts(m.dataset.repo, m.dataset.config, local_root=folder / "datasets"))


def test_a_partial_suite_submission_is_accepted_and_names_the_parts_it_lacks(small_suite, tmp_path):
    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    submission = tmp_path / "sub"
    write_part(submission, suite, "cube-1k")
    write_part(submission, suite, "cube-diversity")
    report = check(submission, folder, suite, tmp_path)
    assert isinstance(report, SuiteReport) and report.ok, report.text()
    assert report.missing == ["iconic-references", "culturalframes"]
    assert report.summary == ("OK: Tiny Test Model: 2 of 4 parts of culturelens/suite v1 (cube-1k 12 images, "
                              "cube-diversity 45 images); missing: iconic-references, culturalframes (scored on the "
                              "parts present)")
    lines = report.text().splitlines()
    assert lines[2].startswith("  part cube-1k: OK: Tiny Test Model: 12 images for 6 prompts of culturelens/cube-1k")
    # Packed as a zip (inside one folder), the same parts give the same content hash.
    zipped = check(zip_folder(submission, tmp_path / "sub.zip", wrapper="sdxl/"), folder, suite, tmp_path)
    assert zipped.ok and zipped.content_hash == report.content_hash


def test_a_part_with_other_seeds_or_another_dataset_is_refused_with_the_parts_own_values(small_suite, tmp_path):
    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    submission = tmp_path / "sub"
    write_part(submission, suite, "cube-1k", seeds=(0, 5))
    report = check(submission, folder, suite, tmp_path)
    assert not report.ok and report.summary.startswith("REJECTED: part cube-1k: 1 problem")
    assert report.parts["cube-1k"].errors == [
        "manifest.json: seeds: part 'cube-1k' is generated with the seeds 0, 1, not 0, 5"]
    shutil.rmtree(submission)
    write_part(submission, suite, "cube-diversity", prompts_repo="culturelens/cube-1k", config="cube_1k")
    report = check(submission, folder, suite, tmp_path)
    assert report.parts["cube-diversity"].errors == [
        "manifest.json: dataset: culturelens/cube-1k:cube_1k:test, but part 'cube-diversity' answers "
        "culturelens/cube-diversity:diversity:test"]
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").iterdir())  # nothing left behind


def test_a_suite_submission_is_one_model_and_names_only_the_suites_parts(small_suite, tmp_path):
    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    submission = tmp_path / "sub"
    write_part(submission, suite, "cube-1k")
    write_part(submission, suite, "cube-diversity", model="Another Model")
    report = check(submission, folder, suite, tmp_path)
    assert report.errors == ["parts/cube-diversity: model 'Another Model' (local/tiny) differs from parts/cube-1k's "
                             "'Tiny Test Model' (local/tiny): a suite submission is one model's images"]
    shutil.rmtree(submission / "parts" / "cube-diversity")
    (submission / "parts" / "cube-2k").mkdir()
    (submission / "parts" / "cube-2k" / "manifest.json").write_text("{}")
    report = check(submission, folder, suite, tmp_path)
    assert report.errors == ["parts/cube-2k: culturelens/suite v1 has no part 'cube-2k' (its parts: cube-1k, "
                             "cube-diversity, iconic-references, culturalframes)"]


def test_a_part_whose_prompt_rows_are_not_the_pinned_ones_is_refused(small_suite, tmp_path):
    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    submission = tmp_path / "sub"
    write_part(submission, suite, "cube-1k")
    pinned = dataclasses.replace(suite, parts=tuple(
        dataclasses.replace(p, dataset=dataclasses.replace(p.dataset, digest="0123456789abcdef"))
        if p.name == "cube-1k" else p for p in suite.parts))
    report = check(submission, folder, pinned, tmp_path)
    served = suite.part("cube-1k").dataset.digest
    assert report.parts["cube-1k"].errors == [
        f"manifest.json: dataset: the prompt rows of culturelens/cube-1k:cube_1k:test served here (digest {served}) "
        "are not the ones culturelens/suite v1 pins (digest 0123456789abcdef); a submission generated for a "
        "suite folder is checked against it: `--suite DIR`, the folder `generate --suite DIR` read"]


def test_the_single_submission_path_refuses_a_suite_submission_with_the_way_to_check_it(small_suite, tmp_path):
    from benchmark.submission import stage as stage_one

    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    write_part(tmp_path / "sub", suite, "cube-1k")
    report = stage_one(tmp_path / "sub", tmp_path / "staging", lambda m: None)
    assert report.errors == ["parts/: a suite submission, one folder per part; check it as one with `culturelens "
                             "validate` (benchmark.submission.suite.stage)"]


def test_validate_reports_each_part_of_a_suite_submission(small_suite, tmp_path):
    folder, suite = small_suite
    (tmp_path / "datasets").symlink_to(folder / "datasets")
    write_part(tmp_path / "sub", suite, "cube-diversity")
    result = culturelens_here("validate", tmp_path / "sub", "--suite", folder)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("OK: Tiny Test Model: 1 of 4 parts of culturelens/suite v1 (cube-diversity 45 images); "
                               "missing: cube-1k, iconic-references, culturalframes")
    assert lines[2].startswith("  part cube-diversity: OK: Tiny Test Model: 45 images for 15 prompts")
    (tmp_path / "sub" / "parts" / "cube-diversity" / "images" / "div-art-1" / "0.png").unlink()
    result = culturelens_here("validate", tmp_path / "sub", "--suite", folder)
    assert result.returncode == 1
    assert result.stdout.splitlines()[:3] == [
        "REJECTED: part cube-diversity: answered 15 of 15 prompts; 1 image missing; missing: cube-1k, "
        "iconic-references, culturalframes (scored on the parts present)",
        "  part cube-diversity: REJECTED: answered 15 of 15 prompts; 1 image missing",
        "    - images/div-art-1/0.*: no image for prompt div-art-1 seed 0, and manifest.missing does not list it"]


# --- generate --suite and score ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_generate_suite_makes_every_part_and_validate_accepts_it_part_by_part(tiny_suite, suite_generated, tiny_sd):
    folder, suite, _ = tiny_suite
    out, result = suite_generated
    # 6 CUBE-1K prompts x 2, 15 diversity prompts x 4, 4 references x 2, 3 CulturalFrames prompts x 1
    assert [line.split(",")[0] for line in result.stdout.splitlines()[:4]] == [
        "cube-1k: 12 images generated", "cube-diversity: 60 images generated", "iconic-references: 8 images generated",
        "culturalframes: 3 images generated"]
    manifest = json.loads((out / "parts" / "cube-diversity" / "manifest.json").read_text())
    assert manifest["suite"] == {"repo": "culturelens/suite", "version": 1, "part": "cube-diversity"}
    assert (manifest["dataset"]["repo"], manifest["dataset"]["config"], manifest["seeds"]) == (
        "culturelens/cube-diversity", "diversity", [0, 1, 2, 3])
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny-sd"]  # no temporary left beside or inside it
    checked = culturelens_here("validate", out, "--suite", folder)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.splitlines()[0] == (
        "OK: Tiny SD: 4 of 4 parts of culturelens/suite v1 (cube-1k 12 images, cube-diversity 60 images, "
        "iconic-references 8 images, culturalframes 3 images)")
    # Rerunning resumes: nothing to make again.
    again = culturelens_here("generate", "--suite", folder, "--model", tiny_sd, "--model-name", "Tiny SD", "--out",
                             out, *SIZE)
    assert again.returncode == 0 and "cube-1k: 0 images generated, 12 already done" in again.stdout


def test_generate_suite_refuses_the_options_the_suite_fixes(small_suite, tmp_path):
    folder, _ = small_suite
    result = culturelens_here("generate", "--suite", folder, "--model", tmp_path / "none", "--seeds", "0-3",
                              "--out", tmp_path / "out", "--device", "cpu")
    assert result.returncode == 2
    assert "--seeds: the suite fixes each part's prompts and seeds; leave them out with --suite" in result.stderr


def score(submission: Path, folder: Path, backbones: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return culturelens_here("score", submission, "--out", out, "--suite", folder, "--backbones", backbones,
                            "--device", "cpu", "--relevance-judge", "probe", "--diversity-n", "4", *extra)


@pytest.mark.slow
def test_score_of_a_suite_submission_gives_each_parts_tracks_on_its_own_dataset(tiny_suite, suite_generated, tmp_path):
    folder, suite, backbones = tiny_suite
    out, _ = suite_generated
    result = score(out, folder, backbones, tmp_path / "scored")
    assert result.returncode == 0, result.stderr[-3000:]
    results = next((tmp_path / "scored" / "results").iterdir())
    run = json.loads((results / "run.json").read_text())
    assert run["suite"] == {"repo": "culturelens/suite", "version": 1,
                            "parts": ["cube-1k", "cube-diversity", "iconic-references", "culturalframes"],
                            "missing": [], "unscored": run["suite"]["unscored"]}
    aggregates = pd.read_parquet(results / "aggregates.parquet")
    datasets = aggregates.groupby("track")["dataset"].agg(lambda d: sorted({x.split("@")[0] for x in d}))
    assert datasets["awareness"] == ["culturelens/cube-1k:cube_1k:test"]
    assert datasets["variability"] == ["culturelens/cube-1k:cube_1k:test"]
    assert datasets["diversity"] == ["culturelens/cube-diversity:diversity:test"]  # never on CUBE-1K's prompts
    assert datasets["iconicity"] == ["culturelens/iconic-references:references:test"]
    # Relevance scores the CUBE-1K images or says why not, there; expectations has no automatic metric here yet.
    assert datasets.get("relevance", ["culturelens/cube-1k:cube_1k:test"]) == ["culturelens/cube-1k:cube_1k:test"]
    assert "relevance" in datasets or run["skipped"]["relevance"].startswith("cube-1k: ")
    # Each row's protocol is its part's: its dataset and images per prompt.
    protocols = aggregates.drop_duplicates("track").set_index("track")["protocol"].map(json.loads)
    assert protocols["awareness"]["images_per_prompt"] == 2 and protocols["diversity"]["images_per_prompt"] == 4
    assert {name: (r["dataset"].split("@")[0], r["seeds"]) for name, r in run["parts"].items()
            if name != "culturalframes"} == {
        "cube-1k": ("culturelens/cube-1k:cube_1k:test", [0, 1]),
        "cube-diversity": ("culturelens/cube-diversity:diversity:test", [0, 1, 2, 3]),
        "iconic-references": ("culturelens/iconic-references:references:test", [0, 1])}
    per_image = pd.read_parquet(results / "per_image.parquet")
    assert per_image["prompt_id"][per_image["track"] == "diversity"].str.startswith("div-").all()
    assert run["images"] == 12 + 60 + 8 + (3 if "culturalframes" in run["parts"] else 0)


@pytest.mark.slow
def test_a_two_part_submission_is_scored_on_those_parts_and_names_the_missing_ones(tiny_suite, suite_generated,
                                                                                   tmp_path):
    folder, suite, backbones = tiny_suite
    out, _ = suite_generated
    partial = tmp_path / "partial"
    for name in ("cube-1k", "iconic-references"):
        shutil.copytree(out / part_folder(name), partial / part_folder(name))
    checked = culturelens_here("validate", partial, "--suite", folder)
    assert checked.returncode == 0 and checked.stdout.splitlines()[0] == (
        "OK: Tiny SD: 2 of 4 parts of culturelens/suite v1 (cube-1k 12 images, iconic-references 8 images); missing: "
        "cube-diversity, culturalframes (scored on the parts present)")
    result = score(partial, folder, backbones, tmp_path / "scored", "--tracks", "awareness", "iconicity", "diversity")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "of the parts cube-1k, iconic-references (missing: cube-diversity, culturalframes)" in result.stdout
    results = next((tmp_path / "scored" / "results").iterdir())
    run = json.loads((results / "run.json").read_text())
    assert run["suite"]["missing"] == ["cube-diversity", "culturalframes"]
    assert set(pd.read_parquet(results / "aggregates.parquet")["track"]) == {"awareness", "iconicity"}
    assert {m: r for m, r in run["skipped"].items() if m.startswith(("cd_", "vendi_"))} == {
        f"{kind}_{kernel}": "the submission has no cube-diversity part" for kind in ("cd", "vendi")
        for kernel in ("continent", "country", "artifact", "hierarchical", "uniform")}
    zipped = zip_folder(partial, tmp_path / "partial.zip")
    assert zipfile.ZipFile(zipped).namelist()[0].startswith("parts/")


@pytest.mark.slow
def test_reproduce_redoes_a_suite_result_part_by_part_and_names_the_part_whose_dataset_changed(
        tiny_suite, suite_generated, tmp_path):
    from tests.helpers import tiny_cube
    from culturelens.testing.submissions import TINY_UPSTREAM

    folder, _, backbones = tiny_suite
    out, _ = suite_generated
    scored = score(out, folder, backbones, tmp_path / "scored", "--tracks", "awareness", "diversity")
    assert scored.returncode == 0, scored.stderr[-3000:]
    (result,) = (tmp_path / "scored" / "results").iterdir()
    again = culturelens_here("reproduce", result, "--suite", folder, "--device", "cpu")
    assert again.returncode == 0, again.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in again.stdout.splitlines() if len(line.split()) == 4}
    # CLIPScore from the cube-1k part, CD from the cube-diversity part: every value the same, row for row.
    assert {"clip_score", "cd_uniform", "vendi_country"} <= rows.keys()
    assert all(values == ["0", "0", "yes"] for values in rows.values()), again.stdout
    assert again.stdout.splitlines()[-1] == "every metric reproduced within 0"
    # The same suite with CUBE-1K rebuilt from one reworded prompt (same ids, other rows): refused, the part named.
    changed = Path(shutil.copytree(folder, tmp_path / "suite"))
    upstream = [dict(record) for record in TINY_UPSTREAM]
    upstream[0]["prompt"] = upstream[0]["prompt"].replace("realistic", "photorealistic")
    (tmp_path / "reworded.json").write_text(json.dumps(upstream), encoding="utf-8")
    tiny_cube(changed / "datasets", tmp_path / "reworded.json")
    refused = culturelens_here("reproduce", result, "--suite", changed, "--device", "cpu")
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: part cube-1k: the dataset changed since the result was scored: it was "
                                     "culturelens/cube-1k:cube_1k:test@"), refused.stderr

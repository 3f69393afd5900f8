"""The suite served (issue 29, service half): `culturelens serve --suite` on a suite folder built by `culturelens
suite build` from tiny stand-ins of every source, a suite submission made by `generate --suite` with a tiny random
pipeline, uploaded whole, scored on the six tracks by the serve's own worker (tiny backbones for every track, the
tiny Qwen2.5-VL as the expectations judge), one Overview "All tracks" row per model; a second model ranked beside
it; a two-part submission scored on those two with the missing parts named. Around it, the pieces on their own:
the overall's protocol rule, the intake's duplicate check per part, the tracks the Queue tab says are off, a suite
submission fetched from a Hub dataset and through the requests repo.

The stand-in suite is the v1 definition built from the same code on tiny sources: 6 CUBE-1K prompts x 2 seeds (v1:
992 x 10), the 15 diversity rephrasings x 4 seeds (v1: x 80), 4 references x 2 (v1: 767 x 10) and 3 CulturalFrames
prompts x 1 (v1: 983 x 1); its prompt rows, and so its protocols, are its own (`with_seeds`)."""

from __future__ import annotations

import html
import json
import re
import shutil
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import ranking, results
from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k
from benchmark.layout import SuiteLayout, part_folder
from benchmark.run_record import RunRecord
from benchmark.submission.suite import validated_hash
from benchmark.suite_assets import Assets
from benchmark.suite import SUITE_V1
from culturelens.testing.submissions import write_image, zip_folder
from leaderboard import display, tables
from leaderboard.catalog import Catalog
from leaderboard.repo import LocalRepo
from leaderboard.store import Store
from tests.helpers import culturelens, serving
from tests.suite_stand_ins import write_part

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HEADLINES = {"awareness": "clip_score", "diversity": "cd_uniform", "iconicity": "crt", "variability": "w1kp",
             "relevance": "relevance_intended", "expectations": "expectations_met"}
# The judged tracks' rows here are the tests' tiny judge's, not their protocol's judge's (Protocol.judge): scored on
# the suite's parts, ranked under their own protocol, never in the overall mean.
JUDGED = ("expectations", "relevance")
IN_THE_MEAN = sorted(set(HEADLINES) - {"variability", *JUDGED})


# --- the served suite, end to end ------------------------------------------------------------------------------
def another_model(submission: Path, target: Path, name: str, parts: tuple[str, ...] | None = None) -> Path:
    """``submission`` as another model's: every image redrawn (random pixels of the same size, drawn from ``name``
    too: two other models never share an image set, which the server refuses), the manifests naming ``name``; only
    ``parts`` when given."""
    for part in parts or tuple(SuiteLayout(submission).parts):
        shutil.copytree(submission / part_folder(part), target / part_folder(part))
    for manifest_path in target.glob("parts/*/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest["model"] = {**manifest["model"], "name": name, "id": f"local/{name.lower().replace(' ', '-')}"}
        manifest_path.write_text(json.dumps(manifest))
    for i, image in enumerate(sorted(target.glob("parts/*/images/*/*.png"))):
        write_image(image, seed=zlib.crc32(name.encode()) + i)
    return target


@pytest.fixture(scope="module")
def served(tiny_suite, suite_generated, tiny_qwen_vl, tmp_path_factory):
    """A live `culturelens serve --suite` whose worker scores every track with tiny models, and three submissions
    scored by it: Tiny SD (uploaded through the API), Tiny Noise (`culturelens submit`) and a two-part one."""
    from gradio_client import Client, handle_file

    folder, _, backbones = tiny_suite
    generated, _ = suite_generated
    root = tmp_path_factory.mktemp("serve")
    store_root = root / "store"
    options = ("--suite", folder, "--backbones", backbones, "--relevance-judge", "probe", "--expectations-judge",
               tiny_qwen_vl, "--diversity-n", "4", "--user", "ada")
    with serving(store_root, root / "serve.log", *options) as url:
        client = Client(url, verbose=False)
        store = Store(store_root)
        jobs = {}
        verdict = client.predict(handle_file(str(zip_folder(generated, root / "tiny-sd.zip"))), api_name="/submit")
        jobs["Tiny SD"] = re.search(r"Accepted: `([^`]+)`", verdict).group(1)
        noise = another_model(generated, root / "noise", "Tiny Noise")
        submitted = culturelens("submit", noise, "--store", store_root, "--suite", folder, "--owner", "bo")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        jobs["Tiny Noise"] = re.search(r"queued as (\S+)", submitted.stdout).group(1)
        partial = another_model(generated, root / "partial", "Tiny Partial", ("cube-1k", "iconic-references"))
        verdict = client.predict(handle_file(str(zip_folder(partial, root / "partial.zip"))), api_name="/submit")
        jobs["Tiny Partial"] = re.search(r"Accepted: `([^`]+)`", verdict).group(1)
        for model, job_id in jobs.items():
            job = store.queue.wait(job_id, timeout=600)
            assert job.state == "FINISHED", (model, job.error, (root / "serve.log").read_text()[-3000:])
        yield client, store, jobs, verdict


@pytest.mark.slow
def test_a_suite_submission_to_a_live_serve_is_scored_on_six_tracks_and_is_one_overall_row(served, tiny_suite):
    client, store, jobs, _ = served
    folder, suite, _ = tiny_suite
    # One job, all parts; the store serves the suite's datasets (linked to the suite folder's own).
    assert store.queue.get(jobs["Tiny SD"]).dataset == " + ".join(str(p.dataset) for p in suite.parts)
    for part in suite.parts:
        assert (store.datasets / part.dataset.repo.replace("/", "__")).resolve() == \
            (folder / "datasets" / part.dataset.repo.replace("/", "__")).resolve()
    # Its results: every part's rows, a value on each track's headline, on that part's dataset.
    aggregates = pd.read_parquet(store.results_folder(jobs["Tiny SD"]) / "aggregates.parquet")
    overall = aggregates[aggregates["slice"] == "overall"]
    headline = {t: overall[(overall["track"] == t) & (overall["metric"] == m)] for t, m in HEADLINES.items()}
    assert {t: len(rows) for t, rows in headline.items()} == dict.fromkeys(HEADLINES, 1)
    assert all(rows["value"].notna().all() for rows in headline.values()), overall[["track", "metric", "value"]]
    for track, rows in headline.items():
        fields = results.protocol_fields(rows["protocol"].iloc[0])
        assert Assets(folder).suite.answered_by(track, fields), (track, fields)  # the served build's part protocol
        assert fields["build"] == "unpinned" and not suite.answered_by(track, fields)  # a stand-in build: never
        # the pinned suite's (``suite`` here is the definition alone, pinned)
        assert track_registry.get(track).protocol.judged_alike(rows["protocol"].iloc[0]) == (track not in JUDGED)
    run = json.loads((store.results_folder(jobs["Tiny SD"]) / "run.json").read_text())
    assert run["suite"]["parts"] == suite.names and run["suite"]["missing"] == []
    # Compare finds its images in whichever part holds them, and a reference prompt's reference images.
    picked = tables.submissions(Catalog(store)).set_index("submission_id")
    assert picked.loc[jobs["Tiny SD"], "dataset"].count(" + ") == 3  # one submission, its four parts' datasets
    reference = aggregates.loc[(aggregates["track"] == "iconicity") & (aggregates["slice"] == "prompt"),
                               "slice_value"].iloc[0]
    gallery, references, _, _, _ = client.predict([jobs["Tiny SD"]], reference, api_name="/compare")
    assert len(gallery) == 2 and len(references) >= 1  # its two seeds; the title's reference image(s)

    # /overall: both suite models in one track set, with a win-rate row on each of the three tracks not judged by
    # the tiny judge, and the headline rows behind them, variability's W1KP beside the mean. The stand-ins' 6
    # CUBE-1K prompts and 4 references are too few to rank (ranking.MIN_PROMPTS): no mean win rate nor rank, and
    # each model says why.
    rows = pd.DataFrame(client.predict(None, api_name="/overall"))
    means = rows[rows["metric"] == "mean_win_rate"].set_index("model")
    assert set(means.index) == {"Tiny SD", "Tiny Noise"} and set(means["slice_value"]) == {" + ".join(IN_THE_MEAN)}
    assert means["rank"].isna().all() and means["value"].isna().all()
    assert means["not_ranked"].str.contains(ranking.TOO_FEW).all()
    wins = rows[rows["metric"] == "win_rate"]
    assert sorted(wins.loc[wins["model"] == "Tiny SD", "track"]) == IN_THE_MEAN
    behind = rows[(rows["model"] == "Tiny SD") & rows["metric"].isin(list(HEADLINES.values()))]
    assert sorted(behind["track"]) == sorted([*IN_THE_MEAN, "variability"]) and behind["value"].notna().all()
    w1kp = behind.loc[behind["track"] == "variability", "value"].iloc[0]
    assert w1kp == pytest.approx(headline["variability"]["value"].iloc[0])

    # /overview, "All tracks": one row for the model, three tracks with a win-rate and a score column each, in the
    # README's order, and W1KP beside.
    _, _, table, note, track_set = client.predict("overall", None, "", [], None, None, "", [], display.RANK_COLUMNS,
                                                  None, api_name="/overview")
    shown = pd.DataFrame(table["data"], columns=table["headers"])
    ours = shown[shown["Model"].str.contains("Tiny SD")]
    track_columns = [c for c in shown.columns if c.startswith((
        "Awareness (CUBE)", "Diversity (CUBE)", "Iconicity (CRT)", "Variability (W1KP)", "Relevance (CAIRE)",
        "Expectations (CulturalFrames)"))]
    assert len(ours) == 1 and track_columns[:6] == [f"{t}{kind}" for t in ("Awareness (CUBE)", "Diversity (CUBE)",
                                                                          "Iconicity (CRT)")
                                                    for kind in (" win rate", " score")], shown.columns
    assert len(track_columns) == 7
    # Each track's own score is shown. Rank rule 2 ranks from 10 prompts: the stand-ins' 6 CUBE-1K prompts and 4
    # references are too few, so awareness and iconicity give no win rate; the diversity part's prompts are enough
    # (one track with a win rate), and the overall, which needs every track of the set, is not ranked.
    wins = [c for c in track_columns if c.endswith(" win rate")]
    scores = [c for c in track_columns if c not in wins]
    assert ours[scores].notna().all(axis=1).iloc[0], ours.to_dict("records")
    assert [c for c in wins if ours[c].notna().iloc[0]] == ["Diversity (CUBE) win rate"], ours.to_dict("records")
    assert ours["Tracks"].iloc[0] == 1 and ours["Rank range (95%)"].iloc[0].startswith("not ranked: Awareness (CUBE): "
                                                                                         "too few prompts to rank")
    assert "Variability (W1KP): w1kp (not in the mean)" in track_columns
    assert "the suite's part for that track" in note and "is shown in its own column, beside the mean" in note
    assert track_set["value"] == " + ".join(IN_THE_MEAN)


@pytest.mark.slow
def test_a_two_part_suite_submission_is_scored_on_those_parts_and_names_the_missing_ones(served):
    client, store, jobs, verdict = served
    assert "parts missing (it is scored without them): cube-diversity, culturalframes" in verdict
    job = store.queue.get(jobs["Tiny Partial"])
    assert job.message.split("; ")[1] == "parts missing: cube-diversity, culturalframes"
    run = json.loads((store.results_folder(job.id) / "run.json").read_text())
    assert run["suite"]["parts"] == ["cube-1k", "iconic-references"]
    assert run["suite"]["missing"] == ["cube-diversity", "culturalframes"]
    tracks = set(pd.read_parquet(store.results_folder(job.id) / "aggregates.parquet")["track"])
    assert tracks == {"awareness", "variability", "relevance", "iconicity"}
    details, _ = client.predict(job.id, api_name="/details")
    details = html.unescape(details)  # Markdown with the run record's text escaped (render.plain)
    assert "parts scored cube-1k, iconic-references" in details
    assert "**parts missing**: cube-diversity, culturalframes" in details
    # It is not among the models of three tracks: its own set of two (relevance is the tiny judge's: not in the
    # overall) is one choice away.
    *_, track_set = client.predict("overall", None, "", [], None, None, "", [], display.RANK_COLUMNS, None,
                                   api_name="/overview")
    assert track_set["value"] != "awareness + iconicity"
    assert "awareness + iconicity" in [value for _, value in track_set["choices"]]



@pytest.mark.slow
def test_a_suite_result_of_the_live_store_is_reproduced_part_by_part(served):
    """What a researcher citing a suite row runs: `reproduce ID --store STORE` on the serve's own store (the suite's
    datasets linked there), every metric of both parts scored again with a fresh cache and equal, row for row."""
    _, store, jobs, _ = served
    result = culturelens("reproduce", jobs["Tiny Partial"], "--store", store.root, "--device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    metrics = {line.split()[0] for line in result.stdout.splitlines() if line.endswith(" yes")}
    assert {"clip_score", "w1kp", "relevance_intended", "crt", "vr"} <= metrics  # cube-1k's and iconic's
    assert result.stdout.splitlines()[-1] == "every metric reproduced within 0"

# --- the overall's protocol rule -------------------------------------------------------------------------------
def _headline_row(store: Store, sid: str, model: str, track: str, metric: str, dataset: str, images: int,
                  revision: str | None, prompts: dict[str, float], version: str = "1",
                  backbones=("clip-vit-b-32=openai/clip@r1",)) -> None:
    protocol = results.protocol_columns({"dataset": dataset, "dataset_revision": revision,
                                        "images_per_prompt": images, "missing_images": results.MISSING_AS_FAILURES,
                                        "metric_version": version, "backbones": list(backbones)})
    common = {"provenance": "scored", "submission_id": sid, "model": model, "track": track, "metric": metric,
              "higher_is_better": True, "range_low": 0.0, "range_high": 1.0, "dataset": dataset,
              "scored_at": f"2026-01-01T00:00:{len(sid):02d}",
              "metric_version": version, **protocol}
    rows = [{**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(list(prompts.values()))),
             "n": len(prompts)}]
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": images} for p, v in prompts.items()]
    results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))


def test_the_overall_takes_each_tracks_suite_protocol_and_never_its_metric_on_other_prompts(tmp_path):
    """CUBE-1K at 10 seeds with the suite's pinned rows (two models) against three models at 2 seeds (more rows):
    the suite's protocol is the one ranked, in the track's table and in the overall; a model whose only CLIPScore is
    on the diversity prompts never gets an awareness entry."""
    store = Store(tmp_path / "store")
    cube, digest = str(SUITE_V1.part("cube-1k").dataset), SUITE_V1.part("cube-1k").dataset.digest
    prompts = [f"p{i}" for i in range(12)]
    rng = np.random.default_rng(3)
    for model in ("Suite A", "Suite B"):
        _headline_row(store, model.replace(" ", ""), model, "awareness", "clip_score", cube, 10, digest,
                      dict(zip(prompts, rng.integers(0, 9, 12) / 8)))
    for model in ("Two A", "Two B", "Two C"):
        _headline_row(store, model.replace(" ", ""), model, "awareness", "clip_score", cube, 2, digest,
                      dict(zip(prompts, rng.integers(0, 9, 12) / 8)))
    diversity = str(SUITE_V1.part("cube-diversity").dataset)
    _headline_row(store, "Elsewhere", "Elsewhere", "awareness", "clip_score", diversity, 80, None,
                  dict(zip(prompts, [1.0] * 12)))
    cat = Catalog(store)
    table = tables.protocols(cat, "awareness", "clip_score")
    assert list(table["suite"]) == [True, False, False] and list(table["rows"]) == [2, 3, 1]
    assert list(table["on_protocol"]) == [True, True, False]
    ranked, _ = tables.ranked(cat, "awareness", "clip_score", protocol_id=tables.pick_protocol(table))
    assert sorted(ranked.loc[~ranked["beside"], "model"]) == ["Suite A", "Suite B"]
    wide, choices, chosen, off = tables.overall(cat)
    assert chosen == "awareness" and sorted(wide["model"]) == ["Suite A", "Suite B"]
    assert len(off) == 4  # the three 2-seed rows and the one on the diversity prompts
    # Without the suite's rows, the headline protocol's largest; still never the diversity prompts'.
    for sid in ("SuiteA", "SuiteB"):
        store.results_folders.drop(sid)
    wide, _, _, _ = tables.overall(Catalog(store))
    assert sorted(wide["model"]) == ["Two A", "Two B", "Two C"]
    for sid in ("TwoA", "TwoB", "TwoC"):
        store.results_folders.drop(sid)
    wide, choices, _, off = tables.overall(Catalog(store))
    assert wide.empty and choices == [] and len(off) == 1


def test_variability_is_shown_beside_the_overall_not_in_its_mean(tmp_path):
    store = Store(tmp_path / "store")
    cube, digest = str(SUITE_V1.part("cube-1k").dataset), SUITE_V1.part("cube-1k").dataset.digest
    prompts = [f"p{i}" for i in range(12)]
    for model, clip, w1kp in (("A", 0.75, 0.25), ("B", 0.5, 0.875)):
        sid = model.lower()
        _headline_row(store, sid + "-aw", model, "awareness", "clip_score", cube, 10, digest,
                      dict.fromkeys(prompts, clip))
        _headline_row(store, sid + "-va", model, "variability", "w1kp", cube, 10, digest,
                      dict.fromkeys(prompts, w1kp), version="2 (paper; calibration sha256 ab for dreamsim)",
                      backbones=("dreamsim=d@r",))
    wide, _, chosen, _ = tables.overall(Catalog(store))
    assert chosen == "awareness" and list(wide["model"]) == ["A", "B"]  # W1KP does not move the mean
    assert list(wide["win_rate"]) == [1.0, 0.0] and list(wide["variability" + tables.BESIDE]) == [0.25, 0.875]
    shown = display.display_win_rates(wide)
    assert list(shown["Variability (W1KP): w1kp (not in the mean)"]) == [0.25, 0.875]
    assert list(shown["Tracks"]) == [1, 1] and tables.win_rate_columns(wide) == ["awareness"]


# --- the intake, the Queue tab, the Hub ------------------------------------------------------------------------
def served_store(tmp_path: Path, folder: Path, lines: list[str] | None = None) -> tuple[Store, object]:
    from leaderboard.served_suite import open_served

    served = open_served(str(folder), tmp_path / "store" / "datasets", (lines if lines is not None else []).append)
    return Store(tmp_path / "store", suite=served.suite), served


def suite_submission(folder: Path, suite, target: Path, parts=("cube-1k", "cube-diversity"), **overrides) -> Path:
    """A suite submission of ``parts`` at ``target`` (its folder's parent gets the suite's datasets, which
    ``write_part`` reads)."""
    target.parent.mkdir(parents=True)
    (target.parent / "datasets").symlink_to(folder / "datasets")
    for part in parts:
        write_part(target, suite, part, **overrides)
    return target


def test_a_suite_submission_is_one_job_and_a_model_revision_is_refused_for_a_part_submitted_before(small_suite,
                                                                                                    tmp_path):
    folder, suite = small_suite
    lines = []
    store, _ = served_store(tmp_path, folder, lines)
    assert lines == [f"suite culturelens/suite v1: serving {p.dataset.repo} (part {p.name}) from "
                     f"{folder.resolve() / 'datasets' / p.dataset.repo.replace('/', '__')}"
                     for p in suite.parts if p.name in ("cube-1k", "cube-diversity")]
    revision = {"model": {"name": "Tiny Test Model", "id": "org/tiny", "revision": "r1", "type": "open"}}
    submission = suite_submission(folder, suite, tmp_path / "up" / "sub")
    for path in submission.glob("parts/*/manifest.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), **revision}))
    outcome = store.submit(submission, "ada")
    assert outcome.job is not None, outcome.report.text()
    assert outcome.job.dataset == "culturelens/cube-1k:cube_1k:test + culturelens/cube-diversity:diversity:test"
    assert SuiteLayout(store.submissions / outcome.job.id).is_validated
    assert validated_hash(store.submissions / outcome.job.id) == outcome.job.content_hash
    # The same model revision, CUBE-1K alone: refused, naming the suite submission that holds that part.
    prompts = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    from culturelens.testing.submissions import make_submission

    plain = make_submission(tmp_path / "plain", prompts, **revision)
    refused = store.submit(plain, "ada")
    assert refused.job is None and refused.report.errors == [
        f"org/tiny at revision r1 was already submitted for culturelens/cube-1k:cube_1k:test (submission "
        f"{outcome.job.id}, PENDING); its owner can re-run or delete it"]
    # The same content again is refused as identical, whatever the packing.
    again = store.submit(zip_folder(submission, tmp_path / "again.zip", wrapper="mine/"), "ada")
    assert again.job is None and again.report.errors[0].startswith(f"identical to submission {outcome.job.id}")


def test_the_queue_tab_names_each_track_still_off_with_the_command_that_turns_it_on(small_suite, tmp_path):
    from leaderboard.ui.queue import QueueTab
    from leaderboard.ui.site import Site

    folder, _ = small_suite
    store, served = served_store(tmp_path, folder)
    off = served.tracks_off(store.datasets, {"expectations_judge": None})
    build = f"`culturelens suite build --out {folder} --only"
    weights = " (it needs the weights of {}: where the Hub cannot be reached, add `--backbones FILE` naming local " \
              "copies)"  # an asset the build embeds with a backbone
    clip, siglip = weights.format("clip-vit-b-32"), weights.format("msiglip-so400m")
    assert off == {"variability": f"no w1kp-calibration: {build} w1kp-calibration`, then restart",
                   "relevance": f"no relevance-kb: {build} relevance-kb`, then restart{siglip}",
                   "diversity": f"no artifact-index: {build} artifact-index`, then restart{clip}",
                   "iconicity": f"no iconic-references: {build} iconic-references`, then restart{clip}",
                   "expectations": f"no culturalframes: {build} culturalframes`, then restart"}
    # An asset the operator gives turns its track on; expectations then needs its judge, a choice of the operator's.
    given = {"w1kp_calibration": "/models/cdf-xy.pt", "expectations_judge": None}
    assert "variability" not in served.tracks_off(store.datasets, given)
    text = "\n".join(QueueTab(Site(store, "ada", suite=served, metric_settings={})).status())
    assert "**Tracks on this server** (its suite, settings and workers), and what turns each on:" in text
    assert "- **Diversity (CUBE)** is off: no artifact-index: `culturelens suite build --out SUITE --only " \
           "artifact-index`, then restart" in text and str(folder) not in text  # the server's folder is not shown
    # Without a suite folder: the build, then serve with it.
    bare = Store(tmp_path / "bare")
    judge = {"expectations_judge": "Qwen/Qwen2.5-VL-7B-Instruct"}
    lines = QueueTab(Site(bare, "ada", metric_settings=judge)).track_lines()
    assert "- **Awareness (CUBE)** is off: no cube-1k: `culturelens suite build --out suite/ --only cube-1k`, then " \
           "`culturelens serve --suite suite/`" in lines
    assert "Expectations (CulturalFrames)** is off: no culturalframes:" in lines


def test_a_track_is_on_only_where_this_server_holds_its_asset_whatever_a_worker_says(small_suite, tmp_path):
    """A CPU server without the artifact index, and a worker that says it scores diversity with one: any client
    of the queue can say that (issue 40), so a track that needs a scoring asset is on only where this server holds
    the asset (its digest in the suite); a worker's word never turns on a part whose dataset the server does not
    serve (iconicity, expectations: this suite folder holds CUBE-1K and the diversity prompts only)."""
    from leaderboard.ui.queue import QueueTab
    from leaderboard.ui.site import Site

    folder, _ = small_suite
    store, served = served_store(tmp_path, folder)
    store.queue.set_worker("gpu-1", "idle", "ready")
    store.queue.set_worker_tracks("gpu-1", {"awareness": None, "diversity": None, "iconicity": None,
                                            "expectations": None, "relevance": None})
    tab = QueueTab(Site(store, "ada", suite=served, metric_settings={}))
    lines = dict(line.removeprefix("- **").split("** ", 1) for line in tab.track_lines(["gpu-1"]).splitlines()[1:])
    assert lines["Awareness (CUBE)"] == "is on"
    assert lines["Diversity (CUBE)"].startswith("is off: no artifact-index: ")
    assert lines["Relevance (CAIRE)"].startswith("is off: no relevance-kb: ")  # the server's command, then restart
    assert lines["Iconicity (CRT)"].startswith("is off: no iconic-references: `culturelens suite build")
    assert lines["Expectations (CulturalFrames)"].startswith("is off: no culturalframes: ")
    # Without that worker, the server's own word: diversity is off for want of the artifact index.
    unheard = dict(line.removeprefix("- **").split("** ", 1) for line in tab.track_lines([]).splitlines()[1:])
    assert unheard["Diversity (CUBE)"].startswith("is off: no artifact-index: ")
    assert unheard["Awareness (CUBE)"] == "waits for a worker"


def test_a_suite_submission_on_a_hub_dataset_is_fetched_part_by_part(small_suite, tmp_path):
    from benchmark.submission import Limits
    from leaderboard import hub_submission

    folder, suite = small_suite
    submission = suite_submission(folder, suite, tmp_path / "up" / "sub")
    (submission / "README.md").write_text("a card")
    (submission / "parts" / "cube-1k" / "notes.txt").write_text("not a submission file")
    repo = LocalRepo(submission)
    fetched = hub_submission.fetch(repo, tmp_path / "staging", Limits())
    names = sorted(p.relative_to(fetched).as_posix() for p in fetched.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(submission).as_posix() for p in submission.rglob("*")
                           if p.is_file() and p.name not in ("README.md", "notes.txt"))
    assert "parts/cube-diversity/manifest.json" in names
    assert sum(name.endswith(".png") for name in names) == 6 * 2 + 15 * 3  # every image of both parts


def test_a_suite_submission_goes_through_the_requests_repo_whole(small_suite, tmp_path):
    from leaderboard import hub_sync

    folder, suite = small_suite
    store, _ = served_store(tmp_path, folder)
    outcome = store.submit(suite_submission(folder, suite, tmp_path / "up" / "sub"), "ada")
    repo = LocalRepo(tmp_path / "requests")
    hub_sync.push(store, "requests", repo)
    pushed = sorted(p.relative_to(repo.folder).as_posix() for p in repo.folder.rglob("*") if p.is_file())
    prefix = f"submissions/{outcome.job.id}"
    assert [p for p in pushed if p.startswith(prefix)] == [
        f"{prefix}/parts/{part}/{name}" for part in ("cube-1k", "cube-diversity")
        for name in ("data/images-00000-of-00001.parquet", "manifest.json")]
    fetched = hub_sync.download_submission(repo, outcome.job.id, tmp_path / "worker" / outcome.job.id)
    assert SuiteLayout(fetched).is_validated and validated_hash(fetched) == outcome.job.content_hash
    kept = pq.read_table(store.submissions / outcome.job.id / "parts" / "cube-1k" / "images.parquet")
    assert pq.read_table(fetched / "parts" / "cube-1k" / "images.parquet").equals(kept)
    # A store restored from the repo takes it back as it took the upload (validated part by part, same hash).
    fresh = Store(tmp_path / "fresh", suite=store.suite)
    for dataset in store.datasets.iterdir():
        (fresh.datasets / dataset.name).symlink_to(dataset.resolve())
    assert hub_sync.pull(fresh, "requests", repo)["added"] == 1
    assert fresh.queue.get(outcome.job.id).dataset == outcome.job.dataset
    assert validated_hash(fresh.submissions / outcome.job.id) == outcome.job.content_hash


def test_serve_passes_the_suite_and_its_metric_options_on_to_its_worker(tmp_path):
    from culturelens import cli
    from culturelens.verbs.service import local_worker

    (tmp_path / "suite").mkdir()
    args = cli.parser().parse_args(["serve", "--store", "/srv/store", "--relevance-judge", "probe",
                                    "--diversity-n", "4", "--tracks", "awareness", "diversity"])
    command, env = local_worker(args, None, str(tmp_path / "suite"))
    assert command[command.index("worker"):] == ["worker", "--store", "/srv/store", "--diversity-n", "4",
                                                 "--relevance-judge", "probe", "--tracks", "awareness", "diversity"]
    assert env["CULTURELENS_SUITE"] == str((tmp_path / "suite").resolve())

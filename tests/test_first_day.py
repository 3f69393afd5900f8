"""The first submitter's day (issue 41), on a served stand-in suite (a suite folder built by `culturelens suite build`
from tiny stand-ins of its sources: files given instead of the public ones, so an unpinned build): the first scored
model shows on the first view, unranked with its own scores until a second is scored; `validate` and `submit` of a
`generate --suite DIR` folder need no `--suite` on the store `serve --suite DIR` runs on, and `generate` prints the
command that follows; an unpinned build's rows say so and never rank with a pinned build's; the Submit tab's recipe
names only what this server accepts; every track the Queue tab calls off ends with what turns it on; no visitor page
shows a path of the operator's machine; intervals by the metric's declared kind, inside its range. Screenshots of
the first view with one model and with two, at 1366 and 390 px."""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark import ranking, results
from benchmark.aggregate import aggregate
from benchmark.harness import Scores
from benchmark.run_record import RunRecord
from benchmark.stats import wilson_interval
from benchmark.suite_assets import Assets
from benchmark.suite_scoring import of_build
from leaderboard import display, exports, protocol_names, tables
from leaderboard.catalog import Catalog
from leaderboard.served_suite import ServedSuite, open_served
from leaderboard.store import Store
from tests.helpers import SUITE_MODELS, culturelens, serving, suite_results

ONE = {"Alpha": SUITE_MODELS["Alpha"]}
TWO = {"Alpha": SUITE_MODELS["Alpha"], "Beta": SUITE_MODELS["Beta"]}


def served_store(root: Path, folder: Path) -> tuple[Store, ServedSuite]:
    """A store serving the suite folder ``folder``, as `serve --suite` opens it."""
    served = open_served(str(folder), root / "datasets", lambda line: None)
    return Store(root, suite=served.suite), served


def pinned_copy(folder: Path, target: Path) -> Path:
    """The suite folder as a build from the pinned sources writes it: every asset's record pinned."""
    shutil.copytree(folder, target, symlinks=True)
    record = json.loads((target / "suite.json").read_text())
    record["built"] = {asset: {**built, "pinned": True} for asset, built in record["built"].items()}
    (target / "suite.json").write_text(json.dumps({**record, "pinned": True}))
    return target


def scored_rows(store: Store, sid: str, model: str, track: str, metric: str, values: list[float],
                model_id: str = "org/model", backbones=("clip-vit-b-32=openai/clip@r1",),
                prompts: list[str] | None = None) -> None:
    """One scored suite part's headline rows, as the harness writes them (its protocol columns), through
    ``suite_scoring.of_build`` for the suite the store serves (an unpinned build's rows say so)."""
    part = store.suite.part_of_track(track)
    protocol = results.protocol_columns({
        "dataset": str(part.dataset), "dataset_revision": part.dataset.digest,
        "images_per_prompt": part.images_per_prompt, "missing_images": results.MISSING_AS_FAILURES,
        "metric_version": "1", "backbones": list(backbones)})
    common = {"provenance": "scored", "submission_id": sid, "model": model, "model_id": model_id, "track": track,
              "metric": metric, "metric_label": metric, "metric_version": "1", "higher_is_better": True,
              "range_low": 0.0, "range_high": 1.0, "dataset": str(part.dataset), "scored_at": "2026-01-01T00:00:00",
              **protocol}
    rows = [{**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(values)), "n": len(values)}]
    prompts = prompts or [f"p{i}" for i in range(len(values))]
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": 1} for p, v in zip(prompts, values)]
    run = RunRecord(submission_id=sid, protocols={metric: protocol["protocol"]})
    marked = of_build(Scores(pd.DataFrame(), rows, pd.DataFrame(), run), store.suite)
    results.write_folder(store.results / sid, [], marked.aggregates, [], marked.run)


def suite_model(store: Store, model: str, means: dict[str, float]) -> None:
    """A model scored on the suite's tracks ``means`` names: on each, its headline metric on every prompt of the
    part's dataset served here, ``mean`` -0.05 and +0.05 in turn (an odd last one at ``mean``: the mean is ``mean``)."""
    from benchmark import tracks as track_registry

    for track, mean in means.items():
        pin = store.suite.part_of_track(track).dataset
        prompts = list(store.prompts(pin.repo, pin.config).table.index)
        paired = len(prompts) - len(prompts) % 2  # an odd last prompt at the mean itself
        values = [mean + (0.05 if i % 2 else -0.05) if i < paired else mean for i in range(len(prompts))]
        scored_rows(store, f"{model.lower()}-{track}", model, track, track_registry.get(track).headline, values,
                    model_id=f"org/{model.lower()}", prompts=prompts)


# --- one model on the first view -------------------------------------------------------------------------------
def test_first_day_one_scored_model_appears_on_the_first_view_unranked_with_its_track_scores(small_suite, tmp_path):
    from leaderboard.ui.overview import OVERALL_VIEW, OverviewTab
    from leaderboard.ui.site import Site

    folder, _ = small_suite
    store, served = served_store(tmp_path / "store", folder)
    overview = OverviewTab(Site(store, "ada", suite=served, metric_settings={}))
    empty = overview.view(None, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)
    assert "No model has been scored on CultureLens suite v1, unpinned build yet" in empty["line"]
    assert "A model scored on the suite joins the ranking" in empty["line"]  # what fills it
    suite_model(store, "Alpha", {"awareness": 0.7, "diversity": 0.6})
    overview.catalog.refresh(force=True)  # the results landed now: the app sees them within REFRESH_SECONDS
    shown = overview.view(None, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)
    assert shown["track"]["value"] == OVERALL_VIEW
    frame = shown["frame"]
    assert list(frame["Model"]) == ["[Alpha](?tab=model&model=Alpha)"]
    assert frame["Rank"].isna().all() and frame["Overall win rate"].isna().all()
    # This test suite's CUBE-1K part has 6 prompts: too few to rank even once a second model comes (the line
    # above the table still says what ranks a lone model).
    assert list(frame["Rank range (95%)"]) == [f"not ranked: Awareness (CUBE): {ranking.TOO_FEW} (6; a ranking "
                                               f"needs {ranking.MIN_PROMPTS})"]
    # The README's track order, each labelled a win rate, the track's own score beside it (the mean of its prompts).
    assert [c for c in frame.columns if c.endswith((display.WIN_RATE, display.OWN_SCORE))][1:5] == [
        "Awareness (CUBE) win rate", "Awareness (CUBE) score", "Diversity (CUBE) win rate", "Diversity (CUBE) score"]
    assert frame["Awareness (CUBE) score"].tolist() == [0.7] and frame["Diversity (CUBE) score"].tolist() == [0.6]
    assert html.unescape(shown["line"]).startswith("**One model scored** on 2 tracks (Awareness (CUBE) and Diversity "
                                                   "(CUBE)), every track's rows under **CultureLens suite v1, "
                                                   "unpinned build**")
    assert tables.LONE in shown["line"]
    assert shown["protocol"]["choices"] == [("awareness + diversity (1 model)", "awareness + diversity")]
    page = overview.page(None, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)
    cells = page["table"]["value"]
    assert [html.unescape(c) for c in cells["Awareness (CUBE) win rate"]] == [
        "– · [score 0.700](?tab=overview&track=awareness)"]  # the track's own table one click away
    # A second model on the same tracks: both shown with their scores, neither ranked on 6 prompts.
    suite_model(store, "Beta", {"awareness": 0.5, "diversity": 0.4})
    overview.catalog.refresh(force=True)
    frame = overview.view(None, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)["frame"]
    assert frame["Overall win rate"].isna().all() and frame["Rank"].isna().all()
    assert frame["Rank range (95%)"].str.contains(ranking.TOO_FEW).all()
    assert frame["Awareness (CUBE) win rate"].isna().all()
    assert list(frame["Awareness (CUBE) score"]) == [0.7, 0.5]


def test_first_day_a_part_of_too_few_prompts_shows_its_values_and_no_order(small_suite, tmp_path):
    """Six prompts, three models: Beta 0.001 below Alpha on one prompt, Gamma 0.5 below on every one. Under rule 1
    Alpha and Beta were tied by a paired interval at ranks 1-2 and Gamma ranked 3 with no range at all; six
    prompts cannot tell 3 models apart at 95% over their 3 pairs (a sign test's best p-value, 1/64, is above
    0.05 / 6), so nothing is ranked: the values are shown, best first, each saying why it has no rank."""
    from leaderboard.ui.overview import OVERALL_VIEW, OverviewTab
    from leaderboard.ui.site import Site

    store, served = served_store(tmp_path / "store", small_suite[0])
    pin = store.suite.part_of_track("awareness").dataset
    prompts = list(store.prompts(pin.repo, pin.config).table.index)
    assert len(prompts) == 6 < ranking.MIN_PROMPTS
    alpha = [0.6, 0.7, 0.5, 0.6, 0.7, 0.5]  # mean 0.6
    beta = alpha[:5] + [0.499]
    gamma = [0.1] * 6
    for sid, model, values in (("a", "Alpha", alpha), ("b", "Beta", beta), ("c", "Gamma", gamma)):
        scored_rows(store, sid, model, "awareness", "clip_score", values, model_id=f"org/{sid}", prompts=prompts)
    cat = Catalog(store)
    rows, note = tables.ranked(cat, "awareness", "clip_score")
    assert list(rows["model"]) == ["Alpha", "Beta", "Gamma"] and rows["rank"].isna().all()
    assert list(rows["value"]) == pytest.approx([0.6, 3.599 / 6, 0.1])
    assert rows["rank_low"].isna().all() and rows["tie_group"].isna().all()
    assert (rows["not_ranked"] == f"{ranking.TOO_FEW} (6; a ranking needs {ranking.MIN_PROMPTS})").all()
    assert f"{ranking.TOO_FEW}: below {ranking.MIN_PROMPTS} prompts the values are shown, never an order" in note
    overview = OverviewTab(Site(store, "ada", suite=served, metric_settings={}))
    shown = overview.view("awareness", None, "", [], None, None, "", [], display.RANK_COLUMNS)["frame"]
    assert shown["Rank"].isna().all()
    assert (shown["Rank range (95%)"] == f"not ranked: {ranking.TOO_FEW} (6; a ranking needs 10)").all()
    # The overall has no order to average either: each model listed with its track's score, no win rate.
    wide, _, _, _ = tables.overall(cat)
    assert wide["win_rate"].isna().all() and wide["not_ranked"].str.contains(ranking.TOO_FEW).all()
    first = overview.view(None, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)
    assert first["track"]["value"] == OVERALL_VIEW and first["frame"]["Rank"].isna().all()
    # Exactly equal values (the same per-prompt values): a shared rank, and half a win each.
    assert list(ranking.track_win_rates(np.array([[6.099, 6.099, 1.0]]), True)[0]) == [0.75, 0.75, 0.0]


# --- the README's commands, in a fresh folder ------------------------------------------------------------------
@pytest.mark.slow
def test_first_day_the_readmes_commands_in_a_fresh_folder_end_with_two_models_scored(tmp_path, tiny_sd, tiny_clip,
                                                                                     tiny_dino):
    """The operator's and the model builder's commands as README.md writes them ("One suite, six tracks"), run in a
    fresh folder on the default store, offline, with the stand-ins: the public sources' (``world``), the tiny
    pipeline and backbones, each given by the flags the README names for a local model and local weights. The
    suite's seeds are cut to a test's (``with_seeds``: 83 images a model, v1's 19,773). Nothing an earlier command
    left is in the way: the builder's generate, run before any suite exists, writes nothing."""
    from gradio_client import Client

    from tests.helpers import readme_commands
    from tests.suite_stand_ins import TEST_SEEDS, with_seeds, write_backbones
    from tests.test_public_sources import world

    build, _push, serve = readme_commands("### An operator: one build, one push, one serve")
    generate, submit = readme_commands("### A model builder: one generate, one submit")
    home = tmp_path / "fresh"
    home.mkdir()
    backbones = write_backbones(tmp_path, tiny_clip, tiny_dino)
    local_model = ["--model", tiny_sd, "--width", "64", "--height", "64", "--steps", "2", "--device", "cpu"]
    one_thread = {"OMP_NUM_THREADS": "1"}  # what generate's hint says on a busy CPU

    # Before any suite: the builder's generate names what to do, and writes nothing.
    early = culturelens(*generate[1:], *local_model, cwd=home, env=one_thread)
    assert early.returncode == 2 and "cannot generate parts iconic-references, culturalframes" in early.stderr
    assert "`culturelens suite build --out suite/`" in early.stderr and "Nothing was written." in early.stderr
    assert list(home.iterdir()) == []

    # The operator: the suite from (the stand-in of) the public sources, with local weights, then served.
    with world(tmp_path / "world", tiny_dino) as sources:
        online = {**sources.env, "HF_HUB_OFFLINE": "", "HF_DATASETS_OFFLINE": ""}
        built = culturelens(*build[1:], "--backbones", backbones, "--device", "cpu", cwd=home,
                            env={**online, **one_thread}, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    with_seeds(home / "suite", TEST_SEEDS)
    with serving(None, tmp_path / "serve.log", *serve[2:], "--backbones", backbones, "--diversity-n", "4",
                 cwd=home, env=one_thread) as url:
        # The builder: the README's generate on the store `serve` runs on, then the submit it prints.
        made = culturelens(*generate[1:], *local_model, cwd=home, env=one_thread, timeout=900)
        assert made.returncode == 0, made.stderr[-3000:]
        assert made.stdout.splitlines()[-1] == f"next: {shlex.join(submit[:3])} --store .culturelens --wait"
        sent = culturelens(*submit[1:], cwd=home, timeout=900)  # the README's own command: the default store
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert "waiting until a worker of the store .culturelens has scored" in sent.stdout
        assert re.search(r": FINISHED: ", sent.stdout.splitlines()[-1]), sent.stdout
        # A second model: another pipeline folder (its own id), its own images (one more step).
        second = shutil.copytree(tiny_sd, tmp_path / "second-sd")
        out = "subs/second"
        again = [*generate[1:generate.index("--out") + 1], out, "--model", second, "--model-name", "Second",
                 *local_model[2:]]
        again[again.index("--steps") + 1] = "3"
        made = culturelens(*again, cwd=home, env=one_thread, timeout=900)
        assert made.returncode == 0, made.stderr[-3000:]
        printed = shlex.split(made.stdout.splitlines()[-1].removeprefix("next: "))
        sent = culturelens(*printed[1:], cwd=home, timeout=900)  # the printed command, as the user pastes it
        assert sent.returncode == 0, sent.stdout + sent.stderr
        rows = pd.DataFrame(Client(url, verbose=False).predict(None, api_name="/overall"))
    # Both models in the overall, each with its tracks' headline values; the stand-in suite's 6 CUBE-1K prompts and
    # 4 references are too few to rank (rank rule 2, ranking.MIN_PROMPTS): no win rate nor rank, and each row says so.
    means = rows[rows["metric"] == "mean_win_rate"].set_index("model")
    assert set(means.index) == {"SDXL base 1.0", "Second"}, rows
    assert means["rank"].isna().all() and means["not_ranked"].str.contains(ranking.TOO_FEW).all()
    headlines = rows[(rows["metric"] == "clip_score") & (rows["track"] == "awareness")].set_index("model")
    assert set(headlines.index) == {"SDXL base 1.0", "Second"} and headlines["value"].notna().all()


# --- validate, submit and generate know the suite the store serves ---------------------------------------------
@pytest.mark.slow
def test_first_day_validate_and_submit_of_a_generated_folder_need_no_suite_where_the_store_serves_it(
        tiny_suite, suite_generated, tmp_path, monkeypatch):
    from culturelens.verbs.submissions import next_command

    folder, _, _ = tiny_suite
    generated, made = suite_generated
    # generate ended with the exact next command: the default store serves no suite, so it names the folder, and
    # the store it read.
    assert made.stdout.splitlines()[-1] == f"next: culturelens submit {generated} --store .culturelens --suite " \
                                           f"{folder} --wait"
    store_root = tmp_path / "store"
    before = culturelens("validate", generated, "--store", tmp_path / "unserved")  # a store no serve ran on
    assert before.returncode == 1 and before.stdout.startswith("REJECTED")  # a store serving no suite: the default
    with serving(store_root, tmp_path / "serve.log", "--suite", folder, "--no-worker"):
        checked = culturelens("validate", generated, "--store", store_root)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        submitted = culturelens("submit", generated, "--store", store_root)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert re.search(r"queued as \S+", submitted.stdout)
    # generate on this store names no --suite: the store serves that very folder.
    monkeypatch.setenv("CULTURELENS_STORE", str(store_root))
    assert next_command(argparse.Namespace(out=generated, suite=str(folder), store=None)) == \
        f"culturelens submit {generated} --store {store_root} --wait"


# --- an unpinned build -----------------------------------------------------------------------------------------
def test_first_day_an_unpinned_builds_rows_are_labelled_and_never_ranked_with_pinned_ones(small_suite, tmp_path):
    folder, _ = small_suite
    assert json.loads((folder / "suite.json").read_text())["pinned"] is False  # given files: not the pinned sources
    unpinned = Assets(folder)
    assert unpinned.suite.name == "CultureLens suite v1, unpinned build"
    pinned = Assets(pinned_copy(folder, tmp_path / "pinned"))
    assert pinned.suite.pinned and pinned.suite.name == "CultureLens suite v1"
    # Two stores on the same prompt rows: one serving the unpinned build, one the pinned.
    loose, _ = served_store(tmp_path / "loose", folder)
    tight, _ = served_store(tmp_path / "tight", pinned.folder)
    values = [0.2, 0.4, 0.6, 0.8, 0.5, 0.3]
    scored_rows(loose, "u1", "Unpinned Model", "awareness", "clip_score", values)
    scored_rows(tight, "p1", "Pinned Model", "awareness", "clip_score", values)
    for source in ("u1", "p1"):  # both rows in one store, as when one store served both builds in turn
        shutil.copytree((loose if source == "u1" else tight).results / source, loose.results.parent / "both" / source)
    for store, suite_name, own in ((loose, "CultureLens suite v1, unpinned build", "Unpinned Model"),
                                   (tight, "CultureLens suite v1", "Pinned Model")):
        both = Store(store.root, suite=store.suite)
        for source in ("u1", "p1"):
            if not (both.results / source).exists():
                shutil.copytree(loose.results.parent / "both" / source, both.results / source)
        cat = Catalog(both)
        table = tables.protocols(cat, "awareness", "clip_score")
        assert len(table) == 2 and table["suite"].sum() == 1  # two protocols: the builds never share one
        names = protocol_names.protocol_names("awareness", table, both.suite)
        assert names[table.loc[table["suite"], "protocol_id"].iloc[0]] == suite_name
        wide, _, _, _ = tables.overall(cat)
        assert list(wide["model"]) == [own]  # the overall takes the served build's rows only
        ranked, _ = tables.ranked(cat, "awareness", "clip_score")
        assert list(ranked.loc[~ranked["beside"], "model"]) == [own]


# --- the Submit tab's recipe, the Queue tab's lines ------------------------------------------------------------
def test_first_day_the_submit_recipe_on_a_fresh_store_names_only_parts_the_server_accepts(small_suite, tmp_path,
                                                                                         tiny_upstream):
    from leaderboard.suite_view import submit_guide
    from tests.helpers import tiny_cube

    fresh = Store(tmp_path / "fresh")  # make run's first store: the package's suite, CUBE-1K built
    tiny_cube(fresh.datasets, tiny_upstream)
    steps, demo = submit_guide(ServedSuite(), fresh.datasets, None)
    assert "<code>CultureLens suite v1</code>" in steps
    assert "this server accepts its part `cube-1k` only" in steps
    assert "culturelens generate --suite --parts cube-1k --preset sdxl --out subs/my-model" in steps
    table = steps.split("| part |")[1].split("\n\n")[0]
    assert "`cube-1k`" in table and not any(f"`{p}`" in table for p in ("cube-diversity", "iconic-references",
                                                                      "culturalframes"))
    assert "19,773" not in steps and "cube_1k_demo" in demo
    # A suite folder served: its name, the parts it serves, and no path of the server's.
    store, served = served_store(tmp_path / "store", small_suite[0])
    steps, _ = submit_guide(served, store.datasets, None)
    assert "CultureLens suite v1, unpinned build" in html.unescape(steps) and "--suite SUITE_DIR --parts cube-1k cube-diversity" \
        in steps and str(small_suite[0]) not in steps and str(tmp_path) not in steps


def test_first_day_every_off_line_of_the_queue_tab_ends_with_what_turns_it_on(small_suite, tmp_path):
    from benchmark import tracks as track_registry
    from leaderboard.ui.queue import QueueTab, turn_on
    from leaderboard.ui.site import Site

    for store, served in ((Store(tmp_path / "fresh"), ServedSuite()), served_store(tmp_path / "store",
                                                                                    small_suite[0])):
        shown, _ = QueueTab(Site(store, "ada", suite=served, metric_settings={})).status()
        lines = html.unescape(shown).splitlines()
        off = [line for line in lines if " is off: " in line]
        assert off and all(re.search(r"`culturelens [^`]+`(, then `culturelens serve[^`]*`| \(the headline|, then "
                                     r"restart)", line) for line in off), off
        no_worker = [line for line in lines if line.startswith("**No worker")]
        assert no_worker == ["**No worker is running right now**: new submissions wait as PENDING until one starts: "
                             "`culturelens worker --store DIR`."]  # one instruction, the one that starts a worker
    # A track a worker could not score (a judge it cannot load) ends with the setting that turns it on.
    said = turn_on(track_registry.get("relevance"))
    assert said.startswith("to turn it on, restart `culturelens serve` with `--relevance-kb ...` "
                           "(CULTURELENS_RELEVANCE_KB), `--relevance-judge ...`")
    assert "`CULTURELENS_BACKBONES=FILE`" in turn_on(track_registry.get("awareness"))


# --- no path of the operator's machine -------------------------------------------------------------------------
def test_first_day_no_visitor_page_contains_the_stores_or_the_sources_absolute_paths(small_suite, tmp_path):
    from leaderboard.ui.about import about_markdown
    from leaderboard.ui.overview import OverviewTab
    from leaderboard.ui.queue import QueueTab
    from leaderboard.ui.site import Site

    folder, _ = small_suite
    store, served = served_store(tmp_path / "store", folder)
    weights = tmp_path / "weights" / "clip"
    for i, model in enumerate(("Local One", "Local Two")):
        scored_rows(store, f"s{i}", model, "awareness", "clip_score", [0.1 * (i + 1)] * 3 + [0.5, 0.6, 0.7],
                    model_id=str(tmp_path / "models" / model.replace(" ", "-")),
                    backbones=(f"clip-vit-b-32={weights}@sha256-0123",))
    site = Site(store, "ada", suite=served, metric_settings={})
    overview = OverviewTab(site)
    pages = [about_markdown(store), *QueueTab(site).status()]
    for track in (None, "overall", "awareness", "papers"):
        shown = overview.view(track, None, "", [], None, None, "", [], display.RANK_COLUMNS)
        pages += [shown["line"], shown["details"], shown["frame"].to_csv()]
    pages.append(exports.ranking(Catalog(store), "awareness", "clip_score").to_csv())
    text = "\n".join(map(str, pages))
    for path in (store.root, folder, tmp_path, weights):
        assert str(path) not in text, path
    assert "clip (local folder)@sha256-0123" in text  # the backbone by name and digest


# --- intervals by the metric's kind, inside its range ----------------------------------------------------------
def test_first_day_an_all_zero_continuous_metric_gets_no_wilson_interval_and_no_interval_leaves_its_range():
    from benchmark.metrics.alignment import ClipScore
    from benchmark.metrics.awareness import ArtifactRecognition

    clip = ClipScore("clip-vit-b-32").info
    artifact = ArtifactRecognition("clip-vit-b-32").info
    assert (clip.kind, artifact.kind) == ("continuous", "rate")
    zeros = pd.DataFrame({"track": "awareness", "prompt_id": [f"p{i}" for i in range(6)], "value": 0.0})
    rows = aggregate(pd.concat([zeros.assign(metric="clip_score"), zeros.assign(metric="artifact_top1")]),
                     slices=(), ranges={"clip_score": (0.0, 2.5), "artifact_top1": (0.0, 1.0)},
                     kinds={"clip_score": clip.kind, "artifact_top1": artifact.kind})
    overall = {r["metric"]: (r["ci_low"], r["ci_high"]) for r in rows if r["slice"] == "overall"}
    # No spread: nothing but the range bounds the mean, at its floor below and not at all above; never a rate's
    # interval (0 of 6 events: (0, 0.4832)).
    assert overall["clip_score"] == (0.0, math.inf)
    assert overall["artifact_top1"] == pytest.approx(wilson_interval(0, 6))
    # A skewed score near its floor: the percentile-t alone reaches below 0; the declared range holds it.
    near_floor = pd.DataFrame({"v": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01, 0.35]})
    rule = ranking.Rule(kind="continuous", low=0.0, high=2.5)
    ranked = ranking.rank([near_floor], rule, intervals=True)
    low, high = ranked.rows.loc["v", ["ci_low", "ci_high"]]
    # Above, 0.8^10 = 11% of the resamples draw only zeros (no spread): the 10 prompts cannot bound the mean there,
    # and the page says so rather than show the range's end, 2.5.
    assert low == 0.0 and high == math.inf
    assert display.interval_text(low, high, 10) == "[0.000, not bounded by 10 prompts]"
    open_rule = ranking.Rule(kind="continuous")
    assert ranking.rank([near_floor], open_rule).rows.loc["v", "ci_low"] < 0  # what the range prevents
    # A difference of two models' scores stays within plus or minus the range's span.
    diff = ranking.Rule(kind="difference", low=0.0, high=1.0)
    values = pd.DataFrame({"d": [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]})
    low, high = ranking.rank([values], diff).rows.loc["d", ["ci_low", "ci_high"]]
    assert -1.0 <= low <= high <= 1.0


# --- wording a visitor reads ----------------------------------------------------------------------------------
def test_first_day_wording_variability_has_no_direction_in_its_own_table_as_in_the_overall():
    from leaderboard.ui import notes

    assert notes.direction(False, directed=False) == (
        "ordered lower first: neither end is better, no direction to win on")
    assert notes.direction(True) == "higher is better" and notes.direction(False) == "lower is better"


def test_first_day_wording_protocol_details_balance_their_parentheses_and_show_what_differs():
    from benchmark import tracks as track_registry
    from benchmark.suite import SUITE_V1

    def balanced(text: str) -> bool:
        depth = 0
        for char in text:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth < 0:
                return False
        return depth == 0

    # A track's version is a prefix ("2 (paper; calibration"): shown as one, its parenthesis closed.
    variability = track_registry.get("variability").protocol.describe()
    assert "metric version 2 (paper; calibration ...) with its settings" in variability and balanced(variability)
    expectations = track_registry.get("expectations").protocol.describe()
    assert "metric version 2 (judge ...) with its settings" in expectations and balanced(expectations)
    # A row of the suite's prompts scored under another metric version: the line says which, beside the track's.
    fields = {"dataset": "culturelens/culturalframes:prompts:test", "images_per_prompt": 1,
              "missing_images": results.MISSING_AS_FAILURES, "backbones": [],
              "metric_version": "3 (judge Qwen/Qwen2.5-VL-7B-Instruct@abc123, rubric 3)"}
    said = protocol_names.difference("expectations", results.protocol_columns(fields)["protocol"], SUITE_V1)
    assert said.endswith("not the track's settings (metric version 3 (judge Qwen/Qwen2.5-VL-7B-Instruct@abc123, "
                         "rubric 3), where the track's is 2 (judge ...)).") and balanced(said)
    # Another backbone: named beside the track's.
    w1kp = {"dataset": "x", "images_per_prompt": 10, "backbones": ["clip-vit-b-32=openai/clip@r1"],
            "metric_version": "2 (paper; calibration sha256 ab for dreamsim)"}
    said = protocol_names.difference("variability", results.protocol_columns(w1kp)["protocol"], SUITE_V1)
    assert "backbones clip-vit-b-32, where the track's are dreamsim" in said and balanced(said)
    described = tables.describe_protocol(results.protocol_columns(w1kp)["protocol"])
    assert "metric version 2 (paper; calibration sha256 ab for dreamsim); backbones" in described
    assert balanced(described)


def test_first_day_wording_a_verdict_gives_one_line_per_wrong_prompt_with_its_seeds(tmp_path, tiny_upstream):
    from culturelens.testing.submissions import make_submission
    from tests.helpers import serving_tiny_cube

    store = serving_tiny_cube(Store(tmp_path / "store", attempt_quota=10**6), tiny_upstream)
    prompt_ids = list(store.prompts("culturelens/cube-1k", "cube_1k").table.index)
    folder = make_submission(tmp_path / "sub", prompt_ids, seeds=range(20))
    wrong = prompt_ids[0]  # its 20 images under a mistyped prompt id: one wrong prompt, 20 seeds
    (folder / "images" / wrong).rename(folder / "images" / "not-a-prompt")
    report = store.submit(folder, "alice").report
    assert not report.ok
    stranger = [e for e in report.errors if "'not-a-prompt'" in e]
    assert stranger == [("images/not-a-prompt/0.png and 19 more images of prompt id 'not-a-prompt' (seeds 0-19): "
                         "prompt id 'not-a-prompt' is not in culturelens/cube-1k (cube_1k, test)")]
    absent = [e for e in report.errors if "no image for prompt" in e]
    assert absent == [(f"images/{wrong}/*: no image for prompt {wrong} seeds 0-19, and manifest.missing does not "
                       "list them")]
    # Counted per image all the same: 20 missing, 20 of an unknown prompt.
    assert report.summary == (f"REJECTED: answered {len(prompt_ids) - 1} of {len(prompt_ids)} prompts; 20 images "
                              "missing; 20 other problems")


# --- the first view in a browser: one model, then two ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.browser
def test_first_day_screenshots_of_the_first_view_with_one_model_and_with_two(small_suite, tmp_path):
    from tests.browser import LAPTOP, PHONE, chromium, open_page, screenshot, scrolls_sideways, table

    folder, _ = small_suite
    store, _ = served_store(tmp_path / "store", folder)
    suite_model(store, "Alpha", {"awareness": 0.7, "diversity": 0.6})
    with chromium() as browser:
        for models, second in ((1, None), (2, ("Beta", {"awareness": 0.5, "diversity": 0.4}))):
            if second:
                suite_model(store, *second)
            with serving(store.root, tmp_path / f"serve-{models}.log", "--suite", folder, "--no-worker") as url:
                for size, width in ((LAPTOP, 1366), (PHONE, 390)):
                    shows = "One model scored" if models == 1 else "Mean win rate"
                    page = open_page(browser, url, size, shows=shows)
                    rows = table(page)
                    assert [row["Model"].split(" · ")[0] for row in rows] == ["Alpha", "Beta"][:models]
                    # This suite's 6 CUBE-1K prompts are too few to rank: each model says so in a few words (the
                    # note above says why), with its track scores and no win rate, one model or two.
                    assert [row["Model"] for row in rows] == [f"{m} · {ranking.TOO_FEW}" for m in ("Alpha", "Beta")][
                        :models]
                    assert {row["Rank"] for row in rows} == {"–"} and {row["Overall win rate"] for row in rows} == {"–"}
                    assert [row["Awareness (CUBE) win rate"] for row in rows] == ["– · score 0.700", "– · score 0.500"][
                        :models]
                    if models == 1:
                        assert tables.LONE in page.inner_text("body")  # what ranks a lone model, in the line above
                    if width == 1366:
                        assert scrolls_sideways(page) == []  # every track's column in sight on a laptop
                    screenshot(page, f"first-day-{models}-model{'s' if models > 1 else ''}-{width}")
                    page.close()

"""What each tab shows when it is opened, read through its views (no browser): the Overview's first view on a store
with the papers' rows only and with scored suite rows, the papers' cards, the compact tables, Compare's first
comparison and the Queue's line per track from a real worker's record."""

from __future__ import annotations

import html
from statistics import mean

import pandas as pd
import pytest

from benchmark import results
from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k
from benchmark.encoders.spec import load_registry
from benchmark.run_record import RunRecord
from benchmark.scoring_options import ScoringOptions
from leaderboard import display, paper_tables, reported, tables
from leaderboard.store import Store
from leaderboard.ui.compare import CompareTab
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from leaderboard.ui.widgets import compact_table
from leaderboard.worker import Worker
from tests.helpers import SUITE_WIN_RATES, serving_tiny_cube, suite_results

DEFAULT = ("", [], None, None, "", [], display.SHOWN_COLUMNS, None)  # the Overview's controls as a page opens


def _demo_row(store: Store) -> None:
    """One scored CUBE-1K demo submission: a row under another protocol than the suite's."""
    protocol = results.protocol_columns({"dataset": f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG_DEMO}:test",
                                         "images_per_prompt": 1, "metric_version": "1", "backbones": []})
    row = {"provenance": "scored", "submission_id": "sub-demo", "model": "Demo", "track": "awareness",
           "metric": "clip_score", "slice": "overall", "slice_value": "all", "value": 0.5, "n": 72,
           "higher_is_better": True, **protocol}
    results.write_folder(store.results / "sub-demo", [], [row], [], RunRecord(submission_id="sub-demo"))


def test_the_overview_opens_on_the_papers_tables_until_suite_rows_exist(tmp_path):
    store = Store(tmp_path / "store")
    store.seed_reported()
    overview = OverviewTab(Site(store, "ada"))
    track, _, shown, note, *_ = overview.overview(None, None, *DEFAULT)
    assert track["value"] == "papers" and note.startswith("**No model has been scored on CultureLens suite v1 yet.**")
    assert list(dict.fromkeys(shown["Track"])) == ["Awareness (CUBE)", "Diversity (CUBE)", "Iconicity (CRT)",
                                                   "Expectations (CulturalFrames)"]
    _demo_row(store)
    overview.catalog.refresh(force=True)
    track, _, _, note, *_ = overview.overview(None, None, *DEFAULT)
    assert track["value"] == "papers"  # a demo row is not the suite's: the papers' tables still come first
    assert "Scored here so far, under other protocols: **Awareness &#40;CUBE&#41;** under CUBE&#45;1K demo (1 model)" \
        in note
    suite_results(store)
    overview.catalog.refresh(force=True)
    track, _, shown, note, *_ = overview.overview(None, None, *DEFAULT)
    assert track["value"] == "overall" and "Ranked on every track's rows under **CultureLens suite v1**" in note
    assert dict(zip(shown["Model"].map(lambda m: html.unescape(m).split("]")[0].strip("[")),
                    shown["Overall win rate"])) == SUITE_WIN_RATES


def test_a_papers_card_ranks_its_models_on_the_papers_own_values(tmp_path):
    store = Store(tmp_path / "store")
    store.seed_reported()
    catalog = Site(store, "ada").catalog
    crt = paper_tables.paper_table(catalog, "iconicity")
    still_moving = {m: [r["value"] for r in reported.rows() if r["metric"] == "crt_from_means" and r["model"] == m]
                    for m in crt.table["Model"]}
    means = sorted(still_moving, key=lambda m: -mean(still_moving[m]))
    assert list(crt.table["Model"]) == means == ["Imagen 4", "SD3", "SDXL", "SD 2.1", "FLUX.1-schnell"]
    assert crt.table.loc[0, ["moving", "still"]].tolist() == [0.643, 0.448] and crt.source == "Table 1"
    cube = paper_tables.paper_table(catalog, "awareness")  # Table 3: 8 countries, more than a card shows side by side
    table3 = [r for r in reported.rows() if r["metric"] == "human_relevance_yes_pct"]
    assert cube.table.columns[-1] == "mean of 8 country values" and cube.table["Model"].tolist() == ["Imagen 2", "SDXL"]
    assert cube.table.iloc[:, -1].tolist() == pytest.approx(
        [mean(r["value"] for r in table3 if r["model"] == m) for m in ("Imagen 2", "SDXL")])
    assert paper_tables.paper_table(catalog, "variability") is None  # W1KP: no table copied here


def test_a_compact_table_puts_the_rank_with_its_range_and_the_score_with_its_interval():
    shown = pd.DataFrame({
        "Rank": pd.array([1, 2, None], dtype="Int64"), "Rank range (95%)": ["1–2", "2", "not ranked: other protocol"],
        "Tie group": ["1", "1", ""], "Model": ["A", "B", "C"], "Score": [0.5, 0.25, 0.125],
        "95% CI": ["[0.400, 0.600]", "", ""], "n": [10, 10, None], "Provenance": ["scored", "scored", "paper"]})
    compact = compact_table(shown, display.SHOWN_COLUMNS)
    assert list(compact.columns) == ["Rank", "Model", "Score", "Provenance"]
    assert compact["Rank"].tolist() == ["1 (1–2)", "2", "–"]
    assert compact["Model"].tolist() == ["A", "B", "C · not ranked: other protocol"]
    assert compact["Score"].tolist() == ["0.500 [0.400, 0.600]", "0.250", "0.125"]
    assert compact["Provenance"].str.contains(">scored</span>").tolist() == [True, True, False]
    assert list(compact_table(shown, [*display.SHOWN_COLUMNS, "n"]).columns) == ["Rank", "Model", "Score",
                                                                                "Provenance", "n"]


def _answers(store: Store, sid: str, prompts: list[str], scored_at: str) -> None:
    """A scored submission of these prompts (one image each), scored at ``scored_at``."""
    per_image = [{"submission_id": sid, "model": sid, "track": "awareness", "metric": "clip_score", "prompt_id": p,
                  "seed": 0, "image_path": f"images/{p}/0.png", "country": "Brazil", "concept": "cuisine",
                  "value": 0.5} for p in prompts]
    aggregate = [{"provenance": "scored", "submission_id": sid, "model": sid, "track": "awareness",
                  "metric": "clip_score", "slice": "overall", "slice_value": "all", "value": 0.5, "n": len(prompts),
                  "scored_at": scored_at, "dataset": "culturelens/cube-1k:cube_1k:test"}]
    results.write_folder(store.results / sid, per_image, aggregate, [], RunRecord(submission_id=sid))


def test_compare_opens_on_the_two_newest_scored_submissions_that_share_a_prompt(tmp_path):
    store = Store(tmp_path / "store")
    compare = CompareTab(Site(store, "ada"))
    assert compare.default() == ([], None)
    _answers(store, "oldest", ["p3", "p4"], "2026-01-01T00:00:00+00:00")
    _answers(store, "older", ["p5"], "2026-01-02T00:00:00+00:00")  # newer, but shares no prompt with the newest
    _answers(store, "newest", ["p2", "p3"], "2026-01-03T00:00:00+00:00")
    compare.catalog.refresh(force=True)
    assert compare.default() == (["newest", "oldest"], "p3")
    subs, prompt, *_ = compare.compare_link(None, None)  # the tab as a bare link opens it
    assert subs["value"] == ["newest", "oldest"] and prompt["value"] == "p3"
    subs, *_ = compare.compare_link("older", None)  # a link that names submissions keeps them
    assert subs["value"] == ["older"]


def _worker(store: Store, registry: dict) -> Worker:
    options = ScoringOptions(track_registry.metric_settings(), registry=registry)
    worker = Worker(store, options, *options.build_metrics(), lease_seconds=60)
    worker.load()
    return worker


@pytest.mark.usefixtures("one_torch_thread")
def test_the_queue_says_per_track_whether_it_is_on_or_off_and_what_turns_it_on(tmp_path, tiny_upstream,
                                                                              backbones_file):
    """The store serves CUBE-1K (the suite's cube-1k part) and none of the suite's other datasets or assets."""
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    queue = QueueTab(Site(store, "ada", metric_settings={}))
    assert "- **Awareness (CUBE)** waits for a worker" in queue.status()[0]  # no worker has spoken yet
    without_clip = {k: v for k, v in load_registry(str(backbones_file)).items() if k != "clip-vit-b-32"}
    blind = _worker(store, without_clip)  # every metric it has needs CLIP: it cannot score
    no_clip = blind.disabled["clip_score"]  # the reason every metric that needs CLIP was disabled
    assert no_clip.startswith("unknown backbone 'clip-vit-b-32'")
    assert blind.track_states() == {  # a track's own reason, or its headline's (w1kp), or its metrics'
        "awareness": f"{no_clip}\n{blind.disabled['hps_v2']}", "diversity": blind.disabled["diversity"],
        "iconicity": no_clip, "variability": blind.disabled["w1kp"], "relevance": blind.disabled["relevance"],
        "expectations": blind.disabled["expectations"]}
    shown, folded = (html.unescape(part) for part in queue.status())
    assert f"- worker <code>{blind.id}</code> cannot score: no metric can run" in shown
    assert ("- **Awareness (CUBE)** is off: unknown backbone 'clip-vit-b-32'; cannot fetch HPS_v2_compressed.pt of "
            "xswu/HPSv2 for backbone 'hpsv2'; to turn it on, restart `culturelens serve` with "
            "`CULTURELENS_BACKBONES=FILE` naming local weights (see Backbones in docs/scoring.md)\n") in shown
    # each reason's first clause (the rest is folded), then the one setting that turns the track on
    assert ("- **Variability (W1KP)** is off: no w1kp-calibration: `culturelens suite build --out suite/ --only "
            "w1kp-calibration`, then `culturelens serve --suite suite/`") in shown  # what the suite lacks comes first
    assert "no W1KP calibration" not in shown and "w1kp: no W1KP calibration: pass --w1kp-calibration" in folded
    _worker(store, load_registry(str(backbones_file)))
    shown, _ = queue.status()
    assert "- **Awareness (CUBE)** is on" in shown and "cannot score" not in shown  # a live worker scores it
    assert "- **Iconicity (CRT)** is off: no iconic-references:" in shown  # its metrics load; its prompts are absent

"""A track is one module: a toy track written to a folder named in CULTURELENS_TRACK_PATH, with no edit anywhere
else, shows its verb and settings in `culturelens --help`, is scored by the worker of `culturelens serve`, is
ranked, charted and explained by the app, and its paper's row, correlation and BibTeX are shown beside the others'."""

from __future__ import annotations

import html
import textwrap

import pandas as pd
import pytest

from benchmark import ranking, results, tracks
from benchmark.datasets import cube_1k
from benchmark.settings import TRACK_PATH
from leaderboard.store import Store
from tests.helpers import culturelens, serving, serving_tiny_cube
from culturelens.testing.submissions import make_submission

TOY = textwrap.dedent('''
    """Toy: the seed of each image, divided by --toy-divisor (a value known before scoring)."""
    import argparse

    from benchmark.settings import Setting
    from benchmark.track import (Chart, DetailPicture, Paper, PaperCorrelation, PaperModel, PaperRow, Papers, Track,
                                 Verb)


    def metrics(settings, backbones):
        from benchmark.metrics.base import Metric, MetricInfo, Need

        class SeedShare(Metric):
            info = MetricInfo("toy_seed", "Seed / divisor", "toy", "1", True, "seed", 0.0, 100.0, "toy",
                              (Need(settings.clip_backbone, "image"),))

            def per_image(self, inputs):
                return inputs.images["seed"].to_numpy() / settings.toy_divisor, [None] * len(inputs.images)

        return [SeedShare()]


    def hello(args):
        print(f"hello {args.name} from the toy track")
        return 0


    def _hello_options(parser):
        parser.add_argument("--name", required=True)
        parser.set_defaults(run=hello)


    def points(aggregates, curves):
        rows = aggregates[(aggregates["metric"] == "toy_seed") & (aggregates["slice"] == "overall")]
        return rows.assign(doubled=2 * rows["value"])[["model", "value", "doubled"]]


    PAPER = Paper("nobody2025toy", "Toy", ("Nobody, Ada",), "0000.00000", 2025)
    # The paper's Table 1 (raters' share of liked seeds, on a metric of its own) and its Table 2 correlation.
    PAPERS = Papers(
        PAPER, (PaperRow(PaperModel("Paper Model", "org/paper-model", "open"), "toy_liked",
                         "share of seeds raters liked (human)", True, 0.5, "Table 1"),),
        (PaperCorrelation("Toy metric", "overall", 0.25, 0.5, "Table 2"),))


    TRACK = Track(
        "toy", "Toy (seeds)", "toy_seed", "Which seeds did the model use?", "Toy method: **seed / divisor**.", PAPERS,
        settings=(Setting("toy_divisor", 10.0, "toy: what each seed is divided by", type=float),),
        metrics=metrics,
        verbs=(Verb("toy-hello", "say hello from the toy track", "culturelens toy-hello --name you", _hello_options),),
        charts=(Chart("scatter", "Toy: value against twice the value", "value", "doubled", "no toy rows yet",
                      points, metrics=("toy_seed",)),),
        pictures=(DetailPicture("toy picture", "toy_seed", lambda image, references, detail, value: None,
                                "toy images keep no detail", "Toy: each image's seed, drawn large"),))
''')


@pytest.fixture
def toy_track(tmp_path, monkeypatch):
    """The toy module in its own folder, named in CULTURELENS_TRACK_PATH for this process and its children."""
    folder = tmp_path / "more_tracks"
    folder.mkdir()
    (folder / "toy.py").write_text(TOY, encoding="utf-8")
    monkeypatch.setenv(TRACK_PATH.env, str(folder))  # the registry reads it at each call
    return folder


def test_the_registry_lists_the_six_tracks_in_order_and_knows_each_setting_once():
    assert list(tracks.all_tracks()) == ["awareness", "diversity", "iconicity", "variability", "relevance",
                                         "expectations"]
    names = [s.name for s in tracks.settings_declared()]
    assert len(names) == len(set(names)) and {"tau_patch", "w1kp_calibration", "relevance_k"} <= set(names)


def test_a_toy_track_module_appears_in_the_command_line(toy_track):
    listing = culturelens("--help")
    assert listing.returncode == 0 and "toy-hello" in listing.stdout
    assert "say hello from the toy track" in listing.stdout
    said = culturelens("toy-hello", "--name", "Ada")
    assert said.returncode == 0 and said.stdout == "hello Ada from the toy track\n"
    score_help = culturelens("score", "--help").stdout
    assert "toy (Toy (seeds)):" in score_help and "--toy-divisor" in score_help
    assert "relevance, expectations, toy (default: every track that can run)" in " ".join(score_help.split())


@pytest.mark.slow  # a live `culturelens serve` scores a submission
def test_a_toy_track_module_is_scored_ranked_charted_and_explained(toy_track, tmp_path, tiny_upstream,
                                                                     backbones_file):
    """Seeds 2 and 5 of every prompt: the toy metric is 0.2 and 0.5 per image, 0.35 per prompt and overall."""
    from gradio_client import Client

    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    submission = make_submission(tmp_path / "sub", prompt_ids, seeds=(2, 5), model_name="Toy Model")
    with serving(store.root, tmp_path / "serve.log", "--backbones", str(backbones_file)) as url:
        submitted = culturelens("submit", str(submission), "--store", str(store.root), "--wait", "--timeout", "300")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        client = Client(url, verbose=False)
        [row] = client.predict("toy", "toy_seed", api_name="/leaderboard")
        assert row["model"] == "Toy Model" and row["value"] == pytest.approx(0.35) and row["n"] == len(prompt_ids)
        # In its ranked table, on the protocol; the tiny dataset's 6 prompts are too few to rank (ranking.MIN_PROMPTS).
        assert row["rank"] is None and row["not_ranked"].startswith(ranking.TOO_FEW) and row["on_protocol"] is True
        out = client.predict("toy", "toy_seed", "overall", "all", "", api_name="/slices")
        chart = next(c for c in out if isinstance(c, dict) and c.get("columns") == ["model", "value", "doubled"])
        assert pd.DataFrame(chart["data"], columns=chart["columns"]).values.tolist() == [["Toy Model", 0.35, 0.7]]
        track_picker = client.predict("toy", "toy_seed", "", [], None, None, "", [], [], None,
                                     api_name="/overview")[0]
        assert ["Toy (seeds)", "toy"] in [list(c) for c in track_picker["choices"]]
        method = client.predict("toy", api_name="/method")
        assert method.startswith("### Toy (seeds)") and "Toy method: **seed / divisor**." in method


TOY_BIBTEX = """@article{nobody2025toy,
  title = {Toy},
  author = {Nobody, Ada},
  journal = {arXiv preprint arXiv:0000.00000},
  year = {2025}
}"""
TOY_CITATION = 'Nobody, "Toy", arXiv:0000.00000'


def test_a_toy_track_module_declares_its_paper_rows_correlations_and_bibtex(toy_track, tmp_path):
    """What the store seeds and the Metrics tab reads come from the toy module alone, beside the six tracks'."""
    store = Store(tmp_path / "store")
    seeded = store.seed_reported()
    rows = pd.read_parquet(store.reported)
    assert len(rows) == seeded == 230 + 1  # the six tracks' papers (tests/test_reported.py) and the toy's row
    [toy] = rows[rows["track"] == "toy"].to_dict("records")
    assert (toy["model"], toy["model_id"], toy["model_type"], toy["metric"], toy["value"]) == (
        "Paper Model", "org/paper-model", "open", "toy_liked", 0.5)
    assert (toy["provenance"], toy["citation"], toy["source_table"]) == ("reported", TOY_CITATION, "Table 1")
    assert results.protocol_fields(toy["protocol"]) == {  # the paper's protocol: ranked with no scored row
        "dataset": "as published in Nobody, arXiv:0000.00000", "images_per_prompt": None,
        "metric_version": "paper (Table 1)", "backbones": []}
    ranking = store.meta_evaluation()
    toy_ranking = ranking[ranking["metric"] == "Toy metric"]
    assert toy_ranking[["provenance", "criterion", "spearman", "ceiling", "source"]].values.tolist() == [
        ["reported", "overall", 0.25, 0.5, "Table 2"]]
    assert "VIEScore (GPT-4o)" in set(ranking["metric"])  # CulturalFrames' rows stay
    assert tracks.bibtex().endswith("\n\n" + TOY_BIBTEX) and tracks.bibtex().count("\n\n@") == 5  # the five papers and the toy's


@pytest.mark.slow  # a live `culturelens serve`
def test_a_toy_track_module_shows_its_paper_row_and_bibtex_in_the_app(toy_track, tmp_path):
    """The toy's paper row is ranked in its Overview table with its citation linked to arXiv; its BibTeX is on the
    Metrics tab and its reference on the About page; its picture's label names the Compare gallery."""
    from gradio_client import Client
    from markdown_it import MarkdownIt

    with serving(tmp_path / "store", tmp_path / "serve.log", "--no-worker") as url:
        client = Client(url, verbose=False)
        [row] = client.predict("toy", "toy_liked", api_name="/leaderboard")
        # Alone under its protocol, the paper's row is shown and not ranked yet (a rank of 1 among one compares nothing).
        assert (row["model"], row["provenance"], row["value"], row["rank"]) == ("Paper Model", "reported", 0.5, None)
        assert (row["citation"], row["source_table"], row["paper_url"]) == (
            TOY_CITATION, "Table 1", "https://arxiv.org/abs/0000.00000")
        table = client.predict("toy", "toy_liked", "", [], None, None, "", [], [], None, api_name="/overview")[2]
        [shown] = [dict(zip(table["headers"], r)) for r in table["data"]]
        assert MarkdownIt("commonmark").renderInline(shown["Source"]) == \
            '<a href="https://arxiv.org/abs/0000.00000">Nobody, arXiv:0000.00000</a>, Table 1'
        assert "Paper Model" in shown["Model"] and shown["Provenance"] == "paper"
        props = [c.get("props", {}) for c in client.config["components"]]
        [bibtex] = [p["value"] for p in props if "@article{" in str(p.get("value"))]
        assert bibtex.endswith("\n\n" + TOY_BIBTEX)
        pages = [MarkdownIt("commonmark").render(p["value"]) for p in props if isinstance(p.get("value"), str)]
        assert any(f"<li>toy: {html.escape(TOY_CITATION)}</li>" in page for page in pages)  # the About page's papers
        labels = [p.get("label") for p in props]
        assert "Visual reuse: reused patches outlined (generated | best reference) · Toy: each image's seed, drawn " \
               "large" in labels

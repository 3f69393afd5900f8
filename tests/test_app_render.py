"""User text in the app's Markdown: shown exactly as typed, never as links, images, emphasis, HTML or math."""

import html
import re

from markdown_it import MarkdownIt

from leaderboard.render import code, plain, spreadsheet_safe

HOSTILE = ["[click](http://evil) ![x](http://evil/x.png) <script>alert(1)</script> **bold** _it_",
           "https://evil.example/x", "www.evil.example", "mallory@evil.example", "<https://e.org>",
           "`code` ~~gone~~ | a | b |", "$$x^2$$ \\(y\\)", "&amp; &#60; &lt;", "cube_1k", "# heading", "1. item",
           "Ｆｕｌｌ-width ｓｕｓｈｉ 寿司 🍣"]


def _text(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


def test_user_text_renders_as_itself_under_commonmark():
    renderer = MarkdownIt("commonmark")  # an independent CommonMark implementation
    for text in HOSTILE:
        rendered = renderer.render(f"- model **{plain(text)}** and {code(text)}")
        tags = re.findall(r"<(/?[a-z0-9]+)", rendered)
        assert tags == ["ul", "li", "strong", "/strong", "code", "/code", "/li", "/ul"], (text, rendered)
        assert _text(rendered) == f"model {text} and {text}", (text, rendered)
    assert plain("plain model name 21") == "plain model name 21"
    assert plain("two\nlines") == "two lines"


def test_csv_cells_that_start_like_formulas_are_neutralised():
    import pyarrow as pa

    table = pa.table({"Model": ["=1+1", "+A1", "-cmd", "@SUM(A1)", "\tx", "\rx", "SDXL", "a=b", None],
                      "Note": pa.array(["ok"] * 8 + ["=x"], pa.large_string()),
                      "Score": [-0.5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, -1.0]})
    safe = spreadsheet_safe(table)
    assert safe["Model"].to_pylist() == ["'=1+1", "'+A1", "'-cmd", "'@SUM(A1)", "'\tx", "'\rx", "SDXL", "a=b", None]
    assert safe["Note"].to_pylist() == ["ok"] * 8 + ["'=x"]  # large strings (pandas' Arrow-backed text) too
    assert safe["Score"].to_pylist() == table["Score"].to_pylist()  # numbers, negative ones too, are left as numbers
    assert safe.schema == table.schema and table["Model"][0].as_py() == "=1+1"  # the caller's table is not modified


def test_reasons_and_log_excerpts_shown_to_visitors_do_not_reveal_server_folders(tmp_path):
    import sys

    from leaderboard.store import Store
    from leaderboard.ui.queue import QueueTab
    from leaderboard.ui.site import Site

    store = Store(tmp_path / "store")
    store.queue.add(id="s1", content_hash="sha256:1", owner="ada", model="m", model_id=None, model_revision=None,
                    dataset="culturelens/cube-1k:cube_1k:test")
    store.queue.claim("w", 60)
    library = f"{sys.prefix}/lib/site-packages/torch/nn/modules/module.py"
    store.queue.fail("s1", "w", f"the dataset is not available: no local copy in {store.root}/datasets/x__y",
                     f'Traceback:\n  File "{library}", line 1\nRuntimeError: out of memory')
    views = QueueTab(Site(store, "ada"))
    details, _ = views.details("s1")
    assert "no local copy in STORE/datasets/x__y" in html.unescape(details)  # the file named, the folder not
    assert 'File "<python>/lib/site-packages/torch/nn/modules/module.py"' in details
    assert str(store.root) not in details and sys.prefix not in details
    table = views.page()["table"]
    assert table.loc[0, "Details"].startswith("the dataset is not available: no local copy in STORE/datasets/")


def _symbols(text: str) -> list[str]:
    """Characters only an emoji or symbol font draws (Unicode category So: 📄 ⚙ ✅ ⏳), and emoji selectors."""
    import unicodedata

    return [ch for ch in text if unicodedata.category(ch) == "So" or ch == "\ufe0f"]


def test_the_datasets_snippet_and_about_page_name_the_store_not_the_server_folder(tmp_path, tiny_upstream):
    from benchmark.datasets import cube_1k
    from leaderboard.store import Store
    from leaderboard.ui.about import about_markdown
    from leaderboard.ui.datasets import DatasetBrowser
    from tests.helpers import serving_tiny_cube

    store = Store(tmp_path / "store")
    about = about_markdown(store)  # not built yet: the command to build it names the store, not its folder
    assert "--out STORE/datasets/culturelens__cube-1k" in about and str(store.root) not in about
    serving_tiny_cube(store, tiny_upstream)
    snippet = DatasetBrowser(store).view(cube_1k.HUB_REPO, cube_1k.CONFIG, None, None, "", "")[-1]
    assert f'load_dataset("{cube_1k.HUB_REPO}", "{cube_1k.CONFIG}", split="test")' in snippet
    assert 'load_dataset("STORE/datasets/culturelens__cube-1k", "cube_1k")' in snippet
    about = " ".join(about_markdown(store).split())  # as read: line breaks are spaces
    assert "built locally in `STORE/datasets/culturelens__cube-1k`" in about
    assert str(store.root) not in snippet + about and str(tmp_path) not in snippet + about


def test_markers_are_words_that_render_without_an_emoji_font(tmp_path):
    from leaderboard import display, render, tables
    from leaderboard.catalog import Catalog
    from leaderboard.store import Store

    store = Store(tmp_path / "store")
    store.seed_reported()
    cat = Catalog(store)
    ranked = display.display(tables.ranked(cat, "iconicity", "cra_reference", "kind", "still")[0])
    overall = display.display_win_rates(tables.overall(cat)[0])
    heatmap = tables.heatmap(cat, "iconicity", "crt_from_means", "kind")
    assert set(ranked["Provenance"]) == {"paper"}
    assert overall.empty  # no paper reports a track's headline on the overall slice (CulturalFrames: human_alignment)
    assert list(heatmap.index)[0] == "Imagen 4 (paper)"  # the best CRT of Table 1, marked by a word
    texts = [ranked.to_csv(), overall.to_csv(), heatmap.to_csv(), render.HEADER, render.badge("FAILED")]
    assert [_symbols(t) for t in texts] == [[]] * len(texts)
    assert ">paper</span>" in render.HEADER and ">scored</span>" in render.HEADER
    # Words a newcomer reads: the overall ranking's score is the overall win rate, its definition a footnote.
    assert "Overall win rate" in overall.columns and not any("HEIM" in c or "≈" in c for c in overall.columns)
    assert "HEIM" in render.WIN_RATE_FOOTNOTE
    assert render.slice_label("kind") == "still or moving"
    assert tables.slice_choices(cat, "awareness", "human_faithfulness") == [("country × concept", "country_concept")]


def test_an_empty_heatmap_says_why_in_its_place():
    import pandas as pd

    from leaderboard.render import heatmap_html

    assert heatmap_html(pd.DataFrame(), caption="x", empty="No model has a value <yet>.") == \
        "<p>No model has a value &lt;yet&gt;.</p>"


def test_method_pages_and_the_header_render_without_literal_backslashes():
    from benchmark import tracks
    from leaderboard import render

    renderer = MarkdownIt("commonmark")
    for page in [render.HEADER, render.WIN_RATE_FOOTNOTE, *(render.method_page(t) for t in tracks.all_tracks())]:
        assert "\\" not in _text(renderer.render(page)), page[:80]


def _rows(sid: str, model: str, track: str, metrics: dict[str, float], fields: dict, slice_=("overall", "all")):
    from benchmark import results

    protocol = results.protocol_columns(fields)
    return [{"provenance": "scored", "submission_id": sid, "model": model, "track": track, "metric": metric,
             "slice": slice_[0], "slice_value": slice_[1], "value": value, "n": 20, "higher_is_better": True,
             "metric_version": fields["metric_version"], **protocol} for metric, value in metrics.items()]


def test_charts_show_the_one_protocol_the_overview_ranks(tmp_path):
    """Two iconicity submissions, 10 images per title (the headline protocol) and 4, and two variability ones
    under two W1KP calibrations: the CRT scatter and the W1KP curves each show the headline protocol's model only."""
    from benchmark import results, tracks
    from benchmark.metrics.crt_protocol import VARIANTS
    from benchmark.run_record import RunRecord
    from leaderboard import protocol_names, tables
    from leaderboard.store import Store
    from leaderboard.ui.site import Site
    from leaderboard.ui.slices import SlicesTab

    store = Store(tmp_path / "store")
    crt = {"dataset": tracks.get("iconicity").protocol.dataset, "metric_version": VARIANTS["paper"].version,
           "backbones": [f"{VARIANTS['paper'].clip}=c@r", f"{VARIANTS['paper'].dino}=d@r"]}
    for sid, model, images in (("i10", "Ten", 10), ("i4", "Four", 4)):
        fields = {**crt, "images_per_prompt": images}
        rows = _rows(sid, model, "iconicity", {"cra_reference": 0.5, "vr": 0.25}, fields)
        rows += _rows(sid, model, "iconicity", {"crt_from_means": 0.375}, fields, ("kind", "still"))
        results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))
    for sid, model, sha in (("w1", "Calibrated", "ab"), ("w2", "Other calibration", "cd")):
        fields = {"dataset": "x", "images_per_prompt": 10, "backbones": ["dreamsim=d@r"],
                  "metric_version": f"2 (paper; calibration sha256 {sha} for dreamsim)"}
        curve = [{"submission_id": sid, "model": model, "metric": "w1kp", "prompt_id": None, "x": k, "value": 0.5,
                  "n": 20} for k in range(2, 6)]
        results.write_folder(store.results / sid, [], _rows(sid, model, "variability", {"w1kp": 0.5}, fields), curve,
                             RunRecord(submission_id=sid))
    views = SlicesTab(Site(store, "local"))
    bars, profile, scatter, curves, note = views.charts(tables.Filters())
    assert set(scatter["model"]) == {"Ten"}
    chosen = tables.pick_protocol(tables.chart_protocols(views.catalog, "variability"))
    assert len(set(curves["model"])) == 1 and set(curves["model"]) <= {"Calibrated", "Other calibration"}
    named = protocol_names.protocol_names("variability", tables.protocols(views.catalog, "variability", "w1kp"),
                                          store.suite)
    assert f"{named[chosen]} only, the protocol the Overview ranks" in note  # its name, not its id
    four = tables.protocols(views.catalog, "iconicity", "crt_from_means", "kind", "still")
    shown = tables.pick_protocol(tables.chart_protocols(views.catalog, "iconicity"))
    assert shown == four.loc[four["on_protocol"], "protocol_id"].iloc[0]


def test_the_about_page_and_the_metrics_tab_say_what_ranks_ties_and_rows_mean(tmp_path):
    import pandas as pd

    from benchmark.layout import META_EVAL
    from leaderboard.store import Store
    from leaderboard.ui.about import about_markdown
    from leaderboard.ui.metrics import METRICS_INTRO, agreement_table

    store = Store(tmp_path / "store")
    about = " ".join(about_markdown(store).split())  # as read: line breaks are spaces
    for words in ("Every number of a ranked row comes from one set of prompts: the protocol's",
                  "A prompt a model did not answer, refused or missing, counts in the ranking as the metric's worst "
                  "value", "never raises its rank", "refusal rate", "is listed below the ranking, not ranked",
                  "1 + the number of models significantly better on those prompts", "an exact sign test",
                  "two models at one rank never differ significantly", "Rule 1, before issue 49",
                  "With fewer than 10 prompts nothing is ranked", "\"too few prompts to rank\"",
                  "A **tie group** is the models sharing a rank", "\"not bounded by 10 prompts\"",
                  "\"mostly refused\"", "never ranked", "\"> k\"", "Variability (W1KP) is not part of it",
                  "Holm's method over all those tests at once"):
        assert words in about, words
    # Metrics: the scored rows (leave-one-rater-out agreement) first, the paper's rows (another definition) after,
    # never sorted among them, each row saying what it measures.
    (store.root / META_EVAL).mkdir()
    pd.DataFrame({"metric": ["mine", "weak"], "criterion": "alignment", "country": "all", "spearman": [0.9, 0.1],
                  "ci_low": [0.8, 0.0], "ci_high": [0.95, 0.2], "n": 100, "ceiling": 0.4, "rank": [1, 2]}).to_parquet(
        store.root / META_EVAL / "mine.parquet")
    table = agreement_table(store.meta_evaluation())
    alignment = table[table["criterion"] == "alignment"]
    assert list(alignment["provenance"])[:2] == ["scored", "scored"] and set(alignment["provenance"][2:]) == {"reported"}
    assert alignment["measures"].iloc[0].startswith("Spearman with the mean of the other raters")
    assert "with the mean of the other raters, each rater left out in turn" in METRICS_INTRO
    assert "never ordered among them" in METRICS_INTRO and "human mean" not in METRICS_INTRO

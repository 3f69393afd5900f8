"""A page per model (issue 52), as a visitor, a script and a model card get it from a real Gradio server: every
table's model name links to it, its ranks are the tables', its badge is an SVG whose rank moves when a better model
is scored, and an address that names no model answers a sentence.

The store holds the three suite models of ``tests.helpers.suite_results`` (Alpha beats Beta beats Gamma on every
prompt of every track but relevance, where Gamma beats Beta: overall ranks 1, 2, 3) and the papers' rows."""

from __future__ import annotations

import html
import io
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from urllib.parse import quote

import pandas as pd
import pytest
from PIL import Image

from benchmark import tracks as track_registry
from leaderboard import display
from leaderboard.store import Store
from tests.browser import LAPTOP, PHONE, chromium, layout_problems, open_page, query, screenshot, wait_for_text
from tests.helpers import SUITE_MODELS, launched, suite_results, until

LINK = re.compile(r"^\[(?P<text>.*)\]\((?P<address>[^)]*)\)$")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("model-page") / "store")
    suite_results(store)
    store.seed_reported()
    with launched(store, "ada") as url:
        from gradio_client import Client

        yield url, Client(url, verbose=False), store


def frame(value: dict) -> pd.DataFrame:
    return pd.DataFrame(value["data"], columns=value["headers"])


def model_page(client, model: str):
    """The ``/model_page`` API's picker, text, profile and downloads."""
    picker, text, profile, _, _, _, _, files, _ = client.predict(model, api_name="/model_page")
    return picker, html.unescape(text), frame(profile), files


def get(url: str) -> tuple[int, str, bytes]:
    """An HTTP GET as a model card's image does it: (status, content type, body)."""
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.headers["content-type"], answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_model_page_every_tables_model_name_links_to_it(served):
    url, client, _ = served
    shown = {}
    _, _, overall, *_ = client.predict("overall", None, "", [], None, None, "", [], display.SHOWN_COLUMNS, None,
                                       api_name="/overview")
    shown["overall"] = frame(overall)["Model"]
    for track in track_registry.all_tracks():
        _, _, table, *_ = client.predict(track, None, "", [], None, None, "", [], display.SHOWN_COLUMNS, None,
                                         api_name="/overview")
        shown[track] = frame(table)["Model"]
    _, _, papers, *_ = client.predict("papers", None, "", [], None, None, "", [], display.SHOWN_COLUMNS, None,
                                      api_name="/overview")
    shown["papers"] = frame(papers)["Model"]
    slices = client.predict("awareness", None, None, None, "", api_name="/slices")[4]
    shown["slices"] = frame(slices)["Model"]
    cells = [(where, cell) for where, column in shown.items() for cell in column]
    assert len(shown["overall"]) == 3 and len(shown["papers"]) > 10 and len(shown["slices"]) == 3
    for where, cell in cells:
        found = LINK.match(cell)
        assert found, f"{where}: {cell!r} is no link"
        name = html.unescape(found["text"])
        assert found["address"] == "?tab=model&model=" + quote(name, safe=""), (where, cell)
    # What each link opens: that model's page.
    for name in {html.unescape(LINK.match(cell)["text"]) for _, cell in cells if "(paper)" not in cell}:
        picker, text, _, _ = model_page(client, name)
        assert picker["value"] == name and text.startswith(f"## {name}")
    # A person clicks Beta's name in the overall table: its page (in a new browser tab, as Gradio opens a table's
    # links), at an address that names it.
    with chromium() as browser:
        for size in (LAPTOP, PHONE):
            table = open_page(browser, url + "?tab=overview&track=overall", size, shows="Gamma")
            with table.context.expect_page() as opened:
                table.locator(".cl-table a", has_text="Beta").first.click()
            page = opened.value
            page.wait_for_function("() => document.documentElement.dataset.painted === 'yes'", timeout=60_000)
            wait_for_text(page, "rank 2 of 3")
            assert query(page) == "tab=model&model=Beta" and layout_problems(page) == []
            page.wait_for_function("() => [...document.images].some(i => i.src.includes('badge.svg') && "
                                   "i.naturalWidth > 0)")
            screenshot(page, f"model-page-{size[0]}")


def test_model_page_ranks_equal_the_tables(served):
    _, client, _ = served
    overall = pd.DataFrame(client.predict(None, api_name="/overall"))
    means = overall[overall["metric"] == "mean_win_rate"].set_index("model")
    for model in SUITE_MODELS:
        _, text, profile, files = model_page(client, model)
        rank = int(means.at[model, "rank"])
        assert f"rank {rank} of 3" in text and rank == {"Alpha": 1, "Beta": 2, "Gamma": 3}[model]
        mine = profile.set_index("Track")
        for track in track_registry.all_tracks():
            title = track_registry.get(track).title
            _, _, table, *_ = client.predict(track, track_registry.get(track).headline, "", [], None, None, "", [],
                                             display.SHOWN_COLUMNS, None, api_name="/overview")
            row = frame(table)
            row = row[row["Model"].str.startswith(f"[{model}]")].iloc[0]
            assert mine.at[title, "Rank"] == row["Rank"], (model, track)
            assert mine.at[title, "Rank range (95%)"] == row["Rank range (95%)"], (model, track)
            assert mine.at[title, "Score"] == pytest.approx(row["Score"]), (model, track)
        # by hand (tests/helpers.py): relevance ranks Gamma above Beta, every other track ranks by the values
        assert mine.at["Relevance (CAIRE)", "Rank"] == {"Alpha": 1, "Beta": 3, "Gamma": 2}[model]
        assert mine.at["Awareness (CUBE)", "Score"] == pytest.approx(SUITE_MODELS[model]["awareness"])
        assert len(files) == 1 and files[0].endswith(f"culturelens-sub-{model.lower()}-per_image.parquet")


def test_model_page_badge_is_valid_svg_whose_rank_changes_when_a_better_model_is_scored(tmp_path):
    store = Store(tmp_path / "store")
    suite_results(store, prompts=20)  # 4 models' 6 pairs need more than 10 prompts to tell each pair apart
    with launched(store, "ada") as url:
        status, kind, body = get(url + "badge.svg?model=Beta")
        assert status == 200 and kind.startswith("image/svg+xml")
        badge = ET.fromstring(body)  # well-formed XML, an SVG document
        assert badge.tag == f"{SVG}svg" and badge.get("height") == "20"
        texts = [t.text for t in badge.iter(f"{SVG}text")]
        assert texts == ["CultureLens", "rank 2 of 3 · suite v1 · 2026-03-03"]
        assert badge.find(f"{SVG}title").text == ("Beta on the CultureLens leaderboard: rank 2 of 3 · suite v1 · "
                                                  "2026-03-03")
        # The badge by the model's Hub id too (the address a model card would rather name)
        assert get(url + "badge.svg?model=" + quote("org/beta", safe=""))[2] == body
        # A better model is scored: Beta's badge says rank 3 of 4 once the app has the results (it looks itself).
        suite_results(store, {"Zeta": {track: value + 1 for track, value in SUITE_MODELS["Alpha"].items()}}, 20)
        until(lambda: b"rank 3 of 4" in get(url + "badge.svg?model=Beta")[2], 120, "Beta's badge at rank 3 of 4")
        texts = [t.text for t in ET.fromstring(get(url + "badge.svg?model=Zeta")[2]).iter(f"{SVG}text")]
        assert texts == ["CultureLens", "rank 1 of 4 · suite v1 · 2026-03-03"]
        status, kind, card = get(url + "card.png?model=Beta")
        assert status == 200 and kind == "image/png" and Image.open(io.BytesIO(card)).size == (1200, 630)


def test_model_page_an_unknown_id_is_a_sentence(served):
    url, client, _ = served
    for asked in ("../../etc/passwd", "Nobody <b>bold</b>"):
        picker, text, profile, files = model_page(client, asked)
        assert text == (f"No model named “{asked}” is on this leaderboard: the Model picker lists those there "
                        "are, and every table's model name links to its page.")
        assert profile.empty and files in (None, []) and picker["value"] is None
        for route in ("badge.svg", "card.png"):
            status, kind, body = get(url + f"{route}?model=" + quote(asked, safe=""))
            assert (status, kind) == (404, "text/plain; charset=utf-8")
            assert body.decode() == (f"No model named \"{asked}\" is on this leaderboard; its Model tab lists those "
                                     "there are.")
    with chromium() as browser:
        page = open_page(browser, url + "?model=" + quote("Nobody <b>bold</b>", safe=""), shows="No model named")
        wait_for_text(page, "No model named “Nobody <b>bold</b>” is on this leaderboard")
        assert page.locator("[role=tabpanel]:visible b").count() == 0

"""The world map (issue 52), as a visitor and a script get it from a real Gradio server: its numbers are the Slices
table's, a two-model map marks where the paired interval holds 0, a country without prompts is hatched and says so,
and the page asks no host but the app's.

The store holds three models scored with the production ``aggregate`` (``tests.test_rankings.write_scored``) on 12
Japanese and 12 Brazilian prompts, values in eighths so every mean is exact:

- Alpha: 0.75 on every Japanese prompt, 0.5 and 0.625 in turn on the Brazilian ones (mean 0.5625);
- Beta: 0.5 on every Japanese prompt, the same as Alpha on the Brazilian ones (a tie there);
- Gamma: 0.25 on 6 Japanese prompts and none on the other 6 (each at the worst value, 0: mean 0.125), 0.25 on every
  Brazilian one.
"""

from __future__ import annotations

import html
import math
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import pandas as pd
import pytest
from scipy import stats

from leaderboard import choropleth
from leaderboard.store import Store
from tests.browser import LAPTOP, PHONE, chromium, layout_problems, open_page, screenshot
from tests.helpers import launched
from tests.test_rankings import CUBE_DATASET, write_scored

JAPAN = [f"j{i:02d}" for i in range(12)]
BRAZIL = [f"b{i:02d}" for i in range(12)]
COUNTRIES = {**dict.fromkeys(JAPAN, "Japan"), **dict.fromkeys(BRAZIL, "Brazil")}
BRAZIL_VALUES = {p: 0.5 + (i % 2) * 0.125 for i, p in enumerate(BRAZIL)}
MODELS = {
    "Alpha": {**dict.fromkeys(JAPAN, 0.75), **BRAZIL_VALUES},
    "Beta": {**dict.fromkeys(JAPAN, 0.5), **BRAZIL_VALUES},
    "Gamma": {**dict.fromkeys(JAPAN[:6], 0.25), **dict.fromkeys(BRAZIL, 0.25)},
}
# Each model's mean on each country's 12 prompts, by hand (an unanswered prompt at the worst value, 0).
EXPECTED = {("Alpha", "Japan"): 0.75, ("Alpha", "Brazil"): 0.5625, ("Beta", "Japan"): 0.5,
            ("Beta", "Brazil"): 0.5625, ("Gamma", "Japan"): 0.125, ("Gamma", "Brazil"): 0.25}
SVG = "{http://www.w3.org/2000/svg}"


def write_store(root) -> Store:
    store = Store(root)
    for i, (model, values) in enumerate(MODELS.items()):
        write_scored(store, f"s-{model.lower()}", model, values, countries=COUNTRIES, when=i, track="awareness",
                     metric="clip_score", version="1", dataset=CUBE_DATASET)
    return store


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = write_store(tmp_path_factory.mktemp("world-map") / "store")
    with launched(store, "ada") as url:
        from gradio_client import Client

        yield url, Client(url, verbose=False)


def world_map(client, model: str, versus: str | None = None) -> tuple[str, str, pd.DataFrame]:
    """The ``/world_map`` API's note, SVG and table for the awareness CLIPScore by country."""
    *_, note, svg, table = client.predict("awareness", "clip_score", model, versus, api_name="/world_map")
    return note, svg, pd.DataFrame(table["data"], columns=table["headers"])


def countries(svg: str) -> dict[str, tuple[str, str]]:
    """The map's countries by ISO code: (fill, hover title)."""
    root = ET.fromstring(f"<shown>{svg}</shown>")  # the SVG and its legend
    return {path.get("data-country"): (path.get("fill"), path.find(f"{SVG}title").text)
            for path in root.iter(f"{SVG}path") if path.get("data-country")}


def test_world_map_values_equal_the_slices_tables_on_a_hand_built_store(served):
    _, client = served
    for model in MODELS:
        _, svg, table = world_map(client, model)
        mapped = table.set_index("Country")
        assert sorted(mapped.index) == ["Brazil", "Japan"]
        for country in ("Japan", "Brazil"):
            slices = client.predict("awareness", "clip_score", "country", country, "", api_name="/slices")[4]
            frame = pd.DataFrame(slices["data"], columns=slices["headers"])
            row = frame[frame["Model"].str.contains(model, regex=False)].iloc[0]
            # the Slices table's own score, interval and prompt count; the hand-computed mean
            assert float(mapped.at[country, "clip_score"]) == pytest.approx(float(row["Score"]), abs=5e-4)
            assert float(mapped.at[country, "clip_score"]) == pytest.approx(EXPECTED[model, country], abs=5e-4)
            assert mapped.at[country, "95% CI"] == row["95% CI"] and int(mapped.at[country, "Prompts"]) == 12
            assert mapped.at[country, "Rank"] == f"{row['Rank']} of 3"
        shown = countries(svg)
        assert f"{EXPECTED[model, 'Japan']:.3f}" in shown["JP"][1] and "12 prompts" in shown["JP"][1]
    # One scale for every model's map: from the lowest value any model has on a country (Gamma's 0.125 in Japan)
    # to the highest (Alpha's 0.75 in Japan); Brazil's 0.5625 sits at 0.7 of it.
    _, svg, _ = world_map(client, "Alpha")
    assert countries(svg)["JP"][0] == choropleth.VIRIDIS[-1]
    assert countries(svg)["BR"][0] == choropleth.colour((0.5625 - 0.125) / 0.625, choropleth.VIRIDIS)


def test_world_map_difference_marks_a_tie_and_gives_the_paired_interval(served):
    _, client = served
    note, svg, table = world_map(client, "Alpha", "Beta")
    rows = table.set_index("Country")
    # Brazil: the same value on every prompt, a difference of 0 whose interval holds 0: no difference, dotted.
    assert rows.at["Brazil", "Verdict"] == "no difference" and countries(svg)["BR"][0] == choropleth.TIE
    low, high = (float(x) for x in rows.at["Brazil", "95% CI (paired)"].strip("[]").split(", "))
    assert low < 0 < high
    # Japan: Alpha 0.25 better on each of the 12 prompts. All differences one step c = 0.25: Bonett & Price's
    # adjusted Wald interval, written out: p+ = 13/14, p- = 1/14, d = 12/14, half = t(0.975, 13) sqrt((p+ + p- -
    # d^2) / 14), times c.
    more, fewer = 13 / 14, 1 / 14
    half = stats.t.ppf(0.975, 13) * math.sqrt((more + fewer - (more - fewer) ** 2) / 14)
    expected = f"[{0.25 * (more - fewer - half):.3f}, {0.25 * (more - fewer + half):.3f}]"
    assert rows.at["Japan", "95% CI (paired)"] == expected and rows.at["Japan", "Verdict"] == "Alpha better"
    assert rows.at["Japan", "Difference (+: first better)"] == "+0.250"
    fill, title = countries(svg)["JP"]
    assert fill == choropleth.BLUE_ORANGE[-1] and "Alpha better" in title and expected in title
    assert "better on 1 country, worse on 0, no difference the data can tell on 1" in note
    # The other way round: Beta worse on Japan, blue.
    _, svg, table = world_map(client, "Beta", "Alpha")
    assert table.set_index("Country").at["Japan", "Verdict"] == "Alpha better"
    assert countries(svg)["JP"][0] == choropleth.BLUE_ORANGE[0]


def test_world_map_a_country_without_data_is_hatched_and_named_so(served):
    _, client = served
    _, svg, table = world_map(client, "Gamma")
    shown = countries(svg)
    assert shown["NG"] == ("url(#cl-no-data)", "Nigeria: no data")  # no prompt names Nigeria
    assert shown["FR"] == ("url(#cl-no-data)", "France: no data")
    assert shown["JP"][0].startswith("#") and "0.125" in shown["JP"][1]  # 6 unanswered prompts count, at 0
    assert "Nigeria" not in set(table["Country"]) and "no data" in svg  # the legend names the hatching
    assert len([c for c, (fill, _) in shown.items() if fill.startswith("#")]) == 2


def test_world_map_an_unknown_model_is_a_sentence_and_the_first_model_is_shown(served):
    _, client = served
    note, svg, table = world_map(client, "../../etc/passwd")
    assert html.unescape(note).startswith("No model named “../../etc/passwd” has values of this metric by country")
    assert sorted(table["Country"]) == ["Brazil", "Japan"] and "<svg" in svg


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_world_map_page_in_chromium_asks_no_host_but_the_apps(served, size):
    """The Map tab with two models' difference, then a model's page with its map: every address either asks for is
    the app's (the shapes are bundled, the badge is the app's own)."""
    url, _ = served
    app_host = urlsplit(url).netloc
    with chromium() as browser:
        asked: list[str] = []
        page = open_page(browser, url + "?tab=map&track=awareness&metric=clip_score&model=Alpha&versus=Beta", size,
                         shows="no difference the data can tell on 1", requests=asked)
        page.wait_for_function("() => document.querySelector('svg.cl-map path[data-country=JP]') !== null")
        title = page.locator("svg.cl-map path[data-country=JP] title").text_content()
        assert title.startswith("Japan: Alpha better")
        assert layout_problems(page) == []
        screenshot(page, f"world-map-difference-{size[0]}")
        # The model's page (its map, best and worst countries, badge) asks no other host either.
        page = open_page(browser, url + "?model=Alpha", size, shows="Best and worst countries", requests=asked)
        page.wait_for_function("() => document.querySelector('svg.cl-map path[data-country=BR] title') !== null && "
                               "[...document.images].some(i => i.src.includes('badge.svg') && i.naturalWidth > 0)")
        assert layout_problems(page) == []
        screenshot(page, f"model-page-map-{size[0]}")
    others = sorted({urlsplit(u).netloc for u in asked if urlsplit(u).scheme in ("http", "https", "ws", "wss")}
                    - {app_host})
    assert asked and others == []

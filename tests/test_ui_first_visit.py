"""A visitor's first minutes, in Chromium, on a store holding only the papers' rows (as after `make run`) and on one
where three models were scored on the suite.

Each test does what a person does next: reads the first view, opens the filter panel and switches track, pastes a
link to each tab and leaves it open, types in every text box, reads the page on a laptop and on a phone. Values are
the papers' rows (``leaderboard.reported``): CUBE Tables 3 and 4 (2 models x 8 countries, x 24 country x concept
cells), CUBE Table 6 (4 models x 3 concepts), CRT Table 1 (5 models, still and moving), CulturalFrames (4 models);
and the suite rows of ``tests.helpers.suite_results`` (win rates known in advance). One server per store, without a
worker (nothing is scored here). Every wait is for a state the page reaches (``tests.browser``), never a pause.
"""

from __future__ import annotations

import pytest

from leaderboard.store import Store
from tests.browser import (
    LAPTOP,
    PHONE,
    WAIT,
    chromium,
    control,
    events,
    hashes,
    layout_problems,
    open_page,
    open_tab,
    query,
    screenshot,
    scrolls_sideways,
    shows,
    table,
    wait_for_charts,
    wait_for_events,
    wait_for_paint,
    wait_for_text,
)
from tests.helpers import SUITE_WIN_RATES, serving, serving_tiny_cube, suite_results

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def paper_rows_app(tmp_path_factory, tiny_upstream):
    root = tmp_path_factory.mktemp("first-visit")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    with serving(store.root, root / "serve.log", "--no-worker") as url:
        yield url


@pytest.fixture(scope="module")
def suite_rows_app(tmp_path_factory, tiny_upstream):
    """The papers' rows and three models scored on every track of the suite."""
    root = tmp_path_factory.mktemp("suite-visit")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    suite_results(store)
    with serving(store.root, root / "serve.log", "--no-worker") as url:
        yield url


def test_the_first_view_without_suite_rows_shows_each_papers_table_as_a_card(paper_rows_app):
    """No model is scored on the suite: the Overview opens on the papers' headline tables side by side, each with
    its ranking, its source and what it measures, named by its protocol, no hash anywhere, and a way in to submit."""
    with chromium() as browser:
        page = open_page(browser, paper_rows_app, shows="No model has been scored on CultureLens suite v1 yet")
        cards = page.locator(".cl-card")
        assert cards.count() == 4  # CUBE awareness and diversity, CRT, CulturalFrames: the tracks with a paper table
        first = {card.locator("b").first.inner_text(): card.locator("tr").nth(1).inner_text().split("\t")
                 for card in cards.all()}
        assert first == {  # each card's first row: rank, model, the paper's values (Table 3's mean of 8 countries)
            "Awareness (CUBE)": ["1", "Imagen 2", "87.8"], "Diversity (CUBE)": ["1", "Imagen 2", "0.160", "0.190",
                                                                               "0.140"],
            "Iconicity (CRT)": ["1", "Imagen 4", "0.643", "0.448"], "Expectations (CulturalFrames)": ["1", "GPT-Image",
                                                                                                   "0.850"]}
        crt = page.locator(".cl-card", has_text="Iconicity (CRT)")
        assert "Does the model recognise an iconic title without copying its reference image?" in crt.inner_text()
        assert "CRT, Table 1 · CRT paper protocol" in crt.inner_text()
        assert crt.get_by_role("link", name="CRT, Table 1").get_attribute("href") == "https://arxiv.org/abs/2511.11435"
        assert hashes(page) == [] and scrolls_sideways(page) == []
        screenshot(page, "overview-papers-1366")
        page.get_by_role("button", name="Submit a model: how to take part").click()  # the way in
        page.wait_for_function("() => location.search === '?tab=submit'")
        wait_for_text(page, "Take part: one generate, one submit")
        assert open_tab(page) == "submit"


def test_the_first_view_with_suite_rows_ranks_the_models_across_the_tracks(suite_rows_app):
    """Scored suite rows exist: the Overview opens on the overall ranking, one row per model across the five tracks
    of the mean (variability beside it), under the suite's protocol by name, no hash, nothing wider than the
    table at 1366 px; the papers' cards are one choice away."""
    with chromium() as browser:
        page = open_page(browser, suite_rows_app, shows="Ranked on every track's rows under CultureLens suite v1")
        rows = table(page)
        assert [(row["Model"], row["Overall win rate"].split()[0]) for row in rows] == [
            (model, f"{rate:.3f}") for model, rate in SUITE_WIN_RATES.items()]
        assert [row["Rank"] for row in rows] == ["1", "2", "3"] and {row["Provenance"] for row in rows} == {"scored"}
        assert [rows[1][f"{track} win rate"].split()[0] for track in ("Awareness (CUBE)", "Relevance (CAIRE)")] == [
            "0.50", "0.00"]
        assert hashes(page) == [] and scrolls_sideways(page) == []
        screenshot(page, "overview-suite-1366")
        page.get_by_role("radio", name="The papers' tables").check()
        wait_for_text(page, "Does the model recognise an iconic title")
        assert page.locator(".cl-card").count() == 4 and hashes(page) == []


def test_a_protocol_is_named_with_its_difference_from_the_suites_and_its_details_are_one_click_away(
        paper_rows_app):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=overview&track=iconicity", shows="FLUX.1-schnell")
        line = ("Ranked under CRT paper protocol: The numbers CRT published (Table 1), on the paper's own images and "
                "settings: ranked only with each other, never with rows scored here on the suite's 767 CRT reference "
                "titles × 10 images.")
        wait_for_text(page, line)
        assert control(page, "Protocol").input_value() == "CRT paper protocol · 5 rows"  # Table 1's five models
        assert hashes(page) == [] and scrolls_sideways(page) == []
        page.get_by_text("How to read this table").click()  # the details: the protocol in full, with its id
        wait_for_text(page, "CRT paper protocol, id 637267cabf42 (not the track's headline protocol")
        screenshot(page, "overview-protocol-details")


def test_opening_the_filters_then_switching_track_keeps_rows(paper_rows_app):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=overview&track=awareness", shows="Brazil / art")
        page.get_by_text("Filters and columns (none active: every row is shown)").click()
        page.get_by_role("radio", name="Expectations (CulturalFrames)").check()
        wait_for_text(page, "SD-3.5-Large")
        assert sorted(row["Model"] for row in table(page)) == ["FLUX.1-dev", "GPT-Image", "Imagen 3", "SD-3.5-Large"]
        assert shows(page, "none active: every row is shown") and not shows(page, "rows hidden")

        models = page.get_by_label("Models (comma-separated, any matches)")
        models.fill("gpt, imagen")
        models.press("Enter")
        wait_for_text(page, "Filters and columns (1 active: model search)")
        wait_for_text(page, "2 rows hidden: 2 by model search")
        assert sorted(row["Model"] for row in table(page)) == ["GPT-Image", "Imagen 3"]
        since = page.get_by_label("Scored since (YYYY-MM-DD)")
        since.fill("last week")
        since.press("Enter")
        wait_for_text(page, "“last week” was ignored")
        assert sorted(row["Model"] for row in table(page)) == ["GPT-Image", "Imagen 3"]  # a bad date hides nothing

        page.get_by_role("radio", name="Iconicity (CRT)").check()  # the search stays, and finds CRT's Imagen 4
        wait_for_text(page, "Imagen 4")
        assert sorted((row["Slice"], row["Model"]) for row in table(page)) == [("moving", "Imagen 4"),
                                                                               ("still", "Imagen 4")]
        screenshot(page, "first-visit-filters")


LINKS = {  # a link to each view, and what that view shows (a paper row, a note)
    "tab=overview": "CRT, Table 1 · CRT paper protocol",  # the first view: the papers' tables
    "tab=overview&track=awareness": "by country × concept, each value ranked apart",  # every cell, not one
    "tab=overview&track=diversity": "Realistic Vision",
    "tab=overview&track=iconicity": "still",  # CRT Table 1: still and moving, each ranked
    "tab=overview&track=variability": "No Variability (W1KP) results yet",
    "tab=overview&track=relevance": "No Relevance (CAIRE) results yet",
    "tab=overview&track=expectations": "GPT-Image",
    # The README's own example link (made for scored rows: with the paper's only, CRT Table 1 still answers it)
    "tab=slices&track=iconicity&metric=crt&slice=kind&value=moving&models=SDXL": "SDXL (paper)",
    "tab=slices&track=expectations": "GPT-Image (paper)",
    "tab=compare": "Pick 1-4 scored submissions",
    "tab=datasets": "load_dataset",
    "tab=metrics": "VIEScore",
    "tab=submit": "Take part: one generate, one submit",
    "tab=queue": "No worker is running right now",
    "tab=about": "CC BY-NC-SA 4.0",
}


def test_a_link_to_each_view_shows_it_and_stays_in_the_address_bar(paper_rows_app):
    """Each page's first paint is done (``open_page`` waits for it): an address the page was going to write would be
    written by then; then the person goes on, and each step waits for the state it brings."""
    with chromium() as browser:
        pages = {link: open_page(browser, f"{paper_rows_app}?{link}", shows=view) for link, view in LINKS.items()}
        for link, page in pages.items():
            assert query(page) == link, f"the address bar of {link} now reads {query(page)}"
            assert open_tab(page) == link.split("&")[0].removeprefix("tab=") and shows(page, LINKS[link])
        awareness = pages["tab=overview&track=awareness"]
        assert shows(awareness, "48 rows")  # 2 models x 24 cells, each cell ranked
        assert [row["Slice"] for row in table(awareness)][:4] == ["Brazil / art"] * 2 + ["Brazil / cuisine"] * 2
        screenshot(awareness, "first-visit-awareness")
        readme = pages["tab=slices&track=iconicity&metric=crt&slice=kind&value=moving&models=SDXL"]
        # no scored crt yet: the track opens on Table 1's CRT, where SDXL moving is 0.553
        assert [(row["Model"], row["Score"]) for row in table(readme)] == [("SDXL", "0.553")]
        screenshot(readme, "first-visit-readme-link")
        expectations = pages["tab=slices&track=expectations"]
        assert control(expectations, "Slice by").input_value() == "overall"
        assert control(expectations, "Value").input_value() == "all"

        # The person goes on: a metric, another tab, and back; the address bar follows and restores the view.
        page = pages["tab=overview&track=iconicity"]
        control(page, "Metric").click()
        page.get_by_role("option", name="VR@k, visual reuse on the references every compared model recognised").click()
        wait_for_text(page, "VR@k, visual reuse on the references every compared model recognised")
        page.wait_for_function("() => location.search.includes('metric=vr_at_k')", timeout=WAIT)
        kept = query(page)
        page.get_by_role("tab", name="Metrics").click()
        page.wait_for_function("() => location.search === '?tab=metrics'", timeout=WAIT)
        page.get_by_role("tab", name="Overview").click()
        page.wait_for_function("q => location.search === '?' + q", arg=kept, timeout=WAIT)
        page.goto(f"{paper_rows_app}?{kept}")
        wait_for_text(page, "VR@k, visual reuse")
        assert control(page, "Metric").input_value().startswith("VR@k")


def test_back_and_forward_go_through_the_tabs_a_person_opened(paper_rows_app):
    """Back returns to the tab opened before, as the person left it, and its link; Forward goes on again. A tab
    clicked at once on a bare address stays open (the first paint selects no tab of its own)."""
    def at(page, expected: str) -> None:
        page.wait_for_function("q => location.search === '?' + q", arg=expected, timeout=WAIT)
        page.wait_for_function("t => document.querySelector('[role=tab][aria-selected=true]').dataset.tabId === t",
                               arg=expected.split("&")[0].removeprefix("tab="), timeout=WAIT)

    with chromium() as browser:
        page = open_page(browser, f"{paper_rows_app}?tab=overview&track=iconicity", shows="CRT")
        page.get_by_role("tab", name="Slices").click()
        at(page, "tab=slices")
        control(page, "Track").click()
        page.get_by_role("option", name="expectations").click()
        page.wait_for_function("() => location.search.includes('track=expectations')", timeout=WAIT)
        sliced = query(page)
        page.get_by_role("tab", name="Metrics").click()
        at(page, "tab=metrics")
        page.go_back()
        at(page, sliced)
        assert control(page, "Track").input_value() == "Expectations (CulturalFrames)"  # as the person left it
        page.go_back()
        at(page, "tab=overview&track=iconicity")
        assert shows(page, "CRT")
        screenshot(page, "first-visit-back")
        page.go_forward()
        at(page, sliced)
        page.go_back()
        page.go_back()  # before the first page of the app: the browser leaves it (about:blank here)
        assert page.url == "about:blank"

        bare = browser.new_page()
        bare.goto(paper_rows_app)
        bare.get_by_role("tab", name="About").click()  # at once, while the first paint may still be computing
        wait_for_paint(bare)
        assert open_tab(bare) == "about" and query(bare) == "tab=about"


def test_every_registered_track_has_its_button_and_method_page(paper_rows_app):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=metrics", shows="Method page")
        for title in ("Awareness (CUBE)", "Diversity (CUBE)", "Iconicity (CRT)", "Variability (W1KP)",
                      "Relevance (CAIRE)", "Expectations (CulturalFrames)"):
            control(page, "Method page").click()
            page.get_by_role("option", name=title).click()
            wait_for_text(page, f"{title}\n")
            assert not shows(page, "No method page is registered")
        wait_for_text(page, "CAIRE")
        screenshot(page, "first-visit-method-page")
        page.get_by_role("tab", name="Overview").click()
        for title in ("Variability (W1KP)", "Relevance (CAIRE)"):
            assert page.get_by_role("radio", name=title).is_visible()


TEXT = "sushi; =1+1 <b>x</b> $$y$$ 2026-13-45"  # words, a formula, HTML, math and a bad date at once
BOXES = ("[role=tabpanel]:visible textarea[data-testid=textbox]:visible, [role=tabpanel]:visible "
         "input[type=number]:visible, [role=tabpanel]:visible input[role=combobox]:visible")


def test_typing_in_every_text_box_of_every_tab_shows_no_error(paper_rows_app):
    """Text boxes, number boxes and the pickers one can type in (a value of one's own included)."""
    with chromium() as browser:
        page = open_page(browser, paper_rows_app, shows="All tracks (mean win rate)")
        page.get_by_text("Filters and columns").click()
        page.get_by_label("Scored since (YYYY-MM-DD)").wait_for()
        typed = {}
        for tab in ("Overview", "Slices", "Compare", "Datasets", "Metrics", "Submit", "Queue", "About"):
            before = events(page)
            page.get_by_role("tab", name=tab).click()
            page.wait_for_function("t => document.querySelector('[role=tab][aria-selected=true]').dataset.tabId === t",
                                   arg=tab.lower(), timeout=WAIT)
            if tab not in ("Overview", "Submit", "About"):  # the tabs that fill when opened
                wait_for_events(page, before)
            boxes = page.locator(BOXES)
            typed[tab] = boxes.count()
            for i in range(typed[tab]):
                box = boxes.nth(i)
                before = events(page)  # a number box answers its input at once, a text box its Enter
                box.fill("-3" if box.get_attribute("type") == "number" else TEXT)
                box.press("Enter")
                wait_for_events(page, before)
                text = page.locator("[role=tabpanel]:visible").inner_text()
                assert "Error" not in text, f"{tab}, box {i + 1}: {text[:2000]}"
            if tab == "Overview":  # the note quotes the date box's text as typed: no bold, no math
                wait_for_text(page, f"“{TEXT}” was ignored")
            screenshot(page, f"first-visit-typed-{tab.lower()}")
        # Overview (the papers' tables: no metric or protocol picker): models, min and max size, since; Slices: 4
        # pickers and models; Compare: 2 pickers; Datasets: 4 pickers, contains, semantic search; Metrics: the method
        # page; Submit: the Hub repo; Queue: the submission ID.
        assert typed == {"Overview": 4, "Slices": 5, "Compare": 2, "Datasets": 6, "Metrics": 1, "Submit": 1,
                         "Queue": 1, "About": 0}


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_views_read_on_a_laptop_and_a_phone(paper_rows_app, size):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=overview&track=iconicity", size, shows="FLUX.1-schnell")
        page.get_by_text("Filters and columns").click()  # the panel open makes the table's columns narrower
        page.get_by_label("Scored since (YYYY-MM-DD)").wait_for()
        assert layout_problems(page) == []
        if size == LAPTOP:
            assert scrolls_sideways(page) == []
        screenshot(page, f"first-visit-overview-{size[0]}")
        if size == PHONE:  # the tabs that do not fit are in a menu
            page.get_by_role("button", name="More tabs").click()
            page.locator(".overflow-dropdown button", has_text="Slices").or_(
                page.get_by_role("tab", name="Slices")).first.click()
        else:
            page.get_by_role("tab", name="Slices").click()
        wait_for_text(page, "Model × slice heatmap")
        page.wait_for_function("() => document.querySelector('table.cl-heatmap') !== null", timeout=WAIT)
        wait_for_charts(page)
        assert query(page) == "tab=slices" and layout_problems(page) == []
        screenshot(page, f"first-visit-slices-{size[0]}")

"""A visitor's first minutes, in Chromium, on a store holding only the papers' rows (as after `make run`).

Each test does what a person does next: opens the filter panel and switches track, pastes a link to each tab and
leaves it open, types in every text box, reads the page on a laptop and on a phone. Values are the papers' rows
(``leaderboard.reported``): CUBE Table 4 (2 models x 24 country x concept cells), CRT Table 1 (5 models, still
and moving), CulturalFrames (4 models). One server for the module, without a worker (nothing is scored here).
"""

from __future__ import annotations

import time

import pytest

from leaderboard.store import Store
from tests.browser import LAPTOP, PHONE, chromium, control, open_page, open_tab, query, screenshot, shows, table, wait_for_text
from tests.helpers import serving, serving_tiny_cube

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LINK_SECONDS = 5  # how long an opened link is left alone before its address bar is read


@pytest.fixture(scope="module")
def paper_rows_app(tmp_path_factory, tiny_upstream):
    root = tmp_path_factory.mktemp("first-visit")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    with serving(store.root, root / "serve.log", "--no-worker") as url:
        yield url


def test_opening_the_filters_then_switching_track_keeps_rows(paper_rows_app):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=overview&track=awareness", shows="Brazil / art")
        page.get_by_text("Filters and columns (none active: every row is shown)").click()
        page.get_by_role("radio", name="Expectations (CulturalFrames)").check()
        wait_for_text(page, "SD-3.5-Large")
        assert sorted(row["Model"] for row in table(page)) == ["FLUX.1-dev", "GPT-Image", "Imagen 3", "SD-3.5-Large"]
        assert shows(page, "none active: every row is shown") and not shows(page, "row(s) hidden")

        models = page.get_by_label("Models (comma-separated, any matches)")
        models.fill("gpt, imagen")
        models.press("Enter")
        wait_for_text(page, "Filters and columns (1 active: model search)")
        wait_for_text(page, "2 row(s) hidden: 2 by model search")
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
    "tab=overview": "All tracks (mean win rate)",
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
    with chromium() as browser:
        pages = {link: open_page(browser, f"{paper_rows_app}?{link}", shows=view) for link, view in LINKS.items()}
        time.sleep(LINK_SECONDS)
        for link, page in pages.items():
            assert query(page) == link, f"the address bar of {link} now reads {query(page)}"
            assert open_tab(page) == link.split("&")[0].removeprefix("tab=") and shows(page, LINKS[link])
        awareness = pages["tab=overview&track=awareness"]
        assert shows(awareness, "48 row(s)")  # 2 models x 24 cells, each cell ranked
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
        wait_for_text(page, "VR@k, visual reuse on the references every compared model recognised", 10_000)
        page.wait_for_function("() => location.search.includes('metric=vr_at_k')", timeout=10_000)
        kept = query(page)
        page.get_by_role("tab", name="Metrics").click()
        page.wait_for_function("() => location.search === '?tab=metrics'", timeout=10_000)
        page.get_by_role("tab", name="Overview").click()
        page.wait_for_function("q => location.search === '?' + q", arg=kept, timeout=10_000)
        page.goto(f"{paper_rows_app}?{kept}")
        wait_for_text(page, "VR@k, visual reuse")
        assert control(page, "Metric").input_value().startswith("VR@k")


def test_back_and_forward_go_through_the_tabs_a_person_opened(paper_rows_app):
    """Back returns to the tab opened before, as the person left it, and its link; Forward goes on again. A tab
    clicked at once on a bare address stays open (the first paint selects no tab of its own)."""
    def at(page, expected: str) -> None:
        page.wait_for_function("q => location.search === '?' + q", arg=expected, timeout=10_000)
        page.wait_for_function("t => document.querySelector('[role=tab][aria-selected=true]').dataset.tabId === t",
                               arg=expected.split("&")[0].removeprefix("tab="), timeout=10_000)

    with chromium() as browser:
        page = open_page(browser, f"{paper_rows_app}?tab=overview&track=iconicity", shows="CRT")
        page.get_by_role("tab", name="Slices").click()
        at(page, "tab=slices")
        control(page, "Track").click()
        page.get_by_role("option", name="expectations").click()
        page.wait_for_function("() => location.search.includes('track=expectations')", timeout=10_000)
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

        bare = open_page(browser, paper_rows_app, shows="CultureLens")
        bare.get_by_role("tab", name="About").click()  # at once, while the first paint may still be computing
        time.sleep(LINK_SECONDS)
        assert open_tab(bare) == "about" and query(bare) == "tab=about"


def test_every_registered_track_has_its_button_and_method_page(paper_rows_app):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=metrics", shows="Method page")
        for title in ("Awareness (CUBE)", "Diversity (CUBE)", "Iconicity (CRT)", "Variability (W1KP)",
                      "Relevance (CAIRE)", "Expectations (CulturalFrames)"):
            control(page, "Method page").click()
            page.get_by_role("option", name=title).click()
            wait_for_text(page, f"{title}\n", 10_000)
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
        typed = {}
        for tab in ("Overview", "Slices", "Compare", "Datasets", "Metrics", "Submit", "Queue", "About"):
            page.get_by_role("tab", name=tab).click()
            time.sleep(1)
            boxes = page.locator(BOXES)
            typed[tab] = boxes.count()
            for i in range(typed[tab]):
                box = boxes.nth(i)
                box.fill("-3" if box.get_attribute("type") == "number" else TEXT)
                box.press("Enter")
                time.sleep(1.5)
                text = page.locator("[role=tabpanel]:visible").inner_text()
                assert "Error" not in text, f"{tab}, box {i + 1}: {text[:2000]}"
            if tab == "Overview":  # the note quotes the date box's text as typed: no bold, no math
                wait_for_text(page, f"“{TEXT}” was ignored")
            screenshot(page, f"first-visit-typed-{tab.lower()}")
        # Overview (all tracks: no metric picker): track set, models, min and max size, since; Slices: 4 pickers and models; Compare: 2
        # pickers; Datasets: 4 pickers, contains, semantic search; Metrics: the method page; Submit: the Hub repo;
        # Queue: the submission ID.
        assert typed == {"Overview": 5, "Slices": 5, "Compare": 2, "Datasets": 6, "Metrics": 1, "Submit": 1,
                         "Queue": 1, "About": 0}


def _layout_problems(page) -> list[str]:
    """What does not read at this width: a header with a word broken across lines, a page that scrolls
    sideways, a heatmap or chart wider than its box without a scroll bar, an empty download box."""
    return page.evaluate("""() => {
      const problems = [];
      for (const span of document.querySelectorAll('.cl-table th .header')) {
        if (span.offsetParent === null) continue;
        const line = parseFloat(getComputedStyle(span).lineHeight) || 16;
        const lines = Math.round(span.getBoundingClientRect().height / line);
        const words = span.innerText.trim().split(/\\s+/).length;
        if (lines > words) problems.push(`header "${span.innerText}" takes ${lines} lines`);
      }
      if (document.documentElement.scrollWidth > innerWidth + 1) problems.push('the page scrolls sideways');
      for (const heat of document.querySelectorAll('table.cl-heatmap')) {
        if (heat.offsetParent === null) continue;
        const box = heat.parentElement;
        const scrolls = getComputedStyle(box).overflowX === 'auto';
        if (box.getBoundingClientRect().right > innerWidth + 1 || (!scrolls && heat.scrollWidth > box.clientWidth))
          problems.push('a heatmap does not fit its box');
      }
      for (const chart of document.querySelectorAll('.vega-embed')) {
        const block = chart.closest('.block');
        if (chart.offsetParent && block && chart.getBoundingClientRect().right > block.getBoundingClientRect().right + 1)
          problems.push('a chart is wider than its box');
      }
      for (const label of document.querySelectorAll('[data-testid=block-label]'))
        if (label.offsetParent && label.innerText.trim() === 'Downloads') problems.push('an empty Downloads box');
      return problems;
    }""")


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_views_read_on_a_laptop_and_a_phone(paper_rows_app, size):
    with chromium() as browser:
        page = open_page(browser, paper_rows_app + "?tab=overview&track=iconicity", size, shows="FLUX.1-schnell")
        page.get_by_text("Filters and columns").click()  # the panel open makes the table's columns narrower
        time.sleep(1)
        assert _layout_problems(page) == []
        screenshot(page, f"first-visit-overview-{size[0]}")
        if size == PHONE:  # the tabs that do not fit are in a menu
            page.get_by_role("button", name="More tabs").click()
            page.locator(".overflow-dropdown button", has_text="Slices").or_(
                page.get_by_role("tab", name="Slices")).first.click()
        else:
            page.get_by_role("tab", name="Slices").click()
        wait_for_text(page, "Model × slice heatmap")
        page.wait_for_function("() => document.querySelector('table.cl-heatmap') !== null", timeout=30_000)
        time.sleep(2)  # the charts draw
        assert query(page) == "tab=slices" and _layout_problems(page) == []
        screenshot(page, f"first-visit-slices-{size[0]}")

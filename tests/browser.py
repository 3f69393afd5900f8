"""Driving the app in Debian's Chromium (Playwright) as a person does: open a page at a screen size, wait for
what it shows, read its tables and address bar, save a screenshot. Gradio keeps a connection open, so waits
are for page content, never for network idle."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from leaderboard.ui.address import TABS

SCREENSHOTS = Path(__file__).resolve().parents[1] / "test-output" / "screenshots"
LAPTOP, PHONE = (1366, 768), (390, 844)
WAIT = 60_000  # ms a state may take to come on a busy machine: a bound on failure, never a pause
_SHOWS = "text => document.body.innerText.includes(text)"
# Counts the events the page ran: Gradio shows a progress text on an event's outputs while it runs, so each time
# the page goes from busy to idle, one (or more) event has ended. A test reads the count, acts, and waits for it
# to grow: the state "what I did has been answered", whatever the time it took.
_EVENTS = """
window.clEvents = {ended: 0, busy: false};
new MutationObserver(() => {
  const busy = document.querySelector('.progress-text, .eta-bar') !== null;
  if (window.clEvents.busy && !busy) window.clEvents.ended += 1;
  window.clEvents.busy = busy;
}).observe(document, {subtree: true, childList: true});
"""
HASH = r"\b[0-9a-f]{12}\b"  # a protocol id (the first 12 hex digits of a sha256), as no visitor should read one


@contextlib.contextmanager
def chromium() -> Iterator:
    """A headless Chromium (Debian's package; the test is skipped with a reason when it is not installed)."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=path, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser, url: str, size: tuple[int, int] = LAPTOP, shows: str = "CultureLens",
              requests: list[str] | None = None):
    """A new page at ``url`` and screen ``size``, once its first paint is done and it shows ``shows``; with
    ``requests``, every address the page asks for from its first one on is appended to it."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]}, accept_downloads=True)
    if requests is not None:
        page.on("request", lambda request: requests.append(request.url))
    page.add_init_script(_EVENTS)
    page.goto(url)
    wait_for_paint(page)
    tab = parse_qs(urlsplit(url).query).get("tab", ["overview"])[0]
    if tab in TABS and tab != "overview":  # the first paint opened the tab: its select event answers next
        page.wait_for_function("tab => document.documentElement.dataset.tabReady === tab", arg=tab, timeout=WAIT)
    wait_for_text(page, shows)
    return page


def wait_for_paint(page) -> None:
    """Wait until the page's first paint (the view its address names) is done: the app marks it."""
    page.wait_for_function("() => document.documentElement.dataset.painted === 'yes'", timeout=WAIT)


def events(page) -> int:
    """How many times the page went from running events to idle (``open_page`` counts them)."""
    return page.evaluate("() => window.clEvents.ended")


def wait_for_events(page, before: int) -> None:
    """Wait until an event the page ran after ``events`` gave ``before`` has ended: what a person did is answered."""
    page.wait_for_function("n => window.clEvents.ended > n && !window.clEvents.busy", arg=before, timeout=WAIT)


def wait_for_charts(page, at_least: int = 0) -> None:
    """Scroll each chart into view, as a person scrolling down does (a chart draws only then), and wait until every
    one shown is drawn, and at least ``at_least`` are shown."""
    page.evaluate("() => document.querySelectorAll('.vega-embed').forEach(chart => chart.scrollIntoView())")
    page.wait_for_function("""n => {
        const shown = [...document.querySelectorAll('.vega-embed')].filter(chart => chart.offsetParent);
        return shown.length >= n && shown.every(chart => chart.querySelector('canvas, svg'));
    }""", arg=at_least, timeout=WAIT)


def wait_for_text(page, text: str, timeout: float = WAIT) -> None:
    """Wait until the page shows ``text``; fail saying what it shows instead."""
    from playwright.sync_api import TimeoutError as Timeout

    try:
        page.wait_for_function(_SHOWS, arg=text, timeout=timeout)
    except Timeout:
        raise AssertionError(f"{page.url} does not show {text!r}; it shows: "
                             f"{page.evaluate('() => document.body.innerText')[:3000]}") from None


def shows(page, text: str) -> bool:
    return page.evaluate(_SHOWS, text)


def control(page, label: str):
    """The control labelled exactly ``label`` in the tab the page shows (several tabs have a "Value")."""
    return page.locator("[role=tabpanel]:visible").get_by_label(label, exact=True)


def open_tab(page) -> str:
    """The id of the tab the page shows."""
    return page.evaluate("() => document.querySelector('[role=tab][aria-selected=true]').dataset.tabId")


def query(page) -> str:
    """The address bar's query, without the '?'."""
    return page.evaluate("() => location.search.slice(1)")


def hashes(page) -> list[str]:
    """The protocol ids (``HASH``) the open tab shows a visitor."""
    return sorted(set(re.findall(HASH, page.locator("[role=tabpanel]:visible").inner_text())))


def scrolls_sideways(page) -> list[str]:
    """The visible tables (``.cl-table``) and cards whose content is wider than their box: each one's first header
    or heading, and its scroll width against its client width."""
    return page.evaluate("""() => [...document.querySelectorAll('.cl-table, .cl-card')]
        .filter(block => block.offsetParent)
        .map(block => [block, block.querySelector('.virtual-table-viewport, .cl-scroll') || block])
        .filter(([, box]) => box.scrollWidth > box.clientWidth + 1)
        .map(([block, box]) => `${(block.querySelector('th, b') || block).innerText.trim().slice(0, 40)}: `
                               + `${box.scrollWidth} > ${box.clientWidth}`)""")


def layout_problems(page) -> list[str]:
    """What does not read at this width: a header with a word broken across lines, a page that scrolls
    sideways, a heatmap or chart wider than its box without a scroll bar, an empty download box."""
    return page.evaluate("""() => {
      const problems = [];
      for (const span of document.querySelectorAll('.cl-table th .header')) {
        if (span.offsetParent === null) continue;
        const line = parseFloat(getComputedStyle(span).lineHeight) || 16;
        const lines = Math.round(span.getBoundingClientRect().height / line);
        const words = span.innerText.trim().split(/[\\s-]+/).length;  // a line may end at a space or a hyphen
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


def table(page, index: int = 0) -> list[dict[str, str]]:
    """The rows the ``index``-th visible table of the page draws, as header -> cell text. Gradio draws only the
    rows in view (a virtual list): a long table's row count is read from its note, not from here."""
    return page.evaluate(
        """i => {
          const blocks = [...document.querySelectorAll('.cl-table')].filter(b => b.offsetParent !== null);
          const block = blocks[i];
          if (!block) return [];
          const heads = [...block.querySelectorAll('[role=columnheader]')].map(th => th.title || th.innerText.trim());
          const rows = [...block.querySelectorAll('.virtual-row')]
            .sort((a, b) => Number(a.dataset.index) - Number(b.dataset.index));
          return rows.map(row => Object.fromEntries(
            [...row.querySelectorAll('[role=gridcell]')].map((cell, j) => [heads[j], cell.innerText.trim()])));
        }""", index)


def screenshot(page, name: str) -> Path:
    """A full-page picture of what the page shows once no event is running and no transition is (no output greyed
    out as pending, nor still fading in after its event ended)."""
    page.wait_for_function("() => document.querySelector('.progress-text, .eta-bar') === null && "
                           "!document.getAnimations().some(a => a instanceof CSSTransition)", timeout=WAIT)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

"""A submitter's first minutes, in Chromium: from the Submit tab's steps to a scored demo row, as a person does it.

`culturelens serve` runs with its worker on a store with CUBE-1K built from the authors' file (the demo config's
prompt ids are real ones), scoring with a tiny random CLIP (tests' ``backbones_file``). The submitter reads the
steps, uploads an incomplete zip (the summary comes first), then the repository's demo example
(``submissions/example``, zipped) and watches the Queue reach FINISHED, each track's line saying whether it is on;
a visitor's Overview, opened before and never touched, shows the new row by itself; the view downloads as a file
pandas reads; Compare opens on the two scored submissions' images.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import parse_qs

import pandas as pd
import pytest

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from leaderboard.store import Store
from tests.browser import (
    LAPTOP,
    PHONE,
    WAIT,
    chromium,
    control,
    hashes,
    layout_problems,
    open_page,
    query,
    screenshot,
    scrolls_sideways,
    shows,
    table,
    wait_for_charts,
    wait_for_text,
)
from tests.helpers import serving
from culturelens.testing.submissions import make_submission, zip_folder

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]
EXAMPLE = Path(__file__).resolve().parents[1] / "submissions" / "example"
EXAMPLE_MODEL = "Example (placeholder drawings)"


@pytest.fixture(scope="module")
def scoring_app(tmp_path_factory, cube_file, backbones_file):
    root = tmp_path_factory.mktemp("submitter")
    store = Store(root / "store")
    cube_1k.build(str(cube_file), local_folder(store.datasets, cube_1k.HUB_REPO))
    with serving(store.root, root / "serve.log", "--user", "ada", "--backbones", str(backbones_file)) as url:
        yield url, store, root


def _score_first(url: str, store: Store, folder: Path) -> None:
    """Another demo submission, scored before the visitor arrives (through the API, as a script would)."""
    from gradio_client import Client, handle_file

    prompts = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG_DEMO).table.index)
    archive = zip_folder(make_submission(folder / "early", prompts, seeds=(0,), model_name="Early Model",
                                         config=cube_1k.CONFIG_DEMO), folder / "early.zip")
    verdict = Client(url, verbose=False).predict(handle_file(str(archive)), api_name="/submit")
    job_id = re.search(r"Accepted: `([^`]+)`", verdict).group(1)
    assert store.queue.wait(job_id, timeout=300).state == "FINISHED"


def _incomplete_example(folder: Path) -> Path:
    """The example with the images of its first 3 prompts only: what a first try often looks like."""
    shutil.copytree(EXAMPLE, folder / "partial")
    for prompt in sorted((folder / "partial" / "images").iterdir())[3:]:
        shutil.rmtree(prompt)
    return zip_folder(folder / "partial", folder / "partial.zip")


def _upload(page, archive: Path, verdict: str) -> str:
    """Choose ``archive`` in the Submit tab, press the button, wait for a ``verdict`` (Accepted, Rejected) and
    return the tab's text."""
    clear = page.get_by_role("button", name="Clear")
    if clear.count():
        clear.first.click()
    page.locator("[role=tabpanel]:visible input[type=file]").set_input_files(str(archive))
    page.get_by_role("button", name="Validate and submit").click()
    wait_for_text(page, verdict, 120_000)
    return page.locator("[role=tabpanel]:visible").inner_text()


def test_a_submitter_takes_the_demo_example_to_a_scored_row(scoring_app, tmp_path):
    url, store, _ = scoring_app
    _score_first(url, store, tmp_path)
    with chromium() as browser:
        visitor = open_page(browser, url + "?tab=overview&track=awareness", shows="Early Model")
        submitter = open_page(browser, url + "?tab=submit", shows="Take part: one generate, one submit")

        # The steps, in the order a submitter needs them: the suite (what it holds and costs), one generate, one
        # submit, the format and its schema, then the demo config to try the path.
        wait_for_text(submitter, "culturelens generate --preset sdxl --dataset culturelens/cube-1k")  # all drawn
        steps = submitter.locator("[role=tabpanel]:visible").inner_text()
        # This server holds CUBE-1K only: the recipe names that part alone, and what it costs (issue 41).
        order = [steps.index(s) for s in ("992 × 10 (seeds 0-9)", "9,920 images for the parts accepted here",
                                          "culturelens generate --suite --parts cube-1k --preset sdxl",
                                          "parts/<part>/manifest.json", "Manifest schema",
                                          'load_dataset("culturelens/cube-1k", "cube_1k_demo"',
                                          "culturelens generate --preset sdxl --dataset culturelens/cube-1k")]
        assert order == sorted(order), steps
        assert "this server accepts its part cube-1k only" in steps and "19,773" not in steps
        assert "cube_1k_demo (72 prompts" in steps

        # A first try: three prompts answered. The summary comes before the list of what is missing.
        verdict = _upload(submitter, _incomplete_example(tmp_path), "Rejected")
        summary = "answered 3 of 72 prompts; 69 images missing"
        assert "Rejected: nothing was stored" in verdict and summary in verdict, verdict
        assert verdict.index(summary) < verdict.index("no image for prompt")
        screenshot(submitter, "submitter-rejected")

        verdict = _upload(submitter, zip_folder(EXAMPLE, tmp_path / "example.zip"), "Accepted")
        assert "Accepted" in verdict and "72 images for 72 prompts" in verdict, verdict
        job_id = re.search(r"Accepted: (\S+)", verdict).group(1)

        # A worker that could not score earlier does not cloud the healthy one's line.
        store.queue.set_worker("old-worker", "unavailable", "no metric can run: no CLIP weights")
        submitter.get_by_role("tab", name="Queue").click()
        wait_for_text(submitter, job_id)
        submitter.wait_for_function(
            "id => [...document.querySelectorAll('.virtual-row')].some(r => r.innerText.includes(id) "
            "&& r.innerText.includes('FINISHED'))", arg=job_id, timeout=300_000)  # the Queue updates by itself
        assert shows(submitter, "is up") and not shows(submitter, "cannot score")
        # One line per track: the worker scores awareness on the CUBE-1K this server holds; the suite's other parts
        # are not served here, and each line names the one command that turns its track on.
        wait_for_text(submitter, "Awareness (CUBE) is on")
        wait_for_text(submitter, "Diversity (CUBE) is off: no cube-diversity and no artifact-index: culturelens suite "
                                 "build --out suite/ --only cube-diversity artifact-index, then culturelens serve "
                                 "--suite suite/")
        assert shows(submitter, "Iconicity (CRT) is off: no iconic-references: culturelens suite build")
        submitter.get_by_text("What the workers said, in full").click()  # what the worker said in full, folded
        wait_for_text(submitter, "ready with clip_cosine, clip_score")
        screenshot(submitter, "submitter-queue")

        # The visitor's Overview, untouched since it opened, now shows the new row: first "not ranked" while the
        # rankings are updated in the background, then ranked when the update ends (the page redraws by itself).
        wait_for_text(visitor, EXAMPLE_MODEL)
        visitor.wait_for_function("t => !document.body.innerText.includes(t)", arg="it is ranked when the update ends",
                                  timeout=WAIT)
        shown = [row["Model"] for row in table(visitor)]
        assert set(shown) == {"Early Model", EXAMPLE_MODEL}
        screenshot(visitor, "submitter-overview-refreshed")

        # The visitor downloads the view and opens it.
        visitor.get_by_role("button", name="Download this view (CSV, Parquet)").click()
        link = visitor.locator("a[download$='.csv']")
        link.wait_for(timeout=WAIT)
        with visitor.expect_download() as download:
            link.click()
        frame = pd.read_csv(download.value.path())  # typed rows: one per model x metric x slice x protocol
        assert set(shown) <= set(frame["model"]) and set(frame["track"]) == {"awareness"}
        assert all(pd.api.types.is_float_dtype(frame[c]) for c in ("value", "ci_low", "ci_high"))
        # Every interval holds its value; a side the few prompts of a slice cannot bound is empty, and its note says so.
        ours = frame[frame["model"] == EXAMPLE_MODEL].dropna(subset=["ci_low", "ci_high"], how="all")
        low, high = ours["ci_low"].fillna(-float("inf")), ours["ci_high"].fillna(float("inf"))
        assert len(ours) and ((low <= ours["value"]) & (ours["value"] <= high)).all()
        open_side = ours[["ci_low", "ci_high"]].isna().any(axis=1)
        assert (open_side == ours["ci_note"].fillna("").str.startswith("not bounded")).all()
        screenshot(visitor, "submitter-download")


def test_compare_shows_the_demo_images_with_readable_captions(scoring_app):
    url, store, _ = scoring_app
    if not any(job.model == EXAMPLE_MODEL and job.state == "FINISHED" for job in store.queue.jobs()):
        pytest.skip("needs the demo example scored by the test before")
    example = next(job.id for job in store.queue.jobs() if job.model == EXAMPLE_MODEL and job.state == "FINISHED")
    early = next(job.id for job in store.queue.jobs() if job.model == "Early Model" and job.state == "FINISHED")
    with chromium() as browser:
        # The tab opens on the two newest scored submissions and the first prompt they share: nothing to pick.
        page = open_page(browser, url + "?tab=compare", shows="seed 0")
        chips = page.locator("[role=tabpanel]:visible .token").all_inner_texts()
        assert len(chips) == 2 and chips[0].startswith(f"{EXAMPLE_MODEL} · {example} (") \
            and chips[1].startswith(f"Early Model · {early} ("), chips
        first = min(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG_DEMO).table.index)  # both answer every one
        assert control(page, "Prompt (type to filter)").input_value().startswith(first)
        page.wait_for_function("() => document.querySelectorAll('.cl-gallery .caption-label').length >= 2",
                               timeout=WAIT)
        captions = page.evaluate("""() => [...document.querySelectorAll('.cl-gallery .caption-label')]
            .filter(c => c.offsetParent).map(c => ({text: c.innerText, cut: c.scrollWidth > c.clientWidth + 1}))""")
        assert sorted(c["text"].split(" · seed 0 · ")[0] for c in captions) == ["Early Model", EXAMPLE_MODEL]
        assert not any(c["cut"] for c in captions)
        fits = page.evaluate("() => [...document.querySelectorAll('.cl-gallery img')].map(i => getComputedStyle(i).objectFit)")
        assert fits and set(fits) == {"contain"}  # a thumbnail shows the whole image, never a crop of it
        assert shows(page, "No reference images: this prompt's dataset has none")
        screenshot(page, "submitter-compare")

        # The person keeps the example only; the comparison is then in the address bar, and a colleague who opens
        # the link sees the same images.
        page.locator("[role=tabpanel]:visible .token", has_text="Early Model").locator(".token-remove").click()
        page.wait_for_function("id => location.search.includes('subs=' + id)", arg=example, timeout=WAIT)
        link = parse_qs(query(page))
        assert link["tab"] == ["compare"] and link["subs"] == [example] and link["prompt"][0]
        shared = open_page(browser, f"{url}?{query(page)}", shows="seed 0")
        assert query(shared) == query(page)  # opening it changes nothing
        chips = shared.locator("[role=tabpanel]:visible .token").all_inner_texts()  # the submissions picked
        assert len(chips) == 1 and chips[0].startswith(f"{EXAMPLE_MODEL} · {example}"), chips
        assert control(shared, "Prompt (type to filter)").input_value().startswith(link["prompt"][0])
        screenshot(shared, "submitter-compare-link")

        # They remove the submission: the images and the table go, the hint comes back, the link forgets it.
        shared.locator("[role=tabpanel]:visible .token .token-remove").first.click()
        wait_for_text(shared, "Pick 1-4 scored submissions")
        shared.wait_for_function("() => !location.search.includes('subs=')", timeout=WAIT)
        assert not shows(shared, "seed 0") and not shared.get_by_text("Per-image scores").is_visible()
        screenshot(shared, "submitter-compare-cleared")


TAB_SHOWS = {"overview": "Scored here so far", "slices": "Model × slice heatmap", "compare": "seed 0",
             "datasets": "load_dataset", "metrics": "VIEScore", "submit": "Take part: one generate, one submit",
             "queue": "Awareness (CUBE) is on", "about": "CC BY-NC-SA 4.0"}


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_every_tab_reads_on_a_laptop_and_a_phone(scoring_app, size):
    """Each tab opened by a link on the store with the scored demo rows: what it shows when opened, no hash of a
    protocol, nothing wider than the page (and, on a laptop, no table wider than its box); a screenshot of each."""
    url, store, _ = scoring_app
    if not any(job.model == EXAMPLE_MODEL and job.state == "FINISHED" for job in store.queue.jobs()):
        pytest.skip("needs the demo example scored by the test before")
    with chromium() as browser:
        for tab, view in TAB_SHOWS.items():
            page = open_page(browser, f"{url}?tab={tab}", size, shows=view)
            if tab == "slices":
                wait_for_charts(page)
            if tab == "compare":
                page.wait_for_function("() => [...document.querySelectorAll('.cl-gallery img')].length >= 2",
                                       timeout=WAIT)
            assert layout_problems(page) == [], tab
            assert hashes(page) == [], tab
            if size == LAPTOP or tab == "overview":  # on a phone too, the papers' cards fit
                assert scrolls_sideways(page) == [], tab
            screenshot(page, f"tab-{tab}-{size[0]}")
            page.close()

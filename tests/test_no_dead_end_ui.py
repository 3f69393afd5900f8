"""No dead end on the page (issue 50, findings 4, 5, 6, 7 and 9's page parts): each test does what a visitor or an
operator did, on a real server (``culturelens serve`` in Chromium, or the app served in this process and called with
gradio_client as any client calls it), and checks what they read next: a command printed whole for the folder the
operator named, the judge by its public name and never the operator's folder, an overall that names the tracks it
leaves out and why, a model alone that is "not ranked yet" everywhere, counts with proper plurals.

The stores hold the rows of ``tests.helpers.suite_results`` (10 prompts a track, each model's value +-0.01 on
alternate prompts: Alpha above Beta on every prompt of every track), so every rank and win rate is known in advance.
"""

from __future__ import annotations

import html
import re
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from benchmark.layout import PARTS_DIR, part_folder
from culturelens.testing.submissions import make_submission, zip_folder
from leaderboard import exports, tables
from leaderboard.store import Store
from tests.browser import PHONE, SCREENSHOTS, chromium, layout_problems, open_page, screenshot, wait_for_text
from tests.helpers import SUITE_MODELS, culturelens_here, launched, serving, suite_results
from tests.suite_stand_ins import write_part

# An operator's own judge, loaded from a folder of theirs (``VLMJudge.id``: the path, then "@local").
OPERATORS_JUDGE = "/srv/operator/weights/tiny-qwen2.5-vl@local"
PUBLIC_JUDGE = "tiny-qwen2.5-vl@local (local folder)"
FILTERS = ("", [], None, None, "", [])  # the Overview's filters, none active
COLUMNS = ["Rank", "Rank range (95%)", "Model"]


def _client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False)


def _overview(client, track: str, protocol: str | None = None) -> tuple[pd.DataFrame, str, dict]:
    """The Overview of ``track`` as the ``/overview`` API gives it: the table, its note (the line and the details)
    and the protocol picker."""
    _, _, table, note, picker = client.predict(track, None, *FILTERS, COLUMNS, protocol, api_name="/overview")
    return pd.DataFrame(table["data"], columns=table["headers"]), html.unescape(note), picker


@pytest.fixture(scope="module")
def judged_elsewhere(tmp_path_factory):
    """Alpha and Beta scored on the six tracks of the suite, relevance and expectations by the operator's own judge
    (a local folder, not the protocol's Qwen2.5-VL-7B-Instruct), served in this process."""
    store = Store(tmp_path_factory.mktemp("judged-elsewhere") / "store")
    suite_results(store, {m: SUITE_MODELS[m] for m in ("Alpha", "Beta")},
                  judges={"relevance": OPERATORS_JUDGE, "expectations": OPERATORS_JUDGE})
    with launched(store, "ada") as url:
        yield _client(url)


@pytest.fixture(scope="module")
def lone_model(tmp_path_factory):
    """Alpha alone, scored on the six tracks of the suite under its protocols, served in this process."""
    store = Store(tmp_path_factory.mktemp("lone-model") / "store")
    suite_results(store, {"Alpha": SUITE_MODELS["Alpha"]})
    with launched(store, "ada") as url:
        yield _client(url)


# --- 4: a suite folder called `suite` ---------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_no_dead_end_the_queue_prints_the_build_command_whole_for_a_suite_folder_called_suite(small_suite, tmp_path):
    """`make run`'s default: `culturelens serve --suite suite`, run beside the folder. The Queue's line for a track
    still off is a command the operator can paste: `culturelens suite build --out suite/ ...`, every word as
    typed (it read "culturelens SUITE build --out SUITE" when the folder's name was hidden as a server path)."""
    folder, _ = small_suite  # cube-1k and cube-diversity only: iconicity is off, its command printed
    shutil.copytree(folder, tmp_path / "suite")
    with serving(tmp_path / "store", tmp_path / "serve.log", "--suite", "suite", "--no-worker", cwd=tmp_path) as url:
        with chromium() as browser:
            page = open_page(browser, url + "?tab=queue", shows="Tracks on this server")
            wait_for_text(page, "Iconicity (CRT) is off")
            lines = page.locator("[role=tabpanel]:visible").inner_text().splitlines()
            screenshot(page, "no-dead-end-queue-suite-folder")
    iconicity = next(line for line in lines if "Iconicity (CRT) is off" in line)
    assert iconicity == ("Iconicity (CRT) is off: no iconic-references: culturelens suite build --out suite --only "
                         "iconic-references, then restart (it needs the weights of clip-vit-b-32: where the Hub "
                         "cannot be reached, add --backbones FILE naming local copies)"), iconicity
    assert not any("SUITE" in line for line in lines)


def test_no_dead_end_a_server_folder_is_hidden_wherever_it_stands_as_a_path_and_no_word_with_it(small_suite,
                                                                                                 tmp_path):
    """What the Queue's lines and a worker's reasons go through (``Site.public``): the store's and the suite's
    folders hidden as paths (in a file URL, at a sentence's end), never the word "suite" of a command nor a folder
    whose name only starts the same."""
    from leaderboard.served_suite import open_served
    from leaderboard.ui.site import Site

    suite = tmp_path / "suite"
    shutil.copytree(small_suite[0], suite)
    served = open_served(str(suite), tmp_path / "store" / "datasets", lambda line: None)
    store = Store(tmp_path / "store", suite=served.suite)
    site = Site(store, "ada", suite=served, metric_settings={})
    said = html.unescape(site.public(
        f"culturelens suite build --out {suite}/ --only culturalframes; cannot read file://{store.root}/x.parquet "
        f"nor {tmp_path}/suite2/suite.json; no such file: {store.root}."))
    beside = str(tmp_path).replace(tempfile.gettempdir(), "<tmp>", 1)  # the temporary folder is a server's too
    assert said == ("culturelens suite build --out SUITE/ --only culturalframes; cannot read file://STORE/x.parquet "
                    f"nor {beside}/suite2/suite.json; no such file: STORE.")


# --- 5: the judge by its public name ---------------------------------------------------------------------------
def test_no_dead_end_a_visitor_reads_the_judges_public_name_never_the_operators_folder(judged_elsewhere):
    client = judged_elsewhere
    frame, note, picker = _overview(client, "relevance")
    assert list(frame["Rank"]) == [1, 2]  # Alpha 4.5 above Beta 2.0 on each of the 10 prompts
    # The note's line, as the page shows it above the table, and the protocol picker.
    assert note.splitlines()[0] == (
        "**relevance_intended**, overall: 2 rows, higher is better. Ranked under **CUBE-1K, judge "
        f"{PUBLIC_JUDGE}**: Not the suite's 992 CUBE-1K prompts × 10 images: judged by {PUBLIC_JUDGE}, not "
        "Qwen/Qwen2.5-VL-7B-Instruct; ranked only with rows scored the same way.")
    assert [label for label, _ in picker["choices"]] == [f"CUBE-1K, judge {PUBLIC_JUDGE} · 2 rows"]
    assert "/srv/operator" not in note  # the details, one click away, name the judge the same way
    assert f"metric version 1 (judge {PUBLIC_JUDGE})" in note
    # The download of the same view: its metric_version column names the judge as the page does.
    _, parquet = client.predict("relevance", None, *FILTERS, COLUMNS, None, api_name="/download")
    versions = set(pd.read_parquet(parquet)["metric_version"])
    assert versions == {f"1 (judge {PUBLIC_JUDGE})"}
    # The overall's API, whose rows carry the metric versions too.
    rows = pd.DataFrame(client.predict("awareness + diversity + iconicity", api_name="/overall"))
    assert not rows["metric_version"].dropna().str.contains("/srv/").any()


# --- 7: the overall names what it leaves out ---------------------------------------------------------------------
def test_no_dead_end_the_overall_names_the_tracks_and_protocols_it_leaves_out_and_why(judged_elsewhere):
    _, note, picker = _overview(judged_elsewhere, "overall")
    # Relevance and expectations were judged by the operator's folder, not the protocol's judge: the overall ranks
    # the three others (variability is shown beside), and says so in its first lines, naming both tracks.
    first = note.split("\n\n")[:2]
    assert first == [
        "**Mean win rate** over 3 tracks (Awareness (CUBE), Diversity (CUBE) and Iconicity (CRT)): on each, the "
        "share of the other models a model beats on that track's ranking; higher is better. Ranked on every "
        "track's rows under **CultureLens suite v1**.",
        "**Left out**: the rows of Relevance (CAIRE) (2 models) and Expectations (CulturalFrames) (2 models) scored "
        "under another protocol than the one each track enters the overall with; the details below say which and "
        "why, and each track's own table ranks them."]
    # The details name each protocol left out and why, in words.
    assert (f"- **Relevance (CAIRE)** under **CUBE-1K, judge {PUBLIC_JUDGE}** (2 models): not the suite's 992 "
            f"CUBE-1K prompts × 10 images: judged by {PUBLIC_JUDGE}, not Qwen/Qwen2.5-VL-7B-Instruct; ranked only "
            "with rows scored the same way.") in note.splitlines()
    assert any(line.startswith(f"- **Expectations (CulturalFrames)** under **CulturalFrames, judge {PUBLIC_JUDGE}** "
                               f"(2 models): not the suite's 983 CulturalFrames prompts × 1 image: judged by "
                               f"{PUBLIC_JUDGE}, not Qwen/Qwen2.5-VL-7B-Instruct") for line in note.splitlines())
    assert "(s)" not in note and "headline row(s)" not in note
    assert [label for label, _ in picker["choices"]] == ["awareness + diversity + iconicity (2 models)"]


# --- 7: a model alone ---------------------------------------------------------------------------------------------
def test_no_dead_end_a_lone_model_is_not_ranked_yet_on_its_track_tables_as_in_the_overall(lone_model):
    client = lone_model
    _, note, _ = _overview(client, "overall")
    assert note.startswith("**One model scored** on 5 tracks (Awareness (CUBE), Diversity (CUBE), Iconicity (CRT), "
                           "Relevance (CAIRE) and Expectations (CulturalFrames)), every track's rows under "
                           f"**CultureLens suite v1**: its own score on each track is shown, unranked; {tables.LONE}.")
    # On 10 prompts a ranking could be made; with nobody to compare it with, the track's table says "not ranked
    # yet" too, where it said "1".
    frame, note, picker = _overview(client, "awareness")
    assert frame[["Rank", "Rank range (95%)"]].values.tolist() == [[None, f"not ranked: {tables.LONE_ON_TABLE}"]]
    assert f"One model alone is not ranked yet: {tables.LONE_ON_TABLE}." in note
    assert note.startswith("**clip_score**, overall: 1 row, higher is better.")
    assert [label for label, _ in picker["choices"]] == ["CultureLens suite v1 · 1 row"]
    _, parquet = client.predict("awareness", None, *FILTERS, COLUMNS, None, api_name="/download")
    typed = pd.read_parquet(parquet)
    headline = typed[(typed["metric"] == "clip_score") & (typed["slice"] == "overall")]
    assert headline["rank"].isna().all() and list(headline["not_ranked"]) == [tables.LONE_ON_TABLE]
    assert list(headline["value"]) == [pytest.approx(0.8)]
    assert exports.OVERALL_TRACK not in set(typed["track"])


# --- 6: a full suite upload to a server holding some parts ----------------------------------------------------------
SET_ASIDE = ("its dataset culturelens/iconic-references is not served here, so this part is neither checked nor kept; "
             "the rest of the upload is taken without it")


def _full_upload(folder: Path, suite, at: Path) -> Path:
    """A suite submission holding the parts cube-1k (6 prompts x seeds 0, 1) and iconic-references, as `generate
    --suite` lays them out for a suite folder that holds both (the references here: one, never read)."""
    at.mkdir(parents=True)
    (at / "datasets").symlink_to(folder / "datasets")  # where write_part reads the prompts
    write_part(at / "m1", suite, "cube-1k")
    references = suite.part("iconic-references")
    make_submission(at / "m1" / part_folder("iconic-references"), ["crt-0001"], seeds=references.seeds,
                    prompts_repo=references.dataset.repo, config=references.dataset.config,
                    suite={"repo": suite.repo, "version": suite.version, "part": "iconic-references"})
    return at / "m1"


@pytest.fixture
def small_suite_server(small_suite, tmp_path):
    """A store serving the small suite folder (cube-1k and cube-diversity only), as `culturelens serve --suite`
    opens it, served in this process: (store, url)."""
    from leaderboard.served_suite import open_served

    folder, _ = small_suite
    served = open_served(str(folder), tmp_path / "store" / "datasets", lambda line: None)
    store = Store(tmp_path / "store", suite=served.suite)
    with launched(store, "ada") as url:
        yield store, url


def test_no_dead_end_a_full_suite_upload_is_taken_on_the_parts_served_and_says_which_were_set_aside(
        small_suite, small_suite_server, tmp_path):
    from gradio_client import handle_file

    folder, suite = small_suite
    store, url = small_suite_server
    upload = zip_folder(_full_upload(folder, suite, tmp_path / "made"), tmp_path / "m1.zip")
    verdict = html.unescape(_client(url).predict(handle_file(str(upload)), api_name="/submit"))
    job = store.queue.jobs()[0]
    assert verdict.splitlines()[:3] == [
        f"### Accepted: `{job.id}`", "",
        "**Tiny Test Model: 1 of 4 parts of culturelens/suite v1 (cube-1k 12 images); set aside: "
        "iconic-references (their datasets are not served here: not checked, not kept); missing: cube-diversity, "
        "culturalframes (scored on the parts present)**"]
    assert f"- part `iconic-references`: **set aside**: {SET_ASIDE}" in verdict.splitlines()
    assert str(store.root) not in verdict and str(folder) not in verdict
    # What is kept and queued is the part served, scorable whole.
    assert job.state == "PENDING" and job.dataset == "culturelens/cube-1k:cube_1k:test"
    assert sorted(p.name for p in (store.submissions / job.id / PARTS_DIR).iterdir()) == ["cube-1k"]


def test_no_dead_end_an_upload_of_parts_none_of_which_is_served_is_refused_naming_them(small_suite, small_suite_server,
                                                                                       tmp_path):
    from gradio_client import handle_file

    folder, suite = small_suite
    store, url = small_suite_server
    made = _full_upload(folder, suite, tmp_path / "made")
    shutil.rmtree(made / part_folder("cube-1k"))
    verdict = html.unescape(_client(url).predict(handle_file(str(zip_folder(made, tmp_path / "m1.zip"))),
                                                 api_name="/submit"))
    assert verdict.splitlines() == [
        "### Rejected: nothing was stored", "",
        "**no part of this upload is served here (iconic-references set aside: their datasets are not served here)**",
        "", "The details:", "", f"- part iconic-references: set aside: {SET_ASIDE}"]
    assert store.queue.jobs() == []


def test_no_dead_end_the_cli_takes_the_parts_served_and_names_no_folder_of_the_server(small_suite, tmp_path):
    folder, suite = small_suite
    made = _full_upload(folder, suite, tmp_path / "made")
    store = tmp_path / "store"
    # The operator's `submit` on the store `serve --suite` runs on, and a submitter's `validate` against that folder.
    submitted = culturelens_here("submit", made, "--store", store, "--suite", folder, "--owner", "ada")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    validated = culturelens_here("validate", made, "--suite", folder)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    for result in (submitted, validated):
        lines = result.stdout.splitlines()
        assert lines[0] == ("OK: Tiny Test Model: 1 of 4 parts of culturelens/suite v1 (cube-1k 12 images); set "
                            "aside: iconic-references (their datasets are not served here: not checked, not kept); "
                            "missing: cube-diversity, culturalframes (scored on the parts present)")
        assert f"  part iconic-references: SET ASIDE: {SET_ASIDE}" in lines
        assert str(store) not in result.stdout and str(folder) not in result.stdout
    assert re.search(r"^queued as \S+$", submitted.stdout, re.M)


# --- 9: the overall on a phone --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_models(tmp_path_factory):
    """Alpha, Beta and Gamma scored on the six tracks of the suite (win rates known: ``SUITE_WIN_RATES``)."""
    store = Store(tmp_path_factory.mktemp("three-models") / "store")
    suite_results(store)
    with launched(store, "ada") as url:
        yield url


@pytest.mark.browser
@pytest.mark.slow
def test_no_dead_end_the_overall_on_a_phone_scrolls_sideways_under_its_model_column(three_models):
    """At 390 px the overall's eleven columns do not fit: it was cut after Provenance, the track columns out of
    reach once the models had scrolled away. The table scrolls sideways in its box while the Model column stays at
    its left edge, so every track's column is read beside the model it is about."""
    with chromium() as browser:
        page = open_page(browser, three_models + "?tab=overview&track=overall", PHONE, shows="Mean win rate")
        wait_for_text(page, "Gamma")
        assert layout_problems(page) == []  # the page itself does not scroll sideways: the table does, in its box
        box = page.locator(".cl-table .virtual-table-viewport")
        box.scroll_into_view_if_needed()
        box.hover()
        page.mouse.wheel(2000, 0)  # a swipe to the table's right end
        page.wait_for_function("""() => {
            const v = document.querySelector('.cl-table .virtual-table-viewport');
            return v.scrollLeft > 0 && v.scrollLeft + v.clientWidth >= v.scrollWidth - 1; }""")
        seen = page.evaluate("""() => {
            const v = document.querySelector('.cl-table .virtual-table-viewport').getBoundingClientRect();
            const inside = e => { const r = e.getBoundingClientRect();
                                  return r.width > 0 && r.left >= v.left - 1 && r.right <= v.right + 1; };
            const heads = [...document.querySelectorAll('.cl-table [role=columnheader]')];
            const rows = [...document.querySelectorAll('.cl-table .virtual-row')];
            return {heads: heads.filter(inside).map(h => h.innerText.trim().replace(/\\s+/g, ' ')),
                    models: rows.map(r => r.children[1]).filter(inside).map(c => c.innerText.trim())}; }""")
        screenshot(page, "no-dead-end-overall-phone")  # the page (a full-page picture lays the table out anew)
        page.mouse.wheel(2000, 0)
        page.locator(".cl-table").screenshot(path=str(SCREENSHOTS / "no-dead-end-overall-phone-right-end.png"))
    assert seen["models"] == ["Alpha", "Beta", "Gamma"]  # in view at the right end, beside the last columns
    assert seen["heads"][0] == "Model" and seen["heads"][-1] == "Variability (W1KP): w1kp (not in the mean)"

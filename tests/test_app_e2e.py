"""End to end against a live app: upload -> validate -> queue -> worker -> Parquet -> DuckDB -> Gradio.

The app runs as `culturelens serve` in its own process with its own worker process, on a store made
here, scoring with a tiny random CLIP built in the test. It is driven through gradio_client and a real
Chromium (Playwright, Debian's chromium; skipped with a reason when it is not installed).
"""

from __future__ import annotations

import html
import io
import re
import time

import numpy as np
import open_clip
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from benchmark import ranking
from benchmark.datasets import cube_1k
from leaderboard.store import Store
from tests.browser import LAPTOP, PHONE, SCREENSHOTS, WAIT, chromium, open_page, screenshot, wait_for_charts, \
    wait_for_text
from tests.helpers import serving, serving_tiny_cube
from culturelens.testing.submissions import make_submission, zip_folder

pytestmark = pytest.mark.slow  # a live app scoring uploads, and Chromium


@pytest.fixture(scope="module")
def live_app(tmp_path_factory, tiny_upstream, backbones_file):
    root = tmp_path_factory.mktemp("live")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    with serving(store.root, root / "serve.log", "--user", "e2e-tester", "--backbones", str(backbones_file)) as url:
        yield url, store, root


def _queue_rows(client) -> pd.DataFrame:
    return pd.DataFrame(client.predict(api_name="/queue")["jobs"])


def _wait_for_state(client, submission_id: str, timeout: float = 180) -> pd.Series:
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = _queue_rows(client)
        row = rows[rows["id"] == submission_id] if len(rows) else rows
        if not row.empty and row.iloc[0]["state"] in ("FINISHED", "FAILED"):
            return row.iloc[0]
        time.sleep(1)
    raise AssertionError(f"{submission_id} did not finish: {_queue_rows(client)}")


def _independent_cosines(tiny_clip, store: Store, submission_id: str) -> dict[tuple[str, int], float]:
    """CLIP cosines computed here with plain open_clip, not through the harness."""
    model = open_clip.create_model(tiny_clip.model)
    model.load_state_dict(load_file(tiny_clip.weights))
    model.eval()
    _, _, preprocess = open_clip.create_model_and_transforms(tiny_clip.model)
    tokenizer = open_clip.get_tokenizer(tiny_clip.model)
    prompts = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table["prompt"]
    out = {}
    # The images as the submission keeps them: rows of its Parquet shards, read here with pyarrow itself.
    rows = pq.read_table(store.submissions / submission_id / "data").to_pylist()
    for row in rows:
        prompt_id, seed = row["prompt_id"], row["seed"]
        with torch.no_grad():
            image = model.encode_image(preprocess(Image.open(io.BytesIO(row["image"]["bytes"])).convert("RGB"))
                                       .unsqueeze(0))
            text = model.encode_text(tokenizer([prompts[prompt_id]]))
        out[(prompt_id, seed)] = float(torch.nn.functional.cosine_similarity(image, text).item())
    return out


def test_upload_is_scored_and_ranked(live_app, tiny_clip, tmp_path):
    from gradio_client import Client, handle_file

    url, store, _ = live_app
    client = Client(url, verbose=False)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    archive = zip_folder(make_submission(tmp_path / "sub", prompt_ids, model_name="E2E Model"), tmp_path / "sub.zip")

    verdict = client.predict(handle_file(str(archive)), api_name="/submit")
    assert "Accepted" in verdict, verdict
    submission_id = re.search(r"Accepted: `([^`]+)`", verdict).group(1)
    row = _wait_for_state(client, submission_id)
    assert row["state"] == "FINISHED" and row["owner"] == "e2e-tester" and row["started_at"] and row["finished_at"]

    # Parquet results: every image scored, values equal an independent computation.
    per_image = pq.read_table(store.results / submission_id / "per_image.parquet").to_pandas()
    cosines = per_image[per_image["metric"] == "clip_cosine"]
    expected = _independent_cosines(tiny_clip, store, submission_id)
    assert len(cosines) == len(expected) == 12
    for r in cosines.itertuples():
        assert r.value == pytest.approx(expected[(r.prompt_id, r.seed)], abs=1e-4)
    scores = per_image[per_image["metric"] == "clip_score"].set_index(["prompt_id", "seed"])["value"]
    for key, cos in expected.items():
        assert scores[key] == pytest.approx(2.5 * max(cos, 0.0), abs=2.5e-4)

    # Through DuckDB into the ranked table: the overall value is the mean over prompts of per-prompt means.
    by_prompt = pd.Series(expected).groupby(level=0).mean()
    ranked = client.predict("awareness", "clip_cosine", "overall", "all", api_name="/leaderboard")
    ours = [r for r in ranked if r["model"] == "E2E Model"]
    assert len(ours) == 1 and ours[0]["provenance"] == "scored" and ours[0]["n"] == 6
    assert ours[0]["value"] == pytest.approx(by_prompt.mean(), abs=1e-4)
    assert ours[0]["submission_id"] == submission_id and ours[0]["seeds"] == "0,1"
    by_country = client.predict("awareness", "clip_cosine", "country", "Nigeria", api_name="/leaderboard")
    assert [r["n"] for r in by_country if r["model"] == "E2E Model"] == [3]

    # The same upload again is a duplicate: rejected, nothing new queued.
    again = client.predict(handle_file(str(archive)), api_name="/submit")
    assert "Rejected" in again and f"identical to submission {submission_id}" in html.unescape(again)
    assert list(_queue_rows(client)["id"]).count(submission_id) == 1


def _scored_submission(client) -> str:
    rows = _queue_rows(client)
    finished = rows[(rows["state"] == "FINISHED") & (rows["model"] == "E2E Model")] if len(rows) else rows
    if finished.empty:
        pytest.skip("needs the scored submission of test_upload_is_scored_and_ranked")
    return finished["id"].iloc[0]


def test_reported_rows_are_shown_with_their_citation(live_app):
    from gradio_client import Client

    client = Client(live_app[0], verbose=False)
    from benchmark.metrics.iconicity import CRT_FROM_MEANS

    rows = client.predict("iconicity", CRT_FROM_MEANS[0], "kind", "moving", api_name="/leaderboard")
    assert rows[0]["model"] == "Imagen 4" and rows[0]["value"] == 0.643
    assert all(r["provenance"] == "reported" and r["paper_url"] == "https://arxiv.org/abs/2511.11435" for r in rows)


E2E_LINK = "[E2E Model](?tab=model&model=E2E%20Model)"  # its page here, which links on to its Hub id


def _overview(client, track, models="", types=(), provenance=(), api_name="/overview"):
    """The Overview's track, metric, table and note (the protocol picker left out), or the download's files."""
    out = client.predict(track, None, models, list(types), None, None, "", list(provenance),
                         ["Rank", "Tie group", "Model", "Score", "95% CI", "Type", "Provenance", "Protocol",
                          "Submission"], None, api_name=api_name)
    return out[:4] if api_name == "/overview" else out


def test_overview_ranks_filters_and_says_what_it_hides(live_app):
    from gradio_client import Client

    client = Client(live_app[0], verbose=False)
    _scored_submission(client)
    # The overall view: mean win rate over tracks (the papers report no track's headline on the overall slice:
    # CulturalFrames' raters rank under their own metric, human_alignment; its headline is the judge's).
    _, _, table, note = _overview(client, "overall")
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert "Overall win rate" in frame.columns
    # The only scored model of its tracks is shown, unranked, with the reason (issue 41: the first submitter's day).
    assert "One model scored" in note and "ranks appear when a second model on the same tracks is scored" in note
    assert len(frame) == 1 and frame["Overall win rate"].iloc[0] in (None, "", "–") and "E2E" in frame["Model"].iloc[0]
    # A track: the headline metric first, every score with its CI; search several models at once.
    _, metric, table, note = _overview(client, "awareness", models="E2E, sdxl")
    assert metric["value"] == "clip_score"  # the track's headline metric comes first (pickers hold metric ids)
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert list(frame["Model"]) == [E2E_LINK] and frame["95% CI"].iloc[0].startswith("[")
    _, _, table, note = _overview(client, "expectations", models="gpt, IMAGEN")
    assert sorted(pd.DataFrame(table["data"], columns=table["headers"])["Model"]) == [  # papers' models link too
        "[GPT&#45;Image](?tab=model&model=GPT-Image)", "[Imagen 3](?tab=model&model=Imagen%203)"]
    assert "2 rows hidden: 2 by model search" in html.unescape(note)  # nothing hidden silently
    files = _overview(client, "awareness", models="E2E, sdxl", api_name="/download")
    assert [f.endswith(".csv") or f.endswith(".parquet") for f in files] == [True, True]
    downloaded = pd.read_csv(files[0])  # the view's track as typed rows, the table shown ranked
    assert set(downloaded["model"]) == {"E2E Model", "SDXL"}
    # The table shown is the E2E model's CLIPScore on the tiny dataset's 6 prompts: too few to rank, and said so.
    shown = downloaded[(downloaded["model"] == "E2E Model") & (downloaded["metric"] == "clip_score")
                       & (downloaded["slice"] == "overall")]
    assert downloaded["rank"].isna().all() and shown["not_ranked"].str.startswith(ranking.TOO_FEW).all()
    # Type filter: the scored model is 'open'; only closed models left -> it is hidden, and the note says so.
    _, _, table, note = _overview(client, "awareness", types=["closed"])
    assert "E2E Model" not in list(pd.DataFrame(table["data"], columns=table["headers"])["Model"])
    assert "model type" in note
    # An opened filter panel sends its empty size boxes as 0, and a person may type a date badly: neither hides
    # the paper rows, whose sizes are unknown; the note says the date was ignored.
    everything = _overview(client, "expectations")[2]["data"]
    _, _, table, note, _ = client.predict("expectations", None, "", [], 0, 0, "last week", [],
                                          ["Rank", "Model", "Score"], None, api_name="/overview")
    assert len(table["data"]) == len(everything) > 0 and "hidden" not in note
    assert "“last week” was ignored" in note


def test_slices_heatmap_and_charts(live_app):
    from gradio_client import Client

    client = Client(live_app[0], verbose=False)
    _scored_submission(client)
    out = client.predict("awareness", "CLIP cosine (prompt, image)", "country", "Nigeria", "", api_name="/slices")
    track, metric, slice_name, value, table, note, heat, bars, profile, scatter, curves, chart_note = out
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert slice_name["value"] == "country" and ("country × concept", "country_concept") in [tuple(c) for c in slice_name["choices"]]
    assert value["value"] == "Nigeria" and list(frame["Model"]) == [E2E_LINK]
    # Nigeria's 3 prompts are too few to rank: the row is there with its value, saying why it has no rank.
    assert list(frame["Rank range (95%)"]) == [f"not ranked: {ranking.TOO_FEW} (3; a ranking needs "
                                               f"{ranking.MIN_PROMPTS})"]
    assert "E2E Model" in heat and "Nigeria" in heat and "<table" in heat  # model x country heatmap
    scatter_rows = pd.DataFrame(scatter["data"], columns=scatter["columns"])
    assert {"Imagen 4 (paper)", "SDXL (paper)"} <= set(scatter_rows["model"])  # CRT Table 1 as recognition vs realisation
    moving = scatter_rows[(scatter_rows["model"] == "Imagen 4 (paper)") & (scatter_rows["subset"] == "moving")]
    assert moving["realisation (1 - VR)"].iloc[0] == pytest.approx(1 - 0.212)


def test_compare_shows_images_side_by_side_with_scores(live_app):
    from gradio_client import Client

    url, store, _ = live_app
    client = Client(url, verbose=False)
    submission_id = _scored_submission(client)
    prompt_id = sorted(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)[0]
    gallery, references, table, reuse, note = client.predict([submission_id], prompt_id, api_name="/compare")
    assert len(gallery) == 2  # two seeds
    assert all(item["caption"].startswith("E2E Model · seed") and "CLIPScore (2.5 max(cos, 0)) " in item["caption"]
               for item in gallery)  # metrics by their labels
    scores = pd.DataFrame(table["data"], columns=table["headers"])
    assert list(scores["seed"]) == [0, 1] and "CLIP cosine (prompt, image)" in scores.columns
    assert prompt_id in html.unescape(note) and references == [] and reuse == []  # CUBE-1K has no reference images


def test_model_page_shows_the_lowest_and_highest_scored_image_of_its_best_and_worst_countries(live_app):
    """The model's page shows, for each of its best and worst countries (by its CLIPScore per country, the map's
    values), the lowest- and highest-scored of that country's images: each the submitted image's pixels, captioned
    with its country, its per-image value and its prompt; computed here from the results' per-image table."""
    from gradio_client import Client

    url, store, _ = live_app
    client = Client(url, verbose=False)
    submission_id = _scored_submission(client)
    per_image = pq.read_table(store.results / submission_id / "per_image.parquet").to_pandas()
    scores = per_image[per_image["metric"] == "clip_score"]
    by_country = scores.groupby(["country", "prompt_id"])["value"].mean().groupby(level=0).mean()
    ordered = by_country.sort_values(ascending=False, kind="stable").index.tolist()  # higher is better
    best = ordered[:min(3, -(-len(ordered) // 2))]
    worst = ordered[len(best):][-3:][::-1]
    prompts = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table["prompt"]
    submitted = {(r["prompt_id"], r["seed"]): r["image"]["bytes"]
                 for r in pq.read_table(store.submissions / submission_id / "data").to_pylist()}
    expected = []
    for side, countries in (("best", best), ("worst", worst)):
        for country in countries:
            mine = scores[scores["country"] == country].sort_values(["value", "prompt_id", "seed"], kind="stable")
            for which, row in (("lowest", mine.iloc[0]), ("highest", mine.iloc[-1])):
                expected.append((f"{side} · {country} · {which} CLIPScore (2.5 max(cos, 0)) {row['value']:.3f} · "
                                 f"{prompts[row['prompt_id']]}", submitted[(row["prompt_id"], row["seed"])]))
    assert len(best) >= 1 and len(worst) >= 1 and len(expected) == 2 * (len(best) + len(worst))
    gallery = client.predict("E2E Model", api_name="/model_page")[8]
    assert [item["caption"] for item in gallery] == [caption for caption, _ in expected]
    for item, (_, data) in zip(gallery, expected):
        shown = np.asarray(Image.open(item["image"]).convert("RGB"))
        assert np.array_equal(shown, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    # A visitor follows the model's link and sees the same images with their captions, on a laptop and a phone.
    with chromium() as browser:
        for size, name in ((LAPTOP, "1366"), (PHONE, "390")):
            page = open_page(browser, url + "?tab=model&model=E2E%20Model", size, shows="E2E Model")
            wait_for_text(page, f"{best[0]} · highest CLIPScore")
            thumbnails = page.locator(".cl-gallery img")
            for i in range(thumbnails.count()):  # each drawn, as a visitor scrolling past it sees it
                thumbnails.nth(i).scroll_into_view_if_needed()
            page.wait_for_function("() => [...document.querySelectorAll('.cl-gallery img')].every("
                                   "i => i.complete && i.naturalWidth > 0)", timeout=WAIT)
            assert thumbnails.count() == len(expected)
            screenshot(page, f"model-page-examples-{name}")
            page.close()


def test_datasets_tab_filters_and_searches_prompts_by_meaning(live_app):
    from gradio_client import Client

    client = Client(live_app[0], verbose=False)
    out = client.predict(cube_1k.HUB_REPO, cube_1k.CONFIG, "country", "Nigeria", "", "a dish of food",
                         api_name="/datasets")
    repo, config, column, value, table, note, snippet = out
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert set(frame["country"]) == {"Nigeria"} and "similarity" in frame.columns
    assert frame["similarity"].is_monotonic_decreasing
    assert f'load_dataset("{cube_1k.HUB_REPO}", "{cube_1k.CONFIG}"' in snippet
    # Typing in "Contains (any column)" over rows with missing values (pandas 3 keeps them as NaN)
    out = client.predict(cube_1k.HUB_REPO, cube_1k.CONFIG, "(any)", "(any)", "JOLLOF", "", api_name="/datasets")
    frame = pd.DataFrame(out[4]["data"], columns=out[4]["headers"])
    assert list(frame["artifact"]) == ["jollof rice"] and "1 of 6 rows" in out[5]


def test_queue_details_rerun_and_failure_reason(live_app):
    from gradio_client import Client

    url, store, _ = live_app
    client = Client(url, verbose=False)
    submission_id = _scored_submission(client)
    details, per_image = client.predict(submission_id, api_name="/details")
    assert "FINISHED" in details and per_image and pq.read_table(per_image).num_rows > 0
    # The owner re-runs it: the old results go, it is scored again and ends FINISHED.
    assert "queued again" in client.predict(submission_id, api_name="/rerun")
    requests = store.queue.request_number(submission_id)
    row = _wait_for_state(client, submission_id)
    assert row["state"] == "FINISHED" and store.has_results(submission_id)
    assert requests >= 2 and store.run_record(submission_id).request == requests  # they answer the re-run
    # Someone else's submission cannot be deleted from this server's user.
    store.queue.add(id="foreign-1", content_hash="sha256:foreign", owner="someone-else", model="X", model_id="x",
                    model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")
    assert "belongs to someone-else" in html.unescape(client.predict("foreign-1", api_name="/delete"))
    # Its files are missing, so the worker fails it: the queue shows why.
    row = _wait_for_state(client, "foreign-1")
    assert row["state"] == "FAILED" and row["reason"]
    details, _ = client.predict("foreign-1", api_name="/details")
    assert "**reason**" in details


def test_a_hostile_upload_is_rejected_in_the_ui_and_stores_nothing(live_app, tmp_path):
    import zipfile

    from gradio_client import Client, handle_file

    url, store, _ = live_app
    before = sorted(p.name for p in store.submissions.iterdir())
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../outside.txt", "x")
    verdict = Client(url, verbose=False).predict(handle_file(str(archive)), api_name="/submit")
    # the member name as the archive holds it, every punctuation character as a character reference
    assert "Rejected" in verdict and "'../../outside.txt': '..' in path" in html.unescape(verdict)
    assert "<" not in verdict.replace("<code>", "").replace("</code>", "") and "&#46;&#46;" in verdict
    assert sorted(p.name for p in store.submissions.iterdir()) == before
    assert list(store.staging.iterdir()) == []


@pytest.mark.browser
def test_a_visitor_browses_every_tab_in_a_browser(live_app):
    url, store, _ = live_app
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        # A link restores a view: the awareness track, filtered to one model.
        page.goto(url + "?tab=overview&track=awareness&models=E2E")
        page.get_by_text("How well do text-to-image models know the world's cultures?").wait_for(timeout=WAIT)
        wait_for_text(page, "E2E Model")
        wait_for_text(page, "CLIPScore (2.5 max(cos, 0))")  # the track's headline
        screenshot(page, "overview")

        page.get_by_role("tab", name="Slices").click()
        wait_for_text(page, "Model × slice heatmap")
        page.wait_for_function("() => document.querySelector('table.cl-heatmap') !== null", timeout=WAIT)
        # The CRT scatter (the papers' rows) has points (the win-rate bars need two models scored on one track set:
        # one model is scored here, and no paper reports a headline on the overall slice): wait until it is drawn.
        wait_for_charts(page, at_least=1)
        screenshot(page, "slices")

        page.get_by_role("tab", name="Compare").click()  # it opens on the newest scored submission: nothing to pick
        wait_for_text(page, "seed 0")
        screenshot(page, "compare")

        for tab, shows in (("Datasets", "load_dataset"), ("Metrics", "VIEScore"), ("Submit", "quota"),
                           ("Queue", "FINISHED")):
            page.get_by_role("tab", name=tab).click()
            wait_for_text(page, shows)
            screenshot(page, tab.lower())

        page.get_by_role("tab", name="About").click()
        wait_for_text(page, "CC BY-NC-SA 4.0")
    for name in ("overview", "slices", "compare", "datasets", "metrics", "submit", "queue"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000, name

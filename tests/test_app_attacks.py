"""An anonymous visitor attacks a live app: reading store files through Compare, formulas in a CSV download,
links and math from model names, probing server folders through rejection messages, oversized requests.

The app is a real `culturelens serve --no-worker` on a store whose two submissions were scored by a real
`culturelens worker --once` with the tiny CLIP; requests go through gradio_client, plain HTTP and Chromium.
"""

from __future__ import annotations

import html
import io
import os
import shutil
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmark import results
from benchmark.datasets import cube_1k
from leaderboard import tables
from leaderboard.store import Store
from tests.browser import chromium, screenshot, wait_for_text
from tests.helpers import culturelens, launched, serving, serving_tiny_cube
from culturelens.testing.submissions import make_submission

pytestmark = pytest.mark.slow  # a live `culturelens serve` and a scoring worker for the module (~20 s)

FORMULA = '=HYPERLINK("https://evil.example/x","Top model")'
LINKS_AND_MATH = "https://evil.example/x [l](https://e.org) www.evil.example $$x^2$$ *b*"


@pytest.fixture(scope="module")
def attacked_app(tmp_path_factory, tiny_upstream, backbones_file):
    root = tmp_path_factory.mktemp("attacked")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    prompt_ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    ids = {}
    for name in (FORMULA, LINKS_AND_MATH):
        outcome = store.submit(make_submission(root / f"sub-{len(ids)}", prompt_ids, model_name=name), "mallory")
        assert outcome.job is not None, outcome.report.text()
        ids[name] = outcome.job.id
    worker = culturelens("worker", "--store", store.root, "--once", "--backbones", backbones_file)
    assert worker.returncode == 0, worker.stderr
    assert all(store.has_results(i) for i in ids.values())
    with serving(store.root, root / "serve.log", "--user", "mallory", "--no-worker") as url:
        yield url, store, ids


def _upload(url: str, name: str, data: bytes) -> str:
    """Gradio's own upload endpoint, as anyone can call it (no sign-in): returns the server path it stored at."""
    import httpx

    reply = httpx.post(url + "gradio_api/upload", files={"files": (name, data)}, timeout=30)
    reply.raise_for_status()
    return reply.json()[0]


def _get(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as error:
        return error.code


def _crafted_per_image(store: Store, prompt_id: str) -> bytes:
    """A results table whose image paths name the store's private files."""
    rows = [{"submission_id": "x", "model": "x", "prompt_id": prompt_id, "seed": seed, "image_path": path,
             "metric": "clip_score", "value": 1.0}
            for seed, path in enumerate([str(store.root / "queue.sqlite"), "../../queue.sqlite"])]
    sink = io.BytesIO()
    pq.write_table(results.table(rows, results.PER_IMAGE), sink)
    return sink.getvalue()


def test_compare_serves_no_file_the_store_does_not_own(attacked_app, tmp_path):
    from gradio_client import Client

    url, store, ids = attacked_app
    client = Client(url, verbose=False)
    prompt_id = sorted(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)[0]
    uploaded = Path(_upload(url, "per_image.parquet", _crafted_per_image(store, prompt_id)))
    # The uploaded folder named as a submission: absolute, relative to results/, and with '..'.
    for forged in (str(uploaded.parent), f"../../{uploaded.parent.name}", uploaded.parent.name):
        gallery, references, table, reuse, note = client.predict([forged], prompt_id, api_name="/compare")
        assert gallery == [] and reuse == [] and "None of the picked submissions is a scored submission" in note
    # A real submission still shows its two images, served from copies outside the store.
    gallery, *_ = client.predict([ids[FORMULA]], prompt_id, api_name="/compare")
    assert len(gallery) == 2
    # The store's files cannot be fetched directly either.
    for private in (store.root / "queue.sqlite", store.submissions / ids[FORMULA] / "manifest.json"):
        assert _get(url + f"gradio_api/file={private}") == 403


def test_a_tampered_results_table_cannot_point_compare_at_other_files(attacked_app):
    from leaderboard.ui.compare import CompareTab
    from leaderboard.ui.site import Site

    _, store, ids = attacked_app
    scored = ids[LINKS_AND_MATH]
    prompt_id = sorted(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)[0]
    per_image = pq.read_table(store.results / scored / "per_image.parquet").to_pandas()
    first = per_image["prompt_id"] == prompt_id
    genuine = set(per_image.loc[first, "image_path"])
    per_image.loc[first & (per_image["seed"] == 0), "image_path"] = "../../queue.sqlite"
    views = CompareTab(Site(store, "mallory"))
    original = store.results / scored / "per_image.parquet"
    backup = original.with_name("per_image.backup")
    shutil.copyfile(original, backup)
    try:
        pq.write_table(pa.Table.from_pandas(per_image, preserve_index=False), original)
        gallery, *_ = views.compare([scored], prompt_id)
    finally:
        os.replace(backup, original)
    served = [Path(path).read_bytes() for path, _ in gallery]
    assert len(served) == 1  # seed 1 only: seed 0's path is not in the validated image table
    # The bytes the submitter uploaded (the fixture's folder sub-1), served from the submission's shards.
    assert served[0] == (store.root.parent / "sub-1" / sorted(genuine)[-1]).read_bytes()


def test_csv_download_neutralises_spreadsheet_formulas(attacked_app):
    from gradio_client import Client

    url, _, _ = attacked_app
    files = Client(url, verbose=False).predict("awareness", None, "", [], None, None, "", [], ["Rank", "Model"],
                                               None, api_name="/download")
    csv = pd.read_csv(files[0])
    assert "'" + FORMULA in set(csv["model"])  # text to a spreadsheet, not a formula
    assert FORMULA in set(pd.read_parquet(files[1])["model"])  # the typed file keeps the name as it is


def test_rejections_quote_member_names_exactly_and_hide_nothing_else(attacked_app, tmp_path):
    from gradio_client import Client, handle_file

    url, store, _ = attacked_app
    client = Client(url, verbose=False)
    for member in (f"{store.root}/y", "~/x", f"{sys.prefix}/lib/x"):
        archive = tmp_path / "probe.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(member, "x")
        verdict = html.unescape(client.predict(handle_file(str(archive)), api_name="/submit"))
        assert "Rejected" in verdict
        assert repr(member) in verdict, verdict  # as the archive holds it: no prefix rewritten to STORE, ~, ...
        assert "STORE" not in verdict and "<python>" not in verdict


def test_model_search_is_bounded(attacked_app):
    from gradio_client import Client

    url, _, _ = attacked_app
    terms = ", ".join(f"model-{i}" for i in range(40_000)) + ", Top model"
    _, _, table, note, _ = Client(url, verbose=False).predict(
        "awareness", None, terms, [], None, None, "", [], ["Rank", "Model"], None, api_name="/overview")
    assert "Only the first 20 model search terms were used (39981 more ignored)" in html.unescape(note)
    assert table["data"] == []  # "Top model" was past the bound: not searched


def test_a_model_search_with_a_lone_surrogate_searches_the_rest():
    """A request's JSON may carry "\\ud800", which no name holds and no search can encode (Arrow refused it: the
    Slices view failed): the search is the rest of what was typed."""
    frame = pd.DataFrame({"model": ["Alpha", "Beta", None], "provenance": ["scored"] * 3})
    kept, note = tables.Filters.parse("Al\ud800pha").apply(frame)
    assert list(kept["model"]) == ["Alpha"] and note == "2 rows hidden: 2 by model search."


def test_uploads_over_the_validators_limit_are_refused_by_the_server(tmp_path):
    from benchmark.submission import Limits

    store = Store(tmp_path / "store", Limits(max_upload_bytes=10_000))
    with launched(store, "tester") as url:
        import httpx

        upload = f"{url}gradio_api/upload"
        assert httpx.post(upload, files={"files": ("a.zip", b"x" * 9_000)}, timeout=30).status_code == 200
        assert httpx.post(upload, files={"files": ("a.zip", b"x" * 11_000)}, timeout=30).status_code == 413


@pytest.mark.browser
def test_model_names_render_as_plain_text_in_a_browser(attacked_app):
    url, store, ids = attacked_app
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "?tab=queue")
        wait_for_text(page, "FINISHED")
        page.get_by_label("Submission ID").fill(ids[LINKS_AND_MATH])
        page.get_by_role("button", name="Details").click()
        wait_for_text(page, "attempts")
        details = page.locator(".prose", has_text="attempts").last
        assert LINKS_AND_MATH in details.inner_text()  # every character shown as typed
        assert details.locator("a").count() == 0 and details.locator(".katex").count() == 0
        assert details.locator("em").count() == 0  # *b* is not emphasis
        screenshot(page, "attack-details")
        # The same names in the ranked table: each the text of one link, to its model page here (the name
        # percent-encoded whole); nothing in a name makes a link, math or emphasis of its own.
        page.goto(url + "?tab=overview&track=awareness")
        wait_for_text(page, "Top model")
        links = page.evaluate("() => [...document.querySelectorAll('table a')].map(a => [a.textContent, a.href])")
        assert links and all(href == url + "?tab=model&model=" + quote(text, safe="") for text, href in links), links
        assert {text for text, _ in links} <= {FORMULA, LINKS_AND_MATH}
        assert page.locator("table .katex").count() == 0 and page.locator("table em").count() == 0

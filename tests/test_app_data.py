"""The app's data as a script or a spreadsheet reads it: typed downloads and the /leaderboard, /overall and
/queue APIs, through gradio_client against a real Gradio server.

The store holds results written with the production ``benchmark.results.write_folder`` (values known here, so
every downloaded number is checked against the row it came from), the papers' rows and a queue.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest

from benchmark import results
from benchmark.run_record import RunRecord
from benchmark.stats import mean_ci
from leaderboard import display, exports
from leaderboard.store import Store
from tests import doc_blocks
from tests.helpers import launched

FORMULA = '=HYPERLINK("https://evil.example/x","Top model")'
CUBE = "culturelens/cube-1k:cube_1k:test"
PROTOCOL = results.protocol_columns({"dataset": CUBE, "images_per_prompt": 2, "metric_version": "1",
                                     "backbones": ["clip-vit-b-32=openai/clip@r1"]})
# model: (submission id, model id, per-prompt CLIPScores of Brazil's prompts b1-b7 and Nigeria's n1-n3: ten in
# all, as the overall rank and win-rate intervals need ranking.MIN_PROMPTS)
BRAZIL = ["b1", "b2", "b3", "b4", "b5", "b6", "b7"]
MODELS = {
    "Alpha": ("sub-alpha", "org/alpha", {"b1": 0.875, "b2": 0.75, "b3": 0.875, "b4": 0.75, "b5": 0.875, "b6": 0.75,
                                         "b7": 0.875, "n1": 0.75, "n2": 0.875, "n3": 0.75}),
    "Beta": ("sub-beta", "https://example.org/beta", {"b1": 0.5, "b2": 0.625, "b3": 0.5, "b4": 0.625, "b5": 0.5,
                                                        "b6": 0.625, "b7": 0.5, "n1": 0.625, "n2": 0.5, "n3": 0.625}),
    FORMULA: ("sub-formula", "javascript:alert(1)", {"b1": 0.125, "b2": 0.25, "b3": 0.125, "b4": 0.25, "b5": 0.125,
                                                      "b6": 0.25, "b7": 0.125, "n1": 0.25, "n2": 0.125, "n3": 0.25}),
}
SLICES = {("overall", "all"): [*BRAZIL, "n1", "n2", "n3"], ("country", "Brazil"): BRAZIL,
          ("country", "Nigeria"): ["n1", "n2", "n3"]}


def _rows(model: str) -> list[dict]:
    """One submission's clip_score rows: per slice a mean with its CI (``mean_ci`` of its prompts' values, as the
    harness writes it, which the ranking gives too: every model answered every prompt), and per prompt."""
    sid, model_id, values = MODELS[model]
    common = {"provenance": "scored", "submission_id": sid, "model": model, "model_id": model_id,
              "model_type": "open", "parameters_billions": 2.5, "track": "awareness", "metric": "clip_score",
              "metric_label": "CLIPScore (2.5 max(cos, 0))", "metric_version": "1", "higher_is_better": True,
              "harness_version": "0.1.0", "backbone": "clip-vit-b-32", "dataset": CUBE + "@abc", "seeds": "0,1",
              "scored_at": "2026-02-03T04:05:06+00:00", **PROTOCOL}
    rows = []
    for (name, value), prompts in SLICES.items():
        mean = sum(values[p] for p in prompts) / len(prompts)
        low, high = mean_ci(np.array([values[p] for p in sorted(prompts)]))
        rows.append({**common, "slice": name, "slice_value": value, "value": mean, "ci_low": low, "ci_high": high,
                     "n": len(prompts), "excluded": 0})
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": 2} for p, v in values.items()]
    return rows


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("data-api")
    store = Store(root / "store")
    for model, (sid, _, _) in MODELS.items():
        results.write_folder(store.results / sid, [], _rows(model), [], RunRecord(submission_id=sid))
    store.seed_reported()
    store.queue.add(id="job-failed", content_hash="sha256:2", owner="ada", model="Failed_model", model_id=None,
                    model_revision=None, dataset=CUBE)
    store.queue.claim("worker-1", 60)
    store.queue.fail("job-failed", "worker-1", f"no local copy in {store.root}/datasets/cube_1k <b>", "log")
    store.queue.add(id="job-waiting", content_hash="sha256:1", owner="ada", model="Waiting <b>model</b>",
                    model_id="org/w", model_revision=None, dataset=CUBE)
    with launched(store, "ada") as url:
        from gradio_client import Client

        yield Client(url, verbose=False), store


def _written() -> pd.DataFrame:
    """Every aggregate row written above except per prompt: what a typed download must give back."""
    rows = [r for model in MODELS for r in _rows(model) if r["slice"] != "prompt"]
    return pd.DataFrame(rows)[["model", "slice", "slice_value", "value", "ci_low", "ci_high", "n"]]


def test_the_track_download_is_typed_rows_with_ids_and_the_ranks_of_the_table_shown(served):
    client, _ = served
    csv, parquet = client.predict("awareness", None, "", [], None, None, "", [], ["Rank", "Model"], None,
                                  api_name="/download")
    typed = pd.read_parquet(parquet)
    assert list(typed.columns) == list(exports.COLUMNS)
    assert {c: str(typed[c].dtype) for c in ("value", "ci_low", "n", "rank", "rank_low", "higher_is_better",
                                             "scored_at", "images_per_prompt")} == {
        "value": "float64", "ci_low": "float64", "n": "Int64", "rank": "Int64", "rank_low": "Int64",
        "higher_is_better": "boolean", "scored_at": "datetime64[us, UTC]", "images_per_prompt": "Int64"}
    sheet = pd.read_csv(csv)
    assert sheet["value"].dtype == "float64" and sheet["ci_high"].dtype == "float64"
    for frame in (typed, sheet):
        scored = frame[frame["provenance"] == "scored"]
        got = scored.assign(model=scored["model"].str.removeprefix("'"))[[*_written().columns, "ci_note"]]
        expected = _written()
        merged = expected.merge(got, on=["model", "slice", "slice_value"], suffixes=("", "_got"), validate="1:1")
        assert len(merged) == len(expected) == len(scored) == 9
        for column in ("value", "ci_low", "ci_high", "n"):
            got = merged[f"{column}_got"]
            # A side the prompts cannot bound (infinite: Alpha's 0.875 and 0.75 on Brazil's 7 prompts leave 2.3% of
            # the resamples with no spread) is null in the download, as JSON has no infinity, and ci_note says so.
            written = merged[column].where(~np.isinf(merged[column].astype(float)))
            assert ((written == got) | (written.isna() & got.isna())).all(), column  # no rounding
        unbounded = np.isinf(merged["ci_low"].astype(float)) | np.isinf(merged["ci_high"].astype(float))
        assert unbounded.any() and (merged["ci_note"].notna() == unbounded).all()
        assert merged.loc[unbounded, "ci_note"].str.fullmatch(r"not bounded (below|above|below or above) by 7 "
                                                             "prompts").all()
        # The papers' awareness rows (CUBE Tables 3 and 4) are there too, marked as such; no display string.
        assert set(frame["provenance"]) == {"scored", "reported"}
        assert set(frame["metric"]) >= {"clip_score", "human_relevance_yes_pct", "human_faithfulness"}
        assert set(frame.loc[frame["provenance"] == "reported", "paper_url"]) == {"https://arxiv.org/abs/2407.06863"}
    # The table shown (clip_score, overall, its protocol) is ranked; every other row has no rank.
    ranked = typed[typed["rank"].notna()].sort_values("rank")
    assert list(ranked["model"]) == ["Alpha", "Beta", FORMULA] and list(ranked["rank"]) == [1, 2, 3]
    assert ((ranked["metric"] == "clip_score") & (ranked["slice"] == "overall")).all()
    assert (ranked["rank_low"] <= ranked["rank"]).all() and (ranked["rank"] <= ranked["rank_high"]).all()
    first = ranked.iloc[0]
    assert (first["track"], first["protocol_id"], first["on_protocol"], first["dataset"], first["images_per_prompt"],
            first["backbones"], first["submission_id"], first["model_url"]) == (
        "awareness", PROTOCOL["protocol_id"], True, CUBE, 2, "clip-vit-b-32=openai/clip@r1", "sub-alpha",
        "https://huggingface.co/org/alpha")
    assert first["scored_at"] == pd.Timestamp("2026-02-03T04:05:06Z")
    # A name a spreadsheet would run as a formula is text in the CSV, and as it is in the Parquet file.
    assert "'" + FORMULA in set(sheet["model"]) and FORMULA in set(typed["model"])
    assert typed.loc[typed["model"] == FORMULA, "model_url"].isna().all()  # javascript: is never a link


def test_the_track_download_ranks_what_the_overview_shows(served):
    """Iconicity opens on CRT Table 1's metric by kind, still and moving each ranked apart (paper rows only here):
    the download ranks that same metric on both kinds, as the page does, not one cell of it."""
    client, _ = served
    inputs = ("iconicity", None, "", [], None, None, "", [], ["Rank", "Model"], None)
    _, metric, table, *_ = client.predict(*inputs, api_name="/overview")
    shown = pd.DataFrame(table["data"], columns=table["headers"])
    _, parquet = client.predict(*inputs, api_name="/download")
    typed = pd.read_parquet(parquet)
    ranked = typed[typed["rank"].notna()]
    assert set(ranked["metric"]) == {metric["value"]} and set(ranked["slice"]) == {"kind"}
    assert sorted(ranked["slice_value"].unique()) == sorted(shown["Slice"].unique()) == ["moving", "still"]
    for kind, rows in ranked.groupby("slice_value"):
        page = shown[shown["Slice"] == kind]
        assert list(rows.sort_values("rank")["rank"]) == list(page["Rank"]) == [1, 2, 3, 4, 5]
        assert rows.sort_values("rank")["value"].is_monotonic_decreasing  # higher is better


def test_the_overall_download_and_api_give_win_rates_as_numbers(served):
    client, _ = served
    rows = pd.DataFrame(client.predict("awareness", api_name="/overall"))
    means = rows[rows["metric"] == exports.MEAN_WIN_RATE].set_index("model")
    assert means["value"].to_dict() == {"Alpha": 1.0, "Beta": 0.5, FORMULA: 0.0}  # beats 2, 1 and 0 of 2 others
    assert means["rank"].to_dict() == {"Alpha": 1, "Beta": 2, FORMULA: 3}
    assert set(means["track"]) == {"overall"} and set(means["slice_value"]) == {"awareness"}
    assert (means["ci_low"] <= means["value"]).all() and (means["value"] <= means["ci_high"]).all()
    per_track = rows[rows["metric"] == exports.WIN_RATE]
    assert dict(zip(per_track["model"], per_track["value"])) == {"Alpha": 1.0, "Beta": 0.5, FORMULA: 0.0}
    headline = rows[rows["metric"] == "clip_score"]
    assert dict(zip(headline["model"], headline["value"])) == {m: sum(v[2].values()) / 10 for m, v in MODELS.items()}
    csv, parquet = client.predict("overall", None, "", [], None, None, "", [], ["Rank"], "awareness",
                                  api_name="/download")
    assert pd.read_parquet(parquet)["value"].tolist() == rows["value"].tolist()


def test_leaderboard_api_takes_ids_and_returns_records(served):
    client, _ = served
    records = client.predict("awareness", "clip_score", "country", "Nigeria", api_name="/leaderboard")
    # Nothing here records which prompts Nigeria holds (no per-image rows, no dataset served): no prompt set to
    # compare on, so the rows' own values are given, best first, and no rank (rank rule 2 ranks by comparisons).
    assert [(r["model"], r["value"], r["n"], r["rank"]) for r in records] == [
        ("Alpha", pytest.approx(2.375 / 3), 3, None), ("Beta", pytest.approx(1.75 / 3), 3, None),
        (FORMULA, pytest.approx(0.625 / 3), 3, None)]
    assert records[0]["not_ranked"].startswith("which prompts this slice holds is recorded nowhere here")
    assert records[0]["ci_low"] is None and records[0]["provenance"] == "scored"  # 3 prompts: too few for a CI
    assert records[0]["slice"] == "country" and records[0]["slice_value"] == "Nigeria"
    overall = client.predict("awareness", "clip_score", api_name="/leaderboard")
    assert [r["model"] for r in overall] == ["Alpha", "Beta", FORMULA] and overall[0]["scored_at"] == \
        "2026-02-03T04:05:06+00:00"


def test_docs_leaderboard_api_block_runs_against_a_live_app(served):
    """The Python block of docs/leaderboard.md's API section, as a reader copies it, against this live app (its
    address for the block's http://127.0.0.1:7860/): the records, the overall and the queue it names."""
    client, _ = served
    [block] = [b for b in doc_blocks.blocks(doc_blocks.ROOT / "docs" / "leaderboard.md")
               if b.lang == "python" and "gradio_client" in b.code]
    assert "http://127.0.0.1:7860/" in block.code
    names: dict = {}
    exec(block.code.replace("http://127.0.0.1:7860/", client.src), names)  # noqa: S102 - the page's own block
    assert [(r["model"], r["slice_value"]) for r in names["rows"]] == [
        ("Alpha", "Nigeria"), ("Beta", "Nigeria"), (FORMULA, "Nigeria")]
    means = [r for r in names["overall"] if r["metric"] == "mean_win_rate"]
    assert [r["model"] for r in means] == ["Alpha", "Beta", FORMULA] and means[0]["track"] == "overall"
    assert names["queue"]["notice"] is None and names["queue"]["workers"] == [] and len(names["queue"]["jobs"]) == 2


@pytest.mark.parametrize("arguments, names", [
    (("iconicity + awareness",), "no track set 'iconicity + awareness'; valid track set ids: awareness"),
    (("awareness", "CLIPScore (2.5 max(cos, 0))"), "no metric 'CLIPScore (2.5 max(cos, 0))' in track 'awareness'; "
                                                   "valid metric ids: clip_score, "),
    (("Awareness (CUBE)", "clip_score"), "no track 'Awareness (CUBE)'; valid track ids: awareness, "),
    (("awareness", "clip_score", "country", "Japan"), "valid slice value ids: Brazil, Nigeria"),
    (("awareness", "clip_score", "overall", "all", "abc"), "no protocol 'abc'"),
])
def test_an_unknown_id_is_an_error_that_names_the_valid_ones(served, arguments, names):
    from gradio_client.exceptions import AppError

    client, _ = served
    with pytest.raises(AppError) as raised:
        client.predict(*arguments, api_name="/overall" if len(arguments) == 1 else "/leaderboard")
    assert names in str(raised.value)


def test_queue_api_returns_jobs_as_data_not_markdown(served):
    client, store = served
    queue = client.predict(api_name="/queue")
    jobs = {job["id"]: job for job in queue["jobs"]}
    assert set(jobs) == {"job-waiting", "job-failed"} and queue["workers"] == []
    waiting, failed_job = jobs["job-waiting"], jobs["job-failed"]
    assert (waiting["state"], waiting["model"], waiting["model_id"], waiting["reason"]) == (
        "PENDING", "Waiting <b>model</b>", "org/w", None)  # as submitted: no escaping, no badge
    assert failed_job["state"] == "FAILED" and failed_job["model"] == "Failed_model"
    assert failed_job["reason"] == "no local copy in STORE/datasets/cube_1k <b>"  # the server folder hidden
    assert failed_job["submitted_at"] <= failed_job["started_at"] <= failed_job["finished_at"]
    assert str(store.root) not in repr(queue) and html.escape("<b>") not in repr(queue)


@pytest.fixture(scope="module")
def empty_served(tmp_path_factory):
    """A real Gradio server on a fresh store: nothing scored, no paper rows, an empty queue."""
    store = Store(tmp_path_factory.mktemp("empty-store") / "store")
    with launched(store, "ada") as url:
        from gradio_client import Client

        yield Client(url, verbose=False)


# What a page (or a script reading the API's description) sends to each read endpoint on an empty leaderboard: the
# pickers empty, the filters off, the columns shown by default.
EMPTY_FILTERS = ("", [], None, None, "", [], display.SHOWN_COLUMNS, None)
STARTING_VALUES = {
    "/overview": (None, None, *EMPTY_FILTERS), "/download": (None, None, *EMPTY_FILTERS),
    "/slices": (None, None, None, None, ""), "/overall": (), "/queue": (), "/compare": ([], None),
    "/details": ("",), "/datasets": (None, None, "(any)", "(any)", "", ""), "/method": (None,),
    "/world_map": (None, None, None, None), "/model_page": (None,),
}


def test_empty_leaderboard_every_read_endpoint_says_what_fills_it(empty_served, capfd):
    """On a fresh store every endpoint a visitor reads answers with the empty view (its sentence, a table with no
    row, a download of the columns alone), and the server logs no traceback. The endpoints that change things
    (submit, rerun, delete) and ``/leaderboard`` (which takes a track, and there is none) are the exceptions."""
    from gradio_client.exceptions import AppError

    client = empty_served
    endpoints = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    assert endpoints - set(STARTING_VALUES) == {"/leaderboard", "/submit", "/submit_form", "/rerun", "/delete"}
    answers = {name: client.predict(*values, api_name=name) for name, values in STARTING_VALUES.items()}

    assert answers["/overall"] == []
    csv, parquet = answers["/download"]
    for frame in (pd.read_csv(csv), pd.read_parquet(parquet)):
        assert frame.empty and list(frame.columns) == list(exports.COLUMNS)
    track, _, table, note, *_ = answers["/overview"]
    assert track["value"] == "papers" and table["data"] == []
    assert note.startswith("**No model has been scored on CultureLens suite v1 yet.**")
    *_, table, note, heat = answers["/slices"][:7]
    assert table["data"] == [] and note.startswith("Nothing is scored on this leaderboard yet: a model's rows appear "
                                                   "here")
    assert "Nothing is scored on this leaderboard yet" in heat
    _, _, table, note, *_ = client.predict("overall", None, *EMPTY_FILTERS, api_name="/overview")
    assert table["data"] == [] and note.startswith("No model has been scored on the suite's tracks yet")
    csv, _ = client.predict("overall", None, *EMPTY_FILTERS, api_name="/download")
    assert pd.read_csv(csv).empty
    assert answers["/queue"] == {"jobs": [], "workers": [], "notice": None}
    assert answers["/compare"][-1] == "Pick 1-4 scored submissions and a prompt."
    assert answers["/world_map"][4].startswith("No metric has values by country yet: a model's map appears once")
    assert answers["/model_page"][1] == ("No model is on this leaderboard yet: a model's page appears once its "
                                         "submission is scored.")
    with pytest.raises(AppError, match="no track 'awareness'; valid track ids: none yet"):
        client.predict("awareness", "clip_score", api_name="/leaderboard")
    assert "Traceback" not in capfd.readouterr().err


def test_empty_leaderboard_method_page_without_a_known_track_says_which_have_one(empty_served, capfd):
    """``/method`` with no track (the picker's value before a choice) or a name no track module registers answers
    a sentence naming the tracks that have a method page, not an error."""
    tracks_with_a_page = "awareness, diversity, iconicity, variability, relevance, expectations"
    assert empty_served.predict(None, api_name="/method") == \
        f"Pick a track to read its method page: {tracks_with_a_page} (track ids)."
    assert empty_served.predict("  ", api_name="/method") == \
        f"Pick a track to read its method page: {tracks_with_a_page} (track ids)."
    assert empty_served.predict("nosuch", api_name="/method") == (
        "### Nosuch\n\nNo method page is registered for the track <code>nosuch</code>: the tracks with one are "
        f"{tracks_with_a_page}.")
    assert empty_served.predict("awareness", api_name="/method").startswith("### Awareness (CUBE)\n\n*Does the image")
    assert "Traceback" not in capfd.readouterr().err

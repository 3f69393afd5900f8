"""Stored rankings (issue 55) and a re-run seen without restart (issue 50, finding 3): every ranking a view reads
is computed once per change of results and kept; these tests compare what the views read with the rankings
computed fresh from the per-prompt values (``rankings.rank_frame``, itself checked against rank rule 2 written out
in ``tests/test_rankings.py``), on hand-built stores after additions, deletions, re-runs and a release install, and
check that no view shows a stale one as current.

Results are written with the production ``benchmark.results.write_folder`` into real stores read by real DuckDB
catalogs."""

from __future__ import annotations

import html
import logging
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark import results
from benchmark.run_record import RunRecord
from leaderboard import hub_sync, pickup, rankings, render, stored_rankings, tables
from leaderboard.catalog import Catalog
from leaderboard.repo import LocalRepo
from leaderboard.store import Store
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.site import Site
from leaderboard.ui.slices import SlicesTab
from tests.helpers import serving, until
from tests.test_snapshot import _fresh, _make_store
from tests.test_rankings import DEFAULTS, FOUR_MODELS, PROMPTS, rank_rule_by_hand, write_result

NUMBERS = ["value", "ci_low", "ci_high", "n", "refused", "rank", "rank_low", "rank_high", "not_ranked"]


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "store")


def fresh(cat: Catalog, track: str, metric: str, slice_name: str = "overall", slice_value: str = "all"
          ) -> pd.DataFrame:
    """The ranking computed now from the per-prompt values, by model (the rule, not the store): every row of the
    one protocol there is, the absent ones included."""
    [protocol] = tables.protocols(cat, track, metric, slice_name, slice_value)["protocol_id"]
    frame = cat.query(f"SELECT {tables.COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    frame = rankings.with_absent(frame, rankings.overall_rows(cat, track, metric, protocol), slice_name, slice_value)
    return rankings.rank_frame(cat, frame, track, metric, slice_name, slice_value)[0].set_index("model")[NUMBERS]


def shown(cat: Catalog, track: str, metric: str, slice_name: str = "overall", slice_value: str = "all",
          filters: tables.Filters = tables.Filters()) -> pd.DataFrame:
    """What the Overview's table reads (``tables.ranked``), by model."""
    return tables.ranked(cat, track, metric, slice_name, slice_value, filters)[0].set_index("model")[NUMBERS]


def same(stored: pd.DataFrame, computed: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(stored.sort_index().astype(object), computed.sort_index().astype(object))


def rerun(store: Store, sid: str, model: str, track: str, values: dict[str, float]) -> None:
    """What a worker's re-run leaves: a new folder renamed over the old one under the same name."""
    metric, higher, dataset, version, backbones = DEFAULTS[track]
    protocol = results.protocol_columns({"dataset": dataset, "images_per_prompt": 10, "metric_version": version,
                                        "backbones": backbones})
    common = {"provenance": "scored", "submission_id": sid, "model": model, "track": track, "metric": metric,
              "metric_version": version, "higher_is_better": higher, "range_low": 0.0, "range_high": 1.0,
              "seeds": ",".join(map(str, range(10))), "dataset": dataset, "scored_at": "2026-01-02T00:00:00",
              **protocol}
    rows = [{**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(list(values.values()))),
             "n": len(values)}]
    rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": 10} for p, v in values.items()]
    results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid, scored_at="2026-01-02T00:00:00"), replace=True)


def four(store: Store) -> None:
    for i, (model, values) in enumerate(FOUR_MODELS.items()):
        write_result(store, f"s{i}", model, "iconicity", dict(zip(PROMPTS, values)))


def test_stored_rankings_equal_the_fresh_ones_after_an_addition_a_deletion_and_a_re_run(store):
    four(store)
    cat = Catalog(store)
    same(shown(cat, "iconicity", "crt"), fresh(cat, "iconicity", "crt"))
    # Known in advance (rank rule 2 written out): Alpha and Beta share rank 1, Gamma is 3.
    assert {m: tuple(r) for m, r in shown(cat, "iconicity", "crt")[["rank", "rank_low", "rank_high"]].iterrows()} \
        == rank_rule_by_hand(FOUR_MODELS, higher=True)

    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))  # accepted: a fifth model
    cat.refresh(force=True)
    after = shown(cat, "iconicity", "crt")
    same(after, fresh(cat, "iconicity", "crt"))
    assert after.loc["Epsilon", "value"] == 1.0 and after.loc["Epsilon", "rank"] == 1 and len(after) == 5

    store.results_folders.drop("s0")  # Alpha deleted, as the store deletes a submission's results
    cat.refresh(force=True)
    after = shown(cat, "iconicity", "crt")
    same(after, fresh(cat, "iconicity", "crt"))
    assert "Alpha" not in after.index and len(after) == 4

    rerun(store, "s2", "Gamma", "iconicity", dict.fromkeys(PROMPTS, 0.875))  # re-run: the same folder name
    cat.refresh(force=True)
    after = shown(cat, "iconicity", "crt")
    same(after, fresh(cat, "iconicity", "crt"))
    assert after.loc["Gamma", "value"] == 0.875 and after.loc["Gamma", "refused"] == 0.0


def test_stored_rankings_of_every_slice_value_heatmap_and_chart_equal_the_fresh_ones(store):
    """Per country: each value's table, the heatmap's cells and a chart's values read the stored rankings, and equal
    what the rule gives from the per-prompt values now; a model that answered none of a country's prompts is there
    at the worst value, 100% refused."""
    countries = {p: ("Japan" if i < 10 else "Nigeria") for i, p in enumerate(PROMPTS + ["p13", "p14", "p15"])}
    rng = np.random.default_rng(3)
    from tests.test_rankings import write_scored
    for i, model in enumerate(("A", "B", "C")):
        answers = {p: float(v) for p, v in zip(countries, rng.integers(0, 9, len(countries)) / 8)}
        if model == "C":
            answers = {p: v for p, v in answers.items() if countries[p] == "Japan"}  # none of Nigeria's
        write_scored(store, f"c{i}", model, answers, countries=countries, when=i)
    cat = Catalog(store)
    for value in ("Japan", "Nigeria"):
        same(shown(cat, "iconicity", "crt", "country", value), fresh(cat, "iconicity", "crt", "country", value))
    assert shown(cat, "iconicity", "crt", "country", "Nigeria").loc["C", ["value", "refused"]].tolist() == [0.0, 1.0]
    heat = tables.heatmap(cat, "iconicity", "crt", "country")
    charted = stored_rankings.ranked_values(cat, tables.rows(cat, "iconicity", "crt", "country"))
    for value in ("Japan", "Nigeria"):
        expected = fresh(cat, "iconicity", "crt", "country", value)["value"]
        assert heat[value].to_dict() == pytest.approx(expected.to_dict())
        mine = charted[charted["slice_value"] == value].set_index("model")["value"]
        assert mine.to_dict() == pytest.approx(expected.to_dict())
    assert list(heat.index) == list(shown(cat, "iconicity", "crt").index)  # in the overall ranking's order


def test_stored_rankings_overall_win_rates_equal_the_fresh_ones_and_filters_hide_rows_only(store):
    rng = np.random.default_rng(7)
    values = {model: {track: list(rng.integers(low, low + 4, 12) / 8) for track in DEFAULTS}
              for model, low in (("Alpha", 5), ("Beta", 3), ("Gamma", 0))}
    for i, (model, per_track) in enumerate(values.items()):
        for track, prompt_values in per_track.items():
            write_result(store, f"{track[:3]}{i}", model, track, dict(zip(PROMPTS, prompt_values)))
    cat = Catalog(store)

    def computed() -> pd.DataFrame:  # the rule now: win rates over the chosen set's headline rows
        frame, _ = tables.headline_protocol_rows(cat, tables.headline_rows(cat))
        return rankings.win_rates(frame, cat).set_index("model")

    columns = ["win_rate", "win_low", "win_high", "rank", "rank_low", "rank_high", "awareness", "iconicity"]
    wide = tables.overall(cat)[0].set_index("model")
    same(wide[columns], computed()[columns])
    assert wide.loc["Alpha", "rank"] == 1 and wide.loc["Gamma", "win_rate"] == 0.0
    # Filters hide rows of the stored ranking: Beta's numbers are the same with the others hidden.
    only = tables.overall(cat, tables.Filters.parse("Beta"))[0].set_index("model")
    assert list(only.index) == ["Beta"]
    same(only[columns], wide.loc[["Beta"], columns])
    assert shown(cat, "iconicity", "crt", filters=tables.Filters.parse("Gamma")).loc["Gamma", "rank"] == \
        shown(cat, "iconicity", "crt").loc["Gamma", "rank"]

    for track in ("awareness", "iconicity"):  # a fourth model, better than all on both tracks
        write_result(store, f"{track[:3]}9", "Delta", track, dict.fromkeys(PROMPTS, 1.0))
    cat.refresh(force=True)
    wide = tables.overall(cat)[0].set_index("model")
    same(wide[columns], computed()[columns])
    assert wide.loc["Delta", "rank"] == 1 and len(wide) == 4


def test_stored_rankings_one_submission_recomputes_its_own_track_and_protocol_only(store):
    four(store)
    for i, model in enumerate(FOUR_MODELS):
        write_result(store, f"a{i}", model, "awareness", dict(zip(PROMPTS, FOUR_MODELS[model][::-1])))
    cat = Catalog(store)
    assert tables.recompute(cat) == 2  # iconicity and awareness, overall slice each
    kept = stored_rankings.of(cat).ranking("iconicity", "crt", tables.protocols(cat, "iconicity", "crt")
                                            ["protocol_id"].iloc[0])
    assert tables.recompute(cat) == 0  # nothing changed: nothing computed
    write_result(store, "a9", "Epsilon", "awareness", dict.fromkeys(PROMPTS, 0.5))
    cat.refresh(force=True)
    assert tables.recompute(cat) == 1  # awareness's ranking only
    again = stored_rankings.of(cat).ranking("iconicity", "crt", tables.protocols(cat, "iconicity", "crt")
                                             ["protocol_id"].iloc[0])
    assert again is kept  # iconicity's ranking kept as it was, not computed again
    same(shown(cat, "awareness", "clip_score"), fresh(cat, "awareness", "clip_score"))


def test_stored_rankings_kept_on_disk_are_read_at_restart_and_never_when_results_changed(store, monkeypatch):
    four(store)
    store.seed_reported()  # as `culturelens serve` does at each start: the papers' file written again
    first = Catalog(store)
    assert tables.recompute(first) > 0
    assert list((store.root / stored_rankings.FOLDER).glob("*.parquet"))
    before = tables.overall(first)[0]
    computed = []  # the overall ranking's computation, counted (it runs as it is)
    real = tables._set_ranking
    monkeypatch.setattr(tables, "_set_ranking", lambda *args: computed.append(1) or real(*args))
    store.seed_reported()
    restarted = Catalog(store)  # a restart: the same results, read back from the files
    assert tables.recompute(restarted) == 0
    same(shown(restarted, "iconicity", "crt"), fresh(restarted, "iconicity", "crt"))
    back = tables.overall(restarted)[0]  # the overall's win rates too, with their note and each track's rows
    assert not computed
    pd.testing.assert_frame_equal(back, before)
    assert back.attrs["note"] == before.attrs["note"] and back.attrs["ranked"].keys() == before.attrs["ranked"].keys()
    for track, rows in before.attrs["ranked"].items():
        pd.testing.assert_frame_equal(back.attrs["ranked"][track], rows)
    rerun(store, "s3", "Delta", "iconicity", dict.fromkeys(PROMPTS, 0.0))  # changed while the app was down
    again = Catalog(store)
    assert tables.recompute(again) == 1  # the file is of other results: computed again
    assert computed  # and the overall too
    after = shown(again, "iconicity", "crt")
    same(after, fresh(again, "iconicity", "crt"))
    assert after.loc["Delta", "value"] == 0.0


def test_stored_rankings_no_view_shows_a_stale_one_as_current(store):
    """In the app the rankings are recomputed in a thread: until it ends a view shows the ranking before the
    change and says it is updating, the new model listed apart; then the new one. Off the app a stale ranking is
    computed again before it is read."""
    four(store)
    cat = Catalog(store)
    gate = threading.Event()

    def everything(catalog):
        gate.wait(60)
        return tables.recompute(catalog)

    stored = stored_rankings.attach(cat, background=True, everything=everything)
    before, note = tables.ranked(cat, "iconicity", "crt")
    assert stored_rankings.UPDATING not in note and len(before) == 4
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    cat.refresh(force=True)
    during, note = tables.ranked(cat, "iconicity", "crt")
    assert stored_rankings.UPDATING in note and stored.recomputing()
    assert during.set_index("model").loc["Epsilon", "not_ranked"] == stored_rankings.NOT_YET
    same(during.set_index("model").loc[list(FOUR_MODELS), NUMBERS[:-1]], before.set_index("model")[NUMBERS[:-1]])
    gate.set()
    stored.wait(60)
    after, note = tables.ranked(cat, "iconicity", "crt")
    assert stored_rankings.UPDATING not in note
    same(after.set_index("model")[NUMBERS], fresh(cat, "iconicity", "crt"))

    plain = Catalog(store)  # off the app: recomputed when read
    write_result(store, "s5", "Zeta", "iconicity", dict.fromkeys(PROMPTS, 0.0))
    plain.refresh(force=True)
    now, note = tables.ranked(plain, "iconicity", "crt")
    assert stored_rankings.UPDATING not in note and now.set_index("model").loc["Zeta", "refused"] == 0.0
    same(now.set_index("model")[NUMBERS], fresh(plain, "iconicity", "crt"))


def test_stored_rankings_after_a_restart_a_change_shows_the_ranking_on_disk_while_it_updates(store):
    """A restarted app reads its rankings back from ``STORE/rankings/``; when results land next, a view shows the
    rankings of those files (a track's, the overall), saying they are updating and listing the new model apart,
    instead of computing the new ones while the visitor waits (a 1,000-submission store: 15 s for the first
    Slices view); then the new ones."""
    four(store)
    first = Catalog(store)  # the app before its restart: rankings written to disk
    tables.recompute(first)
    before, _ = tables.ranked(first, "iconicity", "crt")
    cat = Catalog(store)  # restarted; no view opened before the change
    gate = threading.Event()
    stored = stored_rankings.attach(cat, background=True,
                                    everything=lambda catalog: gate.wait(60) and tables.recompute(catalog))
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    cat.refresh(force=True)
    during, note = tables.ranked(cat, "iconicity", "crt")
    assert stored_rankings.UPDATING in note and stored.recomputing()
    assert during.set_index("model").loc["Epsilon", "not_ranked"] == stored_rankings.NOT_YET
    same(during.set_index("model").loc[list(FOUR_MODELS), NUMBERS], before.set_index("model")[NUMBERS])
    wide = tables.overall(cat)[0]  # the overall ranking too: its folder's, saying it is updating
    assert wide.attrs["note"].startswith(stored_rankings.UPDATING) and sorted(wide["model"]) == sorted(FOUR_MODELS)
    gate.set()
    until(lambda: not stored.recomputing(), 60, "the update's end")
    after, note = tables.ranked(cat, "iconicity", "crt")
    assert stored_rankings.UPDATING not in note
    same(after.set_index("model")[NUMBERS], fresh(cat, "iconicity", "crt"))
    wide = tables.overall(cat)[0].set_index("model")
    assert not wide.attrs["note"].startswith(stored_rankings.UPDATING) and wide.loc["Epsilon", "rank"] == 1


def test_stored_rankings_a_view_is_made_once_per_state_and_never_read_stale(store, monkeypatch):
    """A view (the Slices tab, the Overview) is made once per state of the results and rankings and read by every
    later click with the same choices; a new submission makes it again (listed apart while the rankings update,
    ranked after), and the views a first visit opens are made by the recompute's thread when it ends."""
    four(store)
    site = Site(store, "ada")
    gate = threading.Event()
    stored = stored_rankings.attach(site.catalog, background=True,
                                    everything=lambda catalog: gate.wait(60) and tables.recompute(catalog))
    slices, overview = SlicesTab(site), OverviewTab(site)
    made = []  # the views made, counted (they run as they are)
    for tab, name in ((slices, "_slices"), (overview, "_view")):
        real = getattr(tab, name)
        monkeypatch.setattr(tab, name, lambda *args, real=real, name=name: made.append(name) or real(*args))
    choice = ("iconicity", "crt", "overall", "all", "")

    def models(view) -> list[str]:  # the table's Model cells link to each model's page: "[Alpha](?tab=model...)"
        return sorted(re.sub(r"^\[([^\]]*)\]\([^)]*\)", r"\1", cell) for cell in view[4]["Model"])

    first = slices.slices(*choice)
    assert slices.slices(*choice)[5] == first[5] and made == ["_slices"]  # the second click: read, not made
    assert models(first) == sorted(FOUR_MODELS)
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)
    during = slices.slices(*choice)
    assert stored_rankings.UPDATING in html.unescape(during[5]) and stored.recomputing() and made == ["_slices"] * 2
    epsilon = during[4][during[4]["Model"].str.startswith("[Epsilon]")]
    assert len(epsilon) == 1 and pd.isna(epsilon["Rank"].iloc[0])  # listed apart until the update ends
    stored.after = lambda: (slices.slices(*choice), overview.view("iconicity", "crt", "", [], None, None, None,
                                                                   None, None))
    gate.set()
    stored.wait(60)
    assert made == ["_slices"] * 3 + ["_view"]  # made by the thread when the recompute ended
    after = slices.slices(*choice)
    assert stored_rankings.UPDATING not in html.unescape(after[5]) and made == ["_slices"] * 3 + ["_view"]
    ranked = fresh(site.catalog, "iconicity", "crt")
    assert ranked.loc["Epsilon", "rank"] == 1 and models(after) == sorted(ranked.index)


def test_stored_rankings_a_callers_change_to_a_view_never_reaches_the_kept_one(store):
    """Each read of a kept view is the caller's own: a handler that edits what it was given (a table's cell, a
    record, a note, an update's value) leaves the next visitor's view as it was made."""
    four(store)
    site = Site(store, "ada")
    stored_rankings.attach(site.catalog)
    overview = OverviewTab(site)
    records = overview.leaderboard_api("iconicity", "crt")
    view = overview.view("iconicity", "crt", "", [], None, None, None, None, None)
    first_model, first_line = records[0]["model"], view["line"]
    records[0]["model"] = "Mallory"
    records.append({"model": "Mallory"})
    view["frame"].loc[view["frame"].index[0], "Model"] = "Mallory"
    view["line"] += " (edited)"
    view["track"]["value"] = "Mallory"
    again = overview.leaderboard_api("iconicity", "crt")
    assert again[0]["model"] == first_model and len(again) == len(records) - 1
    shown = overview.view("iconicity", "crt", "", [], None, None, None, None, None)
    assert shown["line"] == first_line and shown["track"]["value"] == "iconicity"
    assert "Mallory" not in set(shown["frame"]["Model"])
    grid = {"rows": [[1, 2]], "array": np.array([1.0, 2.0]), "pair": (["a"], {"b": 1})}
    mine = stored_rankings.own_copy(grid)
    mine["rows"][0][0], mine["array"][0], mine["pair"][0][0], mine["pair"][1]["b"] = 9, 9.0, "z", 9
    assert grid == {"rows": [[1, 2]], "array": grid["array"], "pair": (["a"], {"b": 1})}
    assert grid["array"].tolist() == [1.0, 2.0]


def test_stored_rankings_a_view_made_from_a_previous_ranking_is_kept_until_the_new_one_is_computed(store):
    """Results land while the thread is still busy with the recompute before them (here: in its after-hook, making
    the first views): a view then shows the previous overall, saying so, and that thread runs once more when its
    hook ends, so the new results are ranked and shown without another visit (a view kept until a recompute that
    never came stayed stale for good: the badge test's hang)."""
    four(store)
    site = Site(store, "ada")
    stored = stored_rankings.attach(site.catalog, background=True, everything=tables.recompute)
    busy, release = threading.Event(), threading.Event()
    stored.after = lambda: (busy.set(), release.wait(60))
    stored.start()
    assert busy.wait(60)  # the recompute of the four models has ended; its thread is in its after-hook
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)
    during = tables.overall(site.catalog)[0]
    assert during.attrs["note"].startswith(stored_rankings.UPDATING) and "Epsilon" not in set(during["model"])
    assert tables.overall(site.catalog)[0].attrs["note"] == during.attrs["note"]  # kept: read, still updating
    stored.after = None
    release.set()
    until(lambda: not stored.recomputing(), 60, "the thread's second run ended")
    wide = tables.overall(site.catalog)[0].set_index("model")
    assert not wide.attrs["note"].startswith(stored_rankings.UPDATING)
    assert wide.loc["Epsilon", "rank"] == 1 and len(wide) == 5


def test_stored_rankings_pages_redrawn_while_rankings_update_make_each_view_once(store, monkeypatch):
    """When results land every open page redraws at once: while the rankings update, the first call makes the
    view (the previous ranking, saying it is updating) and the others, arriving while it is made, wait for it and
    read it instead of making it again; once the update ends the view is made anew from the new ranking."""
    four(store)
    site = Site(store, "ada")
    gate = threading.Event()
    stored = stored_rankings.attach(site.catalog, background=True,
                                    everything=lambda catalog: gate.wait(60) and tables.recompute(catalog))
    slices = SlicesTab(site)
    choice = ("iconicity", "crt", "overall", "all", "")
    slices.slices(*choice)
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)

    class Making(dict):  # counts the calls that find the view being made (and so wait for it)
        found = 0

        def get(self, key, default=None):
            other = super().get(key, default)
            Making.found += other is not None and key[0] == "slices"
            return other

    stored._making = Making()
    made, real = [], slices._slices

    def making(*args):  # the first call's making lasts until the other pages have found it being made
        made.append(args)
        until(lambda: Making.found == 7, 60, "the 7 other pages finding the view being made")
        return real(*args)

    monkeypatch.setattr(slices, "_slices", making)
    pages = [None] * 8
    threads = [threading.Thread(target=lambda i=i: pages.__setitem__(i, slices.slices(*choice))) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(made) == 1 and stored.recomputing()
    notes = {html.unescape(page[5]) for page in pages}
    assert len(notes) == 1 and stored_rankings.UPDATING in notes.pop()
    monkeypatch.setattr(slices, "_slices", real)
    gate.set()
    until(lambda: not stored.recomputing(), 60, "the update's end")
    after = slices.slices(*choice)
    assert stored_rankings.UPDATING not in html.unescape(after[5])
    assert fresh(site.catalog, "iconicity", "crt").loc["Epsilon", "rank"] == 1
    assert after[4]["Model"].iloc[0].startswith("[Epsilon]")


def test_stored_rankings_the_first_pages_rankings_show_before_the_others_are_recomputed(store, monkeypatch):
    """An added model changes every ranking of its protocol (4 minutes of them at 1,000 submissions): the thread
    recomputes the first page's (each headline ranking on the whole prompt set, the overall) first and publishes
    them, so a page redrawn then shows the new model ranked while the others are still being recomputed."""
    four(store)
    site = Site(store, "ada")
    stored = stored_rankings.attach(site.catalog, background=True, everything=tables.recompute)
    tables.recompute(site.catalog)
    slices = SlicesTab(site)
    choice = ("iconicity", "crt", "overall", "all", "")
    assert not slices.slices(*choice)[4]["Model"].iloc[0].startswith("[Epsilon]")
    first, rest = threading.Event(), threading.Event()  # the thread held before each part
    current, refresh_group = stored.current, stored.refresh_group
    monkeypatch.setattr(stored, "current", lambda key: first.wait(60) and current(key))
    monkeypatch.setattr(stored, "refresh_group", lambda *args: rest.wait(60) and refresh_group(*args))
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)
    runs = stored.runs
    overview = OverviewTab(site)
    during = slices.slices(*choice)  # the previous ranking, and the thread started
    assert stored_rankings.UPDATING in html.unescape(during[5])
    shown = overview.view("iconicity", "crt", "", [], None, None, None, None, None)
    assert stored_rankings.UPDATING in shown["line"]  # where people read first, not only in the folded details
    first.set()
    until(lambda: stored.runs > runs, 60, "the first page's rankings published")
    published = slices.slices(*choice)
    assert stored.recomputing() and stored_rankings.UPDATING not in html.unescape(published[5])
    shown = overview.view("iconicity", "crt", "", [], None, None, None, None, None)
    assert stored_rankings.UPDATING not in shown["line"]
    assert render.plain(stored_rankings.UPDATING) not in shown["details"]
    assert published[4]["Model"].iloc[0].startswith("[Epsilon]")
    wide = tables.overall(site.catalog)[0].set_index("model")
    assert not wide.attrs["note"].startswith(stored_rankings.UPDATING) and wide.loc["Epsilon", "rank"] == 1
    rest.set()
    until(lambda: not stored.recomputing(), 60, "the run's end")


def test_stored_rankings_a_stop_ends_the_thread_at_its_next_ranking_and_a_restart_computes_the_rest(
        store, monkeypatch, caplog):
    """A server stopped while its rankings' thread recomputes (SIGTERM, a Space's restart: ``Service.stop``): the
    thread ends at its next ranking instead of running on while Python tears down (where it failed in pandas' code
    and wrote a traceback into the Space's log), logs nothing and starts no more; after a restart every ranking
    equals the fresh one."""
    four(store)
    site = Site(store, "ada")
    stored = stored_rankings.attach(site.catalog, background=True, everything=tables.recompute)
    tables.recompute(site.catalog)
    inside, held = threading.Event(), threading.Event()
    refresh_group = stored.refresh_group

    def holding(*args):  # the thread held between the first page's rankings and the rest
        inside.set()
        held.wait(60)
        return refresh_group(*args)
    monkeypatch.setattr(stored, "refresh_group", holding)
    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)
    with caplog.at_level(logging.ERROR, logger="culturelens.stored_rankings"):
        stored.start()
        assert inside.wait(60)
        stored.stop(timeout=0)  # asked while the thread is busy: it ends at its next checkpoint
        held.set()
        stored.wait(60)
        assert not stored.recomputing() and not caplog.records
        stored.start()  # none starts after a stop
        assert not stored.recomputing()
    cat = Catalog(store)  # the restart: what the stopped thread left undone is computed, and equals the fresh one
    assert tables.recompute(cat) > 0
    same(shown(cat, "iconicity", "crt"), fresh(cat, "iconicity", "crt"))
    assert shown(cat, "iconicity", "crt").loc["Epsilon", "rank"] == 1


def test_stored_rankings_a_download_is_written_once_per_state_and_holds_the_fresh_ranking(store):
    """A track's download (CSV and Parquet) is written once per state of the results and handed out again to the
    next click; written again when its files are gone (the download folder's hourly clean-up) and when results
    change, each time with the ranking computed fresh (Epsilon, added, ranked first). The tables behind it
    (``tables.ranked``, ``tables.overall``) are read, not made, by a second call, and never stale either."""
    four(store)
    site = Site(store, "ada")
    overview = OverviewTab(site)

    def download() -> list[str]:
        return overview.download("iconicity", "crt", "", [], None, None, "", [], [])

    def crt_ranks(paths: list[str]) -> pd.Series:
        typed = pd.read_parquet(paths[1])
        shown = typed[(typed["metric"] == "crt") & (typed["slice"] == "overall")].set_index("model")
        return shown["rank"].astype(float).to_dict()

    first = download()
    written = [Path(p).stat().st_mtime_ns for p in first]
    assert download() == first and [Path(p).stat().st_mtime_ns for p in first] == written  # read, not written
    expected = fresh(site.catalog, "iconicity", "crt")["rank"].astype(float).to_dict()
    assert crt_ranks(first) == expected and len(expected) == 4
    csv = pd.read_csv(first[0])  # the same rows as the Parquet file, for a spreadsheet
    assert len(csv) == len(pd.read_parquet(first[1])) and set(csv["model"]) == set(FOUR_MODELS)
    ranked = tables.ranked(site.catalog, "iconicity", "crt")
    assert tables.ranked(site.catalog, "iconicity", "crt")[0] is not ranked[0]  # each caller its own copy
    shutil.rmtree(Path(first[0]).parent)  # what the clean-up does to files an hour old
    again = download()
    assert again != first and all(Path(p).exists() for p in again)
    assert crt_ranks(again) == expected

    write_result(store, "s4", "Epsilon", "iconicity", dict.fromkeys(PROMPTS, 1.0))
    site.catalog.refresh(force=True)
    after = download()
    assert after != again
    expected = fresh(site.catalog, "iconicity", "crt")["rank"].astype(float).to_dict()
    assert expected["Epsilon"] == 1 and crt_ranks(after) == expected
    same(shown(site.catalog, "iconicity", "crt"), fresh(site.catalog, "iconicity", "crt"))
    wide = tables.overall(site.catalog)[0].set_index("model")
    assert wide.loc["Epsilon", "rank"] == 1 and len(wide) == 5


def test_stored_rankings_a_click_on_a_tracks_first_view_gets_the_download_written_for_it(store):
    """The recompute's thread writes each track's first view's download (``ui.first_views``: asked with no metric
    or protocol); a person who opens the track and clicks Download sends the metric and protocol its pickers show,
    and gets those same files, not a second copy written at click time; a search for one model is its own
    download."""
    four(store)
    site = Site(store, "ada")
    overview = OverviewTab(site)
    written = overview.download("iconicity", None, "", [], None, None, "", [], [])
    page = overview.link({"track": "iconicity"})  # what the pickers hold once the track's view is open
    metric, protocol = page["metric"]["value"], page["protocol"]["value"]
    assert metric == "crt" and protocol
    label = dict((m, text) for text, m in tables.metrics(site.catalog, "iconicity"))[metric]
    for picked in (metric, label):  # a picker's id, or an older link's label
        assert overview.download("iconicity", picked, "", [], None, None, "", [], [], protocol) == written
    one = next(iter(FOUR_MODELS))
    searched = overview.download("iconicity", metric, one, [], None, None, "", [], [], protocol)
    assert searched != written and set(pd.read_parquet(searched[1])["model"]) == {one}


def test_stored_rankings_after_a_release_install_equal_the_fresh_ones(tmp_path):
    """A store started from a leaderboard release (no results folders, its rows and per-prompt values read from
    the release file): its stored rankings equal the fresh ones there and the original store's, on the overall
    and on every country."""
    original = _make_store(tmp_path / "original", 5, 0)
    folder = tmp_path / "repo"
    hub_sync.export(original, "results", folder)
    assert pickup.publish(original, LocalRepo(folder), repo_id="org/results").number == 1
    installed = _fresh(tmp_path, knows=(original,))
    pickup.Pickup(installed, LocalRepo(folder), release_interval=None).start()
    assert list(installed.results.iterdir()) == []
    cat, before = Catalog(installed), Catalog(original)
    for value in ["all", *tables.slice_values(cat, "awareness", "clip_score", "country")]:
        name = "overall" if value == "all" else "country"
        after = shown(cat, "awareness", "clip_score", name, value)
        same(after, fresh(cat, "awareness", "clip_score", name, value))
        same(after, shown(before, "awareness", "clip_score", name, value))
    assert shown(cat, "awareness", "clip_score")["rank"].notna().all()


@pytest.mark.slow  # a real server (about 20 s to start)
def test_stored_rankings_a_re_run_changes_the_served_value_without_a_restart(store, tmp_path):
    """Issue 50, finding 3: a re-run writes a new results folder under the same name; the running app serves its
    values (the /leaderboard API, as a client reads it) with no restart, and its ranking is the fresh one."""
    from gradio_client import Client

    four(store)
    with serving(store.root, tmp_path / "serve.log", "--no-worker") as url:
        client = Client(url, verbose=False)

        def gamma() -> dict:
            rows = client.predict("iconicity", "crt", "overall", "all", None, api_name="/leaderboard")
            return next(r for r in rows if r["model"] == "Gamma")

        assert gamma()["value"] == pytest.approx(3.75 / 12) and gamma()["rank"] == 3
        rerun(store, "s2", "Gamma", "iconicity", dict.fromkeys(PROMPTS, 0.875))
        row = until(lambda: (r := gamma())["value"] == 0.875 and r["rank"] is not None and r, 60,
                    "the re-run's value served, ranked")
    expected = fresh(Catalog(store), "iconicity", "crt").loc["Gamma"]
    assert (row["value"], row["rank"], row["rank_low"], row["rank_high"]) == (
        expected["value"], expected["rank"], expected["rank_low"], expected["rank_high"])

"""Compare: the prompt picker finds prompts by their words, and scores are named by their labels, not ids.

A real store: the tiny CUBE-format dataset built by the production builder, a submission's manifest, and its
per-image and aggregate rows written with ``benchmark.results.write_folder``.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmark import results
from benchmark.run_record import RunRecord
from benchmark.datasets import cube_1k
from leaderboard import search
from leaderboard.store import Store
from tests.helpers import serving_tiny_cube
from culturelens.testing.submissions import manifest

LABEL = "CLIPScore (2.5 max(cos, 0))"


@pytest.fixture(scope="module")
def compared(tmp_path_factory, tiny_upstream):
    from leaderboard.ui.compare import CompareTab
    from leaderboard.ui.site import Site

    store = serving_tiny_cube(Store(tmp_path_factory.mktemp("compare") / "store"), tiny_upstream)
    prompts = store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table
    sid = "sub-compare"
    (store.submissions / sid).mkdir(parents=True)
    (store.submissions / sid / "manifest.json").write_text(json.dumps(manifest()))
    common = {"submission_id": sid, "model": "Tiny", "track": "awareness", "metric": "clip_score"}
    per_image = [{**common, "prompt_id": pid, "seed": seed, "image_path": f"images/{pid}/{seed}.png",
                  "country": row["country"], "concept": row["concept"], "value": 0.25 * (seed + 1)}
                 for pid, row in prompts.iterrows() for seed in (0, 1)]
    aggregate = [{**common, "provenance": "scored", "metric_label": LABEL, "slice": "overall", "slice_value": "all",
                  "value": 0.375, "n": len(prompts)}]
    results.write_folder(store.results / sid, per_image, aggregate, [], RunRecord(submission_id=sid))
    return CompareTab(Site(store, "tester")), sid, prompts


def test_word_search_ignores_case_and_accents_and_needs_every_word():
    table = pd.DataFrame({"prompt_id": ["ng-cuisine-1", "br-cuisine-2", "br-landmarks-3"],
                          "prompt": ["A high resolution image of jollof rice from Nigerian cuisine",
                                     "A high resolution image of pão de queijo from Brazilian cuisine",
                                     "A panoramic view of Christ the Redeemer in Brazil"]})
    assert list(search.matching(table, "jollof")["prompt_id"]) == ["ng-cuisine-1"]
    assert list(search.matching(table, "Pao de QUEIJO")["prompt_id"]) == ["br-cuisine-2"]
    assert list(search.matching(table, "brazil cuisine")["prompt_id"]) == ["br-cuisine-2"]  # both words
    assert list(search.matching(table, "landmarks")["prompt_id"]) == ["br-landmarks-3"]  # ids are searched too
    assert search.matching(table, "sushi").empty and len(search.matching(table, "  ")) == 3


def test_the_compare_prompt_picker_finds_a_prompt_by_its_text(compared):
    views, sid, prompts = compared
    jollof = prompts.index[prompts["prompt"].str.contains("jollof")][0]
    assert "jollof" not in jollof  # the id alone would not find it
    picker = views.compare_prompts([sid], "jollof")
    assert [value for _, value in picker["choices"]] == [jollof] and picker["value"] == jollof
    assert "jollof rice from Nigerian cuisine" in picker["choices"][0][0]
    every = views.compare_prompts([sid])
    assert len(every["choices"]) == len(prompts)
    assert all(prompts.loc[value, "prompt"][:100] in label for label, value in every["choices"])
    assert views.compare_prompts([sid], "sushi")["choices"] == []


def test_compare_names_scores_by_their_labels(compared):
    views, sid, prompts = compared
    _, _, table, _, _ = views.compare([sid], prompts.index[0])
    assert LABEL in table.columns and "clip_score" not in table.columns
    assert list(table[LABEL]) == [0.25, 0.5]


def test_a_compare_link_restores_its_submissions_and_prompt_and_drops_what_it_cannot(compared):
    """``?tab=compare&subs=...&prompt=...`` as a visitor pastes it: the scored ids are picked (others, paths
    included, dropped), the named prompt is shown, and a prompt the submissions lack falls back to the first."""
    views, sid, prompts = compared
    second = prompts.index[1]
    subs, prompt, *_, table, _, note = views.compare_link(f"nope,../../etc,{sid}", second)
    assert subs["value"] == [sid] and sid in [value for _, value in subs["choices"]]
    assert prompt["value"] == second and len(prompt["choices"]) == len(prompts)
    assert list(table["value"][LABEL]) == [0.25, 0.5] and table["visible"]
    _, prompt, *_ = views.compare_link(sid, "not-a-prompt")
    assert prompt["value"] == prompt["choices"][0][1]  # the picker's first prompt, as when no prompt is named
    subs, prompt, *_, table, _, note = views.compare_link("nope", second)
    assert subs["value"] == [] and prompt["value"] is None and note.startswith("Pick 1-4 scored submissions")
    assert not table["visible"]  # no empty table with made-up headers: the note says what to do

"""A protocol's name and the one sentence of how it differs from the suite's: what a visitor reads instead of its id."""

from __future__ import annotations

import pandas as pd

from benchmark import results
from benchmark.datasets import cube_1k
from benchmark.suite import SUITE_V1
from leaderboard import protocol_names, reported

CUBE_PART = SUITE_V1.part("cube-1k")


def _protocol(**fields) -> str:
    base = {"dataset": str(CUBE_PART.dataset), "dataset_revision": CUBE_PART.dataset.digest,
            "images_per_prompt": 10, "missing_images": "failures", "metric_version": "1",
            "backbones": ["clip-vit-b-32=openai/clip@r1"]}
    return results.protocol_columns({**base, **fields})["protocol"]


def _table(*protocols: str) -> pd.DataFrame:
    return pd.DataFrame([results.protocol_columns(results.protocol_fields(p)) for p in protocols])


def test_suite_rows_paper_rows_and_the_demo_are_named_by_what_they_are():
    crt = next(r for r in reported.rows() if r["track"] == "iconicity")
    assert protocol_names.base_name("iconicity", crt["protocol"], SUITE_V1) == "CRT paper protocol"
    assert protocol_names.base_name("awareness", _protocol(), SUITE_V1) == "CultureLens suite v1"
    demo = _protocol(dataset=f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG_DEMO}:test", images_per_prompt=1)
    assert protocol_names.base_name("awareness", demo, SUITE_V1) == "CUBE-1K demo"
    assert protocol_names.base_name("awareness", _protocol(images_per_prompt=2), SUITE_V1) == \
        "CUBE-1K, 2 images per prompt"  # the suite's prompts, not its images
    assert protocol_names.base_name("awareness", _protocol(dataset="org/mine:x:test"), SUITE_V1) == "org/mine:x:test"
    assert protocol_names.base_name("awareness", None, SUITE_V1) == "unrecorded"


def test_two_protocols_of_one_name_are_told_apart_by_what_differs():
    suite, other_backbone = _protocol(), _protocol(backbones=["clip-vit-l-14=openai/large@r1"])
    table = _table(suite, other_backbone, _protocol(images_per_prompt=2))
    named = protocol_names.protocol_names("awareness", table, SUITE_V1)
    assert sorted(named.values()) == ["CUBE-1K, 2 images per prompt", "CultureLens suite v1 (backbones clip-vit-b-32)",
                                      "CultureLens suite v1 (backbones clip-vit-l-14)"]
    # The papers' stereotype rates of CulturalFrames: two sources, one paper: each named by its source.
    rates = [r for r in reported.rows() if r["metric"] == "human_stereotype_rate"]
    named = protocol_names.protocol_names("expectations", pd.DataFrame(rates), SUITE_V1)
    assert sorted(named.values()) == [
        "CulturalFrames paper protocol (Sec. 5 (lower end of the stated 10-16% range))",
        "CulturalFrames paper protocol (Sec. 5 (upper end of the stated 10-16% range))"]
    # Nothing tells them apart but the id: the id, then.
    same = results.protocol_columns({"dataset": "x"})
    twin = {**same, "protocol_id": "0" * 12}
    assert set(protocol_names.protocol_names("awareness", pd.DataFrame([same, twin]), SUITE_V1).values()) == {
        f"x ({same['protocol_id']})", "x (000000000000)"}


def test_each_protocol_says_in_one_sentence_how_it_differs_from_the_suites():
    crt = next(r for r in reported.rows() if r["track"] == "iconicity")
    assert protocol_names.difference("iconicity", crt["protocol"], SUITE_V1) == (
        "The numbers CRT published (Table 1), on the paper's own images and settings: ranked only with each other, "
        "never with rows scored here on the suite's 767 CRT reference titles × 10 images.")
    assert protocol_names.difference("awareness", _protocol(), SUITE_V1) == (
        "The suite's protocol for this track: the suite's 992 CUBE-1K prompts × 10 images, scored here.")
    demo = _protocol(dataset=f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG_DEMO}:test", images_per_prompt=1)
    assert protocol_names.difference("awareness", demo, SUITE_V1) == (
        "Not the suite's 992 CUBE-1K prompts × 10 images: CUBE-1K demo, 1 image per prompt; ranked only with rows "
        "scored the same way.")
    assert protocol_names.difference("awareness", _protocol(backbones=["clip-vit-l-14=x@r"]), SUITE_V1) == (
        "The suite's protocol for this track: the suite's 992 CUBE-1K prompts × 10 images, scored here, not the "
        "track's settings (backbones clip-vit-l-14, where the track's are clip-vit-b-32).")
    assert protocol_names.difference("awareness", None, SUITE_V1) == (
        "Scored before protocols were recorded: nothing says these rows were scored alike, so none is ranked.")

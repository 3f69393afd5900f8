"""What a protocol is called on the page, and how it differs from the suite's, in one short sentence.

A protocol (``benchmark.results.protocol_columns``) is identified by a hash of its fields; people read a name made
from its track and values instead: "CultureLens suite v1" for the rows that answer the suite's part of the track
(``Suite.answered_by``), "CRT paper protocol" for the numbers a paper published, the dataset's name otherwise
("CUBE-1K demo"). Where two protocols of one table would share a name, each gets what tells them apart: the paper's
table, the images per prompt, the metric version, the backbones, at last the id. Every field stays one click
away (``tables.describe_protocol``, shown in the note's details).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from benchmark import results
from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k, names
from benchmark.papers import Paper
from benchmark.suite import Suite
from benchmark.track import judge_named
from leaderboard import render
from leaderboard.tables import UNRECORDED

# The datasets this project builds, by the name their cards give them, and their rows in a sentence (a submitter's
# own dataset keeps its id).
DATASET_NAMES = {
    str(names.CUBE_1K): ("CUBE-1K", "CUBE-1K prompts"),
    str(names.DatasetName(cube_1k.HUB_REPO, cube_1k.CONFIG_DEMO, cube_1k.SPLIT)): ("CUBE-1K demo",
                                                                                  "CUBE-1K demo prompts"),
    str(names.DatasetName(cube_1k.HUB_REPO, cube_1k.CONFIG_ALL, cube_1k.SPLIT)): ("CUBE-1K, every upstream row",
                                                                                 "CUBE-1K upstream rows"),
    str(names.CUBE_DIVERSITY): ("CUBE diversity", "CUBE diversity prompts"),
    str(names.ICONIC_REFERENCES): ("CRT references", "CRT reference titles"),
    str(names.CULTURALFRAMES): ("CulturalFrames", "CulturalFrames prompts"),
}
PUBLISHED = "as published in "  # how a paper row's protocol names its dataset (``leaderboard.reported``)


def dataset_name(dataset: str) -> str:
    """A dataset (repo:config:split) by its name; one this project does not build, as it is recorded."""
    return DATASET_NAMES.get(dataset, (dataset,))[0]


def paper_name(citation: str) -> str:
    """A paper row's paper by its name ("CRT"), from the citation the row carries; the citation when unknown."""
    paper = track_registry.cited_papers().get(citation)
    return paper.called if paper else citation


def _paper(track: str, fields: dict) -> Paper | None:
    """The paper whose published numbers a row of ``track`` under ``fields`` is (None for a scored row)."""
    papers = track_registry.get(track).papers
    published = str(fields.get("dataset") or "").startswith(PUBLISHED)
    return papers.paper if papers and published else None


def _images(count, per: str = " per prompt") -> str:
    return f"{count} image{'' if count == 1 else 's'}{per}"


def _source(fields: dict) -> str:
    """The paper's table a reported row comes from ("Table 1"), from its metric version "paper (Table 1)"."""
    version = str(fields.get("metric_version") or "")
    return version.removeprefix("paper (").removesuffix(")") if version.startswith("paper (") else version


def _the_suites(track: str, protocol: str, fields: dict, suite: Suite) -> bool:
    """Whether rows under ``protocol`` answer the suite's part for ``track`` (``Suite.answered_by``), judged by the
    track's protocol's judge where it pins one (``Protocol.judged_alike``): as ``tables.protocols`` says."""
    return suite.answered_by(track, fields) and track_registry.get(track).protocol.judged_alike(protocol)


def base_name(track: str, protocol: str | None, suite: Suite) -> str:
    """The protocol's name before two of one table are told apart: the suite's, a paper's, else its dataset's
    (with what differs from the suite part's when the dataset is: its images per prompt, its prompt rows, its
    judge, or how a missing image was scored)."""
    fields = results.protocol_fields(protocol)
    if fields is None:
        return UNRECORDED
    if (paper := _paper(track, fields)) is not None:
        return f"{paper.called} paper protocol"
    if _the_suites(track, protocol, fields, suite):
        return suite.name
    name = dataset_name(str(fields.get("dataset")))
    part = suite.part_of_track(track)
    if part is not None and fields.get("dataset") == str(part.dataset):
        images = fields.get("images_per_prompt")
        name += f", {_images(images)}" if images != part.images_per_prompt else f", {_unlike_the_suite(fields)}"
    return name


def _unlike_the_suite(fields: dict) -> str:
    """What keeps rows of the suite part's dataset and images per prompt out of the suite's protocol."""
    if fields.get("missing_images") != results.MISSING_AS_FAILURES:
        return "a missing image not scored as a failure"
    if judge := judge_named(fields.get("metric_version")):
        return f"judge {render.public_judge(judge)}"
    return "other prompt rows"



def _details(track: str, fields: dict | None) -> list[str]:
    """What may tell two protocols of one name apart, most telling first."""
    if fields is None:
        return []
    if _paper(track, fields) is not None:
        return [_source(fields)]
    backbones = ", ".join(b.split("=")[0] for b in fields.get("backbones") or []) or "no backbone"
    return [_images(fields.get("images_per_prompt")),
            f"metric version {render.public_version(fields.get('metric_version'))}",
            f"backbones {backbones}"]


def protocol_names(track: str, protocols: pd.DataFrame, suite: Suite) -> dict[str, str]:
    """Protocol id -> name, for the protocols of one table (``protocol_id`` and ``protocol`` columns, as
    ``tables.protocols`` gives them): ``base_name``, and where two share it, the first detail that tells them
    apart (the paper's table, images per prompt, metric version, backbones), else the id."""
    pairs = list(zip(protocols["protocol_id"], protocols["protocol"]))
    named = {pid: base_name(track, text, suite) for pid, text in pairs}
    fields = {pid: results.protocol_fields(text) for pid, text in pairs}
    for name in {n for n in named.values() if list(named.values()).count(n) > 1}:
        same = [pid for pid in named if named[pid] == name]
        details = {pid: _details(track, fields[pid]) for pid in same}
        for i in range(max(len(d) for d in details.values())):
            told = [d[i] if i < len(d) else "" for d in details.values()]
            if len(set(told)) == len(told):
                named.update({pid: f"{name} ({d[i]})" for pid, d in details.items()})
                break
        else:
            named.update({pid: f"{name} ({pid})" for pid in same})
    return named


def _suite_words(track: str, suite: Suite) -> str | None:
    """The suite's part for ``track`` in words ("the suite's 992 CUBE-1K prompts × 10 images"); None without one."""
    part = suite.part_of_track(track)
    if part is None:
        return None
    rows = DATASET_NAMES.get(str(part.dataset), ("", f"{part.dataset} prompts"))[1]
    count = f"{part.dataset.prompts:,} " if part.dataset.prompts else ""
    return f"the suite's {count}{rows} × {_images(part.images_per_prompt, '')}"


def _unlike_the_tracks(declared, fields: dict) -> str:
    """Which of the track's headline settings (``declared``: its ``Protocol``) a row's protocol ``fields`` lack, each
    as the row has it beside the track's: what differs in full, not the track's prefix alone (a judge's revision,
    a W1KP calibration); '' when only the judge differs (said apart)."""
    said = []
    version = str(fields.get("metric_version") or "")
    if declared.version and not version.startswith(declared.version):
        said.append(f"metric version {render.public_version(version) or 'unrecorded'}, where the track's is "
                    f"{declared.version_words()}")
    ids = sorted(b.split("=")[0] for b in fields.get("backbones") or ())
    if declared.backbones and ids != sorted(declared.backbones):
        said.append(f"backbones {', '.join(ids) or 'none'}, where the track's are {', '.join(declared.backbones)}")
    return "; ".join(said)


def difference(track: str, protocol: str | None, suite: Suite) -> str:
    """One short sentence: how the protocol differs from the suite's for ``track`` (or, for a track the suite has
    no part for, from the track's headline protocol), and so what it is ranked with."""
    fields = results.protocol_fields(protocol)
    if fields is None:
        return "Scored before protocols were recorded: nothing says these rows were scored alike, so none is ranked."
    words = _suite_words(track, suite)
    if (paper := _paper(track, fields)) is not None:
        scored = f"rows scored here on {words}" if words else "rows scored here"
        return (f"The numbers {paper.called} published ({_source(fields)}), on the paper's own images and settings: "
                f"ranked only with each other, never with {scored}.")
    headline = track_registry.on_protocol(track, protocol)
    declared = track_registry.get(track).protocol
    # The track's headline settings whatever the prompts: the suite's part says which prompts and how many images.
    same_settings = replace(declared, dataset="", images_per_prompt=None).admits(protocol)
    unlike = "" if same_settings else _unlike_the_tracks(declared, fields)
    settings = f", not the track's settings ({unlike})" if unlike else ""
    if words is None:
        return ("The track's headline protocol." if headline else
                f"Not the track's headline protocol ({track_registry.get(track).protocol.describe()}): ranked only "
                "with rows scored the same way.")
    if _the_suites(track, protocol, fields, suite):
        return f"The suite's protocol for this track: {words}, scored here{settings}."
    part = suite.part_of_track(track)
    differs = []
    if fields.get("dataset") != str(part.dataset):
        differs.append(dataset_name(str(fields.get("dataset"))))
    elif part.dataset.digest and fields.get("dataset_revision") != part.dataset.digest:
        differs.append("other prompt rows than the suite pins")
    if fields.get("images_per_prompt") != part.images_per_prompt:
        differs.append(_images(fields.get("images_per_prompt")))
    if fields.get("missing_images") != results.MISSING_AS_FAILURES:
        differs.append("scored before a missing image counted as a failure (its images per prompt may be fewer "
                       "than the seeds declared)")
    if not declared.judged_alike(protocol):
        judge = judge_named(fields.get("metric_version"))
        differs.append(f"judged by {render.public_judge(judge) if judge else 'no judge'}, not {declared.judge}")
    return (f"Not {words}: {', '.join(differs) or 'other settings'}{settings}; ranked only with rows scored the "
            "same way.")

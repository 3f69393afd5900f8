"""What a track is: everything CultureLens knows about one benchmark track, declared in one place.

A track module (``benchmark/tracks/<name>.py``, or a module of a folder named in ``CULTURELENS_TRACK_PATH``)
exports ``TRACK``, a ``Track``: what the leaderboard shows (title, question, method page, headline metric and the
protocol its ranking assumes), its paper (``papers``: the record its citation and BibTeX are made from, and the
numbers copied from the paper's tables, shown as reported rows), what the harness runs (``settings`` and the
``metrics`` factory), the commands it adds to ``culturelens`` (``verbs``) and the charts and pictures it adds to the
app (``charts``, ``pictures``).
``benchmark.tracks`` discovers the modules; the command line, the worker and the app only read that registry, as
lm-evaluation-harness's task manager finds a task's folder.

Nothing here imports torch: the registry is read by the leaderboard service, which loads no model library. A
track's ``metrics`` factory imports what it needs when it is called.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from benchmark.errors import CultureLensError
from benchmark.papers import Paper  # noqa: F401 - the record a track's ``Papers`` cites
from benchmark.settings import Setting

if TYPE_CHECKING:  # for annotations only: importing them loads torch
    import pandas as pd

    from benchmark.metrics.base import Metric
    from benchmark.settings import Settings


JUDGE = re.compile(r"judge ([^,()\s]+)")  # how a judged metric's version names its judge: "judge <id>@<revision>"


def judge_named(version: str | None) -> str | None:
    """The judge a metric version names ("... judge Qwen/Qwen2.5-VL-7B-Instruct@abc123 ..." -> that id, revision
    included), or None for a metric no judge scores."""
    found = JUDGE.search(version or "")
    return found.group(1) if found else None


@dataclass(frozen=True)
class Protocol:
    """What a track's headline ranking assumes; a row scored otherwise is shown under its own protocol and
    marked off-protocol. A field left empty is not pinned (any value is on-protocol)."""

    dataset: str = ""  # repo:config:split
    images_per_prompt: int | None = None  # the paper's images (seeds) per prompt
    version: str = ""  # the metric version the default settings give (thresholds, variant, calibration, tagger)
    backbones: tuple[str, ...] = ()  # backbone ids of the default settings (any uid and revision under them)
    judge: str = ""  # a judged metric's judge (Hub id, any revision): its version names "judge <id>@<revision>"

    def admits(self, protocol: str | None) -> bool:
        """Whether a row's ``protocol`` (the JSON the harness records) is this one; an unrecorded one never is."""
        from benchmark import (
            results,  # numpy and pyarrow: only when a ranking reads rows
        )

        fields = results.protocol_fields(protocol)
        if fields is None:
            return False
        ids = tuple(sorted(b.split("=")[0] for b in fields.get("backbones") or ()))
        return ((not self.dataset or fields.get("dataset") == self.dataset)
                and (self.images_per_prompt is None or fields.get("images_per_prompt") == self.images_per_prompt)
                and str(fields.get("metric_version") or "").startswith(self.version)
                and (not self.backbones or ids == tuple(sorted(self.backbones))) and self.judged_alike(protocol))

    def version_words(self) -> str:
        """``version`` as people read it: a prefix (any version starting so is this one, "1 (paper; calibration")
        ends in "..." and closes the parentheses it opened, so that no sentence around it is left unbalanced."""
        opened = self.version.count("(") - self.version.count(")")
        return f"{self.version.rstrip()} ...{')' * opened}" if opened > 0 else self.version

    def judged_alike(self, protocol: str | None) -> bool:
        """Whether a row's ``protocol`` names this protocol's judge (always, when it pins none): a judged track's
        rows by another judge (a CLIP probe, a smaller VLM) never stand in for its headline ranking, nor feed the
        overall one, whatever prompts they answer."""
        if not self.judge:
            return True
        from benchmark import results  # numpy and pyarrow: only when a ranking reads rows

        judge = judge_named((results.protocol_fields(protocol) or {}).get("metric_version"))
        return judge is not None and judge.rpartition("@")[0] == self.judge

    def describe(self) -> str:
        """The protocol in words, for notes and the method page."""
        images = self.images_per_prompt
        parts = [f"dataset {self.dataset}" if self.dataset else "",
                 f"{images} image{'' if images == 1 else 's'} per prompt" if images else "",
                 f"metric version {self.version_words()} with its settings" if self.version else "",
                 f"backbones {', '.join(self.backbones)}" if self.backbones else "",
                 f"judge {self.judge}" if self.judge else ""]
        return "; ".join(p for p in parts if p) or "no field fixed"


@dataclass(frozen=True)
class PaperModel:
    """A model as a paper's tables name it: ``id`` is its Hub id, or what the paper says of it when it is not on the
    Hub ("Google Imagen 4 (API)"); ``type`` is "open" or "closed"."""

    name: str
    id: str
    type: Literal["open", "closed"]


@dataclass(frozen=True)
class PaperRow:
    """One number a paper published, copied from its table or text (``source``: "Table 1", "Sec. 5, Fig. 3"), under
    the track's metric and slice names so that it sits in one table with scored rows of that metric.
    ``images_per_prompt``: the paper's images per prompt behind the number, where the paper states it."""

    model: PaperModel
    metric: str
    label: str
    higher_is_better: bool
    value: float
    source: str
    slice: str = "overall"
    slice_value: str = "all"
    images_per_prompt: int | None = None


@dataclass(frozen=True)
class PaperCorrelation:
    """A metric's Spearman correlation with human raters on one criterion, as a paper published it (a row of the
    app's Metrics tab, beside those ``culturelens meta-eval`` computes), with the human ceiling on that criterion."""

    metric: str
    criterion: str
    spearman: float
    ceiling: float | None
    source: str


@dataclass(frozen=True)
class Papers:
    """A track's paper and what it published: ``paper`` is the record the track cites (its citation and BibTeX);
    ``rows`` the numbers the app shows as reported rows beside scored ones, each with its citation and source;
    ``correlations`` the metric-human agreement the paper reported, shown in the Metrics tab."""

    paper: Paper
    rows: tuple[PaperRow, ...] = ()
    correlations: tuple[PaperCorrelation, ...] = ()

    def reported(self, source: str) -> dict:
        """The provenance columns of a row copied from ``source`` of the paper."""
        return {"provenance": "reported", "citation": self.paper.text, "source_table": source}

    def record(self, row: PaperRow) -> dict:
        """``row`` in the columns of the aggregate results (``benchmark.results.AGGREGATE``) but the track and the
        protocol, which the reader adds."""
        return {"model": row.model.name, "model_id": row.model.id, "model_type": row.model.type,
                "metric": row.metric, "metric_label": row.label, "higher_is_better": row.higher_is_better,
                "slice": row.slice, "slice_value": row.slice_value, "value": row.value, **self.reported(row.source)}

    def correlation_record(self, correlation: PaperCorrelation) -> dict:
        """``correlation`` in the columns of the Metrics tab's ranking table (``meta_eval.RANKING_COLUMNS``:
        every country, no CI, count, models' order or rank: a paper's figure gives none), with its provenance."""
        return {"metric": correlation.metric, "criterion": correlation.criterion, "country": "all",
                "spearman": correlation.spearman, "ci_low": None, "ci_high": None, "n": None,
                "ceiling": correlation.ceiling, "model_spearman": None, "models": None, "rank": None,
                **self.reported(correlation.source)}


class MetricUnavailable(CultureLensError):
    """A metric cannot run here (no calibration, index, judge or weights): the one type for it, whoever asks (a
    track building its metrics, ``culturelens score``, ``culturelens.score``, ``culturelens.metrics``). ``name`` is
    what run.json lists as unavailable (the metric, the track when none of it can run, "every metric" when nothing
    can) and the message says how to make it available, in the command line's flags; the Python API says it in its
    keywords (``culturelens.options.in_keywords``)."""

    def __init__(self, name: str, reason: str):
        super().__init__(reason)
        self.name = name


@dataclass(frozen=True)
class Unavailable:
    """A metric (or a whole track) these settings cannot build, and why (recorded in every result)."""

    name: str
    track: str
    reason: str


@dataclass(frozen=True)
class Verb:
    """A command the track adds to ``culturelens``: ``under`` () for a top-level verb, ("data", "build") for a
    dataset builder. ``options(parser)`` adds the verb's options and ``parser.set_defaults(run=...)``; ``run(args)``
    returns the exit status and raises a ``CultureLensError`` for a user's mistake. A verb that may reach the
    Hugging Face Hub also sets ``hub=True``: the command line then checks within seconds that it can, else works
    offline."""

    name: str
    help: str
    example: str
    options: Callable[[argparse.ArgumentParser], None]
    under: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chart:
    """A chart the app's Slices tab draws for the track. ``data(aggregates, curves)`` receives the track's rows
    of the ``metrics`` on the ``slices`` it reads (aggregates of the models the visitor's filters keep, each value
    as its ranking gives it: the protocol's prompts, an unanswered one counting as worst; curves of the models the
    charts show; ``model`` already says which row is a paper's) and returns the points: a ``model`` column, ``x``,
    ``y`` and, if given, ``color`` (default: model). ``empty`` says why there may be none yet."""

    kind: Literal["line", "scatter"]
    label: str
    x: str
    y: str
    empty: str
    data: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]
    color: str = "model"
    metrics: tuple[str, ...] = ()
    slices: tuple[str, ...] = ("overall",)


@dataclass(frozen=True)
class DetailPicture:
    """A picture (``name``, e.g. "visual-reuse picture") the app's Compare tab draws from one image's stored detail
    (``Metric.details``) of ``metric``.
    ``draw(image, references, detail, value)`` receives the generated image, the prompt's reference images (may
    be empty), the detail as a dict and the image's value, and returns (picture, caption) or None when this image
    has nothing to show. ``empty`` says why no image of a comparison may have one; ``label`` is what the Compare
    gallery of these pictures is called (what a picture shows, and how to read it)."""

    name: str
    metric: str
    draw: Callable[..., tuple[object, str] | None]
    empty: str
    label: str


@dataclass(frozen=True)
class FromMeans:
    """A metric that is a function of other metrics' means over prompts, not a mean itself (CRT's Table 1:
    CRA per reference x (1 - VR), Eq. 3 on the column means). A ranking recomputes it from the per-prompt values
    of ``inputs`` on any set of prompts (the prompts its models share, each bootstrap draw of them):
    ``combine(*means)`` takes one array of means per input (the first input defines which prompts a model
    answered; a later one may be undefined on some, e.g. VR where nothing was recognised, and its mean is over
    the others: nan where there are none) and returns the metric."""

    metric: str
    inputs: tuple[str, ...]
    combine: Callable[..., object]


@dataclass(frozen=True)
class Track:
    """One track. ``papers``: its paper's record and published rows (none for a track no paper describes);
    ``headline``: the metric ranked in the win rates (and the Overview, unless ``overview_metric``);
    ``overview_slice``: a slice whose every value the Overview ranks apart, for a paper that reports its table that
    way (CRT: still and moving). ``metrics(settings, backbones)`` builds the metrics (``MetricUnavailable`` when
    these settings cannot); ``order`` places the track among the others (display order). ``from_means``: its
    metrics that are functions of other metrics' means (``FromMeans``). ``not_in_overall``: why the headline is
    left out of the overall mean win rate ('' when it counts), said on the page; such a track has no better end,
    and its tables order rows without judging them. ``unanswered``: what a prompt a row did not answer does to
    its ranking (``benchmark.ranking.Rule.unanswered``): "worst", it counts as the metric's worst value, or
    "not_ranked", the row is listed apart. ``ranked_on``: for a metric about one label, the slice (column, value)
    of the prompts that name it (relevance to Japan: the prompts whose country is Japan); its rankings rest on
    those prompts only, its values on the others are shown, not ranked."""

    name: str
    title: str
    headline: str
    question: str
    method: str  # Markdown: formulas, parameters
    papers: Papers | None = None
    protocol: Protocol = field(default_factory=Protocol)
    overview_metric: str = ""
    overview_slice: str = "overall"
    settings: tuple[Setting, ...] = ()
    metrics: Callable[[Settings, dict | None], list[Metric]] | None = None
    verbs: tuple[Verb, ...] = ()
    charts: tuple[Chart, ...] = ()
    pictures: tuple[DetailPicture, ...] = ()
    order: int = 100
    from_means: tuple[FromMeans, ...] = ()
    not_in_overall: str = ""
    unanswered: Literal["worst", "not_ranked"] = "worst"
    ranked_on: Callable[[str], tuple[str, str] | None] = lambda metric: None

    @property
    def citation(self) -> str:
        """The reference text of the track's paper ("" without one)."""
        return self.papers.paper.text if self.papers else ""

    @property
    def opens_on(self) -> str:
        """The metric the Overview shows first."""
        return self.overview_metric or self.headline

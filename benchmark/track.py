"""What a track is: everything CultureLens knows about one benchmark track, declared in one place.

A track module (``benchmark/tracks/<name>.py``, or a module of a folder named in ``CULTURELENS_TRACK_PATH``)
exports ``TRACK``, a ``Track``: what the leaderboard shows (title, question, method page, headline metric and the
protocol its ranking assumes), what the harness runs (``settings`` and the ``metrics`` factory), the commands it adds
to ``culturelens`` (``verbs``) and the charts and pictures it adds to the app (``charts``, ``pictures``).
``benchmark.tracks`` discovers the modules; the command line, the worker and the app only read that registry, as
lm-evaluation-harness's task manager finds a task's folder.

Nothing here imports torch: the registry is read by the leaderboard service, which loads no model library. A
track's ``metrics`` factory imports what it needs when it is called.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from benchmark.errors import CultureLensError
from benchmark.settings import Setting

if TYPE_CHECKING:  # for annotations only: importing them loads torch
    import pandas as pd

    from benchmark.metrics.base import Metric
    from benchmark.settings import Settings


@dataclass(frozen=True)
class Protocol:
    """What a track's headline ranking assumes; a row scored otherwise is shown under its own protocol and
    marked off-protocol. A field left empty is not pinned (any value is on-protocol)."""

    dataset: str = ""  # repo:config:split
    images_per_prompt: int | None = None  # the paper's images (seeds) per prompt
    version: str = ""  # the metric version the default settings give (thresholds, variant, calibration, tagger)
    backbones: tuple[str, ...] = ()  # backbone ids of the default settings (any uid and revision under them)

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
                and (not self.backbones or ids == tuple(sorted(self.backbones))))

    def describe(self) -> str:
        """The protocol in words, for notes and the method page."""
        parts = [f"dataset {self.dataset or 'any'}",
                 f"{self.images_per_prompt} images per prompt" if self.images_per_prompt else "any images per prompt",
                 f"metric version {self.version}…" if self.version else "",
                 f"backbones {', '.join(self.backbones)}" if self.backbones else ""]
        return "; ".join(p for p in parts if p)


class MetricsUnavailable(CultureLensError):
    """A track's metrics cannot be built with these settings; ``name`` is what run.json lists as unavailable
    (the metric, or the track when none of it can run) and the message says how to make it available."""

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
    (aggregates of the models the visitor's filters keep, curves of the models the charts show; ``model`` already
    says which row is a paper's) and returns the points: a ``model`` column, ``x``, ``y`` and, if given, ``color``
    (default: model). ``empty`` says why there may be none yet."""

    kind: Literal["line", "scatter"]
    label: str
    x: str
    y: str
    empty: str
    data: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]
    color: str = "model"


@dataclass(frozen=True)
class DetailPicture:
    """A picture (``name``, e.g. "visual-reuse picture") the app's Compare tab draws from one image's stored detail
    (``Metric.details``) of ``metric``.
    ``draw(image, references, detail, value)`` receives the generated image, the prompt's reference images (may
    be empty), the detail as a dict and the image's value, and returns (picture, caption) or None when this image
    has nothing to show. ``empty`` says why no image of a comparison may have one."""

    name: str
    metric: str
    draw: Callable[..., tuple[object, str] | None]
    empty: str


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
    """One track. ``headline``: the metric ranked in the win rates (and the Overview, unless ``overview_metric``);
    ``overview_slice``: a slice whose every value the Overview ranks apart, for a paper that reports its table that
    way (CRT: still and moving). ``metrics(settings, backbones)`` builds the metrics (``MetricsUnavailable`` when
    these settings cannot); ``order`` places the track among the others (display order). ``from_means``: its
    metrics that are functions of other metrics' means (``FromMeans``). ``not_in_overall``: why the headline is
    left out of the overall mean win rate ('' when it counts), said on the page."""

    name: str
    title: str
    headline: str
    question: str
    method: str  # Markdown: formulas, parameters
    citation: str  # a reference of ``benchmark.citations``
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

    @property
    def opens_on(self) -> str:
        """The metric the Overview shows first."""
        return self.overview_metric or self.headline

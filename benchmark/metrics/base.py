"""The metric interface: a pure function over embeddings (or tags, scores) behind a thin adapter.

An adapter declares what it needs (``benchmark.features.Need``: which backbone, which features),
its version, direction, unit, range, track and level; the harness computes the
union of all needs once and hands every metric the same arrays (``Inputs``).
The math lives in plain functions next to each adapter, testable with
hand-made arrays.

Levels: an ``image`` metric gives one value per image (``per_image``); a
``prompt`` metric one value per prompt, over that prompt's images
(``per_prompt``: e.g. W1KP, which compares the seeds of a prompt). Either may
add curves (``curves``: e.g. W1KP_k over k) and aggregate rows derived from
the ordinary aggregates (``derived``).

A missing declared image is a failure at every level, so that no choice of which images to send lifts a score
(``MetricInfo.failure``, the worse end of the range, is what a failure counts as): at the image level it counts as
a failure image in its prompt's mean (``harness.missing_as_failures``); at the prompt level the value needs the
complete declared image set, so a prompt missing one, or holding one the metric could not use, is not scored
(``harness.refuse_incomplete``) and the ranking counts it refused, at ``failure`` (``benchmark.ranking``). A metric
adapter gets this from its level alone.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from PIL import Image

from benchmark.cache import EmbeddingCache
from benchmark.features import Need
from benchmark.metric_marks import PREPARED_ON_DEVICE


@dataclass(frozen=True)
class MetricInfo:
    name: str
    label: str
    track: str
    version: str
    higher_is_better: bool
    unit: str
    low: float
    high: float
    citation: str
    needs: tuple[Need, ...]
    level: Literal["image", "prompt"] = "image"
    # What a value is, which chooses its confidence interval (``benchmark.stats.mean_ci``), whatever values occur:
    # "rate", a share of events (1 if the artifact is recognised, else 0: Wilson's interval where every value is 0
    # or 1); "continuous", any other score (CLIPScore is continuous even where every value happens to be 0).
    kind: Literal["rate", "continuous"] = "continuous"
    # Where the metric has no value by its own rule, in words (VR: "no image of the reference is recognised"), a
    # value a ranking leaves out of a mean; "" where it has one wherever it applies, so that a missing value is an
    # error (``harness.mark_errors``), which a ranking counts as the worst value, never left out as if undefined.
    undefined: str = ""

    @property
    def failure(self) -> float:
        """What a failure counts as: the range's worse end. A missing declared image, in its prompt's mean (image
        level); a prompt whose declared images are not all there to score, in a ranking (prompt level)."""
        return self.low if self.higher_is_better else self.high

    def __post_init__(self):
        """A metric that reads image features names how the images were prepared (``PREPARED_ON_DEVICE``) at the
        end of its version: its values moved, by rounding, when preparation moved to the device."""
        marker = f"images {PREPARED_ON_DEVICE}"
        if any(need.kind != "text" for need in self.needs) and not self.version.endswith(marker):
            object.__setattr__(self, "version", f"{self.version}; {marker}")


@dataclass(frozen=True)
class Inputs:
    """What every metric reads: one row per image, and features aligned with those rows."""

    images: pd.DataFrame  # prompt_id, seed, image_sha256, prompt, and the dataset's slice columns
    features: dict[Need, np.ndarray]
    truncated: dict[str, np.ndarray]  # backbone id -> per row, whether its prompt was cut to fit
    references: dict[Need, dict[str, np.ndarray]] = field(default_factory=dict)  # need -> prompt -> (R, ...)
    reference_counts: pd.Series | None = None  # prompt_id -> number of reference images, if the dataset has any
    memo: dict = field(default_factory=dict)  # results several metrics share within one scoring run
    # Every prompt of the dataset (index prompt_id; prompt, slice and label columns such as artifact), not only
    # the submitted ones: the candidate set of zero-shot recognition.
    catalogue: pd.DataFrame | None = None
    # (backbone id, texts) -> (len(texts), D) unit-norm text embeddings, through the embedding cache; for
    # texts a metric makes itself (class names, probes). Only backbones the metric declares a Need of.
    encode_text: Callable[[str, list[str]], np.ndarray] | None = None
    # Row -> the decoded RGB image, for metrics that read pixels (e.g. a vision-language judge).
    open_image: Callable[[int], Image.Image] | None = None
    # Where producers' outputs (VLM tags, judge scores: ``benchmark.features.producers``) are cached by content,
    # beside the embedding cache and keyed by the rows' image_sha256; None: computed afresh.
    products: EmbeddingCache | None = None


class Metric(ABC):
    info: MetricInfo

    def for_submission(self, manifest, catalogue: pd.DataFrame | None = None) -> list[Metric]:
        """The metrics this one stands for on one submission (default: itself), given its manifest and its prompt
        set's every prompt (``Inputs.catalogue``); e.g. one relevance metric per country of the prompt set."""
        return [self]

    def check(self, backbones: dict) -> str | None:
        """Once the backbones are loaded: None if they are the ones this metric's prebuilt data (an index) was
        made with, else the reason it cannot run (the metric is then disabled, with that reason)."""
        return None

    def applies(self, inputs: Inputs) -> str | None:
        """None if the metric can score these inputs, else the reason it cannot (recorded, not an error)."""
        return None

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        """Image level: one value per image row, and a short human-readable note per row (or None)."""
        raise NotImplementedError(f"{self.info.name} is a {self.info.level}-level metric")

    def details(self, inputs: Inputs) -> list[dict | None] | None:
        """Optional, image level: structured detail per row (stored as JSON), e.g. which patches were reused."""
        return None

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        """Prompt level: columns prompt_id, value, note; one row per prompt."""
        raise NotImplementedError(f"{self.info.name} is a {self.info.level}-level metric")

    def curves(self, inputs: Inputs) -> pd.DataFrame | None:
        """Optional per-prompt curves: columns prompt_id, x, value, standard_error."""
        return None

    def derived(self, aggregates: list[dict], curves: pd.DataFrame | None) -> list[dict]:
        """Optional aggregate rows computed from this metric's aggregates or its model-level curve
        (columns x, value, ci_low, ci_high, n), for values that are not means over prompts."""
        return []

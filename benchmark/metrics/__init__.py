"""Metrics: pure functions over embeddings, tags and scores, one module per track, each behind an
adapter (``base.Metric``) that declares what it needs."""

from __future__ import annotations

import os
from dataclasses import dataclass

from benchmark.metrics import iconicity
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Metric
from benchmark.metrics.variability import W1KP, Calibration

ENV_W1KP_CALIBRATION = "CULTURELENS_W1KP_CALIBRATION"


@dataclass(frozen=True)
class MetricSettings:
    """The choices a metric needs from whoever runs it (CLI flags, environment)."""

    clip_backbone: str = "clip-vit-b-32"
    # The CRT paper used DINOv3 (gated on the Hub); DINOv2 is the open default. Thresholds: Eq. 1 and 2.
    vr_backbone: str = "dinov2-base"
    tau: float = iconicity.TAU
    tau_patch: float = iconicity.TAU_PATCH
    w1kp_calibration: str | None = None  # .npz path or URL of cdf_x, cdf_y for the W1KP backbone's distances
    w1kp_backbone: str = "dreamsim"
    w1kp_variant: str = "paper"


def build(settings: MetricSettings = MetricSettings()) -> tuple[list[Metric], dict[str, str]]:
    """Every metric these settings allow, in display order, and {metric: why it is unavailable}."""
    metrics: list[Metric] = [ClipCosine(settings.clip_backbone), ClipScore(settings.clip_backbone)]
    metrics += iconicity.metrics(clip=settings.clip_backbone, dino=settings.vr_backbone, tau=settings.tau,
                                 tau_patch=settings.tau_patch)
    unavailable: dict[str, str] = {}
    calibration = settings.w1kp_calibration or os.environ.get(ENV_W1KP_CALIBRATION)
    if calibration:
        try:
            metrics.append(W1KP(Calibration.load(calibration), settings.w1kp_backbone, settings.w1kp_variant))
        except ValueError as error:
            unavailable["w1kp"] = str(error)
    else:
        unavailable["w1kp"] = (f"no W1KP calibration: pass --w1kp-calibration PATH_OR_URL or set "
                               f"{ENV_W1KP_CALIBRATION} (an .npz of cdf_x, cdf_y; see README, 'Variability')")
    return metrics, unavailable


def available() -> list[Metric]:
    """The metrics that need no settings (tests and quick runs)."""
    return build()[0]


def select(metrics: list[Metric], tracks: list[str] | None) -> list[Metric]:
    """The metrics of the given tracks (all when None); ValueError names unknown tracks."""
    if not tracks:
        return metrics
    known = {m.info.track for m in metrics}
    unknown = sorted(set(tracks) - known)
    if unknown:
        raise ValueError(f"no metric of track(s) {unknown} can run; tracks with metrics: {sorted(known)}")
    return [m for m in metrics if m.info.track in tracks]

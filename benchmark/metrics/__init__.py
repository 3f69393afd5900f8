"""Metrics: pure functions over embeddings, tags and scores, one module per track, each behind an
adapter (``base.Metric``) that declares what it needs."""

from __future__ import annotations

import os
from dataclasses import dataclass

from benchmark.metrics import awareness, iconicity
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Metric
from benchmark.metrics.variability import W1KP, Calibration

ENV_W1KP_CALIBRATION = "CULTURELENS_W1KP_CALIBRATION"


@dataclass(frozen=True)
class MetricSettings:
    """The choices a metric needs from whoever runs it (CLI flags, environment)."""

    clip_backbone: str = "clip-vit-b-32"
    quality_backbone: str = "hpsv2"  # HPS v2: realism/quality (awareness) and the s of CUBE's Eq. 3 (diversity)
    # The CRT paper used DINOv3 (gated on the Hub); DINOv2 is the open default. Thresholds: Eq. 1 and 2.
    vr_backbone: str = "dinov2-base"
    tau: float = iconicity.TAU
    tau_patch: float = iconicity.TAU_PATCH
    w1kp_calibration: str | None = None  # .npz path or URL of cdf_x, cdf_y for the W1KP backbone's distances
    w1kp_backbone: str = "dreamsim"
    w1kp_variant: str = "paper"


@dataclass(frozen=True)
class Unavailable:
    """A metric these settings cannot build, and why (recorded in every result)."""

    name: str
    track: str
    reason: str


def build(settings: MetricSettings = MetricSettings()) -> tuple[list[Metric], list[Unavailable]]:
    """Every metric these settings allow, in display order, and the ones they do not allow, with the reason."""
    metrics: list[Metric] = [ClipCosine(settings.clip_backbone), ClipScore(settings.clip_backbone)]
    metrics += awareness.metrics(clip=settings.clip_backbone, quality=settings.quality_backbone)
    metrics += iconicity.metrics(clip=settings.clip_backbone, dino=settings.vr_backbone, tau=settings.tau,
                                 tau_patch=settings.tau_patch)
    unavailable: list[Unavailable] = []
    calibration = settings.w1kp_calibration or os.environ.get(ENV_W1KP_CALIBRATION)
    if calibration:
        try:
            metrics.append(W1KP(Calibration.load(calibration), settings.w1kp_backbone, settings.w1kp_variant))
        except ValueError as error:
            unavailable.append(Unavailable("w1kp", "variability", str(error)))
    else:
        unavailable.append(Unavailable("w1kp", "variability", (
            f"no W1KP calibration: pass --w1kp-calibration PATH_OR_URL or set {ENV_W1KP_CALIBRATION} "
            "(an .npz of cdf_x, cdf_y; see README, 'Variability')")))
    return metrics, unavailable


def select(metrics: list[Metric], unavailable: list[Unavailable], tracks: list[str] | None
           ) -> tuple[list[Metric], dict[str, str]]:
    """The metrics of the given tracks (all when None) and {metric: reason} for those of them that cannot run.
    ValueError if a requested track has no metric that can run, with the reasons."""
    if tracks:
        for track in tracks:
            if not any(m.info.track == track for m in metrics):
                reasons = [f"{u.name}: {u.reason}" for u in unavailable if u.track == track]
                known = sorted({m.info.track for m in metrics} | {u.track for u in unavailable})
                raise ValueError(f"no metric of track {track!r} can run: " + ("; ".join(reasons) if reasons else
                                 f"unknown track (tracks: {', '.join(known)})"))
        metrics = [m for m in metrics if m.info.track in tracks]
        unavailable = [u for u in unavailable if u.track in tracks]
    return metrics, {u.name: u.reason for u in unavailable}

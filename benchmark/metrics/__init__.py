"""Metrics: pure functions over embeddings, tags and scores, one module per track, each behind an
adapter (``base.Metric``) that declares what it needs."""

from __future__ import annotations

from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Metric


def available() -> list[Metric]:
    """Every metric the harness can run, in display order."""
    return [ClipCosine(), ClipScore()]


def select(tracks: list[str] | None = None) -> list[Metric]:
    """The metrics of the given tracks (all when None); ValueError names unknown tracks."""
    metrics = available()
    if not tracks:
        return metrics
    known = {m.info.track for m in metrics}
    unknown = sorted(set(tracks) - known)
    if unknown:
        raise ValueError(f"unknown track(s) {unknown}; tracks with metrics: {sorted(known)}")
    return [m for m in metrics if m.info.track in tracks]

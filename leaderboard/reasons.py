"""Why a table, chart or gallery is empty: one plain-text sentence the app shows in its place ('' when it is not).

Each function takes what the view already computed, so saying why costs no query. The sentences name the
data that is missing and where it comes from, never a server folder.
"""

from __future__ import annotations

import pandas as pd

from leaderboard import render


def ranked_table(frame: pd.DataFrame, hidden: str = "") -> str:
    """A ranked table (``tables.ranked``) with ``hidden``, the filters' note."""
    if len(frame):
        return ""
    if hidden:
        return f"Every row is hidden by the filters ({hidden.rstrip('.')}): clear a filter to see them."
    return "No model has a score for this metric and slice yet."


def win_rates(wide: pd.DataFrame, sets: list[tuple[str, int]], chosen: str) -> str:
    """The overall ranking (``tables.overall``: the win rates, every track set with its model count, the set)."""
    if len(wide):
        return ""
    if not sets:
        return "No track has a headline score yet: the overall win rate appears once tracks have results."
    return (f"Only one model is scored on {chosen} so far: a win rate compares a model with the others, so it "
            "needs at least two on the same set of tracks.")


def heatmap(matrix: pd.DataFrame, slice_name: str) -> str:
    """A model x slice heatmap (``tables.heatmap``)."""
    if len(matrix):
        return ""
    return f"No model has a value of this metric by {render.slice_label(slice_name)} yet."


def reusability_curves(curves: pd.DataFrame) -> str:
    """The W1KP curves chart (``Catalog.curves('w1kp')``)."""
    if len(curves):
        return ""
    return ("No W1KP reusability curve yet: curves come from variability submissions (several seeds per prompt) "
            "scored with a W1KP calibration.")


def crt_scatter(points: pd.DataFrame) -> str:
    """The CRT recognition vs realisation scatter (per model and still/moving)."""
    if len(points):
        return ""
    return ("No iconicity results yet: each point is a model's recognition (CRA per reference) against its "
            "realisation (1 - VR), from the CRT paper's Table 1 or a scored iconicity submission.")


def references(images: list, dataset: str | None) -> str:
    """The reference images of a prompt in Compare, from ``dataset`` (its label; None if not served)."""
    if images:
        return ""
    if dataset is None:
        return "No reference images: the prompt's dataset is not served here any more."
    return f"No reference images: {dataset} has none (reference images belong to the iconicity track's titles)."


def reuse_pictures(pictures: list, metrics: set[str]) -> str:
    """The visual-reuse pictures of Compare, given the metrics the shown images were scored on."""
    if pictures:
        return ""
    if "vr_image" not in metrics:
        return "No visual-reuse picture: visual reuse (VR) is scored on iconicity submissions only."
    return ("No visual-reuse picture: VR compares patches only for images recognised as their reference, and none "
            "of these was.")

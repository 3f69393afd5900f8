"""The views a first visit opens, made by the rankings' thread when a recompute ends (``leaderboard.app``), so that
no visitor after a change waits for them."""

from __future__ import annotations

from leaderboard import display, tables
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.slices import SlicesTab


def make(overview: OverviewTab, slices: SlicesTab, downloads: bool = True) -> None:
    """The views a first visit opens, each track's first Overview and Slices view, and each metric's ranking as the
    ``/leaderboard`` API gives it by default (overall, the default protocol), made (``StoredRankings.view``) when a
    recompute ends, not by the first visitor after it; then (``downloads``) the downloads of the overall's and each
    track's first view (a track's: 250,000 rows and 190 MB of CSV at 1,000 submissions, 2-4 s to write)."""
    cat = overview.catalog
    overview.link({})
    slices.link({})
    for track in tables.tracks(cat):
        overview.link({"track": track})
        slices.link({"track": track})
    for track in tables.tracks(cat):
        for _, metric in tables.metrics(cat, track):
            if tables.OVERALL in tables.slice_names(cat, track, metric):
                overview.leaderboard_api(track, metric)
    for track in [None, *tables.tracks(cat)] if downloads else []:
        overview.download(track, None, "", [], None, None, "", [], display.SHOWN_COLUMNS)

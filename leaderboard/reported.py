"""Results published in the papers, as leaderboard rows marked ``provenance = 'reported'``.

Every row comes from a registered track's own declaration (``Track.papers``: the numbers copied from its paper's
tables, each with its source); nothing here holds a number or a paper. They are shown beside scored rows, always
with their citation, so that the leaderboard is informative before anyone submits and scored models can be read
against the published ones.
"""

from __future__ import annotations

from benchmark import results
from benchmark import tracks as track_registry
from benchmark.track import Paper, PaperRow


def paper_protocol(paper: Paper, row: PaperRow) -> dict:
    """The protocol of a reported row: the paper's own data, its images per prompt and its settings ("paper"),
    so that it is ranked only with rows of the same paper table, never with scored ones."""
    return results.protocol_columns({"dataset": f"as published in {paper.short}",
                                     "images_per_prompt": row.images_per_prompt,
                                     "metric_version": f"paper ({row.source})", "backbones": []})


def rows() -> list[dict]:
    """Every registered track's paper rows, in the aggregate results schema (``benchmark.results.AGGREGATE``)."""
    return [{**track.papers.record(row), "track": track.name, **paper_protocol(track.papers.paper, row)}
            for track in track_registry.all_tracks().values() if track.papers for row in track.papers.rows]


def ranking_rows() -> list[dict]:
    """Every registered track's paper correlations, as rows of the Metrics tab's metric ranking table."""
    return [track.papers.correlation_record(c) for track in track_registry.all_tracks().values() if track.papers
            for c in track.papers.correlations]

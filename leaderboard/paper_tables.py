"""The papers' headline tables: the rows the papers published, and the table of each track's paper the Overview's
first view shows on a card (``paper_table``), ranked on the paper's own values."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from benchmark import tracks as track_registry
from leaderboard import render
from leaderboard.catalog import Catalog
from leaderboard.filters import Filters
from leaderboard.rankings import COLUMNS, OVERALL, higher_is_better


@dataclass
class PaperTable:
    """A paper's headline table as the Overview's first view shows it on a card: ``table`` has a row per model
    (Rank, Model, model_id, then the value on each slice value, or their mean), best first."""

    track: str
    metric: str
    label: str
    slice_name: str
    source: str
    citation: str
    protocol: str
    higher: bool
    table: pd.DataFrame


MAX_CARD_VALUES = 3  # slice values a card shows side by side (still and moving, three concepts); more: their mean


def paper_table(cat: Catalog, track: str, filters: Filters = Filters()) -> PaperTable | None:
    """The table of ``track``'s paper that the first view shows (None when the paper published none copied here):
    of the metric the track's Overview opens on if the paper reports it, else the paper's first; on the slice
    the Overview ranks it on (``tables.overview_slice``); under that paper protocol with the most rows. Models are
    ranked on the value, or on the mean of the slice values when there are several (each shown when there are at
    most ``MAX_CARD_VALUES``, else only the mean, which the column's name says)."""
    frame, _ = filters.apply(paper_rows(cat, track))
    if frame.empty:
        return None
    declared = track_registry.get(track)
    order = list(dict.fromkeys(r.metric for r in declared.papers.rows)) if declared.papers else []
    present = list(dict.fromkeys([*order, *sorted(frame["metric"])]))
    metric = declared.opens_on if declared.opens_on in set(frame["metric"]) else next(
        m for m in present if m in set(frame["metric"]))
    frame = frame[frame["metric"] == metric]
    names = sorted(set(frame["slice"]), key=lambda n: (n != declared.overview_slice, n != OVERALL,
                                                       frame.loc[frame["slice"] == n, "slice_value"].nunique(), n))
    frame = frame[frame["slice"] == names[0]]
    frame = frame[frame["protocol_id"] == frame["protocol_id"].value_counts().index[0]]
    higher = higher_is_better(frame)
    wide = frame.pivot_table(index="model", columns="slice_value", values="value", aggfunc="first")
    mean = wide.mean(axis=1)
    if names[0] == OVERALL:
        wide.columns = ["Score"]
    elif wide.shape[1] > MAX_CARD_VALUES:
        wide = pd.DataFrame({f"mean of {wide.shape[1]} {render.slice_label(names[0])} values": mean})
    wide = wide.loc[mean.sort_values(ascending=not higher, kind="stable").index]
    ids = dict(zip(frame["model"], frame["model_id"]))
    table = wide.reset_index().rename(columns={"model": "Model"})
    table.insert(0, "Rank", mean.loc[wide.index].rank(ascending=not higher, method="min").astype(int).to_numpy())
    table.insert(2, "model_id", table["Model"].map(ids))
    first = frame.iloc[0]
    return PaperTable(track, metric, str(first["metric_label"] or metric), names[0], str(first["source_table"] or ""),
                      str(first["citation"] or ""), str(first["protocol"]), higher, table)


def paper_rows(cat: Catalog, track: str | None = None) -> pd.DataFrame:
    """Every row the papers published (``COLUMNS``), or those of one track."""
    if track is None:
        return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE provenance = 'reported'")
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE provenance = 'reported' AND track = ?", [track])

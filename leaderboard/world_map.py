"""A metric's values by country, as a map and the table beside it say them: one model's (its value, interval,
prompts and rank on each country), or two models' differences with the paired interval on each country's prompts.

The numbers are the Slices table's own: ``country_rows`` is the one place the map reads rankings from, and it
calls what the Slices table calls (``tables.ranked`` on each value of the metric's ``country`` slice, its default
protocol: the same prompt set, an unanswered prompt at the worst value, the same rank rule). Where rankings come
from changes there and nowhere else.

A difference is the first model's score minus the second's on the country's prompts (each the ranking's score);
its 95% interval is ``benchmark.stats.difference_ci`` over the two models' per-prompt values on those prompts as
the ranking counts them (``rankings.read``: an unanswered prompt at the metric's worst value; a prompt undefined for
either left out). A difference whose interval holds 0, or that has none (too few prompts, or a metric made of
other metrics' means, whose per-prompt values are not its own), is no difference the data can tell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import geo
from benchmark.stats import difference_ci
from leaderboard import choropleth, display, rankings, render, tables, world_shapes
from leaderboard.catalog import Catalog

COUNTRY = "country"  # the slice a map shows
EARLIER = "an earlier submission of this model"  # ``rank_frame``'s reason for a model's earlier rows, its start
BETTER, WORSE, TIE = "better", "worse", "no difference"


def country_rows(cat: Catalog, track: str, metric: str) -> pd.DataFrame:
    """Every model's ranked row on each value of the metric's ``country`` slice, as the Slices table ranks it
    (``tables.ranked``, default protocol, no filter), with ``country`` the value; each model's latest row only
    (an earlier submission is listed apart there, and named in no map), papers' rows of other protocols left out.
    The one place the map reads rankings from."""
    parts = []
    for country in tables.slice_values(cat, track, metric, COUNTRY):
        frame, _ = tables.ranked(cat, track, metric, COUNTRY, country)
        keep = ~frame["beside"].astype(bool) & ~frame["not_ranked"].str.startswith(EARLIER)
        parts.append(frame[keep].assign(country=country, models=int(keep.sum())))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["country", "model", "provenance"])


def models(rows: pd.DataFrame) -> list[str]:
    """The models ``country_rows`` has a row of, by name."""
    return sorted(set(rows["model"]), key=str.casefold) if len(rows) else []


def of_model(rows: pd.DataFrame, model: str) -> pd.DataFrame:
    """One model's row per country (its scored one, else its paper's), by country."""
    mine = rows[rows["model"] == model].sort_values("provenance", key=lambda p: p.ne("scored"), kind="stable")
    return mine.drop_duplicates("country").set_index("country")


def iso_code(country: str) -> str | None:
    """A country name's ISO 3166-1 alpha-2 code (``benchmark.geo``), None for a name ISO does not know."""
    try:
        return geo.country_code(country)
    except geo.UnknownCountry:
        return None


@dataclass
class WorldMap:
    """What a map shows: each country's cell (by ISO alpha-2 code) and the legend, what it shows in words
    (``label``), the table beside it (one row per country with data: what the map says, for screen readers) and a
    note."""

    cells: dict[str, choropleth.Cell]
    legend: choropleth.Legend | None
    label: str
    table: pd.DataFrame
    note: str

    @property
    def html(self) -> str:
        """The map as inline SVG with its legend ('' without a legend: nothing to draw)."""
        return (choropleth.svg(self.cells, self.label) + choropleth.legend_html(self.legend)) if self.legend else ""


def _table(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """The table beside a map, its "Map" column (why a country is not drawn) only when some country is not."""
    frame = pd.DataFrame(rows, columns=list(dict.fromkeys(columns)))
    return frame if frame["Map"].astype(bool).any() else frame.drop(columns="Map")


def _place(code: str | None) -> str:
    """Where a country is drawn, for the table: '' when it is, else why not."""
    if code is None:
        return "not on the map: no ISO 3166 country of this name"
    return "" if code in world_shapes.by_alpha_2() else "not on the map: too small at this scale"


def values_map(rows: pd.DataFrame, model: str, label: str) -> WorldMap:
    """``model``'s value on each country of ``rows`` (``country_rows``), coloured on viridis between the lowest and
    the highest value any model has there (so two models' maps share a scale), with its interval, prompts and rank
    on hover and in the table."""
    mine = of_model(rows, model)
    values = pd.to_numeric(rows["value"], errors="coerce")
    low, high = (float(values.min()), float(values.max())) if values.notna().any() else (0.0, 1.0)
    higher = tables.higher_is_better(rows) if len(rows) else True
    cells, table = {}, []
    for country, row in mine.iterrows():
        code = iso_code(country)
        interval = display.interval_text(row["ci_low"], row["ci_high"], row["n"])
        n = "" if pd.isna(row["n"]) else int(row["n"])
        rank = (f"{int(row['rank'])} of {int(row['models'])}" if pd.notna(row["rank"]) and not row["not_ranked"]
                else f"not ranked: {row['not_ranked']}" if row["not_ranked"] else "")
        value = "" if pd.isna(row["value"]) else f"{row['value']:.3f}"
        said_rank = f", rank {rank}" if rank and not rank.startswith("not") else (f"; {rank}" if rank else "")
        title = (f"{country}: {label} {value or 'none'}" + (f" {interval}" if interval else "") + f", {n} prompts"
                 + said_rank)
        if code and value:
            share = 0.5 if high == low else (float(row["value"]) - low) / (high - low)
            cells[code] = choropleth.Cell(choropleth.colour(share, choropleth.VIRIDIS), title)
        table.append({"Country": country, label: value, "95% CI": interval, "Prompts": n, "Rank": rank,
                      "Map": _place(code)})
    legend = choropleth.Legend(choropleth.VIRIDIS, f"{low:.3f}", f"{high:.3f}",
                               f"{'higher' if higher else 'lower'} is better")
    shown = len(cells)
    note = (f"{render.plain(model)}: {render.plain(label)} on {shown} countr{'y' if shown == 1 else 'ies'}, the "
            f"Slices table's numbers (the same prompts and ranking); the colours run from the lowest value any model "
            f"has on a country ({low:.3f}) to the highest ({high:.3f}); hatched: no data.")
    return WorldMap(cells, legend, f"World map of {model}'s {label} by country",
                    _table(table, ["Country", label, "95% CI", "Prompts", "Rank", "Map"]), note)


def paired(cat: Catalog, track: str, metric: str, rows: pd.DataFrame, country: str, first: str, second: str
           ) -> tuple[float, float, int]:
    """The 95% interval of the paired difference of two submissions on a country's prompts (``difference_ci`` over
    the per-prompt values as the ranking counts them) and the number of prompts; (nan, nan, n) without one."""
    protocol_rows = rows[rows["protocol_id"] == rows.loc[rows["submission_id"] == first, "protocol_id"].iloc[0]]
    values = rankings.read(cat, track, metric, protocol_rows)
    if values is None or values.rule.combine is not None:
        return np.nan, np.nan, 0
    prompts, _ = values.prompt_set(COUNTRY, country)
    if not prompts or not {first, second} <= set(values.answered.columns):
        return np.nan, np.nan, 0
    matrix = values.values[0].reindex(index=prompts, columns=[first, second]).to_numpy(float)
    answered = values.answered.reindex(index=prompts, columns=[first, second], fill_value=False).to_numpy(bool)
    worst = values.rule.inputs[0].worst
    counted = np.where(answered, matrix, np.nan if worst is None else worst)
    both = ~np.isnan(counted).any(axis=1)
    sign = 1.0 if values.rule.higher_is_better else -1.0
    low, high = difference_ci(sign * (counted[both, 0] - counted[both, 1]))
    return low, high, int(both.sum())


def difference_map(cat: Catalog, track: str, metric: str, rows: pd.DataFrame, first: str, second: str,
                   label: str) -> WorldMap:
    """Where ``first`` serves a country better than ``second`` (``paired``): orange where it is better, blue where
    worse, dotted where the interval holds 0 or there is none (no difference the data can tell); the countries
    only one of them has a value on hatched, as no data."""
    a, b = of_model(rows, first), of_model(rows, second)
    higher = tables.higher_is_better(rows) if len(rows) else True
    sign = 1.0 if higher else -1.0
    found = []
    for country in a.index.intersection(b.index):
        ra, rb = a.loc[country], b.loc[country]
        if pd.isna(ra["value"]) or pd.isna(rb["value"]):
            continue
        better = sign * (float(ra["value"]) - float(rb["value"]))  # > 0: the first model is better
        low, high, n = (paired(cat, track, metric, rows[rows["country"] == country], country, ra["submission_id"],
                               rb["submission_id"]) if ra["provenance"] == rb["provenance"] == "scored"
                        else (np.nan, np.nan, 0))
        verdict = TIE if np.isnan(low) or low <= 0 <= high else BETTER if low > 0 else WORSE
        found.append((country, ra, rb, better, low, high, n, verdict))
    reach = max([abs(f[3]) for f in found] + [1e-9])
    cells, table = {}, []
    for country, ra, rb, better, low, high, n, verdict in found:
        code = iso_code(country)
        interval = display.interval_text(low, high, n) if n else ""
        said = {BETTER: f"{first} better", WORSE: f"{second} better", TIE: TIE}[verdict]
        title = (f"{country}: {said}; {label} {ra['value']:.3f} against {rb['value']:.3f}, difference "
                 f"{better:+.3f}" + (f" {interval}" if interval else " (no interval)") + f", {n} prompts")
        if code:
            fill = choropleth.TIE if verdict == TIE else choropleth.colour(0.5 + better / (2 * reach),
                                                                            choropleth.BLUE_ORANGE)
            cells[code] = choropleth.Cell(fill, title)
        table.append({"Country": country, first: f"{ra['value']:.3f}", second: f"{rb['value']:.3f}",
                      "Difference (+: first better)": f"{better:+.3f}", "95% CI (paired)": interval, "Prompts": n or "",
                      "Verdict": said, "Map": _place(code)})
    legend = choropleth.Legend(choropleth.BLUE_ORANGE, f"{second} better", f"{first} better",
                               f"difference in {label}", tie=True)
    counts = {v: sum(f[7] == v for f in found) for v in (BETTER, WORSE, TIE)}
    note = (f"{render.plain(first)} against {render.plain(second)} on {render.plain(label)}: better on "
            f"{counts[BETTER]} countr{'y' if counts[BETTER] == 1 else 'ies'}, worse on {counts[WORSE]}, no difference "
            f"the data can tell on {counts[TIE]} (dotted: the paired 95% interval holds 0, or there is none)."
            + ("" if higher else " Lower is better on this metric: a difference is counted the better way round."))
    columns = ["Country", first, second, "Difference (+: first better)", "95% CI (paired)", "Prompts", "Verdict", "Map"]
    return WorldMap(cells, legend, f"World map of {first} against {second} on {label} by country",
                    _table(table, columns), note)

"""The Slices tab: any metric by country, continent, concept, domain, still/moving, country x concept; the model x
slice heatmap; models across tracks (mean win rate, win rate per track) and each track's own charts."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from benchmark import tracks as track_registry
from benchmark.track import Chart
from benchmark.words import counted
from leaderboard import display, protocol_names, render, stored_rankings, tables
from leaderboard.ui import address, notes
from leaderboard.ui.site import Tab
from leaderboard.ui.widgets import (
    Parts,
    compact_table,
    linked_table,
    on_change,
    pick,
    shown_if_filled,
    text_markdown,
)

CHART_MODELS = 20
MAX_ROWS = 100  # rows a slice's table shows (the note says when there are more)
PAPER_MARK = {"reported": " (paper)", "scored": ""}  # a chart's model name says which row is a paper's
# What the tab says on a leaderboard with no rows at all (a fresh store): what fills it.
NOTHING_YET = ("Nothing is scored on this leaderboard yet: a model's rows appear here, by country, concept and the "
               "other slices, once its submission is scored (the Submit tab says how to send one).")
COLUMNS = ["Rank", "Rank range (95%)", "Model", "Score", "95% CI", "n", "Refused", "Provenance"]  # the slice table's


def track_charts() -> list[tuple[str, Chart]]:
    """(track, chart) for every chart a registered track adds to the Slices tab, in track order."""
    return [(name, chart) for name, track in track_registry.all_tracks().items() for chart in track.charts]


class SlicesTab(Tab):
    """The Slices' views over ``site``; ``build`` makes its components."""

    def slices(self, track, metric, slice_name, slice_value, models):
        """The Slices tab (the ``/slices`` API): track, metric (ids), slice and value pickers, the ranked rows of
        one slice value, its note, the model x value heatmap, and the charts across tracks (``charts``); made once
        per state of the results for the same choices (``StoredRankings.view``)."""
        return stored_rankings.of(self.catalog).view(
            "slices", (track, metric, slice_name, slice_value, models),
            lambda: self._slices(track, metric, slice_name, slice_value, models))

    def _slices(self, track, metric, slice_name, slice_value, models):
        filters = tables.Filters.parse(models)
        track_choices = [(track_registry.get(t).title, t) for t in tables.tracks(self.catalog)]
        track = pick(track, [t for _, t in track_choices])
        pairs = tables.metrics(self.catalog, track) if track else []
        metric = tables.metric_id(self.catalog, track, metric) if track else None
        label = {m: text for text, m in pairs}.get(metric, "")
        slice_names = tables.slice_names(self.catalog, track, metric) if metric else []
        slice_names = [n for n in slice_names if n != tables.OVERALL] or slice_names  # overall when nothing finer
        slice_name = pick(slice_name, slice_names, "country")
        values = tables.slice_values(self.catalog, track, metric, slice_name) if slice_name else []
        slice_value = pick(slice_value, values)
        table = tables.protocols(self.catalog, track, metric, slice_name, slice_value) if slice_value else None
        chosen = tables.pick_protocol(table) if slice_value else None
        suite = self.site.store.suite
        names = protocol_names.protocol_names(track, table, suite) \
            if slice_value else {}
        frame, hidden = tables.ranked(self.catalog, track, metric, slice_name, slice_value, filters, chosen) \
            if slice_value else (pd.DataFrame(), "")
        matrix = tables.heatmap(self.catalog, track, metric, slice_name, filters, chosen) if slice_name else \
            pd.DataFrame()
        higher = tables.higher_is_better(frame) if len(frame) else True
        caption = (f"{label}, overall" if slice_name == tables.OVERALL
                   else f"{label} by {render.slice_label(slice_name or '')}")
        darker = "better" if not track_registry.get(track or "").not_in_overall else (
            f"{'higher' if higher else 'lower'}; neither end is better")
        heat = render.heatmap_html(matrix, higher, f"{caption} (darker = {darker})", empty=(
            f"No model has a value of this metric by {render.slice_label(slice_name)} yet." if slice_name
            else NOTHING_YET))
        where = "overall" if slice_name == tables.OVERALL else f"{render.slice_label(slice_name)} = {slice_value}"
        line, details = self._note(label, where, frame, hidden, chosen, table, names, track)
        note = line + (f"\n\n{details}" if details else "")
        return (gr.update(choices=track_choices, value=track), gr.update(choices=pairs, value=metric),
                gr.update(choices=[(render.slice_label(n), n) for n in slice_names], value=slice_name),
                gr.update(choices=values, value=slice_value), display.display(frame.head(MAX_ROWS), names), note, heat,
                *self.charts(filters))

    def _note(self, label: str, where: str, frame: pd.DataFrame, hidden: str, chosen: str | None,
              table: pd.DataFrame | None, names: dict[str, str], track: str) -> tuple[str, str]:
        """The table's note: the line people read first (what is ranked, under which protocol, how it differs from
        the suite's, what filters hid) and the details one click away."""
        if not len(frame):
            return ("No results for this choice yet." if track else NOTHING_YET), ""
        line = (f"**{render.plain(label)}**, {render.plain(where)}: {counted(len(frame), 'row')}. "
                + notes.protocol_line(chosen, table, names, track, self.site.store.suite))
        if hidden:
            line += f" **Note:** {render.plain(hidden)}"
        if len(frame) > MAX_ROWS:
            line += f" Showing the top {MAX_ROWS}: search models to find others."
        return line, (notes.protocol_note(table, chosen, track, names)
                      + " (The Overview's protocol picker lists the others.)")

    def page(self, *inputs) -> dict:
        """``slices`` for the page, by output name: the table compact with its links rendered, its line and the
        details folded, each chart hidden when empty (the note above them says why), a scatter with a margin
        round its points."""
        track, metric, slice_name, value, table, note, heat, bars, profile, *points, chart_note = self.slices(*inputs)
        line, _, details = note.partition("\n\n")
        named = {"track": track, "metric": metric, "slice": slice_name, "value": value,
                 "table": linked_table(compact_table(table, COLUMNS)), "note": line, "details": details,
                 "heat": heat, "bars": shown_if_filled(bars), "profile": profile, "chart_note": chart_note}
        for i, ((_, chart), frame) in enumerate(zip(track_charts(), points)):
            limits = padded_limits(frame, chart) if chart.kind == "scatter" else {}
            named[f"chart {i}"] = shown_if_filled(frame, **limits)
        return named

    def link(self, state: dict) -> dict:
        """The tab as a link's query names it (``track``, ``metric``, ``slice``, ``value``, ``models``)."""
        named = self.page(state.get("track"), state.get("metric"), state.get("slice"), state.get("value"),
                          state.get("models", ""))
        return {**named, "models": state["models"]} if "models" in state else named

    def charts(self, filters: tables.Filters):
        """``_charts``, made once per state of the results for the same filters (``StoredRankings.view``): the same
        whichever track, metric and slice the tab shows."""
        return stored_rankings.of(self.catalog).view("charts", (filters,), lambda: self._charts(filters))

    def _charts(self, filters: tables.Filters):
        """Models across tracks (mean win rate bars, win rate per track as a heatmap), then each track's own charts
        (``benchmark.track.Chart``: W1KP's reusability curves, CRT's recognition against realisation...), each of
        the one protocol its track's Overview ranks (``tables.chart_protocols``, ``tables.pick_protocol``) and of the
        metrics and slices it reads (``Chart.metrics``, ``Chart.slices``), each value as its ranking gives it
        (``stored_rankings.ranked_values``: the protocol's prompts, an unanswered one counting as worst): the
        ``CHART_MODELS`` best models by mean win rate, unless a search names others (curves: those first, then others
        by name, up to as many)."""
        wide = tables.overall(self.catalog, filters)[0].head(CHART_MODELS)  # the largest track set
        who = wide["model"] + wide["provenance"].map(PAPER_MARK)
        bars = pd.DataFrame({"model": who, "mean win rate": wide["win_rate"]})
        per_track = wide[tables.win_rate_columns(wide)].set_index(who)
        per_track.columns = [track_registry.get(c).title for c in per_track.columns]
        profile = render.heatmap_html(per_track, True, "win rate per track (darker = better; – = no score)")
        curves = tables.curves(self.catalog)
        points = []
        said = [] if len(bars) else ["no model has a headline score on a track yet (or the filters hide them all)"]
        for track, chart in track_charts():
            # One protocol per chart, the one the track's Overview ranks: points scored otherwise never mix in.
            table = tables.chart_protocols(self.catalog, track)
            chosen = tables.pick_protocol(table) if table is not None else None
            rows, _ = filters.apply(tables.chart_rows(self.catalog, track, chosen, chart.metrics, chart.slices))
            aggregates = stored_rankings.ranked_values(  # the values its tables rank
                self.catalog, rows[rows["metric"].isin(chart.metrics) & rows["slice"].isin(chart.slices)])
            frame = chart.data(aggregates.assign(model=aggregates["model"] + aggregates["provenance"].map(PAPER_MARK)),
                               chart_curves(curves[curves["submission_id"].isin(rows["submission_id"])],
                                            list(wide["model"])))
            points.append(frame)
            if frame.empty:
                said.append(chart.empty)
            elif chosen:
                name = protocol_names.protocol_names(track, table, self.site.store.suite)[chosen]
                said.append(f"{chart.label}: {name} only, the protocol the Overview ranks for this track")
        return bars, profile if len(bars) else "", *points, "".join(f"- {why}.\n" for why in said)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        with gr.Row():
            track = gr.Dropdown(label="Track", choices=[], interactive=True, allow_custom_value=True)
            metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True)
            slice_name = gr.Dropdown(label="Slice by", choices=[], interactive=True, allow_custom_value=True)
            value = gr.Dropdown(label="Value", choices=[], interactive=True, allow_custom_value=True)
            models = gr.Textbox(label="Models (comma-separated)", placeholder="all")
        note = text_markdown()
        with gr.Accordion("How to read this table", open=False, elem_classes=["cl-details"]):
            details = text_markdown()
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        gr.Markdown("#### Model × slice heatmap")
        heat = gr.HTML(elem_classes=["cl-scroll"])
        gr.Markdown("#### Models across tracks")
        chart_note = text_markdown()
        bars = gr.BarPlot(x="model", y="mean win rate", label="Mean win rate over tracks", y_lim=[0, 1], sort="-y",
                          x_label_angle=-30)
        profile = gr.HTML(elem_classes=["cl-scroll"])
        with gr.Row():
            charts = [(gr.ScatterPlot if chart.kind == "scatter" else gr.LinePlot)(
                x=chart.x, y=chart.y, color=chart.color, label=chart.label, min_width=300)
                for _, chart in track_charts()]
        self.parts = Parts(
            inputs={"track": track, "metric": metric, "slice": slice_name, "value": value, "models": models},
            outputs={"track": track, "metric": metric, "slice": slice_name, "value": value, "table": table,
                     "note": note, "details": details, "heat": heat, "bars": bars, "profile": profile,
                     **{f"chart {i}": chart for i, chart in enumerate(charts)}, "chart_note": chart_note,
                     "models": models})
        inputs = list(self.parts.inputs.values())
        for control in inputs:
            on_change(control)(self.parts.wire(self.page), inputs, list(self.parts.outputs.values()),
                               api_name=False).then(
                None, inputs, None, js=address.url_js("slices", ["track", "metric", "slice", "value", "models"]))
        return self.parts

    def api_outputs(self) -> list:
        """The ``/slices`` API's outputs, in ``slices``' order."""
        names = ["track", "metric", "slice", "value", "table", "note", "heat", "bars", "profile",
                 *(f"chart {i}" for i in range(len(track_charts()))), "chart_note"]
        return [self.parts.outputs[name] for name in names]


def padded_limits(points: pd.DataFrame, chart: Chart, pad: float = 0.05) -> dict:
    """``x_lim`` and ``y_lim`` that leave a margin round a scatter's points, so none is cut at the edge."""
    limits = {}
    for axis, column in (("x_lim", chart.x), ("y_lim", chart.y)):
        if len(points):
            low, high = float(points[column].min()), float(points[column].max())
            margin = max((high - low) * pad, 0.02)
            limits[axis] = [low - margin, high + margin]
    return limits


def chart_curves(curves: pd.DataFrame, best: list[str]) -> pd.DataFrame:
    """The curves a chart draws: of at most ``CHART_MODELS`` models (those of ``best`` first, in its order, then
    the others by name), a model name that several submissions share marked with the submission's id's end."""
    drawn = set(curves["model"].unique())
    names = list(dict.fromkeys([m for m in best if m in drawn] + sorted(drawn)))
    curves = curves[curves["model"].isin(names[:CHART_MODELS])]
    if curves["submission_id"].nunique() > curves["model"].nunique():  # one name, several submissions
        curves = curves.assign(model=curves["model"] + " · " + curves["submission_id"].str[-6:])
    return curves

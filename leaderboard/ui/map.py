"""The Map tab: a metric by country on a world map, for one model or two models' difference, with the table that
says the same for screen readers (``leaderboard.world_map``: the Slices table's numbers)."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from benchmark import tracks as track_registry
from leaderboard import render, tables, world_map
from leaderboard.ui import address
from leaderboard.ui.site import Tab
from leaderboard.ui.widgets import Parts, on_change, pick, text_markdown

NONE = ""  # the Versus picker's value for one model's map
NO_COUNTRIES = ("No metric has values by country yet: a model's map appears once a track whose prompts name "
                "countries (awareness on CUBE-1K, expectations on CulturalFrames) is scored.")


class MapTab(Tab):
    """The Map tab's views over ``site``; ``build`` makes its components."""

    def mapped_tracks(self) -> list[tuple[str, str]]:
        """(title, id) of the tracks with a metric by country."""
        return [(track_registry.get(t).title, t) for t in tables.tracks(self.catalog)
                if self.mapped_metrics(t)]

    def mapped_metrics(self, track: str) -> list[tuple[str, str]]:
        """(label, id) of a track's metrics that have a ``country`` slice, the headline first."""
        return [(label, metric) for label, metric in tables.metrics(self.catalog, track)
                if world_map.COUNTRY in tables.slice_names(self.catalog, track, metric)]

    def world_map(self, track, metric, model, versus):
        """The ``/world_map`` API: the track, metric, model and versus pickers (an unknown value falls back to the
        first choice; the note says so for a model), the note, the map (SVG) and its table."""
        tracks = self.mapped_tracks()
        track = pick(track, [t for _, t in tracks])
        metrics = self.mapped_metrics(track) if track else []
        metric = pick(metric, [m for _, m in metrics], track_registry.get(track).headline if track else None)
        if not metric:
            return (gr.update(choices=tracks, value=track), gr.update(choices=metrics, value=metric),
                    gr.update(choices=[], value=None), gr.update(choices=[], value=None), NO_COUNTRIES, "",
                    pd.DataFrame())
        label = dict((m, text) for text, m in metrics)[metric]
        rows = world_map.country_rows(self.catalog, track, metric)
        names = world_map.models(rows)
        best = rows.sort_values(["rank", "value"], ascending=[True, not tables.higher_is_better(rows)],
                                na_position="last")["model"]
        asked = model if model not in (None, "") and model not in names else None
        model = pick(model, names, best.iloc[0] if len(best) else None)
        versus = versus if versus in names and versus != model else NONE
        if model is None:
            shown = world_map.WorldMap({}, None, "", pd.DataFrame(),
                                       "No model has a value of this metric by country yet.")
        elif versus:
            shown = world_map.difference_map(self.catalog, track, metric, rows, model, versus, label)
        else:
            shown = world_map.values_map(rows, model, label)
        note = shown.note
        if asked is not None:  # a link's or a caller's model: said back as text, never looked up anywhere else
            note = (f"No model named “{render.plain(str(asked)[:100])}” has values of this metric by country; "
                    f"showing the first one instead. {note}")
        return (gr.update(choices=tracks, value=track), gr.update(choices=metrics, value=metric),
                gr.update(choices=names, value=model),
                gr.update(choices=[("(one model)", NONE), *[(n, n) for n in names if n != model]], value=versus),
                note, shown.html, shown.table)

    def page(self, track, metric, model, versus) -> dict:
        """``world_map`` for the page, by output name."""
        names = ["track", "metric", "model", "versus", "note", "svg", "table"]
        return dict(zip(names, self.world_map(track, metric, model, versus)))

    def link(self, state: dict) -> dict:
        """The tab as a link's query names it (``track``, ``metric``, ``model``, ``versus``)."""
        return self.page(state.get("track"), state.get("metric"), state.get("model"), state.get("versus"))

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        with gr.Row():
            track = gr.Dropdown(label="Track", choices=[], interactive=True, allow_custom_value=True)
            metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True)
            model = gr.Dropdown(label="Model", choices=[], interactive=True, allow_custom_value=True)
            versus = gr.Dropdown(label="Versus", choices=[], interactive=True, allow_custom_value=True)
        note = text_markdown()
        svg = gr.HTML(elem_classes=["cl-map-box"])
        gr.Markdown("#### The map as a table")
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        self.parts = Parts(inputs={"track": track, "metric": metric, "model": model, "versus": versus},
                           outputs={"track": track, "metric": metric, "model": model, "versus": versus, "note": note,
                                    "svg": svg, "table": table})
        inputs = list(self.parts.inputs.values())
        for control in inputs:
            on_change(control)(self.parts.wire(self.page), inputs, list(self.parts.outputs.values()),
                               api_name=False).then(
                None, inputs, None, js=address.url_js("map", ["track", "metric", "model", "versus"]))
        return self.parts

    def api_outputs(self) -> list:
        """The ``/world_map`` API's outputs, in ``world_map``'s order."""
        return [self.parts.outputs[n] for n in ("track", "metric", "model", "versus", "note", "svg", "table")]

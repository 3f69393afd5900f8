"""The Overview tab: one ranked table per track and protocol, and the overall mean win rate across tracks; filters,
columns, the view as typed files, and the ``/leaderboard`` and ``/overall`` APIs (records, not display)."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from benchmark import tracks as track_registry
from leaderboard import exports, render, tables
from leaderboard.ui import address, notes
from leaderboard.ui.site import Site
from leaderboard.ui.widgets import Parts, linked_table, on_change, pick, text_markdown

OVERALL_VIEW = "overall"  # the Track picker's value for the mean win rate over tracks
OVERALL_LABEL = "All tracks (mean win rate)"
TYPES = ["open", "closed", "unknown"]
MAX_ROWS = 100  # rows a ranked table shows (the note says when there are more; downloads have all)
SLICE_COLUMN = "Slice"  # the column naming a row's slice value where the Overview lists a slice's values


class OverviewTab:
    """The Overview's views over ``site``; ``build`` makes its components."""

    def __init__(self, site: Site):
        self.site = site
        self.parts = Parts()

    @property
    def catalog(self):
        return self.site.catalog

    def overview(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None, limit: int | None = MAX_ROWS):
        """The Overview tab (the ``/overview`` API): the track picker, the metric picker (metric ids; a label is
        understood too), the ranked (or win-rate) table, its note, the protocol picker (the track set, for the
        overall view) and the filter panel's title, which names the active filters."""
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        choices = [(OVERALL_LABEL, OVERALL_VIEW), *self.site.track_choices()]
        track = pick(track, [t for _, t in choices], OVERALL_VIEW)
        if track == OVERALL_VIEW:
            shown, note, metric_update, protocol_update, hidden = self._overall_view(filters, protocol)
        else:
            shown, note, metric_update, protocol_update, hidden = self._track_view(track, metric, filters, protocol)
        if hidden:
            note += f"\n\n**Note:** {render.plain(hidden)}"  # it quotes what a visitor typed
        if track != OVERALL_VIEW and columns:  # the column choice is over the ranked tables' columns
            keep = (SLICE_COLUMN, "Rank", "Model")
            shown = shown[[c for c in shown.columns if c in columns or c in keep]]
        if limit is not None and len(shown) > limit:
            note += (f"\n\nShowing the top {limit} of {len(shown)} rows: search or filter to find the others, or "
                     "download the view (every row).")
            shown = shown.head(limit)
        return (gr.update(choices=choices, value=track), metric_update, shown, note, protocol_update,
                gr.update(label=notes.filters_label(filters, columns)))

    def page(self, *inputs) -> dict:
        """``overview`` for the page, by output name: the table's links rendered (``linked_table``)."""
        track, metric, table, note, protocol, panel = self.overview(*inputs)
        return {"track": track, "metric": metric, "table": linked_table(table), "note": note, "protocol": protocol,
                "panel": panel}

    def link(self, state: dict) -> dict:
        """The page as a link's query names it (``track``, ``metric``, ``models``, ``protocol``), by output name,
        with the model search box as the link fills it."""
        named = self.page(state.get("track"), state.get("metric"), state.get("models", ""), [], None, None, "", [],
                          tables.RANK_COLUMNS, state.get("protocol"))
        return {**named, "models": state["models"]} if "models" in state else named

    def _overall_view(self, filters: tables.Filters, track_set: str | None):
        """The mean win rate over tracks: table, note, metric and track-set picker updates, what filters hid."""
        _, hidden = filters.apply(tables.headline_rows(self.catalog))
        wide, sets, chosen, off = tables.overall(self.catalog, filters, track_set)
        return (tables.display_win_rates(wide, tables.model_ids(self.catalog)),
                notes.overall_note(chosen, sets, off, wide.attrs.get("note", "")),
                gr.update(choices=[], value=None, visible=False),
                gr.update(label="Track set", choices=[(f"{s} ({n} model(s))", s) for s, n in sets],
                          value=chosen or None), hidden)

    def _track_view(self, track: str, metric: str | None, filters: tables.Filters, protocol: str | None):
        """One track's metric, ranked on the slice the Overview shows it on (``tables.overview_slice``): table,
        note, metric and protocol picker updates, and what filters hid."""
        pairs = tables.metrics(self.catalog, track)
        metric = tables.metric_id(self.catalog, track, metric)
        metric_update = gr.update(choices=pairs, value=metric, visible=True)
        if metric is None:
            return (tables.display(pd.DataFrame()), notes.empty_track_note(track), metric_update,
                    gr.update(label="Protocol", choices=[], value=None), "")
        name, values = tables.overview_slice(self.catalog, track, metric)
        table = tables.protocols(self.catalog, track, metric, name, values[0])
        chosen = tables.pick_protocol(table, protocol)
        shown, higher, hidden = self._ranked_values(track, metric, name, values, filters, chosen)
        label = {m: text for text, m in pairs}[metric]
        where = "overall" if name == tables.OVERALL else (
            f"by {render.slice_label(name)}, each value ranked apart (the results have no overall value; the Slices "
            "tab shows one value at a time)")
        note = (f"**{render.plain(label)}**, {render.plain(where)}: {len(shown)} row(s), "
                f"{'higher' if higher else 'lower'} is better. " + notes.protocol_note(table, chosen, track) +
                " 95% CI over the same prompts: Student-t (Wilson for 0/1 values; for a metric computed from means, "
                "such as CRT from column means, the bootstrap's); none below 5 prompts, too few to cover."
                + notes.agreement_note(self.site.store.meta_evaluation(), metric)
                if len(shown) else "No results for this choice yet.")
        return shown, note, metric_update, gr.update(label="Protocol", choices=notes.protocol_choices(table),
                                                     value=chosen), hidden

    def _ranked_values(self, track: str, metric: str, name: str, values: list[str], filters: tables.Filters,
                       protocol: str | None) -> tuple[pd.DataFrame, bool, str]:
        """The rows of each value of slice ``name``, each value ranked apart, for people (with a *Slice* column
        unless the slice is overall); whether higher is better; and the notes, the filters' counted over every
        value at once."""
        shown, said, higher = [], [], True
        rows = tables.rows(self.catalog, track, metric, name)
        for value in values:
            frame, note = tables.ranked(self.catalog, track, metric, name, value, filters, protocol)
            if len(frame):
                higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() \
                    else True
            own = filters.apply(rows[rows["slice_value"] == value])[1]  # this value's filter note, counted below
            said.append(note.replace(own, "").strip() if own else note)
            part = tables.display(frame)
            if name != tables.OVERALL:
                part.insert(0, SLICE_COLUMN, value)
            shown.append(part)
        hidden = filters.apply(rows)[1]
        return (pd.concat(shown, ignore_index=True), higher,
                " ".join(dict.fromkeys(n for n in (hidden, *said) if n)))

    def download(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None) -> list[str]:
        """The Overview's view as typed rows (``leaderboard.exports``), CSV and Parquet: for a track, every row
        of it the filters keep (every metric and slice), those of the table shown with their ranks; for the
        overall view, the win rates of the track set shown and the headline rows behind them. Every column
        (``columns`` chooses what the screen shows)."""
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        if track in tables.tracks(self.catalog):
            frame = exports.track_rows(self.catalog, track, metric, protocol, filters)
            return self.site.files(frame, track if track in track_registry.all_tracks() else "track")
        return self.site.files(exports.overall_rows(self.catalog, filters, protocol), "overall")

    def leaderboard_api(self, track: str, metric: str, slice_name: str = tables.OVERALL, slice_value: str = "all",
                        protocol_id: str | None = None) -> list[dict]:
        """One ranked table as typed records (``leaderboard.exports.COLUMNS``): track, metric, slice and
        protocol by id (``slice_name`` 'overall' with value 'all', or e.g. 'country' and 'Nigeria'; protocol
        default: the track's headline one when it has rows, else the largest). The protocol's rows come ranked
        (rank, rank_low, rank_high, tie_group), then paper rows of other protocols with no rank. An unknown id
        is an error naming the valid ones."""
        try:
            return exports.records(exports.ranking(self.catalog, track, metric, slice_name, slice_value,
                                                   protocol_id))
        except exports.UnknownChoice as error:
            raise gr.Error(str(error)) from None

    def overall_api(self, track_set: str | None = None) -> list[dict]:
        """The overall ranking as typed records (``leaderboard.exports.overall_rows``): per model a
        ``mean_win_rate`` row (track 'overall', slice value the track set; value, 95% interval, rank and its
        interval), a ``win_rate`` row per track, then the headline rows behind them. ``track_set`` ('awareness +
        iconicity'): default the set with the most tracks among those with two models or more; an unknown one
        is an error naming those there are."""
        try:
            return exports.records(exports.overall_ranking(self.catalog, track_set))
        except exports.UnknownChoice as error:
            raise gr.Error(str(error)) from None

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        with gr.Row():
            track = gr.Radio(label="Track", choices=[(OVERALL_LABEL, OVERALL_VIEW), *self.site.track_choices()],
                             value=OVERALL_VIEW, scale=3, min_width=320)
            metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True, scale=2)
            protocol = gr.Dropdown(label="Protocol", choices=[], interactive=True, allow_custom_value=True, scale=2)
        with gr.Accordion(notes.filters_label(tables.Filters(), tables.RANK_COLUMNS), open=False) as panel:
            with gr.Row():
                models = gr.Textbox(label="Models (comma-separated, any matches)", placeholder="SDXL, FLUX")
                types = gr.CheckboxGroup(TYPES, label="Model type (none = all)")
                provenance = gr.CheckboxGroup(["scored", "reported"], label="Provenance (none = all)")
            with gr.Row():
                size_min = gr.Number(label="Min size, B params (0 = no bound)", value=None)
                size_max = gr.Number(label="Max size, B params (0 = no bound)", value=None)
                since = gr.Textbox(label="Scored since (YYYY-MM-DD)")
            columns = gr.CheckboxGroup(tables.RANK_COLUMNS, value=tables.RANK_COLUMNS, label="Columns")
        note = text_markdown()
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        download = gr.Button("Download this view (CSV, Parquet)", size="sm")
        files = gr.File(label="Downloads", file_count="multiple", visible=False)
        self.parts = Parts(
            inputs={"track": track, "metric": metric, "models": models, "types": types, "size_min": size_min,
                    "size_max": size_max, "since": since, "provenance": provenance, "columns": columns,
                    "protocol": protocol},
            outputs={"track": track, "metric": metric, "table": table, "note": note, "protocol": protocol,
                     "panel": panel, "models": models})
        inputs = list(self.parts.inputs.values())
        download.click(self.download, inputs, files, api_name="download").then(
            lambda: gr.update(visible=True), None, files, api_name=False)
        for control in inputs:
            on_change(control)(self.parts.wire(self.page), inputs, list(self.parts.outputs.values()),
                               api_name=False).then(
                None, [track, metric, models, protocol], None,
                js=address.url_js("overview", ["track", "metric", "models", "protocol"]))
        gr.api(self.leaderboard_api, api_name="leaderboard")
        return self.parts

    def api_outputs(self) -> list:
        """The ``/overview`` API's outputs, in ``overview``'s order."""
        return [self.parts.outputs[name] for name in ("track", "metric", "table", "note", "protocol", "panel")]

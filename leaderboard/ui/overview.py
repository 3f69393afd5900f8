"""The Overview tab: what a visitor reads first. It opens on what exists: the overall ranking across the tracks
where scored suite rows exist, else each paper's headline table on a card, with the way in to submit. Then one
ranked table per track and protocol, compact (rank with its range, model, score with its interval, provenance; the
rest behind "Columns"), named by its protocol's name with the one line that says how it differs from the suite's;
filters, the view as typed files, and the ``/leaderboard`` and ``/overall`` APIs (records, not display)."""

from __future__ import annotations

import html

import gradio as gr
import pandas as pd

from benchmark import results
from benchmark import tracks as track_registry
from benchmark.words import counted
from leaderboard import display, exports, links, paper_tables, protocol_names, render, stored_rankings, tables
from leaderboard.ui import address, notes
from leaderboard.ui.site import Tab
from leaderboard.ui.widgets import Parts, compact_table, compact_win_rates, linked_table, on_change, pick, text_markdown

PAPERS_VIEW = "papers"  # the Track picker's value for the papers' headline tables, side by side
PAPERS_LABEL = "The papers' tables"
OVERALL_VIEW = "overall"  # the Track picker's value for the mean win rate over tracks
OVERALL_LABEL = "All tracks (mean win rate)"
TYPES = ["open", "closed", "unknown"]
MAX_ROWS = 100  # rows a ranked table shows (the note says when there are more; downloads have all)
SLICE_COLUMN = "Slice"  # the column naming a row's slice value where the Overview lists a slice's values
PAPER_COLUMNS = ["Track", "Rank", "Model", "Metric", "Score", "Source"]  # the papers view's table, for the API


class OverviewTab(Tab):
    """The Overview's views over ``site``; ``build`` makes its components."""

    def choices(self) -> list[tuple[str, str]]:
        """The Track picker: the papers' tables, the overall ranking, then every track."""
        return [(PAPERS_LABEL, PAPERS_VIEW), (OVERALL_LABEL, OVERALL_VIEW), *self.site.track_choices()]

    def first_view(self) -> str:
        """What the Overview opens on: the overall ranking where scored suite rows exist, else the papers' tables."""
        return OVERALL_VIEW if tables.suite_tracks(self.catalog) else PAPERS_VIEW

    def view(self, track, metric, models, types, size_min, size_max, since, provenance, columns, protocol=None,
             limit: int | None = MAX_ROWS) -> dict:
        """The Overview as named parts: ``track`` (the view shown), the picker updates, ``frame`` (the table as
        ``display.display`` gives it, columns chosen), ``line`` (the note people read first: what is ranked, under
        which protocol and how it differs from the suite's, what the filters hid) and ``details`` (the rest,
        one click away), ``cards`` (the papers' tables, in the papers view) and the filter panel's title. Made once
        per state of the results for the same choices (``StoredRankings.view``)."""
        arguments = (track, metric, models, types, size_min, size_max, since, provenance, columns, protocol, limit)
        return stored_rankings.of(self.catalog).view("overview", arguments, lambda: self._view(*arguments))

    def _view(self, track, metric, models, types, size_min, size_max, since, provenance, columns, protocol,
              limit) -> dict:
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        choices = self.choices()
        views = [t for _, t in choices]
        track = track if track in views else pick(None, views, self.first_view())  # the default read only if needed
        if track == PAPERS_VIEW:
            shown = self._papers_view(filters)
        elif track == OVERALL_VIEW:
            shown = self._overall_view(filters, protocol)
        else:
            shown = self._track_view(track, metric, filters, protocol, columns)
        if shown.get("updating"):  # said where people read first, not only in the details one click away
            shown["line"] += f"\n\n**Note:** {stored_rankings.UPDATING}."
        if shown.get("hidden"):
            shown["line"] += f"\n\n**Note:** {render.plain(shown['hidden'])}"  # it quotes what a visitor typed
        frame = shown["frame"]
        if limit is not None and len(frame) > limit:
            shown["line"] += (f"\n\nShowing the top {limit} of {len(frame)} rows: search or filter to find the others, "
                              "or download the view (every row).")
            shown["frame"] = frame.head(limit)
        return {"track": gr.update(choices=choices, value=track), "cards": "", **shown,
                "panel": gr.update(label=notes.filters_label(filters, columns))}

    def overview(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None, limit: int | None = MAX_ROWS):
        """The ``/overview`` API: the track picker, the metric picker (metric ids; a label is understood too), the
        table (ranked rows, win rates, or the papers' tables one after another), its note in full, the protocol
        picker (the track set, for the overall view) and the filter panel's title, which names the active
        filters."""
        shown = self.view(track, metric, models, types, size_min, size_max, since, provenance, columns, protocol,
                          limit)
        note = shown["line"] + (f"\n\n{shown['details']}" if shown["details"] else "")
        return shown["track"], shown["metric"], shown["frame"], note, shown["protocol"], shown["panel"]

    def page(self, *inputs) -> dict:
        """The Overview for the page, by output name: the compact table (or the papers' cards), its line, the
        details folded below it."""
        shown = self.view(*inputs)
        track, columns = shown["track"]["value"], inputs[8]
        papers = track == PAPERS_VIEW
        frame = compact_win_rates(shown["frame"]) if track == OVERALL_VIEW else compact_table(shown["frame"], columns)
        return {"track": shown["track"], "metric": shown["metric"], "protocol": shown["protocol"],
                "panel": shown["panel"], "note": shown["line"], "details": shown["details"],
                "cards": gr.update(value=shown["cards"], visible=papers),
                "table": gr.update(**linked_table(frame), visible=not papers),
                "download": gr.update(visible=not papers), "submit": gr.update(visible=papers)}

    def link(self, state: dict) -> dict:
        """The page as a link's query names it (``track``, ``metric``, ``models``, ``protocol``), by output name,
        with the model search box as the link fills it."""
        named = self.page(state.get("track"), state.get("metric"), state.get("models", ""), [], None, None, "", [],
                          display.SHOWN_COLUMNS, state.get("protocol"))
        return {**named, "models": state["models"]} if "models" in state else named

    # --- the three kinds of view ----------------------------------------------------------------------------------
    def _papers_view(self, filters: tables.Filters) -> dict:
        """Each paper's headline table (``paper_tables.paper_table``) as a card, and as one table for the API."""
        papers = [p for t in self.site.track_choices() if (p := paper_tables.paper_table(self.catalog, t[1], filters))]
        names = {p.track: protocol_names.base_name(p.track, p.protocol, self.site.store.suite) for p in papers}
        cards = cards_html(papers, names)
        without = [track_registry.get(t).title for _, t in self.site.track_choices()
                   if t not in {p.track for p in papers}]
        frame = pd.concat([pd.DataFrame({
            "Track": track_registry.get(p.track).title, "Rank": p.table["Rank"],
            "Model": display.model_links(p.table.rename(columns={"Model": "model"})), "Metric": p.label,
            "Score": p.table.iloc[:, 3:].mean(axis=1).round(3),
            "Source": render.link(protocol_names.paper_name(p.citation) + ", " + p.source, links.paper_url(p.citation)),
        }) for p in papers], ignore_index=True) if papers else pd.DataFrame(columns=PAPER_COLUMNS)
        suite = self.site.store.suite
        line = (f"**No model has been scored on {suite.name} yet.** Below, the tables the papers "
                "published, each under its paper's protocol: the paper's own numbers, ranked only among the paper's "
                "models. A model scored on the suite joins the ranking across all tracks: see **Submit**.")
        scored = self._scored_elsewhere()
        if scored:
            line += f"\n\nScored here so far, under other protocols: {scored} (pick the track above)."
        if without:
            line += (f"\n\n{render.plain(', '.join(without))}: no paper table is copied here; their rows appear once "
                     "a submission is scored.")
        details = ("A paper's protocol is what the paper measured, as it measured it: its own images, raters and "
                   "settings. Its rows are never ranked with rows scored here, where every model answers the same "
                   "prompts of the suite, and a card's ranking is the paper's own. " + notes.RANKS_IN_WORDS)
        hidden = filters.apply(paper_tables.paper_rows(self.catalog))[1]
        return {"frame": frame, "line": line, "details": details, "cards": cards, "hidden": hidden,
                "metric": gr.update(choices=[], value=None, visible=False),
                "protocol": gr.update(choices=[], value=None, visible=False)}

    def _scored_elsewhere(self) -> str:
        """The scored rows a first view without suite rows leaves out, in words: each track and protocol name with
        its model count (Markdown)."""
        frame = tables.scored_protocols(self.catalog)
        said = []
        for track, group in frame.groupby("track", sort=False):
            names = protocol_names.protocol_names(track, group, self.site.store.suite)
            said += [f"**{render.plain(track_registry.get(track).title)}** under {render.plain(names[pid])} "
                     f"({models} model{'s' if models != 1 else ''})"
                     for pid, models in zip(group["protocol_id"], group["models"])]
        return "; ".join(said)

    def _overall_view(self, filters: tables.Filters, track_set: str | None) -> dict:
        """The mean win rate over tracks: table, line and details, the track-set picker, what filters hid."""
        _, hidden = filters.apply(tables.headline_rows(self.catalog))
        wide, sets, chosen, off = tables.overall(self.catalog, filters, track_set)
        left = self._left_out(off)
        details = notes.overall_note(chosen, sets, left, wide.attrs.get("note", ""))
        line = notes.overall_line(chosen, self._overall_protocols(chosen), dict(sets).get(chosen, 0), left) \
            if sets else details
        return {"frame": display.display_win_rates(wide), "line": line,
                "details": details if sets else "", "hidden": hidden,
                "updating": wide.attrs.get("note", "").startswith(stored_rankings.UPDATING),
                "metric": gr.update(choices=[], value=None, visible=False),
                "protocol": gr.update(label="Track set", choices=[(f"{s} ({n} model{'s' if n != 1 else ''})", s)
                                                                 for s, n in sets],
                                      value=chosen or None, visible=True)}

    def _left_out(self, off: pd.DataFrame) -> list[notes.LeftOut]:
        """The headline rows the overall leaves out (``tables.overall``), per track and protocol: the protocol's name
        as the track's picker gives it, why it is not the one the overall takes, and the models."""
        suite, left = self.site.store.suite, []
        for track, rows in off.groupby("track", sort=False):
            names = protocol_names.protocol_names(
                track, tables.protocols(self.catalog, track, track_registry.get(track).headline), suite)
            for pid, group in rows.groupby("protocol_id", sort=False):
                why = protocol_names.difference(track, group["protocol"].iloc[0], suite)
                models = len(group[["model", "provenance"]].drop_duplicates())
                left.append(notes.LeftOut(track, names.get(pid, pid), why, models))
        return left

    def _overall_protocols(self, chosen: str) -> dict[str, str]:
        """Track -> the name of the protocol its rows in the overall ranking are of, for the tracks of ``chosen``."""
        named = {}
        for track in chosen.split(" + "):
            table = tables.protocols(self.catalog, track, track_registry.get(track).headline)
            pid = tables.overall_protocol(self.catalog, track, table)
            if pid is not None:
                names = protocol_names.protocol_names(track, table, self.site.store.suite)
                named[track] = names[pid]
        return named

    def _track_view(self, track: str, metric: str | None, filters: tables.Filters, protocol: str | None,
                    columns) -> dict:
        """One track's metric, ranked on the slice the Overview shows it on (``tables.overview_slice``)."""
        pairs = tables.metrics(self.catalog, track)
        metric = tables.metric_id(self.catalog, track, metric)
        metric_update = gr.update(choices=pairs, value=metric, visible=True)
        if metric is None:
            return {"frame": display.display(pd.DataFrame()), "line": notes.empty_track_note(track), "details": "",
                    "metric": metric_update, "protocol": gr.update(label="Protocol", choices=[], value=None,
                                                                   visible=True)}
        name, values = tables.overview_slice(self.catalog, track, metric)
        table = tables.protocols(self.catalog, track, metric, name, values[0])
        chosen = tables.pick_protocol(table, protocol)
        suite = self.site.store.suite
        names = protocol_names.protocol_names(track, table, suite)
        shown, higher, hidden, basis = self._ranked_values(track, metric, name, values, filters, chosen, names)
        if columns:  # the column choice is over the ranked tables' columns
            keep = (SLICE_COLUMN, "Rank", "Model")
            shown = shown[[c for c in shown.columns if c in columns or c in keep]]
        label = {m: text for text, m in pairs}[metric]
        where = "overall" if name == tables.OVERALL else (
            f"by {render.slice_label(name)}, each value ranked apart (the results have no overall value; the Slices "
            "tab shows one value at a time)")
        if len(shown):
            declared = track_registry.get(track)
            direction = notes.direction(higher, not declared.not_in_overall)
            line = (f"**{render.plain(label)}**, {render.plain(where)}: {counted(len(shown), 'row')}, "
                    f"{direction}. "
                    + notes.protocol_line(chosen, table, names, track, suite))
            version = (results.protocol_fields(table.loc[table["protocol_id"] == chosen, "protocol"].iloc[0])
                       or {}).get("metric_version")
            details = (notes.protocol_note(table, chosen, track, names) +
                       "\n\n95% CI over the same prompts: the percentile-t bootstrap (Wilson's for 0/1 values; for a "
                       "metric computed from means, such as CRT from column means, the paired bootstrap's); none "
                       "below 5 prompts, too few to cover." + (f" {render.plain(basis)}" if basis else "")
                       + notes.agreement_note(self.site.store.meta_evaluation(), metric, version))
        else:
            line, details = "No results for this choice yet.", ""
        return {"frame": shown, "line": line, "details": details, "hidden": hidden, "metric": metric_update,
                "updating": stored_rankings.UPDATING in basis,
                "protocol": gr.update(label="Protocol", choices=notes.protocol_choices(table, names), value=chosen,
                                      visible=True)}

    def _ranked_values(self, track: str, metric: str, name: str, values: list[str], filters: tables.Filters,
                       protocol: str | None, names: dict[str, str]) -> tuple[pd.DataFrame, bool, str, str]:
        """The rows of each value of slice ``name``, each value ranked apart, for people (with a *Slice* column
        unless the slice is overall; protocols by ``names``); whether higher is better; what the filters hid,
        counted over every value at once; and what the rankings rest on (``leaderboard.rankings``' notes)."""
        shown, said, higher = [], [], True
        rows = tables.rows(self.catalog, track, metric, name)
        for value in values:
            frame, note = tables.ranked(self.catalog, track, metric, name, value, filters, protocol)
            if len(frame):
                higher = tables.higher_is_better(frame)
            own = filters.apply(rows[rows["slice_value"] == value])[1]  # this value's filter note, counted below
            said.append(note.replace(own, "").strip() if own else note)
            part = display.display(frame, names)
            if name != tables.OVERALL:
                part.insert(0, SLICE_COLUMN, value)
            shown.append(part)
        hidden = filters.apply(rows)[1]
        return (pd.concat(shown, ignore_index=True), higher, hidden, " ".join(dict.fromkeys(n for n in said if n)))

    # --- downloads and the data API -------------------------------------------------------------------------------
    def download(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None) -> list[str]:
        """The Overview's view as typed rows (``leaderboard.exports``), CSV and Parquet: for a track, every row
        of it the filters keep (every metric and slice), those of the table shown with their ranks; for the
        overall view, the win rates of the track set shown and the headline rows behind them. Every column
        (``columns`` chooses what the screen shows). Written once per state of the results for the same choices
        (the metric and protocol as the table resolves them: a click after the track's first view, whose pickers
        name them, gets the files the recompute's thread wrote for the track)."""
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        if track in tables.tracks(self.catalog):
            metric, protocol = exports.ranked_choice(self.catalog, track, metric, protocol)

        def make() -> tuple[pd.DataFrame, str]:
            if track in tables.tracks(self.catalog):
                frame = exports.track_rows(self.catalog, track, metric, protocol, filters)
                return frame, track if track in track_registry.all_tracks() else "track"
            return exports.overall_rows(self.catalog, filters, protocol), "overall"
        return self.site.files(("download", track, metric, protocol, filters), make)

    def leaderboard_api(self, track: str, metric: str, slice_name: str = tables.OVERALL, slice_value: str = "all",
                        protocol_id: str | None = None) -> list[dict]:
        """One ranked table as typed records (``leaderboard.exports.COLUMNS``): track, metric, slice and
        protocol by id (``slice_name`` 'overall' with value 'all', or e.g. 'country' and 'Nigeria'; protocol
        default: the track's headline one when it has rows, else the largest). The protocol's rows come ranked
        (rank, rank_low, rank_high, tie_group), then paper rows of other protocols with no rank. An unknown id
        is an error naming the valid ones."""
        try:  # made once per state of the results for the same choices (``StoredRankings.view``)
            return stored_rankings.of(self.catalog).view(
                "leaderboard", (track, metric, slice_name, slice_value, protocol_id),
                lambda: exports.records(exports.ranking(self.catalog, track, metric, slice_name, slice_value,
                                                        protocol_id)))
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
            track = gr.Radio(label="Track", choices=self.choices(), value=None, scale=3, min_width=320)
            metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True, scale=2)
            protocol = gr.Dropdown(label="Protocol", choices=[], interactive=True, allow_custom_value=True, scale=2)
        with gr.Accordion(notes.filters_label(tables.Filters(), display.SHOWN_COLUMNS), open=False) as panel:
            with gr.Row():
                models = gr.Textbox(label="Models (comma-separated, any matches)", placeholder="SDXL, FLUX")
                types = gr.CheckboxGroup(TYPES, label="Model type (none = all)")
                provenance = gr.CheckboxGroup(["scored", "reported"], label="Provenance (none = all)")
            with gr.Row():
                size_min = gr.Number(label="Min size, B params (0 = no bound)", value=None)
                size_max = gr.Number(label="Max size, B params (0 = no bound)", value=None)
                since = gr.Textbox(label="Scored since (YYYY-MM-DD)")
            columns = gr.CheckboxGroup(display.RANK_COLUMNS, value=display.SHOWN_COLUMNS, label="Columns")
        note = text_markdown()
        with gr.Accordion("How to read this table", open=False, elem_classes=["cl-details"]):
            details = text_markdown()
        submit = gr.Button("Submit a model: how to take part", variant="primary", size="sm", visible=False,
                           elem_classes=["cl-submit"])
        cards = gr.HTML(visible=False)
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        download = gr.Button("Download this view (CSV, Parquet)", size="sm")
        files = gr.File(label="Downloads", file_count="multiple", visible=False)
        self.parts = Parts(
            inputs={"track": track, "metric": metric, "models": models, "types": types, "size_min": size_min,
                    "size_max": size_max, "since": since, "provenance": provenance, "columns": columns,
                    "protocol": protocol},
            outputs={"track": track, "metric": metric, "table": table, "note": note, "protocol": protocol,
                     "panel": panel, "details": details, "cards": cards, "download": download, "submit": submit,
                     "models": models})
        inputs = list(self.parts.inputs.values())
        download.click(self.download, inputs, files, api_name="download").then(
            lambda: gr.update(visible=True), None, files, api_name=False)
        submit.click(None, None, None, js="() => window.culturelens.open('submit')")
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


def _number(value: float) -> str:
    """A published value as the card prints it: three decimals below 10 (0.553), one above (87.8)."""
    return "–" if pd.isna(value) else (f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}")


def cards_html(papers: list[paper_tables.PaperTable], names: dict[str, str]) -> str:
    """The papers' headline tables as cards side by side: per track its title, what it measures, the ranking with
    the paper's values, the paper and table linked, and the protocol's name. Every text is escaped; links are
    ``leaderboard.links`` addresses."""
    cards = []
    for paper in papers:
        track = track_registry.get(paper.track)
        values = [c for c in paper.table.columns if c not in ("Rank", "Model", "model_id")]
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in ["", "Model", *values])
        rows = []
        for _, row in paper.table.iterrows():
            url = links.model_page(row["Model"])  # its page here, which links on to its Hub page
            model = html.escape(str(row["Model"]))
            model = f'<a href="{html.escape(url)}">{model}</a>' if url else model
            cells = "".join(f"<td>{_number(row[c])}</td>" for c in values)
            rows.append(f"<tr><td>{int(row['Rank'])}</td><td class='cl-model'>{model}</td>{cells}</tr>")
        paper_url = links.paper_url(paper.citation)
        cited = html.escape(f"{protocol_names.paper_name(paper.citation)}, {paper.source}")
        source = (f'<a href="{html.escape(paper_url)}" target="_blank" rel="noopener">{cited}</a>' if paper_url
                  else cited)
        ranked = (f"ranked by the mean of its {len(values)} columns" if len(values) > 1 else "")
        direction = notes.direction(paper.higher, not track.not_in_overall)
        cards.append(
            f'<div class="cl-card"><div class="cl-card-head"><b>{html.escape(track.title)}</b> '
            f'{render.badge("paper")}</div>'
            f'<p class="cl-card-what">{html.escape(track.question)}</p>'
            f'<p class="cl-card-metric">{html.escape(paper.label)} ({direction}'
            f'{", " + ranked if ranked else ""})</p>'
            f'<div class="cl-scroll"><table class="cl-card-table"><tr>{head}</tr>{"".join(rows)}</table></div>'
            f'<p class="cl-card-source">{source} · {html.escape(names[paper.track])}</p></div>')
    return f'<div class="cl-cards">{"".join(cards)}</div>' if cards else ""

"""The Model tab: a page per model at ``?model=<name>`` (every table's model name links here, ``links.model_page``):
where it stands overall and per track, its map with its best and worst countries, the papers' rows of a model of
its name, its submissions with their run records and per-image scores, and the badge and card to cite
(``/badge.svg?model=<name>``, ``/card.png?model=<name>``, served by ``citation_route``). The numbers are the tables'
own (``model_profile``)."""

from __future__ import annotations

import html
import threading
from urllib.parse import quote

import gradio as gr
import pandas as pd

from leaderboard import citation, links, model_profile, render, suite_view, tables, world_map
from leaderboard.ui import address
from leaderboard.ui.site import Tab
from leaderboard.ui.widgets import Parts, linked_table, on_change, pick, shown_if_filled, text_markdown

NO_MODELS = "No model is on this leaderboard yet: a model's page appears once its submission is scored."
CACHED = 256  # badges and cards kept per results version (each costs an overall ranking to make)


def unknown(asked: object) -> str:
    """The sentence for an address or a picker value that names no model (quoted as text, cut at 100
    characters)."""
    return (f"No model named “{render.plain(str(asked)[:100])}” is on this leaderboard: the Model picker lists "
            "those there are, and every table's model name links to its page.")


class ModelTab(Tab):
    """The Model tab's views over ``site``; ``build`` makes its components. ``badge`` and ``card`` are what
    ``citation_route`` serves."""

    def __init__(self, site):
        super().__init__(site)
        self._made: dict[tuple, object] = {}
        self._lock = threading.Lock()

    @property
    def protocol(self) -> str:
        """What the overall ranking ranks under, as a badge says it: 'suite v1'."""
        return self.store.suite.name.removeprefix("CultureLens ")

    def _once(self, key: tuple, make):
        """``make()``, kept until the results change (at most ``CACHED`` of them): a badge embedded in many pages
        costs one ranking. Kept only when the results and their rankings did not change while it was made (a
        ranking found stale starts its update then: what was made is the previous ranking, not to be kept)."""
        version = self.site.results_version()
        key = (version, *key)
        with self._lock:
            if key in self._made:
                return self._made[key]
        made = make()
        if self.site.results_version() != version:
            return made
        with self._lock:
            if len(self._made) >= CACHED:
                self._made.clear()
            self._made[key] = made
        return made

    def badge(self, asked: object) -> str | None:
        """The badge of the model ``asked`` names (SVG text), None when it names none."""
        model = model_profile.known(self.catalog, asked)
        if model is None:
            return None
        return self._once(("badge", model), lambda: citation.badge_svg(
            model, model_profile.standing(tables.overall(self.catalog), model, self.protocol), self.protocol))

    def card(self, asked: object) -> bytes | None:
        """The card of the model ``asked`` names (PNG bytes), None when it names none."""
        model = model_profile.known(self.catalog, asked)
        if model is None:
            return None

        def make() -> bytes:
            mapped = model_profile.mapped(self.catalog, model)
            shown = world_map.values_map(mapped[3], model, mapped[2]) if mapped else None
            overall = tables.overall(self.catalog)
            return citation.card_png(model, model_profile.standing(overall, model, self.protocol), self.protocol,
                                     model_profile.profile(self.catalog, overall, model),
                                     shown.cells if shown else {}, shown.label if shown else "")
        return self._once(("card", model), make)

    def model_page(self, model, request: gr.Request = None):
        """The ``/model_page`` API: the Model picker, the page's text (standing, how to cite, or the sentence for
        an unknown model), the profile per track, the map, the best and worst countries, the papers' rows, the
        submissions, the per-image scores to download, and each best and worst country's example images (a gallery
        of (file, caption))."""
        every = model_profile.names(self.catalog)
        asked = model
        model = model_profile.known(self.catalog, model) if model not in (None, "") else pick(None, every)
        picker = gr.update(choices=every, value=model)
        if model is None:
            text = unknown(asked) if asked not in (None, "") else NO_MODELS
            return picker, text, pd.DataFrame(), "", pd.DataFrame(), pd.DataFrame(), "", [], []
        overall = tables.overall(self.catalog)
        standing = model_profile.standing(overall, model, self.protocol)
        text = self._heading(model, standing, request)
        mapped = model_profile.mapped(self.catalog, model)
        svg, countries, shots = "<p>No values by country for this model yet.</p>", pd.DataFrame(), []
        if mapped:
            track, metric, label, rows = mapped
            shown = world_map.values_map(rows, model, label)
            svg = f"<p>{html.escape(html.unescape(shown.note))}</p>" + shown.html  # the note's Markdown as text
            best, worst = model_profile.best_and_worst(rows, model)
            countries = pd.DataFrame(
                [{"": side, "Country": country, label: round(float(row["value"]), 3), "Prompts": row["n"]}
                 for side, part in (("best", best), ("worst", worst)) for country, row in part.iterrows()])
            shots = self._examples(metric, label, best, worst)
        papers = model_profile.paper_rows(self.catalog, model)
        subs = model_profile.submissions(self.catalog, model)
        records = self._records(subs)
        files = [path for sid in subs["submission_id"] if (path := self.store.per_image_file(sid))]
        served = self.site.serve(files, [f"culturelens-{path.parent.name}-per_image.parquet" for path in files]) \
            if files else []
        return (picker, text, model_profile.profile(self.catalog, overall, model), svg, countries,
                papers.rename(columns={"track": "Track", "metric_label": "Metric", "slice": "Slice",
                                       "slice_value": "Value", "value": "Score", "citation": "Paper",
                                       "source_table": "Table"}), records, served, shots)

    def _examples(self, metric: str, label: str, best: pd.DataFrame, worst: pd.DataFrame) -> list[tuple[str, str]]:
        """The gallery of ``model_profile.examples``: each image as its submission's shards hold it (the pixels
        scored; an image the submission's validated tables do not list is left out), captioned with its country,
        its value and its prompt."""
        shots = model_profile.examples(self.catalog, metric, best, worst)
        owned = {sid: self.store.image_bytes(sid, [e.image_path for e in shots if e.submission_id == sid])
                 for sid in {e.submission_id for e in shots}}
        kept = [e for e in shots if e.image_path in owned[e.submission_id]]
        paths = self.site.serve_shown([(e.image_path, owned[e.submission_id][e.image_path]) for e in kept])
        return [(path, f"{e.side} · {e.country} · {e.which} {label} {e.value:.3f} · {e.prompt}")
                for path, e in zip(paths, kept)]

    def _heading(self, model: str, standing: model_profile.Standing | None, request: gr.Request | None) -> str:
        """The page's first lines: the name (with its Hub page or URL), the overall standing, the badge and the
        Markdown line to paste."""
        hub = links.model_url(model_profile.model_id(self.catalog, model))
        lines = [f"## {render.plain(model)}"]
        if hub:
            lines.append(f"Its own page: {render.link(model_profile.model_id(self.catalog, model), hub)}")
        if standing is None:
            lines.append("Not in the overall ranking: it has no scored headline row on the tracks the Overview ranks "
                         "together (its tracks' tables below say where it stands).")
        else:
            range_ = (f" (95% range {standing.rank_low}–{standing.rank_high})"
                      if standing.rank is not None and standing.rank_low != standing.rank_high else "")
            rate = (f", mean win rate {standing.win_rate:.3f}" + (
                f" [{standing.win_low:.3f}, {standing.win_high:.3f}]" if standing.win_low is not None else "")
                    if standing.win_rate is not None else "")
            why = f" ({render.plain(standing.why)})" if standing.why else ""
            lines.append(f"**{standing.short}**{range_}{why} in the overall ranking over "
                         f"{render.plain(standing.track_set)}{rate}; ranked under {render.plain(self.protocol)}, "
                         f"results as of {standing.date or 'no date'}.")
        query = quote(model, safe="")
        base = _base_url(request)
        lines.append(f"![CultureLens badge of {render.plain(model)}](badge.svg?model={query}) · "
                     f"[card (PNG)](card.png?model={query})")
        lines.append("Cite it in a model card:\n\n```markdown\n"
                     f"[![CultureLens]({base}/badge.svg?model={query})]({base}/?model={query})\n```")
        return "\n\n".join(lines)

    def _records(self, subs: pd.DataFrame) -> str:
        """Each submission with its run record (``suite_view.run_parts_lines``), as Markdown."""
        lines = []
        for sid, dataset, scored in zip(subs["submission_id"], subs["dataset"], subs["scored_at"]):
            lines.append(f"- {render.code(sid)}: {render.plain(dataset)}, scored {render.plain(str(scored)[:19])}")
            run = self.store.run_record(sid)
            if run is not None:
                lines += ["  " + line for line in suite_view.run_parts_lines(run)]
        return "\n".join(lines) or "No scored submission: its rows are the papers'."

    def page(self, model, request: gr.Request = None) -> dict:
        """``model_page`` for the page, by output name."""
        names = ["model", "text", "profile", "map", "countries", "papers", "records", "downloads", "examples"]
        named = dict(zip(names, self.model_page(model, request)))
        named["profile"] = linked_table(named["profile"]) if len(named["profile"]) else named["profile"]
        # an empty box says nothing: the text above says why
        for name in ("countries", "papers", "downloads", "examples"):
            named[name] = shown_if_filled(named[name])
        return named

    def link(self, state: dict, request: gr.Request = None) -> dict:
        """The tab as a link's query names it (``model``)."""
        return self.page(state.get("model"), request)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        model = gr.Dropdown(label="Model", choices=[], interactive=True, allow_custom_value=True)
        text = text_markdown()
        gr.Markdown("#### Per track")
        profile = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        gr.Markdown("#### By country")
        map_box = gr.HTML(elem_classes=["cl-map-box"])
        countries = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"], visible=False,
                                 label="Best and worst countries")
        examples = gr.Gallery(label="Each best and worst country's lowest- and highest-scored image", columns=4,
                              height="auto", object_fit="contain", fit_columns=False, visible=False,
                              elem_classes=["cl-gallery"])  # thumbnails whole, captions under them
        papers = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"], visible=False,
                              label="The papers' rows of a model of this name")
        gr.Markdown("#### Submissions and run records")
        records = text_markdown()
        downloads = gr.File(label="Per-image scores (Parquet)", file_count="multiple", visible=False)
        self.parts = Parts(inputs={"model": model},
                           outputs={"model": model, "text": text, "profile": profile, "map": map_box,
                                    "countries": countries, "papers": papers, "records": records,
                                    "downloads": downloads, "examples": examples})

        def shown(value, request: gr.Request):
            return self.parts.updates(self.page(value, request))

        on_change(model)(shown, [model], list(self.parts.outputs.values()), api_name=False).then(
            None, [model], None, js=address.url_js("model", ["model"]))
        return self.parts

    def api_outputs(self) -> list:
        """The ``/model_page`` API's outputs, in ``model_page``'s order."""
        return [self.parts.outputs[n] for n in ("model", "text", "profile", "map", "countries", "papers", "records",
                                                "downloads", "examples")]


def _base_url(request: gr.Request | None) -> str:
    """The address a visitor reached the app at, 'https://HOST' (the Markdown line to paste names it): its host as
    the request says it when it is a host name (letters, digits, dots, dashes, a port), else 'HOST' to fill in."""
    if request is None:
        return "https://HOST"
    headers = request.headers
    host = headers.get("x-forwarded-host") or headers.get("host") or ""
    scheme = headers.get("x-forwarded-proto") or request.url.scheme
    host = host if host and len(host) < 256 and all(c.isalnum() or c in ".-:[]" for c in host) else "HOST"
    return f"{'http' if scheme == 'http' else 'https'}://{host}"

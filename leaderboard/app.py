"""The Gradio leaderboard: the nine tabs of ``leaderboard.ui`` put together, with links, the first paint, the timer
that keeps an open page current, and the API.

Reads go through one ``Catalog`` (an in-memory DuckDB that picks up new results by itself: no restart is ever
needed), shared by every tab through ``ui.site.Site``. Every piece of user-supplied text is shown as plain text
(``render.plain``), never as Markdown. The view lives in the URL (``ui.address``) so a link restores it. Tracks come
from the results and the track registry (``benchmark.tracks``): a new track needs no UI change.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import gradio as gr

from starlette.middleware import Middleware

from leaderboard import bounds, citation_route, render, stored_rankings, tables, upload_cache, upload_route
from leaderboard.served_suite import ServedSuite
from leaderboard.store import Store
from leaderboard.ui import about, address, first_views
from leaderboard.ui.arena import ArenaTab
from leaderboard.ui.compare import CompareTab
from leaderboard.ui.datasets import DatasetBrowser
from leaderboard.ui.map import MapTab
from leaderboard.ui.model import ModelTab
from leaderboard.ui.metrics import MetricsTab
from leaderboard.ui.overview import OverviewTab
from leaderboard.ui.queue import QueueTab
from leaderboard.ui.site import Site
from leaderboard.ui.slices import SlicesTab
from leaderboard.ui.submit import SubmitTab
from leaderboard.ui.widgets import Parts

POLL_SECONDS = 5  # how often an open page asks whether new results (or queue changes) arrived

# Styles: headers break between words only (never one letter per line), wide tables (a Markdown one too) scroll
# sideways in their box, gallery captions wrap instead of being cut (on a phone, under their image), the heatmaps'
# boxes scroll rather than clip, and the papers' cards sit side by side, their tables fitting the card.
CSS = """
th .header { word-break: normal !important; overflow-wrap: normal !important; hyphens: none; }
th.header-cell { min-width: 4.5em; }
.cl-table td span { word-break: normal; overflow-wrap: anywhere; }
.cl-gallery .caption-label { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; max-width: 100% !important; }
.cl-gallery .thumbnail-item img { object-fit: contain !important; background: #fff; }
@media (max-width: 640px) {  /* a phone: one image a row, its caption under it, the gallery as tall as they are */
  .cl-gallery .grid-container { grid-template-columns: 1fr !important; grid-auto-rows: auto !important; }
  .cl-gallery .gallery-container, .cl-gallery .grid-wrap { height: auto !important; max-height: none !important; }
  .cl-gallery .thumbnail-item { height: auto !important; }
  .cl-gallery .caption-label { position: static !important; }
}
.cl-scroll { overflow-x: auto; max-width: 100%; }
/* A ranked table's Model column stays at the left edge while the table scrolls sideways (a phone: the overall's track
   columns do not fit), opaque over the columns passing under it (widgets.linked_table, widgets.PINNED). */
.cl-pin-2 tr > :nth-child(2), .cl-pin-3 tr > :nth-child(3), .cl-pin-2 .virtual-row > :nth-child(2),
.cl-pin-3 .virtual-row > :nth-child(3) { position: sticky !important; left: 0; z-index: 2;
  background: var(--table-even-background-fill, var(--background-fill-primary)); }
.cl-pin-2 thead tr > :nth-child(2), .cl-pin-3 thead tr > :nth-child(3) { z-index: 3;
  background: var(--background-fill-primary); }
.prose table:not(.cl-card-table):not(.cl-heatmap) { display: block; overflow-x: auto; max-width: 100%; }
.prose th, .prose td { word-break: normal !important; overflow-wrap: normal !important; }
.cl-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 480px), 1fr)); gap: 12px; }
.cl-card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 10px 14px; min-width: 0; }
.cl-card p { margin: 4px 0; }
.cl-card-what { font-style: italic; }
.cl-card-metric, .cl-card-source { font-size: 0.9em; color: var(--body-text-color-subdued); }
.cl-card-head b { font-variant: normal; font-size: 1.05em; }
.cl-card-table { width: 100%; border-collapse: collapse; border: none !important; margin: 6px 0 !important;
  font-size: 0.95em; }
.cl-card-table tr { border: none !important; }
.cl-card-table th, .cl-card-table td { padding: 2px 6px !important; text-align: right; border: none !important;
  border-bottom: 1px solid var(--border-color-primary) !important; }
.cl-card-table td { white-space: nowrap; }
.cl-card-table th:nth-child(2), .cl-card-table td.cl-model { text-align: left; white-space: normal; min-width: 5.5em; }
.cl-card-table a { padding: 0 !important; }
@media (max-width: 640px) {  /* a phone: the cards' tables fit their card */
  .cl-card { padding: 6px 8px; }
  .cl-card-table { font-size: 0.85em; }
  .cl-card-table th, .cl-card-table td { padding: 2px 3px !important; }
  .cl-card-table th:nth-child(2), .cl-card-table td.cl-model { min-width: 4.5em; }
}
.cl-submit { max-width: 22em; }
.cl-map-box svg.cl-map { max-width: 1100px; display: block; }
.cl-legend { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center; font-size: 0.9em; margin-top: 4px; }
.cl-scale { display: grid; grid-template-columns: auto 1fr auto; width: min(100%, 320px); column-gap: 8px; }
.cl-scale i { grid-column: 1 / 4; height: 12px; border-radius: 2px; }
.cl-scale span:nth-of-type(2) { text-align: center; }
.cl-swatch i { display: inline-block; width: 18px; height: 12px; border: 1px solid #777; margin-right: 6px;
  vertical-align: middle; }
#cl-notice { border: 1px solid var(--color-accent); border-radius: 8px; padding: 4px 12px; }
"""


def launch_options(store: Store) -> dict:
    """``launch`` settings every entry point uses. Gradio serves a file a function returns when it lies in the
    working directory or the temporary folder: the whole store is blocked, so the app hands out only the
    copies its views make of files and images they picked (``Site.serve``, ``Site.serve_images``: images are
    read from a submission's shards), and nothing else in the store (the queue
    database, staging, caches) can ever be served. The routes that write a visitor's bytes are bounded by
    ``upload_route.UploadRoutes``: a request to the upload route takes at most the validator's own limit on a
    submission's zip (``Limits.max_upload_bytes``, 64 GiB: a whole suite submission of 19,773 PNGs is 46-55 GiB)
    however many files it holds, every byte held in the store's space for uploads in flight; the other such routes
    are not served. A model's badge and card are served at their own addresses (``citation_route``). Runs are not
    recorded (Gradio's run history would send a visitor's inputs to a Hub bucket)."""
    middleware = Middleware(upload_route.UploadRoutes, space=store.upload_space,
                            max_bytes=store.limits.max_upload_bytes)
    citations = Middleware(citation_route.CitationRoutes)
    return {"blocked_paths": [str(store.root)], "allowed_paths": [], "show_error": False,
            "max_file_size": store.limits.max_upload_bytes, "css": CSS, "head": address.HEAD,
            "app_kwargs": {"middleware": [middleware, citations]}, "run_history": False}


READY = "rankings ready:"  # how the operator's log line begins when the rankings and first views are made


def build_app(store: Store, *, owner: str = "local", fetch: Callable[[list[str]], object] | None = None,
              suite: ServedSuite | None = None, metric_settings: dict[str, object] | None = None,
              notice: str | None = None, say: Callable[[str], None] | None = None) -> gr.Blocks:
    """The leaderboard UI over ``store``. ``owner``: the user submissions are recorded under when the app does
    not run on a Hugging Face Space (on a Space, visitors sign in with their Hugging Face account). ``fetch``:
    brings results folders the store knows only from its leaderboard release (``leaderboard.pickup``).
    ``suite`` and ``metric_settings``: the suite served and the settings its worker scores with (``ui.site.Site``).
    ``notice``: an operator's warning (Markdown) shown under the header, above every tab (a Space whose results
    would not survive a restart: ``operator_settings.restart_warning``). ``say`` hears, for the operator's log,
    when each recompute of the rankings and the first views after it are done."""
    upload_cache.use_own()  # before any component: Gradio reads its cache folder when it makes each one
    site = Site(store, owner, fetch, suite, metric_settings)
    # Rankings are recomputed in a thread when results change, the views showing the previous ones meanwhile.
    stored = stored_rankings.attach(site.catalog, background=True, everything=tables.recompute)
    overview, slices, compare = OverviewTab(site), SlicesTab(site), CompareTab(site)

    def after_recompute() -> None:
        started = time.perf_counter()
        first_views.make(overview, slices)
        if say is not None:
            say(f"{READY} recomputed in {stored.last_recompute:.1f} s, the first views and downloads made in "
                f"{time.perf_counter() - started:.1f} s")

    stored.after = after_recompute
    stored.start()
    world, model_page, arena = MapTab(site), ModelTab(site), ArenaTab(site)
    browser, metrics, submit, queue = DatasetBrowser(store), MetricsTab(site, arena), SubmitTab(site), QueueTab(site)
    # Uploads and downloads Gradio keeps in its cache (this server's own, ``upload_cache``) are deleted after an hour,
    # and all of them when the server stops.
    keep = upload_route.KEEP_SECONDS
    with bounds.Blocks(title="CultureLens leaderboard", delete_cache=(keep, keep)) as app:
        gr.Markdown(render.HEADER)
        if notice:
            gr.Markdown(f"⚠️ {notice}", elem_id="cl-notice")
        open_tab = gr.Textbox("overview", visible=False)  # the tab a person has open, for the timer
        seen, queue_seen = gr.State(""), gr.State("")  # what this page shows: results and queue digests
        with gr.Tabs() as tabs:
            with gr.Tab("Overview", id="overview") as overview_tab:
                o = overview.build()
            with gr.Tab("Slices", id="slices") as slices_tab:
                s = slices.build()
            with gr.Tab("Map", id="map") as map_tab:
                w = world.build()
            with gr.Tab("Compare", id="compare") as compare_tab:
                c = compare.build()
            with gr.Tab("Datasets", id="datasets") as datasets_tab:
                d = browser.build()
            with gr.Tab("Metrics", id="metrics") as metrics_tab:
                m = metrics.build()
            with gr.Tab("Arena", id="arena") as arena_tab:
                a = arena.build()
            with gr.Tab("Submit", id="submit") as submit_tab:
                u = submit.build()
            with gr.Tab("Queue", id="queue") as queue_tab:
                q = queue.build()
            with gr.Tab("About", id="about") as about_tab:
                about.build(store)
            with gr.Tab("Model", id="model") as model_tab:
                p = model_page.build()
        o_in, s_in = list(o.inputs.values()), list(s.inputs.values())

        def restore(request: gr.Request):
            """First paint: the view the address names (the Overview by default), computed from its query; the
            other tabs fill when opened. Nothing here writes the address bar: an opened link stays as it was."""
            state = address.url_state(request)
            tab = state.get("tab", "overview")
            tab = tab if tab in address.TABS else "overview"
            shown = {seen: site.results_version(), **o.updates(overview.link(state if tab == "overview" else {}))}
            if tab == "slices":
                shown.update(s.updates(slices.link(state)))
            elif tab == "map":
                shown.update(w.updates(world.link(state)))
            elif tab == "compare":
                shown.update(c.updates(compare.link(state)))
            elif tab == "model":
                shown.update(p.updates(model_page.link(state, request)))
            elif tab == "queue":
                shown.update(q.updates(queue.page()))
            if tab != "overview":
                # A link that names no other tab leaves the tabs alone: the Overview is open at first paint, and a
                # tab the person clicked while this ran stays open.
                shown.update({tabs: gr.Tabs(selected=tab), open_tab: tab})
            return shown

        app.load(restore, None, [tabs, open_tab, seen, *o.outputs.values(), *s.outputs.values(), *w.outputs.values(),
                                 *c.outputs.values(), *q.outputs.values(), *p.outputs.values()], api_name=False).then(
            None, None, None, js="() => { document.documentElement.dataset.painted = 'yes'; }")  # a state to wait for
        # Each tab computes its data when it is opened, and says it is the open one (for the timer). A tab the first
        # paint opened and filled (a link to it) is not computed again when its selection fires its select event.
        # Once a tab's select event is answered, the page says so (a state the browser tests wait for).
        def ready(name: str) -> str:
            return f"() => {{ document.documentElement.dataset.tabReady = '{name}'; }}"

        for tab, name in ((overview_tab, "overview"), (submit_tab, "submit"), (about_tab, "about")):
            tab.select(None, None, open_tab, js=f"() => '{name}'").then(None, js=ready(name))
        shown_queue = [q.outputs[name] for name in ("workers", "worker_details", "table")]
        for tab, name, parts, page, inputs, outputs in (
                (slices_tab, "slices", s, slices.page, s_in, list(s.outputs.values())),
                (map_tab, "map", w, world.page, list(w.inputs.values()), list(w.outputs.values())),
                (model_tab, "model", p, model_page.page, list(p.inputs.values()), list(p.outputs.values())),
                (compare_tab, "compare", c, compare.opened, [c.inputs["subs"]], list(c.outputs.values())),
                (queue_tab, "queue", q, queue.page, [], shown_queue)):
            tab.select(_filled_once(name, open_tab, parts, page), [open_tab, *inputs], [open_tab, *outputs],
                       api_name=False).then(None, js=ready(name))
        datasets_tab.select(None, None, open_tab, js="() => 'datasets'")
        datasets_tab.select(browser.view, list(d.inputs.values()), list(d.outputs.values()), api_name=False).then(
            None, js=ready("datasets"))
        metrics_tab.select(None, None, open_tab, js="() => 'metrics'")
        metrics_tab.select(m.wire(metrics.page), None, list(m.outputs.values()), api_name=False).then(
            None, js=ready("metrics"))
        arena_tab.select(None, None, open_tab, js="() => 'arena'")
        arena_tab.select(arena.wired(arena.opened), None, list(a.outputs.values()), api_name=False).then(
            None, js=ready("arena"))
        gr.api(queue.queue_api, api_name="queue")
        gr.api(overview.overall_api, api_name="overall")
        # The API's endpoints return data (the page's own events return what to show and hide): a button no one
        # sees carries them. `client.predict(handle_file(zip), api_name="/submit")` uploads one file.
        api_only = gr.Button(visible=False)
        api_only.click(overview.overview, o_in, overview.api_outputs(), api_name="overview")
        api_only.click(slices.slices, s_in, slices.api_outputs(), api_name="slices")
        api_only.click(world.world_map, list(w.inputs.values()), world.api_outputs(), api_name="world_map")
        api_only.click(model_page.model_page, list(p.inputs.values()), model_page.api_outputs(),
                       api_name="model_page")
        api_only.click(compare.compare, list(c.inputs.values()), compare.api_outputs(), api_name="compare")
        api_only.click(queue.details, q.inputs["submission"], [q.outputs["details"], q.outputs["per_image"]],
                       api_name="details")
        api_only.click(submit.submit_file, [u.inputs["upload"]], u.outputs["verdict"], api_name="submit")

        def tick(tab: str, results_seen: str, queue_digest: str, *values):
            """The timer: new results redraw the Overview (and the Slices when open); the open Queue redraws when
            it changed; nothing else is sent."""
            shown = {}
            version = site.results_version()
            if version != results_seen:
                shown.update({seen: version, **o.updates(overview.page(*values[:len(o_in)]))})
                if tab == "slices":
                    shown.update(s.updates(slices.page(*values[len(o_in):])))
            if tab == "queue":
                listed = queue.page()
                digest = hashlib.sha1((listed["workers"] + listed["worker_details"] + listed["table"].to_csv()
                                       ).encode()).hexdigest()[:16]
                if digest != queue_digest:
                    shown.update({queue_seen: digest, **q.updates(listed)})
            return shown or {seen: gr.skip()}  # Gradio takes an empty dict for one value, not for no update

        gr.Timer(POLL_SECONDS).tick(tick, [open_tab, seen, queue_seen, *o_in, *s_in],
                                    [seen, queue_seen, *o.outputs.values(), *s.outputs.values(), *shown_queue],
                                    show_progress="hidden", api_name=False)
    app.model_pages = model_page  # what citation_route serves the badge and the card from
    return app


def _filled_once(name: str, open_tab: gr.Textbox, parts: Parts, page: Callable[..., dict]) -> Callable[..., dict]:
    """The select event of tab ``name``, whose page function is ``page``: it says the tab is the open one, and
    computes the tab unless it was the open one already (the first paint of a link to it filled it)."""
    def opened(shown: str, *values) -> dict:
        if shown == name:
            return {open_tab: name}
        return {open_tab: name, **parts.updates(page(*values))}
    return opened


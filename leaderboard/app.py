"""The Gradio leaderboard: overview, slices, compare, datasets, metrics, submit, queue.

Reads go through one ``Catalog`` (an in-memory DuckDB that picks up new results by itself: no restart is
ever needed). Every piece of user-supplied text is shown as plain text (``render.plain``), never as Markdown. The
view lives in the URL (``?tab=slices&track=iconicity&metric=crt&slice=kind&value=moving&models=SDXL``) so a
link restores it. Tracks come from the results and the track registry (``benchmark.tracks``): a new track needs no
UI change.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import gradio as gr
import pandas as pd
from PIL import Image

from benchmark import layout
from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import DatasetUnavailable, local_folder
from benchmark.images import open_as_viewed
from benchmark.submission import ServerFault
from benchmark.submission.manifest import json_schema
from benchmark.track import Chart, DetailPicture
from leaderboard import bounds, exports, operator_settings, quarantine, render, repo, search, suite_view, tables
from leaderboard.catalog import Catalog
from leaderboard.datasets_view import DatasetBrowser
from leaderboard.downloads import DownloadFolder
from leaderboard.intake import PermissionDenied
from leaderboard.queue import QueueDamaged
from leaderboard.served_suite import ServedSuite
from leaderboard.store import Store

OVERALL_VIEW = "overall"  # the Track picker's value for the mean win rate over tracks
OVERALL_LABEL = "All tracks (mean win rate)"
QUEUE_COLUMNS = ["Submitted", "ID", "Model", "Owner", "State", "Progress", "Started", "Finished", "Details"]
TYPES = ["open", "closed", "unknown"]
MAX_COMPARE = 4
CHART_MODELS = 20
MAX_ROWS = 100  # rows a ranked table shows (the note says when there are more; downloads have all)
QUEUE_ROWS = 200  # newest submissions listed; any other is found by its ID (Details)
POLL_SECONDS = 5  # how often an open page asks whether new results (or queue changes) arrived
QUEUE_REBUILDING = ("The queue is being rebuilt: its database file was found damaged, so it is kept aside and the "
                    "queue rebuilt from the store's folders, as at a restart. Nothing submitted is lost; look again "
                    "in a minute.")
SLICE_COLUMN = "Slice"  # the column naming a row's slice value where the Overview lists a slice's values
SLICE_BARS = 7  # where the win-rate bars are among the Slices outputs; the profile, then each track's charts follow
PAPER_MARK = {"reported": " (paper)", "scored": ""}  # a chart's model name says which row is a paper's
TABS = ["overview", "slices", "compare", "datasets", "metrics", "submit", "queue", "about"]  # ids = labels, lower case

# Styles: headers break between words only (never one letter per line), wide tables scroll sideways, gallery
# captions wrap instead of being cut, and the heatmaps' boxes scroll rather than clip.
CSS = """
th .header { word-break: normal !important; overflow-wrap: normal !important; hyphens: none; }
th.header-cell { min-width: 4.5em; }
.cl-table td span { word-break: normal; overflow-wrap: anywhere; }
.cl-gallery .caption-label { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; max-width: 100% !important; }
.cl-gallery .thumbnail-item img { object-fit: contain !important; background: #fff; }
.cl-scroll { overflow-x: auto; max-width: 100%; }
"""

# The address bar holds the view: a person's own actions (a click on a tab, a change of a control) write it, never
# the page's first paint, so an opened link stays as it was. Each tab remembers its last query for tab clicks. A
# tab click is a step in the browser's history (a control's change is not), so Back and Forward go through the tabs
# a person opened: the tab the address then names is opened again, as the person left it.
HEAD = """
<script>
const TABS = %s;
window.culturelens = {
  memory: {},
  returning: false,  // a tab opened by Back or Forward: the address already names it
  write(tab, params) {
    const p = new URLSearchParams();
    p.set('tab', tab);
    // a list (the picked submissions) is written comma-separated; an empty value is left out
    for (const [k, v] of Object.entries(params)) { const text = v == null ? '' : String(v); if (text) p.set(k, text); }
    this.memory[tab] = p.toString();
    history.replaceState(null, '', '?' + this.memory[tab]);
  },
};
(() => {
  const opened = new URLSearchParams(location.search);
  window.culturelens.memory[opened.get('tab') || 'overview'] = opened.toString();
  const openTab = () => document.querySelector('[role=tab][aria-selected=true]');
  document.addEventListener('click', (event) => {
    // A tab's button, or its entry in the "more tabs" menu of a narrow screen (named by its label only).
    const button = event.target.closest && event.target.closest('[data-tab-id], .overflow-dropdown button');
    const tab = button && (button.dataset.tabId || button.textContent.trim().toLowerCase());
    if (!TABS.includes(tab) || window.culturelens.returning) return;
    const shown = openTab();
    if (shown && shown.dataset.tabId === tab) return;  // the open tab: no new step
    history.pushState(null, '', '?' + (window.culturelens.memory[tab] || 'tab=' + tab));
  }, true);
  window.addEventListener('popstate', () => {
    const query = new URLSearchParams(location.search);
    const tab = TABS.includes(query.get('tab')) ? query.get('tab') : 'overview';
    window.culturelens.memory[tab] = location.search.slice(1);
    const button = document.querySelector(`[role=tab][data-tab-id="${tab}"]`);
    if (!button) { location.reload(); return; }  // no such tab button (other Gradio markup): draw the link afresh
    window.culturelens.returning = true;
    try { button.click(); } finally { window.culturelens.returning = false; }
  });
})();
</script>
""" % json.dumps(TABS)


def track_pictures() -> list[tuple[str, DetailPicture]]:
    """(track, picture kind) for every detail picture a registered track adds to the Compare tab."""
    return [(name, kind) for name, track in track_registry.all_tracks().items() for kind in track.pictures]


def track_charts() -> list[tuple[str, Chart]]:
    """(track, chart) for every chart a registered track adds to the Slices tab, in track order."""
    return [(name, chart) for name, track in track_registry.all_tracks().items() for chart in track.charts]


def _url_js(tab: str, names: list[str]) -> str:
    """JavaScript, run after a person changed a control of ``tab``, that writes the controls ``names`` (in the
    order of the event's inputs) into the address bar."""
    args = ", ".join(names)
    return f"({args}) => window.culturelens.write('{tab}', {{{args}}})"


def text_markdown(**options) -> gr.Markdown:
    """A Markdown component for text that carries user text (a model name, a prompt, a reason): math
    rendering off, so ``$$...$$`` in a name stays text (``render.plain`` takes care of Markdown itself)."""
    return gr.Markdown(latex_delimiters=[], **options)


def launch_options(store: Store) -> dict:
    """``launch`` settings every entry point uses. Gradio serves a file a function returns when it lies in the
    working directory or the temporary folder: the whole store is blocked, so the app hands out only the
    copies its views make of files and images they picked (``Views._serve``, ``Views._serve_images``: images are
    read from a submission's shards), and nothing else in the store (the queue
    database, staging, caches) can ever be served. Uploads are capped at the validator's own limit."""
    return {"blocked_paths": [str(store.root)], "allowed_paths": [], "show_error": False,
            "max_file_size": store.limits.max_upload_bytes, "css": CSS, "head": HEAD}


def _pick(value, choices, default=None):
    return value if value in choices else (default if default in choices else (choices[0] if choices else None))


def protocol_choices(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The protocol picker's (label, id) pairs: id, rows, headline or off-protocol, and what it is."""
    return [(f"{pid} · {rows} row(s) · {'suite, ' if suite else ''}{'headline' if on else 'off-protocol'} · "
             f"{tables.describe_protocol(text)}"[:200], pid)
            for pid, rows, suite, on, text in zip(table["protocol_id"], table["rows"], table["suite"],
                                                  table["on_protocol"], table["protocol"])]


def protocol_note(table: pd.DataFrame | None, chosen: str | None, track: str) -> str:
    """The note's sentence on the protocol shown (Markdown; the dataset is the submitter's text, escaped) and on
    rank intervals."""
    if table is None or chosen is None:
        return ""
    row = table[table["protocol_id"] == chosen].iloc[0]
    others = len(table) - 1
    status = ("the track's headline protocol" if row["on_protocol"] else "**off-protocol** for the headline "
              f"ranking, which assumes {render.plain(track_registry.get(track).protocol.describe())}")
    if row["suite"]:
        status = f"the suite's protocol for this track, and {status}"
    return (f"Protocol {render.code(chosen)} ({status}): {render.plain(tables.describe_protocol(row['protocol']))}. "
            + (f"{others} other protocol(s) are one choice away (picker above); they are never mixed in. "
               if others else "") + RANKS_IN_WORDS + " Paper rows of other protocols are listed below, not ranked.")


# How a ranked table's ranks, intervals and tie groups are read (the Overview and Slices notes; About says more).
RANKS_IN_WORDS = (
    "**One set of prompts**: each model's score, rank and 95% rank interval come from the same prompts, those "
    "every ranked model answered (the note below gives their number, and n is it); a model that answered fewer "
    f"than {tables.MIN_COVERAGE:.0%} of the table's prompts is listed apart, not ranked, and with fewer than "
    f"{tables.MIN_SHARED_PROMPTS} shared prompts no rank interval is given. **Rank range**, e.g. 2-5: the middle "
    f"95% of the model's ranks over {tables.REPLICATES:,} bootstrap draws of those prompts. **Tie group**: reading "
    "down, models whose rank ranges all hold one same rank; the data cannot order them (models of neighbouring "
    "groups may still overlap: read the ranges).")


METRICS_INTRO = (
    "### Which automatic metric agrees with human raters?\nOn CulturalFrames images, per criterion. **scored** "
    "rows (computed here, `culturelens meta-eval`): Spearman ρ of a metric's per-image scores with the mean of "
    "the other raters, each rater left out in turn and the correlations averaged, with a 95% CI from a bootstrap "
    "over prompts; **ceiling** is the same for one rater against the others, so a metric as good as one more rater "
    "reaches it. **reported** rows are the paper's Fig. 7 (Nayak et al.): a Spearman ρ with the human ratings whose "
    "pooling the paper does not state, so they follow the scored rows and are never ordered among them. The "
    "**measures** column says which each row is.")


def overall_note(chosen: str, sets: list[tuple[str, int]], off: int, basis: str = "") -> str:
    """The overall view's note: the rule, the track set shown and the others, the tracks left out (their value
    shown beside), what each track's win rates rest on (``basis``: ``tables.win_rates``' note), rows other
    protocols leave out."""
    if not sets:
        return "No results for this choice yet."
    others = ", ".join(f"{render.plain(s)} ({n})" for s, n in sets if s != chosen)
    left_out = " ".join(f"{render.plain(t.not_in_overall[:1].upper() + t.not_in_overall[1:])}; its "
                        f"{render.plain(t.headline)} is shown in its own column, beside the mean."
                        for t in track_registry.all_tracks().values() if t.not_in_overall)
    return ("**Mean win rate** (the rule of Stanford's HEIM benchmark): on each track's headline metric (overall "
            "slice; the track's rows of one protocol: the suite's part for that track when it has rows, so a "
            "model's suite submission is one row across the tracks, else the track's headline protocol, else the "
            "papers'; never the metric scored on other prompts), the share of the other models a model beats on the "
            "prompts they all answered, ties counting half; a model without a value on a track leaves that track's "
            "comparison. "
            "Only models scored on the same set of tracks are ranked together: here "
            f"**{render.plain(chosen)}**" + (f"; other sets (models): {others}" if others else "") +
            ". The 95% intervals (win rate and rank) come from a paired bootstrap over each track's shared prompts; "
            "paper rows have no per-prompt values and get none. Reported and scored rows of one model are kept "
            "apart. " + left_out +
            (f" {render.plain(basis[:1].upper() + basis[1:])}." if basis else "") +
            (f" {off} headline row(s) under other protocols are left out (see each track)." if off else ""))


def agreement_note(table: pd.DataFrame, metric: str) -> str:
    """The sentence beside a metric's ranking on how far the metric itself agrees with human raters, when
    ``culturelens meta-eval --store`` measured it (``meta_eval.agreement``: alignment, every country); else ""."""
    from benchmark.expectations import meta_eval

    row = meta_eval.agreement(table, metric)
    if row is None:
        return ""
    if pd.isna(row["spearman"]):
        rho = "undefined (the metric's values or the raters' do not vary)"
    else:
        interval = f" [{row['ci_low']:.2f}, {row['ci_high']:.2f}]" if pd.notna(row["ci_low"]) else ""
        rho = f"{row['spearman']:.2f}{interval}"
    ceiling = f", against {row['ceiling']:.2f} between raters" if pd.notna(row["ceiling"]) else ""
    return (f" **Agreement with the CulturalFrames raters** (alignment, `culturelens meta-eval`): Spearman ρ {rho} "
            f"over {int(row['n']):,} images{ceiling} (Metrics tab, with the version measured).")


def empty_track_note(track: str) -> str:
    """Why a registered track shows no rows: nothing scored on it yet, and no paper table copied for it."""
    title = render.plain(track_registry.get(track).title)
    return (f"No {title} results yet: no submission has been scored on this track, and this leaderboard copies no "
            "paper table for it. The **Metrics** tab's method page says how it is measured; the **Submit** tab says "
            "how to take part.")


def filters_label(filters: tables.Filters, columns) -> str:
    """The filter panel's title: which filters are active (each may hide rows; the note counts them)."""
    active = [name for name, on in (("model search", filters.models), ("model type", filters.types),
                                    ("size", filters.size_min is not None or filters.size_max is not None),
                                    ("date", filters.since), ("provenance", filters.provenance)) if on]
    if columns and len(columns) < len(tables.RANK_COLUMNS):
        active.append(f"{len(columns)} of {len(tables.RANK_COLUMNS)} columns shown")
    return "Filters and columns (" + (f"{len(active)} active: {', '.join(active)}" if active else
                                      "none active: every row is shown") + ")"


def _padded_limits(points: pd.DataFrame, chart: Chart, pad: float = 0.05) -> dict:
    """``x_lim`` and ``y_lim`` that leave a margin round a scatter's points, so none is cut at the edge."""
    limits = {}
    for axis, column in (("x_lim", chart.x), ("y_lim", chart.y)):
        if len(points):
            low, high = float(points[column].min()), float(points[column].max())
            margin = max((high - low) * pad, 0.02)
            limits[axis] = [low - margin, high + margin]
    return limits


def while_queue_rebuilt(shown: Callable[[str], object]):
    """For a view that reads the queue: while the queue is being rebuilt (its file found damaged by this view or
    another, ``Store.queue_watch``), what ``shown(QUEUE_REBUILDING)`` gives instead of Gradio's generic "Error";
    the rebuild starts the moment a view meets the damage."""

    def wrap(view):
        @functools.wraps(view)
        def guarded(self, *args, **kwargs):
            watch = self.store.queue_watch
            if not watch.rebuilding:
                try:
                    return view(self, *args, **kwargs)
                except QueueDamaged:
                    watch.noticed()
            return shown(QUEUE_REBUILDING)
        return guarded
    return wrap


def queue_notice(notice: str) -> tuple[str, pd.DataFrame]:
    """The Queue tab while the queue is being rebuilt: the notice, and no row."""
    return f"> **Notice:** {notice}", pd.DataFrame(columns=QUEUE_COLUMNS)


def linked_table(frame: pd.DataFrame) -> dict:
    """A ranked table for the page: its Model and Source columns as Markdown (links that read as links), the
    others by ``tables.DATATYPES``. The API returns the frame itself."""
    return gr.update(value=frame, datatype=tables.datatypes(frame.columns, frame))


def shown_if_filled(value, **options) -> dict:
    """``value`` for a chart, gallery or file box that is shown only when it holds something (rows, images, a
    file): an empty box tells nothing, and the note beside it says why it is empty."""
    filled = not value.empty if isinstance(value, pd.DataFrame) else bool(value)
    return gr.update(value=value, visible=filled, **options)


class Views:
    """The functions behind the components, one per view; pure reads of the store and catalog."""

    def __init__(self, store: Store, owner: str, fetch: Callable[[list[str]], object] | None = None,
                 suite: ServedSuite | None = None, metric_settings: dict[str, object] | None = None):
        """``suite``: the suite served (default: the package's definition, no assets); ``metric_settings``: the
        metric settings the service's worker scores with (default: as the environment sets them)."""
        self.store, self.owner = store, owner
        self.suite = suite or ServedSuite(store.suite)
        self.metric_settings = metric_settings if metric_settings is not None else default_metric_settings()
        self.places = render.server_places(store.root)
        if self.suite.assets is not None:  # the suite folder is a server folder too
            self.places[str(self.suite.assets.folder)] = "SUITE"
            self.places[str(self.suite.assets.folder.resolve())] = "SUITE"
        self.catalog = Catalog(store, fetch)
        self.browser = DatasetBrowser(store)
        self.downloads = DownloadFolder()  # its earlier runs' folders are removed, this one is at exit

    def public(self, text: object) -> str:
        """Server-side text (a reason, an error) for visitors: server folders hidden, then escaped."""
        return render.plain(render.hide_paths(text, self.places))

    # --- overview ------------------------------------------------------------------------------------------
    def track_choices(self) -> list[tuple[str, str]]:
        """Every registered track and any other the results hold, as (title, id): a track without rows yet keeps
        its button, and its note says why it is empty."""
        ids = dict.fromkeys([*track_registry.all_tracks(), *tables.tracks(self.catalog)])
        return [(track_registry.get(t).title, t) for t in ids]

    def overview(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None, limit: int | None = MAX_ROWS):
        """The Overview tab: the track picker, the metric picker (metric ids; a label is understood too), the
        ranked (or win-rate) table, its note, the protocol picker (the track set, for the overall view) and the
        filter panel's title, which names the active filters."""
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        choices = [(OVERALL_LABEL, OVERALL_VIEW), *self.track_choices()]
        track = _pick(track, [t for _, t in choices], OVERALL_VIEW)
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
                gr.update(label=filters_label(filters, columns)))

    def overview_page(self, *inputs) -> list:
        """``overview`` for the page: the table's links rendered (``linked_table``)."""
        outputs = list(self.overview(*inputs))
        outputs[2] = linked_table(outputs[2])
        return outputs

    def _overall_view(self, filters: tables.Filters, track_set: str | None):
        """The mean win rate over tracks: table, note, metric and track-set picker updates, what filters hid."""
        _, hidden = filters.apply(tables.headline_rows(self.catalog))
        wide, sets, chosen, off = tables.overall(self.catalog, filters, track_set)
        return (tables.display_win_rates(wide, tables.model_ids(self.catalog)),
                overall_note(chosen, sets, off, wide.attrs.get("note", "")),
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
            return (tables.display(pd.DataFrame()), empty_track_note(track), metric_update,
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
                f"{'higher' if higher else 'lower'} is better. " + protocol_note(table, chosen, track) +
                " 95% CI over the same prompts: Student-t (Wilson for 0/1 values; for a metric computed from means, "
                "such as CRT from column means, the bootstrap's); none below 5 prompts, too few to cover."
                + agreement_note(self.store.meta_evaluation(), metric)
                if len(shown) else "No results for this choice yet.")
        return shown, note, metric_update, gr.update(label="Protocol", choices=protocol_choices(table),
                                                     value=chosen), hidden

    def _ranked_values(self, track: str, metric: str, name: str, values: list[str], filters: tables.Filters,
                       protocol: str | None) -> tuple[pd.DataFrame, bool, str]:
        """The rows of each value of slice ``name``, each value ranked apart, for people (with a *Slice* column
        unless the slice is overall); whether higher is better; and the notes, the filters' counted over every
        value at once."""
        shown, notes, higher = [], [], True
        rows = self.catalog.query(f"SELECT {tables.COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND "
                                  "slice = ?", [track, metric, name])
        for value in values:
            frame, note = tables.ranked(self.catalog, track, metric, name, value, filters, protocol)
            if len(frame):
                higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() \
                    else True
            own = filters.apply(rows[rows["slice_value"] == value])[1]  # this value's filter note, counted below
            notes.append(note.replace(own, "").strip() if own else note)
            part = tables.display(frame)
            if name != tables.OVERALL:
                part.insert(0, SLICE_COLUMN, value)
            shown.append(part)
        hidden = filters.apply(rows)[1]
        return (pd.concat(shown, ignore_index=True), higher,
                " ".join(dict.fromkeys(n for n in (hidden, *notes) if n)))

    def download(self, track, metric, models, types, size_min, size_max, since, provenance, columns,
                 protocol=None) -> list[str]:
        """The Overview's view as typed rows (``leaderboard.exports``), CSV and Parquet: for a track, every row
        of it the filters keep (every metric and slice), those of the table shown with their ranks; for the
        overall view, the win rates of the track set shown and the headline rows behind them. Every column
        (``columns`` chooses what the screen shows)."""
        filters = tables.Filters.parse(models, types, size_min, size_max, since, provenance)
        if track in tables.tracks(self.catalog):
            frame = exports.track_rows(self.catalog, track, metric, protocol, filters)
            return self._files(frame, track if track in track_registry.all_tracks() else "track")
        return self._files(exports.overall_rows(self.catalog, filters, protocol), "overall")

    def _files(self, frame: pd.DataFrame, stem: str) -> list[str]:
        """The frame as CSV (text cells that a spreadsheet would run as a formula are neutralised) and Parquet
        (typed, as is) files to download, named ``culturelens-<stem>``."""
        folder = self.downloads.fresh()
        csv, parquet = folder / f"culturelens-{stem}.csv", folder / f"culturelens-{stem}.parquet"
        render.spreadsheet_safe(frame).to_csv(csv, index=False)
        frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(parquet, index=False)
        return [str(csv), str(parquet)]

    def _serve(self, paths: list[Path], names: list[str] | None = None) -> list[str]:
        """Store files to show or download (under ``names``, default ``<n>-<file name>``), as links (or copies)
        in a folder of this app's: Gradio is blocked from the whole store (``launch_options``), so a visitor
        gets exactly the files a view picked."""
        folder, served = self.downloads.fresh(), []
        for i, path in enumerate(paths):
            target = folder / (names[i] if names else f"{i}-{path.name}")
            try:
                os.link(path, target)
            except OSError:  # another filesystem
                shutil.copyfile(path, target)
            served.append(str(target))
        return served

    def _serve_images(self, images: list[tuple[str, bytes]]) -> list[str]:
        """Images of submissions (name in the submission, bytes from its shards) to show, written as files in a
        folder of this app's (``<n>-<seed>.<ext>``): what Gradio serves is a copy, never a store file."""
        folder, served = self.downloads.fresh(), []
        for i, (name, data) in enumerate(images):
            target = folder / f"{i}-{PurePosixPath(name).name}"
            target.write_bytes(data)
            served.append(str(target))
        return served

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

    # --- slices --------------------------------------------------------------------------------------------
    def slices_page(self, *inputs) -> list:
        """``slices`` for the page: each chart hidden when empty (the note above them says why), a scatter with a
        margin round its points."""
        outputs = list(self.slices(*inputs))
        outputs[4] = linked_table(outputs[4])
        outputs[SLICE_BARS] = shown_if_filled(outputs[SLICE_BARS])
        for i, (_, chart) in enumerate(track_charts(), start=SLICE_BARS + 2):
            limits = _padded_limits(outputs[i], chart) if chart.kind == "scatter" else {}
            outputs[i] = shown_if_filled(outputs[i], **limits)
        return outputs

    def slices(self, track, metric, slice_name, slice_value, models):
        """The Slices tab: track, metric (ids), slice and value pickers, the ranked rows of one slice value, its
        note, the model x value heatmap, and the charts across tracks (``charts``)."""
        filters = tables.Filters.parse(models)
        track_choices = [(track_registry.get(t).title, t) for t in tables.tracks(self.catalog)]
        track = _pick(track, [t for _, t in track_choices])
        pairs = tables.metrics(self.catalog, track) if track else []
        metric = tables.metric_id(self.catalog, track, metric) if track else None
        label = {m: text for text, m in pairs}.get(metric, "")
        names = tables.slice_names(self.catalog, track, metric) if metric else []
        names = [n for n in names if n != tables.OVERALL] or names  # overall only when there is nothing finer
        slice_name = _pick(slice_name, names, "country")
        values = tables.slice_values(self.catalog, track, metric, slice_name) if slice_name else []
        slice_value = _pick(slice_value, values)
        table = tables.protocols(self.catalog, track, metric, slice_name, slice_value) if slice_value else None
        chosen = tables.pick_protocol(table) if slice_value else None
        frame, hidden = tables.ranked(self.catalog, track, metric, slice_name, slice_value, filters, chosen) \
            if slice_value else (pd.DataFrame(), "")
        matrix = tables.heatmap(self.catalog, track, metric, slice_name, filters, chosen) if slice_name else \
            pd.DataFrame()
        higher = bool(frame["higher_is_better"].iloc[0]) if len(frame) else True
        caption = (f"{label}, overall" if slice_name == tables.OVERALL
                   else f"{label} by {render.slice_label(slice_name or '')}")
        heat = render.heatmap_html(matrix, higher, f"{caption} (darker = better)", empty=(
            f"No model has a value of this metric by {render.slice_label(slice_name or '')} yet."))
        where = "overall" if slice_name == tables.OVERALL else f"{render.slice_label(slice_name)} = {slice_value}"
        note = (f"**{render.plain(label)}**, {render.plain(where)}: {len(frame)} row(s). " +
                protocol_note(table, chosen, track) + " (The Overview's protocol picker lists the others.)"
                if len(frame) else "No results for this choice yet.")
        if hidden:
            note += f" **Note:** {render.plain(hidden)}"
        if len(frame) > MAX_ROWS:
            note += f" Showing the top {MAX_ROWS}: search models to find others."
        return (gr.update(choices=track_choices, value=track), gr.update(choices=pairs, value=metric),
                gr.update(choices=[(render.slice_label(n), n) for n in names], value=slice_name),
                gr.update(choices=values, value=slice_value), tables.display(frame.head(MAX_ROWS)), note, heat,
                *self.charts(filters))

    def charts(self, filters: tables.Filters):
        """Models across tracks (mean win rate bars, win rate per track as a heatmap), then each track's own charts
        (``benchmark.track.Chart``: W1KP's reusability curves, CRT's recognition against realisation...), each of
        the one protocol its track's Overview ranks (``tables.chart_protocol``): the ``CHART_MODELS`` best models by
        mean win rate, unless a search names others (curves: those first, then others by name, up to as many)."""
        wide = tables.overall(self.catalog, filters)[0].head(CHART_MODELS)  # the largest track set
        who = wide["model"] + wide["provenance"].map(PAPER_MARK)
        bars = pd.DataFrame({"model": who, "mean win rate": wide["win_rate"]})
        per_track = wide[tables.win_rate_columns(wide)].set_index(who)
        per_track.columns = [track_registry.get(c).title for c in per_track.columns]
        profile = render.heatmap_html(per_track, True, "win rate per track (darker = better; – = no score)")
        curves = self.catalog.query("SELECT * FROM curves ORDER BY model, x")
        points = []
        notes = [] if len(bars) else ["no model has a headline score on a track yet (or the filters hide them all)"]
        for track, chart in track_charts():
            # One protocol per chart, the one the track's Overview ranks: points scored otherwise never mix in.
            chosen = tables.chart_protocol(self.catalog, track)
            aggregates, _ = filters.apply(self.catalog.query(f"SELECT {tables.COLUMNS} FROM aggregates WHERE track = ?",
                                                             [track]))
            aggregates = aggregates[aggregates["protocol_id"] == chosen]
            frame = chart.data(aggregates.assign(model=aggregates["model"] + aggregates["provenance"].map(PAPER_MARK)),
                               _chart_curves(curves[curves["submission_id"].isin(aggregates["submission_id"])],
                                             list(wide["model"])))
            points.append(frame)
            if frame.empty:
                notes.append(chart.empty)
            elif chosen:
                notes.append(f"{chart.label}: protocol {chosen} only, the one the Overview ranks for this track")
        return bars, profile if len(bars) else "", *points, "".join(f"- {why}.\n" for why in notes)

    # --- compare -------------------------------------------------------------------------------------------
    def submission_choices(self) -> list[tuple[str, str]]:
        frame = tables.submissions(self.catalog)
        return [(f"{m} · {s} ({' + '.join(part.split('@')[0] for part in d.split(' + '))})", s) for m, s, d in
                zip(frame["model"], frame["submission_id"], frame["dataset"].fillna(""))]

    def scored(self, chosen) -> list[str]:
        """The submissions a visitor picked, kept only if the catalog knows them as scored (at most
        ``MAX_COMPARE``). Ids come from outside (a custom dropdown value, an API call): a path, a folder Gradio
        stored an upload in, or a deleted submission is never looked up on disk."""
        known = set(tables.submissions(self.catalog)["submission_id"])
        picked = [chosen] if isinstance(chosen, str) else list(chosen or [])
        return [s for s in dict.fromkeys(picked) if isinstance(s, str) and s in known][:MAX_COMPARE]

    def compare_prompts(self, chosen: list[str], query: str = ""):
        """The prompt picker for the picked submissions: the prompts of the first, each labelled with its id,
        country, concept and text (so typing in the picker filters on all of them); with ``query``, only those
        whose id and text hold every word of it (``search.matching``: "jollof" finds the jollof rice prompt)."""
        chosen = self.scored(chosen)
        if not chosen:
            return gr.update(choices=[], value=None)
        prompts = self.catalog.prompts_of(chosen[0])
        texts = self.browser.prompt_table(chosen[0])
        prompts = prompts.assign(prompt=prompts["prompt_id"].map(texts["prompt"]) if texts is not None else None)
        prompts = search.matching(prompts, query)
        labels = [(" · ".join(str(v)[:120] for v in row if v is not None and v == v), row[0])
                  for row in prompts.itertuples(index=False)]
        return gr.update(choices=labels, value=labels[0][1] if labels else None)

    def compare(self, chosen: list[str], prompt_id: str | None):
        picked = [chosen] if isinstance(chosen, str) else list(chosen or [])
        chosen = self.scored(picked)
        if not chosen or not isinstance(prompt_id, str) or not prompt_id:
            unknown = " None of the picked submissions is a scored submission." if picked and not chosen else ""
            return [], [], pd.DataFrame(), [], f"Pick 1-{MAX_COMPARE} scored submissions and a prompt.{unknown}"
        rows = self.catalog.per_image(chosen, "prompt_id = ?", [prompt_id])
        if rows.empty:
            return [], [], pd.DataFrame(), [], (f"No image of prompt {render.code(render.excerpt(prompt_id))} in these "
                                                "submissions.")
        # The only images this view serves: those each submission's validated image table lists, read from its
        # shards (results name them by image_path, which a tampered results table could point anywhere).
        owned = {s: self.store.image_bytes(s, rows.loc[rows["submission_id"] == s, "image_path"].dropna().tolist())
                 for s in chosen}
        labels = tables.metric_labels(self.catalog, chosen)  # metrics by name, not by id
        gallery, pictures = [], []
        for (submission, seed), group in rows.groupby(["submission_id", "seed"], sort=True):
            name = group["image_path"].iloc[0]
            if name not in owned[submission]:
                continue
            scores = ", ".join(f"{labels.get(m, m)} {v:.3f}" for m, v in zip(group["metric"], group["value"])
                               if pd.notna(v))
            notes = "; ".join(sorted({n for n in group["note"].dropna()}))
            gallery.append(((name, owned[submission][name]), f"{group['model'].iloc[0]} · seed {int(seed)} · "
                            f"{scores}" + (f" · {notes}" if notes else "")))
        gallery = list(zip(self._serve_images([image for image, _ in gallery]), [caption for _, caption in gallery]))
        references = self.references(chosen[0], prompt_id)
        for _, kind in track_pictures():
            for _, row in rows[rows["metric"] == kind.metric].dropna(subset=["detail"]).iterrows():
                data = owned[row["submission_id"]].get(row["image_path"])
                drawn = kind.draw(open_as_viewed(io.BytesIO(data)), references, json.loads(row["detail"]),
                                  row["value"]) if data is not None else None
                if drawn is not None:
                    pictures.append((drawn[0], f"{row['model']} · seed {int(row['seed'])}: {drawn[1]}"))
        table = rows.pivot_table(index=["model", "seed"], columns="metric", values="value").round(3)
        table = table.rename(columns=labels).reset_index()
        prompt = self.browser.prompt_text(rows["submission_id"].iloc[0], prompt_id)
        note = f"**{render.plain(prompt_id)}**: {render.plain(prompt)}" if prompt else ""
        return gallery, [(r, f"reference {i}") for i, r in enumerate(references)], table, pictures, note

    def compare_link(self, subs: str | None, prompt_id: str | None) -> list:
        """The Compare tab as a link names it (``?tab=compare&subs=ID,ID&prompt=ID``): the submissions picker with
        those of the ids that are scored submissions, the prompt picker with that prompt (the first one when the
        link names none, or one the submissions lack), and ``compare_page``'s outputs."""
        chosen = self.scored((subs or "").split(","))
        prompts = self.compare_prompts(chosen)
        ids = [value for _, value in prompts.get("choices", [])]
        prompt_id = prompt_id if prompt_id in ids else prompts.get("value")
        return [gr.update(choices=self.submission_choices(), value=chosen), gr.update(**{**prompts, "value": prompt_id}),
                *self.compare_page(chosen, prompt_id)]

    def compare_page(self, chosen: list[str], prompt_id: str | None):
        """``compare`` for the page: an empty gallery or table is hidden, and the note says why it is empty."""
        gallery, references, table, pictures, note = self.compare(chosen, prompt_id)
        if gallery and not references:
            note += "\n\nNo reference images: this prompt's dataset has none (only the iconicity track's do)."
        elif references and not pictures:
            note += "".join(f"\n\nNo {kind.name}: {kind.empty}." for _, kind in track_pictures())
        return *(shown_if_filled(v) for v in (gallery, references, table, pictures)), note

    def references(self, submission_id: str, prompt_id: str) -> list[Image.Image]:
        try:
            sets = self.store.prompt_sets(submission_id)
        except (DatasetUnavailable, OSError, ValueError):
            return []
        prompts = next((p for p in sets if p.has_references and prompt_id in p.table.index), None)
        if prompts is None:
            return []
        source, table = prompts.references({prompt_id})
        return [open_as_viewed(source(i), formats=None) for i in range(len(table))]

    def schema_file(self) -> str:
        """The manifest's JSON Schema as a file to download (the Submit tab's button)."""
        path = self.downloads.fresh() / "manifest.schema.json"
        path.write_text(json_schema(), encoding="utf-8")
        return str(path)

    # --- submit and queue ----------------------------------------------------------------------------------
    def who(self, profile: gr.OAuthProfile | None) -> str | None:
        """The signed-in Hugging Face user on a Space (OAuth), else the configured local user."""
        if operator_settings.on_space():
            return profile.username if profile is not None else None
        return self.owner

    @while_queue_rebuilt(lambda notice: f"### Not submitted: nothing was stored\n\n{notice}")
    def submit(self, file: str | None, hub_repo: str, profile: gr.OAuthProfile | None = None,
               progress=gr.Progress()) -> str:
        owner = self.who(profile)
        if owner is None:
            return "### Not submitted: sign in with Hugging Face first (button above)."
        try:
            self.store.check_quota(owner)
        except PermissionDenied as error:
            return f"### Rejected before any work\n\n{render.plain(error)}"
        hub_repo = (hub_repo or "").strip()
        if not file and not hub_repo:
            return "Choose a `.zip` file or name a Hub dataset of generations first."
        if not file:
            try:  # checked before the store: a name that is not a repo id costs no upload attempt
                repo.hub_repo(hub_repo)
            except repo.RepoError as error:
                return f"### Rejected: nothing was stored\n\n- {render.plain(error)}"

        def report_progress(stage: str, done: int, total: int) -> None:
            progress(done / total, desc=f"{stage} {done}/{total}")

        try:
            if file:
                outcome = self.store.submit(Path(file), owner, report_progress)
            else:
                outcome = self.store.submit_from_hub(hub_repo, owner, report_progress)
        except (PermissionDenied, ValueError) as error:  # over the quota after all; a Hub dataset not fetched
            return f"### Rejected: nothing was stored\n\n- {render.plain(error)}"
        except ServerFault as error:  # a full disk: the server's fault, not the uploader's
            return f"### Not stored\n\n{render.plain(error)}. It was not counted against you."
        report = outcome.report
        if outcome.job is None:
            # Validation names only the submission's own entries, exactly as the upload holds them: nothing to
            # hide, and rewriting a name an attacker chose would tell which server folders exist.
            problems = "\n".join(f"- {render.plain(e)}" for e in suite_view.problems(report))
            summary = report.summary.removeprefix("REJECTED: ")
            return f"### Rejected: nothing was stored\n\n**{render.plain(summary)}**\n\nThe details:\n\n{problems}"
        m = report.manifest
        warnings = "".join(f"\n- warning: {render.plain(w)}" for w in report.warnings)
        held = "".join(f"- {line}\n" for line in suite_view.accepted_lines(report))
        return (f"### Accepted: `{outcome.job.id}`\n\n"  # an id the store made: safe in a code span
                f"**{render.plain(report.summary.removeprefix('OK: '))}**\n\n"
                f"- model: **{render.plain(m.model.name)}** ({render.plain(m.model.id)})\n{held}"
                f"- content hash: `{report.content_hash}`{warnings}\n\n"
                "It is queued: follow it in the **Queue** tab.")

    def submit_file(self, file: str | None, profile: gr.OAuthProfile | None = None, progress=gr.Progress()) -> str:
        """Validate and queue an uploaded submission zip."""
        return self.submit(file, "", profile, progress)

    @while_queue_rebuilt(lambda notice: {"jobs": [], "workers": [], "notice": notice})
    def queue_api(self) -> dict:
        """The queue as data, nothing escaped, server folders hidden: ``jobs``, newest first (at most
        ``QUEUE_ROWS``; any other by ``/details``): id, state, model, model_id, owner, dataset, submitted_at,
        started_at, finished_at (ISO 8601), progress (0-1, while RUNNING), message, reason (why it FAILED),
        attempts; ``workers`` heard from in the last hour: id, state, seconds_since_heard, message; and ``notice``:
        None, or why the queue cannot be listed now (it is being rebuilt, ``QUEUE_REBUILDING``)."""
        jobs = [{"id": job.id, "state": job.state, "model": job.model, "model_id": job.model_id, "owner": job.owner,
                 "dataset": job.dataset, "submitted_at": job.created_at, "started_at": job.started_at,
                 "finished_at": job.finished_at, "progress": job.progress if job.state == "RUNNING" else None,
                 "message": render.hide_paths(job.message, self.places) if job.message else None,
                 "reason": render.hide_paths(job.error, self.places) if job.state == "FAILED" and job.error else None,
                 "attempts": job.attempts} for job in self.store.queue.jobs()[:QUEUE_ROWS]]
        workers = [{"id": w["id"], "state": w["state"], "seconds_since_heard": round(float(w["age"]), 1),
                    "message": render.hide_paths(w["message"], self.places) if w["message"] else None}
                   for w in self.store.queue.workers(within_seconds=3600)]
        return {"jobs": jobs, "workers": workers, "notice": None}

    @while_queue_rebuilt(queue_notice)
    def queue(self):
        rows = []
        for job in self.store.queue.jobs()[:QUEUE_ROWS]:
            progress = f"{(job.progress or 0) * 100:.0f}% {job.message or ''}".strip() if job.state == "RUNNING" else ""
            details = render.hide_paths(job.error if job.state == "FAILED" else (job.message or ""), self.places)
            rows.append([job.created_at, job.id, job.model, job.owner, job.state, progress,
                         job.started_at or "", job.finished_at or "", details])
        empty = "\n\nNo submission in the queue yet: the **Submit** tab says how to send one." if not rows else ""
        return self.workers_markdown() + empty, pd.DataFrame(rows, columns=QUEUE_COLUMNS)

    def workers_markdown(self) -> str:
        """Notices (a rebuilt queue), the worker supervisor's view and each worker's state, as Markdown. Ages
        come from the queue's own clock, so a worker machine's clock cannot make a worker look dead or alive."""
        queue = self.store.queue
        notices = [f"> **Notice:** {render.plain(notice)}" for notice in queue.notices()]
        if note := quarantine.note(self.store.quarantined()):
            notices.append(f"> **Notice:** {render.plain(note)}")
        workers = queue.workers(within_seconds=3600)
        live = [w for w in workers if w["state"] not in ("stopped", "unavailable") and w["age"] < 30]
        lines = [line for s in queue.supervisors() if (line := self._supervisor_line(s))]
        for w in workers:
            if w["state"] == "unavailable":
                if not live:  # a worker that could not score, while none scores now; once one does, it is history
                    lines.append(f"- worker {render.code(w['id'])} cannot score: {self.public(w['message'])}")
            elif w in live:
                lines.append(f"- worker {render.code(w['id'])} is up: {render.plain(w['state'])} "
                             f"({self.public(w['message'] or '')})")
            elif w["age"] < 600 and w["state"] != "stopped":
                lines.append(f"- worker {render.code(w['id'])} silent for {w['age']:.0f} s "
                             f"(last: {render.plain(w['state'])})")
        if not live:
            lines.insert(0, "**No worker is running right now**: new submissions wait as PENDING until one starts "
                            "(`culturelens worker --store DIR`).")
        tracks = self.tracks_off()
        text = "\n".join(notices + lines) or "No worker has been seen."
        return text + (f"\n\n{tracks}" if tracks else "")

    def tracks_off(self) -> str:
        """The Queue tab's lines on the tracks this server cannot score yet (``ServedSuite.tracks_off``), server
        folders hidden."""
        off = self.suite.tracks_off(self.store.datasets, self.metric_settings)
        return render.hide_paths(suite_view.tracks_off_markdown(off), self.places)

    @staticmethod
    def _supervisor_line(s: dict) -> str | None:
        """One line for a worker supervisor (``leaderboard.supervisor``); None once it stopped."""
        restarts = f"restarted {s['restarts']} time{'s' if s['restarts'] != 1 else ''}"
        last = f", last exit: {s['last_exit']}" if s["last_exit"] else ""
        if s["state"] == "running":
            return f"- supervisor: worker pid {s['pid']} running ({restarts}{last})"
        if s["state"] == "restarting":
            return (f"- **restarting**: the worker stopped ({s['last_exit']}); restarting it in "
                    f"{max(s['retry_in'] or 0, 0):.0f} s ({restarts} so far)")
        if s["state"] == "gave up":
            return f"- **supervisor gave up** ({restarts}{last}): {render.plain(s['message'] or '')}"
        return None

    @while_queue_rebuilt(lambda notice: (notice, None))
    def details(self, submission_id: str):
        """One submission: state, reason and log excerpt, and its per-image scores to download."""
        job = self.store.queue.get((submission_id or "").strip())
        if job is None:
            return "Type or paste a submission ID from the table.", None
        lines = [f"### `{job.id}`: {job.state}",  # ids the store made are safe in a code span
                 f"- model **{render.plain(job.model)}**, owner {render.plain(job.owner)}, dataset "
                 f"{render.plain(job.dataset)}",
                 f"- submitted {job.created_at}; started {job.started_at or '–'}; finished {job.finished_at or '–'};"
                 f" attempts {job.attempts}"]
        if job.state == "FAILED":
            lines.append(f"- **reason**: {self.public(job.error)}")
        try:  # the run record counts the images left out for errors (non-finite embeddings or values)
            run = json.loads((self.store.results / job.id / layout.RUN).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            run = {}
        lines += suite_view.run_parts_lines(run)
        if errors := run.get("errors") if isinstance(run, dict) else None:
            reasons = ", ".join(f"{render.plain(reason)} ({count})" for reason, count in errors.items())
            lines.append(f"- **{run.get('excluded', sum(errors.values()))} images excluded**: {reasons}")
        if job.log_excerpt:
            excerpt = render.hide_paths(job.log_excerpt, self.places).replace("```", "'''")
            lines.append("\n**Log excerpt**\n\n```text\n" + excerpt + "\n```")
        per_image = self.store.results / job.id / layout.PER_IMAGE
        return "\n".join(lines), (self._serve([per_image], [f"culturelens-{job.id}-per_image.parquet"])[0]
                                   if per_image.exists() else None)

    def details_page(self, submission_id: str):
        """``details`` for the page: the file box only when there is a file."""
        text, path = self.details(submission_id)
        return text, shown_if_filled(path)

    def rerun(self, submission_id: str, profile: gr.OAuthProfile | None = None) -> str:
        """Queue one of your finished or failed submissions again (its old results are replaced)."""
        return self.owner_action("rerun", submission_id, profile)

    def delete(self, submission_id: str, profile: gr.OAuthProfile | None = None) -> str:
        """Delete one of your submissions with its images and results."""
        return self.owner_action("delete", submission_id, profile)

    @while_queue_rebuilt(lambda notice: f"Not done: {notice}")
    def owner_action(self, action: str, submission_id: str, profile: gr.OAuthProfile | None) -> str:
        owner = self.who(profile)
        if owner is None:
            return "Not done: sign in with Hugging Face first."
        submission_id = (submission_id or "").strip()
        if not layout.is_submission_id(submission_id):  # checked here, so that the answer quotes only the text's start
            return f"Not done: no submission {render.code(render.excerpt(submission_id))}."
        try:
            (self.store.rerun if action == "rerun" else self.store.delete)(submission_id, owner)
        except PermissionDenied as error:
            return f"Not done: {render.plain(error)}"
        return f"Done: {render.code(submission_id)} " + ("queued again." if action == "rerun" else "deleted.")

    # --- metrics -------------------------------------------------------------------------------------------
    def metrics_page(self):
        """The method-page picker (every track: registered ones have a page even before any result) and the
        metric-human agreement table, provenance in words."""
        choices = self.track_choices()
        first = choices[0][1] if choices else None
        return (gr.update(choices=choices, value=first), render.method_page(first) if first else "",
                tables.agreement_table(self.store.meta_evaluation()))

    # --- refreshing an open page ---------------------------------------------------------------------------
    def results_version(self) -> str:
        """A digest of the results the catalog holds (folder names, the reported file's time): it changes when
        new results land, and costs one directory listing at most every ``catalog.REFRESH_SECONDS``."""
        self.catalog.refresh()
        with self.catalog.lock:
            key = f"{self.catalog.reported_stamp}|" + "|".join(sorted(self.catalog.loaded))
        return hashlib.sha1(key.encode()).hexdigest()[:16]

    def poll(self, tab: str, seen: str, queue_seen: str, overview_inputs: list, slices_inputs: list) -> dict:
        """What an open page's timer gets: when results changed since ``seen``, the Overview again (and the
        Slices when open); when the Queue is open and changed since ``queue_seen``, the Queue. Keys name the
        parts to update; a part left out is not re-rendered."""
        parts = {}
        version = self.results_version()
        if version != seen:
            parts.update(version=version, overview=self.overview_page(*overview_inputs))
            if tab == "slices":
                parts["slices"] = self.slices_page(*slices_inputs)
        if tab == "queue":
            workers, frame = self.queue()
            digest = hashlib.sha1((workers + frame.to_csv()).encode()).hexdigest()[:16]
            if digest != queue_seen:
                parts.update(queue_version=digest, queue=(workers, frame))
        return parts

    # --- API: data, not display ------------------------------------------------------------------------------
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


def _chart_curves(curves: pd.DataFrame, best: list[str]) -> pd.DataFrame:
    """The curves a chart draws: of at most ``CHART_MODELS`` models (those of ``best`` first, in its order, then
    the others by name), a model name that several submissions share marked with the submission's id's end."""
    names = list(dict.fromkeys([m for m in best if m in set(curves["model"])] + sorted(set(curves["model"]))))
    curves = curves[curves["model"].isin(names[:CHART_MODELS])]
    if curves["submission_id"].nunique() > curves["model"].nunique():  # one name, several submissions
        curves = curves.assign(model=curves["model"] + " · " + curves["submission_id"].str[-6:])
    return curves


def _selected_id(event: gr.SelectData) -> str:
    """The ID column of the queue row a visitor clicked."""
    return event.row_value[1] if event.row_value else ""


def _url_state(request: gr.Request | None) -> dict:
    return dict(request.query_params) if request is not None else {}


def build_app(store: Store, *, owner: str = "local", fetch: Callable[[list[str]], object] | None = None,
              suite: ServedSuite | None = None, metric_settings: dict[str, object] | None = None) -> gr.Blocks:
    """The leaderboard UI over ``store``. ``owner``: the user submissions are recorded under when the app does
    not run on a Hugging Face Space (on a Space, visitors sign in with their Hugging Face account). ``fetch``:
    brings results folders the store knows only from its leaderboard release (``leaderboard.pickup``).
    ``suite`` and ``metric_settings``: the suite served and the settings its worker scores with (``Views``)."""
    views = Views(store, owner, fetch, suite, metric_settings)
    on_space = operator_settings.on_space()
    # Uploads and downloads Gradio keeps in its cache are deleted after an hour.
    with bounds.Blocks(title="CultureLens leaderboard", delete_cache=(3600, 3600)) as app:
        gr.Markdown(render.HEADER)
        open_tab = gr.Textbox("overview", visible=False)  # the tab a person has open, for the timer
        seen, queue_seen = gr.State(""), gr.State("")  # what this page shows: results and queue digests
        with gr.Tabs() as tabs:
            with gr.Tab("Overview", id="overview") as overview_tab:
                with gr.Row():
                    o_track = gr.Radio(label="Track", choices=[(OVERALL_LABEL, OVERALL_VIEW), *views.track_choices()],
                                       value=OVERALL_VIEW, scale=3, min_width=320)
                    o_metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True,
                                           scale=2)
                    o_protocol = gr.Dropdown(label="Protocol", choices=[], interactive=True, allow_custom_value=True,
                                             scale=2)
                with gr.Accordion(filters_label(tables.Filters(), tables.RANK_COLUMNS), open=False) as o_panel:
                    with gr.Row():
                        o_models = gr.Textbox(label="Models (comma-separated, any matches)",
                                              placeholder="SDXL, FLUX")
                        o_types = gr.CheckboxGroup(TYPES, label="Model type (none = all)")
                        o_prov = gr.CheckboxGroup(["scored", "reported"], label="Provenance (none = all)")
                    with gr.Row():
                        o_min = gr.Number(label="Min size, B params (0 = no bound)", value=None)
                        o_max = gr.Number(label="Max size, B params (0 = no bound)", value=None)
                        o_since = gr.Textbox(label="Scored since (YYYY-MM-DD)")
                    o_columns = gr.CheckboxGroup(tables.RANK_COLUMNS, value=tables.RANK_COLUMNS, label="Columns")
                o_note = text_markdown()
                o_table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
                o_download = gr.Button("Download this view (CSV, Parquet)", size="sm")
                o_files = gr.File(label="Downloads", file_count="multiple", visible=False)
                o_inputs = [o_track, o_metric, o_models, o_types, o_min, o_max, o_since, o_prov, o_columns, o_protocol]
                o_outputs = [o_track, o_metric, o_table, o_note, o_protocol, o_panel]
                o_download.click(views.download, o_inputs, o_files, api_name="download").then(
                    lambda: gr.update(visible=True), None, o_files, api_name=False)
                for control in o_inputs:
                    _on_change(control)(views.overview_page, o_inputs, o_outputs, api_name=False).then(
                        None, [o_track, o_metric, o_models, o_protocol], None,
                        js=_url_js("overview", ["track", "metric", "models", "protocol"]))
                gr.api(views.leaderboard_api, api_name="leaderboard")

            with gr.Tab("Slices", id="slices") as slices_tab:
                with gr.Row():
                    s_track = gr.Dropdown(label="Track", choices=[], interactive=True, allow_custom_value=True)
                    s_metric = gr.Dropdown(label="Metric", choices=[], interactive=True, allow_custom_value=True)
                    s_slice = gr.Dropdown(label="Slice by", choices=[], interactive=True, allow_custom_value=True)
                    s_value = gr.Dropdown(label="Value", choices=[], interactive=True, allow_custom_value=True)
                    s_models = gr.Textbox(label="Models (comma-separated)", placeholder="all")
                s_note = text_markdown()
                s_table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
                gr.Markdown("#### Model × slice heatmap")
                s_heat = gr.HTML(elem_classes=["cl-scroll"])
                gr.Markdown("#### Models across tracks")
                s_chart_note = text_markdown()
                s_bars = gr.BarPlot(x="model", y="mean win rate", label="Mean win rate over tracks", y_lim=[0, 1],
                                    sort="-y", x_label_angle=-30)
                s_profile = gr.HTML(elem_classes=["cl-scroll"])
                with gr.Row():
                    s_charts = [(gr.ScatterPlot if chart.kind == "scatter" else gr.LinePlot)(
                        x=chart.x, y=chart.y, color=chart.color, label=chart.label, min_width=300)
                        for _, chart in track_charts()]
                s_inputs = [s_track, s_metric, s_slice, s_value, s_models]
                s_outputs = [s_track, s_metric, s_slice, s_value, s_table, s_note, s_heat, s_bars, s_profile,
                             *s_charts, s_chart_note]
                for control in s_inputs:
                    _on_change(control)(views.slices_page, s_inputs, s_outputs, api_name=False).then(
                        None, s_inputs, None, js=_url_js("slices", ["track", "metric", "slice", "value", "models"]))

            with gr.Tab("Compare", id="compare") as compare_tab:
                with gr.Row():
                    c_subs = gr.Dropdown(label=f"Submissions (up to {MAX_COMPARE})", multiselect=True,
                                         max_choices=MAX_COMPARE, choices=[], interactive=True, allow_custom_value=True,
                                         scale=3)
                    c_prompt = gr.Dropdown(label="Prompt (type to filter)", choices=[], interactive=True,
                                           allow_custom_value=True, scale=2)
                c_note = text_markdown(value=f"Pick 1-{MAX_COMPARE} scored submissions, then a prompt: their images side by side.")
                gallery = {"columns": 4, "height": "auto", "object_fit": "contain", "fit_columns": False, "visible": False,
                           "elem_classes": ["cl-gallery"]}  # thumbnails whole, captions under them
                c_refs = gr.Gallery(label="Reference image(s)", **gallery)
                c_gallery = gr.Gallery(label="Generated images, with per-image scores and reasons", **gallery)
                c_table = gr.Dataframe(label="Per-image scores", interactive=False, elem_classes=["cl-table"],
                                       visible=False)
                c_reuse = gr.Gallery(label=" · ".join(kind.label for _, kind in track_pictures()),
                                     **{**gallery, "columns": 2})
                c_outputs = [c_gallery, c_refs, c_table, c_reuse, c_note]
                c_link = _url_js("compare", ["subs", "prompt"])
                c_subs.input(views.compare_prompts, c_subs, c_prompt, api_name=False).then(
                    views.compare_page, [c_subs, c_prompt], c_outputs, api_name=False).then(
                    None, [c_subs, c_prompt], None, js=c_link)
                c_prompt.input(views.compare_page, [c_subs, c_prompt], c_outputs, api_name=False).then(
                    None, [c_subs, c_prompt], None, js=c_link)

            with gr.Tab("Datasets", id="datasets") as datasets_tab:
                d_inputs, d_outputs = views.browser.build()

            with gr.Tab("Metrics", id="metrics") as metrics_tab:
                gr.Markdown(METRICS_INTRO)
                m_table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
                m_track = gr.Dropdown(label="Method page", choices=[], interactive=True, allow_custom_value=True)
                m_page = gr.Markdown()
                m_track.input(render.method_page, m_track, m_page, api_name="method")
                with gr.Accordion("Cite (BibTeX)", open=False):
                    gr.Code(track_registry.bibtex(), language=None)

            with gr.Tab("Submit", id="submit") as submit_tab:
                if on_space:
                    gr.LoginButton()
                    who = "the Hugging Face account you sign in with"
                else:
                    who = f"**{render.plain(owner)}** (this server's local user)"
                steps, demo = suite_view.submit_guide(views.suite.suite, prompt_count(store, cube_1k.CONFIG_DEMO))
                gr.Markdown(steps)
                gr.DownloadButton("Manifest schema (JSON Schema)", value=views.schema_file(), size="sm")
                gr.Markdown(demo)
                gr.Markdown(f"Upload the `.zip` below, or name a Hub dataset repo holding the submission (a suite "
                            f"submission's `parts/`, or one dataset config's). It is checked at once; if it passes "
                            f"it joins the queue. You submit as {who}; {store.quota_note}.")
                with gr.Row():
                    upload = gr.File(label="Submission (.zip)", file_types=[".zip"], type="filepath")
                    hub_repo = gr.Textbox(label="…or a Hub dataset of generations (ORG/NAME)")
                submit = gr.Button("Validate and submit", variant="primary")
                verdict = text_markdown()
                submit.click(views.submit, [upload, hub_repo], verdict, api_name="submit_form")
                hub_repo.submit(views.submit, [upload, hub_repo], verdict, api_name=False)

            with gr.Tab("Queue", id="queue") as queue_tab:
                workers = text_markdown()
                queue_table = gr.Dataframe(headers=QUEUE_COLUMNS, interactive=False, wrap=True,
                                           elem_classes=["cl-table"])
                with gr.Row():
                    q_id = gr.Textbox(label="Submission ID", scale=3)
                    q_show = gr.Button("Details", scale=1)
                    q_rerun = gr.Button("Re-run (owner)", scale=1)
                    q_delete = gr.Button("Delete (owner)", variant="stop", scale=1)
                q_result = text_markdown()
                q_details = text_markdown()
                q_file = gr.File(label="Per-image scores (Parquet)", visible=False)
                q_show.click(views.details_page, q_id, [q_details, q_file], api_name=False)
                q_id.submit(views.details_page, q_id, [q_details, q_file], api_name=False)
                q_rerun.click(views.rerun, q_id, q_result, api_name="rerun")
                q_delete.click(views.delete, q_id, q_result, api_name="delete")
                queue_table.select(_selected_id, None, q_id, api_name=False)

            with gr.Tab("About", id="about") as about_tab:
                gr.Markdown(about_markdown(store))

        def restore(request: gr.Request):
            """First paint: the view the address names (the Overview by default), computed from its query; the
            other tabs fill when opened. Nothing here writes the address bar: an opened link stays as it was."""
            state = _url_state(request)
            tab = state.get("tab", "overview")
            tab = tab if tab in TABS else "overview"
            mine = tab == "overview"
            over = views.overview_page(state.get("track") if mine else None, state.get("metric") if mine else None,
                                  state.get("models", "") if mine else "", [], None, None, "", [],
                                  tables.RANK_COLUMNS, state.get("protocol") if mine else None)
            sliced = views.slices_page(state.get("track"), state.get("metric"), state.get("slice"),
                                       state.get("value"), state.get("models", "")) if tab == "slices" else \
                [gr.update()] * len(s_outputs)
            queued = views.queue() if tab == "queue" else [gr.update()] * 2
            compared = views.compare_link(state.get("subs"), state.get("prompt")) if tab == "compare" else \
                [gr.update()] * (2 + len(c_outputs))
            # A link that names no other tab leaves the tabs alone: the Overview is open at first paint, and a tab
            # the person clicked while this ran stays open.
            named = tab != "overview"
            return (gr.Tabs(selected=tab) if named else gr.update(), tab if named else gr.update(),
                    views.results_version(), *over,
                    state.get("models", "") if mine else gr.update(), *sliced,
                    state.get("models", "") if tab == "slices" else gr.update(), *queued, *compared)

        app.load(restore, None, [tabs, open_tab, seen, *o_outputs, o_models, *s_outputs, s_models, workers,
                                 queue_table, c_subs, c_prompt, *c_outputs], api_name=False)
        # Each tab computes its data when it is opened, and says it is the open one (for the timer).
        for tab, name in ((overview_tab, "overview"), (slices_tab, "slices"), (compare_tab, "compare"),
                          (datasets_tab, "datasets"), (metrics_tab, "metrics"), (submit_tab, "submit"),
                          (queue_tab, "queue"), (about_tab, "about")):
            tab.select(None, None, open_tab, js=f"() => '{name}'")
        slices_tab.select(views.slices_page, s_inputs, s_outputs, api_name=False)
        compare_tab.select(lambda: gr.update(choices=views.submission_choices()), None, c_subs, api_name=False)
        datasets_tab.select(views.browser.view, d_inputs, d_outputs, api_name=False)
        metrics_tab.select(views.metrics_page, None, [m_track, m_page, m_table], api_name=False)
        queue_tab.select(views.queue, None, [workers, queue_table], api_name=False)
        gr.api(views.queue_api, api_name="queue")
        gr.api(views.overall_api, api_name="overall")
        # The API's endpoints return data (the page's own events return what to show and hide): a button no one
        # sees carries them. `client.predict(handle_file(zip), api_name="/submit")` uploads one file.
        api_only = gr.Button(visible=False)
        api_only.click(views.overview, o_inputs, o_outputs, api_name="overview")
        api_only.click(views.slices, s_inputs, s_outputs, api_name="slices")
        api_only.click(views.compare, [c_subs, c_prompt], c_outputs, api_name="compare")
        api_only.click(views.details, q_id, [q_details, q_file], api_name="details")
        api_only.click(views.submit_file, [upload], verdict, api_name="submit")

        def tick(tab: str, results_seen: str, queue_digest: str, *values):
            """The timer: new results redraw the Overview (and the Slices when open); the open Queue redraws when
            it changed; nothing else is sent."""
            parts = views.poll(tab, results_seen, queue_digest, list(values[:len(o_inputs)]),
                               list(values[len(o_inputs):]))
            skip = gr.skip()
            return (parts.get("version", skip), parts.get("queue_version", skip),
                    *parts.get("overview", [skip] * len(o_outputs)), *parts.get("slices", [skip] * len(s_outputs)),
                    *parts.get("queue", [skip] * 2))

        gr.Timer(POLL_SECONDS).tick(tick, [open_tab, seen, queue_seen, *o_inputs, *s_inputs],
                                    [seen, queue_seen, *o_outputs, *s_outputs, workers, queue_table],
                                    show_progress="hidden", api_name=False)
    return app


def _on_change(control):
    """The event a person's change of ``control`` fires: Enter in a text box, any input elsewhere."""
    return control.submit if isinstance(control, gr.Textbox) else control.input


def default_metric_settings() -> dict[str, object]:
    """The metric settings as this process's environment sets them, by name (app.py: a Space's worker runs
    elsewhere, with its own)."""
    return {s.name: s.resolve() for s in track_registry.settings_declared()}


def prompt_count(store: Store, config: str) -> int | None:
    """How many prompts a config of the default dataset has on this server (None when it is not built)."""
    try:
        return len(store.prompts(cube_1k.HUB_REPO, config))
    except (DatasetUnavailable, OSError, ValueError):
        return None


def about_markdown(store: Store) -> str:
    built = (local_folder(store.datasets, cube_1k.HUB_REPO) / "README.md").exists()
    cube_dir = render.hide_paths(local_folder(store.datasets, cube_1k.HUB_REPO), render.server_places(store.root))
    status = (f"built locally in `{cube_dir}`" if built
              else f"**not built on this server yet**: run `culturelens data build cube-1k --out {cube_dir}`")
    papers = "\n".join(f"- {t.name}: {render.plain(t.citation)}" for t in track_registry.all_tracks().values())
    return f"""
## Datasets

CUBE-1K, the awareness prompts (992 prompts, 8 countries, cuisine / landmarks / art): {status}. Browse every
dataset this server holds in the **Datasets** tab.

Iconic references, the iconicity track's titles and reference images: `culturelens data build iconic-references
--records refs.jsonl --images refs/ --out DIR`, or `--from-sparql` to fetch them from Wikidata and Commons.

## Protocols and rank intervals

A score only compares with scores made the same way. Every result records its **protocol**: the dataset (repo,
config, split) and the revision of its prompt rows, the images per prompt the submission actually holds (the fewest
of any prompt it answered, not the seeds it declared: a prompt's recognition rate depends on how many images
it has), the metric's version (which names every setting that changes its values: thresholds, variant,
calibration file, tagger; for diversity the set size N and how sets are drawn) and each backbone with its
revision; its short id is the first 12 hex digits of the protocol's sha256. A ranking holds one protocol only:
the Overview shows the track's headline protocol (the paper's: e.g. CRT with 10 images per title and the
paper's thresholds, CUBE's diversity with N = 8 in seed batches) and the **Protocol** picker lists the others
with their row counts. A submission made differently (4 seeds, another dataset, diversity at N = 4) is scored
and ranked under its own protocol, marked *off-protocol*. Paper rows carry their paper's protocol: they are
ranked among themselves and listed, not ranked, beside the others. Results scored before protocols were
recorded form the protocol `unrecorded`: they are listed but never ranked, as nothing says they were scored alike.
The charts of the Slices tab show one protocol each, the one the track's Overview ranks.

**How to read a ranked table.** Every number of a ranked row comes from one set of prompts: those every ranked
model answered. A model's **score** is its mean over them (the note gives their number, and so does n), its
**rank** orders those scores, and its **rank range**, e.g. `2-5`, is the middle 95% of its ranks when those
prompts are resampled 1,000 times (the same draw for every model, all models ranked in each draw). So a model that
declined its hardest prompts is compared with the others on the prompts it did answer, never on easier ones than
theirs. A model that answered fewer than {tables.MIN_COVERAGE:.0%} of the prompts the table's models answered
between them (say 3 of 200) is listed below, not ranked, with the reason: ranking it would shrink every other
model's comparison to its few prompts. With fewer than {tables.MIN_SHARED_PROMPTS} shared prompts there is a rank
but no range: a bootstrap over a handful of prompts would give ranges too narrow to trust. Paper rows have no
per-prompt values: they are ranked by their published value, without a range.

A **tie group** collects, reading down the table, models whose rank ranges all contain one same rank: the data
cannot put them in order. A model whose range shares no rank with all of the current group starts the next
group, so ranges of 1-2, 2-3, 3-4 and 4-5 make two groups, not one chain; models of neighbouring groups may still
overlap, and their ranges say by how much. A value that could not be measured because it lies beyond the range
measured is shown as such: a model never "used up" within the seeds W1KP can compare has a reusability of
"> k" (k the most seeds counted) and ranks first on reusability.

The **overall** ranking averages each track's win rate (the share of the other models a model beats on that
track's shared prompts) only over models scored on the same set of tracks (the picker offers the other sets),
with the same kind of range on the mean win rate. Each track's rows there are of one protocol: the suite's part
for that track when it has rows (so a model's suite submission is one row across the tracks), else the track's
headline protocol, else the papers'. Variability (W1KP) is not part of it: more variable images are not better in
themselves (pure noise is the most variable), nor are less variable ones, so it has no direction to win on; its
W1KP is shown in its own column of the row, beside the mean, and its own table orders models by W1KP.

`culturelens compare` tests every pair of models on every metric (Wilcoxon signed-rank) and corrects the
p-values with Holm's method over all those tests at once. Its intervals of a mean difference are Student-t,
or Bonett and Price's interval where the differences are -1, 0 or 1 (both models' values are 0/1 events): a
proportion's interval (Wilson's) is not one of a difference.

## Submitting

1. Generate every image of every part of the suite with one command (`culturelens generate --suite --preset NAME
   --out DIR`): it lays them out as `parts/<part>/images/<prompt_id>/<seed>.png`, each part with its
   `manifest.json` (format: `submissions/README.md`).
2. Check it with `culturelens validate DIR`, then zip it and upload it in the **Submit** tab, name it there as a
   Hub dataset, or run `culturelens submit DIR --store STORE`. Follow it in the **Queue** tab.
3. To try the path first, a submission for one dataset config (CUBE-1K's demo config, 72 prompts) takes minutes.

## Papers

{papers}

CUBE-1K data: CC BY-NC-SA 4.0 (google-deepmind/cube). Reported numbers are quoted from the papers above.
"""

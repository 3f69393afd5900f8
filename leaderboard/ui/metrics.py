"""The Metrics tab: which automatic metric agrees with human raters (CulturalFrames), a method page per track, and
every track's BibTeX."""

from __future__ import annotations

import gradio as gr
import numpy as np
import pandas as pd

from benchmark import tracks as track_registry
from benchmark.words import counted
from leaderboard import render, tables
from leaderboard.ui.arena import AGREEMENT_NONE, AGREEMENT_NOTE, ArenaTab
from leaderboard.ui.site import Site, Tab
from leaderboard.ui.widgets import Parts, linked_table

METRICS_INTRO = (
    "### Which automatic metric agrees with human raters?\nOn CulturalFrames images, per criterion. **scored** "
    "rows (computed here, `culturelens meta-eval`): Spearman ρ of a metric's per-image scores with the mean of "
    "the other raters, each rater left out in turn and the correlations averaged, with a 95% CI from a bootstrap "
    "over prompts; **ceiling** is the same for one rater against the others, so a metric as good as one more rater "
    "reaches it. **Models' order ρ**: the metric's order of the CulturalFrames models (mean score per model) "
    "against the raters' order, what a ranking of models rests on. **paper** rows are the paper's Fig. 7 (Nayak et "
    "al.): a Spearman ρ with the human ratings whose pooling the paper does not state, so they follow the scored "
    "rows and are never ordered among them. The key under the table says what each kind of row measures.")


# A method page's lines on its metrics' agreement with the arena's votes (``MetricsTab.method``).
ARENA_HEAD = ("**Agreement with the arena's votes**: the share of decided battles (left or right) each metric orders "
              "as the voter did (equal values count half), with its 95% interval, over all cultures and per culture "
              "(the Arena tab):")
ARENA_NONE = ("**Agreement with the arena's votes**: not measured yet (no decided vote on images of this track's "
              "scored models).")

# What each row of the metric-agreement table measures (the Metrics tab), by provenance.
AGREEMENT_MEASURES = {
    "scored": "Spearman with the mean of the other raters, one rater left out in turn (like for like with the "
              "ceiling)",
    "reported": "Spearman with the human ratings as the paper pooled them (not stated; Fig. 7)",
}


def agreement_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The metric-agreement table (``Store.meta_evaluation``) for the Metrics tab: a ``measures`` column saying
    what each row's Spearman is (``AGREEMENT_MEASURES``), the scored rows first, each criterion and country's
    sorted by Spearman, then the paper's rows of another definition, by criterion: never ordered together."""
    if frame.empty:
        return frame
    frame = frame.assign(measures=frame["provenance"].map(AGREEMENT_MEASURES).fillna(""),
                         _paper=frame["provenance"] != "scored")
    frame = frame.sort_values(["_paper", "criterion", "country", "spearman"], ascending=[True, True, True, False],
                              kind="stable", na_position="last")
    columns = ["provenance", "measures", *[c for c in frame.columns if c not in ("provenance", "measures", "_paper")]]
    return frame[columns].reset_index(drop=True)


class MetricsTab(Tab):
    """The Metrics tab's views over ``site``; ``build`` makes its components. ``arena``: the Arena tab, whose votes
    each metric's agreement is measured against (none: not shown)."""

    def __init__(self, site: Site, arena: ArenaTab | None = None):
        super().__init__(site)
        self.arena = arena

    def page(self) -> dict:
        """The method-page picker (every track: registered ones have a page even before any result) and the
        metric-human agreement table, provenance in words; by output name."""
        choices = self.site.track_choices()
        first = choices[0][1] if choices else None
        voted = self.arena.agreement() if self.arena is not None else None
        shown = {"track": gr.update(choices=choices, value=first),
                 "method": self.method(first, voted) if first else "",
                 "table": linked_table(agreement_page(agreement_table(self.site.store.meta_evaluation())))}
        if voted is not None:
            shown.update({"arena_note": AGREEMENT_NOTE if not voted.empty else AGREEMENT_NONE,
                          "arena": gr.update(value=voted, visible=not voted.empty)})
        return shown

    def method(self, track: str | None, voted: pd.DataFrame | None = None) -> str:
        """A track's method page (``render.method_page``, the ``/method`` API) and, under it, how far each of its
        metrics agrees with the arena's decided votes (``ArenaTab.agreement``, or ``voted`` when the caller has it:
        its rows of this track's metrics), or that it is not measured yet."""
        page = render.method_page(track)
        if self.arena is None or not isinstance(track, str) or not track_registry.get(track).method:
            return page
        pairs = tables.metrics(self.catalog, track) if track in tables.tracks(self.catalog) else []
        names = {text for text, _ in pairs} | {metric for _, metric in pairs}
        voted = self.arena.agreement() if voted is None else voted
        mine = voted[voted["metric"].isin(names)]
        if mine.empty:
            return page + f"\n\n{ARENA_NONE}"
        lines = [f"- {render.plain(row.metric)}, {render.plain(row.culture)}: {row.agreement} of "
                 f"{counted(int(row.pairs), 'decided pair')}" for row in mine.itertuples()]
        return page + f"\n\n{ARENA_HEAD}\n\n" + "\n".join(lines)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        gr.Markdown(METRICS_INTRO)
        # Widths for ``agreement_page``'s columns: the two texts wrap rather than push the table past a laptop's page;
        # on a phone it scrolls inside its box rather than squeeze a column to a letter a line.
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"],
                             column_widths=["280px", "100px", "80px", "140px", "80px", "60px", "120px", "100px",
                                            "250px"])
        gr.Markdown(" ".join(f"{render.badge(render.PROVENANCE[kind])} rows: {what}."
                             for kind, what in AGREEMENT_MEASURES.items()))
        arena_note = gr.Markdown(AGREEMENT_NONE)
        arena = gr.Dataframe(label="Agreement with the arena's votes", interactive=False, wrap=True,
                             elem_classes=["cl-table"], visible=False)
        track = gr.Dropdown(label="Method page", choices=[], interactive=True, allow_custom_value=True)
        method = gr.Markdown()
        track.input(self.method, track, method, api_name="method")
        with gr.Accordion("Cite (BibTeX)", open=False):
            gr.Code(track_registry.bibtex(), language=None)
        self.parts = Parts(inputs={"track": track}, outputs={"track": track, "method": method, "table": table,
                                                             "arena_note": arena_note, "arena": arena})
        return self.parts


def agreement_page(frame: pd.DataFrame) -> pd.DataFrame:
    """The metric-agreement table (``agreement_table``) as the page shows it, narrow enough to read without
    scrolling sideways: Spearman ρ with its 95% CI in one cell, the models' order ρ (the metric's order of the
    CulturalFrames models against the raters'), the provenance as a badge (the key under the table says what each
    kind measures), the source with the metric's version."""
    if frame.empty:
        return frame
    def interval(rho, low, high) -> str:
        return "" if pd.isna(rho) else f"{rho:.2f}" + (f" [{low:.2f}, {high:.2f}]" if pd.notna(low) else "")

    return pd.DataFrame({
        "Metric": frame["metric"], "Criterion": frame["criterion"], "Country": frame["country"],
        "Spearman ρ (95% CI)": [interval(*values) for values in zip(frame["spearman"], frame["ci_low"],
                                                                     frame["ci_high"])],
        "Ceiling": frame["ceiling"], "n": frame["n"],
        "Models' order ρ": [f"{rho:.2f} ({int(m)} models)" if pd.notna(rho) else "" for rho, m in
                            zip(frame.get("model_spearman", pd.Series(np.nan, index=frame.index)),
                                frame.get("models", pd.Series(0, index=frame.index)).fillna(0))],
        "Provenance": frame["provenance"].map(lambda p: render.badge(render.PROVENANCE.get(p, p))),
        "Source": [", ".join(str(v) for v in (source, version) if v) for source, version in
                   zip(frame["source"].fillna(""), frame["metric_version"].fillna("").map(render.public_version))],
    })


"""The Metrics tab: which automatic metric agrees with human raters (CulturalFrames), a method page per track, and
every track's BibTeX."""

from __future__ import annotations

import gradio as gr

from benchmark import tracks as track_registry
from leaderboard import render, tables
from leaderboard.ui.site import Site
from leaderboard.ui.widgets import Parts

METRICS_INTRO = (
    "### Which automatic metric agrees with human raters?\nOn CulturalFrames images, per criterion. **scored** "
    "rows (computed here, `culturelens meta-eval`): Spearman ρ of a metric's per-image scores with the mean of "
    "the other raters, each rater left out in turn and the correlations averaged, with a 95% CI from a bootstrap "
    "over prompts; **ceiling** is the same for one rater against the others, so a metric as good as one more rater "
    "reaches it. **reported** rows are the paper's Fig. 7 (Nayak et al.): a Spearman ρ with the human ratings whose "
    "pooling the paper does not state, so they follow the scored rows and are never ordered among them. The "
    "**measures** column says which each row is.")


class MetricsTab:
    """The Metrics tab's views over ``site``; ``build`` makes its components."""

    def __init__(self, site: Site):
        self.site = site
        self.parts = Parts()

    def page(self) -> dict:
        """The method-page picker (every track: registered ones have a page even before any result) and the
        metric-human agreement table, provenance in words; by output name."""
        choices = self.site.track_choices()
        first = choices[0][1] if choices else None
        return {"track": gr.update(choices=choices, value=first), "method": render.method_page(first) if first else "",
                "table": tables.agreement_table(self.site.store.meta_evaluation())}

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        gr.Markdown(METRICS_INTRO)
        table = gr.Dataframe(interactive=False, wrap=True, elem_classes=["cl-table"])
        track = gr.Dropdown(label="Method page", choices=[], interactive=True, allow_custom_value=True)
        method = gr.Markdown()
        track.input(render.method_page, track, method, api_name="method")
        with gr.Accordion("Cite (BibTeX)", open=False):
            gr.Code(track_registry.bibtex(), language=None)
        self.parts = Parts(inputs={"track": track}, outputs={"track": track, "method": method, "table": table})
        return self.parts

"""The Compare tab: 1-4 scored submissions and a prompt: their images side by side with per-image scores and reasons,
the prompt's reference images, and the pictures tracks draw from an image's stored detail (CRT's reused patches)."""

from __future__ import annotations

import io
import json

import gradio as gr
import pandas as pd
from PIL import Image

from benchmark import tracks as track_registry
from benchmark.datasets.prompts import DatasetUnavailable
from benchmark.images import open_as_viewed
from benchmark.track import DetailPicture
from leaderboard import render, search, tables
from leaderboard.ui import address
from leaderboard.ui.datasets import DatasetBrowser
from leaderboard.ui.site import Site, Tab
from leaderboard.ui.widgets import Parts, shown_if_filled, text_markdown

MAX_COMPARE = 4
MAX_CANDIDATES = 20  # submissions looked at for one that shares a prompt with the newest, when the tab opens
HINT = f"Pick 1-{MAX_COMPARE} scored submissions, then a prompt: their images side by side."


def track_pictures() -> list[tuple[str, DetailPicture]]:
    """(track, picture kind) for every detail picture a registered track adds to the Compare tab."""
    return [(name, kind) for name, track in track_registry.all_tracks().items() for kind in track.pictures]


class CompareTab(Tab):
    """The Compare tab's views over ``site``; ``build`` makes its components."""

    def __init__(self, site: Site):
        super().__init__(site)
        self.browser = DatasetBrowser(site.store)  # a prompt's text, from the dataset the submission answered

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
        """The ``/compare`` API: the images of the picked submissions for one prompt with their scores, the
        prompt's reference images, the per-image score table, the tracks' detail pictures and a note."""
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
        store = self.site.store
        owned = {s: store.image_bytes(s, rows.loc[rows["submission_id"] == s, "image_path"].dropna().tolist())
                 for s in chosen}
        labels = tables.metric_labels(self.catalog, chosen)  # metrics by name, not by id
        gallery, pictures = [], []
        for (submission, seed), group in rows.groupby(["submission_id", "seed"], sort=True):
            name = group["image_path"].iloc[0]
            if name not in owned[submission]:
                continue
            scores = ", ".join(f"{labels.get(m, m)} {v:.3f}" for m, v in zip(group["metric"], group["value"])
                               if pd.notna(v))
            said = "; ".join(sorted({n for n in group["note"].dropna()}))
            gallery.append(((name, owned[submission][name]), f"{group['model'].iloc[0]} · seed {int(seed)} · "
                            f"{scores}" + (f" · {said}" if said else "")))
        gallery = list(zip(self.site.serve_shown([image for image, _ in gallery]),
                           [caption for _, caption in gallery]))
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

    def default(self) -> tuple[list[str], str | None]:
        """What the tab opens on when nothing is picked: the two most recently scored submissions that share a
        prompt (the newest and the next newest that shares one with it, the same dataset's first) and the first
        prompt they share; the newest alone and its first prompt when none shares one; nothing without any."""
        frame = tables.submissions(self.catalog).sort_values(["scored_at", "submission_id"], ascending=False)
        if frame.empty:
            return [], None
        newest = frame.iloc[0]
        mine = set(self.catalog.prompts_of(newest["submission_id"])["prompt_id"])
        others = frame.iloc[1:MAX_CANDIDATES + 1]
        alike = others["dataset"] == newest["dataset"]
        others = pd.concat([others[alike], others[~alike]])
        for other in others["submission_id"]:
            if shared := mine & set(self.catalog.prompts_of(other)["prompt_id"]):
                return [newest["submission_id"], other], min(shared)
        return [newest["submission_id"]], min(mine) if mine else None

    def compare_link(self, subs: str | None, prompt_id: str | None) -> list:
        """The Compare tab as a link names it (``?tab=compare&subs=ID,ID&prompt=ID``): the submissions picker with
        those of the ids that are scored submissions, the prompt picker with that prompt (the first one when the
        link names none, or one the submissions lack), and ``compare_page``'s outputs. A link that names no
        submission opens on ``default``."""
        if not subs:
            subs, prompt_id = self.default()
            subs = ",".join(subs)
        chosen = self.scored((subs or "").split(","))
        prompts = self.compare_prompts(chosen)
        ids = [value for _, value in prompts.get("choices", [])]
        prompt_id = prompt_id if prompt_id in ids else prompts.get("value")
        return [gr.update(choices=self.submission_choices(), value=chosen),
                gr.update(**{**prompts, "value": prompt_id}), *self.compare_page(chosen, prompt_id)]

    def compare_page(self, chosen: list[str], prompt_id: str | None):
        """``compare`` for the page: an empty gallery or table is hidden, and the note says why it is empty."""
        gallery, references, table, pictures, note = self.compare(chosen, prompt_id)
        if gallery and not references:
            note += "\n\nNo reference images: this prompt's dataset has none (only the iconicity track's do)."
        elif references and not pictures:
            note += "".join(f"\n\nNo {kind.name}: {kind.empty}." for _, kind in track_pictures())
        return *(shown_if_filled(v) for v in (gallery, references, table, pictures)), note

    def page(self, chosen, prompt_id) -> dict:
        """``compare_page`` by output name."""
        gallery, references, table, pictures, note = self.compare_page(chosen, prompt_id)
        return {"gallery": gallery, "references": references, "table": table, "pictures": pictures, "note": note}

    def link(self, state: dict) -> dict:
        """The tab as a link's query names it (``subs``, ``prompt``), by output name."""
        subs, prompt, *_ = self.compare_link(state.get("subs"), state.get("prompt"))
        chosen, prompt_id = subs["value"], prompt["value"]
        return {"subs": subs, "prompt": prompt, **self.page(chosen, prompt_id)}

    def references(self, submission_id: str, prompt_id: str) -> list[Image.Image]:
        try:
            sets = self.site.store.prompt_sets(submission_id)
        except (DatasetUnavailable, OSError, ValueError):
            return []
        prompts = next((p for p in sets if p.has_references and prompt_id in p.table.index), None)
        if prompts is None:
            return []
        source, table = prompts.references({prompt_id})
        return [open_as_viewed(source(i), formats=None) for i in range(len(table))]

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        with gr.Row():
            # min widths: on a phone the two pickers stack instead of squeezing the submissions' names
            subs = gr.Dropdown(label=f"Submissions (up to {MAX_COMPARE})", multiselect=True, max_choices=MAX_COMPARE,
                               choices=[], interactive=True, allow_custom_value=True, scale=3, min_width=320)
            prompt = gr.Dropdown(label="Prompt (type to filter)", choices=[], interactive=True,
                                 allow_custom_value=True, scale=2, min_width=280)
        note = text_markdown(value=HINT)
        gallery = {"columns": 4, "height": "auto", "object_fit": "contain", "fit_columns": False, "visible": False,
                   "elem_classes": ["cl-gallery"]}  # thumbnails whole, captions under them
        references = gr.Gallery(label="Reference images", **gallery)
        images = gr.Gallery(label="Generated images, with per-image scores and reasons", **gallery)
        table = gr.Dataframe(label="Per-image scores", interactive=False, wrap=True, elem_classes=["cl-table"],
                             visible=False)
        pictures = gr.Gallery(label=" · ".join(kind.label for _, kind in track_pictures()),
                              **{**gallery, "columns": 2})
        self.parts = Parts(inputs={"subs": subs, "prompt": prompt},
                           outputs={"subs": subs, "prompt": prompt, "gallery": images, "references": references,
                                    "table": table, "pictures": pictures, "note": note})
        shown = [images, references, table, pictures, note]
        link = address.url_js("compare", ["subs", "prompt"])
        subs.input(self.compare_prompts, subs, prompt, api_name=False).then(
            self.parts.wire(self.page), [subs, prompt], shown, api_name=False).then(
            None, [subs, prompt], None, js=link)
        prompt.input(self.parts.wire(self.page), [subs, prompt], shown, api_name=False).then(
            None, [subs, prompt], None, js=link)
        return self.parts

    def api_outputs(self) -> list:
        """The ``/compare`` API's outputs, in ``compare``'s order."""
        return [self.parts.outputs[name] for name in ("gallery", "references", "table", "pictures", "note")]

    def opened(self, picked) -> dict:
        """The tab opened by a click, by output name: the submissions picker's choices brought up to date, and, when
        nothing is picked yet, the comparison it opens on (``default``)."""
        if picked:
            return {"subs": gr.update(choices=self.submission_choices())}
        return self.link({})

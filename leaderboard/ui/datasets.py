"""The Datasets tab: every dataset folder the store serves, config by config, with filters, semantic search
over prompts, the row's images, and the ``load_dataset`` snippet to get the same rows."""

from __future__ import annotations

import functools
from pathlib import Path

import datasets
import gradio as gr
import pandas as pd
from huggingface_hub import DatasetCard

from benchmark.datasets.prompts import REFERENCE_COLUMN, _fingerprint
from leaderboard import render, search
from leaderboard.ui.widgets import Parts

PREVIEW_ROWS = 200
ANY = "(any)"


@functools.lru_cache(maxsize=16)
def _load(folder: str, config: str, fingerprint: str, cache: str) -> datasets.Dataset:
    loaded = datasets.load_dataset(folder, config, cache_dir=cache)
    return loaded[next(iter(loaded))]


class DatasetBrowser:
    def __init__(self, store):
        self.store = store

    def folders(self) -> dict[str, Path]:
        """Hub repo id -> local folder, for every dataset folder the store serves."""
        return self.store.dataset_folders()

    def public_folder(self, repo: str) -> str:
        """Where the server keeps ``repo``, as a visitor may see it: under ``STORE``, never the server's folder."""
        return render.hide_paths(self.folders()[repo], render.server_places(self.store.root))

    def configs(self, repo: str) -> list[str]:
        folder = self.folders().get(repo)
        if folder is None:
            return []
        card = DatasetCard.load(folder / "README.md")
        return [c["config_name"] for c in (card.data.to_dict().get("configs") or [])]

    def load(self, repo: str, config: str) -> tuple[datasets.Dataset, str]:
        folder = self.folders()[repo]
        fingerprint = _fingerprint(folder)
        cache = str(self.store.datasets_cache(fingerprint))
        return _load(str(folder), config, fingerprint, cache), f"{fingerprint}:{config}"

    def view(self, repo, config, column, value, contains, query):
        """Pickers, the filtered preview, a note and the snippet for the current choices."""
        repos = list(self.folders())
        repo = repo if repo in repos else (repos[0] if repos else None)
        configs = self.configs(repo) if repo else []
        config = config if config in configs else (configs[0] if configs else None)
        if config is None:
            return (gr.update(choices=repos, value=repo), gr.update(choices=configs, value=None), gr.update(),
                    gr.update(), pd.DataFrame(), "No dataset on this server yet.", "")
        rows, fingerprint = self.load(repo, config)
        images = [c for c, f in rows.features.items() if _is_image(f)]
        frame = rows.remove_columns(images).to_pandas() if images else rows.to_pandas()
        for c in images:
            frame[f"{c} (count)"] = [len(v) if isinstance(v, list) else int(v is not None) for v in rows[c]] \
                if c == REFERENCE_COLUMN else 1
        columns = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, str)).all() and
                   frame[c].nunique() <= 300]
        column = column if column in columns else ANY
        values = sorted(frame[column].dropna().unique()) if column != ANY else []
        value = value if value in values else ANY
        shown = frame
        if column != ANY and value != ANY:
            shown = shown[shown[column] == value]
        if contains:
            # pandas 3 keeps missing values missing under astype(str): write them as empty text first
            text = shown.astype(object).fillna("").astype(str).agg(" ".join, axis=1).str.casefold()
            shown = shown[text.str.contains(contains.casefold(), regex=False)]
        note = f"{len(shown)} of {len(frame)} rows of **{render.plain(repo)}** / {render.code(config)}"
        if query and not search.by_meaning():
            note += f". {search.NOT_OFFERED}"
        elif query and "prompt" in shown.columns and len(shown):
            # One index per config (over every row), then the rows the filters kept, closest first.
            ranked = search.search(fingerprint, frame, query, k=len(frame))
            found = ranked[ranked.index.isin(shown.index)].head(20)
            shown = found
            cut = f", which read its first {search.MAX_QUERY_CHARS} characters" \
                if len(query) > search.MAX_QUERY_CHARS else ""
            note += (f"; the {len(found)} closest in meaning to “{render.plain(render.excerpt(query))}” "
                     f"(all-MiniLM-L6-v2{cut})")
        if len(shown) > PREVIEW_ROWS:
            note += f"; the first {PREVIEW_ROWS} shown (download the dataset for all)"
        if images:
            note += ". Click a row to see its images"
        snippet = (f'from datasets import load_dataset\n\nrows = load_dataset("{repo}", "{config}", split="test")'
                   f'\n# the server\'s copy, in its store: load_dataset("{self.public_folder(repo)}", "{config}")')
        return (gr.update(choices=repos, value=repo), gr.update(choices=configs, value=config),
                gr.update(choices=[ANY, *columns], value=column), gr.update(choices=[ANY, *values], value=value),
                shown.head(PREVIEW_ROWS), note, snippet)

    def images_page(self, repo, config, event: gr.SelectData) -> dict:
        """``images`` for the page: the gallery shown only when the clicked row has images."""
        pictures = self.images(repo, config, event)
        return gr.update(value=pictures, visible=bool(pictures))

    def images(self, repo, config, event: gr.SelectData):
        """The images of the selected row (reference images, or a dataset's image column)."""
        if not repo or not config or event is None or not event.row_value or repo not in self.folders() \
                or config not in self.configs(repo):
            return []
        rows, _ = self.load(repo, config)
        if "prompt_id" not in rows.column_names or event.row_value[0] not in rows["prompt_id"]:
            return []
        record = rows[rows["prompt_id"].index(event.row_value[0])]  # decodes this row's images only
        pictures = []
        for c, feature in rows.features.items():
            if _is_image(feature):
                value = record[c]
                pictures += value if isinstance(value, list) else [value]
        return [p for p in pictures if p is not None]

    def prompt_table(self, submission_id: str) -> pd.DataFrame | None:
        """The prompts of the dataset a submission answered (a suite submission's: of every part), indexed by
        prompt_id (None if its dataset is no longer served)."""
        try:
            return pd.concat([prompts.table for prompts in self.store.prompt_sets(submission_id)])
        except Exception:  # the dataset may have been removed since; the images still show
            return None

    def prompt_text(self, submission_id: str, prompt_id: str) -> str | None:
        """The text of a prompt a submission answered (None if its dataset is no longer served)."""
        table = self.prompt_table(submission_id)
        return str(table.loc[prompt_id, "prompt"]) if table is not None and prompt_id in table.index else None

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``); ``view``'s inputs and outputs by name."""
        with gr.Row():
            repo = gr.Dropdown(label="Dataset", choices=[], interactive=True, allow_custom_value=True)
            config = gr.Dropdown(label="Config", choices=[], interactive=True, allow_custom_value=True)
            column = gr.Dropdown(label="Filter column", choices=[ANY], value=ANY, interactive=True, allow_custom_value=True)
            value = gr.Dropdown(label="Value", choices=[ANY], value=ANY, interactive=True, allow_custom_value=True)
        with gr.Row():
            contains = gr.Textbox(label="Contains (any column)")
            query = gr.Textbox(label="Semantic search over prompts", placeholder="street food at night",
                               visible=search.by_meaning())
        if not search.by_meaning():
            gr.Markdown(search.NOT_OFFERED)
        note = gr.Markdown(latex_delimiters=[])  # notes quote the visitor's text: no math
        table = gr.Dataframe(interactive=False, wrap=True, max_height=500)
        gallery = gr.Gallery(label="Images of the selected row", columns=4, height="auto", visible=False)
        snippet = gr.Code(language="python", label="Load it")
        parts = Parts(inputs={"repo": repo, "config": config, "column": column, "value": value, "contains": contains,
                              "query": query},
                      outputs={"repo": repo, "config": config, "column": column, "value": value, "table": table,
                               "note": note, "snippet": snippet})
        inputs, outputs = list(parts.inputs.values()), list(parts.outputs.values())
        for control in inputs:
            getattr(control, "submit" if isinstance(control, gr.Textbox) else "input")(
                self.view, inputs, outputs, api_name="datasets" if control is query else False)
        table.select(self.images_page, [repo, config], gallery, api_name=False)
        return parts


def _is_image(feature) -> bool:
    return isinstance(feature, datasets.Image) or (
        isinstance(feature, (datasets.Sequence, datasets.List)) and isinstance(feature.feature, datasets.Image))

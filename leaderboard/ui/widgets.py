"""What every tab builds with: its components by name (``Parts``), Markdown that shows user text safely, tables whose
links read as links, boxes shown only when they hold something."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr
import numpy as np
import pandas as pd

from benchmark import ranking
from benchmark import tracks as track_registry
from leaderboard import display, render, tables


@dataclass
class Parts:
    """A tab's components by name: ``inputs``, what its view functions read, in their argument order; ``outputs``,
    what its page function may update. A page function answers ``{name: value or update}`` for the outputs it
    changes (``updates`` turns the names into the components Gradio expects), so no output is wired by position."""

    inputs: dict[str, gr.components.Component] = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)

    def updates(self, named: dict) -> dict:
        """``{name: update}`` as Gradio takes a dict answer: ``{component: update}``."""
        return {self.outputs[name]: value for name, value in named.items()}

    def wire(self, page: Callable[..., dict]) -> Callable[..., dict]:
        """``page`` (inputs -> named updates) as an event function over these components."""
        return lambda *values: self.updates(page(*values))


def text_markdown(**options) -> gr.Markdown:
    """A Markdown component for text that carries user text (a model name, a prompt, a reason): math
    rendering off, so ``$$...$$`` in a name stays text (``render.plain`` takes care of Markdown itself)."""
    return gr.Markdown(latex_delimiters=[], **options)


def pick(value, choices, default=None):
    """``value`` if it is one of ``choices``, else ``default`` if it is, else the first choice (None without any)."""
    return value if value in choices else (default if default in choices else (choices[0] if choices else None))


def on_change(control):
    """The event a person's change of ``control`` fires: Enter in a text box, any input elsewhere."""
    return control.submit if isinstance(control, gr.Textbox) else control.input


def linked_table(frame: pd.DataFrame) -> dict:
    """A ranked table for the page: its Model and Source columns as Markdown (links that read as links), the
    others by ``display.DATATYPES``; its Model column held in view (``PINNED``: the class ``cl-pin-N`` for the N-th
    column, which the app's CSS keeps at the left edge), so that on a phone, where the overall's track columns do
    not fit, the table scrolls sideways under the models it is about. The API returns the frame itself."""
    model = list(frame.columns).index("Model") + 1 if "Model" in frame.columns else 0
    pinned = [f"cl-pin-{model}"] if model in PINNED else []
    return gr.update(value=frame, datatype=display.datatypes(frame.columns, frame),
                     elem_classes=["cl-table", *pinned])


PINNED = (2, 3)  # where a ranked table's Model column may stand (after Rank; after Slice and Rank): leaderboard.app


def shown_if_filled(value, **options) -> dict:
    """``value`` for a chart, gallery or file box that is shown only when it holds something (rows, images, a
    file): an empty box tells nothing, and the note beside it says why it is empty."""
    filled = not value.empty if isinstance(value, pd.DataFrame) else bool(value)
    return gr.update(value=value, visible=filled, **options)


def _rank_cells(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each row's rank with its 95% range in one cell ("2 (1–4)", "1" when the range is that rank), and why a row
    is listed apart ('' for a ranked row), from ``display.display``'s Rank and Rank range columns."""
    ranks, reasons = [], []
    ranges = frame["Rank range (95%)"] if "Rank range (95%)" in frame.columns else pd.Series("", index=frame.index)
    for rank, span in zip(frame["Rank"], ranges.fillna("")):
        apart = str(span).startswith("not ranked: ")
        reasons.append(str(span).removeprefix("not ranked: ") if apart else "")
        text = "–" if pd.isna(rank) or apart else str(rank)
        ranks.append(f"{text} ({span})" if span and not apart and str(span) != text else text)
    return ranks, reasons


def _model_cells(frame: pd.DataFrame, reasons: list[str]) -> list[str]:
    """Each row's model, with why it is listed apart after it ("SDXL · not ranked: 40% of the prompts"); a model
    alone on its tracks says "not ranked yet" only, and one on too few prompts "too few prompts to rank", as the
    line and note above the table say the rest (``tables.NOT_YET``; the ranking's note) and a sentence in the cell
    would push the track columns off a laptop's width."""
    return [f"{model} · not ranked yet" if why in tables.NOT_YET else
            f"{model} · {ranking.TOO_FEW}" if ranking.TOO_FEW in why else
            f"{model} · not ranked: {render.plain(why)}" if why else model
            for model, why in zip(frame["Model"], reasons)]


def _with_interval(values: pd.Series, intervals: pd.Series | None) -> list:
    """Scores with their 95% interval in one cell ("0.553 [0.501, 0.612]"); a score alone without one."""
    def number(value):
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return ""  # no value, never "nan"
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    if intervals is None:
        return [number(v) for v in values]
    return [f"{number(v)} {i}".strip() if i else number(v) for v, i in zip(values, intervals.fillna(""))]


def compact_table(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """A ranked table (``display.display``'s columns, those chosen) as the page shows it, narrow enough to read
    without scrolling sideways: the rank with its range in one cell, the score with its 95% CI in one, the
    provenance as a badge, why a row is listed apart after its model; every other column chosen as it is, after
    those."""
    if frame.empty or "Rank" not in frame.columns:
        return frame
    ranks, reasons = _rank_cells(frame)
    shown = pd.DataFrame(index=frame.index)
    if "Slice" in frame.columns:
        shown["Slice"] = frame["Slice"]
    shown["Rank"] = ranks
    shown["Model"] = _model_cells(frame, reasons)
    if "Score" in frame.columns:
        shown["Score"] = _with_interval(frame["Score"], frame["95% CI"] if "95% CI" in frame.columns else None)
    if "Provenance" in frame.columns:
        shown["Provenance"] = frame["Provenance"].map(render.badge)
    merged = {"Slice", "Rank", "Rank range (95%)", "Model", "Score", "95% CI", "Provenance"}
    for column in frame.columns:
        if column not in merged and (not columns or column in columns):
            shown[column] = frame[column]
    return shown.reset_index(drop=True)


def compact_win_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """The overall ranking (``display.display_win_rates``) as the page shows it: the rank with its range, the model,
    the mean win rate with its 95% interval, the provenance as a badge, then each track's column."""
    if frame.empty:
        return frame
    ranks, reasons = _rank_cells(frame)
    shown = pd.DataFrame({
        "Rank": ranks,
        "Model": _model_cells(frame, reasons),
        "Overall win rate": [cell or "–" for cell in _with_interval(frame["Overall win rate"],  # – : alone, none
                                                                       frame["95% interval"])],
        "Provenance": frame["Provenance"].map(render.badge),
    })
    fixed = {"Rank", "Rank range (95%)", "Model", "Provenance", "Overall win rate", "95% interval", "Tracks"}
    titles = {t.title: name for name, t in track_registry.all_tracks().items()}
    for column in frame.columns:
        title = column.removesuffix(display.WIN_RATE)
        if column in fixed or (column.endswith(display.OWN_SCORE) and column.removesuffix(display.OWN_SCORE)
                               in titles):
            continue
        if title in titles and column != title:
            score = frame.get(title + display.OWN_SCORE, pd.Series(np.nan, index=frame.index))
            shown[column] = [_track_cell(rate, own, titles[title]) for rate, own in zip(frame[column], score)]
        else:
            shown[column] = frame[column]
    return shown


def _track_cell(rate, own, track: str) -> str:
    """A track's cell of the overall on the page, linked to the track's table (its own scores, ranking, intervals
    and every metric, one click away): the win rate, or for a model without one, – and its own score."""
    address = f"?tab=overview&track={track}"
    if rate is not None and not pd.isna(rate):
        return render.link(f"{rate:.2f}", address)
    return "–" if own is None or pd.isna(own) else f"– · {render.link(f'score {own:.3f}', address)}"

"""What every tab builds with: its components by name (``Parts``), Markdown that shows user text safely, tables whose
links read as links, boxes shown only when they hold something."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr
import pandas as pd

from leaderboard import tables


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
    others by ``tables.DATATYPES``. The API returns the frame itself."""
    return gr.update(value=frame, datatype=tables.datatypes(frame.columns, frame))


def shown_if_filled(value, **options) -> dict:
    """``value`` for a chart, gallery or file box that is shown only when it holds something (rows, images, a
    file): an empty box tells nothing, and the note beside it says why it is empty."""
    filled = not value.empty if isinstance(value, pd.DataFrame) else bool(value)
    return gr.update(value=value, visible=filled, **options)

"""How much of a visitor's text the app reads: one rule for every box, kept on the server.

A text box's limit in the browser is no limit: the API takes any value (a 20 MB query), and so does any box a page
hides or draws as a picker. So the app is a ``Blocks`` of this module, which bounds every value an event receives,
whatever the component, before Gradio hands it to the component and keeps it in the visitor's session: a text is
cut to ``MAX_TEXT_CHARS`` characters and a list (a multiselect's picks) to ``MAX_PICKS`` values.

The bound leaves room for the longest text a box has a use for (a pasted list of model names, whose note counts the
terms it ignored) and keeps what the app does with a text cheap: a split, a lookup or a comparison runs at C speed.
What costs per character in Python or in a model reads only a prefix: the searches read ``search.MAX_QUERY_CHARS``
characters, and a note quotes ``render.QUOTE_CHARS`` of what was typed (``render.excerpt``).

The API takes any JSON for any value, too: a number or a list where a box takes text, a text where a file is
uploaded. Each value is checked against the type the component's own API description gives (``api_info``) before
the component or a handler sees it, and a wrong one is refused with a sentence naming the box and what it takes.
None is "no value", which every component takes (a list-valued one as the empty list). These refusals, like a
picker's, are the visitor's mistakes: no traceback is logged for them.
"""

from __future__ import annotations

import gradio as gr
from gradio.utils import get_function_params

from leaderboard import render

MAX_TEXT_CHARS = 1_000_000  # characters of a value's text: a list of 40,000 model names is about half of it
MAX_PICKS = 100  # values of a list (Compare takes 4 submissions)


# What a value of each JSON Schema type is, in Python, and how a refusal names it.
TYPES = {"string": ((str,), "text"), "number": ((int, float), "a number"), "integer": ((int,), "a whole number"),
         "boolean": ((bool,), "true or false"), "array": ((list,), "a list"), "object": ((dict,), "an object")}


def _kind(value) -> str:
    for python, name in TYPES.values():
        if type(value) in python:
            return name
    return type(value).__name__


def checked(component, value, name: str | None = None):
    """``value`` as ``component`` takes it (None, for a list-valued component: the empty list); a gr.Error saying
    what the component takes when it is of another type, naming it ``name`` (the API's parameter name), else by
    its label."""
    info = component.api_info() if hasattr(component, "api_info") else {}
    expected = info.get("type") if isinstance(info, dict) else None
    if not isinstance(expected, str) or expected not in TYPES:  # no single type (a state, any JSON: a schema)
        return value
    if value is None:
        return [] if expected == "array" else None
    python, takes = TYPES[expected]
    if info.get("title") == "FileData":
        takes = "an uploaded file (gradio_client's handle_file)"
    if type(value) in python and not (expected in ("number", "integer") and isinstance(value, bool)):
        return value
    label = name or getattr(component, "label", None) or type(component).__name__
    raise gr.Error(f"{render.excerpt(str(label))!r} takes {takes}, not {_kind(value)}: send the value the API's "
                   f"description (view_api) gives for it.", print_exception=False)


def bounded(value):
    """A value as an event reads it: a text cut to ``MAX_TEXT_CHARS`` characters, a list to ``MAX_PICKS`` bounded
    values; anything else (None, a number, an uploaded file's record) as it is."""
    if isinstance(value, str):
        return value[:MAX_TEXT_CHARS]
    if isinstance(value, list):
        return [bounded(item) for item in value[:MAX_PICKS]]
    return value


class Blocks(gr.Blocks):
    """``gr.Blocks`` whose events receive every input ``bounded`` and ``checked``, whose components' refusals quote
    at most an excerpt of it, and whose refusals (a gr.Error, the app's answer to a visitor's input) log no
    traceback: a traceback in the log is a bug's."""

    async def process_api(self, *args, **kwargs):
        try:
            return await super().process_api(*args, **kwargs)
        except gr.Error as error:
            error.print_exception = False
            raise

    async def preprocess_data(self, block_fn, inputs, *args, **kwargs):
        # Gradio's one step from a request's values to the components' (``Blocks.process_api`` calls it for every
        # event, of the page and of the API alike). tests/test_trust_boundaries.py fails if a Gradio release
        # stops calling it.
        try:
            names = [param[0] for param in get_function_params(block_fn.fn)] if block_fn.fn else []
            values = [checked(component, bounded(value), names[n] if n < len(names) else None)
                      for n, (component, value) in enumerate(zip(block_fn.inputs, inputs))] \
                + [bounded(value) for value in inputs[len(block_fn.inputs):]]
            return await super().preprocess_data(block_fn, values, *args, **kwargs)
        except gr.Error as error:  # a picker's value that is not a choice: Gradio's message repeats it whole
            error.message = render.excerpt(error.message)
            raise

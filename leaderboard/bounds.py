"""How much of a visitor's text the app reads: one rule for every box, kept on the server.

A text box's limit in the browser is no limit: the API takes any value (a 20 MB query), and so does any box a page
hides or draws as a picker. So the app is a ``Blocks`` of this module, which bounds every value an event receives,
whatever the component, before Gradio hands it to the component and keeps it in the visitor's session: a text is
cut to ``MAX_TEXT_CHARS`` characters and a list (a multiselect's picks) to ``MAX_PICKS`` values.

The bound leaves room for the longest text a box has a use for (a pasted list of model names, whose note counts the
terms it ignored) and keeps what the app does with a text cheap: a split, a lookup or a comparison runs at C speed.
What costs per character in Python or in a model reads only a prefix: the searches read ``search.MAX_QUERY_CHARS``
characters, and a note quotes ``render.QUOTE_CHARS`` of what was typed (``render.excerpt``).
"""

from __future__ import annotations

import gradio as gr

from leaderboard import render

MAX_TEXT_CHARS = 1_000_000  # characters of a value's text: a list of 40,000 model names is about half of it
MAX_PICKS = 100  # values of a list (Compare takes 4 submissions)


def bounded(value):
    """A value as an event reads it: a text cut to ``MAX_TEXT_CHARS`` characters, a list to ``MAX_PICKS`` bounded
    values; anything else (None, a number, an uploaded file's record) as it is."""
    if isinstance(value, str):
        return value[:MAX_TEXT_CHARS]
    if isinstance(value, list):
        return [bounded(item) for item in value[:MAX_PICKS]]
    return value


class Blocks(gr.Blocks):
    """``gr.Blocks`` whose events receive every input ``bounded``, and whose components' refusals quote at most an
    excerpt of it."""

    async def preprocess_data(self, block_fn, inputs, *args, **kwargs):
        # Gradio's one step from a request's values to the components' (``Blocks.process_api`` calls it for every
        # event, of the page and of the API alike). tests/test_trust_boundaries.py fails if a Gradio release
        # stops calling it.
        try:
            return await super().preprocess_data(block_fn, [bounded(value) for value in inputs], *args, **kwargs)
        except gr.Error as error:  # a picker's value that is not a choice: Gradio's message repeats it whole
            error.message = render.excerpt(error.message)
            raise

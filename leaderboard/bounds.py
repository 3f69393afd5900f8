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
uploaded, lists of lists where a picker takes a list of texts. Each value is checked, to its depth, against the JSON
Schema its component's own API description gives (``api_info``: a type, a list's items, an object's fields, one of
several) before the component or a handler sees it, and a wrong one is refused with a sentence naming the box, what
it takes and where the value differs. None is "no value", which every component takes (a list-valued one as the
empty list). A file reference (Gradio's ``FileData``) must name a file uploaded to this server (in its upload
folder): one naming any other path or an address is refused before Gradio would copy or fetch it. An event that
reads its event's data (a table's select) must carry that data, as a page sends it. These refusals, like a picker's,
are the visitor's mistakes: no traceback is logged for them.
"""

from __future__ import annotations

import math

import gradio as gr
from gradio.utils import abspath, get_function_params, get_type_hints, get_upload_folder, is_in_or_equal
from gradio_client.utils import is_file_obj_with_meta, traverse

from leaderboard import render

MAX_TEXT_CHARS = 1_000_000  # characters of a value's text: a list of 40,000 model names is about half of it
MAX_PICKS = 100  # values of a list (Compare takes 4 submissions)


# What a value of each JSON Schema type is, in Python, and how a refusal names one value and several.
TYPES = {"string": ((str,), "text", "texts"), "number": ((int, float), "a number", "numbers"),
         "integer": ((int,), "a whole number", "whole numbers"), "boolean": ((bool,), "true or false", "true or false"),
         "array": ((list,), "a list", "lists"), "object": ((dict,), "an object", "objects"),
         "null": ((type(None),), "no value", "no values")}
FILE = ("an uploaded file (gradio_client's handle_file)", "uploaded files")  # a schema titled FileData
MAX_DEPTH = 20  # lists and objects one inside another that a value may hold (the app's deepest: a file's metadata, 2)


def _kind(value) -> str:
    for python, name, _ in TYPES.values():
        if type(value) in python:
            return name
    return type(value).__name__


def _takes(schema: dict, defs: dict, plural: bool = False) -> str:
    """What values of ``schema`` are, in words: "text", "a list of texts", "no value or text", ..."""
    schema = _resolved(schema, defs)
    if schema.get("title") == "FileData":
        return FILE[plural]
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(_takes(s, defs, plural) for s in schema.get("anyOf", schema.get("oneOf")))
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in TYPES:
        return "values" if plural else "a value"
    words = TYPES[kind][2 if plural else 1]
    if kind == "array" and isinstance(schema.get("items"), dict):
        words += f" of {_takes(schema['items'], defs, plural=True)}"
    return words


def _resolved(schema: dict, defs: dict) -> dict:
    """``schema``, or the definition its ``$ref`` names (``#/$defs/<name>``)."""
    ref = schema.get("$ref")
    return defs.get(ref.rsplit("/", 1)[-1], {}) if isinstance(ref, str) else schema


def _where(path: list) -> str:
    """A place inside a value, as Python indexes it: "its value at [0]", "its value at [0]['path']"."""
    return "its value at " + "".join(f"[{step!r}]" for step in path)


def mismatch(schema: dict, value, defs: dict | None = None, path: list | None = None) -> tuple[list, str] | None:
    """Where ``value`` first differs from the JSON Schema ``schema`` (the part of JSON Schema a component's
    ``api_info`` uses: type, items, properties and required, anyOf or oneOf, const, $ref) and what it is there; None
    when it conforms. A schema of no type (``{}``, a state's "any valid json") takes any value; an ``enum`` is left
    to the component, whose choices change while the app runs."""
    defs = schema.get("$defs", defs or {})
    schema, path = _resolved(schema, defs), path or []
    alternatives = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(alternatives, list):
        if any(mismatch(s, value, defs, path) is None for s in alternatives):
            return None
        return path, _kind(value)
    if "const" in schema and value != schema["const"]:
        return path, repr(render.excerpt(value)) if isinstance(value, str) else _kind(value)
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in TYPES:
        return None
    python = TYPES[kind][0]
    if type(value) not in python:  # exact types: true is no number
        return path, _kind(value)
    if isinstance(value, float) and not math.isfinite(value):
        return path, "NaN or an infinity"
    if kind == "array" and isinstance(schema.get("items"), dict):
        for n, item in enumerate(value):
            if found := mismatch(schema["items"], item, defs, [*path, n]):
                return found
    if kind == "object":
        for name in schema.get("required", []):
            if name not in value:
                return [*path, name], "missing"
        for name, field in schema.get("properties", {}).items():
            if name in value and (found := mismatch(field, value[name], defs, [*path, name])):
                return found
    return None


def _api_schema(component) -> dict | None:
    info = component.api_info() if hasattr(component, "api_info") else None
    return info if isinstance(info, dict) else None


def checked(component, value, name: str | None = None):
    """``value`` as ``component`` takes it (None, for a list-valued component: the empty list); a gr.Error saying
    what the component takes, and where the value differs, when it does not conform to the component's API
    description (``mismatch``), naming it ``name`` (the API's parameter name), else by its label."""
    schema = _api_schema(component)
    if schema is None:
        return value
    if value is None:
        return [] if schema.get("type") == "array" else None
    found = mismatch(schema, value)
    if found is None:
        return value
    path, what = found
    label = repr(render.excerpt(str(name or getattr(component, "label", None) or type(component).__name__)))
    takes = _takes(schema, schema.get("$defs", {}))
    problem = f"but {_where(path)} is {what}" if path else f"not {what}"
    raise gr.Error(f"{label} takes {takes}, {problem}: send the value the API's description (view_api) gives for "
                   "it.", print_exception=False)


def uploaded_only(value, name: str) -> None:
    """A gr.Error unless every file reference in ``value`` (Gradio's ``FileData``, at any depth) names a file in this
    server's upload folder: Gradio would otherwise copy a file of the server's, or fetch an address, for it."""
    folder = get_upload_folder()

    def check(reference: dict) -> dict:
        if not is_in_or_equal(abspath(reference["path"]), folder):
            raise gr.Error(f"{name!r} names a file this server was not sent ({render.excerpt(reference['path'])!r}): "
                           "upload the file first (gradio_client's handle_file does) and send what the upload "
                           "answered.", print_exception=False)
        return reference

    traverse(value, check, is_file_obj_with_meta)


# What each kind of event's data holds, as a page sends it (Gradio's ``SelectData``: a table's or a gallery's select).
EVENT_DATA = {gr.SelectData: {"type": "object", "required": ["index", "value"], "properties": {
    "index": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}]},
    "row_value": {"anyOf": [{"type": "array"}, {"type": "null"}]},
    "col_value": {"anyOf": [{"type": "array"}, {"type": "null"}]},
    "selected": {"type": "boolean"}}}}


def event_data_checked(fn, event_data):
    """The data of the event that calls ``fn``, bounded (``bounded``), when ``fn`` reads it (a parameter typed as one
    of ``EVENT_DATA``'s kinds); a gr.Error when it is absent or not what a page sends."""
    kinds = [hint for hint in get_type_hints(fn).values() if hint in EVENT_DATA] if fn else []
    if not kinds or event_data is None:
        return event_data
    data = bounded(event_data._data)
    if data is None or (found := mismatch(EVENT_DATA[kinds[0]], data)):
        where = f": {_where(found[0])} is {found[1]}" if data is not None and found[0] else ""
        raise gr.Error(f"this event reads what was selected (index, value, row_value), which its event data does not "
                       f"hold{where}: send the event data a page sends.", print_exception=False)
    event_data._data = data
    uploaded_only(data, "event data")
    return event_data


def bounded(value, depth: int = 0):
    """A value as an event reads it: a text cut to ``MAX_TEXT_CHARS`` characters, a list to ``MAX_PICKS`` bounded
    values, an object's values bounded; anything else (None, a number) as it is. A gr.Error for a value nested deeper
    than ``MAX_DEPTH`` lists or objects (each step of the app's checks, and Gradio's, would recurse into it)."""
    if depth > MAX_DEPTH:
        raise gr.Error(f"a value holds lists or objects nested deeper than {MAX_DEPTH}: send the value the API's "
                       "description (view_api) gives for it.", print_exception=False)
    if isinstance(value, str):
        return value[:MAX_TEXT_CHARS]
    if isinstance(value, list):
        return [bounded(item, depth + 1) for item in value[:MAX_PICKS]]
    if isinstance(value, dict):
        return {key: bounded(item, depth + 1) for key, item in value.items()}
    return value


class Blocks(gr.Blocks):
    """``gr.Blocks`` whose events receive every input ``bounded`` and ``checked`` (file references ``uploaded_only``),
    and their event's data checked (``event_data_checked``), whose components' refusals quote at most an excerpt of
    it, and whose refusals (a gr.Error, the app's answer to a visitor's input) log no traceback: a traceback in the
    log is a bug's."""

    async def process_api(self, block_fn, inputs, state=None, request=None, iterator=None, session_hash=None,
                          event_id=None, event_data=None, *args, **kwargs):
        try:
            fn = self.fns[block_fn] if isinstance(block_fn, int) else block_fn
            event_data = event_data_checked(fn.fn, event_data)
            return await super().process_api(block_fn, inputs, state, request, iterator, session_hash, event_id,
                                             event_data, *args, **kwargs)
        except gr.Error as error:
            error.print_exception = False
            raise

    async def preprocess_data(self, block_fn, inputs, *args, **kwargs):
        # Gradio's one step from a request's values to the components' (``Blocks.process_api`` calls it for every
        # event, of the page and of the API alike). tests/test_trust_boundaries.py fails if a Gradio release
        # stops calling it.
        try:
            names = [param[0] for param in get_function_params(block_fn.fn)] if block_fn.fn else []
            values = []
            for n, (component, value) in enumerate(zip(block_fn.inputs, inputs)):
                name = names[n] if n < len(names) else None
                values.append(checked(component, bounded(value), name))
                uploaded_only(values[-1], name or getattr(component, "label", None) or type(component).__name__)
            values += [bounded(value) for value in inputs[len(block_fn.inputs):]]
            return await super().preprocess_data(block_fn, values, *args, **kwargs)
        except gr.Error as error:  # a picker's value that is not a choice: Gradio's message repeats it whole
            error.message = render.excerpt(error.message)
            raise

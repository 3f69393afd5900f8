"""Issue 48, finding 8: every value an event takes is checked to its depth, and answered in a sentence.

A real `culturelens serve --no-worker` on a store serving the tiny CUBE dataset. Its events are called as a browser
calls them (``culturelens.testing.live_app.Page``: the page's own events and the API's endpoints alike, by their
``fn_index``), because gradio_client uploads a local file for any value that looks like a file reference and refuses
the page's own events: what an attacker sends is sent here as it is. The server's log must hold no traceback.
"""

from __future__ import annotations

import html
import tempfile
from pathlib import Path

import pytest

from culturelens.testing.live_app import Page
from culturelens.testing.public_sources import PublicSources
from leaderboard.store import Store
from tests.helpers import serving, serving_tiny_cube

SENTENCE_END = ": send the value the API's description (view_api) gives for it."
PASSWD = {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}  # a file reference to a server file
NESTED = [[["a"]]]  # lists of lists where a box takes text, or a picker a list of texts


def _events(page: Page) -> list[int]:
    """Every event of the page that runs on the server, one per distinct list of inputs (the Overview's controls
    each fire the same view with the same inputs), and every API endpoint."""
    seen, events = set(), []
    for n, dependency in enumerate(page.config["dependencies"]):
        inputs = tuple(dependency["inputs"])
        if dependency.get("backend_fn") and (inputs not in seen or dependency.get("api_visibility") == "public"):
            seen.add(inputs)
            events.append(n)
    return events


def _refused_in_a_sentence(answer, what: str) -> str:
    """The refusal's text, after checking it is the app's sentence (Gradio answers a bug's error with none)."""
    assert not answer.success, f"{what}: accepted"
    assert isinstance(answer.error, str) and answer.error.endswith("."), f"{what}: {answer.error!r}"
    return answer.error


@pytest.mark.slow  # a real serve, ~200 events
def test_edge_types_every_event_answers_nested_wrong_values_in_a_sentence_and_logs_no_traceback(tmp_path,
                                                                                                  tiny_upstream):
    """Every event of the page and every API endpoint is sent, in each of its inputs in turn, lists of lists and a
    file reference naming /etc/passwd, the other inputs as the page starts with them. Each answer is the event's
    result (a state, which takes any JSON, ignores what is sent) or a refusal in a sentence; the compare picker's
    [[["a"]]] names the box, what it takes and where the value differs. Before: 7 tracebacks in the log
    (``TypeError: unhashable type: 'list'``, ``InvalidPathError``)."""
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    log = tmp_path / "serve.log"
    refusals = {}
    with serving(store.root, log, "--no-worker") as url:
        page = Page(url)
        events = _events(page)
        assert len(events) >= 15 and {"compare", "overall", "submit", "details", "datasets"} <= \
            {page.config["dependencies"][n].get("api_name") for n in events}
        for n in events:
            initial = page.initial(n)
            for i in range(len(initial)):
                for value in (NESTED, PASSWD):
                    data = [*initial[:i], value, *initial[i + 1:]]
                    answer = page.call(n, data, {"index": 0, "value": "x", "row_value": ["a", "b"]})
                    if not answer.success:
                        what = f"{page.config['dependencies'][n].get('api_name')} input {i}: {value}"
                        refusals[(page.config["dependencies"][n].get("api_name"), i, str(value))] = \
                            _refused_in_a_sentence(answer, what)
    assert refusals[("compare", 0, str(NESTED))] == ("'chosen' takes a list of texts, but its value at [0] is a list"
                                                     + SENTENCE_END)
    assert refusals[("overall", 0, str(PASSWD))] == "'track_set' takes no value or text, not an object" + SENTENCE_END
    assert refusals[("submit", 0, str(PASSWD))].startswith(
        "'file' names a file this server was not sent ('/etc/passwd'): upload the file first")
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_edge_types_a_file_reference_to_a_server_file_or_an_address_is_refused_and_nothing_is_read(tmp_path):
    """/submit and /overall are sent file references naming /etc/passwd, an address of a server that counts its
    requests, and a path that climbs out of the upload folder: each is refused in a sentence naming the parameter,
    the address is never requested, and no upload folder holds a copy of the file. A file uploaded first
    (gradio_client's handle_file) is taken: its answer is the validator's verdict on it."""
    from gradio_client import Client, handle_file

    store = Store(tmp_path / "store")
    log = tmp_path / "serve.log"
    passwd = Path("/etc/passwd").read_bytes()
    (tmp_path / "upload.zip").write_bytes(b"not a zip")
    with PublicSources() as sources, serving(store.root, log, "--no-worker") as url:
        page = Page(url)
        by_name = {d.get("api_name"): n for n, d in enumerate(page.config["dependencies"])}
        climbing = {**PASSWD, "path": "/tmp/gradio/../../etc/passwd"}
        answers = {(name, reference["path"]): page.call(by_name[name], [reference])
                   for name in ("submit", "overall")
                   for reference in (PASSWD, {**PASSWD, "path": sources.url + "x.zip"}, climbing)}
        copies = [p for folder in ("culturelens-uploads-*", "gradio") for p in Path(tempfile.gettempdir()).glob(
            f"{folder}/**/*") if p.is_file() and p.stat().st_size == len(passwd) and p.read_bytes() == passwd]
        uploaded = Client(url, verbose=False).predict(handle_file(tmp_path / "upload.zip"), api_name="/submit")
        requested = list(sources.requests)
    assert copies == []
    for (name, path), answer in answers.items():
        error = _refused_in_a_sentence(answer, f"{name} {path}")
        expected = ("'file' names a file this server was not sent" if name == "submit" else
                    "'track_set' takes no value or text, not an object")
        assert error.startswith(expected), error
    assert requested == []
    assert "upload.zip: not a readable zip archive (BadZipFile" in html.unescape(uploaded)
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_edge_types_a_select_event_without_its_data_is_refused_in_a_sentence(tmp_path, tiny_upstream):
    """The tables' select events (the Queue's, which fills the ID box; the Datasets browser's, which shows a row's
    images) sent with no event data, with data of the wrong shapes, and with a row that is a list of lists: each is
    refused in a sentence, or answered with nothing picked; the data a page sends picks the row's ID."""
    store = serving_tiny_cube(Store(tmp_path / "store"), tiny_upstream)
    log = tmp_path / "serve.log"
    with serving(store.root, log, "--no-worker") as url:
        page = Page(url)
        queue_table = page.event(page.component("dataframe", "Submitted (UTC), ID, Model, Owner, State, Details"),
                                 "select")
        selects = [n for n, d in enumerate(page.config["dependencies"]) if d.get("backend_fn") and any(
            trigger == "select" and page.components[c]["type"] == "dataframe" for c, trigger in d["targets"])]
        assert queue_table in selects and len(selects) == 2
        refused = {(n, str(data)): page.call(n, page.initial(n), data).error
                   for n in selects for data in (None, {}, {"index": "first", "value": 1},
                                                 {"index": 0, "value": "x", "row_value": "sub-1"})}
        nested = page.call(queue_table, [], {"index": [0, 1], "value": "x", "row_value": [["a"], ["sub-1"]]})
        picked = page.call(queue_table, [], {"index": [0, 1], "value": "sub-1",
                                             "row_value": ["2026-01-01 00:00", "sub-1", "Model", "ada", "x", ""]})
    for (n, data), error in refused.items():
        assert error and error.startswith("this event reads what was selected (index, value, row_value), which its "
                                          "event data does not hold") and error.endswith(
            ": send the event data a page sends."), (n, data, error)
    assert refused[(queue_table, "{'index': 'first', 'value': 1}")].endswith(
        "does not hold: its value at ['index'] is text: send the event data a page sends.")
    assert nested.success and nested.output["data"] == [""]
    assert picked.success and picked.output["data"] == ["sub-1"]
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_edge_types_a_value_is_checked_against_its_boxs_api_description_to_its_depth():
    """``bounds.checked`` against the components' own API descriptions (``api_info``): what each takes, and where a
    value differs, in one sentence; a value nested deeper than ``MAX_DEPTH`` is refused before anything recurses into
    it; the values a page sends pass."""
    import gradio as gr

    from leaderboard import bounds

    def refusal(component, value, name="box") -> str:
        with pytest.raises(gr.Error) as refused:
            bounds.checked(component, bounds.bounded(value), name)
        return refused.value.message.removesuffix(SENTENCE_END)

    picker, upload = gr.Dropdown(multiselect=True), gr.File(file_types=[".zip"])
    assert refusal(picker, NESTED, "chosen") == "'chosen' takes a list of texts, but its value at [0] is a list"
    assert refusal(picker, ["a", 1.5]) == "'box' takes a list of texts, but its value at [1] is a number"
    assert refusal(upload, {"meta": {"_type": "gradio.FileData"}}, "file") == \
        "'file' takes an uploaded file (gradio_client's handle_file), but its value at ['path'] is missing"
    assert refusal(upload, {**PASSWD, "meta": {"_type": "other"}}, "file") == \
        "'file' takes an uploaded file (gradio_client's handle_file), but its value at ['meta']['_type'] is 'other'"
    assert refusal(upload, {**PASSWD, "size": "big"}, "file").endswith("its value at ['size'] is text")
    assert refusal(gr.Number(), float("nan"), "size_min") == "'size_min' takes a number, not NaN or an infinity"
    assert refusal(gr.Checkbox(), 1) == "'box' takes true or false, not a number"
    deep = "a"
    for _ in range(bounds.MAX_DEPTH + 1):
        deep = [deep]
    assert refusal(picker, deep) == f"a value holds lists or objects nested deeper than {bounds.MAX_DEPTH}"
    assert bounds.checked(picker, ["a", "b"]) == ["a", "b"] and bounds.checked(picker, None) == []
    assert bounds.checked(upload, PASSWD) == PASSWD  # its type is right; where it points is ``uploaded_only``'s
    assert bounds.checked(gr.State(), {"any": [[["json"]]]}) == {"any": [[["json"]]]}

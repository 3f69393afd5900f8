"""The leaderboard app live in this process, and its page's own events called as a browser calls them.

``launched`` serves ``build_app`` on a free loopback port in this process (as ``culturelens serve`` launches it), so
that a test or a ``benchmarks/`` script can count the server's CPU time (``server_cpu``: every thread but the
caller's, which runs the client). The API's endpoints are called with gradio_client; the page's own events (a tab's
select, a table's select, the timer's tick) are not in the API (``api_name=False``) and gradio_client refuses them,
but anyone can send them as the page does: ``POST /gradio_api/queue/join`` with the event's ``fn_index``, its input
values and ``event_data``, then the answer from ``/gradio_api/queue/data``. ``Page`` does that, with plain HTTP.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def logged(log: Path, text: str, process: subprocess.Popen, timeout: float = 900) -> float:
    """Seconds until the log of ``process`` (an app served in another process, e.g. ``culturelens serve``) holds
    ``text``, such as ``leaderboard.app.READY``; RuntimeError, with the log's end, when it exits or ``timeout``
    passes first."""
    started = time.monotonic()
    while text not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() - started > timeout:
            raise RuntimeError(f"the app did not say {text!r}: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    return time.monotonic() - started


@contextlib.contextmanager
def launched(store, owner: str) -> Iterator[str]:
    """The leaderboard app on ``store`` (``build_app``, signed in as ``owner``) served in this process on a free
    loopback port, as ``culturelens serve`` launches it: yields its URL, closes it afterwards."""
    from leaderboard.app import build_app, launch_options

    app = build_app(store, owner=owner)
    port = free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
               **launch_options(store))
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.close()


def server_cpu() -> float:
    """CPU seconds (user and system) this process's threads other than the calling one have spent so far: with the
    app ``launched`` here and its client in the calling thread, the server's share."""
    caller = threading.get_native_id()
    return sum(t.user_time + t.system_time for t in psutil.Process().threads() if t.id != caller)
@dataclass(frozen=True)
class Answer:
    """An event's answer: ``output`` (``data``, one value per output, or ``error``), whether it succeeded, and the
    size in bytes of the message that carried it to the page."""

    output: dict
    success: bool
    size: int

    @property
    def error(self) -> str | None:
        return None if self.success else self.output.get("error") or ""


class Page:
    """The page of the app at ``url``: its configuration (components and events), one session of a visitor."""

    def __init__(self, url: str, timeout: float = 120):
        self.url, self.timeout = url, timeout
        self.config = httpx.get(url + "config", timeout=timeout).json()
        self.components = {c["id"]: c for c in self.config["components"]}
        self.session = uuid.uuid4().hex

    def component(self, kind: str, label: str | None = None) -> int:
        """The id of the one component of type ``kind`` ("tabitem", "timer", "dataframe", ...) whose label (a
        dataframe's: its headers joined by ", ") is ``label`` (any, when None)."""
        def named(c: dict) -> str | None:
            props = c.get("props", {})
            return ", ".join(props.get("headers") or []) if kind == "dataframe" else props.get("label")

        found = [i for i, c in self.components.items() if c["type"] == kind and label in (None, named(c))]
        if len(found) != 1:
            raise LookupError(f"{len(found)} components of type {kind!r} labelled {label!r}")
        return found[0]

    def event(self, component: int, trigger: str) -> int:
        """The fn_index of the one event of ``component`` on ``trigger`` ("select", "tick", ...) that runs on the
        server."""
        found = [i for i, d in enumerate(self.config["dependencies"])
                 if [component, trigger] in d["targets"] and d.get("backend_fn")]
        if len(found) != 1:
            raise LookupError(f"{len(found)} server events of component {component} on {trigger!r}")
        return found[0]

    def initial(self, fn_index: int) -> list:
        """The values a page sends for the event's inputs before anyone changed them: each component's own."""
        inputs = self.config["dependencies"][fn_index]["inputs"]
        return [self.components[i].get("props", {}).get("value") for i in inputs]

    def call(self, fn_index: int, data: list, event_data: object = None) -> Answer:
        """Send the event with ``data`` (one value per input) and ``event_data`` as the page does; its answer."""
        dependency = self.config["dependencies"][fn_index]
        trigger = dependency["targets"][0][0] if dependency["targets"] else None
        body = json.dumps({"data": data, "event_data": event_data, "fn_index": fn_index, "trigger_id": trigger,
                           "session_hash": self.session})  # NaN and infinities as Python's JSON writes them
        joined = httpx.post(self.url + "gradio_api/queue/join", content=body, timeout=self.timeout,
                            headers={"content-type": "application/json"})
        joined.raise_for_status()
        event_id = joined.json()["event_id"]
        with httpx.stream("GET", self.url + "gradio_api/queue/data", params={"session_hash": self.session},
                          timeout=self.timeout) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed" and message.get("event_id") == event_id:
                    return Answer(message.get("output") or {}, bool(message.get("success")), len(line))
        raise ConnectionError(f"the event stream of fn_index {fn_index} ended without its answer")

"""Issue 48, finding 7: the Queue tab when queue clients write megabytes and numbers of the wrong type.

The app is served in this process (``launched``) so that the server's CPU time can be counted (``server_cpu``: every
thread but the test's, which runs the client). The page's own events (the Queue tab's select, the timer's tick) are
sent as a browser sends them (``live_app.Page``); the ``/queue`` and ``/details`` endpoints through gradio_client.
"""

from __future__ import annotations

import sqlite3

import pytest

from culturelens.testing.live_app import Page, server_cpu
from culturelens.testing.queue_clients import fill
from leaderboard.queue import listing
from leaderboard.store import Store
from tests.helpers import launched

BIG = "x" * 5_000_000  # 5 MB in each text a queue client writes (issue 48: a 15 MB page, 1.08 CPU-s per event)
SHORT = "a short line"
EVENTS = 10  # events of each kind per measurement: a thread's CPU time is counted in 10 ms steps
CPU_BOUND = 0.1  # server CPU-s per event that 5 MB texts may cost over short ones (1.0-1.2 more before)


def _queue_page(store: Store) -> dict[str, tuple[float, int, str]]:
    """The Queue tab opened (its select event) and ticked (the timer with the Queue open, past the session's first
    tick) ``EVENTS`` times each, on the app serving ``store``: per kind, the server's mean CPU seconds, the most bytes
    one answer brought, and the first answer's text."""
    with launched(store, "ada") as url:
        page = Page(url)
        tab = page.event(page.component("tabitem", "Queue"), "select")
        tick = page.event(page.component("timer"), "tick")
        ticked = page.initial(tick)
        ticked[0] = "queue"  # the open tab
        first_tick = page.call(tick, ticked)  # the session's first: sends the tab
        measured = {}
        for name, fn, data in (("page", tab, page.initial(tab)), ("tick", tick, ticked)):
            before, answers = server_cpu(), [page.call(fn, data) for _ in range(EVENTS)]
            cpu = (server_cpu() - before) / EVENTS
            assert all(a.success for a in answers), [a.error for a in answers]
            text = str((answers[0] if name == "page" else first_tick).output["data"])
            measured[name] = (cpu, max(a.size for a in answers + [first_tick]), text)
    return measured


@pytest.mark.slow  # two apps, 40 events each (~1 min on 2 shared cores)
def test_edge_queue_text_a_5_mb_field_costs_the_page_and_the_tick_no_more_than_a_short_one(tmp_path):
    """Every text a queue client writes (a supervisor's last exit, a worker's message and a track's reason, a
    notice, a running job's message, a failed job's error and log excerpt: 7 texts) is 5 MB, then a short line, on
    two stores alike. The Queue tab's page and tick each show every long text as its first 4,000 characters and the
    cut marker, bring at most 4,100 bytes more per text shown than with the short lines (25 MB before), and cost the
    server at most 0.1 CPU-s more per event (1.0-1.2 CPU-s more before)."""
    measured = {}
    for name, text in (("short", SHORT), ("long", BIG)):
        store = Store(tmp_path / name / "store")
        fill(store, text)
        measured[name] = _queue_page(store)
    cut = "x" * listing.TEXT_CHARS + "…"  # the marker's words follow, as text or escaped for Markdown
    for kind in ("page", "tick"):
        (short_cpu, short_size, short_text), (long_cpu, long_size, long_text) = measured["short"][kind], \
            measured["long"][kind]
        assert "x" * (listing.TEXT_CHARS + 1) not in long_text, kind
        # The long texts the tab shows: the failed job's error and the running one's message (table), the notice,
        # the worker's message and the supervisor's last exit (folded); a track's reason yields to this server's.
        shown = long_text.count(cut)
        assert shown == 5 == long_text.count("x" * listing.TEXT_CHARS), (kind, shown)
        assert long_size <= short_size + shown * (listing.TEXT_CHARS + 100), (kind, long_size, short_size)
        assert long_cpu <= short_cpu + CPU_BOUND, f"{kind}: {long_cpu:.3f} CPU-s, short texts {short_cpu:.3f}"


def test_edge_queue_text_a_number_of_the_wrong_type_shows_as_invalid_and_breaks_nothing(tmp_path, capfd):
    """A queue client writes 'abc' as a running job's progress (SQLite keeps text in a number's column), 'x' as a
    job's attempts, and a supervisor's pid and restarts as text: the Queue tab's page and its tick answer, showing
    "progress invalid", "worker pid invalid", "restarted invalid times"; ``/queue`` gives "invalid" for the progress
    and the attempts, ``/details`` "attempts invalid"; the server logs no traceback (before: a ValueError traceback
    on every page and tick)."""
    from gradio_client import Client

    store = Store(tmp_path / "store")
    fill(store, SHORT)
    store.queue.set_supervisor("supervisor", "running", pid="abc", restarts="many", last_exit=None)
    store.queue.heartbeat("running", "worker", 600, "abc")
    with sqlite3.connect(store.queue.path) as db:  # SQL of another client
        db.execute("UPDATE submissions SET attempts = 'x' WHERE id = 'failed'")
    with launched(store, "ada") as url:
        page = Page(url)
        tab = page.event(page.component("tabitem", "Queue"), "select")
        opened = page.call(tab, page.initial(tab))
        tick = page.event(page.component("timer"), "tick")
        ticked = page.initial(tick)
        ticked[0] = "queue"
        answer = page.call(tick, ticked)
        client = Client(url, verbose=False)
        jobs = {job["id"]: job for job in client.predict(api_name="/queue")["jobs"]}
        details, _ = client.predict("failed", api_name="/details")
    assert opened.success and answer.success, (opened.error, answer.error)
    for shown in (str(opened.output["data"]), str(answer.output["data"])):
        assert f"progress invalid {SHORT}" in shown
        assert "worker pid invalid running (restarted invalid times" in shown
    assert (jobs["running"]["progress"], jobs["failed"]["attempts"]) == ("invalid", "invalid")
    assert "attempts invalid" in details
    assert "Traceback" not in capfd.readouterr().err

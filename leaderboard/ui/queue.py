"""The Queue tab: every submission's state (PENDING, RUNNING with progress, FINISHED, FAILED with the reason), the
workers and what they can score, a submission's details and per-image scores, and its owner's re-run and delete."""

from __future__ import annotations

import re

import gradio as gr
import pandas as pd

from benchmark import layout
from benchmark import tracks as track_registry
from benchmark.suite import SCORING_ASSETS
from leaderboard import quarantine, render, suite_view
from leaderboard.intake import PermissionDenied
from leaderboard.queue.base import alive
from leaderboard.queue.listing import INVALID
from leaderboard.ui.site import Tab, while_queue_rebuilt
from leaderboard.ui.widgets import Parts, shown_if_filled, text_markdown

# The submissions table: narrow enough not to scroll sideways on a laptop (a submission's times are in its details);
# on a phone it scrolls inside its box rather than squeeze a column to a letter a line.
QUEUE_COLUMNS = ["Submitted (UTC)", "ID", "Model", "Owner", "State", "Details"]
QUEUE_WIDTHS = ["120px", "230px", "170px", "80px", "110px", "460px"]
QUEUE_ROWS = 200  # newest submissions listed; any other is found by its ID (Details)
EMPTY = "\n\nNo submission in the queue yet: the **Submit** tab says how to send one."


class QueueTab(Tab):
    """The Queue tab's views over ``site``; ``build`` makes its components."""

    @property
    def places(self):
        return self.site.places

    def public(self, text: object) -> str:
        return self.site.public(text)

    @while_queue_rebuilt(lambda notice: {"jobs": [], "workers": [], "notice": notice})
    def queue_api(self) -> dict:
        """The queue as data, nothing escaped, server folders hidden: ``jobs``, newest first (at most
        ``QUEUE_ROWS``; any other by ``/details``): id, state, model, model_id, owner, dataset, submitted_at,
        started_at, finished_at (ISO 8601), progress (0-1, while RUNNING), message, reason (why it FAILED),
        attempts; ``workers`` heard from in the last hour: id, state, seconds_since_heard, message; and ``notice``:
        None, or why the queue cannot be listed now (it is being rebuilt, ``site.QUEUE_REBUILDING``). Every text is
        at most ``listing.TEXT_CHARS`` characters (a longer one ends with ``listing.CUT``); a number a queue client
        wrote as something else is "invalid" (``queue.listing``)."""
        jobs = [{"id": job.id, "state": job.state, "model": job.model, "model_id": job.model_id, "owner": job.owner,
                 "dataset": job.dataset, "submitted_at": job.created_at, "started_at": job.started_at,
                 "finished_at": job.finished_at, "progress": job.progress if job.state == "RUNNING" else None,
                 "message": render.hide_paths(job.message, self.places) if job.message else None,
                 "reason": render.hide_paths(job.error, self.places) if job.state == "FAILED" and job.error else None,
                 "attempts": job.attempts} for job in self.store.queue.listing(QUEUE_ROWS)]
        workers = [{"id": w["id"], "state": w["state"], "seconds_since_heard": round(float(w["age"]), 1),
                    "message": render.hide_paths(w["message"], self.places) if w["message"] else None}
                   for w in self.store.queue.workers(within_seconds=3600)]
        return {"jobs": jobs, "workers": workers, "notice": None}

    def table(self) -> pd.DataFrame:
        """The newest ``QUEUE_ROWS`` submissions: when, which, whose, their state and its details (the progress of
        a RUNNING one, why one FAILED, what a FINISHED one scored)."""
        rows = []
        for job in self.store.queue.listing(QUEUE_ROWS):
            if job.state == "RUNNING":
                details = f"{percent(job.progress)} {job.message or ''}".strip()
            else:
                details = render.hide_paths((job.error if job.state == "FAILED" else job.message) or "", self.places)
            rows.append([job.created_at[:16].replace("T", " "), job.id, job.model, job.owner, job.state, details])
        return pd.DataFrame(rows, columns=QUEUE_COLUMNS)

    def status(self) -> tuple[str, str]:
        """The worker state in two parts. Shown: notices (a rebuilt queue, quarantined results), whether a worker
        runs (one short line each, or why none scores), and one line per track: on, or off with why and the one
        command that turns it on (``track_lines``). Folded: the supervisor and what each worker said in full. Ages
        come from the queue's own clock, so a worker machine's clock cannot make a worker look dead or alive."""
        queue = self.store.queue
        notices = [f"> **Notice:** {render.plain(notice)}" for notice in queue.notices()]
        if note := quarantine.note(self.store.quarantined()):
            notices.append(f"> **Notice:** {render.plain(note)}")
        workers = queue.workers(within_seconds=3600)
        live = [w for w in workers if alive(w)]
        supervisors = [(s, line) for s in queue.supervisors() if (line := self._supervisor_line(s))]
        shown = [line for s, line in supervisors if s["state"] != "running"]  # restarting, gave up
        folded = [line for s, line in supervisors if s["state"] == "running"]
        heard = []  # workers whose word on the tracks counts: the live ones, else those that could not score
        for w in workers:
            worker = f"- worker {render.code(w['id'])}"
            if w["state"] == "unavailable":
                if not live:  # a worker that could not score, while none scores now; once one does, it is history
                    shown.append(f"{worker} cannot score: {self.public(_short_reason(w['message'] or ''))}")
                    folded.append(f"{worker} cannot score: {self.public(w['message'])}")
                    heard.append(w["id"])
            elif w in live:
                shown.append(f"{worker} is up: {render.plain(w['state'])}")
                folded.append(f"{worker}: {self.public(w['message'] or '')}")
                heard.append(w["id"])
            elif w["age"] < 600 and w["state"] != "stopped":
                shown.append(f"{worker} silent for {w['age']:.0f} s (last: {render.plain(w['state'])})")
        if not live:  # one instruction per state: a supervisor's line says what it does, else start a worker
            supervised = any(s["state"] in ("restarting", "gave up") for s, _ in supervisors)
            shown.insert(0, "**No worker is running right now**: new submissions wait as PENDING " + (
                "(the supervisor's line below says what comes next)." if supervised else
                "until one starts: `culturelens worker --store DIR`."))
        tracks = self.track_lines(heard)
        text = "\n".join(notices + shown) or "No worker has been seen."
        return text + (f"\n\n{tracks}" if tracks else ""), "\n".join(folded)

    def track_lines(self, workers: list[str] | None = None) -> str:
        """One line per track: on (a worker among ``workers`` scores it), or off with why: what the suite this
        server serves lacks for it, with the one command that turns it on (``ServedSuite.tracks_off``), else what
        the workers said (their disabled metrics, ``Worker.track_states``); a track no worker spoke of waits for
        one. A track that needs a scoring asset (``SCORING_ASSETS``) is on only where this server holds it (in its
        suite, by digest, or given by the operator), whatever a worker says: any queue client can say it scores a
        track (issue 40). A worker's word wins over this server's only for the expectations judge, a model the
        worker holds, and never where this server does not serve the track's dataset. Server folders hidden."""
        off = self.site.suite.tracks_off(self.store.datasets, self.site.metric_settings)
        unserved = self.site.suite.unserved_tracks(self.store.datasets)
        said = self.store.queue.worker_tracks(workers or [])
        lines = []
        for name, track in track_registry.all_tracks().items():
            states = [tracks[name] for tracks in said.values() if name in tracks]
            if name in off and (None not in states or name in unserved or name in SCORING_ASSETS):
                state = f"is off: {render.hide_paths(off[name], self.places)}"  # our commands, in code spans
            elif None in states:
                state = "is on"
            elif states:
                reasons = (_short_reason(line) for reason in states for line in reason.splitlines())
                held = set(self.site.suite.settings())  # the suite's assets: their settings are not what failed
                state = "is off: " + self.public("; ".join(dict.fromkeys(reasons))) + "; " + turn_on(track, held)
            else:
                state = "waits for a worker"
            lines.append(f"- **{track.title}** {state}")  # a registered track's title: ours, as method pages show it
        heading = "**Tracks on this server** (its suite, settings and workers), and what turns each on:\n"
        return heading + "\n".join(lines) if lines else ""

    @staticmethod
    def _supervisor_line(s: dict) -> str | None:
        """One line for a worker supervisor (``leaderboard.supervisor``); None once it stopped. Every field is as a
        queue client wrote it (any client of a shared queue can): shown as text (issue 40)."""
        restarts = f"restarted {render.plain(s['restarts'])} time{'s' if s['restarts'] != 1 else ''}"
        last = f", last exit: {render.plain(s['last_exit'])}" if s["last_exit"] else ""
        if s["state"] == "running":
            return f"- supervisor: worker pid {render.plain(s['pid'])} running ({restarts}{last})"
        if s["state"] == "restarting":
            return (f"- **restarting**: the worker stopped ({render.plain(s['last_exit'])}); restarting it in "
                    f"{max(s['retry_in'] or 0, 0):.0f} s ({restarts} so far)")
        if s["state"] == "gave up":
            return f"- **supervisor gave up** ({restarts}{last}): {render.plain(s['message'] or '')}"
        return None

    @while_queue_rebuilt(lambda notice: (notice, None))
    def details(self, submission_id: str):
        """One submission: state, reason and log excerpt, and its per-image scores to download."""
        job = self.store.queue.listed((submission_id or "").strip())
        if job is None:
            return "Type or paste a submission ID from the table.", None
        lines = [f"### {render.code(job.id)}: {render.plain(job.state)}",  # as a queue client wrote them: text
                 f"- model **{render.plain(job.model)}**, owner {render.plain(job.owner)}, dataset "
                 f"{render.plain(job.dataset)}",
                 f"- submitted {render.plain(job.created_at)}; started {render.plain(job.started_at or '–')}; "
                 f"finished {render.plain(job.finished_at or '–')}; attempts {render.plain(job.attempts)}"]
        if job.state == "FAILED":
            lines.append(f"- **reason**: {self.public(job.error)}")
        run = self.store.run_record(job.id)  # it counts the images left out for errors (non-finite values)
        if run is not None:
            lines += suite_view.run_parts_lines(run)
        if run is not None and run.errors:
            reasons = ", ".join(f"{render.plain(reason)} ({count})" for reason, count in run.errors.items())
            excluded = run.excluded if run.excluded is not None else sum(run.errors.values())
            lines.append(f"- **{excluded} images excluded**: {reasons}")
        if job.log_excerpt:
            excerpt = render.hide_paths(job.log_excerpt, self.places).replace("```", "'''")
            lines.append("\n**Log excerpt**\n\n```text\n" + excerpt + "\n```")
        per_image = self.store.per_image_file(job.id)
        return "\n".join(lines), (self.site.serve([per_image], [f"culturelens-{job.id}-per_image.parquet"])[0]
                                   if per_image else None)

    def details_page(self, submission_id: str):
        """``details`` for the page: the file box only when there is a file."""
        text, path = self.details(submission_id)
        return text, shown_if_filled(path)

    def rerun(self, submission_id: str, profile: gr.OAuthProfile | None = None) -> str:
        """Queue one of your finished or failed submissions again (its old results are replaced)."""
        return self.owner_action("rerun", submission_id, profile)

    def delete(self, submission_id: str, profile: gr.OAuthProfile | None = None) -> str:
        """Delete one of your submissions with its images and results."""
        return self.owner_action("delete", submission_id, profile)

    @while_queue_rebuilt(lambda notice: f"Not done: {notice}")
    def owner_action(self, action: str, submission_id: str, profile: gr.OAuthProfile | None) -> str:
        owner = self.site.who(profile)
        if owner is None:
            return "Not done: sign in with Hugging Face first."
        submission_id = (submission_id or "").strip()
        if not layout.is_submission_id(submission_id):  # checked here, so that the answer quotes only the text's start
            return f"Not done: no submission {render.code(render.excerpt(submission_id))}."
        try:
            (self.store.rerun if action == "rerun" else self.store.delete)(submission_id, owner)
        except PermissionDenied as error:
            return f"Not done: {render.plain(error)}"
        return f"Done: {render.code(submission_id)} " + ("queued again." if action == "rerun" else "deleted.")

    @while_queue_rebuilt(lambda notice: {"workers": _notice(notice), "worker_details": "",
                                         "table": pd.DataFrame(columns=QUEUE_COLUMNS)})
    def page(self) -> dict:
        """The tab by output name: the worker state's lines, its details folded, the submissions."""
        shown, folded = self.status()
        frame = self.table()
        return {"workers": shown + (EMPTY if frame.empty else ""), "worker_details": folded or "Nothing more.",
                "table": frame.assign(State=frame["State"].map(render.badge))}

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        workers = text_markdown()
        with gr.Accordion("What the workers said, in full", open=False, elem_classes=["cl-details"]):
            worker_details = text_markdown()
        table = gr.Dataframe(headers=QUEUE_COLUMNS, interactive=False, wrap=True, elem_classes=["cl-table"],
                             column_widths=QUEUE_WIDTHS, datatype=["str", "str", "str", "str", "markdown", "str"])
        with gr.Row():
            submission = gr.Textbox(label="Submission ID", scale=3)
            show = gr.Button("Details", scale=1)
            rerun = gr.Button("Re-run (owner)", scale=1)
            delete = gr.Button("Delete (owner)", variant="stop", scale=1)
        result = text_markdown()
        details = text_markdown()
        per_image = gr.File(label="Per-image scores (Parquet)", visible=False)
        show.click(self.details_page, submission, [details, per_image], api_name=False)
        submission.submit(self.details_page, submission, [details, per_image], api_name=False)
        rerun.click(self.rerun, submission, result, api_name="rerun")
        delete.click(self.delete, submission, result, api_name="delete")
        table.select(selected_id, None, submission, api_name=False)
        self.parts = Parts(inputs={"submission": submission},
                           outputs={"workers": workers, "worker_details": worker_details, "table": table,
                                    "details": details, "per_image": per_image})
        return self.parts


def _notice(notice: str) -> str:
    """The Queue tab while the queue is being rebuilt: the notice."""
    return f"> **Notice:** {notice}"


SHORT_REASON = 120  # characters of a reason a line shows whole; a longer one, its first clause


def turn_on(track, given: set[str] = frozenset()) -> str:
    """The setting that turns on a track a worker could not score (a model it could not load, weights not in the
    cache offline), in words: the track's model and asset settings but those ``given`` names (held already: the
    served suite's assets, as its knowledge base), and local weights for the backbones."""
    from benchmark.settings import BACKBONES

    wanted = ("judge", "kb", "index", "calibration", "backbone", "tagger")
    flags = [f"`{s.flag} ...`" + (f" ({s.env})" if s.env else "") for s in track.settings
             if any(word in s.name for word in wanted) and s.name not in given]
    given = f"{', '.join(flags)} naming a model or file this server can load, or " if flags else ""
    return (f"to turn it on, restart `culturelens serve` with {given}`{BACKBONES.env}=FILE` naming local weights "
            "(see Backbones in docs/scoring.md)")


def percent(progress: float | str | None) -> str:
    """A RUNNING job's progress (0-1, ``listing.number``) for a page: "40%", or "progress invalid" where a queue
    client wrote something else."""
    return f"progress {INVALID}" if progress == INVALID else f"{(progress or 0) * 100:.0f}%"


def _short_reason(reason: str) -> str:
    """What a line says of a reason: the reason if short, else its first clause, up to a colon or semicolon ("no
    artifact index" of "no artifact index: pass --artifact-index DIR ..."); the whole is in the folded details."""
    return reason if len(reason) <= SHORT_REASON else re.split(r": |; ", reason, maxsplit=1)[0]


def selected_id(event: gr.SelectData) -> str:
    """The ID column of the queue row a visitor clicked ("" when the event's row holds no text there)."""
    row = event.row_value or []
    return row[1] if len(row) > 1 and isinstance(row[1], str) else ""

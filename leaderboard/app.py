"""The Gradio leaderboard: ranked tables, a submission form and the queue.

Every read goes to the store on disk at the time of the request (no restart
is ever needed to see new results), and every piece of user-supplied text is
HTML-escaped before it is rendered.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import gradio as gr
import pandas as pd

from benchmark import citations
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from leaderboard import tables
from leaderboard.store import Store

STATE_BADGES = {"PENDING": "⏳ PENDING", "RUNNING": "⚙️ RUNNING", "FINISHED": "✅ FINISHED", "FAILED": "❌ FAILED"}
QUEUE_COLUMNS = ["Submitted", "ID", "Model", "Owner", "State", "Progress", "Started", "Finished", "Details"]


# Enough to stop emphasis, code, tables and any link or image ("[" and "]" are escaped); user text never starts
# a line here, so list and heading markers need no escaping.
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")


def _escape(text: object) -> str:
    """User-supplied (or user-influenced) text for a Markdown component: Markdown syntax is backslash-escaped,
    then HTML is escaped, so a model name can neither add links or images nor inject markup."""
    return html.escape(_MARKDOWN.sub(r"\\\1", str(text)), quote=True)


def header_markdown() -> str:
    return (
        "# CultureLens\n"
        "How well do text-to-image models know the world's cultures? Six tracks from five papers: "
        "awareness and diversity (CUBE), iconicity (CRT), variability (W1KP), relevance (CAIRE) and "
        "expectations (CulturalFrames).\n\n"
        "Every row says where it comes from: **📄 reported** rows are copied from a paper's table (cited on the "
        "row); **⚙️ scored** rows were computed by this leaderboard's harness from submitted images. Nothing is "
        "hidden by default: the table shows every row of the chosen metric and slice."
    )


def about_markdown(store: Store) -> str:
    cube_dir = local_folder(store.datasets, cube_1k.HUB_REPO)
    status = (f"built locally in `{cube_dir}`" if (cube_dir / "README.md").exists()
              else f"**not built on this server yet**: run `culturelens data build cube-1k --out {cube_dir}`")
    papers = "\n".join(f"- {track}: {_escape(cite)}" for track, cite in citations.ALL.items())
    return f"""
## Datasets

CUBE-1K, the awareness prompts (992 prompts, 8 countries, cuisine / landmarks / art): {status}.

```python
from datasets import load_dataset
prompts = load_dataset("{cube_1k.HUB_REPO}", "{cube_1k.CONFIG}", split="{cube_1k.SPLIT}")
```

Build it yourself from the authors' file with `culturelens data build cube-1k --out DIR` (add
`--source PATH` offline) and publish it with `culturelens data push DIR --repo ORG/NAME`. Its card lists every
data-quality defect found upstream and what was done about it.

Iconic references, the iconicity track's titles and reference images: `culturelens data build iconic-references
--records refs.jsonl --images refs/ --out DIR`, or `--from-sparql` to fetch them from Wikidata and Commons.

## Submitting

1. Generate images for every prompt of the dataset config, one per seed.
2. Lay them out as `images/<prompt_id>/<seed>.png` next to a `manifest.json` (schema:
   `culturelens schema`; format: `submissions/README.md`), and zip the folder.
3. Check it with `culturelens validate FILE.zip`, then upload it in the **Submit** tab (or run
   `culturelens submit FILE.zip --store DIR`). Follow it in the **Queue** tab.

## Papers

{papers}

CUBE-1K data: CC BY-NC-SA 4.0 (google-deepmind/cube). Reported numbers are quoted from the papers above.
"""


def _leaderboard_view(store: Store, track: str | None, metric_label: str | None, choice: str | None):
    """Recompute the dropdowns and the table for the current choices (falling back to valid ones)."""
    con = store.connect()
    try:
        all_tracks = tables.tracks(con)
        track = track if track in all_tracks else (all_tracks[0] if all_tracks else None)
        metric_pairs = tables.metrics(con, track) if track else []
        labels = [label for label, _ in metric_pairs]
        metric_label = metric_label if metric_label in labels else (labels[0] if labels else None)
        metric = dict(metric_pairs).get(metric_label)
        slice_choices = tables.slices(con, track, metric) if metric else []
        choice = choice if choice in slice_choices else (slice_choices[0] if slice_choices else None)
        frame = tables.ranked(con, track, metric, choice) if choice else pd.DataFrame()
    finally:
        con.close()
    shown = tables.display(frame)
    if frame.empty:
        note = "No results for this choice yet."
    else:
        direction = "Higher" if bool(frame["higher_is_better"].iloc[0]) else "Lower"
        note = f"{len(shown)} row(s) for **{_escape(metric_label)}**, slice **{_escape(choice)}**. {direction} is better."
    return (gr.update(choices=all_tracks, value=track), gr.update(choices=labels, value=metric_label),
            gr.update(choices=slice_choices, value=choice), shown, note)


def _queue_view(store: Store):
    jobs = store.queue.jobs()
    rows = []
    for job in jobs:
        if job.state == "RUNNING":
            progress = f"{(job.progress or 0) * 100:.0f}% {job.message or ''}".strip()
        else:
            progress = ""
        details = job.error if job.state == "FAILED" else (job.message or "")
        rows.append([job.created_at, job.id, job.model, job.owner, STATE_BADGES[job.state], progress,
                     job.started_at or "", job.finished_at or "", details])
    frame = pd.DataFrame(rows, columns=QUEUE_COLUMNS)
    return _workers_markdown(store), frame


def _workers_markdown(store: Store) -> str:
    workers = store.queue.workers(within_seconds=3600)
    live = [w for w in workers if w["state"] not in ("stopped", "unavailable") and time.time() - w["heartbeat"] < 30]
    lines = []
    for w in workers:
        age = time.time() - w["heartbeat"]
        if w["state"] == "unavailable":
            lines.append(f"- ⚠️ worker `{w['id']}` cannot score: {_escape(w['message'])}")
        elif w in live:
            lines.append(f"- 🟢 worker `{w['id']}`: {_escape(w['state'])} ({_escape(w['message'] or '')})")
        elif age < 600 and w["state"] != "stopped":
            lines.append(f"- 🔴 worker `{w['id']}` silent for {age:.0f} s (last: {_escape(w['state'])})")
    if not live:
        lines.insert(0, "**No worker is running right now**: new submissions wait as PENDING until one starts "
                        "(`culturelens worker --store DIR`).")
    return "\n".join(lines) or "No worker has been seen."


def _submit(store: Store, owner: str, file: str | None, progress=gr.Progress()) -> str:
    if not file:
        return "Choose a `.zip` file first."

    def report_progress(done: int, total: int) -> None:
        progress(done / total, desc=f"checking images {done}/{total}")

    outcome = store.submit(Path(file), owner, report_progress)
    report = outcome.report
    if outcome.job is None:
        problems = "\n".join(f"- {_escape(e)}" for e in report.errors)
        return f"### ❌ Rejected: nothing was stored\n\n{problems}"
    m = report.manifest
    warnings = "".join(f"\n- ⚠️ {_escape(w)}" for w in report.warnings)
    return (f"### ✅ Accepted: `{outcome.job.id}`\n\n"
            f"- model: **{_escape(m.model.name)}** ({_escape(m.model.id)})\n"
            f"- {len(report.images)} images, {len(m.missing)} declared missing, for {len(report.prompts)} prompts "
            f"of {_escape(report.prompts.label)}\n"
            f"- content hash: `{report.content_hash}`{warnings}\n\n"
            "It is queued: follow it in the **Queue** tab.")


def build_app(store: Store, *, owner: str = "local") -> gr.Blocks:
    """The leaderboard UI over ``store``; ``owner`` is the user submissions are recorded under."""
    with gr.Blocks(title="CultureLens leaderboard") as app:
        gr.Markdown(header_markdown())
        with gr.Tab("Leaderboard"):
            with gr.Row():
                track = gr.Dropdown(label="Track", choices=[], interactive=True)
                metric = gr.Dropdown(label="Metric", choices=[], interactive=True)
                slice_ = gr.Dropdown(label="Slice", choices=[], interactive=True)
            note = gr.Markdown()
            table = gr.Dataframe(headers=tables.DISPLAY_COLUMNS, interactive=False, wrap=True,
                                 column_widths=["6%", "16%", "8%", "14%", "5%", "7%", "11%", "33%"])
            refresh = gr.Button("Refresh", size="sm")
            outputs = [track, metric, slice_, table, note]

            def view(t, m, s):
                return _leaderboard_view(store, t, m, s)

            for trigger in (track.input, metric.input, slice_.input, refresh.click):
                trigger(view, [track, metric, slice_], outputs, api_name=False)
            app.load(view, [track, metric, slice_], outputs, api_name=False)

            def leaderboard(track_name: str, metric_label: str, slice_choice: str = tables.OVERALL) -> list[dict]:
                """Ranked rows of one track, metric (by label) and slice, as records."""
                return _leaderboard_view(store, track_name, metric_label, slice_choice)[3].to_dict("records")

            gr.api(leaderboard, api_name="leaderboard")
        with gr.Tab("Submit"):
            gr.Markdown(f"Upload a submission `.zip` (format: `submissions/README.md`). It is checked at once; "
                        f"if it passes it joins the queue. Submitting as **{_escape(owner)}**.")
            upload = gr.File(label="Submission (.zip)", file_types=[".zip"], type="filepath")
            submit = gr.Button("Validate and submit", variant="primary")
            verdict = gr.Markdown()
            submit.click(lambda f, progress=gr.Progress(): _submit(store, owner, f, progress), [upload], verdict,
                         api_name="submit")
        with gr.Tab("Queue"):
            workers = gr.Markdown()
            queue_table = gr.Dataframe(headers=QUEUE_COLUMNS, interactive=False, wrap=True)
            timer = gr.Timer(3)
            timer.tick(lambda: _queue_view(store), None, [workers, queue_table], api_name=False)
            app.load(lambda: _queue_view(store), None, [workers, queue_table], api_name="queue")
        with gr.Tab("About"):
            gr.Markdown(about_markdown(store))
    return app

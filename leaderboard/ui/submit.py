"""The Submit tab: what to answer and how (the steps, the manifest's schema, a ready command), then an upload or a
Hub dataset of generations, validated at once and queued."""

from __future__ import annotations

import logging
from pathlib import Path

import gradio as gr

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import DatasetUnavailable
from benchmark.submission import ServerFault
from benchmark.submission.manifest import json_schema
from leaderboard import operator_settings, render, repo, suite_view
from leaderboard.intake import PermissionDenied
from leaderboard.store import Store
from leaderboard.ui.site import SIGN_IN_MISSING, Tab, signs_in, while_queue_rebuilt
from leaderboard.ui.widgets import Parts, text_markdown

log = logging.getLogger("culturelens.app")


class SubmitTab(Tab):
    """The Submit tab's views over ``site``; ``build`` makes its components."""

    def schema_file(self) -> str:
        """The manifest's JSON Schema as a file to download (the Submit tab's button)."""
        return self.site.write("manifest.schema.json", json_schema())

    @while_queue_rebuilt(lambda notice: f"### Not submitted: nothing was stored\n\n{notice}")
    def submit(self, file: str | None, hub_repo: str, profile: gr.OAuthProfile | None = None,
               progress=gr.Progress()) -> str:
        owner = self.site.who(profile)
        if owner is None:
            return (f"### Not submitted\n\n{SIGN_IN_MISSING}" if not signs_in() else
                    "### Not submitted: sign in with Hugging Face first (button above).")
        try:
            self.store.check_quota(owner)
        except PermissionDenied as error:
            return f"### Rejected before any work\n\n{render.plain(error)}"
        hub_repo = (hub_repo or "").strip()
        if not file and not hub_repo:
            return "Choose a `.zip` file or name a Hub dataset of generations first."
        if not file:
            try:  # checked before the store: a name that is not a repo id costs no upload attempt
                repo.hub_repo(hub_repo)
            except repo.RepoError as error:
                return f"### Rejected: nothing was stored\n\n- {render.plain(error)}"

        def report_progress(stage: str, done: int, total: int) -> None:
            progress(done / total, desc=f"{stage} {done}/{total}")

        try:
            if file:
                outcome = self.store.submit(Path(file), owner, report_progress)
            else:
                outcome = self.store.submit_from_hub(hub_repo, owner, report_progress)
        except (PermissionDenied, ValueError) as error:  # over the quota after all; a Hub dataset not fetched
            return f"### Rejected: nothing was stored\n\n- {render.plain(error)}"
        except ServerFault as error:  # a full disk: the server's fault, not the uploader's
            return f"### Not stored\n\n{render.plain(error)}. It was not counted against you."
        report = outcome.report
        if outcome.job is None:
            # Validation names only the submission's own entries, exactly as the upload holds them: nothing to
            # hide, and rewriting a name an attacker chose would tell which server folders exist.
            problems = "\n".join(f"- {render.plain(e)}" for e in suite_view.problems(report))
            summary = report.summary.removeprefix("REJECTED: ")
            return f"### Rejected: nothing was stored\n\n**{render.plain(summary)}**\n\nThe details:\n\n{problems}"
        m = report.manifest
        warnings = "".join(f"\n- warning: {render.plain(w)}" for w in report.warnings)
        held = "".join(f"- {line}\n" for line in suite_view.accepted_lines(report))
        return (f"### Accepted: `{outcome.job.id}`\n\n"  # an id the store made: safe in a code span
                f"**{render.plain(report.summary.removeprefix('OK: '))}**\n\n"
                f"- model: **{render.plain(m.model.name)}** ({render.plain(render.public_id(m.model.id))})\n{held}"
                f"- content hash: `{report.content_hash}`{warnings}\n\n"
                "It is queued: follow it in the **Queue** tab.")

    def submit_file(self, file: str | None, profile: gr.OAuthProfile | None = None, progress=gr.Progress()) -> str:
        """Validate and queue an uploaded submission zip."""
        return self.submit(file, "", profile, progress)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        store = self.site.store
        if operator_settings.on_space() and signs_in():
            gr.LoginButton()
            who = "the Hugging Face account you sign in with"
        elif operator_settings.on_space():
            log.warning("this Space has no Hugging Face sign-in (no OAuth variables): it takes no submissions until "
                        "its README.md front matter says hf_oauth: true")
            gr.Markdown(f"**{SIGN_IN_MISSING}**")
            who = "the Hugging Face account you sign in with, once the Space has sign-in"
        else:
            who = f"**{render.plain(self.site.owner)}** (this server's local user)"
        steps, demo = suite_view.submit_guide(self.site.suite, store.datasets,
                                              prompt_count(store, cube_1k.CONFIG_DEMO))
        gr.Markdown(steps)
        gr.DownloadButton("Manifest schema (JSON Schema)", value=self.schema_file(), size="sm")
        gr.Markdown(demo)
        gr.Markdown(f"Upload the `.zip` below, or name a Hub dataset repo holding the submission (a suite "
                    f"submission's `parts/`, or one dataset config's). It is checked at once; if it passes "
                    f"it joins the queue. You submit as {who}; {store.quota_note}.")
        with gr.Row():
            upload = gr.File(label="Submission (.zip)", file_types=[".zip"], type="filepath")
            hub_repo = gr.Textbox(label="…or a Hub dataset of generations (ORG/NAME)")
        submit = gr.Button("Validate and submit", variant="primary")
        verdict = text_markdown()
        submit.click(self.submit, [upload, hub_repo], verdict, api_name="submit_form")
        hub_repo.submit(self.submit, [upload, hub_repo], verdict, api_name=False)
        self.parts = Parts(inputs={"upload": upload, "hub_repo": hub_repo}, outputs={"verdict": verdict})
        return self.parts


def prompt_count(store: Store, config: str) -> int | None:
    """How many prompts a config of the default dataset has on this server (None when it is not built)."""
    try:
        return len(store.prompts(cube_1k.HUB_REPO, config))
    except (DatasetUnavailable, OSError, ValueError):
        return None

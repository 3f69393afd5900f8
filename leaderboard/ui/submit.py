"""The Submit tab: what to answer and how (the steps, the manifest's schema, a ready command), then an upload or a
Hub dataset of generations, validated at once and queued."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import DatasetUnavailable
from benchmark.submission import ServerFault
from benchmark.submission.manifest import json_schema
from leaderboard import operator_settings, render, repo
from leaderboard.intake import PermissionDenied
from leaderboard.store import Store
from leaderboard.ui.site import Site
from leaderboard.ui.widgets import Parts, text_markdown

GUIDE_SEEDS = 2  # seeds in the Submit tab's example command


class SubmitTab:
    """The Submit tab's views over ``site``; ``build`` makes its components."""

    def __init__(self, site: Site):
        self.site = site
        self.parts = Parts()

    @property
    def store(self):
        return self.site.store

    def schema_file(self) -> str:
        """The manifest's JSON Schema as a file to download (the Submit tab's button)."""
        return self.site.write("manifest.schema.json", json_schema())

    def submit(self, file: str | None, hub_repo: str, profile: gr.OAuthProfile | None = None,
               progress=gr.Progress()) -> str:
        owner = self.site.who(profile)
        if owner is None:
            return "### Not submitted: sign in with Hugging Face first (button above)."
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

        def report_progress(done: int, total: int) -> None:
            progress(done / total, desc=f"checking images {done}/{total}")

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
            problems = "\n".join(f"- {render.plain(e)}" for e in report.errors)
            summary = report.summary.removeprefix("REJECTED: ")
            return f"### Rejected: nothing was stored\n\n**{render.plain(summary)}**\n\nThe details:\n\n{problems}"
        m = report.manifest
        warnings = "".join(f"\n- warning: {render.plain(w)}" for w in report.warnings)
        return (f"### Accepted: `{outcome.job.id}`\n\n"  # an id the store made: safe in a code span
                f"**{render.plain(report.summary.removeprefix('OK: '))}**\n\n"
                f"- model: **{render.plain(m.model.name)}** ({render.plain(m.model.id)})\n"
                f"- {len(report.images)} images, {len(m.missing)} declared missing, for {len(report.prompts)} "
                f"prompts of {render.plain(report.prompts.label)}\n"
                f"- content hash: `{report.content_hash}`{warnings}\n\n"
                "It is queued: follow it in the **Queue** tab.")

    def submit_file(self, file: str | None, profile: gr.OAuthProfile | None = None, progress=gr.Progress()) -> str:
        """Validate and queue an uploaded submission zip."""
        return self.submit(file, "", profile, progress)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        store = self.site.store
        if operator_settings.on_space():
            gr.LoginButton()
            who = "the Hugging Face account you sign in with"
        else:
            who = f"**{render.plain(self.site.owner)}** (this server's local user)"
        steps, command = submit_guide(store)
        gr.Markdown(steps)
        gr.DownloadButton("Manifest schema (JSON Schema)", value=self.schema_file(), size="sm")
        gr.Markdown(command)
        gr.Markdown(f"Upload the `.zip` below, or name a Hub dataset repo holding one. It is checked at once; "
                    f"if it passes it joins the queue. You submit as {who}; {store.quota_note}.")
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


def submit_guide(store: Store, seeds: int = GUIDE_SEEDS) -> tuple[str, str]:
    """The Submit tab's steps, in the order a submitter needs them: which dataset to answer (with its
    ``load_dataset`` line), how many images, the format (the schema button goes between the two parts), and a
    ready ``culturelens generate`` command."""
    repo, config, demo = cube_1k.HUB_REPO, cube_1k.CONFIG, cube_1k.CONFIG_DEMO
    count, demo_count = prompt_count(store, config), prompt_count(store, demo)
    prompts = f"{count:,} prompts" if count else "its prompts"
    images = f"{count:,} prompts × {seeds} seeds = **{count * seeds:,} images**" if count else \
        f"every prompt × {seeds} seeds"
    demo_size = f"{demo_count} prompts" if demo_count else f"{cube_1k.DEMO_PER_CELL} prompts per country × concept"
    return f"""### Take part in four steps

**1. Answer the prompts of a dataset config.** The benchmark is CUBE-1K (`{repo}`, config `{config}`): {prompts},
each naming one cultural artifact (8 countries × cuisine, landmarks, art). To try the whole path in minutes, answer
its demo config `{demo}` ({demo_size}; demo rows are ranked only among themselves): `submissions/example` in the
repository is a complete demo submission to zip and upload.

```python
from datasets import load_dataset
prompts = load_dataset("{repo}", "{config}", split="test")   # or "{demo}"
```

**2. Make one image per prompt and seed**, the same seeds for every prompt: {images}. An image the model refused
or a safety filter blocked is listed in the manifest's `missing` list, not left out silently.

**3. Lay them out as the format says:** a `.zip` of `manifest.json` and `images/<prompt_id>/<seed>.png`. The
manifest's schema is the button below (`culturelens schema` prints it; `submissions/README.md` explains each field).
""", f"""**4. Generate and check them** with any diffusers pipeline (`--preset` carries a paper's settings):

```bash
culturelens generate --preset sdxl --dataset {repo} --config {config} --images-per-prompt {seeds} --seeds 0-{seeds - 1} --out subs/my-model
culturelens validate subs/my-model
(cd subs/my-model && zip -r ../my-model.zip .)
```
"""

"""What the app says about the suite it serves (``leaderboard.served_suite``): the Submit tab's recipe (the suite
first, the demo config as the way to try the path), a suite submission's verdict, and its parts in the Queue tab's
details. Markdown; text a submitter chose goes through ``render.plain``."""

from __future__ import annotations

from pathlib import Path

from benchmark.datasets import cube_1k
from benchmark.run_record import RunRecord
from benchmark.submission import Report
from benchmark.submission.suite import SuiteReport
from benchmark.suite import COSTS, SUITE_REPO, Suite
from benchmark.words import joined
from leaderboard import render
from leaderboard.served_suite import ServedSuite

TRY_COMMAND = (f"culturelens generate --preset sdxl --dataset {cube_1k.HUB_REPO} --config {cube_1k.CONFIG_DEMO} "
               "--images-per-prompt 1 --out subs/demo")


def _seeds(part) -> str:
    return f"seeds {part.seeds[0]}-{part.seeds[-1]}" if len(part.seeds) > 1 else f"seed {part.seeds[0]}"


def _count(value: int | None) -> str:
    return f"{value:,}" if value is not None else "not pinned yet"


def parts_table(suite: Suite, parts=None) -> str:
    """The suite's parts (or ``parts`` of them): prompts x images per prompt, and the tracks each is scored on."""
    rows = [f"| `{p.name}` | {_count(p.dataset.prompts)} × {p.images_per_prompt} ({_seeds(p)}) | "
            f"{', '.join(p.tracks)} |" for p in (suite.parts if parts is None else parts)]
    return "\n".join(["| part | prompts × images | tracks |", "|---|---|---|", *rows])


def generation_cost(suite: Suite) -> str:
    """The suite's images and the GPU-hours to generate them, per preset, marked as estimates where they are."""
    hours = [f"{suite.gpu_hours(c):,.1f} GPU-hours with {c.preset} on an {c.gpu}" for c in COSTS
             if suite.gpu_hours(c) is not None]
    measured = all(c.measured for c in COSTS)
    return (f"**{_count(suite.images)} images** in all" + (f": about {' and '.join(hours)}" if hours else "") +
            ("" if measured else " (estimates from published per-image times, not measured here: the suite's card)"))


def suite_flag(served: ServedSuite) -> tuple[str, str]:
    """How a submitter's ``generate`` names the suite this server serves, and a sentence on it where it needs one:
    the Hub default bare, another Hub repo by its id, a suite folder by a placeholder (the operator's path is never
    shown: ``SUITE_DIR``, a build of the same suite)."""
    ref = served.ref
    if ref is None or ref == SUITE_REPO:
        return "--suite", ""
    if served.assets is not None and Path(ref).is_dir():
        return "--suite SUITE_DIR", (" `SUITE_DIR` is a folder of this server's suite: `culturelens suite build --out "
                                     "SUITE_DIR` makes one from the same public sources" +
                                     ("" if served.suite.pinned else ", though this server's build is not "
                                      "pinned: ask its operator for theirs") + ".")
    return f"--suite {ref}", ""


def submit_guide(served: ServedSuite, store_datasets: Path, demo_prompts: int | None) -> tuple[str, str]:
    """The Submit tab's text, in the order a submitter needs it: the suite served (its name, the parts this server
    accepts: those whose dataset it holds), one generate, one submit, the format (the schema button goes between
    the two parts), then the demo config to try the path in minutes, where this server holds CUBE-1K."""
    suite = served.suite
    demo_size = f"{demo_prompts} prompts" if demo_prompts else f"{cube_1k.DEMO_PER_CELL} prompts per country × concept"
    accepted = [p for p in suite.parts if served.serves(p, store_datasets)]
    flag, about = suite_flag(served)
    only = (f" --parts {' '.join(p.name for p in accepted)}" if accepted and len(accepted) < len(suite.parts)
            else "")
    refused = [p.name for p in suite.parts if p not in accepted]
    held = [f"`{p.name}`" for p in accepted]
    accepts = (f"this server accepts its part{'s' if len(held) > 1 else ''} {joined(held)} only" if held else
               "this server accepts none of its parts")
    scope = ("one submission scores a model on every track" if not refused else
             f"{accepts} (it does not hold the datasets of {joined([f'`{name}`' for name in refused])}, so their "
             "tracks are off here: see the **Queue** tab); an upload holding those parts too is taken on the others, "
             "those set aside unread")
    images = sum(p.images or 0 for p in accepted)
    cost = generation_cost(suite) if not refused else f"**{images:,} images** for the parts accepted here"
    steps = f"""### Take part: one generate, one submit

**The benchmark is the suite** {render.code(suite.name)}: {scope}. For each track it says which prompts to answer
and how many images each (one seed per image):

{parts_table(suite, accepted)}

{cost}.

**1. Generate {'every part' if not refused else 'the parts accepted here'}** with any diffusers pipeline (`--preset`
carries a paper's settings; rerun the same command to resume).{about}

```bash
culturelens generate {flag}{only} --preset sdxl --out subs/my-model
culturelens validate subs/my-model{'' if flag == '--suite' else ' ' + flag}       # a report per part; the parts missing are named
```

**2. Submit it**, one submission for every part: zip the folder and upload it below, or push it as a Hub dataset
repo and name it below, or run `culturelens submit subs/my-model` where the leaderboard runs. A submission holding
some parts only (`--parts cube-1k cube-diversity`) is scored on those, and its Queue details name the missing ones.
An image the model refused or a safety filter blocked is listed in its part's manifest (`missing`), not left out
silently.

**The format:** `parts/<part>/manifest.json` and `parts/<part>/images/<prompt_id>/<seed>.png`, one folder per part,
each manifest naming its part (`submissions/README.md` explains each field; the button below gives the manifest's
JSON Schema, and `culturelens schema` prints it).
"""
    if not any(p.dataset.repo == cube_1k.HUB_REPO for p in accepted):
        return steps, ""
    demo = f"""**To try the path in minutes**, answer CUBE-1K's demo config `{cube_1k.CONFIG_DEMO}` ({demo_size}, one
image each; demo rows are ranked only among themselves): `submissions/example` in the repository is a complete demo
submission to zip and upload.

```python
from datasets import load_dataset
prompts = load_dataset("{cube_1k.HUB_REPO}", "{cube_1k.CONFIG_DEMO}", split="test")
```

```bash
{TRY_COMMAND}
(cd subs/demo && zip -r ../demo.zip .)
```
"""
    return steps, demo


def accepted_lines(report: Report | SuiteReport) -> list[str]:
    """What an accepted submission holds, one Markdown line each: its images for its prompts, or a suite
    submission's, part by part, the parts set aside (not served here: not kept) with why, and the parts it lacks."""
    if not isinstance(report, SuiteReport):
        m = report.manifest
        return [f"{len(report.images)} images, {len(m.missing)} declared missing, for {len(report.prompts)} prompts "
                f"of {render.plain(report.prompts.label)}"]
    lines = [f"part `{name}`: {len(part.images)} images, {len(part.manifest.missing)} declared missing, for "
             f"{len(part.prompts)} prompts of {render.plain(part.prompts.label)}"
             for name, part in report.parts.items()]
    lines += [f"part `{name}`: **set aside**: {render.plain(why)}" for name, why in report.set_aside.items()]
    if report.missing:
        lines.append(f"parts missing (it is scored without them): {', '.join(report.missing)}")
    return lines


def problems(report: Report | SuiteReport) -> list[str]:
    """Every problem a rejected submission has: its own, or each part's (named), the whole's and the parts set
    aside (why nothing was taken, when no part was served)."""
    if not isinstance(report, SuiteReport):
        return list(report.errors)
    return ([f"part {name}: {error}" for name, part in report.parts.items() for error in part.errors] + report.errors
            + [f"part {name}: set aside: {why}" for name, why in report.set_aside.items()])


def run_parts_lines(run: RunRecord) -> list[str]:
    """The Queue details' lines on a suite submission's results (run.json ``suite``): the parts scored, and those
    missing, which the submission did not hold."""
    record = run.suite
    if record is None:
        return []
    lines = [f"- suite {render.plain(record.repo)} v{render.plain(record.version)}: parts scored "
             f"{render.plain(', '.join(record.parts) or 'none')}"]
    if record.missing:
        lines.append(f"- **parts missing**: {render.plain(', '.join(record.missing))} (not in the submission: "
                     "their tracks have no value)")
    return lines

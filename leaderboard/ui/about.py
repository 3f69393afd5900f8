"""The About tab: the datasets this server holds, protocols and rank intervals in words, how to submit, the papers."""

from __future__ import annotations

import gradio as gr

from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from leaderboard import render, tables
from leaderboard.store import Store


def about_markdown(store: Store) -> str:
    built = cube_1k.HUB_REPO in store.dataset_folders()
    cube_dir = render.hide_paths(local_folder(store.datasets, cube_1k.HUB_REPO), render.server_places(store.root))
    status = (f"built locally in `{cube_dir}`" if built
              else f"**not built on this server yet**: run `culturelens data build cube-1k --out {cube_dir}`")
    papers = "\n".join(f"- {t.name}: {render.plain(t.citation)}" for t in track_registry.all_tracks().values())
    return f"""
## Datasets

CUBE-1K, the awareness prompts (992 prompts, 8 countries, cuisine / landmarks / art): {status}. Browse every
dataset this server holds in the **Datasets** tab.

Iconic references, the iconicity track's titles and reference images: `culturelens data build iconic-references
--records refs.jsonl --images refs/ --out DIR`, or `--from-sparql` to fetch them from Wikidata and Commons.

## Protocols and rank intervals

A score only compares with scores made the same way. Every result records its **protocol**: the dataset (repo,
config, split) and the revision of its prompt rows, the images per prompt the submission actually holds (the fewest
of any prompt it answered, not the seeds it declared: a prompt's recognition rate depends on how many images
it has), the metric's version (which names every setting that changes its values: thresholds, variant,
calibration file, tagger; for diversity the set size N and how sets are drawn) and each backbone with its
revision; its id is the first 12 hex digits of the protocol's sha256. The page names a protocol by what it is
instead: **CultureLens suite v1** for rows that answer the suite's part of the track (its prompts, pinned, and its
images per prompt), **CRT paper protocol** (and so on) for the numbers a paper published, the dataset otherwise
(**CUBE-1K demo**, **CUBE-1K, 2 images per prompt**), each with one line on how it differs from the suite's; its
fields and id are under "How to read this table". A ranking holds one protocol only: the Overview shows the
suite's when it has rows, else the track's headline protocol (the paper's settings: e.g. CRT with 10 images per
title and the paper's thresholds, CUBE's diversity with N = 8 in seed batches), and the **Protocol** picker lists
the others with their row counts. A submission made differently (4 seeds, another dataset, diversity at N = 4) is
scored and ranked under its own protocol. Paper rows carry their paper's protocol: they are ranked among
themselves and listed, not ranked, beside the others. Results scored before protocols were recorded form the
protocol `unrecorded`: they are listed but never ranked, as nothing says they were scored alike. The charts of
the Slices tab show one protocol each, the one the track's Overview ranks.

**How to read a ranked table.** Every number of a ranked row comes from one set of prompts: those every ranked
model answered. A model's **score** is its mean over them (the note gives their number, and so does n), its
**rank** orders those scores, and its **rank range**, e.g. `2-5`, is the middle 95% of its ranks when those
prompts are resampled 1,000 times (the same draw for every model, all models ranked in each draw). So a model that
declined its hardest prompts is compared with the others on the prompts it did answer, never on easier ones than
theirs. A model that answered fewer than {tables.MIN_COVERAGE:.0%} of the prompts the table's models answered
between them (say 3 of 200) is listed below, not ranked, with the reason: ranking it would shrink every other
model's comparison to its few prompts. With fewer than {tables.MIN_SHARED_PROMPTS} shared prompts there is a rank
but no range: a bootstrap over a handful of prompts would give ranges too narrow to trust. Paper rows have no
per-prompt values: they are ranked by their published value, without a range.

A **tie group** collects, reading down the table, models whose rank ranges all contain one same rank: the data
cannot put them in order. A model whose range shares no rank with all of the current group starts the next
group, so ranges of 1-2, 2-3, 3-4 and 4-5 make two groups, not one chain; models of neighbouring groups may still
overlap, and their ranges say by how much. A value that could not be measured because it lies beyond the range
measured is shown as such: a model never "used up" within the seeds W1KP can compare has a reusability of
"> k" (k the most seeds counted) and ranks first on reusability.

The **overall** ranking averages each track's win rate (the share of the other models a model beats on that
track's shared prompts) only over models scored on the same set of tracks (the picker offers the other sets),
with the same kind of range on the mean win rate. Each track's rows there are of one protocol: the suite's part
for that track when it has rows (so a model's suite submission is one row across the tracks), else the track's
headline protocol, else the papers'. Variability (W1KP) is not part of it: more variable images are not better in
themselves (pure noise is the most variable), nor are less variable ones, so it has no direction to win on; its
W1KP is shown in its own column of the row, beside the mean, and its own table orders models by W1KP.

`culturelens compare` tests every pair of models on every metric (Wilcoxon signed-rank) and corrects the
p-values with Holm's method over all those tests at once. Its intervals of a mean difference are Student-t,
or Bonett and Price's interval where the differences are -1, 0 or 1 (both models' values are 0/1 events): a
proportion's interval (Wilson's) is not one of a difference.

## Submitting

1. Generate every image of every part of the suite with one command (`culturelens generate --suite --preset NAME
   --out DIR`): it lays them out as `parts/<part>/images/<prompt_id>/<seed>.png`, each part with its
   `manifest.json` (format: `submissions/README.md`).
2. Check it with `culturelens validate DIR`, then zip it and upload it in the **Submit** tab, name it there as a
   Hub dataset, or run `culturelens submit DIR --store STORE`. Follow it in the **Queue** tab.
3. To try the path first, a submission for one dataset config (CUBE-1K's demo config, 72 prompts) takes minutes.

## Papers

{papers}

CUBE-1K data: CC BY-NC-SA 4.0 (google-deepmind/cube). Reported numbers are quoted from the papers above.
"""


def build(store: Store) -> None:
    """The tab's one component (called inside a ``gr.Tab``): the page, written when the app is built."""
    gr.Markdown(about_markdown(store))

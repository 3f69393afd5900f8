"""The About tab: the datasets this server holds, protocols and rank intervals in words, how to submit, the papers."""

from __future__ import annotations

import gradio as gr

from benchmark import ranking
from benchmark import tracks as track_registry
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from leaderboard import render
from leaderboard.store import Store


def about_markdown(store: Store) -> str:
    built = cube_1k.HUB_REPO in store.dataset_folders()
    cube_dir = render.hide_paths(local_folder(store.datasets, cube_1k.HUB_REPO), render.server_places(store.root))
    status = (f"built locally in `{cube_dir}`" if built
              else f"**not built on this server yet**: run `culturelens data build cube-1k --out {cube_dir}`")
    pinning = ("pinned" if store.suite.pinned else "from a build whose sources are not all the pinned ones, so its "
               "rows are never ranked with the pinned suite's")
    papers = "\n".join(f"- {t.name}: {render.plain(t.citation)}" for t in track_registry.all_tracks().values())
    return f"""
## Datasets

CUBE-1K, the awareness prompts (992 prompts, 8 countries, cuisine / landmarks / art): {status}. Browse every
dataset this server holds in the **Datasets** tab.

Iconic references, the iconicity track's titles and reference images: `culturelens data build iconic-references
--records refs.jsonl --images refs/ --out DIR`, or `--from-sparql` to fetch them from Wikidata and Commons.

## Protocols and rank intervals

A score only compares with scores made the same way. Every result records its **protocol**: the dataset (repo,
config, split) and the revision of its prompt rows, the images per prompt (the seeds the submission declared: an
image it declared and does not hold, refused or missing, is scored as a failure, the metric's worst value, never as
a smaller protocol, so padding the seeds and refusing some cannot pass for fewer seeds: a prompt's recognition rate
depends on how many images it has), the metric's version (which names every setting that changes its values:
thresholds, variant, calibration file, tagger; for diversity the set size N and how sets are drawn) and each
backbone with its revision; its id is the first 12 hex digits of the protocol's sha256. The page names a protocol by
what it is instead: **{store.suite.name}** for rows that answer the suite's part of the track (its prompts,
{pinning}, and its images per prompt), **CRT paper protocol** (and so on) for the numbers a paper published, the
dataset otherwise (**CUBE-1K demo**, **CUBE-1K, 2 images per prompt**), each with one line on how it differs from
the suite's; its fields and id are under "How to read this table". A ranking holds one protocol only: the Overview
shows the suite's when it has rows, else the track's headline protocol (the paper's settings: e.g. CRT with 10
images per title and the paper's thresholds, CUBE's diversity with N = 8 in seed batches), and the **Protocol**
picker lists the others with their row counts. A submission made differently (4 seeds, another dataset, diversity at
N = 4) is scored and ranked under its own protocol. Paper rows carry their paper's protocol: they are ranked among
themselves and listed, not ranked, beside the others. Results scored before protocols were recorded form the
protocol `unrecorded`: they are listed but never ranked, as nothing says they were scored alike. The charts of the
Slices tab show one protocol each, the one the track's Overview ranks.

**How to read a ranked table.** Every number of a ranked row comes from one set of prompts: the protocol's (the
dataset's prompts at the protocol's revision where this server holds it, else those any submission of the protocol
answered; on a slice, its prompts), the same for every row whoever submitted first and whatever each answered. A
model's **score** is its mean over them (the note gives their number). Its **rank** follows rank rule
{ranking.RULE_VERSION}, LMArena's: 1 + the number of models significantly better on those prompts. Two models are
compared prompt by prompt (on each, one wins or they tie), and one is significantly better when its score is
better and it wins significantly more prompts than it loses (an exact sign test), every pair of the table decided
at {ranking.CONFIDENCE:.0%} together (Bonferroni); a model above one that is above a third is above it too. So two
models at one rank never differ significantly, and models the prompts cannot tell apart share a rank. The **rank
range**, e.g. `2-5`, runs from that rank to the number of models less those significantly worse: the ranks the
comparisons allow. Rule 1, before issue 49, gave every distinct score its own rank with a bootstrap range, and
under 10 prompts let ties chain (A tied with B, B with C, and A and C, which differ, at one rank). With fewer than
{ranking.MIN_PROMPTS} prompts nothing is ranked: the values are shown, "too few prompts to rank". Paper rows have no
per-prompt values: they are ranked by their published value, without a range. One submission per model is ranked,
its latest; earlier ones are listed below it, not ranked.

**The withholding rule.** A prompt a model did not answer, refused or missing, counts in the ranking as the
metric's worst value (the end of its declared range that is worse: 0 for a recognition rate, 1 for visual reuse,
1 on relevance's 1-5 scale), and each row shows its **refusal rate** (Refused: the share of the prompt set it left
unanswered). So withholding prompts can only lower a model's score and never raises its rank, and a model that
answered few prompts is ranked with its refusals counted instead of shrinking every other model's comparison to
its own prompts. Where a track declares it, and on a track whose metric has no worse end (variability), a row that
left prompts unanswered is listed below the ranking, not ranked, with the reason; so is a row whose metric range
was not recorded. A value a metric leaves undefined by its own rule on a prompt that was answered (visual reuse
where no image was recognised) is no refusal: it is left out of that model's mean. Any other missing value counts
as a refusal: a value per prompt (CRT per reference, diversity, W1KP) needs every image the model declared for
the prompt, so a prompt sent with some of its images left out, the ones it likes kept, is not scored; nor is one
whose images could not be scored. A metric about one label (relevance to Japan) is
ranked on the prompts that name it only; its values elsewhere are shown, not ranked, since a model that makes every
image look Japanese would otherwise win it by failing every other prompt.

A **tie group** is the models sharing a rank. A value that could not be measured because it lies beyond the range
measured is shown as such: a model never "used up" within the seeds W1KP can compare has a reusability of
"> k" (k the most seeds counted). All that is known is that it exceeds k: it ranks above a measured value only
when k reaches it, and level with the others ("> 10" above 8, level with 15 and with "> 20"), a rank being 1 + the
models known to be better.

The **overall** ranking averages each track's win rate only over models scored on the same set of tracks (the picker
offers the other sets). A track's win rate comes from the same comparisons as its ranks: a model beats those
significantly worse and ties, counting half, with those it cannot be told from; its range goes from beating only
those to beating every model not significantly better. In a mean over several tracks each track's pairs are decided
at 95% shared out over the tracks, so that all the ranges hold together, and the mean's range is the mean of the
tracks' ranges; the overall rank follows by the same rule, 1 + the models whose range lies wholly above. Each
track's rows there are of one protocol: the suite's part for that track when it has rows (so a model's suite
submission is one row across the tracks), else the track's headline protocol, else the papers'. Variability (W1KP)
is not part of it: more variable images are not better in themselves (pure noise is the most variable), nor are less
variable ones, so it has no direction to win on; its W1KP is shown in its own column of the row, beside the mean,
and its own table orders models by W1KP.

A score's **95% CI** is chosen by the metric's kind, never by the values that happened to occur: Wilson's with
continuity correction for a rate (a share of events, such as a recognition rate), else the percentile-t bootstrap's,
and no side of it passes the metric's declared range. A side the prompts cannot bound (values that barely vary, a row
mostly refused) says so, "not bounded by 10 prompts", instead of showing the range's end as if it were a finding; a
row that left more than half the prompts unanswered is flagged "mostly refused". Student-t undercovers skewed
values (0.86 instead of 0.95 on lognormal ones), and the bootstrap's tails were chosen by measured coverage
(`benchmarks/coverage.py`). A judged track (expectations, relevance) says beside its ranking how far its judge, that
judge and version, agrees with the CulturalFrames raters, per image and in the order of the models, or that it
was not measured.

`culturelens compare` tests every pair of models on every metric (Wilcoxon signed-rank) and corrects the
p-values with Holm's method over all those tests at once. Its intervals of a mean difference are Bonett and
Price's interval where the differences are -c, 0 or c (both models' values are 0/1 events, or shares one image
apart), else the percentile-t's: a proportion's interval (Wilson's) is not one of a difference.

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

"""Expectations (CulturalFrames, Nayak et al., arXiv:2506.08835): does the image meet the explicit and implicit
cultural expectations of its prompt? A new model is scored by a VIEScore-style VLM judge on CulturalFrames'
prompts (``benchmark.metrics.expectations``; headline ``expectations_met``); the paper's four models keep the
raters' rows (published and recomputed from the release), under the paper's own protocol. Its commands build the
release, export a model's rated images as a submission, and meta-evaluate automatic metrics (the judge's too)
against the raters."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark import layout
from benchmark.atomic import atomic_write
from benchmark.datasets import names
from benchmark.errors import CultureLensError
from benchmark.progress import quiet_datasets
from benchmark.settings import Setting
from benchmark.track import MetricUnavailable, Protocol, Track, Verb
from benchmark.tracks.papers.culturalframes import EXPECTATIONS

ENV_EXPECTATIONS_JUDGE = "CULTURELENS_EXPECTATIONS_JUDGE"
# The judge of the headline protocol: the open VLM CAIRE found best (Table 1), of the family the paper's TIFA
# answered with (Qwen2.5-VL, Sec. 6). Off unless asked for: 16 GB of weights, two calls per image.
PROTOCOL_JUDGE = "Qwen/Qwen2.5-VL-7B-Instruct"

SETTINGS = (
    Setting("expectations_judge", None, "expectations: VLM judge (Hub id or folder) of the VIEScore-style explicit "
            f"and implicit ratings; the headline protocol's is {PROTOCOL_JUDGE}", env=ENV_EXPECTATIONS_JUDGE,
            path=True),
)


def metrics(settings, backbones) -> list:
    """Explicit, implicit and both-met expectations (0-10) rated by the VLM the settings name; unavailable
    without one, or when it cannot be loaded."""
    from benchmark.judges import JudgeUnavailable
    from benchmark.judges.expectations import ExpectationsJudge
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics import expectations

    if not settings.expectations_judge:
        raise MetricUnavailable("expectations", (
            f"no judge: pass --expectations-judge HUB_ID_OR_FOLDER (the headline protocol's: {PROTOCOL_JUDGE}) or "
            f"set {ENV_EXPECTATIONS_JUDGE} (see docs/tracks/expectations.md)"))
    try:
        judge = VLMJudge(settings.expectations_judge)
    except (JudgeUnavailable, ValueError, OSError) as error:  # the message names the model and how to provide it
        raise MetricUnavailable("expectations", str(error)) from None
    return expectations.metrics(ExpectationsJudge(judge))


def build_release(args: argparse.Namespace) -> int:
    from benchmark.datasets import culturalframes

    quiet_datasets()
    summary = culturalframes.build(args.source, Path(args.out), revision=args.revision, repo=args.repo)
    counts = ", ".join(f"{summary[k]} {k}" for k in ("prompts", "images", "ratings") if k in summary)
    print(f"built culturalframes in {args.out}: {counts}")
    if summary.get("fields_never_found"):
        print(f"fields the release does not have (left null): {', '.join(summary['fields_never_found'])}")
    return 0


def export_submission(args: argparse.Namespace) -> int:
    from benchmark.expectations import rated_images

    quiet_datasets()
    out = rated_images.export_submission(args.dataset, args.model, Path(args.out))
    print(f"wrote a submission of {args.model}'s rated images to {out}; score it with `culturelens score {out} "
          f"--out OUT --tracks expectations --expectations-judge {PROTOCOL_JUDGE}` and compare the judge with the "
          "raters with `culturelens meta-eval --results OUT/results/*`")
    return 0


def meta_evaluate(args: argparse.Namespace) -> int:
    from benchmark.datasets import culturalframes
    from benchmark.expectations import meta_eval

    files = {}
    for item in args.scores or []:
        if "=" not in item:
            raise CultureLensError(f"--scores {item!r}: expected NAME=FILE (a CSV or Parquet of image_id, score)")
        name, path = item.split("=", 1)
        files[name] = path
    if not files and not args.results:
        raise CultureLensError("nothing to evaluate: give --scores NAME=FILE and/or --results DIR --metrics NAME ...")
    scores = meta_eval.collect_scores(args.ratings, files=files, results=args.results, metrics=args.metrics,
                                      seed=args.seed)
    table = meta_eval.meta_evaluate(scores, culturalframes.load_config(args.ratings, "ratings"),
                                    criteria=args.criteria, by_country=not args.no_countries,
                                    min_images=args.min_images, n_resamples=args.resamples)
    versions = meta_eval.metric_versions(args.results or [], args.metrics or [])
    table["metric_version"] = table["metric"].map(versions).fillna("")  # uploaded files record none
    if args.store:
        folder = Path(args.store) / layout.META_EVAL
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{'-'.join(sorted(scores))[:100]}.parquet"
        atomic_write(target, lambda tmp: table.to_parquet(tmp, index=False))  # the app reads it at any moment
        print(f"the leaderboard's Metrics tab now shows {target.name}")
    if args.out:
        (table.to_parquet if args.out.endswith(".parquet") else table.to_csv)(args.out, index=False)
    if not args.out and not args.store:
        print(table.to_string(index=False))
    return 0


def human_aggregates(args: argparse.Namespace) -> int:
    from benchmark.datasets import culturalframes
    from benchmark.expectations import human

    ratings = culturalframes.load_config(args.ratings, "ratings")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    human.human_aggregates(ratings, n_resamples=args.resamples).to_csv(out / "human_aggregates.csv", index=False)
    human.agreement(ratings).to_csv(out / "agreement.csv", index=False)
    human.agreement(ratings, by=("country",)).to_csv(out / "agreement_by_country.csv", index=False)
    print(f"wrote human_aggregates.csv, agreement.csv and agreement_by_country.csv to {out}")
    return 0


def _release_options(cf: argparse.ArgumentParser) -> None:
    from benchmark.datasets import culturalframes

    cf.add_argument("--source", default=culturalframes.SOURCE_REPO,
                    help="the authors' Hub dataset repo, or a local copy of it")
    cf.add_argument("--revision", default=None, help="Hub revision of --source (commit sha or tag)")
    cf.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    cf.add_argument("--repo", default=culturalframes.HUB_REPO, help="Hub repo id the card's load snippets name")
    cf.set_defaults(run=build_release, hub=True)


def _export_options(export: argparse.ArgumentParser) -> None:
    export.add_argument("--dataset", required=True, help="folder built by `data build culturalframes`")
    export.add_argument("--model", required=True, help="model name as in the release (flux, SD35, imagegen3, ...)")
    export.add_argument("--out", required=True, help="submission folder to write")
    export.set_defaults(run=export_submission, hub=True)


def _meta_eval_options(meta: argparse.ArgumentParser) -> None:
    from benchmark.expectations.meta_eval import CRITERIA

    meta.add_argument("--ratings", required=True, help="CulturalFrames folder (or Hub repo) with the ratings config")
    meta.add_argument("--scores", action="append", help="NAME=FILE: a CSV/Parquet of image_id, score (repeatable)")
    meta.add_argument("--results", nargs="+", default=None,
                      help="results folders of exported CulturalFrames submissions")
    meta.add_argument("--metrics", nargs="+", default=None, help="metrics to take from --results")
    meta.add_argument("--seed", type=int, default=None, help="the seed to use when results have several")
    meta.add_argument("--criteria", nargs="+", choices=CRITERIA, default=["alignment", "quality", "overall"],
                      help="the raters' criteria to correlate with")
    meta.add_argument("--no-countries", action="store_true", help="overall only, no per-country rows")
    meta.add_argument("--min-images", type=int, default=20, help="fewest images a correlation is computed on")
    meta.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples for the CIs")
    meta.add_argument("--out", default=None, help="write the table to this .csv or .parquet")
    meta.add_argument("--store", default=None, help="also show it in this leaderboard store's Metrics tab")
    meta.set_defaults(run=meta_evaluate, hub=True)


def _human_options(humans: argparse.ArgumentParser) -> None:
    humans.add_argument("--ratings", required=True, help="CulturalFrames folder (or Hub repo) with the ratings config")
    humans.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples for the CIs")
    humans.add_argument("--out", required=True, help="folder for the CSV tables")
    humans.set_defaults(run=human_aggregates, hub=True)


TRACK = Track(
    "expectations", "Expectations (CulturalFrames)", "expectations_met",
    "Does the image meet the explicit and implicit cultural expectations of its prompt?",
    r"""
CulturalFrames' 983 prompts (10 countries, 5 domains), one image each. A VLM judge (VIEScore-style, with the
paper's Fig. 24 rater instructions narrowed to one kind) rates each image 0-10 twice: **explicit** expectations
(the elements the prompt's words state) and **implicit** ones (what the cultural context calls for: attire, food,
gestures, setting). Headline **expectations met** = min(explicit, implicit), as VIEScore combines sub-scores and
as the raters give full alignment only when both kinds are met. Each rating is the judge's expected answer,
Σ k·P(k) over the answers 0..10 read by constrained decoding (G-Eval's scoring function). Headline protocol:
judge Qwen2.5-VL-7B-Instruct.

The paper's four models keep the raters' rows (their own protocol): three raters per image, alignment {0, ½, 1}
with explicit / implicit error flags, stereotype flag, quality {0, ½, 1}, overall 1-5; mean alignment, failure
rate (share < 1) and its explicit / implicit split; agreement by Krippendorff's α. The **Metrics** tab ranks
automatic metrics, this judge's included, by Spearman ρ with the raters per criterion, against the
leave-one-rater-out human ceiling.
""", EXPECTATIONS,
    Protocol(str(names.CULTURALFRAMES), 1, "2 (judge ", judge=PROTOCOL_JUDGE),
    settings=SETTINGS, metrics=metrics, order=60,
    verbs=(Verb("culturalframes", "CulturalFrames prompts, rated images and per-rater ratings from the authors' "
                "release", "culturelens data build culturalframes --source mair-lab/CulturalFrames "
                "--out data/culturalframes", _release_options, under=("data", "build")),
           Verb("export-culturalframes", "one model's rated CulturalFrames images as a submission, so the harness "
                "scores the images the raters saw",
                "culturelens export-culturalframes --dataset data/culturalframes --model flux --out subs/cf-flux",
                _export_options),
           Verb("meta-eval", "rank automatic metrics by Spearman correlation with the CulturalFrames raters",
                "culturelens meta-eval --ratings data/culturalframes --scores viescore=vie.csv --store .culturelens",
                _meta_eval_options),
           Verb("human-aggregates", "CulturalFrames human results per model x country x domain with bootstrap CIs, "
                "and Krippendorff's alpha", "culturelens human-aggregates --ratings data/culturalframes --out cf/",
                _human_options)))

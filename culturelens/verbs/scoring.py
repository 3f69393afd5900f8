"""``culturelens score``, ``compare``, ``reproduce`` and ``calibrate``: scoring outside the leaderboard, paired
tests between results, re-running a recorded result, and fitting a W1KP calibration."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark import settings as declared
from benchmark.encoders.spec import load_registry
from benchmark.progress import quiet_datasets
from benchmark.track import Verb
from culturelens import options
from leaderboard.operator_settings import STORE


def score(args: argparse.Namespace) -> int:
    from benchmark import scoring
    from benchmark.submission.suite import is_suite_upload
    from benchmark.suite_assets import open_suite

    quiet_datasets()
    store_datasets = options.store(args) / "datasets"
    named = options.suite(args)
    suite = open_suite(named, store_datasets) if named or is_suite_upload(Path(args.submission)) else None
    if suite is not None and suite.assets is not None:
        options.use_suite_assets(vars(args), suite.assets)  # the index, knowledge base and calibration it holds
    else:  # before any relaunch: one process builds, the shards find the local copy
        options.build_default_dataset(store_datasets, options.cube_source(args))
    if args.num_processes > 1 and not scoring.launched_by_accelerate():
        return scoring.relaunch_with_accelerate(args.num_processes, sys.argv[1:])
    return scoring.main(Path(args.submission), Path(args.out), options.scoring_options(vars(args)),
                        store=options.store(args), cache=Path(args.cache) if args.cache else None, suite=suite)


def reproduce(args: argparse.Namespace) -> int:
    """Redo the scoring RESULT's run.json records and print the largest difference per metric: 0 when every
    difference is within --tolerance, 1 when one is not; a ReproduceError (exit 2) when it cannot be redone (a
    symbolic link or a damaged table in the result, its submission or its cache is one such case, found before
    anything is scored)."""
    from benchmark import reproduce

    quiet_datasets()
    return reproduce.main(args.result, store=options.store(args), submission=args.submission,
                          backbones=args.backbones, device=args.device, batch_size=args.batch_size,
                          num_workers=args.num_workers, tolerance=args.tolerance, use_cache=args.use_cache,
                          suite=options.suite(args), allow_fetch=args.allow_fetch)


def calibrate(args: argparse.Namespace) -> int:
    from benchmark import calibrate

    quiet_datasets()
    return calibrate.main(Path(args.sample), Path(args.out), backbone_id=args.backbone,
                          registry=load_registry(args.backbones), datasets_root=options.store(args) / "datasets",
                          device=args.device, batch_size=args.batch_size, num_workers=args.num_workers, cdf=args.cdf)


def compare(args: argparse.Namespace) -> int:
    from benchmark import compare

    return compare.main([Path(r) for r in args.results], [Path(p) for p in args.perturbed] if args.perturbed else None,
                        args.metrics)


def _score_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("submission", help="submission folder or .zip (a suite submission: every part with its tracks)")
    p.add_argument("--out", required=True, help="folder for submission/, results/ (and the cache by default)")
    options.add_store(p, "store whose datasets/ holds local datasets")
    p.add_argument("--cache", default=None, help="embedding cache file (default: OUT/cache.sqlite)")
    p.add_argument("--num-processes", type=int, default=1,
                   help="shard images over this many processes with `accelerate launch`")
    options.add_cube_source(p, "into the store")
    options.add_suite(p, "a suite submission answers, whose scoring assets (artifact index, knowledge base, W1KP "
                         "calibration) also set the metric settings not given")
    declared.add_runtime_options(p)
    options.add_metric_options(p)
    p.set_defaults(run=score, hub=True)


def _compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", help="results folders (with per_image.parquet), one per model")
    p.add_argument("--perturbed", nargs="+", default=None,
                   help="the same models' results on a perturbed config, in the same order")
    p.add_argument("--metrics", nargs="+", default=None, help="metrics to test (default: all shared)")
    p.set_defaults(run=compare)


def _reproduce_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="results folder (STORE/results/ID, or OUT/results/ID of `culturelens score`), "
                                  "or a submission id of --store")
    options.add_store(p, "store of a submission id; its datasets/ holds the datasets of a `score` output")
    p.add_argument("--submission", default=None,
                   help="the validated submission folder (default: STORE/submissions/ID, or OUT/submission next to "
                        "a `score` output)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="largest absolute difference still counted as equal (exit 1 beyond it)")
    p.add_argument("--use-cache", action="store_true",
                   help="reuse the store's (or the `score` output's) embedding cache instead of a fresh one (never "
                        "through a symbolic link: a linked cache is refused)")
    p.add_argument("--allow-fetch", action="store_true",
                   help="fetch the URLs the result's run.json names for its settings (a calibration file); without "
                        "it nothing a record names is fetched. Each fetched file must have the digest the record pins")
    options.add_suite(p, "a suite result answers, whose datasets its parts are checked against and scored on")
    declared.add_runtime_options(p)
    p.set_defaults(run=reproduce, batch_size=None, hub=True)  # None: the batch size the result records


def _calibrate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("sample", help="a submission (folder or .zip) with several seeds per prompt")
    p.add_argument("--backbone", required=True, help="backbone id whose distances to calibrate")
    p.add_argument("--out", required=True, help="the .npz to write (cdf_x, cdf_y)")
    p.add_argument("--cdf", choices=["empirical", "authors_code"], default="empirical",
                   help="F(x) = share of the sample <= x, or the authors' compute_cdf (sample padded with 0 and 1, "
                        "i / (N + 2))")
    options.add_store(p, "store whose datasets/ holds local datasets")
    declared.add_runtime_options(p)
    p.set_defaults(run=calibrate, hub=True)


VERBS = (
    Verb("score", "score a submission outside the leaderboard and write its results as Parquet",
         "culturelens score my_submission.zip --out results/ --tracks awareness", _score_options),
    Verb("compare", "paired tests between models, VR@k, and deltas under prompt perturbations",
         "culturelens compare runs/sdxl/results/X runs/sd3/results/Y --metrics crt vr", _compare_options),
    Verb("reproduce", "re-run the scoring a result's run.json records (settings, backbones, dataset, seeds) on its "
                      "stored submission and print the largest difference per metric",
         f"culturelens reproduce SUBMISSION_ID --store {STORE.default}", _reproduce_options),
    Verb("calibrate", "fit a W1KP distance calibration for a backbone from a reference sample",
         "culturelens calibrate reference_sample/ --backbone dinov2-base --out dinov2-w1kp.npz", _calibrate_options),
)

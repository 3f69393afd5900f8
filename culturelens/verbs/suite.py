"""``culturelens suite build`` and ``culturelens suite push``: every dataset and scoring asset of the suite, from
public sources at pinned versions, into one folder, and that folder published as Hub datasets
(``benchmark.suite_build``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark import settings as declared
from benchmark.progress import quiet_datasets
from benchmark.track import Verb
from culturelens import options

EXIT_NOT_BUILT = 1  # some asset asked for could not be built: the others were, and the lines above say why


def build(args: argparse.Namespace) -> int:
    from benchmark.encoders.spec import load_registry
    from benchmark.suite_build import build as build_suite

    quiet_datasets()
    sources = {"cube-1k": args.cube_source, "artifact-index": args.cspace_source,
               "culturalframes": args.culturalframes_source, "w1kp-calibration": args.w1kp_source,
               "iconic-references": (args.iconic_records, args.iconic_images) if args.iconic_records else None,
               "relevance-kb": (args.kb_records, args.kb_images) if args.kb_records else None}
    outcomes = build_suite(Path(args.out), sources, only=args.only, registry=load_registry(args.backbones),
                           device=args.device, batch_size=args.batch_size, prune=not args.no_prune, ner=args.ner,
                           culturalframes_revision=args.culturalframes_revision)
    for outcome in outcomes:
        print(f"{'built' if outcome.built else 'NOT BUILT'} {outcome.asset}: {outcome.detail}")
    print(f"the suite folder: {args.out} (its card: {args.out}/README.md); generate with `culturelens generate "
          f"--suite {args.out} ...`, score with `--suite {args.out}`")
    return 0 if all(o.built for o in outcomes) else EXIT_NOT_BUILT


def push(args: argparse.Namespace) -> int:
    from benchmark.suite_build import push as push_suite

    published = push_suite(Path(args.dir), args.repo, token=args.token, private=args.private,
                           to_folder=Path(args.to_folder) if args.to_folder else None)
    for what, where in published:
        print(f"published {what} to {where}")
    return 0


def _two(parser: argparse.ArgumentParser, asset: str, records: str, images: str) -> None:
    parser.add_argument(records, default=None, help=f"{asset}: the records file (JSON Lines)")
    parser.add_argument(images, default=None, help=f"{asset}: the folder of the images the records name")


def _build_options(p: argparse.ArgumentParser) -> None:
    from benchmark.suite import SOURCES, source
    from benchmark.suite_build import ORDER

    p.add_argument("--out", required=True, help="the suite folder (created; an earlier build's is updated)")
    p.add_argument("--only", nargs="+", choices=ORDER, default=None, metavar="ASSET",
                   help=f"build only these assets, of {', '.join(ORDER)} (default: all)")
    p.add_argument("--cube-source", default=options.default_cube_source(),
                   help="the CUBE authors' cube_1k.json, path or URL (default: the pinned file)")
    p.add_argument("--cspace-source", default=None,
                   help=f"the CUBE authors' CSpace file, path or URL (default {source('artifact-index').default})")
    _two(p, "iconic-references", "--iconic-records", "--iconic-images")
    p.add_argument("--no-prune", action="store_true", help="iconic-references: keep every depiction")
    p.add_argument("--ner", default=None, help="iconic-references: token-classification model for the title filter")
    p.add_argument("--culturalframes-source", default=None,
                   help=f"the CulturalFrames release, Hub repo id or local copy (default {source('culturalframes').default})")
    p.add_argument("--culturalframes-revision", default=None, help="Hub commit of --culturalframes-source")
    _two(p, "relevance-kb", "--kb-records", "--kb-images")
    p.add_argument("--w1kp-source", default=options.default_w1kp_source(),
                   help="the W1KP authors' cdf-xy.pt (or an .npz calibration), path or URL (default: the pinned file)")
    declared.add_runtime_options(p)
    p.epilog = (p.epilog or "") + "\n\nsources and pins:\n" + "\n".join(
        f"  {s.asset}: {s.what}; default {s.default or 'none (' + s.how + ')'}; pin {s.pin or 'none'}" for s in SOURCES)
    p.set_defaults(run=build, hub=True)


def _push_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="a suite folder made by `culturelens suite build`")
    p.add_argument("--repo", required=True,
                   help="the suite's Hub dataset repo, ORG/NAME; each dataset goes to ORG/<its name>")
    p.add_argument("--to-folder", default=None,
                   help="write the repos into this folder (ORG__NAME each) instead of the Hub")
    p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
    p.add_argument("--private", action="store_true", help="create the repos as private")
    p.set_defaults(run=push)


VERBS = (
    Verb("build", "every dataset and scoring asset of the suite, from public sources at pinned versions, into one "
                  "folder", "culturelens suite build --out suite/", _build_options, under=("suite",)),
    Verb("push", "publish a suite folder as Hub datasets: the suite repo and one repo per dataset",
         "culturelens suite push suite/ --repo culturelens/suite", _push_options, under=("suite",)),
)

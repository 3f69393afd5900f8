"""``culturelens suite build``, ``suite status`` and ``suite push``: every dataset and scoring asset of the suite,
from public sources (pinned, or at the revisions the build records), into one folder (``benchmark.suite_build``);
what a folder lets ``make run`` serve; and that folder published as Hub datasets."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark import settings as declared
from benchmark.progress import quiet_datasets
from benchmark.errors import CultureLensError
from benchmark.track import Verb

EXIT_NOT_BUILT = 1  # some asset asked for could not be built: the others were, and the lines above say why


def build(args: argparse.Namespace) -> int:
    from benchmark.encoders.spec import load_registry
    from benchmark.suite_build import build as build_suite
    from benchmark.suite_build import read_pins

    quiet_datasets()
    sources = {"cube-1k": args.cube_source, "artifact-index": args.cspace_source,
               "culturalframes": args.culturalframes_source, "w1kp-calibration": args.w1kp_source,
               "iconic-references": (args.iconic_records, args.iconic_images) if args.iconic_records else None,
               "relevance-kb": (args.kb_records, args.kb_images) if args.kb_records else None}
    for asset, pair, flags in (("iconic-references", (args.iconic_records, args.iconic_images),
                                "--iconic-records and --iconic-images"),
                               ("relevance-kb", (args.kb_records, args.kb_images), "--kb-records and --kb-images")):
        if any(pair) and not all(pair):
            raise CultureLensError(f"{asset}: give both {flags} (or neither: then it is built from public sources)")
    outcomes = build_suite(Path(args.out), sources, only=args.only, registry=load_registry(args.backbones),
                           device=args.device, batch_size=args.batch_size, prune=not args.no_prune, ner=args.ner,
                           culturalframes_revision=args.culturalframes_revision, refresh=args.refresh,
                           pins_from=read_pins(args.pins) if args.pins else None)
    for outcome in outcomes:
        print(f"{'built' if outcome.built else 'NOT BUILT'} {outcome.asset}: {outcome.detail}")
    if weights := {o.asset: o.backbone for o in outcomes if o.backbone}:
        print(weights_line(args.out, weights))
    from benchmark.suite_assets import Assets

    assets = Assets(Path(args.out))
    if assets.unpinned:
        print(f"an unpinned build ({', '.join(assets.unpinned)} not from the pinned sources): its rows are called "
              f"\"{assets.suite.name}\" and never ranked with the pinned suite's")
    card = Path(args.out) / "README.md"  # not "suite//README.md" where --out ends with a slash (the README's)
    print(f"the suite folder: {args.out} (its card: {card}); generate with `culturelens generate "
          f"--suite {args.out} ...`, score with `--suite {args.out}`")
    return 0 if all(o.built for o in outcomes) else EXIT_NOT_BUILT


def weights_line(out: str, weights: dict[str, str]) -> str:
    """What ``suite build`` says after assets it could not build for want of weights (asset -> backbone): which
    weights, and the command that builds those assets once a backbones file names local copies."""
    from benchmark.settings import BACKBONES

    needs = {}
    for asset, backbone in weights.items():
        needs.setdefault(backbone, []).append(asset)
    which = "; ".join(f"{backbone} for {', '.join(assets)}" for backbone, assets in needs.items())
    return (f"not built for want of weights ({which}): where the Hub answers they download on first use; offline, "
            f"write a backbones file naming local copies (docs/scoring.md, \"Backbones\") and build the rest: `culturelens "
            f"suite build --out {out} --only {' '.join(weights)} --backbones FILE` (with make: `make run BUILD_SUITE=1 "
            f"{BACKBONES.env}=FILE`); what was built is kept")


def status(args: argparse.Namespace) -> int:
    """What `make run` serves: the tracks the suite folder turns on, and for those off, whether the public
    sources can be reached from here to build them."""
    from benchmark.downloads import unreachable
    from benchmark.suite_assets import serving

    folder = Path(args.dir)
    lines, missing = serving(folder, judges_off(args.expectations_judge, args.relevance_judge))
    for line in lines:
        print(line)
    if not missing:
        return 0
    down = unreachable()
    build = f"culturelens suite build --out {folder}"
    if not down:
        print(f"the public sources answer from here: `make run BUILD_SUITE=1` builds the suite first ({build}: "
              "downloads resumable, progress shown), then serves it; or run that command and restart")
    else:
        print(f"offline ({', '.join(down)} cannot be reached): {', '.join(missing)} stay off until `{build}` runs "
              "where there is network (its folder, copied here, is served with `make run SUITE=DIR`)")
    return 0


def judges_off(expectations: str | None, relevance: str | None) -> dict[str, str]:
    """Track -> why its VLM judge cannot run where ``make run`` runs, and the ``make run`` variable that gives it
    one, for the judged tracks (``--expectations-judge`` and ``--relevance-judge``, else their variables and
    defaults): none chosen (expectations has no default: 16 GB of weights), or a Hub model neither in the Hugging
    Face cache nor downloadable from here. A folder, and relevance's CLIP probe, can run."""
    from benchmark.tracks import expectations as expectations_track
    from benchmark.tracks import relevance as relevance_track
    from culturelens.hub_access import hub_reachable

    off, online = {}, []  # the Hub asked at most once
    relevance_judge = _setting(relevance_track.SETTINGS, "relevance_judge")
    chosen = {"expectations": ("EXPECTATIONS_JUDGE", expectations_track.SETTINGS[0].resolve(expectations)),
              "relevance": ("RELEVANCE_JUDGE", relevance_judge.resolve(relevance))}
    for track, (variable, judge) in chosen.items():
        model = expectations_track.PROTOCOL_JUDGE
        if not judge:
            off[track] = (f"no VLM judge chosen: `make run {variable}={model}` (the headline protocol's, ~16 GB, "
                          "downloaded on first use) or a local folder of a model")
        elif judge != "probe" and not Path(judge).is_dir() and not _cached(judge) and not (
                online or online.append(hub_reachable()) or online[0]):
            off[track] = (f"its judge {judge} is not in the Hugging Face cache and the Hub cannot be reached: "
                          f"`make run {variable}=DIR` (a local copy of the model)"
                          + (" or `RELEVANCE_JUDGE=probe` (the CLIP-probe baseline)" if track == "relevance" else ""))
    return off


def _setting(declared, name: str):
    return next(s for s in declared if s.name == name)


def _cached(model: str) -> bool:
    """Whether the Hugging Face cache holds the Hub model ``model`` (its config)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except ValueError:  # not a Hub repo id
        return False


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

    p.add_argument("--out", required=True, help="the suite folder (created; an earlier build's is updated, at its "
                                                "recorded pins)")
    p.add_argument("--only", nargs="+", choices=ORDER, default=None, metavar="ASSET",
                   help=f"build only these assets, of {', '.join(ORDER)} (default: all)")
    p.add_argument("--refresh", nargs="+", choices=ORDER, default=None, metavar="ASSET",
                   help="read these assets from the current public sources, not at the pins an earlier build of "
                        "this folder recorded (new revisions, commits and images: a new pin)")
    p.add_argument("--pins", default=None, metavar="SUITE",
                   help="build at the pins of another suite (a folder, its suite.json, or a Hub repo such as "
                        "culturelens/suite): the same revisions, commits and bytes")
    p.add_argument("--cube-source", default=None,
                   help=f"the CUBE authors' cube_1k.json, path or URL (default {source('cube-1k').default})")
    p.add_argument("--cspace-source", default=None,
                   help=f"the CUBE authors' CSpace file, path or URL (default {source('artifact-index').default})")
    _two(p, "iconic-references", "--iconic-records", "--iconic-images")
    p.add_argument("--no-prune", action="store_true", help="iconic-references: keep every depiction")
    p.add_argument("--ner", default=None, help="iconic-references: token-classification model for the title filter")
    p.add_argument("--culturalframes-source", default=None,
                   help=f"the CulturalFrames release, a local copy (default the Hub dataset "
                        f"{source('culturalframes').default})")
    p.add_argument("--culturalframes-revision", default=None, help="the Hub commit of CulturalFrames to read "
                                                                    "(default: the recorded one, else main's)")
    _two(p, "relevance-kb", "--kb-records", "--kb-images")
    p.add_argument("--w1kp-source", default=None,
                   help=f"the W1KP authors' cdf-xy.pt (or an .npz calibration), path or URL (default "
                        f"{source('w1kp-calibration').default})")
    declared.add_runtime_options(p)
    p.epilog = (p.epilog or "") + "\n\nsources and pins (every asset has a public source; a file given instead is " \
        "built and recorded as not pinned):\n" + "\n".join(
            f"  {s.asset}: {s.what}; default {s.default}; instead: {s.how}; pin {s.pinned_by}" for s in SOURCES) + \
        "\n\nthe public services' addresses: " + ", ".join(e.env for e in declared.PUBLIC_SOURCES) + \
        " (a mirror's when set)"
    p.set_defaults(run=build, hub=True)


def _status_options(p: argparse.ArgumentParser) -> None:
    from benchmark.tracks import expectations, relevance

    p.add_argument("dir", nargs="?", default="suite", help="the suite folder `make run` serves (default: suite)")
    for setting in (expectations.SETTINGS[0], _setting(relevance.SETTINGS, "relevance_judge")):
        setting.add_to(p, help=f"the judge `make run` passes to serve ({setting.help})")
    p.set_defaults(run=status)


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
    Verb("build", "every dataset and scoring asset of the suite, from public sources (pinned, or recorded at build), "
                  "into one folder", "culturelens suite build --out suite/", _build_options, under=("suite",)),
    Verb("status", "what a suite folder lets `make run` serve, and whether the public sources to build the rest "
                   "can be reached from here", "culturelens suite status suite/", _status_options, under=("suite",)),
    Verb("push", "publish a suite folder as Hub datasets: the suite repo and one repo per dataset",
         "culturelens suite push suite/ --repo culturelens/suite", _push_options, under=("suite",)),
)

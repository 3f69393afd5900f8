"""``culturelens data build cube-1k``, ``culturelens data push`` and ``culturelens schema``: the default dataset,
publishing a built dataset, and the submission manifest's JSON Schema. The other datasets' builders are their
tracks' verbs (``benchmark.tracks``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.progress import quiet_datasets
from benchmark.track import Verb


def build_cube_1k(args: argparse.Namespace) -> int:
    from benchmark.datasets import cube_1k

    quiet_datasets()
    summary = cube_1k.build(args.source, Path(args.out), repo=args.repo)
    print(f"built cube-1k: {summary['prompts']} prompts ({summary['records']} upstream records; the demo config "
          f"{cube_1k.CONFIG_DEMO}: {summary['demo_prompts']}) in {summary['out']}")
    for code, count in summary["defects"].items():
        if count:
            print(f"  defect {code}: {count} record(s)")
    print(f'load it with: datasets.load_dataset("{summary["out"]}", "{cube_1k.CONFIG}")')
    return 0


def push(args: argparse.Namespace) -> int:
    from benchmark.datasets.hub_layout import push_folder

    url = push_folder(Path(args.dir), args.repo, token=args.token, private=args.private)
    print(f"published {args.dir} to {url}")
    return 0


def schema(args: argparse.Namespace) -> int:
    from benchmark.submission import json_schema

    text = json_schema()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _cube_1k_options(p: argparse.ArgumentParser) -> None:
    from benchmark.datasets.cube_1k import DEFAULT_SOURCE, HUB_REPO

    p.add_argument("--source", default=DEFAULT_SOURCE, help="authors' JSON: path or http(s) URL")
    p.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    p.add_argument("--repo", default=HUB_REPO, help="Hub repo id the card's load snippets name")
    p.set_defaults(run=build_cube_1k)


def _push_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="folder made by `culturelens data build`")
    p.add_argument("--repo", required=True, help="Hub dataset repo, ORG/NAME")
    p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
    p.add_argument("--private", action="store_true", help="create the repo as private")
    p.set_defaults(run=push)


def _schema_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="write to this file instead of stdout")
    p.set_defaults(run=schema)


VERBS = (
    Verb("cube-1k", "CUBE-1K prompts from the authors' JSON, checked and cleaned, with its demo config",
         "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", _cube_1k_options,
         under=("data", "build")),
    Verb("push", "publish a built dataset folder to the Hugging Face Hub (a maintainer publishes the default "
                 "dataset with `data build cube-1k --out DIR`, then `data push DIR --repo culturelens/cube-1k`; until "
                 "then every verb that needs it builds it locally from --cube-source)",
         "culturelens data build cube-1k --out data/cube-1k && culturelens data push data/cube-1k "
         "--repo culturelens/cube-1k", _push_options, under=("data",)),
    Verb("schema", "print the submission manifest's JSON Schema",
         "culturelens schema --out submissions/manifest.schema.json", _schema_options),
)

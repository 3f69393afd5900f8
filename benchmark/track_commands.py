"""CLI verbs of the CUBE, CAIRE and CulturalFrames tracks: their dataset builders and their indexes, and the
metric meta-evaluation. ``benchmark.cli`` registers them; each returns a process exit code."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark.cli import _quiet_datasets as _quiet, _registry
from benchmark.errors import CultureLensError


# --- dataset builders -------------------------------------------------------------------------------------
def cmd_build_cspace(args: argparse.Namespace) -> int:
    from benchmark.datasets import cspace

    _quiet()
    if args.cspace_file and args.hops != cspace.DEFAULT_HOPS:
        raise CultureLensError("--hops applies to the Wikidata walk (--dump), not to a --cspace-file")
    if args.dump:
        out = cspace.build_cspace(Path(args.dump), Path(args.out), args.hops, countries=args.countries,
                                  repo=args.repo)
    else:
        out = cspace.build_cspace_from_file(Path(args.cspace_file), Path(args.out), concept=args.concept,
                                            countries=args.countries, repo=args.repo)
    print(f"built cube-cspace in {out}; counts and what was skipped: {out}/README.md")
    print(f'load it with: datasets.load_dataset("{out}", "{cspace.CONFIG}")')
    return 0


def cmd_build_diversity(args: argparse.Namespace) -> int:
    from benchmark.datasets import cube_diversity

    _quiet()
    out = cube_diversity.build_diversity(Path(args.out), repo=args.repo)
    print(f"built cube-diversity: {len(cube_diversity.diversity_prompts())} prompts in {out}")
    print(f"generate with: culturelens generate --dataset {out} --config {cube_diversity.CONFIG} "
          "--images-per-prompt 80 --seeds 0-79 ...")
    return 0


def cmd_build_culturalframes(args: argparse.Namespace) -> int:
    from benchmark.datasets import culturalframes

    _quiet()
    summary = culturalframes.build(args.source, Path(args.out), revision=args.revision, repo=args.repo)
    counts = ", ".join(f"{summary[k]} {k}" for k in ("prompts", "images", "ratings") if k in summary)
    print(f"built culturalframes in {args.out}: {counts}")
    if summary.get("fields_never_found"):
        print(f"fields the release does not have (left null): {', '.join(summary['fields_never_found'])}")
    return 0


def cmd_export_culturalframes(args: argparse.Namespace) -> int:
    from benchmark.datasets import culturalframes

    _quiet()
    out = culturalframes.export_submission(args.dataset, args.model, Path(args.out))
    print(f"wrote a submission of {args.model}'s rated images to {out}; score it with `culturelens score {out}`")
    return 0


# --- indexes ----------------------------------------------------------------------------------------------
def cmd_artifact_index(args: argparse.Namespace) -> int:
    import datasets

    from benchmark.encoders import load_backbone
    from benchmark.tagging import ArtifactIndex

    _quiet()
    try:
        table = datasets.load_dataset(args.cspace, "cspace", split="test").to_pandas()
    except FileNotFoundError as error:  # neither a folder nor a Hub dataset of that name
        raise CultureLensError(f"--cspace {args.cspace}: {error}; build it with `culturelens data build "
                               "cube-cspace --out DIR` and pass DIR") from None
    backbone = load_backbone(args.backbone, _registry(args), args.device)
    index = ArtifactIndex.from_backbone(table, backbone, template=args.template)
    index.save(Path(args.out))
    print(f"wrote the artifact index ({len(table)} artifacts, {args.backbone}) to {args.out}; "
          f"score with --artifact-index {args.out}")
    return 0


def cmd_kb_index(args: argparse.Namespace) -> int:
    from benchmark.encoders import load_backbone
    from benchmark.relevance import kb

    # The records and their images first (KnowledgeBaseError), before minutes of loading weights.
    kb.image_table(kb.read_records(Path(args.records)), Path(args.images), show_progress=False)
    backbone = load_backbone(args.backbone, _registry(args), args.device)
    kb.build_index(Path(args.records), Path(args.images), Path(args.out), backbone)
    print(f"wrote the knowledge-base index to {args.out}; score relevance with --relevance-kb {args.out}")
    return 0


# --- meta-evaluation --------------------------------------------------------------------------------------
def cmd_meta_eval(args: argparse.Namespace) -> int:
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
    if args.store:
        from leaderboard.store import Store

        store = Store(Path(args.store))
        store.meta_eval.mkdir(parents=True, exist_ok=True)
        target = store.meta_eval / f"{'-'.join(sorted(scores))[:100]}.parquet"
        table.to_parquet(target, index=False)
        print(f"the leaderboard's Metrics tab now shows {target.name}")
    if args.out:
        (table.to_parquet if args.out.endswith(".parquet") else table.to_csv)(args.out, index=False)
    if not args.out and not args.store:
        print(table.to_string(index=False))
    return 0


def cmd_human(args: argparse.Namespace) -> int:
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


def _at_least_one(text: str) -> int:
    """``--hops``: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def _countries(text: str) -> list[str]:
    """``--countries``: comma-separated ISO codes or names, each a country the builder knows."""
    from benchmark import geo

    countries = [c.strip() for c in text.split(",")]
    try:
        for country in countries:
            geo.country_code(country)
    except geo.UnknownCountry as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return countries


def _options_cspace(cs: argparse.ArgumentParser) -> None:
    from benchmark.datasets import cspace

    source = cs.add_mutually_exclusive_group(required=True)
    source.add_argument("--dump", help="Wikidata JSON dump (.json, .json.gz or .json.bz2)")
    source.add_argument("--cspace-file", help="CSpace file: the authors' release (.tar.gz/.json), JSON Lines or CSV "
                                              "with artifact, country and concept columns")
    cs.add_argument("--hops", type=_at_least_one, default=cspace.DEFAULT_HOPS, help="maximum hops from the root nodes")
    cs.add_argument("--countries", type=_countries, default=None,
                    help="keep only these countries (ISO codes or names, comma-separated); the paper's eight: "
                         "BR,FR,IN,IT,JP,NG,TR,US")
    cs.add_argument("--concept", choices=["cuisine", "landmarks", "art"], default=None,
                    help="concept of a --cspace-file whose records name none")
    cs.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    cs.add_argument("--repo", default=cspace.HUB_REPO, help="Hub repo id the card's load snippets name")
    cs.set_defaults(run=cmd_build_cspace)


def _options_diversity(div: argparse.ArgumentParser) -> None:
    from benchmark.datasets import cube_diversity

    div.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    div.add_argument("--repo", default=cube_diversity.HUB_REPO, help="Hub repo id for the card")
    div.set_defaults(run=cmd_build_diversity)


def _options_culturalframes(cf: argparse.ArgumentParser) -> None:
    from benchmark.datasets import culturalframes

    cf.add_argument("--source", default=culturalframes.SOURCE_REPO,
                    help="the authors' Hub dataset repo, or a local copy of it")
    cf.add_argument("--revision", default=None, help="Hub revision of --source (commit sha or tag)")
    cf.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    cf.add_argument("--repo", default=culturalframes.HUB_REPO, help="Hub repo id the card's load snippets name")
    cf.set_defaults(run=cmd_build_culturalframes, hub=True)


def register_builders(datasets_, verb) -> None:
    """Add this module's dataset builders under ``culturelens data build`` (``verb`` makes a documented
    sub-parser whose options are added when it is chosen)."""
    verb("cube-cspace", "CUBE-CSpace: Algorithm 1 walk over a Wikidata dump, or a CSpace file you provide",
         "culturelens data build cube-cspace --dump latest-all.json.gz --out data/cube-cspace", datasets_,
         options=_options_cspace)
    verb("cube-diversity", "CUBE's under-specified diversity prompts (3 concepts x 5 rephrasings)",
         "culturelens data build cube-diversity --out data/cube-diversity", datasets_, options=_options_diversity)
    verb("culturalframes", "CulturalFrames prompts, rated images and per-rater ratings from the authors' release",
         "culturelens data build culturalframes --source mair-lab/CulturalFrames --out data/culturalframes",
         datasets_, options=_options_culturalframes)


def _options_export(export: argparse.ArgumentParser) -> None:
    export.add_argument("--dataset", required=True, help="folder built by `data build culturalframes`")
    export.add_argument("--model", required=True, help="model name as in the release (flux, SD35, imagegen3, ...)")
    export.add_argument("--out", required=True, help="submission folder to write")
    export.set_defaults(run=cmd_export_culturalframes, hub=True)


def _options_artifact_index(artifacts: argparse.ArgumentParser, add_backbone_options) -> None:
    artifacts.add_argument("--cspace", required=True, help="CSpace dataset: Hub repo id or local folder")
    artifacts.add_argument("--backbone", default="clip-vit-b-32", help="backbone id whose text side embeds names")
    artifacts.add_argument("--template", default="a photo of {artifact}", help="text embedded per artifact")
    artifacts.add_argument("--out", required=True, help="index folder to write")
    add_backbone_options(artifacts)
    artifacts.set_defaults(run=cmd_artifact_index, hub=True)


def _options_kb_index(kbi: argparse.ArgumentParser, add_backbone_options) -> None:
    kbi.add_argument("--records", required=True, help="JSON Lines or Parquet of entities (see README, 'Relevance')")
    kbi.add_argument("--images", required=True, help="folder holding the images the records name")
    kbi.add_argument("--backbone", default="msiglip-so400m", help="backbone id for image and text embeddings")
    kbi.add_argument("--out", required=True, help="index folder to write")
    add_backbone_options(kbi)
    kbi.set_defaults(run=cmd_kb_index, hub=True)


def _options_meta_eval(meta: argparse.ArgumentParser) -> None:
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
    meta.set_defaults(run=cmd_meta_eval, hub=True)


def _options_human(humans: argparse.ArgumentParser) -> None:
    humans.add_argument("--ratings", required=True, help="CulturalFrames folder (or Hub repo) with the ratings config")
    humans.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples for the CIs")
    humans.add_argument("--out", required=True, help="folder for the CSV tables")
    humans.set_defaults(run=cmd_human, hub=True)


def register(verbs, verb, add_backbone_options) -> None:
    """Add this module's verbs to the parser (``verb`` makes a documented sub-parser whose options are added
    when it is chosen)."""
    verb("export-culturalframes", "one model's rated CulturalFrames images as a submission, so the harness scores "
         "the images the raters saw",
         "culturelens export-culturalframes --dataset data/culturalframes --model flux --out subs/cf-flux", verbs,
         options=_options_export)
    verb("artifact-index", "embed CSpace artifact names for the diversity tagger (faiss, per concept)",
         "culturelens artifact-index --cspace data/cube-cspace --backbone clip-vit-b-32 --out idx/cspace", verbs,
         options=lambda p: _options_artifact_index(p, add_backbone_options))
    verb("kb-index", "embed a knowledge base (entities, texts, images) for the relevance track (CAIRE)",
         "culturelens kb-index --records kb.jsonl --images kb/ --backbone msiglip-so400m --out idx/kb", verbs,
         options=lambda p: _options_kb_index(p, add_backbone_options))
    verb("meta-eval", "rank automatic metrics by Spearman correlation with the CulturalFrames raters",
         "culturelens meta-eval --ratings data/culturalframes --scores viescore=vie.csv --store .culturelens", verbs,
         options=_options_meta_eval)
    verb("human-aggregates", "CulturalFrames human results per model x country x domain with bootstrap CIs, and "
         "Krippendorff's alpha", "culturelens human-aggregates --ratings data/culturalframes --out cf/", verbs,
         options=_options_human)

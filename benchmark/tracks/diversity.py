"""Diversity (CUBE, Kannen et al., arXiv:2407.06863, Sec. 5.2): asked for an under-specified cultural concept, how
many cultures does the model show?"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark import settings as declared
from benchmark.datasets.names import CUBE_DIVERSITY, CUBE_DIVERSITY_SEEDS
from benchmark.errors import CultureLensError
from benchmark.progress import quiet_datasets
from benchmark.settings import Setting, positive_int
from benchmark.track import MetricUnavailable, Papers, Protocol, Track, Verb
from benchmark.papers import CUBE
from benchmark.tracks.papers import cube

ENV_ARTIFACT_INDEX = "CULTURELENS_ARTIFACT_INDEX"

SETTINGS = (
    Setting("artifact_index", None, "diversity: folder from `culturelens artifact-index`", env=ENV_ARTIFACT_INDEX,
            path=True),
    # "index": each image's nearest artifact by CLIP cosine; else a Hub id or folder of a VLM that picks among the
    # index's top 5 (CUBE App. H.2).
    Setting("diversity_tagger", "index", "diversity: 'index' = nearest artifact name by CLIP cosine; or a Hub "
                                         "id/folder of a VLM that picks among the index's top 5, as CUBE App. H.2",
            path=True),
    Setting("vendi_q", 1.0, "diversity: order q of the Vendi score", type=float),
    Setting("diversity_n", 8, "diversity: images per score (N)", type=positive_int),
    Setting("diversity_draws", 50, "diversity: random sets per prompt", type=positive_int),
    Setting("diversity_sampling", "seed_batches", "diversity: the paper's consecutive seed batches, or random sets",
            choices=("seed_batches", "random")),
)


def metrics(settings, backbones) -> list:
    """Cultural diversity (Eq. 3) and the normalised Vendi score under CUBE's five kernels; unavailable without an
    artifact index (or with a tagger VLM that cannot be loaded)."""
    from benchmark.metrics import diversity
    from benchmark.tagging import ArtifactIndex, VLMTagger

    if not settings.artifact_index:
        raise MetricUnavailable("diversity", (
            f"no artifact index: pass --artifact-index DIR or set {ENV_ARTIFACT_INDEX} (build one with "
            "`culturelens artifact-index`; see docs/tracks/diversity.md)"))
    try:
        index = ArtifactIndex.load(settings.artifact_index)
        tagger = index if settings.diversity_tagger == "index" else \
            VLMTagger.from_pretrained(index, settings.diversity_tagger)
    except (ValueError, OSError) as error:  # an index or a VLM that cannot be read: the message names it
        raise MetricUnavailable("diversity", str(error)) from None
    return diversity.metrics(tagger, clip=index.backbone_id, quality=settings.quality_backbone,
                             q=settings.vendi_q, size=settings.diversity_n, draws=settings.diversity_draws,
                             sampling=settings.diversity_sampling)


# --- `culturelens data build cube-cspace | cube-diversity` and `culturelens artifact-index` ------------------
def build_cspace(args: argparse.Namespace) -> int:
    from benchmark.datasets import cspace

    quiet_datasets()
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


def build_diversity(args: argparse.Namespace) -> int:
    from benchmark.datasets import cube_diversity

    quiet_datasets()
    out = cube_diversity.build_diversity(Path(args.out), repo=args.repo)
    print(f"built cube-diversity: {len(cube_diversity.diversity_prompts())} prompts in {out}")
    print(f"generate with: culturelens generate --dataset {out} --config {cube_diversity.CONFIG} "
          "--images-per-prompt 80 --seeds 0-79 ...")
    return 0


def artifact_index(args: argparse.Namespace) -> int:
    import datasets
    from huggingface_hub import DatasetCard

    from benchmark.datasets.hub_layout import Licence
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import load_registry
    from benchmark.tagging import ArtifactIndex

    quiet_datasets()
    try:
        table = datasets.load_dataset(args.cspace, "cspace", split="test").to_pandas()
    except FileNotFoundError as error:  # neither a folder nor a Hub dataset of that name
        raise CultureLensError(f"--cspace {args.cspace}: {error}; build it with `culturelens data build "
                               "cube-cspace --out DIR` and pass DIR") from None
    card = Path(args.cspace) / "README.md"
    source = card if card.is_file() else args.cspace  # a folder's card, or the Hub repo's
    licence = Licence.of_card(DatasetCard.load(source).data.to_dict())
    backbone = load_backbone(args.backbone, load_registry(args.backbones), args.device)
    index = ArtifactIndex.from_backbone(table, backbone, template=args.template)
    index.save(Path(args.out), licence=licence, source=str(args.cspace))
    print(f"wrote the artifact index ({len(table)} artifacts, {args.backbone}) to {args.out}; "
          f"score with --artifact-index {args.out}")
    return 0


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


def _cspace_options(cs: argparse.ArgumentParser) -> None:
    from benchmark.datasets import cspace

    source = cs.add_mutually_exclusive_group(required=True)
    source.add_argument("--dump", help="Wikidata JSON dump (.json, .json.gz or .json.bz2)")
    source.add_argument("--cspace-file", help="CSpace file: the authors' release (.tar.gz/.json), JSON Lines or CSV "
                                              "with artifact, country and concept columns")
    cs.add_argument("--hops", type=positive_int, default=cspace.DEFAULT_HOPS, help="maximum hops from the root nodes")
    cs.add_argument("--countries", type=_countries, default=None,
                    help="keep only these countries (ISO codes or names, comma-separated); the paper's eight: "
                         "BR,FR,IN,IT,JP,NG,TR,US")
    cs.add_argument("--concept", choices=["cuisine", "landmarks", "art"], default=None,
                    help="concept of a --cspace-file whose records name none")
    cs.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    cs.add_argument("--repo", default=cspace.HUB_REPO, help="Hub repo id the card's load snippets name")
    cs.set_defaults(run=build_cspace)


def _diversity_options(div: argparse.ArgumentParser) -> None:
    div.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    div.add_argument("--repo", default=CUBE_DIVERSITY.repo, help="Hub repo id for the card")
    div.set_defaults(run=build_diversity)


def _index_options(artifacts: argparse.ArgumentParser) -> None:
    artifacts.add_argument("--cspace", required=True, help="CSpace dataset: Hub repo id or local folder")
    artifacts.add_argument("--backbone", default="clip-vit-b-32", help="backbone id whose text side embeds names")
    artifacts.add_argument("--template", default="a photo of {artifact}", help="text embedded per artifact")
    artifacts.add_argument("--out", required=True, help="index folder to write")
    declared.add_runtime_options(artifacts)
    artifacts.set_defaults(run=artifact_index, hub=True)


TRACK = Track(
    "diversity", "Diversity (CUBE)", "cd_uniform",
    "Asked for an under-specified cultural concept, how many cultures does the model show?",
    r"""
Vendi score of order q: VS_q = exp(log Σ λ̄ᵢ^q / (1 − q)), λ̄ the eigenvalues of K/N (q = 1: exp of the
Shannon entropy). Kernel on tags (continent, country, artifact): k = w₁[same continent] + w₂[same country] +
w₃[same artifact] for (1,0,0), (0,1,0), (0,0,1), (½,½,0), (⅓,⅓,⅓). Cultural diversity (Eq. 3):
CD = mean HPS-v2 quality × VS / N, in [0, 1]. Protocol: 5 rephrasings per concept, seeds 0-79, N = 8 images per
score, mean over 50 draws. Images are tagged by nearest CSpace artifact (faiss over artifact-name embeddings).
""", Papers(CUBE, cube.DIVERSITY),
    # App. H.1: seeds 0-79 per rephrasing, ten batches of N = 8; the default tagger (the artifact index).
    Protocol(str(CUBE_DIVERSITY), len(CUBE_DIVERSITY_SEEDS), "2 (N = 8, seed batches; tagger index of "),
    settings=SETTINGS, metrics=metrics, order=20,
    verbs=(Verb("cube-cspace", "CUBE-CSpace: Algorithm 1 walk over a Wikidata dump, or a CSpace file you provide",
                "culturelens data build cube-cspace --dump latest-all.json.gz --out data/cube-cspace", _cspace_options,
                under=("data", "build")),
           Verb("cube-diversity", "CUBE's under-specified diversity prompts (3 concepts x 5 rephrasings)",
                "culturelens data build cube-diversity --out data/cube-diversity", _diversity_options,
                under=("data", "build")),
           Verb("artifact-index", "embed CSpace artifact names for the diversity tagger (faiss, per concept)",
                "culturelens artifact-index --cspace data/cube-cspace --backbone clip-vit-b-32 --out idx/cspace",
                _index_options)))

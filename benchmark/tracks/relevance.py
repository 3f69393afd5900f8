"""Relevance (CAIRE, Yayavaram et al., arXiv:2506.09109): how relevant is the image to each culture of its prompt set,
and to its own prompt's country above all (1-5)?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmark import settings as declared
from benchmark.errors import CultureLensError
from benchmark.papers import CAIRE
from benchmark.settings import Setting, positive_int
from benchmark.track import MetricUnavailable, Papers, Protocol, Track, Verb

ENV_RELEVANCE_KB = "CULTURELENS_RELEVANCE_KB"
PROTOCOL_JUDGE = "Qwen/Qwen2.5-VL-7B-Instruct"  # CAIRE's open judge (Table 2, CAIRE-Qwen), the headline protocol's
LABEL = ("relevance[", "]")  # a per-label metric's name around its label (``benchmark.metrics.relevance.metric_name``)

# The CAIRE authors' code (siddharthyayavaram/CAIRE) links to the best-ranked candidate with a Wikipedia page
# ("top": the Eq. 2 argmax); optionally their label casing ("capitalize") and text cut-off (15000 characters).
SETTINGS = (
    Setting("relevance_kb", None, "relevance: folder from `culturelens kb-index`", env=ENV_RELEVANCE_KB, path=True),
    Setting("relevance_judge", PROTOCOL_JUDGE,
            "relevance: VLM judge (Hub id or folder), or 'probe' for the CLIP-probe baseline", path=True),
    Setting("relevance_k", 20, "relevance: KB images pooled for linking", type=positive_int),
    Setting("relevance_linking", "first_with_page", "relevance: best-ranked candidate with a Wikipedia page "
            "(authors' code), or the top candidate whatever its page (the judge then reads its description)",
            choices=("first_with_page", "top")),
    Setting("relevance_label_case", "as_given", "relevance: label as given, or str.capitalize()d as in the authors' "
                                                "code", choices=("as_given", "capitalize")),
    Setting("relevance_text_chars", None, "relevance: cut the Wikipedia text to N characters (authors' code: 15000; "
                                          "default whole)", type=positive_int),
)


def metrics(settings, backbones) -> list:
    """The relevance metric, judged by a VLM (or the CLIP probe) on the entity visual entity linking finds in the
    knowledge base; on a submission it stands for one metric per country of the prompt set and the headline
    ``relevance_intended``. Unavailable without a knowledge base or a judge."""
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneUnavailable
    from benchmark.judges import JudgeUnavailable
    from benchmark.judges.probe import ProbeJudge
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics import relevance
    from benchmark.relevance.kb import KnowledgeBase

    if not settings.relevance_kb:
        raise MetricUnavailable("relevance", (
            f"no knowledge base: pass --relevance-kb DIR or set {ENV_RELEVANCE_KB} (build one with "
            "`culturelens kb-index`; see docs/tracks/relevance.md)"))
    try:
        kb = KnowledgeBase.load(settings.relevance_kb)
        if settings.relevance_judge == "probe":
            judge = ProbeJudge(load_backbone(kb.backbone_id, backbones or DEFAULT_REGISTRY))
        else:
            judge = VLMJudge(settings.relevance_judge)
    except (BackboneUnavailable, JudgeUnavailable, ValueError, OSError) as error:  # the message names what failed
        raise MetricUnavailable("relevance", str(error)) from None
    return relevance.metrics((), kb, judge, k=settings.relevance_k, linking=settings.relevance_linking,
                             label_case=settings.relevance_label_case, text_chars=settings.relevance_text_chars)


def labelled_prompts(metric: str) -> tuple[str, str] | None:
    """A per-label metric's prompts (``Track.ranked_on``): relevance to Japan is ranked on the prompts whose
    country is Japan, where being Japanese is what the prompt asks; on the others a model that makes every image
    look Japanese would score high for failing its prompt, so there it is shown, not ranked."""
    head, tail = LABEL
    return ("country", metric[len(head):-len(tail)]) if metric.startswith(head) and metric.endswith(tail) else None


# --- `culturelens kb-index` -------------------------------------------------------------------------------------
def kb_index(args: argparse.Namespace) -> int:
    from benchmark.datasets.hub_layout import Licence
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import load_registry
    from benchmark.relevance import kb

    licence = Licence(args.license, args.license_name, args.license_link)
    if (licence.id == "other") != bool(licence.name and licence.link):
        raise CultureLensError("--license-name and --license-link go with --license other, and it needs both "
                               "(the Hub's card checks ask for them)")
    # The records and their images first (KnowledgeBaseError), before minutes of loading weights.
    kb.image_table(kb.read_records(Path(args.records)), Path(args.images), show_progress=False)
    backbone = load_backbone(args.backbone, load_registry(args.backbones), args.device)
    kb.build_index(Path(args.records), Path(args.images), Path(args.out), backbone, licence=licence)
    print(f"wrote the knowledge-base index to {args.out}; score relevance with --relevance-kb {args.out}")
    return 0


def _kb_options(kbi: argparse.ArgumentParser) -> None:
    kbi.add_argument("--records", required=True, help="JSON Lines or Parquet of entities (see docs/tracks/relevance.md)")
    kbi.add_argument("--images", required=True, help="folder holding the images the records name")
    kbi.add_argument("--backbone", default="msiglip-so400m", help="backbone id for image and text embeddings")
    kbi.add_argument("--out", required=True, help="index folder to write (a Hub dataset folder: its card, README.md, "
                                                  "is written with it)")
    kbi.add_argument("--license", default="unknown",
                     help="the records' licence, as a Hub licence id (cc-by-sa-4.0, ...; default unknown: not "
                          "declared), recorded in kb.json and the card")
    kbi.add_argument("--license-name", default=None, help="with --license other: its name (lower case, '-')")
    kbi.add_argument("--license-link", default=None, help="with --license other: a link to its terms")
    declared.add_runtime_options(kbi)
    kbi.set_defaults(run=kb_index, hub=True)


# --- `culturelens data build relevance-kb` -------------------------------------------------------------------
def build_public_kb(args: argparse.Namespace) -> int:
    from benchmark.atomic import atomic_write_text
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import load_prompts
    from benchmark.downloads import Downloads
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import load_registry
    from benchmark.relevance import public_kb

    folder = Path(args.prompts) if Path(args.prompts).is_dir() else None
    prompts = load_prompts(cube_1k.HUB_REPO if folder else args.prompts, args.config, folder=folder)
    out = Path(args.out)
    downloads = Downloads(Path(args.downloads) if args.downloads else out.with_name(out.name + "-downloads"))
    if args.refresh:
        downloads.path(public_kb.PINS).unlink(missing_ok=True)
    pins = public_kb.read_pins(Path(args.pins)) if args.pins else None
    backbone = load_backbone(args.backbone, load_registry(args.backbones), args.device)
    _, pins = public_kb.build(prompts, out, downloads, backbone, pins=pins, batch_size=args.batch_size)
    atomic_write_text(out / "pins.json", json.dumps(pins, indent=1, ensure_ascii=False) + "\n")
    counted = public_kb.counts(pins)
    print(f"built the relevance knowledge base: {counted['entities']} entities ({counted['prompt_entities']} named by "
          f"the prompts, {counted['neighbours']} of other cultures), {counted['images']} images, {counted['pages']} "
          f"Wikipedia pages, in {out}; a rebuild with --pins {out / 'pins.json'} reads the same revisions and bytes; "
          f"score relevance with --relevance-kb {out}")
    return 0


def _public_kb_options(p: argparse.ArgumentParser) -> None:
    from benchmark.datasets.names import CUBE_1K

    p.add_argument("--prompts", default=CUBE_1K.repo,
                   help=f"the relevance prompts: a CUBE-1K build folder (`culturelens data build cube-1k`) or Hub repo "
                        f"(default {CUBE_1K.repo})")
    p.add_argument("--config", default=CUBE_1K.config, help=f"its config (default {CUBE_1K.config})")
    p.add_argument("--out", required=True, help="the index folder to write (replaced if a KB folder)")
    p.add_argument("--downloads", default=None, help="where downloads are kept between runs (default OUT-downloads)")
    p.add_argument("--pins", default=None, help="build at the pins of an earlier build: its pins.json, or a suite "
                                                "folder (its relevance-kb record)")
    p.add_argument("--refresh", action="store_true", help="read the current sources, not the pins a killed run left")
    p.add_argument("--backbone", default="msiglip-so400m", help="backbone id for image and text embeddings")
    declared.add_runtime_options(p)
    p.set_defaults(run=build_public_kb, hub=True)


TRACK = Track(
    "relevance", "Relevance (CAIRE)", "relevance_intended",
    "How relevant is the image to its prompt's own culture, and to each other culture of the prompt set (1-5)?",
    r"""
Visual entity linking: the top-20 knowledge-base images by cosine (mSigLIP), their entities pooled, the entity
whose name embedding is closest to the image chosen. A vision-language judge then reads the image, the entity's
Wikipedia text, the rubric (1 not relevant … 5 highly relevant) and one culture label, and answers with the
digit whose logit is highest among 1-5. Probe baseline: "This image is {level} to {culture}".

The labels come from the prompt set, the same for every submission: every country of its prompts (CUBE-1K: 8),
as CAIRE's universal set scores each image against each of its 10 countries. One metric per label,
`relevance[<country>]`; the headline **relevance_intended** is each image's relevance to its own prompt's
country (higher is better), the judgement CAIRE validates against raters of that country (Table 2).
A per-label column is ranked on the prompts that name its label only (relevance to Japan on the Japanese
prompts); its values elsewhere are shown, not ranked. Headline protocol: judge Qwen2.5-VL-7B-Instruct (the CLIP
probe and other judges are ranked under their own protocols, never in the overall), one knowledge base per
ranking (its fingerprint is in the metric's version).
""", Papers(CAIRE),
    Protocol(judge=PROTOCOL_JUDGE),
    settings=SETTINGS, metrics=metrics, order=50, ranked_on=labelled_prompts,
    verbs=(Verb("kb-index", "embed a knowledge base (entities, texts, images) for the relevance track (CAIRE)",
                "culturelens kb-index --records kb.jsonl --images kb/ --backbone msiglip-so400m --out idx/kb",
                _kb_options),
           Verb("relevance-kb", "the relevance knowledge base from public sources: every entity the prompts name and "
                                "same-category entities of other cultures, from Wikidata, Wikipedia and Commons",
                "culturelens data build relevance-kb --prompts data/cube-1k --out idx/kb", _public_kb_options,
                under=("data", "build"))))

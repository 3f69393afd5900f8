"""Iconicity (CRT, De Rosa Palmini & Cetinic, arXiv:2511.11435): does the model recognise an iconic title without
copying its reference image?"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark import settings as declared
from benchmark.datasets.names import ICONIC_REFERENCES
from benchmark.errors import CultureLensError
from benchmark.metrics.crt_protocol import CRT_FROM_MEANS, TAU_PATCH, VARIANTS, crt_from_means
from benchmark.settings import Setting
from benchmark.track import Chart, DetailPicture, FromMeans, MetricUnavailable, Papers, Protocol, Track, Verb
from benchmark.papers import CRT
from benchmark.tracks.papers import crt

SETTINGS = (
    # The CRT paper used DINOv3 (gated on the Hub); DINOv2 is the open default. A None below: the variant's own.
    Setting("crt_variant", "paper", "CRT protocol: the paper's, or the authors' code's (>= 0.70 still / 0.75 moving, "
                                    "CLIP ViT-B/16, DINOv2 token mean, W//4 grid cuts); the options below override it",
            choices=tuple(VARIANTS)),
    Setting("cra_backbone", None, "backbone id for CRT recognition (default: --clip-backbone; authors_code: "
                                  "clip-vit-b-16)"),
    Setting("vr_backbone", None, "backbone id for visual reuse patches (default: dinov2-base; authors_code: "
                                 "dinov2-base-mean-floor; the CRT paper used DINOv3: dinov3-vitb16)"),
    Setting("tau", None, "recognition threshold (CRT Eq. 1; default 0.7), of moving references too unless "
                         "--tau-moving", type=float),
    Setting("tau_moving", None, "recognition threshold of moving references (default 0.7; authors_code 0.75)",
            type=float),
    Setting("crt_comparison", None, "recognised iff s > tau (paper) or s >= tau (authors_code)", choices=(">", ">=")),
    Setting("tau_patch", TAU_PATCH, "patch reuse threshold (CRT Eq. 2)", type=float),
)


def protocol(settings):
    """The CRT protocol these settings choose: the variant's, with each setting given in place of its own (under
    the paper variant, recognition follows --clip-backbone)."""
    from benchmark.metrics import crt_protocol

    clip = settings.cra_backbone or (settings.clip_backbone if settings.crt_variant == "paper" else None)
    try:
        return crt_protocol.protocol(settings.crt_variant, clip=clip, dino=settings.vr_backbone, tau=settings.tau,
                                  tau_moving=settings.tau_moving, comparison=settings.crt_comparison,
                                  tau_patch=settings.tau_patch)
    except ValueError as error:
        raise MetricUnavailable("iconicity", str(error)) from None


def metrics(settings, backbones) -> list:
    """CRA per image and per reference, VR, CRT and coverage, under one protocol."""
    from benchmark.metrics import iconicity

    return iconicity.metrics(protocol(settings))


def recognition_vs_realisation(aggregates, curves):
    """Per model and kind (still, moving, all): recognition (CRA per reference, Eq. 1) against realisation
    (1 - VR, Eq. 2); CRT (Eq. 3) is their product, so better models sit up and to the right."""
    import pandas as pd

    frame = aggregates[aggregates["metric"].isin(["cra_reference", "vr"]) & aggregates["slice"].isin(["overall",
                                                                                                      "kind"])]
    if frame.empty:
        return pd.DataFrame(columns=["model", "subset", "recognition (CRA)", "realisation (1 - VR)"])
    frame = frame.assign(subset=frame["slice_value"].where(frame["slice"] == "kind", "all"))
    wide = frame.pivot_table(index=["model", "subset"], columns="metric", values="value", aggfunc="last").dropna()
    return pd.DataFrame({"model": wide.index.get_level_values(0), "subset": wide.index.get_level_values(1),
                         "recognition (CRA)": wide["cra_reference"].to_numpy(),
                         "realisation (1 - VR)": 1 - wide["vr"].to_numpy()})


def reuse_detail(image, references, detail: dict, value: float):
    """The visual-reuse picture of one recognised image (Eq. 2): the image beside the reference it recognised,
    its reused grid patches and the reference patches they matched outlined."""
    from benchmark.pictures import reuse_picture

    best = detail.get("best_reference")
    if best is None or best >= len(references):
        return None
    matched = [patch for reference, patch in detail.get("matches", []) if reference == best]
    picture = reuse_picture(image, references[best], detail.get("reused", []), matched, detail.get("grid", 4))
    return picture, f"VR {value:.3f}, {len(detail.get('reused', []))} reused patches outlined"


# --- `culturelens data build iconic-references` ----------------------------------------------------------------
def build_references(args: argparse.Namespace) -> int:
    from benchmark.datasets import iconic_references as iconic
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import BackboneUnavailable, load_registry

    if args.from_sparql:
        Path(args.images).mkdir(parents=True, exist_ok=True)
        count = iconic.fetch_from_wikidata(Path(args.records), Path(args.images))
        print(f"fetched {count} references from Wikidata into {args.records} and {args.images}")
    try:
        backbone = None if args.no_prune else load_backbone(args.prune_backbone, load_registry(args.backbones),
                                                            args.device)
    except BackboneUnavailable as error:
        raise CultureLensError(f"{error} (or pass --no-prune)") from None
    summary = iconic.build(Path(args.records), Path(args.images), Path(args.out), ner_model=args.ner,
                           prune_backbone=backbone, repo=args.repo)
    print(f"built iconic-references: {summary['kept']} of {summary['records']} references kept "
          f"({summary['images']} images, {summary['pruned']} pruned) in {summary['out']}")
    for reason, count in summary["removed"].items():
        print(f"  removed by {reason}: {count}")
    return 0


def _build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True, help="JSON Lines, one reference per line (see docs/tracks/iconicity.md)")
    p.add_argument("--images", required=True, help="folder holding the images the records name")
    p.add_argument("--from-sparql", action="store_true",
                   help="first fill --records and --images from Wikidata and Commons (needs network)")
    p.add_argument("--ner", default=None, help="token-classification model (Hub id or folder) for the named-entity "
                                               "title filter; without it the filter is off")
    p.add_argument("--prune-backbone", default="clip-vit-b-32", help="backbone id for pruning depictions")
    p.add_argument("--no-prune", action="store_true", help="keep every depiction of moving references")
    p.add_argument("--out", required=True, help="output folder (replaced if an earlier build made it)")
    p.add_argument("--repo", default=ICONIC_REFERENCES.repo, help="Hub repo id for the card")
    declared.add_runtime_options(p)
    p.set_defaults(run=build_references, hub=True)


TRACK = Track(
    "iconicity", "Iconicity (CRT)", "crt",
    "Does the model recognise an iconic title without copying its reference image?",
    r"""
- **CRA** (Eq. 1): an image recognises its reference when cos_CLIP(image, reference) ≥ τ = 0.7.
  Per image, and per reference (share of references with ≥ 1 recognised image: the paper's Table 1).
- **VR** (Eq. 2): over recognised images, the share of the 16 grid patches (4×4, DINO) whose best cosine to any
  reference patch is ≥ τ_patch = 0.6 (faiss search over the pool of reference patches).
- **CRT** (Eq. 3) = CRA × (1 − VR): recognised and realised anew. VR@k restricts VR to the references every
  compared model recognised. Still and moving images are reported apart.
""", Papers(CRT, crt.TABLE_1),
    # Sec. 4: n = 10 images per title; the paper variant's thresholds and backbones.
    Protocol(str(ICONIC_REFERENCES), 10,
             VARIANTS["paper"].version, (VARIANTS["paper"].clip, VARIANTS["paper"].dino)),
    # The Overview opens on Table 1 itself (CRT from the column means, still and moving apart): the paper's rows and
    # scored rows meet there; `crt` per reference, the headline of the win rates, is one choice away.
    overview_metric=CRT_FROM_MEANS[0], overview_slice="kind",
    # Its rankings recompute it on the prompts the models share, and bootstrap it over references (score, interval).
    from_means=(FromMeans(CRT_FROM_MEANS[0], ("cra_reference", "vr"), crt_from_means),),
    settings=SETTINGS, metrics=metrics, order=30,
    verbs=(Verb("iconic-references", "iconic references (titles + reference images) for the iconicity track",
                "culturelens data build iconic-references --records refs.jsonl --images refs/ --out data/iconic",
                _build_options, under=("data", "build")),),
    charts=(Chart("scatter", "CRT: recognition vs realisation (per model, still/moving)", "recognition (CRA)",
                  "realisation (1 - VR)", "no CRT scatter: no iconicity rows with both CRA and VR yet",
                  recognition_vs_realisation, metrics=("cra_reference", "vr"), slices=("overall", "kind")),),
    pictures=(DetailPicture("visual-reuse picture", "vr_image", reuse_detail,
                            "no image of these submissions recognised a reference, and VR compares the patches of "
                            "recognised images only",
                            "Visual reuse: reused patches outlined (generated | best reference)"),))

"""Metrics: pure functions over embeddings, tags and scores, one module per track, each behind an
adapter (``base.Metric``) that declares what it needs."""

from __future__ import annotations

import os
from dataclasses import dataclass

from benchmark.metrics import awareness, diversity, iconicity
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Metric
from benchmark.metrics.variability import W1KP, Calibration

ENV_W1KP_CALIBRATION = "CULTURELENS_W1KP_CALIBRATION"
ENV_ARTIFACT_INDEX = "CULTURELENS_ARTIFACT_INDEX"
ENV_RELEVANCE_KB = "CULTURELENS_RELEVANCE_KB"


@dataclass(frozen=True)
class MetricSettings:
    """The choices a metric needs from whoever runs it (CLI flags, environment)."""

    clip_backbone: str = "clip-vit-b-32"
    quality_backbone: str = "hpsv2"  # HPS v2: realism/quality (awareness) and the s of CUBE's Eq. 3 (diversity)
    # The CRT paper used DINOv3 (gated on the Hub); DINOv2 is the open default. Thresholds: Eq. 1 and 2.
    # CRT protocol (iconicity.VARIANTS): "paper" or "authors_code"; None below = the variant's own setting.
    crt_variant: str = "paper"
    cra_backbone: str | None = None  # recognition; the paper variant's default is clip_backbone
    vr_backbone: str | None = None
    tau: float | None = None  # every reference's, unless tau_moving is given
    tau_moving: float | None = None
    crt_comparison: str | None = None  # ">" or ">="
    tau_patch: float = iconicity.TAU_PATCH
    w1kp_calibration: str | None = None  # path or URL: .npz of cdf_x, cdf_y, or the authors' cdf-xy.pt
    w1kp_backbone: str = "dreamsim"
    w1kp_variant: str = "paper"
    artifact_index: str | None = None  # folder from `culturelens artifact-index` (diversity tagging)
    # "index": each image's nearest artifact by CLIP cosine; else a Hub id or folder of a VLM that picks among the
    # index's top 5 (CUBE, Kannen et al., arXiv:2407.06863, App. H.2).
    diversity_tagger: str = "index"
    vendi_q: float = 1.0
    diversity_n: int = 8
    diversity_draws: int = 50
    diversity_sampling: str = "seed_batches"  # the paper's consecutive seed batches; or "random" sets
    relevance_kb: str | None = None  # folder from `culturelens kb-index`
    relevance_judge: str = "Qwen/Qwen2.5-VL-7B-Instruct"  # Hub id or folder of a VLM, or "probe"
    relevance_k: int = 20
    # CAIRE authors' code (siddharthyayavaram/CAIRE): link to the best-ranked candidate with a Wikipedia page
    # ("top": the Eq. 2 argmax); optionally their label casing ("capitalize") and text cut-off (15000 characters).
    relevance_linking: str = "first_with_page"
    relevance_label_case: str = "as_given"
    relevance_text_chars: int | None = None


@dataclass(frozen=True)
class Unavailable:
    """A metric these settings cannot build, and why (recorded in every result)."""

    name: str
    track: str
    reason: str


def build(settings: MetricSettings = MetricSettings(), registry: dict | None = None,
          tracks: list[str] | None = None) -> tuple[list[Metric], list[Unavailable]]:
    """Every metric these settings allow, in display order, and the ones they do not allow, with the reason.
    ``registry`` (backbone id -> spec) is needed only by the relevance probe judge, which loads a backbone.
    With ``tracks``, the diversity and relevance metrics are built only if their track is named: building
    them loads their index, and their VLM (tens of GB for a 7B judge or tagger)."""
    metrics: list[Metric] = [ClipCosine(settings.clip_backbone), ClipScore(settings.clip_backbone)]
    metrics += awareness.metrics(clip=settings.clip_backbone, quality=settings.quality_backbone)
    metrics += iconicity.metrics(iconicity.protocol(
        settings.crt_variant, clip=settings.cra_backbone or (settings.clip_backbone if settings.crt_variant == "paper"
                                                             else None),
        dino=settings.vr_backbone, tau=settings.tau, tau_moving=settings.tau_moving,
        comparison=settings.crt_comparison, tau_patch=settings.tau_patch))
    unavailable: list[Unavailable] = []
    calibration = settings.w1kp_calibration or os.environ.get(ENV_W1KP_CALIBRATION)
    if calibration:
        try:
            metrics.append(W1KP(Calibration.load(calibration), settings.w1kp_backbone, settings.w1kp_variant))
        except ValueError as error:
            unavailable.append(Unavailable("w1kp", "variability", str(error)))
    else:
        unavailable.append(Unavailable("w1kp", "variability", (
            f"no W1KP calibration: pass --w1kp-calibration PATH_OR_URL or set {ENV_W1KP_CALIBRATION} "
            "(an .npz of cdf_x, cdf_y, or the authors' cdf-xy.pt; see README, 'Variability')")))
    if tracks is None or "diversity" in tracks:
        metrics += _diversity(settings, unavailable)
    if tracks is None or "relevance" in tracks:
        metrics += _relevance(settings, unavailable, registry)
    return metrics, unavailable


def _diversity(settings: MetricSettings, unavailable: list[Unavailable]) -> list[Metric]:
    from benchmark.tagging import ArtifactIndex, VLMTagger

    path = settings.artifact_index or os.environ.get(ENV_ARTIFACT_INDEX)
    if not path:
        unavailable.append(Unavailable("diversity", "diversity", (
            f"no artifact index: pass --artifact-index DIR or set {ENV_ARTIFACT_INDEX} (build one with "
            "`culturelens artifact-index`; see README, 'Diversity')")))
        return []
    try:
        index = ArtifactIndex.load(path)
        tagger = index if settings.diversity_tagger == "index" else \
            VLMTagger.from_pretrained(index, settings.diversity_tagger)
        return diversity.metrics(tagger, clip=index.backbone_id, quality=settings.quality_backbone,
                                 q=settings.vendi_q, size=settings.diversity_n, draws=settings.diversity_draws,
                                 sampling=settings.diversity_sampling)
    except (ValueError, OSError) as error:
        unavailable.append(Unavailable("diversity", "diversity", str(error)))
        return []


def _relevance(settings: MetricSettings, unavailable: list[Unavailable], registry: dict | None) -> list[Metric]:
    path = settings.relevance_kb or os.environ.get(ENV_RELEVANCE_KB)
    if not path:
        unavailable.append(Unavailable("relevance", "relevance", (
            f"no knowledge base: pass --relevance-kb DIR or set {ENV_RELEVANCE_KB} (build one with "
            "`culturelens kb-index`; see README, 'Relevance')")))
        return []
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneUnavailable
    from benchmark.judges import JudgeUnavailable
    from benchmark.judges.probe import ProbeJudge
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics import relevance
    from benchmark.relevance.kb import KnowledgeBase
    try:
        kb = KnowledgeBase.load(path)
        if settings.relevance_judge == "probe":
            judge = ProbeJudge(load_backbone(kb.backbone_id, registry or DEFAULT_REGISTRY))
        else:
            judge = VLMJudge(settings.relevance_judge)
        return relevance.metrics((), kb, judge, k=settings.relevance_k, linking=settings.relevance_linking,
                                 label_case=settings.relevance_label_case, text_chars=settings.relevance_text_chars)
    except (BackboneUnavailable, JudgeUnavailable, ValueError, OSError) as error:
        unavailable.append(Unavailable("relevance", "relevance", str(error)))
        return []


def select(metrics: list[Metric], unavailable: list[Unavailable], tracks: list[str] | None
           ) -> tuple[list[Metric], dict[str, str]]:
    """The metrics of the given tracks (all when None) and {metric: reason} for those of them that cannot run.
    ValueError if a requested track has no metric that can run, with the reasons."""
    if tracks:
        for track in tracks:
            if not any(m.info.track == track for m in metrics):
                reasons = [f"{u.name}: {u.reason}" for u in unavailable if u.track == track]
                known = sorted({m.info.track for m in metrics} | {u.track for u in unavailable})
                raise ValueError(f"no metric of track {track!r} can run: " + ("; ".join(reasons) if reasons else
                                 f"unknown track (tracks: {', '.join(known)})"))
        metrics = [m for m in metrics if m.info.track in tracks]
        unavailable = [u for u in unavailable if u.track in tracks]
    return metrics, {u.name: u.reason for u in unavailable}

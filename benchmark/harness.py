"""Score a validated submission: features produced once (``benchmark.features``), every metric fed from memory.

1. The union of the metrics' needs is embedded, through the embedding cache
   (``benchmark.features.embeddings.compute_features``: each image decoded once, embedded once per backbone,
   sharded over processes and machines with ``shard=(rank, world)``).
2. Every metric gets the same aligned arrays and returns one value (and note)
   per image, or per prompt for prompt-level metrics; aggregates, curves and
   derived rows follow (``benchmark.aggregate``). Metrics that read pixels through a vision-language model
   (diversity's VLM tagger, relevance's judge) get their outputs through ``benchmark.features.producers``,
   cached by content in a file beside the embedding cache (``Inputs.products``), so a crash or an added
   metric reruns no VLM call.
3. A declared image the submission does not hold is a failure at every level: in its prompt's mean of an
   image-level metric (``missing_as_failures``); a prompt-level value needs every declared image, so its prompt
   is not scored (``refuse_incomplete``) and ranks as refused. A value outside its metric's declared range is an
   error row (``mark_errors``), never ranked.

With ``shard=(rank, world)`` every process embeds its share; rank 0 scores: the numbers are identical to one
process's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from PIL import Image

from benchmark import __version__, results
from benchmark.aggregate import aggregate, aggregate_curves
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import SLICE_COLUMNS, PromptSet
from benchmark.encoders.base import Backbone
from benchmark.features import Need
from benchmark.features.embeddings import Progress, compute_features, embed_texts
from benchmark.images import open_as_viewed
from benchmark.metric_marks import ERROR_NOTE
from benchmark.metrics.base import Inputs, Metric, MetricInfo
from benchmark.run_record import BackboneUsed, RunRecord, now
from benchmark.scoring_options import ScoringOptions
from benchmark.submission.manifest import Manifest
from benchmark.submission.shards import Shards


class ImageStore(Protocol):
    """Where a submission's images are, by the paths its image table names: a validated folder's shards
    (``benchmark.submission.shards.Shards``) or images held in memory (``benchmark.plain_images.ImageBytes``)."""

    def source(self, names: list[str]) -> Callable[[int], bytes]:
        """Row i -> the bytes of the image ``names[i]`` (picklable, for DataLoader workers)."""


def load_backbones(metrics: list[Metric], registry: dict, device: str | None = None
                   ) -> tuple[dict[str, Backbone], list[Metric], dict[str, str]]:
    """Load every backbone the metrics need, once. A metric whose backbone cannot be loaded is
    returned as disabled, with the reason, instead of failing the others."""
    from benchmark.encoders import load_backbone
    from benchmark.encoders.spec import BackboneUnavailable

    backbones: dict[str, Backbone] = {}
    failures: dict[str, str] = {}
    for backbone_id in sorted({n.backbone for m in metrics for n in m.info.needs}):
        try:
            backbones[backbone_id] = load_backbone(backbone_id, registry, device)
        except BackboneUnavailable as error:
            failures[backbone_id] = str(error)
    enabled, disabled = [], {}
    for metric in metrics:
        missing = sorted({n.backbone for n in metric.info.needs} & set(failures))
        if missing:
            disabled[metric.info.name] = failures[missing[0]]
        elif reason := metric.check(backbones):
            disabled[metric.info.name] = reason
        else:
            enabled.append(metric)
    return backbones, enabled, disabled


def missing_images(manifest: Manifest) -> pd.DataFrame:
    """The images (prompt_id, seed) a submission declared but does not hold: its manifest's ``missing`` (refused,
    filtered, failed), which validation checks against its files (``benchmark.submission.validate``: each declared
    seed of a prompt it answered is an image or listed there)."""
    return pd.DataFrame([(m.prompt_id, m.seed) for m in manifest.missing], columns=["prompt_id", "seed"])


def missing_as_failures(per_image: pd.DataFrame, missing: pd.DataFrame, metrics: list[Metric]) -> pd.DataFrame:
    """Rows that count each image a submission declared but does not hold (``missing``: prompt_id, seed,
    ``missing_images``: refused, filtered, failed), of a prompt it answered, as a failure of every image-level
    metric (``MetricInfo.failure``: the worse end of its range; for the share of a recognised image's patches
    reused, 1, as a missing image is no image that escaped recognition), so that a prompt's mean is over the seeds
    declared: padding the seeds and refusing some never scores as a smaller protocol. For the aggregates only: the
    per-image rows stay the images'. A prompt-level value of such a prompt is not scored at all
    (``refuse_incomplete``), and a prompt without any image is left to the ranking, which counts it unanswered."""
    frames = []
    for metric in metrics:
        info = metric.info
        if info.level != "image" or missing.empty:
            continue
        scored = per_image[per_image["metric"] == info.name].drop_duplicates("prompt_id")
        rows = missing.merge(scored.drop(columns=["seed", "value", "note", "error", "detail", "image_path",
                                                 "image_sha256"], errors="ignore"),
                             on="prompt_id")
        frames.append(rows.assign(value=info.failure, error=None))
    return pd.concat(frames, ignore_index=True) if frames else per_image.iloc[0:0]


# Why a prompt-level value is not scored (``refuse_incomplete``): the per-image ``error`` of its row.
MISSING_IMAGES = ("not scored: some of the prompt's declared images are missing, and a prompt-level value needs "
                  "every one (the prompt counts as refused, at the metric's worst)")
UNUSABLE_IMAGES = ("not scored: some of the prompt's images could not be scored, and a prompt-level value needs "
                   "every declared image (the prompt counts as refused, at the metric's worst)")


def refuse_incomplete(rows: pd.DataFrame, incomplete: dict[str, str]) -> pd.DataFrame:
    """A prompt-level metric's rows with the value of each prompt of ``incomplete`` (prompt_id -> why: some of its
    declared images are missing, ``MISSING_IMAGES``, or could not be scored, ``UNUSABLE_IMAGES``) taken away: no
    value, note or detail, and ``error`` saying why. A value over the images left is not the prompt's value (keeping
    the one image of ten a curator likes lifts CRT per reference from 0.15 to 1 and takes VR from 0.5 to 0), so the
    prompt counts as refused, at the metric's worst, wherever it is ranked (an error row leaves its prompt without
    a value: ``benchmark.aggregate``). Per-image rows (seed not null) stay as they are."""
    hit = (rows["seed"].isna() & rows["prompt_id"].isin(list(incomplete))).to_numpy()
    if not hit.any():
        return rows
    rows = rows.copy()
    rows["value"] = rows["value"].where(~hit, np.nan)
    rows[["note", "error"]] = rows[["note", "error"]].astype(object)
    rows.loc[hit, "note"] = None
    rows.loc[hit, "error"] = rows.loc[hit, "prompt_id"].map(incomplete)
    if "detail" in rows.columns:
        rows.loc[hit, "detail"] = None
    return rows


def image_rows(images: pd.DataFrame, prompts: PromptSet) -> pd.DataFrame:
    """A submission's images (prompt_id, seed, path, sha256) in (prompt, seed) order, with their prompt columns."""
    if images.empty:
        raise ValueError("the submission has no image to score")
    images = images.sort_values(["prompt_id", "seed"]).reset_index(drop=True)
    return images.rename(columns={"sha256": "image_sha256"}).join(prompts.table, on="prompt_id")


@dataclass
class Scores:
    per_image: pd.DataFrame  # image-level rows, and prompt-level rows (seed and image columns null)
    aggregates: list[dict]
    curves: pd.DataFrame  # per prompt and per model (prompt_id null): metric, x, value, ...
    run: RunRecord


def non_finite_rows(features: dict[Need, np.ndarray]) -> dict[Need, np.ndarray]:
    """Need -> per row, whether that row's features hold a NaN or an infinity (only needs with such a row)."""
    bad = {need: ~np.isfinite(array.reshape(len(array), -1)).all(axis=1) for need, array in features.items()}
    return {need: rows for need, rows in bad.items() if rows.any()}


def exclusions(metric: Metric, bad: dict[Need, np.ndarray], n: int) -> np.ndarray:
    """Per row, why ``metric`` cannot use it (the first of its needs with non-finite features there), or None."""
    reasons = np.full(n, None, dtype=object)
    for need in metric.info.needs:
        if need in bad:
            reasons[bad[need] & pd.isna(reasons)] = f"non-finite {need} embedding"
    return reasons


def _subset(inputs: Inputs, keep: np.ndarray) -> Inputs:
    """``inputs`` restricted to the rows where ``keep`` is true, renumbered from 0, with a memo of their own."""
    rows = np.flatnonzero(keep)
    open_image = inputs.open_image
    return replace(inputs, images=inputs.images.iloc[rows].reset_index(drop=True),
                   features={need: array[rows] for need, array in inputs.features.items()},
                   truncated={b: cut[rows] for b, cut in inputs.truncated.items()}, memo={},
                   open_image=open_image and (lambda row: open_image(int(rows[row]))))


# How far past its declared range a value may lie and still be taken for the range's end: float rounding (a cosine
# of float32 unit vectors reaches 1 + 1.2e-7; a Vendi score of identical tags 1 - 1e-15), as a share of the range.
RANGE_TOLERANCE = 1e-6


def mark_errors(frame: pd.DataFrame, info: MetricInfo | None = None) -> pd.DataFrame:
    """Metric rows -> the same with ``error`` set where the value is infinite (``non-finite <metric> value``) or the
    note starts with ``ERROR_NOTE`` (the rest of it), and, by ``info`` (the metric's declaration), where the value
    lies outside its declared range (``<metric> value outside its declared range [low, high]``) or is NaN though
    the metric declares no rule under which it has none (``MetricInfo.undefined``); such rows lose their value, note
    and detail. A value past the range by no more than float rounding (``RANGE_TOLERANCE`` of its width) is its
    end. Every value ranked is thus inside the range whose worse end an unanswered prompt counts as, and a value is
    left out of a mean only where the metric's own rule leaves it undefined (VR of an image not recognised).
    Without ``info``, NaN stays an undefined value and no range is checked."""
    values = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
    notes = frame["note"].tolist() if "note" in frame.columns else [None] * len(frame)
    error = np.array([note[len(ERROR_NOTE):] if isinstance(note, str) and note.startswith(ERROR_NOTE) else None
                      for note in notes], dtype=object)
    metrics = frame["metric"].to_numpy()
    infinite = np.isinf(values) & pd.isna(error)
    error[infinite] = [f"non-finite {m} value" for m in metrics[infinite]]
    if info is not None and not info.undefined:
        none = np.isnan(values) & pd.isna(error)
        error[none] = f"{info.name} gave no value (it has one wherever it applies)"
    bounds = (info.low, info.high) if info is not None else (None, None)
    low, high = (float(b) if b is not None and np.isfinite(b) else None for b in bounds)
    slack = RANGE_TOLERANCE * (high - low) if low is not None and high is not None else RANGE_TOLERANCE
    with np.errstate(invalid="ignore"):
        below = values < low - slack if low is not None else False
        above = values > high + slack if high is not None else False
        outside = np.isfinite(values) & pd.isna(error) & (below | above)
        values = np.clip(values, low, high) if low is not None or high is not None else values
    span = f"[{low if low is not None else -np.inf:g}, {high if high is not None else np.inf:g}]"
    error[outside] = [f"{m} value outside its declared range {span}" for m in metrics[outside]]
    failed = ~pd.isna(error)
    frame = frame.assign(value=np.where(failed, np.nan, values),
                         note=pd.Series([note if isinstance(note, str) and not bad else None
                                         for note, bad in zip(notes, failed)], index=frame.index, dtype=object),
                         error=pd.Series(error, index=frame.index, dtype=object))
    if "detail" in frame.columns:
        frame.loc[failed, "detail"] = None
    return frame


def _metric_rows(metric: Metric, inputs: Inputs, base: pd.DataFrame) -> pd.DataFrame:
    info = metric.info
    if info.level == "image":
        values, notes = metric.per_image(inputs)
        details = metric.details(inputs)
        detail = [json.dumps(d) if d else None for d in details] if details is not None else None
        return base.assign(track=info.track, metric=info.name, value=values, note=notes, detail=detail)
    per_prompt = metric.per_prompt(inputs)
    firsts = base.drop_duplicates("prompt_id").set_index("prompt_id")
    rows = per_prompt.join(firsts.drop(columns=["seed", "image_path", "image_sha256"]), on="prompt_id")
    return rows.assign(track=info.track, metric=info.name, seed=None, image_path=None, image_sha256=None)


def _score_metric(metric: Metric, inputs: Inputs, base: pd.DataFrame, bad: dict[Need, np.ndarray],
                  views: dict[bytes, Inputs], missing: frozenset[str]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One metric's rows and curves over the rows whose features it needs are finite; the other rows become
    error rows (value null, ``error`` the reason). ``views``: the Inputs made so far, by usable rows, so that
    metrics with the same usable rows share one (and its memo). A prompt-level value needs every declared image:
    on a prompt of ``missing`` (some declared image is not there) or with an image left out here, it is not scored,
    and its curve is dropped (``refuse_incomplete``)."""
    info = metric.info
    reasons = exclusions(metric, bad, len(base))
    keep = pd.isna(reasons)
    excluded = base[~keep].assign(track=info.track, metric=info.name, value=np.nan, note=None,
                                  detail=None, error=reasons[~keep])
    if not keep.any():
        return excluded, None
    view = views.setdefault(keep.tobytes(), inputs if keep.all() else _subset(inputs, keep))
    scored = mark_errors(_metric_rows(metric, view, base[keep]), info)
    curve = metric.curves(view)
    if info.level == "prompt":
        incomplete = {**dict.fromkeys(missing, MISSING_IMAGES),
                      **dict.fromkeys(base.loc[~keep, "prompt_id"], UNUSABLE_IMAGES)}
        scored = refuse_incomplete(scored, incomplete)
        curve = curve[~curve["prompt_id"].isin(list(incomplete))] if curve is not None else None
    if len(excluded):  # image-level rows keep the images' order: an excluded image's row sits where its score would
        scored = pd.concat([scored, excluded])
        scored = scored.sort_index() if info.level == "image" else scored
    return scored, curve


def metric_rows(metrics: list[Metric], inputs: Inputs, base: pd.DataFrame, missing: pd.DataFrame,
                progress: Progress | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Every metric's rows over ``inputs``, and their per-prompt curves (metric, prompt_id, x, value, ...; None
    without any). ``base``: per image row of ``inputs``, its prompt_id, seed, image_path, image_sha256, slice
    columns, submission_id and model; ``missing``: the images declared but not held (``missing_images``).

    Image-level rows, and prompt-level rows (seed and image columns null); a row whose features are not finite, or
    whose value is the metric's error or outside its declared range, is an error row (``mark_errors``); a
    prompt-level value of a prompt whose declared images are not all there to score is not scored
    (``refuse_incomplete``)."""
    bad = non_finite_rows(inputs.features)
    views: dict[bytes, Inputs] = {}  # one Inputs per set of usable rows, so metrics alike share their memo
    frames, curve_frames = [], []
    for done, metric in enumerate(metrics, start=1):
        frame, curve = _score_metric(metric, inputs, base, bad, views, frozenset(missing["prompt_id"]))
        frames.append(frame)
        if curve is not None:
            curve_frames.append(curve.assign(metric=metric.info.name))
        if progress:
            progress("metrics", done, len(metrics))
    per_image = pd.concat(frames, ignore_index=True) if frames else \
        base.iloc[0:0].assign(track=None, metric=None, value=None, note=None, error=None)
    return per_image, pd.concat(curve_frames, ignore_index=True) if curve_frames else None


def aggregate_scores(per_image: pd.DataFrame, missing: pd.DataFrame, metrics: list[Metric]) -> list[dict]:
    """The aggregate rows of ``metric_rows``' rows (``benchmark.aggregate``, each metric's intervals by its declared
    range and kind), a declared image the submission does not hold (``missing``) counted as a failure of every
    image-level metric (``missing_as_failures``)."""
    info = [m.info for m in metrics]
    return aggregate(pd.concat([per_image, missing_as_failures(per_image, missing, metrics)], ignore_index=True),
                     ranges={m.name: (m.low, m.high) for m in info}, kinds={m.name: m.kind for m in info})


def error_counts(per_image: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """How many images (or prompts, for a prompt-level value) error rows left out of at least one metric, and
    reason -> how many of them it left out."""
    errors = per_image[per_image["error"].notna()]
    seeds = errors["seed"].astype(object).where(errors["seed"].notna(), "prompt")  # a prompt-level value's row
    keys = errors["prompt_id"].astype(str) + "/" + seeds.astype(str)
    by_reason = keys.groupby(errors["error"]).nunique().sort_index()
    return keys.nunique(), {str(reason): int(n) for reason, n in by_reason.items()}


def score(folder: Path | ImageStore, manifest: Manifest, prompts: PromptSet, images: pd.DataFrame,
          metrics: list[Metric], backbones: dict[str, Backbone], cache: EmbeddingCache | None = None, *,
          submission_id: str, options: ScoringOptions | None = None, progress: Progress | None = None,
          disabled: dict[str, str] | None = None) -> Scores | None:
    """Score one submission (``folder``: validated, its images in Parquet shards, or an ``ImageStore`` holding
    them, e.g. in memory; ``images``: prompt_id, seed, path, sha256 per image, e.g. its ``images.parquet``); None
    on ranks > 0 (every process of ``options.shard`` calls this, each with its own ``cache``: see the module).

    ``options``: the batch size, DataLoader workers and shard, and how the caller built the metrics
    (``ScoringOptions.record``), which the run record keeps with the backbone specs and batch size so that
    ``culturelens reproduce`` can redo it.

    Metrics that do not apply to the submission (``Metric.applies``) are skipped, and the run record's
    ``skipped`` says why, together with the ``disabled`` ones the caller could not run at all.
    """
    options = options or ScoringOptions()
    batch_size, shard = options.batch_size, options.shard
    metrics = [m for metric in metrics for m in metric.for_submission(manifest, prompts.table)]
    rows = image_rows(images, prompts)
    counts = prompts.reference_counts()
    probe = Inputs(rows, {}, {}, reference_counts=counts, catalogue=prompts.table)
    skipped = {m.info.name: reason for m in metrics if (reason := m.applies(probe))}
    metrics = [m for m in metrics if m.info.name not in skipped]
    needs = sorted({n for m in metrics for n in m.info.needs}, key=str)
    run_options = {"batch_size": batch_size, "num_workers": options.num_workers, "shard": shard,
                   "progress": progress}
    held = Shards(folder) if isinstance(folder, (str, Path)) else folder
    source = held.source(rows["path"].tolist())  # row i -> its image's bytes
    features = compute_features(source, rows, [n for n in needs if n.of == "generated"], backbones, cache,
                                **run_options)
    reference_needs = [n for n in needs if n.of == "reference"]
    references, reference_features = {}, None
    if reference_needs:
        source, reference_rows = prompts.references(set(rows["prompt_id"]))
        plain = {n: Need(n.backbone, n.kind, n.grid) for n in reference_needs}
        reference_features = compute_features(source, reference_rows, list(plain.values()), backbones, cache,
                                              stage="embedding references", **run_options)
        if shard[0] != 0:
            return None
        groups = reference_rows.groupby("prompt_id").indices
        references = {n: {prompt_id: reference_features.arrays[plain[n]][index] for prompt_id, index in groups.items()}
                      for n in reference_needs}
    if shard[0] != 0:
        return None
    def encode_text(backbone_id: str, texts: list[str]) -> np.ndarray:
        vectors = embed_texts(backbones[backbone_id], texts, cache, batch_size)
        return np.stack([vectors[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def open_image(row: int) -> Image.Image:
        return open_as_viewed(io.BytesIO(source(row)))

    # VLM outputs (tags, judge scores) are cached beside the embeddings: a crash or one more metric reruns none.
    inputs = Inputs(rows, features.arrays, features.truncated, references, counts, catalogue=prompts.table,
                    encode_text=encode_text, open_image=open_image,
                    products=cache.beside("products") if cache is not None else None)
    slices = [c for c in SLICE_COLUMNS if c in rows.columns]
    base = rows[["prompt_id", "seed", "path", "image_sha256", *slices]].rename(columns={"path": "image_path"})
    base = base.assign(submission_id=submission_id, model=manifest.model.name)
    missing = missing_images(manifest)
    per_image, per_prompt_curves = metric_rows(metrics, inputs, base, missing, progress)
    model_curves = aggregate_curves(per_prompt_curves) if per_prompt_curves is not None else None

    scored_at = now()
    used = {b: backbones[b] for b in sorted({n.backbone for n in needs})}
    dataset = f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}"
    info = {m.info.name: m.info for m in metrics}
    context = {
        "provenance": "scored", "submission_id": submission_id, "model": manifest.model.name,
        "model_id": manifest.model.id, "model_type": manifest.model.type, "model_revision": manifest.model.revision,
        "parameters_billions": manifest.model.parameters_billions, "harness_version": __version__,
        "dataset": dataset, "seeds": ",".join(map(str, manifest.seeds)), "scored_at": scored_at,
    }

    def provenance(metric_info) -> dict:
        ids = sorted({n.backbone for n in metric_info.needs})
        return {"backbone": "+".join(f"{b}={used[b].spec.uid}" for b in ids),
                "backbone_revision": "+".join(used[b].revision for b in ids)}

    def with_protocol(row: dict, version: str) -> dict:
        """The row with the protocol its value was scored under (``results.protocol_columns``): dataset without
        its local fingerprint and the digest of its prompt rows, the images per prompt declared (a missing one
        scored as a failure: ``missing_as_failures``), the metric's version (``version`` where the row names none:
        its thresholds, variant, calibration, tagger, N) and each backbone's uid@revision."""
        backbones = [f"{b}@{r}" for b, r in zip((row.get("backbone") or "").split("+"),
                                                 (row.get("backbone_revision") or "").split("+")) if b]
        return {**row, **results.protocol_columns({
            "dataset": dataset.split("@")[0], "dataset_revision": prompts.digest,
            "images_per_prompt": manifest.images_per_prompt, "missing_images": results.MISSING_AS_FAILURES,
            "metric_version": row.get("metric_version") or version, "backbones": backbones})}

    aggregates = []
    for row in aggregate_scores(per_image, missing, metrics):
        metric = info[row["metric"]]
        aggregates.append(with_protocol({**row, **context, **provenance(metric), "metric_label": metric.label,
                                         "metric_version": metric.version, "higher_is_better": metric.higher_is_better,
                                         "range_low": metric.low, "range_high": metric.high,
                                         "value_kind": metric.kind}, metric.version))
    ordinary = list(aggregates)
    for metric in metrics:
        curve = model_curves[model_curves["metric"] == metric.info.name] if model_curves is not None else None
        aggregates += [with_protocol({**row, **context, **provenance(metric.info)}, metric.info.version)
                       for row in metric.derived(ordinary, curve)]
    excluded, errors = error_counts(per_image)
    run = RunRecord(
        submission_id=submission_id, harness_version=__version__, scored_at=scored_at, dataset=dataset,
        # the prompt rows' content: the datasets fingerprint stays the same when a local copy is rebuilt with other rows
        dataset_digest=prompts.digest, seeds=list(manifest.seeds),
        metrics={m.info.name: m.info.version for m in metrics},
        protocols={row["metric"]: row["protocol"] for row in aggregates}, skipped={**(disabled or {}), **skipped},
        backbones={b: BackboneUsed(uid=x.spec.uid, revision=x.revision, preprocess=x.preprocess_version)
                   for b, x in used.items()},
        backbone_specs={b: x.spec.to_dict() for b, x in used.items()}, settings=options.record(),
        batch_size=batch_size, images=len(images), missing=len(manifest.missing),
        embeddings_cached=features.cached + (reference_features.cached if reference_features else 0),
        embeddings_computed=features.computed + (reference_features.computed if reference_features else 0),
        excluded=excluded, errors=errors)
    curves = pd.concat([c for c in (per_prompt_curves, model_curves) if c is not None], ignore_index=True) \
        if per_prompt_curves is not None else pd.DataFrame(columns=["metric", "prompt_id", "x", "value"])
    return Scores(per_image, aggregates, curves.assign(submission_id=submission_id, model=manifest.model.name), run)

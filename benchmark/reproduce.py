"""``culturelens reproduce RESULT``: redo the scoring a result's run.json records, and compare.

Every result's ``run.json`` records how it was scored: the metric settings
(every declared metric setting, ``benchmark.tracks.settings_declared``, with the environment's fallbacks
resolved) and
the tracks chosen (``settings``), each backbone's spec and the revision of its
weights (``backbone_specs``, ``backbones``), the batch size, the dataset
(``repo:config:split@fingerprint``, and ``dataset_digest``, the content of its
rows), the seeds and the harness version.
``reproduce`` rebuilds the metrics from that record, checks that the backbones
and the dataset are still the ones recorded (and refuses when they are not),
scores the stored submission again into a temporary folder with a fresh
embedding cache (so that no cached embedding hides a difference), and prints,
per metric, the largest absolute difference over the per-image values and over
the aggregate values.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark import layout
from benchmark import settings as declared
from benchmark.errors import CultureLensError
from benchmark.layout import ScoreOutput, SubmissionLayout

# What run.json must hold for a result to be reproduced (older results lack the first four).
RECORDED = ("settings", "backbone_specs", "batch_size", "dataset_digest", "backbones", "metrics", "dataset",
            "seeds", "harness_version", "submission_id")


class ReproduceError(CultureLensError):
    """The result cannot be reproduced as asked (a user error: the message says why, in one sentence)."""


def settings_record(args: argparse.Namespace) -> dict:
    """What run.json records of how the command line built the metrics: every declared metric setting (from the
    option of the same name, else its environment variable, else its default; local paths made absolute) and
    the tracks chosen."""
    from benchmark import tracks

    return {"metric_settings": declared.from_args(tracks.settings_declared(), args).record(), "tracks": args.tracks}


@dataclass(frozen=True)
class Target:
    """Where a result, its submission, its datasets and its embedding cache are."""

    result: Path
    run: dict
    submission: Path
    datasets_root: Path
    cache: Path


def locate(result: str, store: Path, submission: str | None) -> Target:
    """Resolve RESULT (a results folder, or a submission id of ``store``) and the validated submission it scored:
    ``--submission``, else ``STORE/submissions/<id>`` next to a store's results, else ``OUT/submission`` next to
    the results of ``culturelens score --out OUT``."""
    folder = Path(result)
    if not folder.is_dir():
        if not layout.is_submission_id(result):
            raise ReproduceError(f"{result} is neither a results folder nor a submission id")
        folder = layout.results_folder(store, result)
        if not folder.is_dir():
            raise ReproduceError(f"the store {store} has no results for submission {result}")
    try:
        run = json.loads((folder / layout.RUN).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ReproduceError(f"{folder} holds no readable run.json ({error.__class__.__name__}): not a results "
                             "folder") from None
    if run.get("suite"):
        raise ReproduceError(f"{folder} is the result of a suite submission ({', '.join(run['suite']['parts'])}): "
                             "reproduce does not redo suite results yet; its per-part records are in run.json")
    missing = [key for key in RECORDED if run.get(key) is None]
    if missing:
        raise ReproduceError(f"{folder}/run.json does not record {', '.join(missing)}: it was written before results "
                             "recorded their scoring settings, so rescore the submission to make it reproducible")
    home = folder.resolve().parent.parent  # STORE or OUT, of STORE/results/<id> or OUT/results/<id>
    in_store = SubmissionLayout(home / layout.SUBMISSIONS / run["submission_id"])
    if submission:
        staged = SubmissionLayout(Path(submission))
    elif in_store.is_validated:
        staged = in_store
    else:
        staged = ScoreOutput(home).submission
    if not staged.is_validated or not staged.manifest.exists():
        raise ReproduceError(f"no validated submission (manifest.json and images.parquet) in {staged}: pass "
                             "--submission with the folder `culturelens score` or the store keeps")
    if staged == in_store:
        return Target(folder, run, staged.folder, home / layout.DATASETS, home / layout.STORE_CACHE)
    return Target(folder, run, staged.folder, store / layout.DATASETS, ScoreOutput(home).cache)


def registry_for(run: dict, backbones_file: str | None) -> dict:
    """The registry to rescore with: each backbone the result used as recorded, unless the backbones file names
    it, which must then give weights of the same uid; every other id as ``load_registry`` has it."""
    from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneSpec, load_registry

    try:
        registry = load_registry(backbones_file)
    except ValueError as error:
        raise ReproduceError(str(error)) from None
    for backbone_id, recorded in run["backbone_specs"].items():
        try:
            spec = BackboneSpec.from_dict(recorded, f"run.json: backbone {backbone_id}")
        except ValueError as error:
            raise ReproduceError(f"the recorded backbones cannot be used here: {error}") from None
        given = registry.get(backbone_id)
        if given is None or given == DEFAULT_REGISTRY.get(backbone_id):
            registry[backbone_id] = spec
        elif given.uid != spec.uid:
            raise ReproduceError(f"the backbones file points {backbone_id} at {given.uid}, but the result was "
                                 f"scored with {spec.uid}")
    return registry


@dataclass(frozen=True)
class Difference:
    """One metric's largest absolute differences (None: no such rows; inf: a value on one side only), and how
    many of its per-image and aggregate rows one side has and the other lacks: a row that is not there is
    reported missing, never taken for a null value and so for an equal one."""

    metric: str
    per_image: float | None
    aggregate: float | None
    per_image_missing: int = 0
    aggregate_missing: int = 0

    def within(self, tolerance: float) -> bool:
        return not (self.per_image_missing or self.aggregate_missing) and \
            all(d is None or d <= tolerance for d in (self.per_image, self.aggregate))


def largest_differences(recorded: pd.DataFrame, reproduced: pd.DataFrame, keys: list[str]
                        ) -> dict[str, tuple[float | None, int]]:
    """Metric -> (the largest |value difference| between rows matched on ``keys`` and their order among rows with
    the same keys, or None when no row is on both sides; how many rows are on one side only). Two missing values
    are equal; a value missing on one side is an infinite difference; a row on one side only is missing, whatever
    its value (a recorded null with no reproduced row is not 'equal')."""
    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[[*keys, "value"]].copy()
        for key in keys:
            frame[key] = frame[key].astype("string").fillna("")
        return frame.assign(occurrence=frame.groupby(keys).cumcount())

    both = keyed(recorded).merge(keyed(reproduced), on=[*keys, "occurrence"], how="outer",
                                 suffixes=("_recorded", "_reproduced"), indicator=True)
    a, b = both["value_recorded"].astype(float), both["value_reproduced"].astype(float)
    gap = (a - b).abs().where(a.notna() & b.notna(), float("inf")).where(a.notna() | b.notna(), 0.0)
    paired = both["_merge"] == "both"
    out = {}
    for metric, rows in both.groupby("metric").groups.items():
        matched = gap[rows][paired[rows]]
        out[str(metric)] = (float(matched.max()) if len(matched) else None, int((~paired[rows]).sum()))
    return out


def compare(recorded: Path, reproduced: Path) -> list[Difference]:
    """Per metric (of either results folder), the largest differences of the per-image and aggregate values, and
    the rows present on one side only."""
    per_image = largest_differences(pd.read_parquet(recorded / layout.PER_IMAGE),
                                    pd.read_parquet(reproduced / layout.PER_IMAGE),
                                    ["metric", "prompt_id", "seed", "image_sha256"])
    aggregates = largest_differences(pd.read_parquet(recorded / layout.AGGREGATES),
                                     pd.read_parquet(reproduced / layout.AGGREGATES),
                                     ["metric", "slice", "slice_value"])
    none = (None, 0)
    return [Difference(metric, per_image.get(metric, none)[0], aggregates.get(metric, none)[0],
                       per_image.get(metric, none)[1], aggregates.get(metric, none)[1])
            for metric in sorted(per_image.keys() | aggregates.keys())]


def report(differences: list[Difference], tolerance: float) -> str:
    """The comparison as a table, one line per metric ('missing' where rows are on one side only), and a closing
    verdict."""
    def number(value: float | None, missing: int) -> str:
        return "missing" if missing else "-" if value is None else f"{value:.6g}"

    width = max([len("metric"), *(len(d.metric) for d in differences)])
    lines = [f"{'metric':<{width}}  {'per-image max |diff|':>20}  {'aggregate max |diff|':>20}  equal"]
    lines += [f"{d.metric:<{width}}  {number(d.per_image, d.per_image_missing):>20}  "
              f"{number(d.aggregate, d.aggregate_missing):>20}  {'yes' if d.within(tolerance) else 'NO'}"
              for d in differences]
    differing = sum(not d.within(tolerance) for d in differences)
    missing = sum(d.per_image_missing + d.aggregate_missing for d in differences)
    lines.append((f"{differing} of {len(differences)} metrics differ by more than {tolerance:g}" if differing else
                  f"every metric reproduced within {tolerance:g}")
                 + (f"; {missing} row(s) are on one side only (missing)" if missing else ""))
    return "\n".join(lines)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def main(result: str, *, store: Path, submission: str | None, backbones: str | None, device: str | None,
         batch_size: int | None, num_workers: int | None, tolerance: float, use_cache: bool) -> int:
    """``culturelens reproduce``: 0 when every difference is within ``tolerance``, 1 otherwise; ReproduceError
    when the result cannot be reproduced here (nothing recorded, other weights, another dataset)."""
    from benchmark import __version__, harness, results, tracks
    from benchmark.cache import EmbeddingCache
    from benchmark.datasets.prompts import DatasetUnavailable, load_prompts_for
    from benchmark.progress import Bars
    from benchmark.submission import Manifest

    target = locate(result, store, submission)
    run = target.run
    registry = registry_for(run, backbones)
    try:
        settings = tracks.metric_settings(**run["settings"]["metric_settings"])
    except CultureLensError as error:
        raise ReproduceError(f"the recorded settings cannot be used here: {error}") from None
    manifest = Manifest.model_validate_json(SubmissionLayout(target.submission).manifest.read_bytes())
    if list(manifest.seeds) != list(run["seeds"]):
        raise ReproduceError(f"the submission in {target.submission} has seeds {list(manifest.seeds)}, the result "
                             f"was scored on seeds {run['seeds']}")
    try:
        prompts = load_prompts_for(manifest, target.datasets_root)
    except DatasetUnavailable as error:
        raise ReproduceError(str(error)) from None
    dataset = f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}"
    if dataset != run["dataset"] or prompts.digest != run["dataset_digest"]:
        raise ReproduceError(f"the dataset changed since the result was scored: it was {run['dataset']} with rows "
                             f"{run['dataset_digest']}, it is now {dataset} with rows {prompts.digest}")
    if run["harness_version"] != __version__:
        _warn(f"the result was scored by harness {run['harness_version']}, this is {__version__}")
    try:
        built, unavailable = tracks.select(*tracks.build(settings, registry, run["settings"]["tracks"]),
                                           run["settings"]["tracks"])
    except CultureLensError as error:
        raise ReproduceError(f"the recorded metrics cannot be built here: {error}") from None
    loaded, metrics, disabled = harness.load_backbones(built, registry, device)
    for backbone_id, recorded in run["backbones"].items():
        if backbone_id not in loaded:
            reasons = {disabled[m.info.name] for m in built if m.info.name in disabled
                       and backbone_id in {n.backbone for n in m.info.needs}}
            raise ReproduceError(f"backbone {backbone_id}, which the result used, cannot be loaded here"
                                 + (f": {reasons.pop()}" if reasons else ""))
        if loaded[backbone_id].revision != recorded["revision"]:
            raise ReproduceError(f"backbone {backbone_id} loads weights of revision {loaded[backbone_id].revision}, "
                                 f"the result was scored with {recorded['revision']}")
    images = pd.read_parquet(SubmissionLayout(target.submission).images_table)
    workspace = Path(tempfile.mkdtemp(prefix="culturelens-reproduce-"))
    bars = Bars()
    try:
        cache = EmbeddingCache(target.cache if use_cache else workspace / "cache.sqlite")
        scores = harness.score(target.submission, manifest, prompts, images, metrics, loaded, cache,
                               submission_id=run["submission_id"], batch_size=batch_size or run["batch_size"],
                               num_workers=num_workers, progress=bars, disabled={**unavailable, **disabled},
                               settings=run["settings"])
        reproduced = results.write_folder(workspace / "results", results.records(scores.per_image),
                                          scores.aggregates, results.records(scores.curves), scores.run)
        differences = compare(target.result, reproduced)
    finally:
        bars.close()
        shutil.rmtree(workspace, ignore_errors=True)
    changed = sorted(name for name, version in scores.run["metrics"].items()
                     if run["metrics"].get(name, version) != version)
    if changed:
        _warn(f"metric versions changed since the result was scored: {', '.join(changed)}")
    print(f"reproduced {run['submission_id']} ({target.result}) on {target.submission}"
          + (" with the stored embedding cache" if use_cache else " with a fresh embedding cache"))
    print(report(differences, tolerance))
    return 0 if all(d.within(tolerance) for d in differences) else 1

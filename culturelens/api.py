"""``culturelens.score``: a submission, or plain images and prompts, scored from Python as ``culturelens score``
scores them, the results returned as DataFrames with their run record.

Three inputs, one path through the library:

- ``score("subs/sdxl")`` (a folder or ``.zip``, plain or suite): validated and scored exactly as
  ``culturelens score`` does (``benchmark.scoring.stage`` and ``score_staged``), with the same options, so its rows
  equal the command's value for value and are ranked like any upload's;
- ``score(images=..., prompt_ids=..., dataset="culturelens/cube-1k:cube_1k")``: images answering a dataset's
  prompts, written as a submission (``benchmark.plain_images.write_submission``) and then as above: results of
  ranking grade, comparable with the leaderboard's rows of the same protocol;
- ``score(images=..., prompts=[...])``: images with prompt texts of the caller's own
  (``benchmark.plain_images.ad_hoc``), scored by the harness directly. Comparable only with results on the very
  same prompts (their protocol names the prompts' digest), and only the metrics that need nothing but an image
  and its prompt apply unless the prompts come as a DataFrame with the dataset columns a metric reads (``country``
  and ``concept`` for country recognition, ``artifact`` for artifact recognition, ...); the others are skipped,
  each with the reason (``Results.run.skipped``).

Nothing is written but what is asked for: the validated copy, the embedding cache and the results folder go to a
temporary folder, removed at the end, unless ``out`` names a folder (then laid out as ``culturelens score --out``
lays it out) or ``cache`` an embedding cache to keep. Datasets are read as the command line reads them: from the
store's ``datasets/`` (``store``, else ``CULTURELENS_STORE``, else the command line's default store when it
exists), then the Hub; the default dataset, CUBE-1K, is built into a store named so when neither has it, as the
command line does, and with no store named or made, into the temporary folder (nothing is left in the working
directory).

A metric that cannot run here raises ``MetricUnavailable`` (``benchmark.track``, also ``culturelens.metrics``'),
naming what to provide as this API's keyword (``w1kp_calibration=...``), as do the lines saying which metrics are
not scored.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.errors import CultureLensError, full_install_for
from benchmark.run_record import RunRecord
from benchmark.track import MetricUnavailable


@dataclass(frozen=True)
class Results:
    """What ``culturelens.score`` returns: the tables ``culturelens score`` writes, as DataFrames with the columns
    and types of its Parquet files (``benchmark.results``), and the run record (its ``run.json``).

    - ``per_image``: one row per image and metric (a prompt-level metric, e.g. W1KP, one row per prompt, seed
      null): value, note, error; for images given as a list, ``input`` is each image's position in it;
    - ``aggregates``: per metric and slice (``overall``: the model; country, concept, continent, prompt, ...), the
      mean over prompts with its 95% CI, ``n``, ``excluded`` and the ``protocol`` it was scored under;
    - ``curves``: curves over a parameter (W1KP_k over k), per prompt and for the model (``prompt_id`` null);
    - ``run``: how it was scored (``benchmark.run_record.RunRecord``: settings, backbones and revisions, dataset and
      its digest, seeds, metrics skipped and why);
    - ``folder``: the results folder written (``out``), else None."""

    per_image: pd.DataFrame
    aggregates: pd.DataFrame
    curves: pd.DataFrame
    run: RunRecord
    folder: Path | None = None

    @property
    def overall(self) -> pd.DataFrame:
        """The model's value of each metric (slice ``overall``), with its CI and counts, one row per metric."""
        rows = self.aggregates[self.aggregates["slice"] == "overall"]
        return rows[["track", "metric", "metric_label", "value", "ci_low", "ci_high", "n", "excluded",
                     "higher_is_better", "protocol_id"]].reset_index(drop=True)


def score(submission: str | Path | None = None, *, images=None, prompts=None, prompt_ids=None,
          dataset: str | None = None, seeds=None, model: str | dict | None = None, tracks: list[str] | None = None,
          suite: str | None = None,
          out: str | Path | None = None, cache: str | Path | None = None, store: str | Path | None = None,
          backbones: str | Path | None = None, device: str | None = None, batch_size: int | None = None,
          num_workers: int | None = None, progress: bool = True, **settings) -> Results:
    """Score a submission folder or ``.zip`` (``submission``), or ``images`` (PIL images, tensors (C, H, W) or
    batches (N, C, H, W), arrays (H, W, C), or paths) with either their ``prompts`` (texts, or a DataFrame with a
    ``prompt`` column and dataset columns such as ``country``) or the ``prompt_ids`` they answer in ``dataset``
    (``REPO:CONFIG[:SPLIT]``); see the module for what each gives. ``seeds``: each image's seed (default 0, 1, ...
    among its prompt's images); ``model``: its name, or the manifest's model fields as a dict.

    As ``culturelens score``'s options: ``tracks`` (default: every track that can run), ``suite`` (the suite a
    suite submission answers), ``out`` (keep the validated copy, cache and results folder there), ``cache`` (an
    embedding cache file to reuse), ``store``, ``backbones`` (a JSON file pointing backbone ids at local weights),
    ``device``, ``batch_size``, ``num_workers`` (DataLoader processes; for images given with their own prompts,
    none unless asked: they are in memory already), and every metric setting by name (``w1kp_calibration=...``,
    ``expectations_judge=...``: ``culturelens score --help`` lists them); a setting not given is read from its
    environment variable, as on the command line. ``progress``: show progress bars.

    A CultureLensError (a ValueError or TypeError too, for bad images and prompts) says what is wrong: a rejected
    submission (the validator's report), an unknown setting; ``MetricUnavailable`` (one) when no metric, or none of
    a track named, can run, naming the keyword that would provide it; ``FullInstallNeeded`` in the app-only install
    (requirements.txt: no PyTorch), saying what to install."""
    with full_install_for("culturelens.score"):
        return _score(submission, images=images, prompts=prompts, prompt_ids=prompt_ids, dataset=dataset,
                      seeds=seeds, model=model, tracks=tracks, suite=suite, out=out, cache=cache, store=store,
                      backbones=backbones, device=device, batch_size=batch_size, num_workers=num_workers,
                      progress=progress, **settings)


def _score(submission, *, images, prompts, prompt_ids, dataset, seeds, model, tracks, suite, out, cache, store,
           backbones, device, batch_size, num_workers, progress, **settings) -> Results:
    """``score``'s work (see there)."""
    from benchmark import tracks as registry
    from culturelens.hub_access import offline_unless_hub_reachable

    given_images = images is not None
    if (submission is None) == (not given_images):
        raise CultureLensError("give either a submission (a folder or .zip) or images, not both or neither")
    if given_images and (prompts is None) == (prompt_ids is None):
        raise CultureLensError("give images with either their prompts (texts) or the prompt_ids they answer in a "
                               "dataset, not both or neither")
    if prompt_ids is not None and not dataset:
        raise CultureLensError("prompt_ids name prompts of a dataset: give dataset='REPO:CONFIG' too")
    declared = {s.name for s in registry.settings_declared()}
    if unknown := sorted(set(settings) - declared):
        raise CultureLensError(f"unknown setting(s) {', '.join(unknown)}; the metric settings are "
                               f"{', '.join(sorted(declared))}")
    given = {"tracks": tracks, "backbones": backbones, "device": device, "batch_size": batch_size,
             "num_workers": num_workers, **settings}
    offline_unless_hub_reachable()
    with _datasets_quiet(), tempfile.TemporaryDirectory(prefix="culturelens-score-") as work, _in_keywords():
        kept = Path(out) if out is not None else None
        if prompts is not None:
            return _score_ad_hoc(images, prompts, seeds, model, given, out=kept, cache=cache, progress=progress)
        if prompt_ids is not None:
            from benchmark.plain_images import write_submission

            submission = write_submission(Path(work) / "given", images, prompt_ids, dataset=dataset, seeds=seeds,
                                          model=model)
        return _score_submission(Path(submission), given, suite=suite, out=kept or Path(work) / "out",
                                 keep=kept is not None, cache=cache, datasets=_datasets_root(store, Path(work)),
                                 progress=progress)


def _datasets_root(store: str | Path | None, work: Path) -> Path:
    """The ``datasets/`` a submission is read against: the store's that ``store`` or ``CULTURELENS_STORE`` names,
    else the command line's default store's when it exists (``culturelens`` made it), else one in ``work`` (the
    temporary folder, removed at the end), so that building the default dataset writes nothing unasked."""
    from leaderboard import operator_settings

    named, _ = operator_settings.STORE.given(str(store) if store else None)
    default = operator_settings.store()
    chosen = Path(named) if named is not None else default if default.is_dir() else work / "store"
    return chosen / "datasets"


@contextlib.contextmanager
def _in_keywords():
    """A metric that cannot run, said in this API's keywords (the command line's flags in the message become them)."""
    from culturelens.options import in_keywords

    try:
        yield
    except MetricUnavailable as error:
        raise MetricUnavailable(error.name, in_keywords(str(error))) from None


def _score_submission(submission: Path, given: dict, *, suite: str | None, out: Path, keep: bool,
                      cache: str | Path | None, datasets: Path, progress: bool) -> Results:
    """``culturelens score``'s steps in this process: the suite, the default dataset (in ``datasets``, a store's),
    validation into ``out``, scoring, and the results folder written when ``keep``."""
    from benchmark import results, scoring
    from benchmark.cache import EmbeddingCache
    from benchmark.layout import ScoreOutput
    from benchmark.progress import Bars
    from benchmark.submission.suite import is_suite_upload
    from benchmark.suite_assets import open_suite
    from culturelens import options
    from leaderboard.operator_settings import CUBE_SOURCE, SUITE

    if not submission.exists():
        raise CultureLensError(f"{submission}: no such submission folder or .zip")
    named = SUITE.resolve(suite)
    ref = open_suite(named, datasets) if named or is_suite_upload(submission) else None
    if ref is not None and ref.assets is not None:
        options.use_suite_assets(given, ref.assets)
    elif ref is None:
        options.build_default_dataset(datasets, CUBE_SOURCE.resolve() or options.default_cube_source())
    chosen = options.scoring_options(given)
    datasets_root = ref.datasets_root if ref is not None else datasets
    definition = ref.suite if ref is not None else None
    output = ScoreOutput(out)
    out.mkdir(parents=True, exist_ok=True)
    scoring.stage(submission, output, datasets_root, definition, progress=progress)
    metrics, unavailable = chosen.build_metrics()
    bars = Bars(enabled=progress)
    try:
        scores = scoring.score_staged(output.submission.folder, chosen, metrics, unavailable,
                                      cache=EmbeddingCache(Path(cache) if cache else output.cache),
                                      datasets_root=datasets_root, suite=definition, progress=bars, say=_say)
    finally:
        bars.close()
    folder = None
    if keep:
        folder = results.write_folder(output.results(scores.run.submission_id), results.records(scores.per_image),
                                      scores.aggregates, results.records(scores.curves), scores.run, replace=True)
    return _results(scores, folder)


def _score_ad_hoc(images, prompts, seeds, model, given: dict, *, out: Path | None, cache: str | Path | None,
                  progress: bool) -> Results:
    """Images with prompts of the caller's own, through the harness (see the module); with ``out``, its results
    folder (``OUT/results/<id>``) and embedding cache (``OUT/cache.sqlite``) kept there."""
    from benchmark import harness, results
    from benchmark.cache import EmbeddingCache
    from benchmark.layout import ScoreOutput
    from benchmark.plain_images import ad_hoc
    from benchmark.progress import Bars
    from culturelens import options

    inputs = ad_hoc(images, prompts, seeds=seeds, model=model)
    # Images held in memory are decoded here unless workers are asked for: on a GPU the harness's default, a
    # fork-server worker per core, took 16 s to start on an H200 for 64 images the process itself embedded in 0.5 s.
    chosen = options.scoring_options({**given, "num_workers": given.get("num_workers") or 0})
    metrics, unavailable = chosen.build_metrics()
    backbones, metrics, disabled = harness.load_backbones(metrics, dict(chosen.registry), chosen.device)
    unavailable = {**unavailable, **disabled}
    for name, reason in sorted(unavailable.items()):
        _say(f"not scoring {name}: {reason}")
    if not metrics:
        raise MetricUnavailable("every metric", "no metric can run: provide what the 'not scoring' lines name, or "
                                                "choose other --tracks")
    output = ScoreOutput(out) if out is not None else None
    kept_cache = Path(cache) if cache else output.cache if output is not None else None
    bars = Bars(enabled=progress)
    try:
        scores = harness.score(inputs.store, inputs.manifest, inputs.prompts, inputs.images, metrics, backbones,
                               EmbeddingCache(kept_cache) if kept_cache else None,
                               submission_id=inputs.submission_id, options=chosen, progress=bars, disabled=unavailable)
    finally:
        bars.close()
    folder = None
    if output is not None:
        folder = results.write_folder(output.results(scores.run.submission_id), results.records(scores.per_image),
                                      scores.aggregates, results.records(scores.curves), scores.run, replace=True)
    found = _results(scores, folder)
    position = dict(zip(inputs.images["path"], inputs.images["input"]))
    per_image = found.per_image.assign(input=found.per_image["image_path"].map(position).astype("Int64"))
    metric_order = pd.Categorical(per_image["metric"], categories=list(dict.fromkeys(per_image["metric"])))
    per_image = per_image.assign(order=metric_order).sort_values(["order", "input"], kind="stable") \
        .drop(columns="order").reset_index(drop=True)  # each metric's rows in the order the images were given
    return Results(per_image, found.aggregates, found.curves, found.run, folder)


def _results(scores, folder: Path | None) -> Results:
    """The harness's scores as the command line's Parquet files read back: the same columns and types."""
    from benchmark import results

    def frame(rows: list[dict], schema) -> pd.DataFrame:
        return results.table(rows, schema).to_pandas()

    return Results(frame(results.records(scores.per_image), results.PER_IMAGE),
                   frame(scores.aggregates, results.AGGREGATE), frame(results.records(scores.curves), results.CURVES),
                   scores.run, folder)


@contextlib.contextmanager
def _datasets_quiet():
    """The datasets library's own bars off while scoring (``culturelens score`` shows its own progress), and as
    they were afterwards."""
    import datasets

    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def _say(line: str) -> None:
    """A metric not scored, and why: the line the command line prints, in this API's keywords."""
    from culturelens.options import in_keywords

    print(in_keywords(line), file=sys.stderr)

"""``culturelens score``: validate, stage and score one submission outside the leaderboard.

Writes the same files the worker writes (``per_image.parquet``, ``aggregates.parquet``,
``curves.parquet``, ``run.json``) in a folder named as the worker names it, ``OUT/results/<submission id>/``
(``benchmark.layout.results_folder``; the id is ``local-`` and the start of the content hash), keeps the
validated copy in ``OUT/submission/`` and the embedding cache in ``OUT/cache.sqlite``, so a rerun
(another track, a crash) recomputes nothing cached; a rerun's results replace the earlier ones.

Many processes: ``accelerate launch -m culturelens score ...`` (or
``--num-processes N``, which runs exactly that), on one machine or several
(``--num_machines``, each with its own ``--out`` and cache). Every process embeds
its share of the batches and sends it to the main process over torch.distributed
(``benchmark.features.embeddings.compute_features``); the main process then computes the metrics and
writes the results, which equal a one-process run's.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from benchmark import harness, layout, results
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import load_prompts_for
from benchmark.errors import CultureLensError, OutputExists
from benchmark.harness import Scores
from benchmark.layout import ScoreOutput, holds_validated_submission
from benchmark.metrics.base import Metric
from benchmark.progress import Bars
from benchmark.run_record import RunRecord
from benchmark.scoring_options import ScoringOptions
from benchmark.settings import LAUNCHED, WORLD_SIZE, child_environment
from benchmark.suite import SUITE_V1, Suite
from benchmark.track import MetricUnavailable


def launched_by_accelerate() -> bool:
    """True inside a process started by ``accelerate launch`` / torchrun (or by our own relaunch)."""
    return WORLD_SIZE.resolve() is not None or LAUNCHED.resolve() is not None


def relaunch_with_accelerate(num_processes: int, argv: list[str]) -> int:
    """Run this same command under ``accelerate launch`` with ``num_processes`` processes.

    accelerate's multi-process launcher (torchrun underneath) serves CPUs as well as GPUs:
    on a machine without CUDA each process joins a gloo group (``MULTI_CPU``).
    """
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
               str(num_processes), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "-m", "culturelens.cli", *argv]
    return subprocess.call(command, env=child_environment({LAUNCHED: "1"}))


class SubmissionRefused(CultureLensError):
    """The submission did not pass validation: the message is the validator's report."""


def stage(submission: Path, output: ScoreOutput, datasets_root: Path, suite: Suite | None, *,
          progress: bool = True) -> str | None:
    """Validate ``submission`` (plain, or a suite submission checked against ``suite``) into ``output``'s
    ``submission/`` and return the validator's report, or None when ``output`` holds the same validated submission
    already (reused as it is). SubmissionRefused when it is refused, OutputExists when ``output`` holds another
    submission."""
    from benchmark.submission.suite import stage as validate, validated_hash

    staged = output.submission
    bars = Bars(enabled=progress, unit="img")
    try:
        report = validate(submission, output.staging, suite or SUITE_V1,
                          functools.partial(load_prompts_for, datasets_root=datasets_root), progress=bars)
    finally:
        bars.close()
    if not report.ok:
        raise SubmissionRefused(report.text())
    if holds_validated_submission(staged.folder):
        shutil.rmtree(report.folder)
        if validated_hash(staged.folder) != report.content_hash:
            raise OutputExists(f"{staged.folder} holds another submission; choose another --out")
        return None
    report.keep(staged.folder)
    return report.text()


def score_staged(folder: Path, options: ScoringOptions, metrics: list[Metric], unavailable: dict[str, str], *,
                 cache: EmbeddingCache, datasets_root: Path, suite: Suite | None, progress=None,
                 say=None) -> Scores | None:
    """Score the validated submission ``folder`` (``stage``'s) with ``metrics`` (``unavailable``: those that
    could not be built, with the reason) under ``options``, as ``culturelens score`` does: the backbones loaded
    (a metric whose backbone cannot load is not scored: ``say`` tells each such metric and why), the submission id
    ``local-`` and the start of its content hash. None on ranks > 0; MetricUnavailable when no metric can run."""
    from benchmark import suite_scoring
    from benchmark.submission.suite import validated_hash

    backbones, metrics, disabled = harness.load_backbones(metrics, dict(options.registry), options.device)
    unavailable = {**unavailable, **disabled}
    for name, reason in sorted(unavailable.items()):
        if say:
            say(f"not scoring {name}: {reason}")
    if not metrics:
        raise MetricUnavailable("every metric", "no metric can run: provide what the 'not scoring' lines above "
                                                "name, or choose other --tracks")
    submission_id = "local-" + validated_hash(folder).removeprefix("sha256:")[:10]
    return suite_scoring.score(folder, metrics, backbones, cache, submission_id=submission_id,
                               datasets_root=datasets_root, suite=suite or SUITE_V1, options=options,
                               progress=progress, disabled=unavailable)


def main(submission: Path, out: Path, options: ScoringOptions, *, store: Path, cache: Path | None,
         suite=None) -> int:
    """``culturelens score``: 0 when scored (or on ranks > 0), 1 when the submission is refused; a user error
    (CultureLensError) when its dataset cannot be loaded or no metric can run. ``options``: the metrics, backbones
    and runtime chosen, their settings recorded in run.json (``culturelens reproduce``). ``suite``: the suite
    (``suite_assets.SuiteRef``) a suite submission answers, whose datasets root replaces the store's."""
    import torch
    from accelerate import PartialState

    metrics, unavailable = options.build_metrics()
    state = PartialState(cpu=options.device == "cpu" or not torch.cuda.is_available())
    options = replace(options, device=options.device or str(state.device),
                      shard=(state.process_index, state.num_processes))
    out.mkdir(parents=True, exist_ok=True)
    datasets_root = suite.datasets_root if suite is not None else store / layout.DATASETS
    definition = suite.suite if suite is not None else None
    output = ScoreOutput(out)
    ok = True
    if state.is_local_main_process:
        try:
            report = stage(submission, output, datasets_root, definition)
        except SubmissionRefused as refused:
            print(refused, file=sys.stderr)
            ok = False
        except OutputExists as taken:
            print(f"error: {taken}", file=sys.stderr)
            ok = False
        else:
            if report is not None:
                print(report)
    state.wait_for_everyone()
    if not ok or not holds_validated_submission(output.submission.folder):
        return 1
    bars = Bars(enabled=state.is_main_process)
    say = (lambda line: print(line, file=sys.stderr)) if state.is_main_process else None
    try:
        scores = score_staged(output.submission.folder, options, metrics, unavailable,
                              cache=EmbeddingCache(cache or output.cache), datasets_root=datasets_root,
                              suite=definition, progress=bars, say=say)
    finally:
        bars.close()
    if scores is None:
        return 0
    # The worker's naming (results/<submission id>); scoring the same submission again replaces its results.
    target = results.write_folder(output.results(scores.run.submission_id), results.records(scores.per_image),
                                  scores.aggregates, results.records(scores.curves), scores.run, replace=True)
    print(summary(scores.run, target))
    return 0


def summary(run: RunRecord, target: Path) -> str:
    """The line ``culturelens score`` ends with: what it scored, what it computed and where the results are."""
    parts = f" of the parts {', '.join(run.suite.parts)} (missing: {', '.join(run.suite.missing) or 'none'})" \
        if run.suite is not None else ""
    return (f"scored {run.images} images{parts} ({run.embeddings_computed} embeddings computed, "
            f"{run.embeddings_cached} from the cache) -> {target}")

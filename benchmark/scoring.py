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
from pathlib import Path


from benchmark import harness, layout, results
from benchmark.layout import ScoreOutput, holds_validated_submission
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import load_prompts_for
from benchmark.encoders.spec import BackboneSpec
from benchmark.errors import CultureLensError
from benchmark.metrics.base import Metric
from benchmark.progress import Bars
from benchmark.suite import SUITE_V1, Suite
from benchmark.settings import LAUNCHED, WORLD_SIZE, child_environment


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


def _stage_once(submission: Path, out: Path, datasets_root: Path, suite: Suite | None) -> bool:
    """Validate ``submission`` (plain, or a suite submission checked against ``suite``) into ``OUT/submission``
    (or reuse an identical one there)."""
    from benchmark.submission.suite import stage, validated_hash

    output = ScoreOutput(out)
    staged = output.submission
    bars = Bars(unit="img")
    report = stage(submission, output.staging, suite or SUITE_V1,
                   functools.partial(load_prompts_for, datasets_root=datasets_root), progress=bars)
    bars.close()
    if not report.ok:
        print(report.text(), file=sys.stderr)
        return False
    if holds_validated_submission(staged.folder):
        shutil.rmtree(report.folder)
        if validated_hash(staged.folder) != report.content_hash:
            print(f"error: {staged.folder} holds another submission; choose another --out", file=sys.stderr)
            return False
        return True
    report.keep(staged.folder)
    print(report.text())
    return True


def main(submission: Path, out: Path, *, registry: dict[str, BackboneSpec], metrics: list[Metric],
         unavailable: dict[str, str], store: Path, cache: Path | None, device: str | None, batch_size: int,
         num_workers: int | None, settings: dict | None = None, suite=None) -> int:
    """``culturelens score``: 0 when scored (or on ranks > 0), 1 when the submission is refused; a user error
    (CultureLensError) when its dataset cannot be loaded or no metric can run. ``settings``: how ``metrics`` were
    built, recorded in run.json (``culturelens reproduce``). ``suite``: the suite (``suite_assets.SuiteRef``) a
    suite submission answers, whose datasets root replaces the store's."""
    import torch
    from accelerate import PartialState

    from benchmark import suite_scoring
    from benchmark.submission.suite import validated_hash

    state = PartialState(cpu=device == "cpu" or not torch.cuda.is_available())
    out.mkdir(parents=True, exist_ok=True)
    datasets_root = suite.datasets_root if suite is not None else store / layout.DATASETS
    definition = suite.suite if suite is not None else None
    ok = _stage_once(submission, out, datasets_root, definition) if state.is_local_main_process else True
    state.wait_for_everyone()
    output = ScoreOutput(out)
    staged = output.submission
    if not ok or not holds_validated_submission(staged.folder):
        return 1
    backbones, metrics, disabled = harness.load_backbones(metrics, registry, device or str(state.device))
    unavailable = {**unavailable, **disabled}
    if state.is_main_process:
        for name, reason in sorted(unavailable.items()):
            print(f"not scoring {name}: {reason}", file=sys.stderr)
    if not metrics:
        raise CultureLensError("no metric can run: provide what the 'not scoring' lines above name, or choose "
                               "other --tracks")
    submission_id = "local-" + validated_hash(staged.folder).removeprefix("sha256:")[:10]
    bars = Bars(enabled=state.is_main_process)
    try:
        scores = suite_scoring.score(staged.folder, metrics, backbones, EmbeddingCache(cache or output.cache),
                                     submission_id=submission_id, datasets_root=datasets_root,
                                     suite=definition or SUITE_V1, batch_size=batch_size, num_workers=num_workers,
                                     shard=(state.process_index, state.num_processes), progress=bars,
                                     disabled=unavailable, settings=settings)
    finally:
        bars.close()
    if scores is None:
        return 0
    # The worker's naming (results/<submission id>); scoring the same submission again replaces its results.
    target = results.write_folder(output.results(submission_id), results.records(scores.per_image),
                                  scores.aggregates, results.records(scores.curves), scores.run, replace=True)
    run = scores.run
    parts = f" of the parts {', '.join(run['suite']['parts'])} (missing: {', '.join(run['suite']['missing']) or 'none'})" \
        if "suite" in run else ""
    print(f"scored {run['images']} images{parts} ({run['embeddings_computed']} embeddings computed, "
          f"{run['embeddings_cached']} from the cache) -> {target}")
    return 0

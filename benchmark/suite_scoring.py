"""Score a validated submission, plain or suite (``benchmark.suite``), into one set of results.

A suite submission's parts are scored one after the other by the harness (``benchmark.harness.score``), each with
the metrics of its part's tracks only (diversity on the under-specified prompts, never on CUBE-1K), against its
own dataset; their rows go into one results folder. Each aggregate row keeps its part's dataset and protocol (the
``dataset``, ``seeds`` and ``protocol`` columns), so a part is ranked among rows of the same protocol; ``run.json``
records the suite, the parts present and missing, and each part's own run record under ``parts``.

Against a build of the suite that is not pinned (``Suite.pinned``), every row's protocol also says so
(``build: unpinned``): such rows are never ranked with the pinned suite's.

``score`` is the one call the command line (``culturelens score``) and the leaderboard's worker make.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from benchmark import __version__, harness, results
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import load_prompts_for
from benchmark.encoders.base import Backbone
from benchmark.errors import CultureLensError
from benchmark.harness import Scores
from benchmark.layout import SubmissionLayout, SuiteLayout
from benchmark.metrics.base import Metric
from benchmark.run_record import RunRecord
from benchmark.scoring_options import ScoringOptions
from benchmark.submission.manifest import Manifest
from benchmark.suite import Suite


def score(folder: Path, metrics: list[Metric], backbones: dict[str, Backbone], cache: EmbeddingCache | None = None,
          *, submission_id: str, datasets_root: Path | None, suite: Suite | None = None, local_only: bool = False,
          options: ScoringOptions | None = None, progress=None, disabled: dict[str, str] | None = None
          ) -> Scores | None:
    """Score the validated submission ``folder`` (a store's ``submissions/<id>``, ``culturelens score``'s
    ``OUT/submission``): a plain one as ``harness.score`` does, a suite one part by part (``suite``: its
    definition; the parts' datasets load from ``datasets_root``, then the Hub unless ``local_only``). None on
    ranks > 0 of ``options.shard``. A CultureLensError when a suite submission has no part any of ``metrics``
    scores."""
    options = options or ScoringOptions()
    parts = SuiteLayout(Path(folder)).parts
    if not parts:
        return _score_one(SubmissionLayout(Path(folder)), metrics, backbones, cache, datasets_root, local_only,
                          submission_id=submission_id, options=options, progress=progress, disabled=disabled)
    if suite is None:
        raise ValueError("a suite submission is scored against its suite's definition: pass suite")
    chosen = {name: [m for m in metrics if m.info.track in suite.part(name).tracks] for name in parts}
    if not any(chosen.values()):
        tracks = sorted({m.info.track for m in metrics})
        raise CultureLensError(f"no part of this submission ({', '.join(parts)}) is scored by the tracks that can run "
                               f"({', '.join(tracks) or 'none'}); {suite.label} scores "
                               + "; ".join(f"{p.name} by {', '.join(p.tracks)}" for p in suite.parts))
    absent = {m.info.name: f"the submission has no {part.name} part" for m in metrics
              if (part := suite.part_of_track(m.info.track)) is not None and part.name not in parts}
    scored: dict[str, Scores] = {}
    for name, layout in parts.items():
        if not chosen[name]:
            continue
        part_progress = progress and (lambda stage, done, total, name=name: progress(f"{stage} ({name})", done, total))
        result = _score_one(layout, chosen[name], backbones, cache, datasets_root, local_only,
                            submission_id=submission_id, options=options, progress=part_progress, disabled=disabled)
        if result is None:
            return None  # a shard's rank > 0: rank 0 writes the results
        scored[name] = of_build(result, suite)
    unscored = {name: "none of its tracks' metrics can run" for name in parts if name not in scored}
    return merge(scored, suite, submission_id=submission_id, disabled={**absent, **(disabled or {})},
                 options=options, unscored=unscored)


def of_build(scores: Scores, suite: Suite) -> Scores:
    """``scores`` with every aggregate row's protocol naming the build scored against (``Suite.build``; unchanged
    for the pinned one), and the run record's protocols alike."""
    if suite.build is None:
        return scores

    def marked(protocol) -> dict:
        fields = results.protocol_fields(protocol)
        return {} if fields is None else results.protocol_columns({**fields, "build": suite.build})

    rows = [{**row, **marked(row.get("protocol"))} for row in scores.aggregates]
    protocols = {m: marked(p).get("protocol", p) for m, p in (scores.run.protocols or {}).items()}
    run = scores.run.model_copy(update={"protocols": protocols or scores.run.protocols})
    return Scores(scores.per_image, rows, scores.curves, run)


def _score_one(layout: SubmissionLayout, metrics, backbones, cache, datasets_root, local_only, **arguments):
    manifest = Manifest.model_validate_json(layout.manifest.read_bytes())
    prompts = load_prompts_for(manifest, datasets_root, local_only=local_only)
    images = pq.read_table(layout.images_table).to_pandas()
    return harness.score(layout.folder, manifest, prompts, images, metrics, backbones, cache, **arguments)


def merge(scored: dict[str, Scores], suite: Suite, *, submission_id: str, disabled: dict[str, str],
          options: ScoringOptions, unscored: dict[str, str] | None = None) -> Scores:
    """The parts' scores as one: their rows together, and one run record that keeps each part's
    (``RunRecord.of_suite``)."""
    run = RunRecord.of_suite({name: s.run for name, s in scored.items()}, repo=suite.repo, version=suite.version,
                             names=suite.names, submission_id=submission_id, harness_version=__version__,
                             disabled=disabled, settings=options.record(), batch_size=options.batch_size,
                             unscored=unscored or {})
    frames = [s.per_image for s in scored.values()]
    curves = [s.curves for s in scored.values() if not s.curves.empty]
    return Scores(pd.concat(frames, ignore_index=True),
                  [row for s in scored.values() for row in s.aggregates],
                  pd.concat(curves, ignore_index=True) if curves else scored[next(iter(scored))].curves, run)

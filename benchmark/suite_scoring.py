"""Score a validated submission, plain or suite (``benchmark.suite``), into one set of results.

A suite submission's parts are scored one after the other by the harness (``benchmark.harness.score``), each with
the metrics of its part's tracks only (diversity on the under-specified prompts, never on CUBE-1K), against its
own dataset; their rows go into one results folder. Each aggregate row keeps its part's dataset and protocol (the
``dataset``, ``seeds`` and ``protocol`` columns), so a part is ranked among rows of the same protocol; ``run.json``
records the suite, the parts present and missing, and each part's own run record under ``parts``.

``score`` is the one call the command line (``culturelens score``) and the leaderboard's worker make.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from benchmark import __version__, harness
from benchmark.cache import EmbeddingCache
from benchmark.datasets.prompts import load_prompts_for
from benchmark.encoders.base import Backbone
from benchmark.errors import CultureLensError
from benchmark.harness import Scores
from benchmark.layout import SubmissionLayout, SuiteLayout
from benchmark.metrics.base import Metric
from benchmark.submission.manifest import Manifest
from benchmark.suite import Suite


def score(folder: Path, metrics: list[Metric], backbones: dict[str, Backbone], cache: EmbeddingCache | None = None,
          *, submission_id: str, datasets_root: Path | None, suite: Suite | None = None, local_only: bool = False,
          batch_size: int = 32, num_workers: int | None = None, shard: tuple[int, int] = (0, 1), progress=None,
          disabled: dict[str, str] | None = None, settings: dict | None = None) -> Scores | None:
    """Score the validated submission ``folder`` (a store's ``submissions/<id>``, ``culturelens score``'s
    ``OUT/submission``): a plain one as ``harness.score`` does, a suite one part by part (``suite``: its
    definition; the parts' datasets load from ``datasets_root``, then the Hub unless ``local_only``). None on
    ranks > 0 of a ``shard``. A CultureLensError when a suite submission has no part any of ``metrics`` scores."""
    parts = SuiteLayout(Path(folder)).parts
    if not parts:
        return _score_one(SubmissionLayout(Path(folder)), metrics, backbones, cache, datasets_root, local_only,
                          submission_id=submission_id, batch_size=batch_size, num_workers=num_workers, shard=shard,
                          progress=progress, disabled=disabled, settings=settings)
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
                            submission_id=submission_id, batch_size=batch_size, num_workers=num_workers, shard=shard,
                            progress=part_progress, disabled=disabled, settings=settings)
        if result is None:
            return None  # a shard's rank > 0: rank 0 writes the results
        scored[name] = result
    unscored = {name: "none of its tracks' metrics can run" for name in parts if name not in scored}
    return merge(scored, suite, submission_id=submission_id, disabled={**absent, **(disabled or {})},
                 settings=settings, batch_size=batch_size, unscored=unscored)


def _score_one(layout: SubmissionLayout, metrics, backbones, cache, datasets_root, local_only, **options):
    manifest = Manifest.model_validate_json(layout.manifest.read_bytes())
    prompts = load_prompts_for(manifest, datasets_root, local_only=local_only)
    images = pq.read_table(layout.images_table).to_pandas()
    return harness.score(layout.folder, manifest, prompts, images, metrics, backbones, cache, **options)


def merge(scored: dict[str, Scores], suite: Suite, *, submission_id: str, disabled: dict[str, str],
          settings: dict | None, batch_size: int, unscored: dict[str, str] | None = None) -> Scores:
    """The parts' scores as one: their rows together, and one run record that keeps each part's."""
    runs = {name: s.run for name, s in scored.items()}
    present = [name for name in suite.names if name in runs or name in (unscored or {})]
    missing = [name for name in suite.names if name not in present]
    skipped = dict(disabled)
    for name, run in runs.items():
        skipped.update({metric: f"{name}: {reason}" for metric, reason in run["skipped"].items()
                        if metric not in disabled})
    errors: Counter = Counter()
    for run in runs.values():
        errors.update(run["errors"])
    total = lambda key: sum(run[key] for run in runs.values())  # noqa: E731
    run = {
        "submission_id": submission_id,
        "harness_version": __version__,
        "suite": {"repo": suite.repo, "version": suite.version, "parts": present, "missing": missing,
                  "unscored": unscored or {}},
        "parts": runs,
        "metrics": {m: v for r in runs.values() for m, v in r["metrics"].items()},
        "skipped": skipped,
        "backbones": {b: v for r in runs.values() for b, v in r["backbones"].items()},
        "backbone_specs": {b: v for r in runs.values() for b, v in r["backbone_specs"].items()},
        "settings": settings,
        "batch_size": batch_size,
        **{key: total(key) for key in ("images", "missing", "embeddings_cached", "embeddings_computed", "excluded")},
        "errors": dict(sorted(errors.items())),
        "protocols": {m: p for r in runs.values() for m, p in r["protocols"].items()},
        "scored_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    frames = [s.per_image for s in scored.values()]
    curves = [s.curves for s in scored.values() if not s.curves.empty]
    return Scores(pd.concat(frames, ignore_index=True),
                  [row for s in scored.values() for row in s.aggregates],
                  pd.concat(curves, ignore_index=True) if curves else scored[next(iter(scored))].curves, run)

"""CultureLens from Python, and the command line on top of the library (``benchmark``) and the service
(``leaderboard``).

From Python (see docs/python.md), each name imported on first use, so that ``import culturelens`` loads
neither torch nor the datasets library (the leaderboard's app imports the project's modules without them):

- ``culturelens.score(submission | images=..., prompts=... | prompt_ids=..., dataset=...)``: scores as
  ``culturelens score`` does, returning ``Results`` (per-image rows, aggregates, curves as DataFrames, and the run
  record) and writing nothing unless asked (``culturelens.api``);
- ``culturelens.metrics``: one metric as a function of plain images and prompts, e.g.
  ``culturelens.metrics.CLIPScore()(images, prompts)``, one value per sample;
- ``culturelens.write_submission``: images answering a dataset's prompts, written as a submission folder;
- ``culturelens.ScoringOptions`` and ``culturelens.RunRecord``: how a submission is scored, and what its run.json
  records;
- ``culturelens.MetricUnavailable``: what ``score`` and ``metrics`` raise for a metric that cannot run here.

``culturelens.cli`` builds the parser from the verb modules of ``culturelens.verbs`` and from every track's verbs
(``benchmark.tracks``), and handles errors in one place: a ``benchmark.errors.CultureLensError`` is one sentence
on stderr and exit status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib

# name -> the module that defines it, imported when the name is first used
_LAZY = {
    "score": "culturelens.api",
    "Results": "culturelens.api",
    "write_submission": "benchmark.plain_images",
    "ScoringOptions": "benchmark.scoring_options",
    "RunRecord": "benchmark.run_record",
    "CultureLensError": "benchmark.errors",
    "MetricUnavailable": "benchmark.track",
}
__all__ = [*_LAZY, "metrics"]


def __getattr__(name: str):
    if name == "metrics":
        return importlib.import_module("culturelens.metrics")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'culturelens' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

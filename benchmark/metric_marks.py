"""Marks a metric writes into what it returns, named once below the metrics and the layers that read them.

A metric module (``benchmark.metrics``) is pure: it imports neither the results tables (``benchmark.results``) nor
the encoders (``benchmark.encoders``), yet both sides must spell these the same (``tests/test_layering.py`` holds
the rule):

- ``ERROR_NOTE``: a per-image row's note starting with it marks the row an error; the harness moves the rest of
  the note to the results table's ``error`` column.
- ``PREPARED_ON_DEVICE``: images resized, cropped and normalised on the model's device by the transform's own steps
  run on tensors (``encoders.base.Preparation``), named in the cache keys of such backbones and at the end of the
  version of every metric that reads image features (``metrics.base.MetricInfo``), since the inputs are not the PIL
  transform's bit for bit (benchmarks/README.md, "harness_speed.py": the largest embedding difference on real-size
  backbones).
"""

from __future__ import annotations

ERROR_NOTE = "error: "
PREPARED_ON_DEVICE = "tensor-1"

"""Metrics: pure functions over embeddings, tags and scores, one module per track, each behind an
adapter (``base.Metric``) that declares what it needs. Which metrics a scoring run builds, and with which
settings, each track says in its module (``benchmark.tracks``)."""

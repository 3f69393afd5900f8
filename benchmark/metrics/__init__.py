"""Metrics: pure functions over embeddings, tags and scores, one module per track."""

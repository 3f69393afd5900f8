"""The relevance track (CAIRE, Yayavaram et al., arXiv:2506.09109): a knowledge-base index (``kb``), visual
entity linking (``linking``), and the evaluation of relevance scores against human labels (``evaluation``).
The judges are in ``benchmark.judges``; the metric adapter in ``benchmark.metrics.relevance``."""

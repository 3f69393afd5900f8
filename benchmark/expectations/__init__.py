"""The expectations track (CulturalFrames, arXiv:2506.08835): human aggregates, metric meta-evaluation against
the raters, and the paper's published numbers."""

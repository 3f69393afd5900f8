"""The expectations track (CulturalFrames, arXiv:2506.08835): human aggregates and metric meta-evaluation against
the raters. The paper's published numbers are the track's own (``benchmark.tracks.papers.culturalframes``)."""

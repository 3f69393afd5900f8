"""The command line's own verbs, one module per group; each module exports ``VERBS`` (``benchmark.track.Verb``),
as a track module does."""

"""The papers the tracks implement: one module per paper, holding its record (``benchmark.track.Paper``: citation and
BibTeX) and the numbers it published (``PaperRow``, ``PaperCorrelation``), which the tracks declare in
``Track.papers``. Only data: every number is copied from the paper's table or text its row names, none computed.

A track kept outside this repository declares its paper in its own module the same way; nothing here lists them.
"""

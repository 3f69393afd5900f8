"""``culturelens``: the command line, on top of the library (``benchmark``) and the service (``leaderboard``).

``culturelens.cli`` builds the parser from the verb modules of ``culturelens.verbs`` and from every track's verbs
(``benchmark.tracks``), and handles errors in one place: a ``benchmark.errors.CultureLensError`` is one sentence
on stderr and exit status 2; anything else is a bug and keeps its traceback.
"""

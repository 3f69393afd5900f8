"""The Cultural Arena's rules, as pure functions of vote records (issue 53): nothing here reads a store, a queue or
a page, as GenArena keeps its ratings in one module that takes battles and returns ratings (``genarena/bt_elo.py``).

- ``rating``: Bradley-Terry strengths from votes, bootstrap intervals, rank intervals, overall and per culture, with
  each voter's weight capped at a stated share of a ranking.
- ``reliability``: which voters' votes are set aside (failed gold battles, or disagreeing with everyone far beyond
  chance), each with the reason.
- ``agreement``: how often an automatic metric orders a decided pair of images as the voters did, and the
  model-level rank correlation between its scores and the strengths.
- ``matchmaking``: which battle the server issues next (the pair whose order is least certain, sides at random) and
  the gold battles built from the reference datasets.

A vote record (one row of a ``pandas.DataFrame``): ``battle``, ``model_a`` (the left image's model), ``model_b``,
``outcome`` (one of ``OUTCOMES``), ``culture`` (the culture the prompt names), ``voter`` (a keyed hash, never a
name); the reliability rule also reads ``kind`` ("model" or "gold") and ``gold_answer`` (a gold battle's right side).
"""

OUTCOMES = ("a", "b", "tie", "both_bad")
"""A vote: the left image (``a``) is better, the right one (``b``), neither (``tie``), or both are wrong for the
culture (``both_bad``)."""
REASONS = ("wrong culture", "stereotype", "offensive", "poor image")
"""What a voter may say about the image(s) they voted against (optional)."""
KINDS = ("model", "gold")
"""A battle between two scored models' images, or a gold battle (a real image of the named artifact against one of
another culture's) that measures the voter."""

"""Judges of an image's relevance to a culture label: a VLM with constrained decoding (``vlm.VLMJudge``: CAIRE,
VQAScore- and VIEScore-style ratings) and the encoder probe baseline (``probe.ProbeJudge``); and, on the same VLM
core, the expectations track's explicit and implicit ratings (``expectations.ExpectationsJudge``). ``base`` holds
the interface; ``vlm`` imports torch and transformers, so import it where it is used."""

from benchmark.judges.base import (CAIRE_RUBRIC, Judge, Judgement, JudgeRequest, JudgeUnavailable, Level, Rubric,
                                   how_to_provide_judge)

__all__ = ["CAIRE_RUBRIC", "Judge", "Judgement", "JudgeRequest", "JudgeUnavailable", "Level", "Rubric",
           "how_to_provide_judge"]

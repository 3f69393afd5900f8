"""The expectations judge: how far an image meets its prompt's explicit, or its implicit, cultural expectations,
as a VIEScore-style 0-10 rating read from a chat VLM.

CulturalFrames (Nayak et al., arXiv:2506.08835) defines the two kinds (Sec. 3.2; App. B, Fig. 16): *explicit*
expectations are the elements the prompt's words state (objects, people, actions, settings); *implicit* ones are
not in the words but expected from the cultural context (attire, food, gestures, the setting of a ritual). Its
best automatic metric is VIEScore (Ku et al., arXiv:2312.14867) given the raters' instructions (Sec. 6, Fig. 24:
Spearman 0.32 with the raters' alignment), one 0-10 score of both kinds. This judge asks for each kind apart
(``benchmark.judges.prompts.expectation_prompt``) and reads the answer as the other VLM judges do: constrained
decoding over the 11 answers "0]" .. "10]" after "output score = [" (``vlm.VLMJudge.answer_distribution``),
without generating VIEScore's reasoning first.

It is a producer (``benchmark.features.producers``): the context of an image is an ``ExpectationRequest``
(the prompt and the kind), its output the 11 probabilities, cached by image, judge id and revision, the sha256 of
the exact chat text and the kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from benchmark.judges.prompts import EXPECTATION_KINDS, VIESCORE_ANSWER_PREFIX, VIESCORE_ANSWERS, expectation_prompt

if TYPE_CHECKING:  # vlm imports torch and transformers
    from benchmark.judges.vlm import VLMJudge


@dataclass(frozen=True)
class ExpectationRequest:
    """One rating to make of an image: its text-to-image ``prompt`` and the ``kind`` of expectation."""

    prompt: str
    kind: str

    def __post_init__(self):
        if self.kind not in EXPECTATION_KINDS:
            raise ValueError(f"unknown expectation kind {self.kind!r} (known: {', '.join(EXPECTATION_KINDS)})")
        if not self.prompt.strip():
            raise ValueError("an expectations rating needs the image's prompt")


class ExpectationsJudge:
    """The VIEScore-style ratings of one VLM (``vlm.VLMJudge``); ``id`` is the VLM's (model and revision)."""

    def __init__(self, vlm: VLMJudge):
        self.vlm = vlm
        self.id = vlm.id

    def prompt(self, request: ExpectationRequest) -> str:
        """The chat text the VLM reads (the image, then ``expectation_prompt``), opened after "output score = ["."""
        return self.vlm.render(expectation_prompt(request.prompt, request.kind), answer_prefix=VIESCORE_ANSWER_PREFIX)

    def label(self, request: ExpectationRequest) -> str:
        return request.kind

    def produce_batch(self, images: Sequence[Image.Image], requests: Sequence[ExpectationRequest]
                      ) -> list[np.ndarray]:
        """P(k) for k = 0..10 per (image, request): the constrained-decoding distribution over "k]"."""
        if not requests:
            return []
        return list(self.vlm.answer_distribution(images, [self.prompt(r) for r in requests], VIESCORE_ANSWERS))

"""The judge interface: an image, one culture label and (optionally) a linked entity's text in, an integer
relevance score on the rubric's scale out.

CAIRE's scoring step (Yayavaram et al., arXiv:2506.09109, Sec. 3.2, Eq. 3):
``s = argmax_{k in {1..5}} P(k | I, T, c, R)`` for image I, Wikipedia text T of the linked entity, culture
label c and rubric R. Every judge returns a ``Judgement``: the score and the evidence behind it (a VLM's five
probabilities, or a probe's five cosines).

A judge is a producer (``benchmark.features.producers``): the context of an image is a (``JudgeRequest``,
``Rubric``) pair, its output the evidence, one value per rubric level. The relevance metric gets that evidence
through ``produce``, cached by image, judge, prompt and label, and turns it into judgements (``judgements``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image

from benchmark.errors import CultureLensError


class JudgeUnavailable(CultureLensError, RuntimeError):
    """A judge model cannot be loaded; the message names it and how to provide it."""


def how_to_provide_judge(model: str) -> str:
    return (f"Provide judge model {model!r} by (1) running once with network access so the Hugging Face cache "
            f"holds it, (2) passing a local folder written by save_pretrained (model + processor) instead of "
            f"the Hub id, or (3) setting HF_HOME to a cache that already has it.")


@dataclass(frozen=True)
class Level:
    score: int
    name: str
    description: str


@dataclass(frozen=True)
class Rubric:
    """Scores 1..n, each with a name and a description (what a rater reads)."""

    levels: tuple[Level, ...]

    def __post_init__(self):
        if [level.score for level in self.levels] != list(range(1, len(self.levels) + 1)):
            raise ValueError(f"rubric levels must be scored 1..n in order, got {[l.score for l in self.levels]}")
        if any(not level.name.strip() for level in self.levels):
            raise ValueError("every rubric level needs a name")

    @property
    def scores(self) -> tuple[int, ...]:
        return tuple(level.score for level in self.levels)


# CAIRE, Table 12 (App. C.4): the cultural relevance scoring criteria, shown to raters and to the VLM.
CAIRE_RUBRIC = Rubric((
    Level(1, "Not Relevant", "The content does not connect with or reflect the target culture at all."),
    Level(2, "Minimally Relevant", "The content shows slight or superficial connections to the culture but lacks "
          "depth. May include vague references or isolated cultural elements that feel out of place or "
          "underdeveloped."),
    Level(3, "Somewhat Relevant", "The content contains identifiable cultural references, but they may feel "
          "generic, inconsistent, or limited in scope. The connection to the culture is present but could be "
          "stronger or more meaningful."),
    Level(4, "Relevant", "The content reflects a reasonable understanding of the culture, including accurate and "
          "appropriate references. It integrates cultural aspects well, though there may still be areas where "
          "more depth could be added."),
    Level(5, "Highly Relevant", "The content is deeply connected to the target culture, showing an immersive, "
          "accurate, and respectful understanding. Cultural references feel natural, meaningful, and central to "
          "the content."),
))


@dataclass(frozen=True)
class JudgeRequest:
    """One (image, label) pair. ``entity_name`` and ``entity_text`` are the linked entity e* and its Wikipedia
    text (CAIRE); both None is CAIRE's VLM baseline without retrieval (Sec. 5.2). ``image`` is None in a
    producer's context, where the image comes separately (``benchmark.features.producers.produce``)."""

    image: Image.Image | None
    label: str
    entity_name: str | None = None
    entity_text: str | None = None

    def __post_init__(self):
        if not self.label.strip():
            raise ValueError("a judge request needs a non-empty culture label")
        if self.entity_text is not None and self.entity_name is None:
            raise ValueError("entity_text was given without entity_name: the prompt names the linked entity")


@dataclass(frozen=True)
class Judgement:
    """A score on the rubric's scale and its evidence: ``probabilities`` P(k | ...) over the levels (VLM
    judges, summing to 1) or ``similarities`` cos(image, probe_k) (probe judges). ``truncated``: the entity text
    was cut to fit the judge's budget."""

    score: int
    probabilities: tuple[float, ...] | None = None
    similarities: tuple[float, ...] | None = None
    truncated: bool = False


Context = tuple[JudgeRequest, Rubric]  # what a judge reads besides the image (its producer context)


class Judge(ABC):
    """Scores an image's relevance to a culture label. ``id`` names exactly what judges (model and revision);
    results record it, since scores from different judges are not comparable. ``evidence`` says what the
    produced values are: probabilities P(k | I, T, c, R) (VLM) or cosines cos(image, probe_k) (probe)."""

    id: str
    evidence: Literal["probabilities", "similarities"]

    @abstractmethod
    def prompt(self, context: Context) -> str:
        """The exact text the judge reads for this context (rubric included): hashed into the cache key."""

    def label(self, context: Context) -> str:
        return context[0].label

    @abstractmethod
    def produce_batch(self, images: Sequence[Image.Image], contexts: Sequence[Context]) -> list[np.ndarray]:
        """The evidence per (image, context), one value per rubric level, in order."""

    def truncated(self, request: JudgeRequest) -> bool:
        """Whether the judge cuts ``request``'s entity text to fit its budget (default: it never does)."""
        return False

    def judgements(self, evidence: Sequence[np.ndarray], contexts: Sequence[Context]) -> list[Judgement]:
        """Evidence -> Judgements: the score is the level with the most evidence, ``argmax_k`` (CAIRE Eq. 3 for a
        VLM, Sec. 5.1 for the probe), ties going to the lower level."""
        out = []
        for values, (request, rubric) in zip(evidence, contexts):
            kept = tuple(float(x) for x in values)
            out.append(Judgement(rubric.scores[int(np.argmax(values))],
                                 probabilities=kept if self.evidence == "probabilities" else None,
                                 similarities=kept if self.evidence == "similarities" else None,
                                 truncated=self.truncated(request)))
        return out

    def judge_batch(self, requests: Sequence[JudgeRequest], rubric: Rubric = CAIRE_RUBRIC) -> list[Judgement]:
        """One Judgement per request, in order (uncached: ``produce`` caches)."""
        contexts = [(request, rubric) for request in requests]
        return self.judgements(self.produce_batch([r.image for r in requests], contexts), contexts)

    def judge(self, image: Image.Image, entity_text: str | None, rubric: Rubric, label: str, *,
              entity_name: str | None = None) -> Judgement:
        return self.judge_batch([JudgeRequest(image, label, entity_name, entity_text)], rubric)[0]

    def score(self, image: Image.Image, entity_text: str | None, rubric: Rubric, label: str, *,
              entity_name: str | None = None) -> int:
        """The integer score in 1..len(rubric.levels)."""
        return self.judge(image, entity_text, rubric, label, entity_name=entity_name).score

    def score_batch(self, requests: Sequence[JudgeRequest], rubric: Rubric = CAIRE_RUBRIC) -> list[int]:
        return [j.score for j in self.judge_batch(requests, rubric)]

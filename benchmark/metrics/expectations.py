"""Expectations: how far each image meets the explicit and the implicit cultural expectations of its prompt, on
VIEScore's 0-10 scale (CulturalFrames, Nayak et al., arXiv:2506.08835; VIEScore, Ku et al., arXiv:2312.14867).

CulturalFrames' raters judge an image's alignment with its prompt (0, ½, 1) and, below 1, flag whether
*explicit* elements (stated by the prompt's words) or *implicit* ones (expected from the cultural context)
failed (Sec. 3.3; App. B, Fig. 16). Its best automatic metric is VIEScore with the raters' instructions
(Sec. 6, Fig. 24: Spearman 0.32 with the raters' alignment, against 0.38 between raters). Here a VLM judge
rates each kind apart (``benchmark.judges.expectations``), per image:

- ``expectations_explicit`` = s_E in [0, 10], the rating of the explicit elements;
- ``expectations_implicit`` = s_I in [0, 10], the rating of the implicit elements;
- ``expectations_met`` = min(s_E, s_I), the track's headline: how far the image meets *both*.

Each rating is the judge's expected answer over VIEScore's 0-10 scale, ``s = sum_k k P(k)`` with P the
constrained-decoding distribution over the answers "0" .. "10" (``expected_score``): G-Eval's scoring function
(Liu et al., arXiv:2303.16634, Sec. 2), which reads the probabilities of the score tokens instead of the one
integer a judge would print, so that two images the judge leans on differently do not tie at the same integer
(the raters' correlation, Spearman's rho, is a ranking of images). The likeliest integer, VIEScore's own answer,
stays in each row's detail. The headline takes the minimum because both papers combine this way: VIEScore's
semantic consistency is the minimum of its sub-scores (Ku et al., Sec. 3; ``SC = min(scores)`` in the authors'
``viescore/__init__.py``), and CulturalFrames' raters give full alignment only when "all key explicit elements
and relevant implicit elements are present" (App. B, Fig. 16): an image that misses either kind fails the prompt,
however well it renders the other. All three are higher-is-better, range 0-10. What a judge is worth is
measured by meta-evaluating its per-image values against the raters (``benchmark.expectations.meta_eval``).

The judge's ratings come through ``benchmark.features.producers.produce``, cached by image content, judge id and
revision, the exact chat text and the kind in ``Inputs.products``; the three metrics share one run of the judge
per scoring run through ``Inputs.memo``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmark.features.producers import LazyImages, produce
from benchmark.judges.expectations import ExpectationRequest, ExpectationsJudge
from benchmark.judges.prompts import EXPECTATION_KINDS, VIESCORE_LEVELS
from benchmark.metrics.base import Inputs, Metric, MetricInfo
from benchmark.papers import CULTURALFRAMES

METRICS = ("expectations_explicit", "expectations_implicit", "expectations_met")
LABELS = {
    "expectations_explicit": "explicit expectations met, 0-10 (VIEScore-style VLM judge)",
    "expectations_implicit": "implicit (cultural) expectations met, 0-10 (VIEScore-style VLM judge)",
    "expectations_met": "explicit and implicit expectations met, min of the two, 0-10 (VIEScore-style VLM judge)",
}
VERSION = "2"  # the prompts of ``expectation_prompt``, the expected-score reading and the min; 2: the judge
# reads an image's two prompts after their shared prefix, run once (``judges.vlm.SharedPrefix``)


def _checked(probabilities: np.ndarray) -> np.ndarray:
    p = np.asarray(probabilities, dtype=np.float64)
    if p.shape[-1] != len(VIESCORE_LEVELS):
        raise ValueError(f"expected {len(VIESCORE_LEVELS)} probabilities (0..10) per rating, got {p.shape[-1]}")
    return p


def expected_score(probabilities: np.ndarray) -> np.ndarray:
    """(..., 11) probabilities of the answers 0..10 -> ``sum_k k P(k)`` (...,), in [0, 10]: G-Eval's scoring
    function (Liu et al., arXiv:2303.16634, Sec. 2) on VIEScore's scale (Ku et al., arXiv:2312.14867)."""
    return _checked(probabilities) @ np.asarray(VIESCORE_LEVELS, dtype=np.float64)


def likeliest_answer(probabilities: np.ndarray) -> np.ndarray:
    """(..., 11) probabilities -> the likeliest integer answer (...,), ties going to the lower score: what
    VIEScore reads from a judge that prints its score (Ku et al., Sec. 3)."""
    return np.asarray(VIESCORE_LEVELS)[np.argmax(_checked(probabilities), axis=-1)]


def expectations_met(explicit: np.ndarray, implicit: np.ndarray) -> np.ndarray:
    """The headline per image: ``min(s_E, s_I)``, as VIEScore combines sub-scores (Ku et al., Sec. 3) and as
    CulturalFrames' full alignment needs both kinds (Nayak et al., App. B, Fig. 16). NaN where either is."""
    return np.minimum(np.asarray(explicit, dtype=np.float64), np.asarray(implicit, dtype=np.float64))


def analyse(inputs: Inputs, judge: ExpectationsJudge, chunk: int = 16) -> pd.DataFrame:
    """Per image row (index): the explicit and implicit ratings, the likeliest answers and the probabilities.
    Images the products cache lacks are opened ``chunk`` at a time, each once for both kinds."""
    key = ("expectations", judge.id, chunk)
    if key in inputs.memo:
        return inputs.memo[key]
    if inputs.open_image is None:
        raise RuntimeError("the expectations judge reads pixels: the harness must give Inputs.open_image")
    prompts = inputs.images["prompt"].tolist()
    items = [(row, ExpectationRequest(prompts[row], kind)) for row in range(len(prompts))
             for kind in EXPECTATION_KINDS]
    shas = inputs.images["image_sha256"].tolist() if inputs.products is not None else None
    evidence = produce(judge, items, LazyImages(inputs.open_image, len(prompts)), shas, inputs.products, chunk,
                       "judging expectations")
    probabilities = np.stack(evidence).reshape(len(prompts), len(EXPECTATION_KINDS), len(VIESCORE_LEVELS))
    scores, answers = expected_score(probabilities), likeliest_answer(probabilities)
    frame = pd.DataFrame({"explicit": scores[:, 0], "implicit": scores[:, 1],
                          "explicit_answer": answers[:, 0], "implicit_answer": answers[:, 1],
                          "explicit_probabilities": [tuple(map(float, p)) for p in probabilities[:, 0]],
                          "implicit_probabilities": [tuple(map(float, p)) for p in probabilities[:, 1]]})
    frame["met"] = expectations_met(frame["explicit"], frame["implicit"])
    inputs.memo[key] = frame
    return frame


def _note(r) -> str:
    return (f"explicit {r.explicit:.2f} (likeliest {r.explicit_answer}), implicit {r.implicit:.2f} (likeliest "
            f"{r.implicit_answer}); P(0..10) explicit " + " ".join(f"{p:.2f}" for p in r.explicit_probabilities)
            + "; implicit " + " ".join(f"{p:.2f}" for p in r.implicit_probabilities))


class ExpectationsRating(Metric):
    """One of the three per-image ratings (``METRICS``) of one judge, 0-10. Failure (a declared image missing): 0."""

    def __init__(self, name: str, judge: ExpectationsJudge, *, chunk: int = 16):
        if name not in METRICS:
            raise ValueError(f"unknown expectations metric {name!r} (known: {', '.join(METRICS)})")
        self.judge, self.chunk, self.column = judge, chunk, name.removeprefix("expectations_")
        self.info = MetricInfo(
            name, LABELS[name], "expectations", f"{VERSION} (judge {judge.id})", True, "score", 0.0,
            float(VIESCORE_LEVELS[-1]), f"{CULTURALFRAMES.short}, Sec. 3.3 and Fig. 24; Ku et al., "
            "arXiv:2312.14867, Sec. 3; Liu et al., arXiv:2303.16634, Sec. 2", ())

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        frame = analyse(inputs, self.judge, self.chunk)
        return frame[self.column].to_numpy(dtype=float), [_note(r) for r in frame.itertuples()]

    def details(self, inputs: Inputs) -> list[dict | None]:
        frame = analyse(inputs, self.judge, self.chunk)
        return [{"explicit": r.explicit, "implicit": r.implicit, "explicit_answer": int(r.explicit_answer),
                 "implicit_answer": int(r.implicit_answer), "explicit_probabilities": list(r.explicit_probabilities),
                 "implicit_probabilities": list(r.implicit_probabilities)} for r in frame.itertuples()]


def metrics(judge: ExpectationsJudge, *, chunk: int = 16) -> list[Metric]:
    """The three ratings of ``judge``: explicit, implicit, and the headline ``expectations_met``."""
    return [ExpectationsRating(name, judge, chunk=chunk) for name in METRICS]

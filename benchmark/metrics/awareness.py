"""Awareness track: automatic proxies for what CUBE's raters judged per image.

Kannen et al., "Beyond Aesthetics: Cultural Competence in Text-to-Image Models" (NeurIPS 2024 D&B,
arXiv:2407.06863), Sec. 4 asks raters from each country whether an image shows what one might see there
(cultural relevance), how faithful it is to its prompt (1-5) and how realistic (1-5). CultureLens scores
the same images without raters:

- faithfulness: CLIP alignment between image and prompt (``benchmark.metrics.alignment``);
- artifact recognition: zero-shot, does the image's embedding rank the prompt's artifact above every other
  artifact of the same concept, from all countries (top-1 and top-5)?  Candidates are the dataset's
  artifacts, each as the text ``"a photo of {artifact}"``; the prompt's own text is never a candidate,
  so the country named in the prompt does not leak into the answer;
- country recognition: zero-shot over the dataset's countries, with ``"{noun} from {country}"`` per concept
  (``COUNTRY_NOUNS``): does the image's nearest country text name the prompt's country?
- realism/quality: the HPS v2 score (Wu et al., "Human Preference Score v2", arXiv:2306.09341): the cosine
  between image and prompt under the HPS v2 fine-tuned ViT-H-14, the quality ``s`` of CUBE's Eq. 3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmark.papers import CUBE
from benchmark.metrics.alignment import ClipCosine
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need

ARTIFACT_TEMPLATE = "a photo of {artifact}"
COUNTRY_NOUNS = {"cuisine": "food", "landmarks": "a landmark", "art": "art"}
COUNTRY_TEMPLATE = "{noun} from {country}"


def rank_of_truth(image_embeddings: np.ndarray, candidate_embeddings: np.ndarray, truth: np.ndarray,
                  allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rank (1 = best) of each image's true candidate by cosine, and each image's best candidate.

    ``image_embeddings`` (N, D) and ``candidate_embeddings`` (C, D) are unit-norm; ``truth`` (N,) holds the
    index of each image's right candidate; ``allowed`` (N, C) bool restricts each image's candidates (e.g. to
    its concept). Ties count against the truth: rank = 1 + number of allowed candidates scoring >= the truth,
    other than the truth itself.
    """
    scores = np.asarray(image_embeddings, np.float64) @ np.asarray(candidate_embeddings, np.float64).T
    if allowed is not None:
        if not allowed[np.arange(len(truth)), truth].all():
            raise ValueError("an image's true candidate is not among its allowed candidates")
        scores = np.where(allowed, scores, -np.inf)
    true_score = scores[np.arange(len(truth)), truth]
    beats = (scores >= true_score[:, None]).sum(axis=1) - 1
    return beats + 1, scores.argmax(axis=1)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class ArtifactRecognition(Metric):
    """1 if the prompt's artifact is among the image's ``top`` nearest artifacts of its concept, else 0; undefined
    where the prompt names no artifact. Failure (a declared image missing): 0."""

    def __init__(self, backbone: str = "clip-vit-b-32", top: int = 1, template: str = ARTIFACT_TEMPLATE):
        self.backbone, self.top, self.template = backbone, top, template
        self.info = MetricInfo(
            f"artifact_top{top}", f"Artifact recognised (top-{top}, zero-shot)", "awareness", "1", True,
            "share", 0.0, 1.0, CUBE.short + ", Sec. 4 (automatic proxy)", (Need(backbone, "image"),), kind="rate",
            undefined="the prompt names no artifact of its concept")

    def applies(self, inputs: Inputs) -> str | None:
        catalogue = inputs.catalogue
        if catalogue is None or not {"artifact", "concept"} <= set(catalogue.columns):
            return "the dataset has no artifact and concept columns to recognise"
        return None

    def _ranks(self, inputs: Inputs) -> pd.DataFrame:
        key = ("artifact_ranks", self.backbone, self.template)
        if key not in inputs.memo:
            candidates = (inputs.catalogue[["artifact", "concept"]].dropna().drop_duplicates()
                          .sort_values(["concept", "artifact"]).reset_index(drop=True))
            texts = [self.template.format(artifact=a) for a in candidates["artifact"]]
            embeddings = inputs.encode_text(self.backbone, texts)
            index = {(c, a): i for i, (a, c) in enumerate(zip(candidates["artifact"], candidates["concept"]))}
            images = inputs.images
            labelled = np.array([(c, a) in index for a, c in zip(images["artifact"], images["concept"])])
            rows = np.flatnonzero(labelled)
            truth = np.array([index[(c, a)] for a, c in zip(images["artifact"].to_numpy()[rows],
                                                            images["concept"].to_numpy()[rows])], dtype=int)
            allowed = images["concept"].to_numpy()[rows, None] == candidates["concept"].to_numpy()[None, :]
            embedded = inputs.features[Need(self.backbone, "image")][rows]
            rank, best = rank_of_truth(embedded, embeddings, truth, allowed)
            ranks = pd.DataFrame({"rank": np.nan, "best": None, "of": np.nan}, index=range(len(images)))
            ranks.loc[rows, "rank"], ranks.loc[rows, "of"] = rank, allowed.sum(axis=1)
            ranks.loc[rows, "best"] = candidates["artifact"].to_numpy()[best]
            inputs.memo[key] = ranks
        return inputs.memo[key]

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        ranks = self._ranks(inputs)
        values = np.where(ranks["rank"].isna(), np.nan, (ranks["rank"] <= self.top).astype(float))
        notes = ["no artifact label: not scored" if np.isnan(r) else
                 f"ranked {_ordinal(int(r))} of {int(n)}" + ("" if r == 1 else f"; nearest: {b}")
                 for r, n, b in zip(ranks["rank"], ranks["of"], ranks["best"])]
        return values, notes


class CountryRecognition(Metric):
    """1 if the image's nearest country text (``"{noun} from {country}"``, over the dataset's countries)
    names the prompt's country, else 0; undefined where the prompt names none. Failure (a declared image
    missing): 0."""

    def __init__(self, backbone: str = "clip-vit-b-32", nouns: dict[str, str] = COUNTRY_NOUNS):
        self.backbone, self.nouns = backbone, nouns
        self.info = MetricInfo(
            "country_top1", "Country recognised (zero-shot)", "awareness", "1", True, "share", 0.0, 1.0,
            CUBE.short + ", Sec. 4 (automatic proxy)", (Need(backbone, "image"),), kind="rate",
            undefined="the prompt names no country of the dataset's")

    def applies(self, inputs: Inputs) -> str | None:
        catalogue = inputs.catalogue
        if catalogue is None or not {"country", "concept"} <= set(catalogue.columns):
            return "the dataset has no country and concept columns to recognise"
        unknown = sorted(set(inputs.images["concept"].dropna()) - set(self.nouns))
        return f"no country probe for concept{'s' if len(unknown) > 1 else ''} {unknown}" if unknown else None

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        countries = sorted(inputs.catalogue["country"].dropna().unique())
        images = inputs.images
        values = np.full(len(images), np.nan)
        notes: list[str | None] = ["no country label: not scored"] * len(images)
        embedded = inputs.features[Need(self.backbone, "image")]
        known = images["country"].isin(countries).to_numpy()
        for concept, rows in images[known].groupby("concept").indices.items():
            rows = np.flatnonzero(known)[rows]
            texts = [COUNTRY_TEMPLATE.format(noun=self.nouns[concept], country=c) for c in countries]
            truth = np.array([countries.index(c) for c in images["country"].to_numpy()[rows]])
            rank, best = rank_of_truth(embedded[rows], inputs.encode_text(self.backbone, texts), truth)
            values[rows] = (rank == 1).astype(float)
            for row, r, b in zip(rows, rank, best):
                notes[row] = "country recognised" if r == 1 else f"looks most like {countries[b]} ({_ordinal(r)})"
        return values, notes


class HPSQuality(ClipCosine):
    """HPS v2 score of each image for its prompt: the quality ``s`` of CUBE's Eq. 3. Failure (a declared image
    missing): -1."""

    def __init__(self, backbone: str = "hpsv2"):
        super().__init__(backbone)
        self.info = MetricInfo(
            "hps_v2", "HPS v2 quality", "awareness", "1", True, "cosine", -1.0, 1.0,
            "Wu et al., arXiv:2306.09341; " + CUBE.short + ", Eq. 3", self.info.needs)


def metrics(clip: str = "clip-vit-b-32", quality: str = "hpsv2") -> list[Metric]:
    return [ArtifactRecognition(clip, 1), ArtifactRecognition(clip, 5), CountryRecognition(clip), HPSQuality(quality)]

"""Relevance: how relevant each generated image is to each culture of its prompt set, on CAIRE's 1-5 scale
(Yayavaram et al., arXiv:2506.09109).

Per image: visual entity linking against a knowledge base (Eq. 1 and 2, ``benchmark.relevance.linking``), then
a judge scores the image against each label with the linked entity's Wikipedia text (Eq. 3,
``benchmark.judges``). The math lives in those modules; this adapter only feeds them.

The labels come from the prompt set, never from the submitter (``culture_labels``): every image is scored
against each country of its prompt set, as CAIRE's universal set has every image rated for relevance to each of
its 10 countries (Sec. 4.2), so that two submissions on one prompt set are scored against the same labels.

One metric per label, named ``relevance[<label>]`` (e.g. ``relevance[Japan]``), each with one value per
image: the harness stores one value per (image, metric), and a per-label metric keeps CAIRE's point that every
label is scored independently. It also makes the usual aggregates meaningful: the mean relevance to "Japan"
over all images, or over the images of prompts about Brazil (a country slice), with a confidence interval.
The track's headline is ``relevance_intended``: each image's relevance to its own prompt's country
(``IntendedRelevance``), the quantity CAIRE validates against people (annotators rated each image's relevance to
their own country; Pearson 0.56-0.66 with CAIRE's score, Sec. 4.2 and Table 2), on the same 1-5 scale (4-5 =
relevant, Sec. 5.4).
Linking and judging run once per scoring run for all labels together, shared through ``Inputs.memo``; the judge's
evidence comes through ``benchmark.features.producers.produce``, cached across runs by image, judge, prompt and
label in ``Inputs.products`` (when the harness gives one), so a rescore or one more label reruns no VLM call.

Settings beyond the paper's text, all recorded in each metric's version: ``linking`` (``first_with_page``, the
authors' rule, or ``top``: ``benchmark.relevance.linking``), ``label_case`` (``capitalize`` writes the label as
the authors' code does) and ``text_chars`` (the authors cut the Wikipedia text to 15,000 characters; None keeps
it whole, the VLM judge still cutting it to its token budget): ``benchmark.judges.prompts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from benchmark.papers import CAIRE
from benchmark.features.producers import LazyImages, produce
from benchmark.judges.base import CAIRE_RUBRIC, Judge, JudgeRequest, Rubric
from benchmark.judges.prompts import LABEL_CASES, case_label, cut_text
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.relevance.kb import KnowledgeBase
from benchmark.relevance.linking import DEFAULT_LINKING, LINKING_RULES, TOP_K

NO_LABELS = ("the prompt set names no country per prompt (a 'country' column): relevance scores every image against "
             "each country of its prompt set")
CANDIDATES_KEPT = 5  # candidates listed in each row's detail
INTENDED = "relevance_intended"


def metric_name(label: str) -> str:
    return f"relevance[{label}]"


def culture_labels(catalogue: pd.DataFrame | None) -> list[str]:
    """The culture labels every image of a prompt set is scored against: each distinct value of the prompt set's
    ``country`` column (all its prompts, not only those a submission answered), sorted; none without the column.

    CAIRE's universal set rates every image for relevance to each of its 10 countries, and its labels are the
    countries' names (Sec. 4.2; Fig. 3's label sets, Table 2's columns). CUBE-1K's and CulturalFrames' rows name
    their country the same way ("Brazil", "United States", "Japan"), so the labels are those names as they stand,
    read by the judge in "how culturally relevant the image is to {label}" (Fig. 9)."""
    if catalogue is None or "country" not in catalogue.columns:
        return []
    return sorted(catalogue["country"].dropna().astype(str).unique())


def analyse(inputs: Inputs, kb: KnowledgeBase, judge: Judge, labels: Sequence[str], k: int = TOP_K,
            rubric: Rubric = CAIRE_RUBRIC, chunk: int = 16, linking: str = DEFAULT_LINKING,
            label_case: str = "as_given", text_chars: int | None = None) -> pd.DataFrame:
    """One row per (image row, label): the linked entity (Eq. 1 and 2) and the judgement (Eq. 3). Images the
    products cache lacks are opened ``chunk`` at a time (through ``Inputs.open_image``), each once for all labels.
    The judge reads each label cased by ``label_case`` and the entity text cut to ``text_chars`` characters; rows
    keep the label as given."""
    key = ("relevance", kb.fingerprint, judge.id, tuple(labels), k, rubric, linking, label_case, text_chars)
    if key in inputs.memo:
        return inputs.memo[key]
    open_image = getattr(inputs, "open_image", None)
    if open_image is None:
        raise RuntimeError("the relevance judge reads pixels: the harness must give Inputs.open_image")
    embeddings = inputs.features[Need(kb.backbone_id, "image")]
    if embeddings.shape[1] != kb.info["dimension"]:
        raise ValueError(f"image embeddings of {kb.backbone_id} have dimension {embeddings.shape[1]}, the knowledge "
                         f"base {kb.info['dimension']}: it was built with other weights; rebuild it")
    links = kb.link(embeddings, k, linking)
    texts = {link.entity: cut_text(kb.entity_text(link.entity), text_chars) for link in links}
    names = {link.entity: kb.entities.iloc[link.entity]["name"] for link in links}
    pairs = [(row, label) for row in range(len(links)) for label in labels]
    contexts = [(JudgeRequest(None, case_label(label, label_case), names[links[row].entity],
                              texts[links[row].entity][0]), rubric) for row, label in pairs]
    shas = inputs.images["image_sha256"].tolist() if inputs.products is not None else None
    evidence = produce(judge, [(row, context) for (row, _), context in zip(pairs, contexts)],
                       LazyImages(open_image, len(links)), shas, inputs.products, chunk, "judging relevance")
    rows = []
    for (row, label), j in zip(pairs, judge.judgements(evidence, contexts)):
        link = links[row]
        rows.append({"row": row, "label": label, "score": float(j.score), "probabilities": j.probabilities,
                     "similarities": j.similarities, "truncated": texts[link.entity][1] or j.truncated,
                     "entity_id": link.entity_id, "entity": names[link.entity], "link_score": link.score,
                     "link_rank": link.rank, "candidates": list(link.candidates[:CANDIDATES_KEPT])})
    inputs.memo[key] = frame = pd.DataFrame(rows)
    return frame


def _note(r) -> str:
    note = f"linked {r.entity} ({r.entity_id}, cos {r.link_score:.3f}"
    note += f", rank {r.link_rank}: the better-ranked had no Wikipedia page); " if r.link_rank > 1 else "); "
    if r.probabilities is not None:
        note += "P(1..5) " + " ".join(f"{p:.2f}" for p in r.probabilities)
    else:
        note += "probe cos " + " ".join(f"{c:.3f}" for c in r.similarities)
    return note + ("; Wikipedia text cut" if r.truncated else "")


class CulturalRelevance(Metric):
    """CAIRE's 1-5 relevance of each image to one culture label (``label`` None: the track's metric before a
    prompt set gives the labels; it stands for one per label, and records why it does not apply when there are
    none). Failure (a declared image missing): 1."""

    def __init__(self, label: str | None, labels: Sequence[str], knowledge_base: KnowledgeBase, judge: Judge, *,
                 k: int = TOP_K, rubric: Rubric = CAIRE_RUBRIC, chunk: int = 16, linking: str = DEFAULT_LINKING,
                 label_case: str = "as_given", text_chars: int | None = None):
        if linking not in LINKING_RULES:
            raise ValueError(f"unknown linking rule {linking!r} (known: {', '.join(LINKING_RULES)})")
        if label_case not in LABEL_CASES:
            raise ValueError(f"unknown label case {label_case!r} (known: {', '.join(LABEL_CASES)})")
        if text_chars is not None and text_chars < 1:
            raise ValueError(f"the text cut-off must be at least 1 character, got {text_chars}")
        self.label, self.labels, self.kb, self.judge = label, tuple(labels), knowledge_base, judge
        self.k, self.rubric, self.chunk = k, rubric, chunk
        self.linking, self.label_case, self.text_chars = linking, label_case, text_chars
        self.info = MetricInfo(
            metric_name(label) if label else "relevance",
            f"CAIRE relevance to {label} (1-5)" if label else "CAIRE relevance to the prompt set's countries",
            "relevance", f"3 (kb {knowledge_base.fingerprint}, judge {judge.id}, k {k}, linking {linking}, "
                         f"label {label_case}, text {text_chars or 'whole'})", True, "score", 1.0,
            float(len(rubric.levels)), f"{CAIRE.short}, Eq. 1-3", (Need(knowledge_base.backbone_id, "image"),))

    def check(self, backbones: dict) -> str | None:
        try:
            self.kb.require_backbone(backbones[self.kb.backbone_id])
        except (KeyError, ValueError) as error:
            return str(error)
        return None

    def _settings(self) -> dict:
        return {"k": self.k, "rubric": self.rubric, "chunk": self.chunk, "linking": self.linking,
                "label_case": self.label_case, "text_chars": self.text_chars}

    def for_submission(self, manifest, catalogue: pd.DataFrame | None = None) -> list[Metric]:
        """One metric per country of the prompt set (``culture_labels``; the manifest's own ``culture_labels`` are
        ignored) and the headline ``relevance_intended``; this one if the prompt set names no country."""
        labels = culture_labels(catalogue)
        if self.label is not None or not labels:
            return [self]
        return [*metrics(labels, self.kb, self.judge, **self._settings()),
                IntendedRelevance(labels, self.kb, self.judge, **self._settings())]

    def applies(self, inputs: Inputs) -> str | None:
        return NO_LABELS if self.label is None else None

    def _rows(self, inputs: Inputs) -> pd.DataFrame:
        analysis = analyse(inputs, self.kb, self.judge, self.labels, self.k, self.rubric, self.chunk, self.linking,
                           self.label_case, self.text_chars)
        return analysis[analysis["label"] == self.label].set_index("row").reindex(range(len(inputs.images)))

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        rows = self._rows(inputs)
        return rows["score"].to_numpy(dtype=float), [_note(r) for r in rows.itertuples()]

    def details(self, inputs: Inputs) -> list[dict | None]:
        return [{"label": r.label, "entity_id": r.entity_id, "entity": r.entity, "link_score": r.link_score,
                 "link_rank": r.link_rank, "candidates": r.candidates, "probabilities": r.probabilities, "similarities": r.similarities,
                 "truncated": r.truncated} for r in self._rows(inputs).itertuples()]


class IntendedRelevance(CulturalRelevance):
    """CAIRE's 1-5 relevance of each image to its own prompt's country, among ``labels`` (all scored in one
    analysis, shared with the per-label metrics): the track's headline, higher is better; undefined where the
    prompt names no country. Failure (a declared image missing): 1."""

    def __init__(self, labels: Sequence[str], knowledge_base: KnowledgeBase, judge: Judge, **settings):
        super().__init__(None, labels, knowledge_base, judge, **settings)
        self.info = replace(self.info, name=INTENDED, label="CAIRE relevance to the prompt's own country (1-5)",
                            undefined="the prompt names none of the prompt set's countries")

    def for_submission(self, manifest, catalogue: pd.DataFrame | None = None) -> list[Metric]:
        return [self]

    def applies(self, inputs: Inputs) -> str | None:
        return None if self.labels and "country" in inputs.images.columns else NO_LABELS

    def _rows(self, inputs: Inputs) -> pd.DataFrame:
        """Each image's analysis row for its own country (``label`` == the row's ``country``); all-null where the
        prompt names none."""
        analysis = analyse(inputs, self.kb, self.judge, self.labels, self.k, self.rubric, self.chunk, self.linking,
                           self.label_case, self.text_chars)
        own = inputs.images["country"].astype(object).to_numpy()[analysis["row"].to_numpy()]
        return analysis[analysis["label"].to_numpy() == own].set_index("row").reindex(range(len(inputs.images)))

    def per_image(self, inputs: Inputs) -> tuple[np.ndarray, list[str | None]]:
        rows = self._rows(inputs)
        notes = [_note(r) if isinstance(r.label, str) else "the prompt names no country" for r in rows.itertuples()]
        return rows["score"].to_numpy(dtype=float), notes

    def details(self, inputs: Inputs) -> list[dict | None]:
        return [detail if isinstance(detail["label"], str) else None for detail in super().details(inputs)]


def metrics(labels: Sequence[str], knowledge_base: KnowledgeBase, judge: Judge, **settings) -> list[Metric]:
    """One ``relevance[<label>]`` metric per culture label; with no labels, one ``relevance`` metric that does not
    apply and says why."""
    labels = list(labels)
    if len({label.casefold() for label in labels}) != len(labels):
        raise ValueError(f"culture labels repeat: {labels}")
    if not labels:
        return [CulturalRelevance(None, (), knowledge_base, judge, **settings)]
    return [CulturalRelevance(label, labels, knowledge_base, judge, **settings) for label in labels]

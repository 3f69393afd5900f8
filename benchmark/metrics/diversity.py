"""Cultural diversity (CUBE, Kannen et al., arXiv:2407.06863, Sec. 5): for an under-specified prompt
("Image of a dish"), how many cultures do a model's images cover, and how well drawn are they?

Per prompt, every image is tagged with a CSpace artifact by a ``benchmark.tagging.Tagger``: by default the
``ArtifactIndex`` alone (the artifact of the prompt's concept whose text embedding is closest to the image
embedding), or a ``VLMTagger`` after the paper's mapping (App. H.2): an open VLM reads each image and picks one
of the index's top 5. Sets of N = 8 of the prompt's images are drawn, and each set is scored under the five tag
kernels of Sec. 5.2.2:

- ``vendi_<kernel>``: VS_q / N, the normalised Vendi score (Eq. 1; "VS-bar" of Table 5), in [1/N, 1];
- ``cd_<kernel>``: CD = mean HPS-v2 quality x VS_q / N (Eq. 3; Table 6), in [0, 1].

A prompt's value is the mean over its sets. ``sampling="random"`` (default) draws 50 uniformly random
N-sets; ``sampling="seed_batches"`` is the paper's exact protocol (App. H.1): the images in seed order cut
into consecutive batches of N (seeds 0-79: ten batches), the paper's mean of 50 then being the mean over
five rephrasing prompts x ten batches. Both estimate the same mean over N-sets of exchangeable seeds.

The HPS-v2 quality of an image for its prompt is the cosine of their embeddings under the HPS-v2 backbone
(Wu et al., arXiv:2306.09341), which lies in [0, 1] in practice; a negative cosine counts as 0 and the note
says so.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import pandas as pd

from benchmark.papers import CUBE
from benchmark.features.producers import LazyImages
from benchmark.metrics.alignment import cosine_similarity
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.metrics.vendi import (DRAWS, KERNELS, SUBSET_SIZE, draw_mean, random_subsets, seed_batches, tag_kernel,
                                     vendi_score)
from benchmark.tagging import Tagger

KERNEL_NAMES = {"continent": "continent", "country": "country", "artifact": "artifact",
                "hierarchical": "continent + country", "uniform": "continent + country + artifact"}
CONCEPT_COLUMN = "concept"


def _weights_text(weights: tuple[float, ...]) -> str:
    return "(" + ", ".join(str(Fraction(w).limit_denominator(12)) for w in weights) + ")"


def _finest_level(weights: tuple[float, float, float]) -> str:
    """The most specific tag level a kernel looks at: what its note counts."""
    return "artifact" if weights[2] else "country" if weights[1] else "continent"


def image_tags(inputs: Inputs, tagger: Tagger, clip: str) -> pd.DataFrame:
    """Each image row's tag (continent, country, country_code, artifact, artifact_id, confidence: the tagger's,
    e.g. the cosine), among its prompt's concept; computed once per scoring run and tagger, and shared by the
    diversity metrics. The tagger gets the images lazily, when the harness gives ``Inputs.open_image``, and a VLM
    tagger's outputs are cached across runs in ``Inputs.products`` (by image sha256, model, prompt and candidates).

    The artifact kernel compares ``kernel_artifact``: the Wikidata id where the CSpace row has one, else the
    name, so an artifact listed under two countries is one artifact."""
    key = ("diversity-tags", tagger, clip)
    if key not in inputs.memo:
        images = LazyImages(inputs.open_image, len(inputs.images)) if inputs.open_image else None
        shas = inputs.images["image_sha256"].tolist() if inputs.products is not None else None
        tags = tagger.tag(inputs.features[Need(clip, "image")], inputs.images[CONCEPT_COLUMN].tolist(),
                          images=images, shas=shas, cache=inputs.products)
        tags = tags.drop(columns=["image", "rank"])
        tags["kernel_artifact"] = tags["artifact_id"].where(tags["artifact_id"].notna(), "name:" + tags["artifact"])
        inputs.memo[key] = tags
    return inputs.memo[key]


@dataclass(frozen=True)
class PromptDraws:
    """One prompt's draws: ``rows`` its image rows, ``subsets`` (draws, N) positions into ``rows``, and
    ``vendi`` (draws, kernels) VS_q / N of each drawn set under each kernel of ``KERNELS`` (in order)."""

    rows: np.ndarray
    subsets: np.ndarray | None  # None: fewer images than N
    vendi: np.ndarray | None


def prompt_draws(inputs: Inputs, tagger: Tagger, clip: str, q: float, size: int, draws: int, seed: int,
                 sampling: str = "random") -> dict[str, PromptDraws]:
    """Every prompt's N-sets and their normalised Vendi scores, computed once per run. Random sets: each
    prompt's generator is seeded by (seed, prompt id), so a prompt draws the same image positions (in seed
    order) for every model, whatever other prompts are scored."""
    key = ("diversity-draws", tagger, clip, q, size, draws, seed, sampling)
    if key in inputs.memo:
        return inputs.memo[key]
    tags = image_tags(inputs, tagger, clip)[["continent", "country", "kernel_artifact"]].to_numpy(dtype=object)
    result = {}
    for prompt_id, rows in inputs.images.groupby("prompt_id", sort=True).indices.items():
        if len(rows) < size:
            result[prompt_id] = PromptDraws(rows, None, None)
            continue
        rows = rows[np.argsort(inputs.images["seed"].to_numpy()[rows], kind="stable")]
        if sampling == "seed_batches":
            subsets = seed_batches(inputs.images["seed"].to_numpy()[rows], size)
        else:
            rng = np.random.default_rng([seed, zlib.crc32(str(prompt_id).encode())])
            subsets = random_subsets(len(rows), size, draws, rng)
        vendi = np.array([[vendi_score(tag_kernel(tags[rows[subset]], weights), q) / size
                           for weights in KERNELS.values()] for subset in subsets])
        result[prompt_id] = PromptDraws(rows, subsets, vendi)
    inputs.memo[key] = result
    return result


def version(tagger: str, size: int, draws: int, seed: int, sampling: str) -> str:
    """The diversity metrics' version: what changes their values besides the images. Sets first (N; the paper's
    seed batches, or how many random draws and their seed), then the tagger. The track's headline protocol
    (``benchmark.tracks.diversity``) is the prefix that N = 8 seed batches with the artifact index give. Version 2:
    a prompt whose declared images are not all there is not scored (it was scored over the images sent)."""
    sets = "seed batches" if sampling == "seed_batches" else f"{draws} random draws, seed {seed}"
    return f"2 (N = {size}, {sets}; tagger {tagger}; tagging accuracy not measured)"


class _Diversity(Metric):
    """Shared settings of the diversity metrics: the tagger (an ``ArtifactIndex``, or a ``VLMTagger`` wrapping
    one), the tagging backbone (``clip``: the index's backbone), the Vendi order q, the set size N, and how sets
    are drawn (``sampling``; for random sets, how many and their seed).

    The version (``version``) names how the sets are drawn (N, and for random sets how many and their seed: VS / N
    halves from N = 4 to N = 8 on the same images, so results of two N never share a ranking), the tagger (its
    ``id``; a VLM's with the index it picks from) and its tagging accuracy, "not measured": an artifact index ships no images with known artifacts, so ``benchmark.tagging.
    tagger_accuracy`` has nothing to score it on (measure it on a labelled sample, see docs/tracks/diversity.md).
    A tagger other than the index itself (CUBE App. H.2's VLM choice) is also named in every note, so that
    results of two taggers are never taken for one another."""

    prefix = ""

    def __init__(self, tagger: Tagger, kernel: str, *, clip: str = "clip-vit-b-32", q: float = 1.0,
                 size: int = SUBSET_SIZE, draws: int = DRAWS, seed: int = 0,
                 sampling: Literal["random", "seed_batches"] = "random"):
        if kernel not in KERNELS:
            raise ValueError(f"unknown diversity kernel {kernel!r} (kernels: {', '.join(KERNELS)})")
        if size < 1 or draws < 1:
            raise ValueError(f"N and the number of draws must be positive, got N={size}, draws={draws}")
        if sampling not in ("random", "seed_batches"):
            raise ValueError(f"sampling must be 'random' or 'seed_batches', not {sampling!r}")
        self.tagger, self.index, self.kernel, self.clip = tagger, tagger.index, kernel, clip
        self.tagged_by = None if tagger is tagger.index else tagger.id
        over = "" if self.tagged_by is None else f" over {tagger.index.id}"
        self.version = version(f"{tagger.id}{over}", size, draws, seed, sampling)
        self.q, self.size, self.draws, self.seed, self.sampling = q, size, draws, seed, sampling
        self.column = list(KERNELS).index(kernel)
        self.weights = KERNELS[kernel]
        order = "" if q == 1 else f"_q{q:g}"
        self.name = f"{self.prefix}_{kernel}{order}"
        self.label_suffix = ("" if q == 1 else f", order q = {q:g}") + \
            (", consecutive seed batches" if sampling == "seed_batches" else "")

    def check(self, backbones: dict) -> str | None:
        return self.index.mismatch(backbones[self.clip]) if self.clip in backbones else None

    def applies(self, inputs: Inputs) -> str | None:
        images = inputs.images
        if CONCEPT_COLUMN not in images.columns or images[CONCEPT_COLUMN].isna().any():
            return ("the dataset gives no concept for some prompts (the diversity track needs CUBE's diversity "
                    "prompts, with a 'concept' column)")
        if self.index.backbone_id != self.clip:
            return (f"the artifact index was built with backbone {self.index.backbone_id!r}, but this metric tags "
                    f"with {self.clip!r}: rebuild the index with {self.clip!r} or tag with "
                    f"{self.index.backbone_id!r}")
        unknown = sorted(set(images[CONCEPT_COLUMN]) - set(self.index.concepts))
        if unknown:
            return (f"the artifact index has no artifacts for concept{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))} "
                    f"(it has: {', '.join(self.index.concepts)})")
        largest = int(images.groupby("prompt_id").size().max())
        if largest < self.size:
            return f"needs at least N={self.size} images per prompt (seeds); the most any prompt has is {largest}"
        return None

    def per_draw(self, inputs: Inputs, draws: PromptDraws) -> np.ndarray:
        return draws.vendi[:, self.column]

    def extra_note(self, inputs: Inputs, draws: PromptDraws) -> str:
        return ""

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        all_draws = prompt_draws(inputs, self.tagger, self.clip, self.q, self.size, self.draws, self.seed,
                                 self.sampling)
        level = _finest_level(self.weights)
        tags = image_tags(inputs, self.tagger, self.clip)[level].to_numpy()
        tagged = f"{level} tags" + (f" by {self.tagged_by}" if self.tagged_by else "")
        rows = []
        for prompt_id, draws in all_draws.items():
            if draws.subsets is None:
                rows.append({"prompt_id": prompt_id, "value": np.nan,
                             "note": f"not scored: {len(draws.rows)} images, fewer than N={self.size}"})
                continue
            estimate = draw_mean(self.per_draw(inputs, draws))
            counts = Counter(tags[draws.rows]).most_common()
            shown = ", ".join(f"{label} {n}" for label, n in counts[:5])
            more = f", +{len(counts) - 5} more" if len(counts) > 5 else ""
            sets = "draws" if self.sampling == "random" else "seed batches"
            rows.append({"prompt_id": prompt_id, "value": estimate.mean, "note": (
                f"N={self.size}, {estimate.draws} {sets} over {len(draws.rows)} images; 95% CI over {sets} "
                f"{estimate.ci_low:.3f}-{estimate.ci_high:.3f}{self.extra_note(inputs, draws)}; "
                f"{tagged}: {shown}{more}")})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])


class NormalisedVendi(_Diversity):
    """VS_q / N of a prompt's drawn N-sets under one tag kernel (CUBE Eq. 1 and 4; "VS-bar" in Table 5). Failure
    (not every declared image there): 1 / N, one culture, the prompt counted as refused."""

    prefix = "vendi"

    def __init__(self, tagger: Tagger, kernel: str, **settings):
        super().__init__(tagger, kernel, **settings)
        self.info = MetricInfo(
            self.name, f"Vendi score / N, {KERNEL_NAMES[kernel]} kernel {_weights_text(self.weights)}"
                       f"{self.label_suffix} (Table 5)", "diversity", self.version, True, "VS / N", 1 / self.size,
            1.0, f"{CUBE.short}, Eq. 1 and 4", (Need(self.clip, "image"),), level="prompt")


class CulturalDiversity(_Diversity):
    """CD = mean HPS-v2 quality x VS_q / N of a prompt's drawn N-sets under one tag kernel (CUBE Eq. 3;
    Table 6). ``quality``: the registry id of the HPS-v2 backbone. Failure (not every declared image there): 0, the
    prompt counted as refused."""

    prefix = "cd"

    def __init__(self, tagger: Tagger, kernel: str, *, quality: str = "hpsv2", **settings):
        super().__init__(tagger, kernel, **settings)
        self.quality = quality
        self.info = MetricInfo(
            self.name, f"Cultural diversity, HPS quality x Vendi / N, {KERNEL_NAMES[kernel]} kernel "
                       f"{_weights_text(self.weights)}{self.label_suffix} (Eq. 3)", "diversity", self.version, True,
            "CD", 0.0, 1.0, f"{CUBE.short}, Eq. 3 and 4",
            (Need(self.clip, "image"), Need(quality, "image"), Need(quality, "text")), level="prompt")

    def cosines(self, inputs: Inputs) -> np.ndarray:
        """Each image's cosine with its prompt under the quality backbone (shared by the five CD metrics)."""
        key = ("diversity-quality", self.quality)
        if key not in inputs.memo:
            inputs.memo[key] = cosine_similarity(inputs.features[Need(self.quality, "image")],
                                                 inputs.features[Need(self.quality, "text")])
        return inputs.memo[key]

    def per_draw(self, inputs: Inputs, draws: PromptDraws) -> np.ndarray:
        quality = np.clip(self.cosines(inputs)[draws.rows], 0.0, 1.0)
        return quality[draws.subsets].mean(axis=1) * draws.vendi[:, self.column]

    def extra_note(self, inputs: Inputs, draws: PromptDraws) -> str:
        cosine = self.cosines(inputs)[draws.rows]
        note = f"; mean HPS quality {np.clip(cosine, 0.0, 1.0).mean():.3f}"
        if (cosine < 0).any():
            note += f" ({int((cosine < 0).sum())} negative cosines counted as 0)"
        truncated = inputs.truncated.get(self.quality)
        if truncated is not None and np.asarray(truncated)[draws.rows].any():
            note += "; prompt longer than the quality encoder's context, scored on its first tokens"
        return note


def metrics(tagger: Tagger, *, clip: str = "clip-vit-b-32", quality: str = "hpsv2", q: float = 1.0,
            size: int = SUBSET_SIZE, draws: int = DRAWS, seed: int = 0,
            sampling: Literal["random", "seed_batches"] = "random") -> list[Metric]:
    """The diversity track: CD and the normalised Vendi score under each of CUBE's five kernels, sharing one
    tagging and one set of draws per scoring run. ``tagger``: an ``ArtifactIndex``, or a ``VLMTagger`` (CUBE
    App. H.2)."""
    settings = {"clip": clip, "q": q, "size": size, "draws": draws, "seed": seed, "sampling": sampling}
    return [CulturalDiversity(tagger, kernel, quality=quality, **settings) for kernel in KERNELS] + \
        [NormalisedVendi(tagger, kernel, **settings) for kernel in KERNELS]

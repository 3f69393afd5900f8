"""The tracks the leaderboard shows, as data: a new track appears in every tab by registering it here.

A track found in the results but not registered is still shown, with its first metric as headline and no
method page; registering it adds a title, a headline metric for the overview and win rates, and the method.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmark import citations, results
from benchmark.datasets import cube_1k, cube_diversity, iconic_references
from benchmark.metrics import iconicity


@dataclass(frozen=True)
class Protocol:
    """What a track's headline ranking assumes; a row scored otherwise is shown under its own protocol and
    marked off-protocol. A field left empty is not pinned (any value is on-protocol)."""

    dataset: str = ""  # repo:config:split
    images_per_prompt: int | None = None  # the paper's images (seeds) per prompt
    version: str = ""  # the metric version the default settings give (thresholds, variant, calibration, tagger)
    backbones: tuple[str, ...] = ()  # backbone ids of the default settings (any uid and revision under them)

    def admits(self, protocol: str | None) -> bool:
        """Whether a row's ``protocol`` (the JSON the harness records) is this one; an unrecorded one never is."""
        fields = results.protocol_fields(protocol)
        if fields is None:
            return False
        ids = tuple(sorted(b.split("=")[0] for b in fields.get("backbones") or ()))
        return ((not self.dataset or fields.get("dataset") == self.dataset)
                and (self.images_per_prompt is None or fields.get("images_per_prompt") == self.images_per_prompt)
                and str(fields.get("metric_version") or "").startswith(self.version)
                and (not self.backbones or ids == tuple(sorted(self.backbones))))

    def describe(self) -> str:
        """The protocol in words, for notes and the method page."""
        parts = [f"dataset {self.dataset or 'any'}",
                 f"{self.images_per_prompt} images per prompt" if self.images_per_prompt else "any images per prompt",
                 f"metric version {self.version}…" if self.version else "",
                 f"backbones {', '.join(self.backbones)}" if self.backbones else ""]
        return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Track:
    name: str
    title: str
    headline: str  # metric ranked in the overview and counted in the win rates
    question: str
    method: str  # Markdown: formulas, parameters
    citation: str
    protocol: Protocol = field(default_factory=Protocol)  # the headline ranking's protocol
    # What the Overview opens on: a metric (default: the headline) on a slice. A slice other than "overall" lists
    # each of its values ranked apart, for a paper that reports its table that way (CRT: still and moving).
    overview_metric: str = ""
    overview_slice: str = "overall"

    @property
    def opens_on(self) -> str:
        """The metric the Overview shows first."""
        return self.overview_metric or self.headline


REGISTRY: dict[str, Track] = {}


def register(track: Track) -> Track:
    REGISTRY[track.name] = track
    return track


def get(name: str) -> Track:
    """The registered track, or a plain one for a track only the results know."""
    return REGISTRY.get(name) or Track(name, name.capitalize(), "", "", "", "")


def on_protocol(track: str, protocol: str | None) -> bool:
    """Whether a row of ``track`` scored under ``protocol`` counts in the track's headline ranking."""
    return get(track).protocol.admits(protocol)


register(Track(
    "awareness", "Awareness (CUBE)", "clip_score",
    "Does the image show the cultural artifact the prompt names, faithfully and realistically?",
    r"""
CUBE-1K prompts (cuisine, landmarks, art; 8 countries). Automatic proxies for the paper's human judgements:

- **CLIPScore** = 2.5 · max(cos(image, prompt), 0) (Hessel et al., Eq. 1), ViT-B/32 by default; CLIP cosine too.
- **Artifact recognised (top-1 / top-5)**: zero-shot over every artifact of the prompt's concept from all
  countries, texts "a photo of {artifact}"; 1 if the prompt's artifact ranks within the top k.
- **Country recognised**: zero-shot over the dataset's countries, "{food / a landmark / art} from {country}".
- **HPS v2 quality**: cosine of image and prompt under the HPS v2 ViT-H-14 (Wu et al., arXiv:2306.09341).

Prompt = unit: a prompt's score is the mean over its seeds; a slice's is the mean over its prompts, with a
95% CI over prompts (Student-t; Wilson for 0/1 values; none below 5 prompts). Reported rows: the paper's human Tables 3 and 4.
""", citations.CUBE,
    # Images per prompt not pinned: CUBE's awareness count is not recorded here yet.
    Protocol(f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG}:{cube_1k.SPLIT}", None, "1", ("clip-vit-b-32",))))

register(Track(
    "diversity", "Diversity (CUBE)", "cd_uniform",
    "Asked for an under-specified cultural concept, how many cultures does the model show?",
    r"""
Vendi score of order q: VS_q = exp(log Σ λ̄ᵢ^q / (1 − q)), λ̄ the eigenvalues of K/N (q = 1: exp of the
Shannon entropy). Kernel on tags (continent, country, artifact): k = w₁[same continent] + w₂[same country] +
w₃[same artifact] for (1,0,0), (0,1,0), (0,0,1), (½,½,0), (⅓,⅓,⅓). Cultural diversity (Eq. 3):
CD = mean HPS-v2 quality × VS / N, in [0, 1]. Protocol: 5 rephrasings per concept, seeds 0-79, N = 8 images per
score, mean over 50 draws. Images are tagged by nearest CSpace artifact (faiss over artifact-name embeddings).
""", citations.CUBE,
    # App. H.1: seeds 0-79 per rephrasing, ten batches of N = 8; the default tagger (the artifact index).
    Protocol(f"{cube_diversity.HUB_REPO}:{cube_diversity.CONFIG}:{cube_diversity.SPLIT}", len(cube_diversity.SEEDS),
             "1 (tagger index of ")))

register(Track(
    "iconicity", "Iconicity (CRT)", "crt",
    "Does the model recognise an iconic title without copying its reference image?",
    r"""
- **CRA** (Eq. 1): an image recognises its reference when cos_CLIP(image, reference) ≥ τ = 0.7.
  Per image, and per reference (share of references with ≥ 1 recognised image: the paper's Table 1).
- **VR** (Eq. 2): over recognised images, the share of the 16 grid patches (4×4, DINO) whose best cosine to any
  reference patch is ≥ τ_patch = 0.6 (faiss search over the pool of reference patches).
- **CRT** (Eq. 3) = CRA × (1 − VR): recognised and realised anew. VR@k restricts VR to the references every
  compared model recognised. Still and moving images are reported apart.
""", citations.CRT,
    # Sec. 4: n = 10 images per title; the paper variant's thresholds and backbones.
    Protocol(f"{iconic_references.HUB_REPO}:{iconic_references.CONFIG}:{iconic_references.SPLIT}", 10,
             iconicity.VARIANTS["paper"].version, (iconicity.VARIANTS["paper"].clip, iconicity.VARIANTS["paper"].dino)),
    # The Overview opens on Table 1 itself (CRT from the column means, still and moving apart): the paper's rows and
    # scored rows meet there; `crt` per reference, the headline of the win rates, is one choice away.
    overview_metric=iconicity.CRT_FROM_MEANS[0], overview_slice="kind"))

register(Track(
    "variability", "Variability (W1KP)", "w1kp",
    "How different are a prompt's images across seeds, and how soon is the prompt used up?",
    r"""
Pairwise DreamSim-ℓ2 distances between a prompt's images, each mapped through the empirical CDF F of a
reference sample (d* = F(d)). W1KP = 1 − mean d* over all pairs (U-statistic); W1KP_k = 1 − E[min d* over a
random k-subset]. Levels: high ≥ 0.85, medium ≥ 0.4, low ≥ 0.2. Reusability: the smallest k at which
W1KP_k ≥ 0.85.
""", citations.W1KP,
    # The paper variant over DreamSim (any calibration of it); dataset and images per prompt are not pinned here.
    Protocol("", None, "1 (paper; calibration", ("dreamsim",))))

register(Track(
    "relevance", "Relevance (CAIRE)", "",
    "How relevant is the image to the cultures its submitter names (1-5)?",
    r"""
Visual entity linking: the top-20 knowledge-base images by cosine (mSigLIP), their entities pooled, the entity
whose name embedding is closest to the image chosen. A vision-language judge then reads the image, the entity's
Wikipedia text, the rubric (1 not relevant … 5 highly relevant) and one culture label, and answers with the
digit whose logit is highest among 1-5. Probe baseline: "This image is {level} to {culture}".
""", citations.CAIRE))

register(Track(
    "expectations", "Expectations (CulturalFrames)", "human_alignment",
    "Does the image meet the explicit and implicit cultural expectations of its prompt, as raters judge?",
    r"""
Three raters per image: alignment {0, ½, 1} with explicit / implicit error flags, stereotype flag, quality
{0, ½, 1}, overall 1-5. Reported: mean alignment, failure rate (share < 1) and its explicit / implicit split;
agreement by Krippendorff's α. The **Metrics** tab ranks automatic metrics by Spearman ρ with the human means
per criterion, against the leave-one-rater-out human ceiling.
""", citations.CULTURALFRAMES))

"""The CRT protocol as data: thresholds, backbones and variants (De Rosa Palmini & Cetinic, arXiv:2511.11435,
Eq. 1-3), importable without numpy so that the track registry and the leaderboard service can name the protocol a
ranking assumes. The metrics that apply it are in ``benchmark.metrics.iconicity``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from benchmark.papers import CRT

TAU = 0.7
TAU_PATCH = 0.6
# (name, label) of the metrics the paper's Table 1 reports, shared by the scored metrics and the paper's rows so
# that both sit in one table.
CRA_REFERENCE = ("cra_reference", "CRA, share of references with a recognised image (Table 1)")
VR = ("vr", "VR, visual reuse of recognised images (Eq. 2)")
CRT_FROM_MEANS = ("crt_from_means", "CRT from column means, CRA_reference x (1 - VR) (Table 1)")
GRID = 4
CITATION = CRT.short
COMPARISONS = (">", ">=")


def crt_from_means(cra, vr):
    """Table 1's CRT: Eq. 3 applied to the column means, mean CRA per reference x (1 - mean VR), on numbers or
    arrays. VR is defined only on recognised references; where none was (a mean VR of nan) the mean CRA is 0,
    and so is CRT."""
    import numpy as np  # only when a ranking computes it: the registry imports this module

    return cra * (1 - np.nan_to_num(vr))


@dataclass(frozen=True)
class Protocol:
    """The settings of one CRT scoring: which backbones, and when an image counts as recognised.

    ``tau`` applies to still references, ``tau_moving`` to moving ones (the dataset's ``kind``; without that
    column, a reference with several images is moving); ``comparison`` is ``>`` (Eq. 1) or ``>=``. The grid
    cut and the DINO pooling belong to the ``dino`` backbone's spec (``pooling``, ``grid_cut``).
    """

    variant: str = "paper"
    clip: str = "clip-vit-b-32"
    dino: str = "dinov2-base"
    tau: float = TAU
    tau_moving: float = TAU
    comparison: str = ">"
    tau_patch: float = TAU_PATCH
    grid: int = GRID

    def threshold(self, kind: str) -> float:
        """tau for a reference of this kind (``moving`` or ``still``)."""
        return self.tau_moving if kind == "moving" else self.tau

    @property
    def version(self) -> str:
        """The metric version results carry: the variant and every threshold, so that runs under different
        rules are never taken for one another (the backbones are recorded beside it). Version 2: a reference
        whose declared images are not all there is not scored (it was scored over the images sent), and a
        missing image counts as fully reused in the per-image VR (it was left out)."""
        return (f"2 ({self.variant}: recognised s {self.comparison} {self.tau:g} still, {self.tau_moving:g} moving;"
                f" reused > {self.tau_patch:g})")


VARIANTS = {
    # CRT, Sec. 4.1-4.2: s > 0.7 with CLIP ViT-B/32; DINO's CLS token on an evenly rounded 4x4 grid.
    "paper": Protocol(),
    # The authors' code: compute_CRA.py (IC_TAU_STATIC_DEFAULT, IC_TAU_DYNAMIC_DEFAULT, ``cra_sim >= ic_tau``,
    # CLIP ViT-B/16) and compute_VR.py (``split_into_grid``, ``DINOEmbedder``'s token mean). It has no patch
    # threshold of its own, so Eq. 2's stays.
    "authors_code": Protocol("authors_code", clip="clip-vit-b-16", dino="dinov2-base-mean-floor", tau=0.70,
                             tau_moving=0.75, comparison=">="),
}


def protocol(variant: str = "paper", **overrides) -> Protocol:
    """The named variant's settings with the given ones (those not None) in place of its own; a given ``tau``
    without a ``tau_moving`` sets both.

    ValueError for an unknown variant or comparison."""
    if variant not in VARIANTS:
        raise ValueError(f"CRT variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
    if overrides.get("tau") is not None and overrides.get("tau_moving") is None:
        overrides["tau_moving"] = overrides["tau"]
    chosen = replace(VARIANTS[variant], **{k: v for k, v in overrides.items() if v is not None})
    if chosen.comparison not in COMPARISONS:
        raise ValueError(f"CRT comparison must be one of {', '.join(COMPARISONS)}, not {chosen.comparison!r}")
    return chosen

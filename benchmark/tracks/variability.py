"""Variability (W1KP, Tang et al., arXiv:2406.08482): how different are a prompt's images across seeds?"""

from __future__ import annotations

from benchmark.settings import Setting
from benchmark.track import Chart, MetricUnavailable, Papers, Protocol, Track
from benchmark.papers import W1KP

ENV_W1KP_CALIBRATION = "CULTURELENS_W1KP_CALIBRATION"

SETTINGS = (
    Setting("w1kp_calibration", None, "W1KP distance calibration: .npz (cdf_x, cdf_y) or the authors' cdf-xy.pt, "
                                      "path or URL", env=ENV_W1KP_CALIBRATION, path=True),
    Setting("w1kp_backbone", "dreamsim", "backbone id whose features W1KP compares"),
    Setting("w1kp_variant", "paper", "the paper's definitions, or the authors' code (F of the mean distance > 1e-4, "
                                     "W1KP_k = 1 - F(E[min d]))", choices=("paper", "authors_code")),
)


def metrics(settings, backbones) -> list:
    """W1KP under the calibration the settings name; unavailable without one."""
    from benchmark.metrics.variability import W1KP, Calibration

    if not settings.w1kp_calibration:
        raise MetricUnavailable("w1kp", (
            f"no W1KP calibration: pass --w1kp-calibration PATH_OR_URL or set {ENV_W1KP_CALIBRATION} "
            "(an .npz of cdf_x, cdf_y, or the authors' cdf-xy.pt; see docs/tracks/variability.md)"))
    try:  # a file that is no calibration, or one fitted for another backbone: the message says which
        return [W1KP(Calibration.load(settings.w1kp_calibration), settings.w1kp_backbone, settings.w1kp_variant)]
    except ValueError as error:
        raise MetricUnavailable("w1kp", str(error)) from None


def reusability_curves(aggregates, curves):
    """W1KP_k over k seeds per model: where a curve crosses 0.85 the prompt is used up (W1KP Sec. 3)."""
    curves = curves[curves["metric"] == "w1kp"]
    return curves.rename(columns={"x": "k", "value": "W1KP_k"})[["model", "k", "W1KP_k"]]


TRACK = Track(
    "variability", "Variability (W1KP)", "w1kp",
    "How different are a prompt's images across seeds, and how soon is the prompt used up?",
    r"""
Pairwise DreamSim-ℓ2 distances between a prompt's images, each mapped through the empirical CDF F of a
reference sample (d* = F(d)). W1KP = 1 − mean d* over all pairs (U-statistic); W1KP_k = 1 − E[min d* over a
random k-subset]. Levels: high ≥ 0.85, medium ≥ 0.4, low ≥ 0.2. Reusability: the smallest k at which
W1KP_k ≥ 0.85.
""", Papers(W1KP),
    # The paper variant over DreamSim (any calibration of it); dataset and images per prompt are not pinned here.
    Protocol("", None, "2 (paper; calibration", ("dreamsim",)),
    settings=SETTINGS, metrics=metrics, order=40,
    # W1KP measures variability, which has no better end: pure noise is the most variable (and would win), a model
    # that draws one image for every seed the least. Its table orders by W1KP, lower first; it has no win rate.
    not_in_overall=("variability (W1KP) is left out: more variable is not better in itself (pure noise is the "
                    "most variable of all) and less variable is not either, so it has no direction to win on; its "
                    "own table orders models by W1KP"),
    # With no worse end, a prompt left unanswered has no worst value to count as: such a row is listed apart.
    unanswered="not_ranked",
    charts=(Chart("line", "W1KP reusability curves: W1KP_k over k seeds (0.85 = prompt used up)", "k", "W1KP_k",
                  "no W1KP reusability curves: no submission has been scored on the variability track yet",
                  reusability_curves),))

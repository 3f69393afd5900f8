"""Human aggregates of the CulturalFrames ratings, per model x country x domain, and inter-rater agreement.

Nayak et al., "CulturalFrames: Assessing Cultural Expectation Alignment in
Text-to-Image Models and Evaluation Metrics", arXiv:2506.08835, Sec. 4-5: mean
alignment per model (Fig. 3), the share of ratings below 1 and, among those, the
shares blamed on explicit elements, implicit elements or both (Fig. 5),
stereotype rate, quality and overall score, and Krippendorff's alpha per
criterion (Sec. 4).

Input: the ``ratings`` config of ``benchmark.datasets.culturalframes`` (one row
per rater: image_id, model, country, domain, alignment, explicit_error,
implicit_error, stereotype, quality, overall), as a DataFrame.

Unit of resampling: the prompt. An image's ratings are not independent (its
three raters saw the same picture), and neither are the images of one prompt
when a group pools models (the four models drew the same prompt): every interval
resamples prompts, whole. Where each prompt has one image in the group (one
model), that is the image: a mean gets ``mean_ci`` over images, a share a
percentile bootstrap over them; where a prompt has several (every model
together), both are a percentile bootstrap over prompts of the ratio of the
per-prompt sums (``ratio_ci``). On simulated CulturalFrames-like ratings
(``benchmarks/meta_eval_coverage.py``), the all-models mean's 95% interval
covered 0.88 when the four images of a prompt were taken as independent, 0.96
resampling prompts.
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats

from benchmark.stats import MIN_CI_N, mean_ci

ALL = "all"
DIMENSIONS = ("model", "country", "domain")
# Every model together, then per model, per model x country, per model x country x domain.
GROUPINGS = ((), ("model",), ("model", "country"), ("model", "country", "domain"))
# Criterion -> Krippendorff level of measurement and the scale's values (paper, Sec. 3.3 and App. B).
CRITERIA = {
    "alignment": ("ordinal", (0.0, 0.5, 1.0)),
    "quality": ("ordinal", (0.0, 0.5, 1.0)),
    "overall": ("interval", (1.0, 2.0, 3.0, 4.0, 5.0)),
}
# Statistic -> the per-image column it averages (each image counts once).
IMAGE_MEANS = {
    "mean_alignment": "alignment",
    "failure_rate": "failure_rate",
    "stereotype_rate": "stereotype_rate",
    "mean_quality": "quality",
    "mean_overall": "overall",
}
# Statistic -> the failure types it counts, as a share of all failures (alignment < 1).
FAILURE_SHARES = {
    "explicit_only_share": ("explicit_only",),
    "implicit_only_share": ("implicit_only",),
    "both_share": ("both",),
    "unflagged_share": ("unflagged",),
    "explicit_share": ("explicit_only", "both"),
    "implicit_share": ("implicit_only", "both"),
}
COLUMNS = [*DIMENSIONS, "statistic", "value", "ci_low", "ci_high", "n_images", "n_ratings"]


def per_image(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per image: its model, country, domain, prompt (its image id where the ratings name no prompt), and
    the means of its ratings.

    ``alignment``, ``quality``, ``overall``: mean score of the image's raters;
    ``failure_rate``: share of its alignment ratings below 1; ``stereotype_rate``:
    share of its raters who saw a stereotype; ``failures``: count of alignment
    ratings below 1, split into ``explicit_only``, ``implicit_only``, ``both``
    and ``unflagged`` (neither flag set) by the rater's error flags; ``n_<column>``:
    the number of non-null ratings behind each mean. Null scores are skipped.
    """
    missing = {"image_id", *DIMENSIONS, *CRITERIA, "explicit_error", "implicit_error", "stereotype"} - set(ratings)
    if missing:
        raise ValueError(f"ratings table has no column(s) {sorted(missing)}: pass the CulturalFrames ratings config")
    alignment = pd.to_numeric(ratings["alignment"], errors="raise")
    failed = alignment < 1
    explicit = ratings["explicit_error"].astype("boolean").fillna(False).to_numpy(bool) & failed.to_numpy()
    implicit = ratings["implicit_error"].astype("boolean").fillna(False).to_numpy(bool) & failed.to_numpy()
    frame = pd.DataFrame({
        "image_id": ratings["image_id"].to_numpy(),
        **{d: ratings[d].to_numpy() for d in DIMENSIONS},
        **{c: pd.to_numeric(ratings[c]).to_numpy(float) for c in CRITERIA},
        "failure_rate": failed.astype(float).where(alignment.notna()).to_numpy(),
        "stereotype_rate": ratings["stereotype"].astype("boolean").astype("Float64").to_numpy(float, na_value=np.nan),
        "failures": failed.to_numpy(int),
        "explicit_only": (explicit & ~implicit).astype(int),
        "implicit_only": (implicit & ~explicit).astype(int),
        "both": (explicit & implicit).astype(int),
        "unflagged": (failed.to_numpy() & ~explicit & ~implicit).astype(int),
    })
    # The prompt an image answers (its cluster); a ratings table without prompt ids: each image its own.
    frame["prompt_id"] = ratings["prompt_id"].to_numpy() if "prompt_id" in ratings else frame["image_id"]
    grouped = frame.groupby("image_id", sort=True)
    means = grouped[[*CRITERIA, "failure_rate", "stereotype_rate"]].mean()
    counts = grouped[[*CRITERIA, "stereotype_rate"]].count().add_prefix("n_")
    sums = grouped[["failures", "explicit_only", "implicit_only", "both", "unflagged"]].sum()
    first = grouped[[*DIMENSIONS, "prompt_id"]].first()
    return pd.concat([first, grouped.size().rename("n_ratings"), means, counts, sums], axis=1).reset_index()


def ratio_ci(numerators: np.ndarray, denominators: np.ndarray, *, confidence: float = 0.95,
             n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """sum(numerators) / sum(denominators) and its percentile bootstrap CI, resampling the (numerator,
    denominator) pairs together (one pair per image; images with a zero denominator carry no information and
    are left out). The CI is nan for fewer than two usable pairs, and (v, v) when every pair has ratio v."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    keep = den > 0
    num, den = num[keep], den[keep]
    if num.size < 2:
        value = float(num.sum() / den.sum()) if num.size else float("nan")
        return value, float("nan"), float("nan")
    value = float(num.sum() / den.sum())
    if np.allclose(num, value * den):
        return value, value, value
    result = stats.bootstrap((num, den), lambda n, d, axis=-1: n.sum(axis) / d.sum(axis), paired=True,
                             vectorized=True, confidence_level=confidence, n_resamples=n_resamples,
                             method="percentile", random_state=np.random.default_rng(seed))
    return value, float(result.confidence_interval.low), float(result.confidence_interval.high)


def _group_rows(images: pd.DataFrame, key: dict, confidence: float, n_resamples: int, seed: int) -> list[dict]:
    """One group's rows; intervals over its prompts (see the module: clustered where a prompt has several
    images in the group)."""
    clustered = bool(images["prompt_id"].duplicated().any())
    by_prompt = images.groupby("prompt_id", sort=True)
    rows = []
    for statistic, column in IMAGE_MEANS.items():
        values = images[column].dropna().to_numpy(float)
        if clustered:
            present = images[column].notna()
            sums, counts = by_prompt[column].sum().to_numpy(float), by_prompt[column].count().to_numpy(float)
            low, high = ratio_ci(sums, counts, confidence=confidence, n_resamples=n_resamples, seed=seed)[1:] \
                if images.loc[present, "prompt_id"].nunique() >= MIN_CI_N else (float("nan"), float("nan"))
        else:
            low, high = mean_ci(values, confidence=confidence)
        count = "n_alignment" if column == "failure_rate" else f"n_{column}"
        rows.append({**key, "statistic": statistic, "value": float(values.mean()) if values.size else float("nan"),
                     "ci_low": low, "ci_high": high, "n_images": int(values.size),
                     "n_ratings": int(images[count].sum())})
    failures = images["failures"]
    for statistic, kinds in FAILURE_SHARES.items():
        flagged = images[list(kinds)].sum(axis=1)
        if clustered:  # (flagged, failures) summed per prompt: the pairs resampled
            value, low, high = ratio_ci(flagged.groupby(images["prompt_id"]).sum().to_numpy(float),
                                        by_prompt["failures"].sum().to_numpy(float), confidence=confidence,
                                        n_resamples=n_resamples, seed=seed)
        else:
            value, low, high = ratio_ci(flagged.to_numpy(float), failures.to_numpy(float), confidence=confidence,
                                        n_resamples=n_resamples, seed=seed)
        rows.append({**key, "statistic": statistic, "value": value, "ci_low": low, "ci_high": high,
                     "n_images": int((failures > 0).sum()), "n_ratings": int(failures.sum())})
    return rows


def human_aggregates(ratings: pd.DataFrame, *, groupings=GROUPINGS, confidence: float = 0.95,
                     n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Tidy table of human statistics per group, with CIs over prompts (see the module: ``mean_ci`` over images
    where each prompt has one image in the group, else a cluster bootstrap over prompts; shares: percentile
    bootstrap).

    One row per (group, statistic); columns ``model``, ``country``, ``domain``
    (``"all"`` where the grouping pools over that dimension), ``statistic``,
    ``value``, ``ci_low``, ``ci_high``, ``n_images``, ``n_ratings``.

    - ``mean_alignment``, ``mean_quality``, ``mean_overall``, ``failure_rate``
      (share of alignment ratings < 1), ``stereotype_rate``: the mean over images
      of the per-image mean of its ratings (``per_image``), so each image counts
      once; with the release's three ratings per image this equals the mean over
      ratings. CI: ``benchmark.stats.mean_ci`` over the per-image values, or over prompts (``ratio_ci`` of the
      per-prompt sums) where a prompt has several images in the group.
    - Among failures (alignment < 1): ``explicit_only_share``,
      ``implicit_only_share``, ``both_share``, ``unflagged_share`` (no flag set),
      ``explicit_share`` (= explicit only + both; the paper's 68%) and
      ``implicit_share`` (= implicit only + both; the paper's 49%): failures of
      that type / all failures, summed over the group's ratings (Sec. 5, Fig. 5).
      CI: ``ratio_ci`` over the images (or prompts) that have a failure. ``n_images``
      and ``n_ratings`` count those images and the failures.
    """
    images = per_image(ratings)
    rows = []
    for grouping in groupings:
        grouping = tuple(grouping)
        if set(grouping) - set(DIMENSIONS):
            raise ValueError(f"grouping {grouping} names columns outside {DIMENSIONS}")
        groups = images.groupby(list(grouping), sort=True) if grouping else [((), images)]
        for values, subset in groups:
            values = values if isinstance(values, tuple) else (values,)
            key = {d: ALL for d in DIMENSIONS} | dict(zip(grouping, values))
            rows.extend(_group_rows(subset, key, confidence, n_resamples, seed))
    return pd.DataFrame(rows, columns=COLUMNS)


def value_counts(ratings: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """Units x values matrix for Krippendorff's alpha: how many raters gave each value to each image (images
    with fewer than two ratings of ``criterion`` are left out: they hold no pair); the columns are the value
    domain. Ordinal criteria take only their scale's values; ``overall`` (interval) takes any value in [1, 5],
    as the release holds fractional scores (e.g. 3.5), and its domain is the scale plus the values seen."""
    level, scale = CRITERIA[criterion]
    scores = ratings[["image_id", criterion]].dropna()
    observed = set(scores[criterion].astype(float))
    if level == "interval":
        outside = sorted(v for v in observed if not scale[0] <= v <= scale[-1])
        domain = sorted(set(scale) | observed)
    else:
        outside, domain = sorted(observed - set(scale)), list(scale)
    if outside:
        raise ValueError(f"{criterion} has value(s) {outside} outside its scale {scale}")
    counts = scores.groupby(["image_id", criterion]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=domain, fill_value=0)
    return counts[counts.sum(axis=1) >= 2]


def krippendorff_alpha(ratings: pd.DataFrame, criterion: str) -> float:
    """Krippendorff's alpha of ``criterion`` over images: alignment and quality at the ordinal level, overall at
    the interval level (``CRITERIA``), as the paper reports them (Sec. 4: 0.37, 0.28, 0.36).

    alpha = 1 - D_o / D_e, observed over expected disagreement of the coincidence matrix of pairable values
    (Krippendorff 2013), computed by the ``krippendorff`` package from per-image value counts. alpha needs
    only which values each image received, not who gave them, so rater ids that differ per image (the
    release's) are no obstacle. nan when fewer than two images have two ratings or only one value occurs.
    """
    return _alpha(value_counts(ratings, criterion), criterion)


def _alpha(counts: pd.DataFrame, criterion: str) -> float:
    level, _ = CRITERIA[criterion]
    if counts.shape[0] < 2 or np.count_nonzero(counts.sum(axis=0)) < 2:
        return float("nan")
    return float(krippendorff.alpha(value_counts=counts.to_numpy(), value_domain=list(counts.columns),
                                    level_of_measurement=level))


def agreement(ratings: pd.DataFrame, *, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """Krippendorff's alpha per criterion (and per group of ``by``, e.g. ("country",)), one row each:
    ``by`` columns, criterion, level_of_measurement, alpha, n_images (images with two or more ratings),
    n_ratings (their ratings)."""
    groups = ratings.groupby(list(by), sort=True) if by else [((), ratings)]
    rows = []
    for values, subset in groups:
        values = values if isinstance(values, tuple) else (values,)
        for criterion, (level, _) in CRITERIA.items():
            counts = value_counts(subset, criterion)
            rows.append({**dict(zip(by, values)), "criterion": criterion, "level_of_measurement": level,
                         "alpha": _alpha(counts, criterion), "n_images": int(counts.shape[0]),
                         "n_ratings": int(counts.to_numpy().sum())})
    return pd.DataFrame(rows, columns=[*by, "criterion", "level_of_measurement", "alpha", "n_images", "n_ratings"])

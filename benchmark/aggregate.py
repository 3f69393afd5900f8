"""Per-image scores -> leaderboard aggregates, overall and per slice, with bootstrap CIs.

Images of one prompt (different seeds) are not independent draws, so the
prompt is the unit: each prompt's score is the mean over its images, a slice's
score is the mean over its prompts, and the 95% CI is a percentile bootstrap
over those prompts. The ``prompt`` slice gives each prompt's own mean over its
images (seeds), with a bootstrap CI over those images. Undefined values (null,
e.g. visual reuse of a reference no image recognised) are left out, and ``n``
counts what is left.
"""

from __future__ import annotations

import pandas as pd

from benchmark.stats import bootstrap_mean_ci

SLICES = ("country", "continent", "concept", "domain", "kind", "modality")
# Crossed slices (e.g. CUBE's country x concept cells): name -> the columns crossed; the value joins theirs.
CROSSED = {"country_concept": ("country", "concept"), "country_domain": ("country", "domain")}
CROSS_SEPARATOR = " / "


def aggregate(per_image: pd.DataFrame, slices: tuple[str, ...] = SLICES,
              crossed: dict[str, tuple[str, ...]] = CROSSED) -> list[dict]:
    """Rows with metric, slice, slice_value, value, ci_low, ci_high, n for every metric and slice (and crossed
    slice whose columns are all present: value ``"Japan / cuisine"``)."""
    rows = []
    present = [s for s in slices if s in per_image.columns and per_image[s].notna().any()]
    crosses = {name: list(columns) for name, columns in crossed.items() if set(columns) <= set(present)}
    for (track, metric), group in per_image.groupby(["track", "metric"], sort=True):
        group = group[group["value"].notna()]  # undefined values (e.g. VR with no recognised image) do not count
        per_prompt = group.groupby("prompt_id", sort=True).agg(
            value=("value", "mean"), **{s: (s, "first") for s in present})
        parts = [("overall", "all", per_prompt)] if len(per_prompt) else []
        parts += [(s, str(v), g) for s in present for v, g in per_prompt.groupby(s, sort=True)]
        parts += [(name, CROSS_SEPARATOR.join(map(str, v)), g) for name, columns in crosses.items()
                  for v, g in per_prompt.groupby(columns, sort=True)]
        parts += [("prompt", str(p), g) for p, g in group.groupby("prompt_id", sort=True)]
        for slice_name, slice_value, part in parts:
            low, high = bootstrap_mean_ci(part["value"].to_numpy())
            rows.append({"track": track, "metric": metric, "slice": slice_name, "slice_value": slice_value,
                         "value": float(part["value"].mean()), "ci_low": low, "ci_high": high, "n": len(part)})
    return rows


def aggregate_curves(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """Per-prompt curves (metric, prompt_id, x, value) -> the model's curve: per metric and x, the mean over
    prompts with a bootstrap CI over prompts (prompt_id null on these rows)."""
    rows = []
    for (metric, x), group in per_prompt.groupby(["metric", "x"], sort=True):
        values = group["value"].to_numpy()
        low, high = bootstrap_mean_ci(values)
        rows.append({"metric": metric, "prompt_id": None, "x": x, "value": float(values.mean()),
                     "ci_low": low, "ci_high": high, "n": len(values)})
    return pd.DataFrame(rows)

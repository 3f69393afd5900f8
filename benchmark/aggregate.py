"""Per-image scores -> leaderboard aggregates, overall and per slice, with 95% CIs.

Images of one prompt (different seeds) are not independent draws, so the
prompt is the unit: each prompt's score is the mean over its images, a slice's
score is the mean over its prompts, and the 95% CI is ``benchmark.stats.mean_ci``
over those prompts (Student-t, Wilson for 0/1 values, none below 5 prompts). The
``prompt`` slice gives each prompt's own mean over its images (seeds), with a CI
over those images. Undefined values (null,
e.g. visual reuse of a reference no image recognised) are left out, and ``n``
counts what is left; error rows (``error`` not null, e.g. a non-finite
embedding) are left out too, and ``excluded`` counts them.

Every prompt with rows of a metric has its ``prompt`` row, its value null where none of them holds one: with
``excluded`` 0 the value is undefined there by the metric's own rule (VR where no image was recognised), which a
ranking leaves out of a mean; with ``excluded`` above 0 it was not scored (its images' error rows, or a prompt-level
value whose declared images were not all there: ``harness.refuse_incomplete``), which a ranking counts as refused,
at the metric's worst (``leaderboard.rankings``).
"""

from __future__ import annotations

import pandas as pd

from benchmark.datasets.prompts import SLICE_COLUMNS
from benchmark.stats import mean_ci

# The dataset columns results are sliced by: all but the country's code, which would repeat the country's rows.
SLICES = tuple(c for c in SLICE_COLUMNS if c != "country_code")
# Crossed slices (e.g. CUBE's country x concept cells): name -> the columns crossed; the value joins theirs.
CROSSED = {"country_concept": ("country", "concept"), "country_domain": ("country", "domain")}
CROSS_SEPARATOR = " / "


def aggregate(per_image: pd.DataFrame, slices: tuple[str, ...] = SLICES,
              crossed: dict[str, tuple[str, ...]] = CROSSED,
              ranges: dict[str, tuple[float, float]] | None = None,
              kinds: dict[str, str] | None = None) -> list[dict]:
    """Rows with metric, slice, slice_value, value, ci_low, ci_high, n and excluded for every metric and slice (and
    crossed slice whose columns are all present: value ``"Japan / cuisine"``). ``ranges``: metric -> its declared
    range, which holds each CI (``mean_ci``'s bounds); ``kinds``: metric -> what its values are
    (``MetricInfo.kind``: "rate" or "continuous", the default), which chooses the CI.

    ``excluded`` counts the slice's error rows of the metric (``error`` not null: an image, or a prompt for a
    prompt-level value, left out of ``n``); 0 when ``per_image`` has no ``error`` column."""
    rows = []
    present = [s for s in slices if s in per_image.columns and per_image[s].notna().any()]
    crosses = {name: list(columns) for name, columns in crossed.items() if set(columns) <= set(present)}
    for (track, metric), group in per_image.groupby(["track", "metric"], sort=True):
        errors = group[group["error"].notna()] if "error" in group.columns else group.iloc[0:0]
        defined = group[group["value"].notna()]  # undefined values (e.g. VR with no recognised image) do not count
        per_prompt = defined.groupby("prompt_id", sort=True).agg(
            value=("value", "mean"), **{s: (s, "first") for s in present})
        parts = [("overall", "all", per_prompt, {})] if len(per_prompt) else []
        parts += [(s, str(v), g, {s: v}) for s in present for v, g in per_prompt.groupby(s, sort=True)]
        parts += [(name, CROSS_SEPARATOR.join(map(str, v)), g, dict(zip(columns, v)))
                  for name, columns in crosses.items() for v, g in per_prompt.groupby(columns, sort=True)]
        # every prompt with rows, those of no value too (its value null: undefined, or not scored)
        parts += [("prompt", str(p), g[g["value"].notna()], {"prompt_id": p})
                  for p, g in group.groupby("prompt_id", sort=True)]
        bounds = (ranges or {}).get(metric, (None, None))
        for slice_name, slice_value, part, where in parts:
            low, high = mean_ci(part["value"].to_numpy(), bounds=bounds,
                                kind=(kinds or {}).get(metric, "continuous"))
            rows.append({"track": track, "metric": metric, "slice": slice_name, "slice_value": slice_value,
                         "value": float(part["value"].mean()) if len(part) else None, "ci_low": low,
                         "ci_high": high, "n": len(part), "excluded": _matching(errors, where)})
    return rows


def _matching(frame: pd.DataFrame, where: dict) -> int:
    """How many rows of ``frame`` have every column of ``where`` equal to its value."""
    match = pd.Series(True, index=frame.index)
    for column, value in where.items():
        match &= frame[column] == value
    return int(match.sum())


def aggregate_curves(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """Per-prompt curves (metric, prompt_id, x, value) -> the model's curve: per metric and x, the mean over
    prompts with its CI over prompts (``mean_ci``; prompt_id null on these rows)."""
    rows = []
    for (metric, x), group in per_prompt.groupby(["metric", "x"], sort=True):
        values = group["value"].to_numpy()
        low, high = mean_ci(values)
        rows.append({"metric": metric, "prompt_id": None, "x": x, "value": float(values.mean()),
                     "ci_low": low, "ci_high": high, "n": len(values)})
    return pd.DataFrame(rows)

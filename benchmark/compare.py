"""``culturelens compare``: statistics across scored submissions.

- Paired tests: for each metric, every pair of models on the prompts both
  answered, two-sided Wilcoxon signed-rank tests (as the CRT paper does, Sec. 5)
  with Holm's correction over every test printed (all pairs of all metrics), and
  a CI of the mean difference (``benchmark.stats.difference_ci``).
- VR@k: visual reuse on the references every model recognised (CRT, Sec. 5.2).
- Perturbations: delta-CRA and delta-CRT of each model between its results on
  the original prompts and on a perturbed config (CRT, Sec. 5.4).

Inputs are results folders as the worker or ``culturelens score`` writes them
(``per_image.parquet`` inside).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmark.errors import CultureLensError
from benchmark.layout import PER_IMAGE
from benchmark.metrics.iconicity import perturbation_deltas, vr_at_k
from benchmark.stats import paired_comparisons


class NotAResultsFolder(CultureLensError, FileNotFoundError):
    """A folder given as results has no per_image.parquet; the message says which results folders to give."""


def read_per_image(folder: Path) -> pd.DataFrame:
    path = Path(folder) / PER_IMAGE
    if not path.exists():
        raise NotAResultsFolder(f"{folder}: no per_image.parquet (give a results folder of `culturelens score` "
                                "or of the store's results/)")
    return pd.read_parquet(path)


def per_prompt(frames: list[pd.DataFrame], metric: str) -> pd.DataFrame:
    """One value per (model, prompt): the mean over the prompt's images for image-level metrics."""
    rows = pd.concat([f[f["metric"] == metric] for f in frames], ignore_index=True)
    return rows.groupby(["model", "prompt_id"], as_index=False)["value"].mean()


def _per_reference(frame: pd.DataFrame) -> pd.DataFrame:
    """cra (Eq. 1, per reference) and crt per prompt of one submission's iconicity rows."""
    cra = frame[frame["metric"] == "cra_image"].groupby("prompt_id")["value"].mean().rename("cra")
    crt = frame[frame["metric"] == "crt"].set_index("prompt_id")["value"].rename("crt")
    return pd.concat([cra, crt], axis=1).reset_index()


def main(results: list[Path], perturbed: list[Path] | None, metrics: list[str] | None) -> int:
    """``culturelens compare``: print the comparisons; CultureLensError for folders that cannot be compared."""
    frames = [read_per_image(folder) for folder in results]
    perturbed_frames = [read_per_image(folder) for folder in perturbed or []]
    if perturbed_frames and len(perturbed_frames) != len(frames):
        raise CultureLensError("give one --perturbed results folder per results folder, in the same order")
    models = [f["model"].iloc[0] if len(f) else str(r) for f, r in zip(frames, results)]
    if len(set(models)) != len(models):
        raise CultureLensError(f"two results folders are for the same model name {models}; compare different models")
    present = sorted(set.intersection(*(set(f["metric"].dropna()) for f in frames)))
    wanted = [m for m in (metrics or present) if m in present]
    pd.set_option("display.width", 160)
    if len(frames) >= 2 and wanted:
        tests = paired_comparisons(pd.concat([per_prompt(frames, metric).assign(metric=metric) for metric in wanted],
                                             ignore_index=True))
        for metric, table in tests.groupby("metric", sort=False):
            print(f"\n== {metric}: paired Wilcoxon signed-rank; p_holm is Holm-corrected over all {len(tests)} "
                  f"tests below ({len(wanted)} metric(s))")
            print(table.drop(columns="metric").round(4).to_string(index=False))
    if "vr" in present and len(frames) >= 2:
        print("\n== VR@k: visual reuse on the references every model recognised")
        print(vr_at_k(per_prompt(frames, "vr").rename(columns={"value": "vr"})).round(4).to_string(index=False))
    for model, before, after in zip(models, frames, perturbed_frames):
        result = perturbation_deltas(_per_reference(before), _per_reference(after))
        cra_low, cra_high = result["delta_cra_ci"]
        crt_low, crt_high = result["delta_crt_ci"]
        cra = (f"{result['delta_cra']:+.4f} [{cra_low:+.4f}, {cra_high:+.4f}]" if result["delta_cra"] is not None
               else "undefined")
        print(f"\n== {model} under perturbation: delta-CRA {cra} over {result['references']} references; delta-CRT "
              + (f"{result['delta_crt']:+.4f} [{crt_low:+.4f}, {crt_high:+.4f}]" if result["delta_crt"] is not None
                 else "undefined") + f" over the {result['references_recognised_after']} still recognised")
    return 0

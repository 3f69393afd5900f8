"""``culturelens calibrate``: fit a W1KP distance calibration (Eq. 1 of arXiv:2406.08482) for a backbone.

The paper's calibration is the empirical CDF of DreamSim_l2 distances between
images of the same prompt (10,000 pairs, 1,000 DiffusionDB prompts). To use W1KP
with another backbone, generate a reference sample the same way (several seeds
per prompt, as a submission folder) and fit its CDF here; pass the ``.npz`` to
``--w1kp-calibration``. ``cdf="empirical"`` fits F(x) = share of the sample <= x;
``cdf="authors_code"`` the authors' fit (castorini/w1kp, w1kp/utils.py,
``compute_cdf``: the sample padded with 0 and 1, the i-th value at i / (N + 2)).
The ``.npz`` records the backbone id and its ``Backbone.key`` (weights, revision, preprocessing): W1KP refuses it
for any other backbone (``Calibration.mismatch``, ``W1KP.check``).
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from benchmark import harness
from benchmark.datasets.prompts import load_prompts_for
from benchmark.encoders import load_backbone
from benchmark.encoders.spec import BackboneSpec
from benchmark.errors import CultureLensError
from benchmark.features import Need
from benchmark.features.embeddings import compute_features
from benchmark.layout import SubmissionLayout
from benchmark.metrics.variability import Calibration, pairwise_squared_l2
from benchmark.progress import Bars
from benchmark.submission import stage


def reference_distances(features: np.ndarray, prompt_ids: list[str]) -> np.ndarray:
    """Squared L2 distances of every pair of images that share a prompt; CultureLensError when no two do."""
    groups: dict[str, list[int]] = {}
    for row, prompt_id in enumerate(prompt_ids):
        groups.setdefault(prompt_id, []).append(row)
    parts = []
    for rows in groups.values():
        if len(rows) >= 2:
            distances = pairwise_squared_l2(features[rows])
            parts.append(distances[np.triu_indices(len(rows), k=1)])
    if not parts:
        raise CultureLensError("no prompt has two images: a calibration sample needs several seeds per prompt")
    return np.concatenate(parts)


CDFS = ("empirical", "authors_code")


def main(submission: Path, out: Path, *, backbone_id: str, registry: dict[str, BackboneSpec], datasets_root: Path,
         device: str | None, batch_size: int, num_workers: int | None, cdf: str = "empirical") -> int:
    """``culturelens calibrate``: 0 when the calibration is saved, 1 when the sample is refused; a
    CultureLensError (BackboneUnavailable, a sample without two images of a prompt, ...) otherwise."""
    if cdf not in CDFS:
        raise CultureLensError(f"the calibration CDF must be one of {', '.join(CDFS)}, not {cdf!r}")
    need = Need(backbone_id, "image")
    bars = Bars(unit="img")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            report = stage(submission, Path(tmp), functools.partial(load_prompts_for, datasets_root=datasets_root),
                           progress=bars.stage("checking images"))
            if not report.ok:
                print(report.text(), file=sys.stderr)
                return 1
            folder = report.keep(Path(tmp) / "sample")
            rows = harness.image_rows(pq.read_table(SubmissionLayout(folder).images_table).to_pandas(), report.prompts)
            backbone = load_backbone(backbone_id, registry, device)
            features = compute_features(folder, rows, [need], {backbone_id: backbone},
                                        batch_size=batch_size, num_workers=num_workers, progress=bars)
        finally:
            bars.close()
    distances = reference_distances(features.arrays[need], rows["prompt_id"].tolist())
    fit = Calibration.fit if cdf == "empirical" else Calibration.fit_authors_code
    calibration = fit(distances, source=str(out), backbone=backbone_id, backbone_key=backbone.key)
    calibration.save(out)
    quartiles = np.percentile(distances, [25, 50, 75])
    print(f"fitted ({cdf} CDF) on {len(distances)} same-prompt pairs of {rows['prompt_id'].nunique()} prompts "
          f"with {backbone_id} ({backbone.key}; distance quartiles {quartiles[0]:.4g} / {quartiles[1]:.4g} / "
          f"{quartiles[2]:.4g}) -> {out}")
    return 0


"""Iconicity: recognition (CRA), visual reuse (VR) and transformation (CRT) of cultural references.

De Rosa Palmini & Cetinic, "The Persistence of Cultural Memory: Investigating
Multimodal Iconicity in Diffusion Models", arXiv:2511.11435.

- Recognition, per image (Sec. 4.1): s_i = max_j cos(f(I_i), f(R_j)) over the
  reference images R (one for a still reference), f = CLIP ViT-B/32;
  recognised iff s_i > tau (0.7). CRA = (1/n) sum_i 1[s_i > tau] (Eq. 1).
  Table 1's CRA column is another aggregate: the share of references with at
  least one recognised image (``cra_reference``).
- Visual reuse, per recognised image (Sec. 4.2): a 4x4 grid, K = 16 patch
  embeddings (DINO); s_k = max over the pool of all reference patches,
  regardless of position; reused iff s_k > tau_patch (0.6). VR = (1/(n_r K))
  sum over recognised images and patches (Eq. 2).
- CRT = CRA x (1 - VR) (Eq. 3); a reference with no recognised image has
  CRA = 0 and CRT = 0. Table 1's CRT applies Eq. 3 to the column means
  (``crt_from_means``).
- CRC (moving references, App. 0.M): the share of reference depictions
  matched by at least one generated image (s > tau).
- VR@k: VR on the references every compared model recognised (Sec. 5.2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need

TAU = 0.7
TAU_PATCH = 0.6
CRT_FROM_MEANS = ("crt_from_means", "CRT from column means, CRA_reference x (1 - VR) (Table 1)")
GRID = 4
CITATION = "De Rosa Palmini & Cetinic, arXiv:2511.11435"


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def recognition_scores(generated: np.ndarray, references: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, D) generated and (R, D) reference embeddings -> (s_i = max_j cos, argmax j) per generated image."""
    similarity = _unit(generated) @ _unit(references).T
    return similarity.max(axis=1).astype(np.float64), similarity.argmax(axis=1)


def recognised(scores: np.ndarray, tau: float = TAU) -> np.ndarray:
    """1[s_i > tau] (Eq. 1's indicator); a score equal to tau is not recognised."""
    return np.asarray(scores) > tau


def patch_similarity(generated_patches: np.ndarray, reference_patches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, K, D) generated patches and (R, K, D) reference patches -> (s_k, match), both (n, K): each generated
    patch's maximum cosine to the pool of all R x K reference patches irrespective of position (Eq. 2), and the
    pool position r * K + k of that best reference patch.

    The search is an exact faiss inner-product index over the unit-normalised pool.
    """
    import faiss

    n, k, d = generated_patches.shape
    pool = np.ascontiguousarray(_unit(reference_patches).reshape(-1, d))
    queries = np.ascontiguousarray(_unit(generated_patches).reshape(-1, d))
    index = faiss.IndexFlatIP(d)
    index.add(pool)
    best, match = index.search(queries, 1)
    return best.reshape(n, k).astype(np.float64), match.reshape(n, k)


def visual_reuse(similarity: np.ndarray, tau_patch: float = TAU_PATCH) -> float | None:
    """VR over recognised images (Eq. 2): the share of their patches with s_k > tau_patch; None if none."""
    similarity = np.asarray(similarity)
    if similarity.size == 0:
        return None
    return float((similarity > tau_patch).mean())


def crt(cra: float, vr: float | None) -> float:
    """CRT = CRA x (1 - VR) (Eq. 3); with no recognised image CRA = 0 and so CRT = 0."""
    return 0.0 if vr is None else cra * (1.0 - vr)


def coverage(generated: np.ndarray, references: np.ndarray, tau: float = TAU) -> float:
    """CRC: the share of reference depictions R_j with max_i cos(f(I_i), f(R_j)) > tau."""
    similarity = _unit(generated) @ _unit(references).T
    return float((similarity.max(axis=0) > tau).mean())


def prune_references(embeddings: np.ndarray, threshold: float = TAU) -> np.ndarray:
    """Keep-mask over a moving reference's images: drop an image whose mean cosine to the others is below
    ``threshold`` (the CRT paper's pruning of web images, 0.7 with CLIP ViT-B/32)."""
    x = _unit(embeddings)
    n = len(x)
    if n < 3:
        return np.ones(n, dtype=bool)
    similarity = x @ x.T
    mean_to_rest = (similarity.sum(axis=1) - np.diag(similarity)) / (n - 1)
    return mean_to_rest >= threshold


def vr_at_k(per_reference: pd.DataFrame) -> pd.DataFrame:
    """VR@k (Sec. 5.2): each model's mean VR on the k references every model recognised.

    ``per_reference``: columns model, prompt_id, vr (null where the model recognised nothing).
    Returns columns model, vr_at_k, k.
    """
    wide = per_reference.pivot_table(index="prompt_id", columns="model", values="vr", aggfunc="first",
                                     dropna=False)
    shared = wide.dropna()
    return pd.DataFrame({"model": shared.columns, "vr_at_k": shared.mean().to_numpy(),
                         "k": len(shared)}).reset_index(drop=True)


def perturbation_deltas(before: pd.DataFrame, after: pd.DataFrame, *, seed: int = 0) -> dict:
    """Delta-CRA and delta-CRT of one model under a prompt perturbation (Sec. 5.4, Fig. 5), with 95%
    bootstrap CIs over references. Delta-CRT only over references still recognised after (CRA > 0).

    ``before`` and ``after``: columns prompt_id, cra, crt (per reference).
    """
    from benchmark.stats import bootstrap_mean_ci

    paired = before.merge(after, on="prompt_id", suffixes=("_before", "_after"))
    delta_cra = (paired["cra_after"] - paired["cra_before"]).to_numpy()
    kept = paired[paired["cra_after"] > 0]
    delta_crt = (kept["crt_after"] - kept["crt_before"]).to_numpy()
    result = {"references": len(paired), "delta_cra": float(delta_cra.mean()) if len(paired) else None,
              "delta_cra_ci": bootstrap_mean_ci(delta_cra, seed=seed), "references_recognised_after": len(kept),
              "delta_crt": float(delta_crt.mean()) if len(kept) else None,
              "delta_crt_ci": bootstrap_mean_ci(delta_crt, seed=seed)}
    return result


# --- adapters -------------------------------------------------------------------------------------
def analyse(inputs: Inputs, clip: str, dino: str, tau: float, tau_patch: float, grid: int) -> pd.DataFrame:
    """Per generated image: recognition score and best reference (CLIP), and for recognised images the
    patch reuse (DINO grid). Computed once per scoring run and shared by the iconicity metrics."""
    key = ("iconicity", clip, dino, tau, tau_patch, grid)
    if key in inputs.memo:
        return inputs.memo[key]
    clip_generated = inputs.features[Need(clip, "image")]
    clip_references = inputs.references[Need(clip, "image", of="reference")]
    grid_generated = inputs.features[Need(dino, "grid", grid)]
    grid_references = inputs.references[Need(dino, "grid", grid, of="reference")]
    rows = []
    for prompt_id, index in inputs.images.groupby("prompt_id", sort=True).indices.items():
        references = clip_references.get(prompt_id)
        if references is None or len(references) == 0:
            continue
        scores, best = recognition_scores(clip_generated[index], references)
        hit = recognised(scores, tau)
        similarity = np.full((len(index), grid * grid), np.nan)
        match = np.full((len(index), grid * grid), -1)
        if hit.any():
            similarity[hit], match[hit] = patch_similarity(grid_generated[index][hit], grid_references[prompt_id])
        for i, row in enumerate(index):
            reused = similarity[i] > tau_patch
            rows.append({"row": row, "prompt_id": prompt_id, "score": scores[i], "best_reference": int(best[i]),
                         "references": len(references), "recognised": bool(hit[i]),
                         "vr_image": visual_reuse(similarity[i:i + 1], tau_patch) if hit[i] else np.nan,
                         "reused": np.flatnonzero(reused).tolist() if hit[i] else [],
                         "matches": [divmod(int(m), grid * grid) for m in match[i][reused]] if hit[i] else []})
    inputs.memo[key] = frame = pd.DataFrame(rows).set_index("row").sort_index()
    return frame


class _Iconicity(Metric):
    """Shared settings and needs of the iconicity metrics (thresholds and backbones are parameters)."""

    name, label, higher, level, unit, equation = "", "", True, "prompt", "share", ""

    def __init__(self, clip: str = "clip-vit-b-32", dino: str = "dinov2-base", tau: float = TAU,
                 tau_patch: float = TAU_PATCH, grid: int = GRID):
        self.settings = (clip, dino, tau, tau_patch, grid)
        needs = (Need(clip, "image"), Need(clip, "image", of="reference"), Need(dino, "grid", grid),
                 Need(dino, "grid", grid, of="reference"))
        self.info = MetricInfo(self.name, self.label, "iconicity", "1", self.higher, self.unit, 0.0, 1.0,
                               f"{CITATION}, {self.equation}", needs, self.level)

    def applies(self, inputs: Inputs) -> str | None:
        if inputs.reference_counts is None or not (inputs.reference_counts > 0).any():
            return "the dataset has no reference images (iconicity needs a dataset like iconic_references)"
        return None

    def per_reference(self, inputs: Inputs) -> pd.DataFrame:
        analysis = analyse(inputs, *self.settings)
        return analysis.groupby("prompt_id", sort=True).agg(
            cra=("recognised", "mean"), any_recognised=("recognised", "any"), recognised=("recognised", "sum"),
            vr=("vr_image", "mean"), references=("references", "first"))


class RecognitionPerImage(_Iconicity):
    name, label, level, equation = "cra_image", "CRA, share of images recognised (Eq. 1)", "image", "Eq. 1"

    def per_image(self, inputs: Inputs):
        analysis = analyse(inputs, *self.settings)
        values = analysis["recognised"].astype(float).reindex(range(len(inputs.images))).to_numpy()
        notes = [None if pd.isna(r.score) else
                 f"best reference similarity {r.score:.3f}" + (f" (reference {r.best_reference + 1} of {r.references})"
                                                                 if r.references > 1 else "")
                 for r in analysis.reindex(range(len(inputs.images))).itertuples()]
        return values, notes


class RecognitionPerReference(_Iconicity):
    name, label, equation = "cra_reference", "CRA, share of references with a recognised image (Table 1)", "Table 1"

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        return pd.DataFrame({"prompt_id": table.index, "value": table["any_recognised"].astype(float).to_numpy(),
                             "note": [f"{int(n)} of the images recognised" for n in table["recognised"]]})


class VisualReuse(_Iconicity):
    name, label, higher, equation = "vr", "VR, visual reuse of recognised images (Eq. 2)", False, "Eq. 2"

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        return pd.DataFrame({"prompt_id": table.index, "value": table["vr"].to_numpy(),
                             "note": [f"over {int(n)} recognised images" if n else "no image recognised"
                                      for n in table["recognised"]]})


class VisualReusePerImage(_Iconicity):
    """Each recognised image's share of reused patches, with the reused patches and their matches (for the
    side-by-side picture): ``detail`` = best_reference, reused patch indices, matched (reference, patch)."""

    name, label, higher, level, equation = ("vr_image", "share of a recognised image's patches reused", False,
                                            "image", "Eq. 2")

    def per_image(self, inputs: Inputs):
        analysis = analyse(inputs, *self.settings).reindex(range(len(inputs.images)))
        patches = self.settings[4] ** 2
        notes = [f"{len(r.reused)} of {patches} patches reused" if r.recognised is True else None
                 for r in analysis.itertuples()]
        return analysis["vr_image"].to_numpy(dtype=float), notes

    def details(self, inputs: Inputs) -> list[dict | None]:
        analysis = analyse(inputs, *self.settings).reindex(range(len(inputs.images)))
        return [{"best_reference": r.best_reference, "reused": r.reused, "matches": r.matches,
                 "grid": self.settings[4]} if r.recognised is True else None for r in analysis.itertuples()]


class Transformation(_Iconicity):
    name, label, equation = "crt", "CRT = CRA x (1 - VR), per reference (Eq. 3)", "Eq. 3"

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        values = [crt(c, None if pd.isna(v) else v) for c, v in zip(table["cra"], table["vr"])]
        return pd.DataFrame({"prompt_id": table.index, "value": values, "note": None})

    def derived(self, aggregates: list[dict], curves) -> list[dict]:
        """Table 1's CRT: Eq. 3 on the column means, cra_reference x (1 - vr), for every slice."""
        by = {(r["metric"], r["slice"], r["slice_value"]): r for r in aggregates}
        rows = []
        for (metric, slice_name, slice_value), cra in by.items():
            vr = by.get(("vr", slice_name, slice_value))
            if metric != "cra_reference" or vr is None or vr["value"] is None or slice_name == "prompt":
                continue
            rows.append({"track": "iconicity", "metric": CRT_FROM_MEANS[0], "slice": slice_name,
                         "slice_value": slice_value, "value": cra["value"] * (1 - vr["value"]), "ci_low": None,
                         "ci_high": None, "n": cra["n"], "higher_is_better": True, "metric_version": "1",
                         "metric_label": CRT_FROM_MEANS[1]})
        return rows


class Coverage(_Iconicity):
    name, label, equation = "crc", "CRC, share of reference depictions matched (moving references)", "App. 0.M"

    def applies(self, inputs: Inputs) -> str | None:
        reason = super().applies(inputs)
        if reason is None and not (inputs.reference_counts > 1).any():
            return "no reference has several depictions (CRC is for moving-image references)"
        return reason

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        clip = self.settings[0]
        generated = inputs.features[Need(clip, "image")]
        references = inputs.references[Need(clip, "image", of="reference")]
        rows = []
        for prompt_id, index in inputs.images.groupby("prompt_id", sort=True).indices.items():
            refs = references.get(prompt_id)
            if refs is not None and len(refs) > 1:
                rows.append({"prompt_id": prompt_id, "value": coverage(generated[index], refs, self.settings[2]),
                             "note": f"{len(refs)} reference depictions"})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])


def metrics(**settings) -> list[Metric]:
    """The iconicity track's metrics, sharing one analysis per scoring run."""
    return [cls(**settings) for cls in (RecognitionPerImage, RecognitionPerReference, VisualReuse,
                                        VisualReusePerImage, Transformation, Coverage)]

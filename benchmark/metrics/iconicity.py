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

Failures: a declared image the submission does not hold is not recognised and fully reused (per image: CRA 0, VR
1); a reference-level value (CRA per reference, VR, CRT, CRC) needs every declared image, so a reference missing
one, or holding one the analysis could not use, has none and counts as refused, at 0 (CRA, CRT, CRC) or 1 (VR)
(``benchmark.metrics.base``). Each class says its own.

Two protocols (``VARIANTS``), recorded in every result's metric version:
``paper`` (the default, as above) and ``authors_code``, the authors' public code
(github.com/mariateresadrp99/Multimodal-Iconicity): s_i >= tau with tau = 0.70 for
still and 0.75 for moving references and CLIP ViT-B/16 (compute_CRA.py), DINOv2
grid cells embedded as the mean of all tokens and cut at W // 4 with the remainder
in the last cell (compute_VR.py; the backbone ``dinov2-base-mean-floor``).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from benchmark.metric_marks import ERROR_NOTE
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.metrics.crt_protocol import (  # noqa: F401 - the protocol's names, where readers of this module look
    CITATION,
    COMPARISONS,
    CRA_REFERENCE,
    CRT_FROM_MEANS,
    GRID,
    TAU,
    TAU_PATCH,
    VARIANTS,
    VR,
    Protocol,
    crt_from_means,
    protocol,
)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def recognition_scores(generated: np.ndarray, references: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, D) generated and (R, D) reference embeddings -> (s_i = max_j cos, argmax j) per generated image."""
    similarity = _unit(generated) @ _unit(references).T
    return similarity.max(axis=1).astype(np.float64), similarity.argmax(axis=1)


def recognised(scores: np.ndarray, tau: float = TAU, comparison: str = ">") -> np.ndarray:
    """1[s_i > tau] (CRT: De Rosa Palmini & Cetinic, arXiv:2511.11435, Eq. 1's indicator): a score equal to
    tau is not recognised; with ``comparison=">="``, 1[s_i >= tau] (the authors' code, compute_CRA.py,
    ``run_static_for_model`` and ``run_dynamic_for_model``): it is."""
    scores = np.asarray(scores)
    if comparison == ">":
        return scores > tau
    if comparison == ">=":
        return scores >= tau
    raise ValueError(f"comparison must be one of {', '.join(COMPARISONS)}, not {comparison!r}")


def patch_similarity(generated_patches: np.ndarray, reference_patches: np.ndarray, device: str | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(n, K, D) generated patches and (R, K, D) reference patches -> (s_k, match), both (n, K): each generated
    patch's maximum cosine to the pool of all R x K reference patches irrespective of position (Eq. 2), and the
    pool position r * K + k of that best reference patch.

    Exact, and the same bit for bit on every device: a float32 search (an exact faiss inner-product index on the
    CPU, chunked matrix products on a GPU) finds each patch's best pool patch, and every other within float32
    rounding of it; integer dot products of the vectors on a 2^-30 grid (``_exact_cosines``, within 3e-8 of the
    true cosine) decide between those, the lowest pool position winning a tie, and give s_k. ``device``:
    ``cuda`` or ``cpu``; by default a GPU when there is one and the search is large enough to gain from it
    (``GPU_MIN_WORK``).

    A generated patch with a non-finite embedding, or any patch when the pool has one, gets s_k = NaN and
    match -1 (faiss would give -3.4e38, or silently skip the pool's NaN patches).
    """
    n, k, d = generated_patches.shape
    pool, pool_finite = _unit_rows(reference_patches.reshape(-1, d))
    queries, finite = _unit_rows(generated_patches.reshape(-1, d))
    best = np.full(len(queries), np.nan)
    match = np.full(len(queries), -1, dtype=np.int64)
    finite &= bool(pool_finite.all())
    if finite.any() and len(pool):
        device = device or _search_device(int(finite.sum()) * len(pool) * d)
        search = _best_on_gpu if device.startswith("cuda") else _best_on_cpu
        best[finite], match[finite] = search(queries if finite.all() else queries[finite], pool, device)
    return best.reshape(n, k), match.reshape(n, k)


def _unit_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) -> (rows scaled to unit length as float32, whether each row's length is finite and not 0). Rows
    in chunks on threads (numpy releases the GIL), each row computed alone, so the result never depends on
    the chunking: the CPU and GPU searches start from the same bits."""
    from concurrent.futures import ThreadPoolExecutor

    x = np.ascontiguousarray(x, dtype=np.float32)
    unit, norms = np.empty_like(x), np.empty(len(x), dtype=np.float32)

    def scale(start: int) -> None:
        rows = slice(start, start + 8192)
        norms[rows] = np.linalg.norm(x[rows], axis=1)
        np.divide(x[rows], norms[rows, None], out=unit[rows])

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        starts = range(0, len(x), 8192)
        if len(starts) > 1:
            with ThreadPoolExecutor(min(8, len(starts), os.cpu_count() or 1)) as pool:
                list(pool.map(scale, starts))
        else:
            list(map(scale, starts))
    return unit, np.isfinite(norms) & (norms > 0)


# A search at least this large (queries x pool x dimension multiply-adds) goes to a GPU when one is present:
# below it, starting the transfer costs more than the CPU search.
GPU_MIN_WORK = 2 ** 30
_FIXED = 2 ** 30  # _exact_cosines' grid: unit-vector components as multiples of 2^-30


def _search_device(work: int) -> str:
    import torch

    return "cuda" if work >= GPU_MIN_WORK and torch.cuda.is_available() else "cpu"


def _margin(d: int) -> float:
    """Bound on how far the exact maximum (by ``_exact_cosines``) can sit below a float32 search's maximum:
    twice the error of a float32 dot product of unit vectors (gamma_d = d u, u = 2^-24; Higham, Accuracy and
    Stability of Numerical Algorithms, Eq. 3.5) plus twice ``_exact_cosines``' own (2^-31 x 2 sqrt(d))."""
    return 2.02 * d * 2.0 ** -24 + 4.04 * d ** 0.5 * 2.0 ** -31


def _fixed_point(x):
    """float32 unit-vector components -> int32 multiples of 2^-30: exact rounding (x 2^30 is exact in float32,
    and any float32 at or above 2^23 is already whole), so numpy and torch, CPU and GPU, agree."""
    return (x * np.float32(_FIXED)).round().astype(np.int32) if isinstance(x, np.ndarray) else \
        (x * _FIXED).round().int()


def _exact_cosines(queries: np.ndarray, pool: np.ndarray, query_rows: np.ndarray, pool_rows: np.ndarray
                   ) -> np.ndarray:
    """Cosines of the pairs (queries[query_rows[i]], pool[pool_rows[i]]) as integer dot products of the
    ``_fixed_point`` vectors, divided by 2^60: exact integer sums, so the same bit for bit on every device and
    in any order (``_exact_cosines_torch`` on a GPU), within 3e-8 of the float64 cosine at 768-d."""
    pool_fixed = _fixed_point(pool)
    out = np.empty(len(query_rows))
    for start in range(0, len(query_rows), 4096):
        rows = slice(start, start + 4096)
        dots = np.einsum("ij,ij->i", _fixed_point(queries[query_rows[rows]]), pool_fixed[pool_rows[rows]],
                         dtype=np.int64)
        out[rows] = dots / float(_FIXED) ** 2
    return out


def _exact_cosines_torch(queries, pool, query_rows, pool_rows):
    """``_exact_cosines`` on torch tensors (any device); the same integers, so the same float64 values."""
    import torch

    pool_fixed = _fixed_point(pool).long()
    out = torch.empty(len(query_rows), dtype=torch.float64, device=pool.device)
    for start in range(0, len(query_rows), 1 << 16):
        rows = slice(start, start + (1 << 16))
        dots = (_fixed_point(queries[query_rows[rows]]).long() * pool_fixed[pool_rows[rows]]).sum(dim=1)
        out[rows] = dots.double() / float(_FIXED) ** 2
    return out


def _first_best(n: int, query_rows: np.ndarray, pool_rows: np.ndarray, cosines: np.ndarray, winner: np.ndarray
                ) -> np.ndarray:
    """``winner`` with each query that has candidate pairs (query_rows, pool_rows, their exact cosines)
    replaced by its best candidate, the lowest pool row on a tie."""
    order = np.lexsort((pool_rows, -cosines, query_rows))  # per query: highest cosine, then lowest pool row
    query_rows, pool_rows = query_rows[order], pool_rows[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = query_rows[1:] != query_rows[:-1]
    winner = winner.copy()
    winner[query_rows[first]] = pool_rows[first]
    return winner


def _best_on_cpu(queries: np.ndarray, pool: np.ndarray, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """faiss's exact index for the two best of each query; a query whose second is within ``_margin`` of its
    first has its whole row recomputed to find every candidate, and the exact cosines decide."""
    import faiss

    index = faiss.IndexFlatIP(pool.shape[1])
    index.add(pool)
    top, rows = index.search(queries, min(2, len(pool)))
    winner = rows[:, 0].astype(np.int64)
    margin = _margin(pool.shape[1])
    unsure = np.flatnonzero(top[:, -1] >= top[:, 0] - margin) if len(pool) > 1 else np.empty(0, dtype=np.int64)
    query_rows, pool_rows = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for start in range(0, len(unsure), 4096):
        chunk = unsure[start:start + 4096]
        q, p = np.nonzero(queries[chunk] @ pool.T >= top[chunk, :1] - margin)
        query_rows.append(chunk[q])
        pool_rows.append(p.astype(np.int64))
    query_rows, pool_rows = np.concatenate(query_rows), np.concatenate(pool_rows)
    if len(query_rows):
        winner = _first_best(len(queries), query_rows, pool_rows,
                             _exact_cosines(queries, pool, query_rows, pool_rows), winner)
    return _exact_cosines(queries, pool, np.arange(len(queries)), winner), winner


def _best_on_gpu(queries: np.ndarray, pool: np.ndarray, device: str = "cuda") -> tuple[np.ndarray, np.ndarray]:
    """Chunked float32 matrix products on the GPU (full float32: TF32's error would exceed ``_margin``); every
    pool row within ``_margin`` of a query's maximum is a candidate, and the exact cosines decide as on the
    CPU."""
    import torch

    margin = _margin(pool.shape[1])
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        pool_t = torch.from_numpy(pool).to(device)
        queries_t = torch.from_numpy(queries).to(device)
        step = max(1, (1 << 26) // len(pool))  # queries per chunk: a 256 MiB similarity block
        winner = torch.empty(len(queries), dtype=torch.int64, device=device)
        query_rows, pool_rows = [], []
        for start in range(0, len(queries), step):
            similarity = queries_t[start:start + step] @ pool_t.T
            top, winner[start:start + step] = similarity.max(dim=1)
            close = similarity >= (top - margin)[:, None]
            unsure = torch.nonzero(close.sum(dim=1) > 1).flatten()
            if len(unsure):
                q, p = torch.nonzero(close[unsure], as_tuple=True)
                query_rows.append(unsure[q] + start)
                pool_rows.append(p)
        winner = winner.cpu().numpy()
        if query_rows:  # few: resolved on the CPU, as _best_on_cpu does
            query_rows, pool_rows = torch.cat(query_rows), torch.cat(pool_rows)
            cosines = _exact_cosines_torch(queries_t, pool_t, query_rows, pool_rows).cpu().numpy()
            winner = _first_best(len(queries), query_rows.cpu().numpy(), pool_rows.cpu().numpy(), cosines, winner)
        everyone = torch.arange(len(queries), device=device)
        cosines = _exact_cosines_torch(queries_t, pool_t, everyone, torch.from_numpy(winner).to(device))
        return cosines.cpu().numpy(), winner
    finally:
        torch.set_float32_matmul_precision(precision)


def visual_reuse(similarity: np.ndarray, tau_patch: float = TAU_PATCH) -> float | None:
    """VR over recognised images (Eq. 2): the share of their patches with s_k > tau_patch; None if none."""
    similarity = np.asarray(similarity)
    if similarity.size == 0:
        return None
    return float((similarity > tau_patch).mean())


def crt(cra: float, vr: float | None) -> float:
    """CRT = CRA x (1 - VR) (Eq. 3); with no recognised image CRA = 0 and so CRT = 0."""
    return 0.0 if vr is None else cra * (1.0 - vr)


def coverage(generated: np.ndarray, references: np.ndarray, tau: float = TAU, comparison: str = ">") -> float:
    """CRC: the share of reference depictions R_j with max_i cos(f(I_i), f(R_j)) > tau (or >=, ``recognised``)."""
    similarity = _unit(generated) @ _unit(references).T
    return float(recognised(similarity.max(axis=0), tau, comparison).mean())


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


def perturbation_deltas(before: pd.DataFrame, after: pd.DataFrame) -> dict:
    """Delta-CRA and delta-CRT of one model under a prompt perturbation (Sec. 5.4, Fig. 5), with 95% CIs over
    references of a mean of paired differences (``benchmark.stats.difference_ci``). Delta-CRT only over references
    still recognised after (CRA > 0).

    ``before`` and ``after``: columns prompt_id, cra, crt (per reference).
    """
    from benchmark.stats import difference_ci

    paired = before.merge(after, on="prompt_id", suffixes=("_before", "_after"))
    delta_cra = (paired["cra_after"] - paired["cra_before"]).to_numpy()
    kept = paired[paired["cra_after"] > 0]
    delta_crt = (kept["crt_after"] - kept["crt_before"]).to_numpy()
    result = {"references": len(paired), "delta_cra": float(delta_cra.mean()) if len(paired) else None,
              "delta_cra_ci": difference_ci(delta_cra), "references_recognised_after": len(kept),
              "delta_crt": float(delta_crt.mean()) if len(kept) else None,
              "delta_crt_ci": difference_ci(delta_crt)}
    return result


# --- adapters -------------------------------------------------------------------------------------
def _labelled(label: str, settings: Protocol) -> str:
    """A metric's label, marked when it is not scored under the paper's protocol."""
    return label if settings.variant == "paper" else f"{label} (authors' code)"


def reference_kind(images: pd.DataFrame, references: int) -> str:
    """``moving`` or ``still``: the dataset's ``kind`` of the prompt these image rows belong to, or without
    that column, moving iff the reference has several images (the authors' code's dynamic mode)."""
    if "kind" in images.columns and isinstance(images["kind"].iloc[0], str):
        return images["kind"].iloc[0]
    return "moving" if references > 1 else "still"


def analyse(inputs: Inputs, settings: Protocol) -> pd.DataFrame:
    """Per generated image: recognition score and best reference (CLIP), and for recognised images the
    patch reuse (DINO grid). Computed once per scoring run and shared by the iconicity metrics.

    ``error`` says why an image has neither (a non-finite recognition score or patch similarity): such an image
    is neither recognised nor unrecognised, and the per-reference values leave it out."""
    key = ("iconicity", settings)
    if key in inputs.memo:
        return inputs.memo[key]
    clip, dino, tau_patch, grid = settings.clip, settings.dino, settings.tau_patch, settings.grid
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
        kind = reference_kind(inputs.images.iloc[index], len(references))
        hit = recognised(scores, settings.threshold(kind), settings.comparison)
        similarity = np.full((len(index), grid * grid), np.nan)
        match = np.full((len(index), grid * grid), -1)
        if hit.any():
            similarity[hit], match[hit] = patch_similarity(grid_generated[index][hit], grid_references[prompt_id])
        for i, row in enumerate(index):
            reused = similarity[i] > tau_patch
            error = ("non-finite recognition similarity" if not np.isfinite(scores[i]) else
                     "non-finite patch similarity" if hit[i] and not np.isfinite(similarity[i]).all() else None)
            rows.append({"row": row, "prompt_id": prompt_id, "score": scores[i], "best_reference": int(best[i]),
                         "references": len(references), "recognised": bool(hit[i]), "error": error,
                         "vr_image": visual_reuse(similarity[i:i + 1], tau_patch) if hit[i] else np.nan,
                         "reused": np.flatnonzero(reused).tolist() if hit[i] else [],
                         "matches": [divmod(int(m), grid * grid) for m in match[i][reused]] if hit[i] else []})
    inputs.memo[key] = frame = pd.DataFrame(rows).set_index("row").sort_index()
    return frame


class _Iconicity(Metric):
    """Shared settings and needs of the iconicity metrics (a ``Protocol``: thresholds and backbones)."""

    name, label, higher, level, unit, equation = "", "", True, "prompt", "share", ""
    kind = "continuous"  # ``MetricInfo.kind``
    undefined = ""  # ``MetricInfo.undefined``

    def __init__(self, settings: Protocol = VARIANTS["paper"]):
        self.settings = settings
        clip, dino, grid = settings.clip, settings.dino, settings.grid
        needs = (Need(clip, "image"), Need(clip, "image", of="reference"), Need(dino, "grid", grid),
                 Need(dino, "grid", grid, of="reference"))
        self.info = MetricInfo(self.name, _labelled(self.label, settings), "iconicity", settings.version, self.higher,
                               self.unit, 0.0, 1.0, f"{CITATION}, {self.equation}", needs, self.level,
                               self.kind, self.undefined)

    def applies(self, inputs: Inputs) -> str | None:
        if inputs.reference_counts is None or not (inputs.reference_counts > 0).any():
            return "the dataset has no reference images (iconicity needs a dataset like iconic_references)"
        return None

    def per_reference(self, inputs: Inputs) -> pd.DataFrame:
        """Per reference (index prompt_id): cra, any_recognised, recognised (images), vr (over the recognised
        ones), references, and failed: its images the analysis could not use (``analyse``'s error)."""
        analysis = analyse(inputs, self.settings)
        return analysis.groupby("prompt_id", sort=True).agg(
            cra=("recognised", "mean"), any_recognised=("recognised", "any"), recognised=("recognised", "sum"),
            vr=("vr_image", "mean"), references=("references", "first"), failed=("error", "count"))

    @staticmethod
    def per_prompt_rows(table: pd.DataFrame, values, notes) -> pd.DataFrame:
        """The per-prompt rows of ``per_reference``'s ``table``: each reference's value and note, or, where an image
        failed, no value and an error note (``ERROR_NOTE``): a value over the images left is not the reference's."""
        failed = table["failed"].to_numpy() > 0
        return pd.DataFrame({"prompt_id": table.index, "value": np.where(failed, np.nan, np.asarray(values, float)),
                             "note": [ERROR_NOTE + "an image of the reference could not be analysed, and a value per "
                                      "reference needs every declared image" if bad else note
                                      for bad, note in zip(failed, notes)]})


class RecognitionPerImage(_Iconicity):
    """1 if the image is recognised, else 0 (Eq. 1's indicator). Failure (a declared image missing): 0."""

    name, label, level, equation = "cra_image", "CRA, share of images recognised (Eq. 1)", "image", "Eq. 1"
    kind = "rate"  # each image recognised or not

    def per_image(self, inputs: Inputs):
        analysis = analyse(inputs, self.settings)
        values = analysis["recognised"].astype(float).where(analysis["error"].isna())
        values = values.reindex(range(len(inputs.images))).to_numpy()
        notes = [ERROR_NOTE + r.error if isinstance(r.error, str) else None if pd.isna(r.score) else
                 f"best reference similarity {r.score:.3f}" + (f" (reference {r.best_reference + 1} of {r.references})"
                                                                 if r.references > 1 else "")
                 for r in analysis.reindex(range(len(inputs.images))).itertuples()]
        return values, notes


class RecognitionPerReference(_Iconicity):
    """1 if any image of the reference is recognised, else 0 (Table 1's CRA): an event, so a rate. Failure (not
    every declared image there): 0, the reference counted as refused."""

    (name, label), equation = CRA_REFERENCE, "Table 1"
    kind = "rate"  # 0 or 1 per reference

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        return self.per_prompt_rows(table, table["any_recognised"].astype(float),
                                    [f"{int(n)} of the images recognised" for n in table["recognised"]])


class VisualReuse(_Iconicity):
    """The share of the reference's recognised images' patches reused (Eq. 2); undefined where none is recognised.
    Failure (not every declared image there): 1, the reference counted as refused."""

    (name, label), higher, equation = VR, False, "Eq. 2"
    undefined = "no image of the reference is recognised (VR is over recognised images)"

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        return self.per_prompt_rows(table, table["vr"], [f"over {int(n)} recognised images" if n else
                                                         "no image recognised" for n in table["recognised"]])


class VisualReusePerImage(_Iconicity):
    """Each recognised image's share of reused patches, with the reused patches and their matches (for the
    side-by-side picture): ``detail`` = best_reference, reused patch indices, matched (reference, patch); undefined
    for an image not recognised. Failure (a declared image missing): 1, so that leaving out the recognised images
    that copy never lowers a prompt's mean."""

    name, label, higher, level, equation = ("vr_image", "share of a recognised image's patches reused", False,
                                            "image", "Eq. 2")
    undefined = "the image is not recognised (VR is over recognised images)"

    def per_image(self, inputs: Inputs):
        analysis = analyse(inputs, self.settings).reindex(range(len(inputs.images)))
        patches = self.settings.grid ** 2
        notes = [ERROR_NOTE + r.error if isinstance(r.error, str) else
                 f"{len(r.reused)} of {patches} patches reused" if r.recognised is True else None
                 for r in analysis.itertuples()]
        return analysis["vr_image"].where(analysis["error"].isna()).to_numpy(dtype=float), notes

    def details(self, inputs: Inputs) -> list[dict | None]:
        analysis = analyse(inputs, self.settings).reindex(range(len(inputs.images)))
        return [{"best_reference": r.best_reference, "reused": r.reused, "matches": r.matches,
                 "grid": self.settings.grid} if r.recognised is True and not isinstance(r.error, str) else None
                for r in analysis.itertuples()]


class Transformation(_Iconicity):
    """CRT = CRA x (1 - VR) per reference (Eq. 3), 0 where no image is recognised. Failure (not every declared
    image there): 0, the reference counted as refused."""

    name, label, equation = "crt", "CRT = CRA x (1 - VR), per reference (Eq. 3)", "Eq. 3"

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        table = self.per_reference(inputs)
        values = [crt(c, None if pd.isna(v) else v) for c, v in zip(table["cra"], table["vr"])]
        return self.per_prompt_rows(table, values, [None] * len(table))

    def derived(self, aggregates: list[dict], curves) -> list[dict]:
        """Table 1's CRT: Eq. 3 on the column means, cra_reference x (1 - vr), for every slice; 0 on a slice where
        no reference was recognised (VR undefined there: no row), so a model that recognised nothing ranks last at
        0, not out of the table. It has no CI here: a ranking bootstraps it over the slice's references
        (``benchmark.ranking``)."""
        by = {(r["metric"], r["slice"], r["slice_value"]): r for r in aggregates}
        rows = []
        for (metric, slice_name, slice_value), cra in by.items():
            if metric != "cra_reference" or slice_name == "prompt":
                continue
            vr = by.get(("vr", slice_name, slice_value), {}).get("value")  # none: no reference recognised here
            value = float(crt_from_means(cra["value"], np.nan if vr is None else vr))
            rows.append({"track": "iconicity", "metric": CRT_FROM_MEANS[0], "slice": slice_name,
                         "slice_value": slice_value, "value": value,
                         "ci_low": None, "ci_high": None, "n": cra["n"], "higher_is_better": True, "range_low": 0.0,
                         "range_high": 1.0,
                         "metric_version": self.info.version, "metric_label": _labelled(CRT_FROM_MEANS[1], self.settings)})
        return rows


class Coverage(_Iconicity):
    """The share of a moving reference's depictions matched by an image (App. 0.M): a share of events, so a rate.
    Failure (not every declared image there): 0, the reference counted as refused."""

    name, label, equation = "crc", "CRC, share of reference depictions matched (moving references)", "App. 0.M"
    kind = "rate"  # a share of depictions matched, as CRA per image is a share of images recognised

    def applies(self, inputs: Inputs) -> str | None:
        reason = super().applies(inputs)
        if reason is None and not (inputs.reference_counts > 1).any():
            return "no reference has several depictions (CRC is for moving-image references)"
        return reason

    def per_prompt(self, inputs: Inputs) -> pd.DataFrame:
        clip = self.settings.clip
        generated = inputs.features[Need(clip, "image")]
        references = inputs.references[Need(clip, "image", of="reference")]
        rows = []
        for prompt_id, index in inputs.images.groupby("prompt_id", sort=True).indices.items():
            refs = references.get(prompt_id)
            if refs is not None and len(refs) > 1:
                tau = self.settings.threshold(reference_kind(inputs.images.iloc[index], len(refs)))
                rows.append({"prompt_id": prompt_id, "value": coverage(generated[index], refs, tau,
                                                                       self.settings.comparison),
                             "note": f"{len(refs)} reference depictions"})
        return pd.DataFrame(rows, columns=["prompt_id", "value", "note"])


def metrics(settings: Protocol = VARIANTS["paper"]) -> list[Metric]:
    """The iconicity track's metrics under one protocol (``protocol``), sharing one analysis per scoring run."""
    return [cls(settings) for cls in (RecognitionPerImage, RecognitionPerReference, VisualReuse,
                                      VisualReusePerImage, Transformation, Coverage)]

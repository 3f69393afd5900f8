"""A synthetic leaderboard store at scale, for ``app_speed.py``.

    python benchmarks/make_store.py --out DIR [--submissions 1000] [--prompts 1000] [--images 10]
                                    [--per-image-for N] [--seed 0]

Writes what the harness and the app would leave behind after scoring many submissions
(``leaderboard.store`` layout): per submission ``results/<id>/`` with ``aggregates.parquet`` (tracks
awareness, iconicity and variability, 11 metrics; slices overall, country (8), continent, concept (3),
country_concept (24) and the per-prompt slice ``prompt``, plus the derived W1KP reusability row),
``curves.parquet`` (W1KP_k for k = 2..images, per prompt and the model's), ``run.json``,
``per_image.parquet`` and the seal a worker of the store writes (``leaderboard.seal``: the store's key, or
``CULTURELENS_SEAL_SECRET``); ``queue.sqlite`` with every submission FINISHED; the paper-reported rows.

Values are consistent the way the harness makes them: a prompt's value is the mean over its seeds, a slice's
the mean over its prompts; the 95% CI is a normal approximation (the harness's Student-t interval differs
only by its t quantile, which changes no size or query time). ``per_image.parquet`` is the bulk of the store
(83,000 rows, 1.4 MB per submission; written for all by default): ``--per-image-for N`` writes it only for
the first N (the app reads per-image rows only for the 1-4 submissions being compared).
Images themselves are not written (the paths in the rows point nowhere), nor submission folders.
Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from benchmark import __version__, results
from benchmark.datasets import cube_1k
from benchmark.run_record import BackboneUsed, RunRecord
from leaderboard import seal
from leaderboard.queue import open_queue
from leaderboard.store import Store

COUNTRIES = {  # CUBE's countries: name -> (ISO code, continent)
    "Brazil": ("BR", "South America"), "France": ("FR", "Europe"), "India": ("IN", "Asia"),
    "Italy": ("IT", "Europe"), "Japan": ("JP", "Asia"), "Nigeria": ("NG", "Africa"),
    "Turkey": ("TR", "Asia"), "United States": ("US", "North America"),
}
CONCEPTS = cube_1k.CONCEPTS
DATASET = f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG}:test@3f9c2a1b7d4e"
CLIP = "clip-vit-b-32=openai/clip-vit-base-patch32"
DINO = "dinov2-base=facebook/dinov2-base"
DREAMSIM = "dreamsim=ssundaram/dreamsim-ensemble"
HPS = "hps-v2=xswu/HPSv2"

# name, label, track, higher_is_better, level, backbone, kind of value (mean of the model's base, spread)
METRICS = [
    ("clip_cosine", "CLIP cosine (prompt, image)", "awareness", True, "image", CLIP, ("normal", 0.29, 0.02)),
    ("clip_score", "CLIPScore (2.5 max(cos, 0))", "awareness", True, "image", CLIP, ("clipscore",)),
    ("artifact_top1", "Artifact recognised (top-1, zero-shot)", "awareness", True, "image", CLIP,
     ("bernoulli", 0.45, 0.15)),
    ("artifact_top5", "Artifact recognised (top-5, zero-shot)", "awareness", True, "image", CLIP,
     ("bernoulli", 0.75, 0.10)),
    ("country_top1", "Country recognised (zero-shot)", "awareness", True, "image", CLIP, ("bernoulli", 0.6, 0.12)),
    ("hps_v2", "HPS v2 quality", "awareness", True, "image", HPS, ("normal", 0.27, 0.015)),
    ("cra_image", "CRA per image, cos(image, reference) >= 0.7 (Eq. 1)", "iconicity", True, "image",
     f"{CLIP}", ("bernoulli", 0.5, 0.15)),
    ("vr_image", "share of a recognised image's patches reused", "iconicity", False, "image", f"{CLIP}+{DINO}",
     ("beta", 0.3, 0.1)),
    ("cra_reference", "CRA per reference, share recognised by >= 1 image (Table 1)", "iconicity", True, "prompt",
     CLIP, ("any", "cra_image")),
    ("crt", "CRT = CRA x (1 - VR), recognised and realised anew (Eq. 3)", "iconicity", True, "prompt",
     f"{CLIP}+{DINO}", ("crt",)),
    ("w1kp", "W1KP score, 1 - mean normalised pair distance", "variability", False, "prompt", DREAMSIM,
     ("normal", 0.55, 0.12)),
]
PROMPTS_SEED = 20260101  # the synthetic dataset's: every store draws its prompts' countries and concepts alike
# Each metric's declared range (``MetricInfo.low``, ``high``), as the harness records it.
RANGES = {"clip_cosine": (-1.0, 1.0), "clip_score": (0.0, 2.5), "artifact_top1": (0.0, 1.0),
          "artifact_top5": (0.0, 1.0), "country_top1": (0.0, 1.0), "hps_v2": (-1.0, 1.0), "cra_image": (0.0, 1.0),
          "vr_image": (0.0, 1.0), "cra_reference": (0.0, 1.0), "crt": (0.0, 1.0), "w1kp": (0.0, 1.0)}

# Base models: name, Hub id, type, size (B params), revisions; fine-tunes of the open ones fill the rest.
BASES = [
    ("Stable Diffusion 1.5", "stable-diffusion-v1-5/stable-diffusion-v1-5", "open", 0.98, 2),
    ("Stable Diffusion 2.1", "stabilityai/stable-diffusion-2-1", "open", 1.3, 2),
    ("SDXL 1.0", "stabilityai/stable-diffusion-xl-base-1.0", "open", 3.5, 3),
    ("SDXL Turbo", "stabilityai/sdxl-turbo", "open", 3.5, 1),
    ("Stable Diffusion 3 Medium", "stabilityai/stable-diffusion-3-medium-diffusers", "open", 2.0, 2),
    ("Stable Diffusion 3.5 Large", "stabilityai/stable-diffusion-3.5-large", "open", 8.1, 2),
    ("FLUX.1 [dev]", "black-forest-labs/FLUX.1-dev", "open", 12.0, 3),
    ("FLUX.1 [schnell]", "black-forest-labs/FLUX.1-schnell", "open", 12.0, 2),
    ("PixArt-Σ", "PixArt-alpha/PixArt-Sigma-XL-2-1024-MS", "open", 0.6, 2),
    ("Playground v2.5", "playgroundai/playground-v2.5-1024px-aesthetic", "open", 2.6, 1),
    ("Kandinsky 3", "kandinsky-community/kandinsky-3", "open", 11.9, 1),
    ("HunyuanDiT 1.2", "Tencent-Hunyuan/HunyuanDiT-v1.2-Diffusers", "open", 1.5, 2),
    ("Sana 1.6B", "Efficient-Large-Model/Sana_1600M_1024px_diffusers", "open", 1.6, 2),
    ("Lumina-Next", "Alpha-VLLM/Lumina-Next-SFT-diffusers", "open", 2.0, 1),
    ("DALL·E 3", "openai/dall-e-3", "closed", None, 2),
    ("Imagen 3", "google/imagen-3", "closed", None, 2),
    ("Imagen 4", "google/imagen-4", "closed", None, 1),
    ("Midjourney v6", "midjourney/v6", "closed", None, 2),
    ("GPT Image 1", "openai/gpt-image-1", "closed", None, 1),
    ("Ideogram 2.0", "ideogram/ideogram-2", "closed", None, 1),
]
OWNERS = ["lab-ai", "cultural-eval", "sd-community", "anon-research", "jdoe", "mkumar", "aokafor", "lchen",
          "fsilva", "yamamoto", "ergun", "dupont"]
FINETUNE_TOPICS = ["cuisine", "landmarks", "art", "africa", "asia", "latam", "heritage", "street-food", "photoreal",
                   "anime", "portrait", "architecture", "painting", "multicultural", "dpo", "lora"]


def prompt_table(n_prompts: int) -> dict[str, np.ndarray]:
    """CUBE-like prompts: a country and a concept each, ids cube-00001...; the same for every store of as many
    prompts (its own seed): the results of one protocol answer one dataset, as a dataset revision pins it."""
    rng = np.random.default_rng(PROMPTS_SEED)
    names = list(COUNTRIES)
    country = np.array(names)[rng.integers(0, len(names), n_prompts)]
    concept = np.array(CONCEPTS)[rng.integers(0, len(CONCEPTS), n_prompts)]
    return {
        "prompt_id": np.array([f"cube-{i:05d}" for i in range(n_prompts)]),
        "country": country,
        "country_code": np.array([COUNTRIES[c][0] for c in country]),
        "continent": np.array([COUNTRIES[c][1] for c in country]),
        "concept": concept,
    }


def models(n: int, rng: np.random.Generator) -> list[dict]:
    """n model submissions: every base model at each of its revisions, then fine-tunes of the open bases
    (some submitted again at a later revision: same name, different revision)."""
    out = []
    for name, hub_id, kind, size, revisions in BASES:
        for r in range(revisions):
            out.append({"model": name, "model_id": hub_id, "model_type": kind, "parameters_billions": size,
                        "model_revision": hashlib.sha1(f"{hub_id}@{r}".encode()).hexdigest()})
    opens = [b for b in BASES if b[2] == "open"]
    while len(out) < n:
        base = opens[rng.integers(len(opens))]
        owner = OWNERS[rng.integers(len(OWNERS))]
        topic = FINETUNE_TOPICS[rng.integers(len(FINETUNE_TOPICS))]
        short = base[1].split("/")[1].split("-diffusers")[0][:24]
        name = f"{owner}/{short}-{topic}-v{rng.integers(1, 6)}"
        revisions = 2 if rng.random() < 0.1 else 1
        for r in range(revisions):
            out.append({"model": name, "model_id": name, "model_type": "open" if rng.random() < 0.9 else None,
                        "parameters_billions": base[3] if rng.random() < 0.8 else None,
                        "model_revision": hashlib.sha1(f"{name}@{r}".encode()).hexdigest()})
    order = rng.permutation(len(out))[:n]
    return [out[i] for i in order]


def image_values(rng: np.random.Generator, quality: float, prompt_effect: np.ndarray, n_seeds: int
                 ) -> dict[str, np.ndarray]:
    """Per metric, (prompts, seeds) values for image-level metrics or (prompts,) for prompt-level ones."""
    n = len(prompt_effect)
    out = {}
    for name, _, _, _, level, _, spec in METRICS:
        kind = spec[0]
        if kind == "normal":
            base = spec[1] + spec[2] * (quality + prompt_effect)
            shape = (n, n_seeds) if level == "image" else (n,)
            noise = rng.normal(0, spec[2] * 0.5, shape)
            out[name] = (base[:, None] if level == "image" else base) + noise
        elif kind == "bernoulli":
            p = np.clip(spec[1] + spec[2] * (quality + prompt_effect), 0.02, 0.98)
            out[name] = (rng.random((n, n_seeds)) < p[:, None]).astype(np.float64)
        elif kind == "beta":
            mean = np.clip(spec[1] - spec[2] * quality, 0.05, 0.9)
            out[name] = rng.beta(mean * 8, (1 - mean) * 8, (n, n_seeds))
        elif kind == "clipscore":
            out[name] = 2.5 * np.maximum(out["clip_cosine"], 0)
        elif kind == "any":
            out[name] = out[spec[1]].max(axis=1)
        elif kind == "crt":
            out[name] = out["cra_image"].mean(axis=1) * (1 - out["vr_image"].mean(axis=1))
    return out


def _ci(mean: np.ndarray, sd: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = np.where(n > 1, 1.96 * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return mean - half, mean + half


def aggregate_rows(values: dict[str, np.ndarray], groups: dict[str, tuple[np.ndarray, np.ndarray]],
                   prompt_ids: np.ndarray) -> dict[str, list | np.ndarray]:
    """Columns metric, slice, slice_value, value, ci_low, ci_high, n of every metric and slice.

    ``groups``: slice name -> (value names, per prompt the index of its value)."""
    cols = {k: [] for k in ("metric", "slice", "slice_value", "value", "ci_low", "ci_high", "n")}
    n_prompts = len(prompt_ids)
    for name, *_ in METRICS:
        v = values[name]
        per_prompt = v.mean(axis=1) if v.ndim == 2 else v
        for slice_name, (labels, index) in groups.items():
            count = np.bincount(index, minlength=len(labels))
            total = np.bincount(index, per_prompt, minlength=len(labels))
            squares = np.bincount(index, per_prompt ** 2, minlength=len(labels))
            mean = total / np.maximum(count, 1)
            sd = np.sqrt(np.maximum(squares / np.maximum(count, 1) - mean ** 2, 0) * count / np.maximum(count - 1, 1))
            low, high = _ci(mean, sd, count)
            keep = count > 0
            k = int(keep.sum())
            cols["metric"] += [name] * k
            cols["slice"] += [slice_name] * k
            cols["slice_value"] += list(labels[keep])
            cols["value"].append(mean[keep]), cols["ci_low"].append(low[keep]), cols["ci_high"].append(high[keep])
            cols["n"].append(count[keep])
        if v.ndim == 2:  # slice 'prompt': the mean over seeds with a CI over them
            sd, n = v.std(axis=1, ddof=1), np.full(n_prompts, v.shape[1])
            low, high = _ci(per_prompt, sd, n)
        else:
            n, low, high = np.ones(n_prompts, dtype=np.int64), np.full(n_prompts, np.nan), np.full(n_prompts, np.nan)
        cols["metric"] += [name] * n_prompts
        cols["slice"] += ["prompt"] * n_prompts
        cols["slice_value"] += list(prompt_ids)
        cols["value"].append(per_prompt), cols["ci_low"].append(low), cols["ci_high"].append(high)
        cols["n"].append(n)
    for key in ("value", "ci_low", "ci_high", "n"):
        cols[key] = np.concatenate(cols[key])
    return cols


def synthetic_protocol(backbone: str, n_seeds: int) -> dict:
    """The protocol columns the harness would write for a metric of ``backbone`` (ids joined by '+'), version 1."""
    return results.protocol_columns({"dataset": DATASET.split("@")[0], "images_per_prompt": n_seeds,
                                     "missing_images": results.MISSING_AS_FAILURES, "metric_version": "1",
                                     "backbones": [f"{b}@main" for b in backbone.split("+")]})


def _constant(value, n: int, kind: pa.DataType) -> pa.Array:
    return pa.array([value] * n, type=kind) if n else pa.array([], type=kind)


class Writer:
    """Writes one results folder per submission with pyarrow directly (the harness's schemas)."""

    def __init__(self, prompts: dict[str, np.ndarray], n_seeds: int):
        self.prompts, self.n_seeds = prompts, n_seeds
        n = len(prompts["prompt_id"])
        self.n = n
        # Slices: name -> (labels, per prompt its label's index)
        self.groups = {"overall": (np.array(["all"]), np.zeros(n, dtype=np.int64))}
        for column in ("country", "continent", "concept"):
            labels, index = np.unique(prompts[column], return_inverse=True)
            self.groups[column] = (labels, index)
        cross = np.char.add(np.char.add(prompts["country"].astype(str), " / "), prompts["concept"].astype(str))
        labels, index = np.unique(cross, return_inverse=True)
        self.groups["country_concept"] = (labels, index)
        # Per-image layout: image-level metrics have prompts x seeds rows, prompt-level ones a row per prompt.
        self.image_prompt = np.repeat(np.arange(n), n_seeds)
        self.image_seed = np.tile(np.arange(n_seeds), n)
        self.paths = pa.array([f"images/{p}/{s}.png" for p, s in zip(prompts["prompt_id"][self.image_prompt],
                                                                      self.image_seed)])
        self.prompt_columns = {c: pa.array(prompts[c]) for c in
                               ("prompt_id", "country", "country_code", "continent", "concept")}

    def aggregates(self, sid: str, model: dict, values: dict, context: dict, reusability: float | None) -> pa.Table:
        cols = aggregate_rows(values, self.groups, self.prompts["prompt_id"])
        rows = len(cols["metric"])
        metric = pa.array(cols["metric"])
        which = pc.index_in(metric, pa.array([m[0] for m in METRICS]))
        label, track, higher, backbone = (pc.take(pa.array([m[i] for m in METRICS]), which) for i in (1, 2, 3, 5))
        protocols = [synthetic_protocol(m[5], self.n_seeds) for m in METRICS]
        protocol, protocol_id = (pc.take(pa.array([p[k] for p in protocols]), which) for k in ("protocol", "protocol_id"))
        data = {
            "provenance": _constant("scored", rows, pa.string()), "submission_id": _constant(sid, rows, pa.string()),
            "model": _constant(model["model"], rows, pa.string()),
            "model_id": _constant(model["model_id"], rows, pa.string()),
            "model_type": _constant(model["model_type"], rows, pa.string()),
            "model_revision": _constant(model["model_revision"], rows, pa.string()),
            "parameters_billions": _constant(model["parameters_billions"], rows, pa.float64()),
            "track": track, "metric": metric, "metric_label": label,
            "metric_version": _constant("1", rows, pa.string()),
            "higher_is_better": higher, "range_low": pc.take(pa.array([RANGES[m[0]][0] for m in METRICS]), which),
            "range_high": pc.take(pa.array([RANGES[m[0]][1] for m in METRICS]), which),
            "value_kind": _constant("continuous", rows, pa.string()),
            "slice": pa.array(cols["slice"]), "slice_value": pa.array(cols["slice_value"]),
            "value": pa.array(cols["value"]), "ci_low": pa.array(cols["ci_low"], from_pandas=True),
            "ci_high": pa.array(cols["ci_high"], from_pandas=True), "n": pa.array(cols["n"], pa.int64()),
            "excluded": _constant(0, rows, pa.int64()),
            "citation": _constant(None, rows, pa.string()), "source_table": _constant(None, rows, pa.string()),
            "harness_version": _constant(__version__, rows, pa.string()), "backbone": backbone,
            "backbone_revision": _constant("main", rows, pa.string()),
            "dataset": _constant(DATASET, rows, pa.string()), "seeds": _constant(context["seeds"], rows, pa.string()),
            "protocol": protocol, "protocol_id": protocol_id,
            "scored_at": _constant(context["scored_at"], rows, pa.string()),
        }
        table = pa.table(data, schema=results.AGGREGATE)
        derived = {**{k: v[0].as_py() for k, v in data.items() if k not in ("metric", "track", "metric_label",
                                                                            "higher_is_better", "slice",
                                                                            "slice_value", "value", "ci_low",
                                                                            "ci_high", "n", "backbone",
                                                                            "backbone_revision", "protocol",
                                                                            "protocol_id")},
                   **synthetic_protocol(DREAMSIM, self.n_seeds),
                   "track": "variability", "metric": "w1kp_reusability", "slice": "overall", "slice_value": "all",
                   "value": reusability, "n": self.n, "higher_is_better": True, "backbone": DREAMSIM,
                   "backbone_revision": "main",
                   "metric_label": f"W1KP reusability: seeds until W1KP_k >= 0.85 (empty: not within {self.n_seeds})"}
        return pa.concat_tables([table, results.table([derived], results.AGGREGATE)])

    def per_image(self, sid: str, model: dict, values: dict, rng: np.random.Generator) -> pa.Table:
        n_images = self.n * self.n_seeds
        sha = rng.bytes(32 * n_images).hex()
        sha = pa.array([sha[i * 64:(i + 1) * 64] for i in range(n_images)])
        parts = []
        image_index = pa.array(self.image_prompt)
        for name, _, track, _, level, _, _ in METRICS:
            v = values[name]
            if level == "image":
                take, rows, seed = image_index, n_images, pa.array(self.image_seed, pa.int64())
                path, digest, value = self.paths, sha, v.reshape(-1)
            else:  # prompt-level metrics: one row per prompt, no seed or image (as the harness writes them)
                take, rows, seed = pa.array(np.arange(self.n)), self.n, _constant(None, self.n, pa.int64())
                path, digest, value = _constant(None, self.n, pa.string()), _constant(None, self.n, pa.string()), v
            note = None
            if name == "w1kp":
                note = pa.array(np.where(v >= 0.85, "high", np.where(v >= 0.4, "medium", "low")))
                note = pc.binary_join_element_wise(note, f"similarity across {self.n_seeds} seeds", " ")
            data = {
                "submission_id": _constant(sid, rows, pa.string()),
                "model": _constant(model["model"], rows, pa.string()),
                "prompt_id": pc.take(self.prompt_columns["prompt_id"], take), "seed": seed, "image_path": path,
                "image_sha256": digest,
                **{c: pc.take(self.prompt_columns[c], take) for c in ("country", "country_code", "continent",
                                                                      "concept")},
                "domain": _constant(None, rows, pa.string()), "kind": _constant(None, rows, pa.string()),
                "modality": _constant(None, rows, pa.string()), "track": _constant(track, rows, pa.string()),
                "metric": _constant(name, rows, pa.string()), "value": pa.array(value, pa.float64()),
                "note": note if note is not None else _constant(None, rows, pa.string()),
                "detail": _constant(None, rows, pa.string()), "error": _constant(None, rows, pa.string()),
            }
            parts.append(pa.table(data, schema=results.PER_IMAGE))
        return pa.concat_tables(parts)

    def curves(self, sid: str, model: dict, rng: np.random.Generator, w1kp: np.ndarray) -> tuple[pa.Table, float]:
        """W1KP_k per prompt for k = 2..seeds (falling from the prompt's W1KP towards 1 - E[min d*]) and the
        model's mean curve; returns the table and the reusability (first k whose mean reaches 0.85)."""
        ks = np.arange(2, self.n_seeds + 1, dtype=np.float64)
        eta = 1 - w1kp  # mean normalised distance; the expected minimum over k falls with k
        per_prompt = 1 - eta[:, None] * (2 / (ks[None, :])) ** 0.7
        per_prompt = np.clip(per_prompt + rng.normal(0, 0.01, per_prompt.shape), 0, 1)
        se = np.full(per_prompt.shape, 0.01)
        mean = per_prompt.mean(axis=0)
        sd = per_prompt.std(axis=0, ddof=1)
        low, high = _ci(mean, sd, np.full(len(ks), self.n))
        reached = np.nonzero(mean >= 0.85)[0]
        reusability = float(ks[reached[0]]) if len(reached) else None
        rows = per_prompt.size
        prompt_table = pa.table({
            "submission_id": _constant(sid, rows, pa.string()), "model": _constant(model["model"], rows, pa.string()),
            "metric": _constant("w1kp", rows, pa.string()),
            "prompt_id": pa.array(np.repeat(self.prompts["prompt_id"], len(ks))),
            "x": pa.array(np.tile(ks, self.n)), "value": pa.array(per_prompt.reshape(-1)),
            "standard_error": pa.array(se.reshape(-1)), "ci_low": _constant(None, rows, pa.float64()),
            "ci_high": _constant(None, rows, pa.float64()), "n": _constant(None, rows, pa.int64()),
        }, schema=results.CURVES)
        k = len(ks)
        model_table = pa.table({
            "submission_id": _constant(sid, k, pa.string()), "model": _constant(model["model"], k, pa.string()),
            "metric": _constant("w1kp", k, pa.string()), "prompt_id": _constant(None, k, pa.string()),
            "x": pa.array(ks), "value": pa.array(mean), "standard_error": _constant(None, k, pa.float64()),
            "ci_low": pa.array(low), "ci_high": pa.array(high), "n": _constant(self.n, k, pa.int64()),
        }, schema=results.CURVES)
        return pa.concat_tables([prompt_table, model_table]), reusability


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="store folder to create (must not exist)")
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--images", type=int, default=10, help="images (seeds) per prompt")
    parser.add_argument("--per-image-for", type=int, default=-1,
                        help="write per_image.parquet only for the first N submissions (default -1: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: pass a new folder")
    if args.images < 2:
        raise SystemExit("--images must be at least 2 (W1KP compares seeds)")
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    store = Store(args.out)
    reported = store.seed_reported()
    prompts = prompt_table(args.prompts)
    prompt_effect = rng.normal(0, 0.6, args.prompts)
    chosen = models(args.submissions, rng)
    writer = Writer(prompts, args.images)
    per_image_for = args.submissions if args.per_image_for < 0 else min(args.per_image_for, args.submissions)
    first = datetime(2025, 1, 6, tzinfo=timezone.utc)
    span = (datetime(2026, 11, 20, tzinfo=timezone.utc) - first).total_seconds()
    stamps = sorted(first + timedelta(seconds=float(s)) for s in rng.uniform(0, span, args.submissions))
    seeds = ",".join(map(str, range(args.images)))
    records = []
    sizes = {"per_image": 0, "aggregates": 0, "curves": 0}
    for i, (model, stamp) in enumerate(tqdm(list(zip(chosen, stamps)), desc="submissions", unit="sub")):
        content_hash = hashlib.sha256(f"{args.seed}:{i}:{model['model_id']}@{model['model_revision']}".encode())
        sid = f"{stamp:%Y%m%dT%H%M%S}-{content_hash.hexdigest()[:10]}-{rng.bytes(2).hex()}"
        scored = stamp + timedelta(minutes=float(rng.uniform(20, 180)))
        context = {"seeds": seeds, "scored_at": scored.isoformat(timespec="seconds")}
        quality = rng.normal(0, 1)
        values = image_values(rng, quality, prompt_effect, args.images)
        folder = store.results / sid
        tmp = store.results / f".{sid}.tmp"
        tmp.mkdir()
        curves, reusability = writer.curves(sid, model, rng, values["w1kp"])
        pq.write_table(writer.aggregates(sid, model, values, context, reusability), tmp / "aggregates.parquet")
        pq.write_table(curves, tmp / "curves.parquet")
        if i < per_image_for:
            pq.write_table(writer.per_image(sid, model, values, rng), tmp / "per_image.parquet")
        run = RunRecord(submission_id=sid, harness_version=__version__,
                        backbones={b.split("=")[0]: BackboneUsed(uid=b.split("=")[1], revision="main", preprocess="1")
                                   for b in (CLIP, DINO, DREAMSIM, HPS)},
                        metrics={m[0]: "1" for m in METRICS}, skipped={}, dataset=DATASET,
                        seeds=list(range(args.images)), images=args.prompts * args.images, missing=0,
                        embeddings_cached=0, embeddings_computed=args.prompts * args.images * 3,
                        scored_at=context["scored_at"], synthetic="benchmarks/make_store.py")
        (tmp / "run.json").write_text(run.to_json(), encoding="utf-8")
        seal.seal_folder(tmp, store.results_folders.keys)  # as the store's worker seals what it writes
        for name in sizes:
            path = tmp / f"{name}.parquet"
            sizes[name] += path.stat().st_size if path.exists() else 0
        tmp.rename(folder)
        records.append((sid, content_hash.hexdigest(), OWNERS[i % len(OWNERS)], model, stamp, scored))
    queue_started = time.perf_counter()
    queue = open_queue(store.root / "queue.sqlite")
    for sid, digest, owner, model, _, _ in records:
        queue.add(id=sid, content_hash=f"sha256:{digest}", owner=owner, model=model["model"],
                  model_id=model["model_id"], model_revision=model["model_revision"],
                  dataset=f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG}:test")
    with sqlite3.connect(store.root / "queue.sqlite") as db:
        db.executemany("UPDATE submissions SET state = 'FINISHED', created_at = ?, started_at = ?, finished_at = ?,"
                       " updated_at = ?, attempts = 1, progress = 1, message = ? WHERE id = ?",
                       [(c.isoformat(timespec="seconds"), c.isoformat(timespec="seconds"),
                         s.isoformat(timespec="seconds"), s.isoformat(timespec="seconds"),
                         f"scored {args.prompts * args.images} images", sid) for sid, _, _, _, c, s in records])
    elapsed = time.perf_counter() - started
    total = sum(p.stat().st_size for p in store.root.rglob("*") if p.is_file())
    mb = 1024 ** 2
    print(f"store {store.root}: {args.submissions} submissions x {args.prompts} prompts x {args.images} images, "
          f"{len(METRICS)} metrics; {reported} reported rows")
    print(f"per_image.parquet written for {per_image_for} of {args.submissions} submissions"
          + ("" if per_image_for == args.submissions else " (the rest have none: the app reads per-image rows "
             "only for the submissions being compared)"))
    for name, size in sizes.items():
        count = per_image_for if name == "per_image" else args.submissions
        print(f"  {name}.parquet: {size / mb:,.1f} MB in {count} files ({size / max(count, 1) / mb:.2f} MB each)")
    print(f"  total on disk {total / mb:,.1f} MB; {elapsed:.1f} s (queue {time.perf_counter() - queue_started:.1f} s)")


if __name__ == "__main__":
    main()

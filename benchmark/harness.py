"""Score a validated submission: decode each image once, embed it once, run the metrics, aggregate.

This is the skeleton the Harness issue grows (backbone registry, embedding
cache, metric declarations). Today it runs one track's metrics: prompt-image
alignment with CLIP (``benchmark.metrics.alignment``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from benchmark import __version__
from benchmark.aggregate import aggregate
from benchmark.datasets.prompts import PromptSet
from benchmark.encoders.open_clip import ClipEncoder
from benchmark.metrics.alignment import CLIP_COSINE, CLIP_SCORE, clip_score, cosine_similarity
from benchmark.submission.manifest import Manifest

Progress = Callable[[float, str], None]
TRUNCATED_NOTE = "prompt longer than CLIP's {n}-token context: scored on its first {n} tokens"


class _Images(torch.utils.data.Dataset):
    """Decodes and preprocesses images in DataLoader workers."""

    def __init__(self, folder: Path, paths: list[str], transform):
        self.folder, self.paths, self.transform = folder, paths, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        with Image.open(self.folder / self.paths[index]) as image:
            return self.transform(image.convert("RGB"))


@dataclass
class Scores:
    per_image: pd.DataFrame
    aggregates: list[dict]
    run: dict


def embed_images(encoder: ClipEncoder, folder: Path, paths: list[str], *, batch_size: int, num_workers: int,
                 progress: Progress | None = None) -> np.ndarray:
    loader = torch.utils.data.DataLoader(_Images(folder, paths, encoder.preprocess), batch_size=batch_size,
                                         num_workers=num_workers, shuffle=False)
    chunks, done = [], 0
    for pixels in loader:
        chunks.append(encoder.encode_images(pixels))
        done += len(pixels)
        if progress:
            progress(done / len(paths), f"embedded {done}/{len(paths)} images")
    return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)


def score(folder: Path, manifest: Manifest, prompts: PromptSet, images: pd.DataFrame, encoder: ClipEncoder, *,
          submission_id: str, batch_size: int = 32, num_workers: int = 0,
          progress: Progress | None = None) -> Scores:
    """Score the images of one submission (``images``: prompt_id, seed, path, sha256 per image)."""
    images = images.sort_values(["prompt_id", "seed"]).reset_index(drop=True)
    prompt_ids = sorted(images["prompt_id"].unique())
    texts = prompts.table.loc[prompt_ids, "prompt"].tolist()
    text_embeddings, truncated = [], []
    for start in range(0, len(texts), batch_size):
        emb, cut = encoder.encode_texts(texts[start:start + batch_size])
        text_embeddings.append(emb)
        truncated += cut
    text_by_prompt = dict(zip(prompt_ids, np.concatenate(text_embeddings)))
    truncated_by_prompt = dict(zip(prompt_ids, truncated))

    image_embeddings = embed_images(encoder, folder, images["path"].tolist(), batch_size=batch_size,
                                    num_workers=num_workers, progress=progress)
    paired_text = np.stack([text_by_prompt[p] for p in images["prompt_id"]])
    cosine = cosine_similarity(image_embeddings, paired_text)

    base = images.rename(columns={"path": "image_path", "sha256": "image_sha256"})[
        ["prompt_id", "seed", "image_path", "image_sha256"]]
    slices = prompts.table.reindex(columns=["country", "country_code", "continent", "concept"])
    base = base.join(slices, on="prompt_id")
    base.insert(0, "model", manifest.model.name)
    base.insert(0, "submission_id", submission_id)
    note = [TRUNCATED_NOTE.format(n=encoder.context_length) if truncated_by_prompt[p] else None
            for p in base["prompt_id"]]
    per_image = pd.concat([
        base.assign(track=info.track, metric=info.name, value=values, note=note)
        for info, values in ((CLIP_COSINE, cosine), (CLIP_SCORE, clip_score(cosine)))
    ], ignore_index=True)

    scored_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    run = {
        "submission_id": submission_id,
        "harness_version": __version__,
        "backbone": encoder.spec.id,
        "backbone_revision": encoder.revision,
        "dataset": f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}",
        "seeds": list(manifest.seeds),
        "images": len(images),
        "missing": len(manifest.missing),
        "prompts_truncated": int(sum(truncated)),
        "scored_at": scored_at,
    }
    labels = {m.name: m for m in (CLIP_COSINE, CLIP_SCORE)}
    aggregates = [{
        **row,
        "provenance": "scored",
        "submission_id": submission_id,
        "model": manifest.model.name,
        "model_id": manifest.model.id,
        "model_type": manifest.model.type,
        "metric_label": labels[row["metric"]].label,
        "higher_is_better": labels[row["metric"]].higher_is_better,
        **{k: run[k] for k in ("harness_version", "backbone", "backbone_revision", "dataset", "scored_at")},
    } for row in aggregate(per_image)]
    return Scores(per_image, aggregates, run)

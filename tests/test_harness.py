"""The harness: decode once, embed once per backbone, cache, crash-resume, and sharding over processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import harness
from benchmark.cache import EmbeddingCache
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts
from benchmark.encoders import load_backbone
from benchmark.features import embeddings
from benchmark.metrics.alignment import ClipCosine, ClipScore
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.scoring_options import ScoringOptions
from benchmark.submission import stage
from tests.helpers import culturelens, tiny_cube
from culturelens.testing.submissions import make_submission


class GridSpread(Metric):
    """A test metric on DINO 4x4-grid features: mean cosine of each tile to the image's first tile."""

    info = MetricInfo("grid_spread", "grid spread", "test", "1", True, "cosine", -1.0, 1.0, "test",
                      (Need("dinov2-base", "grid"),))

    def per_image(self, inputs: Inputs):
        grid = inputs.features[Need("dinov2-base", "grid")]
        return np.einsum("nkd,nd->n", grid, grid[:, 0]) / grid.shape[1], [None] * len(grid)


@pytest.fixture(scope="module")
def submission(tmp_path_factory, tiny_upstream):
    """A staged submission (6 prompts x 3 seeds) and its dataset."""
    root = tmp_path_factory.mktemp("harness")
    datasets_root = root / "datasets"
    tiny_cube(datasets_root, tiny_upstream)

    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=datasets_root)

    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table.index)
    folder = make_submission(root / "source", ids, seeds=(0, 1, 2))
    report = stage(folder, root / "staging", loader)
    assert report.ok, report.errors
    staged = report.keep(root / "staged")
    return staged, report.manifest, report.prompts, datasets_root, folder


@pytest.fixture(scope="module")
def backbones(tiny_clip, tiny_dino):
    registry = {"clip-vit-b-32": tiny_clip, "dinov2-base": tiny_dino}
    return {b: load_backbone(b, registry, device="cpu") for b in registry}


def _images(staged: Path) -> pd.DataFrame:
    return pq.read_table(staged / "images.parquet").to_pandas()


METRICS = [ClipCosine(), ClipScore(), GridSpread()]


def _score(submission, backbones, cache=None, **runtime):
    staged, manifest, prompts, *_ = submission
    return harness.score(staged, manifest, prompts, _images(staged), METRICS, backbones, cache,
                         submission_id="test", options=ScoringOptions(batch_size=4, **runtime))


def test_each_image_is_decoded_once_for_all_backbones(submission, backbones, monkeypatch):
    opened = []
    real_decode = embeddings.decode_pixels
    monkeypatch.setattr(embeddings, "decode_pixels",
                        lambda data, **options: opened.append(data) or real_decode(data, **options))
    scores = _score(submission, backbones, num_workers=0)  # in this process, where the counter is
    # 6 prompts x 3 seeds, although two backbones and three needs use them: each the bytes of one upload file
    upload = sorted((submission[-1] / "images").rglob("*.png"))
    assert len(opened) == 18 and sorted(opened) == sorted(p.read_bytes() for p in upload)
    assert scores.run.embeddings_computed == 18 * 2 + 6  # image + grid per image, one text per prompt
    assert set(scores.per_image["metric"]) == {"clip_cosine", "clip_score", "grid_spread"}


def test_cached_rescore_gives_the_same_numbers_and_computes_nothing(submission, backbones, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    cold = _score(submission, backbones, cache)
    warm = _score(submission, backbones, cache)
    assert cold.run.embeddings_cached == 0 and cold.run.embeddings_computed == 42
    assert warm.run.embeddings_cached == 42 and warm.run.embeddings_computed == 0
    assert np.array_equal(cold.per_image["value"].to_numpy(), warm.per_image["value"].to_numpy())
    uncached = _score(submission, backbones)
    assert np.array_equal(cold.per_image["value"].to_numpy(), uncached.per_image["value"].to_numpy())


def test_worker_processes_decode_with_the_same_results(submission, backbones):
    in_process = _score(submission, backbones)
    with_workers = _score(submission, backbones, num_workers=2)
    assert np.array_equal(in_process.per_image["value"].to_numpy(), with_workers.per_image["value"].to_numpy())


def test_features_from_the_shards_are_those_of_the_uploaded_files(submission, backbones):
    """What scoring reads (the kept submission's shards) gives exactly the features of the upload's own files."""
    staged, _, prompts, _, folder = submission
    rows = harness.image_rows(_images(staged), prompts)
    needs = sorted({n for m in METRICS for n in m.info.needs if n.of == "generated"}, key=str)
    from_shards = embeddings.compute_features(staged, rows, needs, backbones, batch_size=4, num_workers=0)
    from_files = embeddings.compute_features(lambda row: folder / rows["path"].iloc[row], rows, needs, backbones, batch_size=4,
                                  num_workers=0)
    assert set(from_shards.arrays) == set(needs) and from_shards.computed == 18 * 2 + 6
    for need in needs:
        assert np.array_equal(from_shards.arrays[need], from_files.arrays[need]), need


def test_adding_a_metric_reuses_the_cached_embeddings(submission, backbones, tmp_path):
    staged, manifest, prompts, *_ = submission
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    first = harness.score(staged, manifest, prompts, _images(staged), [ClipCosine()], backbones, cache,
                          submission_id="t", options=ScoringOptions(batch_size=4))
    more = harness.score(staged, manifest, prompts, _images(staged), METRICS, backbones, cache,
                         submission_id="t", options=ScoringOptions(batch_size=4))
    assert first.run.embeddings_computed == 24  # clip image + text
    assert more.run.embeddings_cached == 24 and more.run.embeddings_computed == 18  # only the DINO grids


CRASHING_RUN = """
import os, signal, sys
from pathlib import Path
import pyarrow.parquet as pq
from benchmark.cache import EmbeddingCache
from benchmark.encoders import load_backbone
from benchmark.encoders.spec import load_registry
from benchmark.features.embeddings import compute_features
from benchmark.metrics.alignment import ClipCosine
from tests.test_harness import GridSpread
import pandas as pd

staged, cache_path, backbones_file = sys.argv[1:4]
registry = load_registry(backbones_file)
backbones = {b: load_backbone(b, registry, device="cpu") for b in ("clip-vit-b-32", "dinov2-base")}
images = pq.read_table(f"{staged}/images.parquet").to_pandas()
prompts = pd.read_parquet(f"{staged}/prompts.parquet")
rows = images.rename(columns={"sha256": "image_sha256"}).join(prompts, on="prompt_id")
needs = [n for m in (ClipCosine(), GridSpread()) for n in m.info.needs]

def die_after_two_batches(stage, done, total):
    if stage == "embedding images" and done >= 8:
        os.kill(os.getpid(), signal.SIGKILL)

compute_features(Path(staged), rows, needs, backbones, EmbeddingCache(cache_path), batch_size=4,
                         progress=die_after_two_batches)
"""


@pytest.mark.slow
def test_a_killed_run_resumes_without_recomputing_what_it_cached(submission, backbones, backbones_file, tmp_path):
    staged, manifest, prompts, *_ = submission
    prompts.table.to_parquet(staged / "prompts.parquet")
    cache_path = tmp_path / "cache.sqlite"
    killed = subprocess.run([sys.executable, "-c", CRASHING_RUN, str(staged), str(cache_path), str(backbones_file)],
                            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    (staged / "prompts.parquet").unlink()
    assert killed.returncode == -9, killed.stderr
    survived = len(EmbeddingCache(cache_path))
    assert survived == 6 + 2 * 4 * 2  # the 6 prompt texts, then 2 batches of 4 images x 2 image needs
    resumed = _score(submission, backbones, EmbeddingCache(cache_path))
    assert resumed.run.embeddings_cached == survived
    assert resumed.run.embeddings_computed == 6 + 18 * 2 - survived
    cold = _score(submission, backbones)
    assert np.array_equal(resumed.per_image["value"].to_numpy(), cold.per_image["value"].to_numpy())


@pytest.mark.slow
def test_two_processes_give_exactly_the_one_process_results(submission, backbones_file, tmp_path):
    """`culturelens score --num-processes 2` (accelerate, gloo on CPU) equals the one-process run bit for bit."""
    _, _, _, datasets_root, source = submission
    outputs = {}
    for processes in (1, 2):
        out = tmp_path / f"out{processes}"
        result = culturelens("score", source, "--out", out, "--store", datasets_root.parent, "--backbones",
                             backbones_file, "--device", "cpu", "--batch-size", "4", "--num-processes", processes,
                             timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        (folder,) = (out / "results").iterdir()
        outputs[processes] = folder
        run = json.loads((folder / "run.json").read_text())
        assert (run["embeddings_computed"], run["embeddings_cached"]) == (24, 0)  # clip image + text; own cache
    one, two = (pq.read_table(outputs[n] / "per_image.parquet").to_pandas() for n in (1, 2))
    # 18 images x the awareness metrics the tiny registry can run: CLIP cosine and score, artifact top-1/top-5,
    # country (HPS v2 has no weights here, so it is disabled with its reason)
    assert len(one) == 18 * 5 and np.array_equal(one["value"].to_numpy(), two["value"].to_numpy())
    agg_one, agg_two = (pq.read_table(outputs[n] / "aggregates.parquet").to_pandas() for n in (1, 2))
    assert np.array_equal(agg_one["value"].to_numpy(), agg_two["value"].to_numpy())



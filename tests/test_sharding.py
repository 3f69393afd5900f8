"""Sharded scoring with nothing shared but torch.distributed: two gloo processes, each with its own cache
folder (as on two machines), give the one-process results bit for bit."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers import free_port
from tests.test_harness import backbones, submission  # noqa: F401 - fixtures: tiny backbones, 6 prompts x 3 seeds

pytestmark = pytest.mark.slow  # several processes (accelerate, gloo)

ROOT = Path(__file__).resolve().parents[1]

SHARD = """
import json, pickle, sys
from pathlib import Path
import torch
import torch.distributed as dist
from benchmark import harness
from benchmark.scoring_options import ScoringOptions
from benchmark.cache import EmbeddingCache
from benchmark.encoders import load_backbone
from benchmark.encoders.spec import load_registry
from tests.test_harness import METRICS, _images

rank, world, port, inputs, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5])
torch.set_num_threads(1)
staged, manifest, prompts, backbones_file = pickle.loads(inputs.read_bytes())
registry = load_registry(backbones_file)
backbones = {b: load_backbone(b, registry, device="cpu") for b in ("clip-vit-b-32", "dinov2-base")}
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
# (run, this process's cache folder): a cold run with a cache per process, then one where rank 0 starts empty
# and rank 1 has the cache it filled in the first run (it holds what it embedded, which must reach rank 0)
runs = [("cold", f"cold-{rank}"), ("held", f"held-{rank}" if rank == 0 else f"cold-{rank}")]
for name, folder in runs:
    cache = EmbeddingCache(work / folder / "cache.sqlite")
    scores = harness.score(staged, manifest, prompts, _images(staged), METRICS, backbones, cache,
                           submission_id="t",
                           options=ScoringOptions(batch_size=4, num_workers=0, shard=(rank, world)))
    if rank == 0:
        scores.per_image.to_parquet(work / f"{name}.parquet")
        (work / f"{name}.json").write_text(json.dumps({"cached": scores.run.embeddings_cached,
                                                      "computed": scores.run.embeddings_computed,
                                                      "rank_0_cache": len(cache)}))
dist.destroy_process_group()
"""


def _run(world: int, inputs: Path, work: Path) -> None:
    port = str(free_port())
    processes = [subprocess.Popen([sys.executable, "-c", SHARD, str(rank), str(world), port, str(inputs), str(work)],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(world)]
    for process in processes:
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-3000:]


def test_two_gloo_processes_with_their_own_caches_equal_one_process(submission, backbones, backbones_file,  # noqa: F811
                                                                    one_torch_thread, tmp_path):
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions
    from tests.test_harness import METRICS, _images

    staged, manifest, prompts, *_ = submission
    inputs = tmp_path / "inputs.pickle"
    inputs.write_bytes(pickle.dumps((staged, manifest, prompts, str(backbones_file))))
    _run(2, inputs, tmp_path)
    one = harness.score(staged, manifest, prompts, _images(staged), METRICS, backbones, submission_id="t",
                        options=ScoringOptions(batch_size=4, num_workers=0)).per_image  # as each shard: one thread
    assert len(one) == 18 * 3  # 18 images x CLIP cosine, CLIPScore and the DINO-grid metric
    for name in ("cold", "held"):
        sharded = pd.read_parquet(tmp_path / f"{name}.parquet")
        assert np.array_equal(one["value"].to_numpy(), sharded["value"].to_numpy()), name
        assert one.drop(columns="value").equals(sharded.drop(columns="value")), name
    cold, held = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("cold", "held"))
    assert (cold["cached"], cold["computed"], cold["rank_0_cache"]) == (0, 42, 42)  # rank 0 cached all it got
    # 18 images in batches of 4: rank 1 embedded batches 1 and 3 (2 image needs each; rank 0 embeds the texts)
    assert held["cached"] == 2 * 4 * 2 and held["cached"] + held["computed"] == 42
    assert held["rank_0_cache"] == 42


def test_sharding_without_torch_distributed_says_what_to_do(submission, backbones):  # noqa: F811
    from benchmark import harness
    from benchmark.scoring_options import ScoringOptions
    from tests.test_harness import METRICS, _images

    staged, manifest, prompts, *_ = submission
    with pytest.raises(ValueError, match="needs torch.distributed initialised"):
        harness.score(staged, manifest, prompts, _images(staged), METRICS, backbones, submission_id="t",
                      options=ScoringOptions(shard=(0, 2)))

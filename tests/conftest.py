"""Shared fixtures: the real CUBE-1K file (skipped when absent), tiny models and datasets built here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# Tests never reach the network: the Hub libraries read these when first imported.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

from tests.helpers import CUBE_FILE, TINY_CLIP, TINY_CLIP_CONFIG, TINY_UPSTREAM


@pytest.fixture(scope="session")
def cube_file() -> Path:
    if not CUBE_FILE.exists():
        pytest.skip(f"real CUBE-1K file not found at {CUBE_FILE} (see ../shared/data/README.md)")
    return CUBE_FILE


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory):
    """A tiny randomly initialised open_clip CLIP saved as config JSON + safetensors: the test's 'checkpoint'."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    from benchmark.encoders.spec import ClipSpec

    folder = tmp_path_factory.mktemp("tiny-clip")
    config = folder / f"{TINY_CLIP}.json"
    config.write_text(json.dumps(TINY_CLIP_CONFIG))
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    model = open_clip.create_model(TINY_CLIP)
    weights = folder / "tiny-clip.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    return ClipSpec(model=TINY_CLIP, pretrained=str(weights), config=str(config))


@pytest.fixture(scope="session")
def tiny_upstream(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("upstream") / "tiny_cube.json"
    path.write_text(json.dumps(TINY_UPSTREAM, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_dataset_root(tmp_path_factory, tiny_upstream) -> Path:
    """A datasets/ root holding a 6-prompt CUBE-format dataset under the default repo name."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    root = tmp_path_factory.mktemp("datasets")
    cube_1k.build(str(tiny_upstream), local_folder(root, cube_1k.HUB_REPO))
    return root

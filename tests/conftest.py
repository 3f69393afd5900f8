"""Shared fixtures: the real CUBE-1K file (skipped when absent), tiny models and datasets built here."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

# Tests never reach the network: the Hub libraries read these when first imported.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

from leaderboard.operator_settings import SEAL_SECRET  # noqa: E402

# Every store of the session, and every process a test starts, seals with one secret, as the app and the workers of one
# deployment do (leaderboard.seal); a test of a store's own key removes it.
SEAL_SECRET.put("culturelens-tests-seal-secret-0123456789")

from culturelens.testing import tiny_models
from tests import suite_stand_ins
from tests.helpers import CUBE_FILE, culturelens_here, tiny_cube
from culturelens.testing.submissions import TINY_UPSTREAM
from culturelens.testing.tiny_models import byte_level_clip_tokenizer, save_tiny_stable_diffusion
from culturelens.testing.tiny_qwen import save_tiny_vlm


@pytest.fixture
def own_tmpdir(tmp_path, monkeypatch):
    """A system temporary folder of the test's own for the servers it starts, where Gradio's cache would be; without
    the GRADIO_TEMP_DIR an app built earlier in this process set to its own folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    return temp


@contextlib.contextmanager
def torch_threads(count: int):
    """torch's intra-op threads set to ``count`` for the block, as they were after it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread; on a shared machine more threads mostly wait for each other (about
    10x slower generating on a busy 2-core machine: benchmarks/generate_threads.py). A module opts in with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def cube_file() -> Path:
    if not CUBE_FILE.exists():
        pytest.skip(f"real CUBE-1K file not found at {CUBE_FILE} (see ../shared/data/README.md)")
    return CUBE_FILE


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory):
    """A tiny randomly initialised open_clip CLIP saved as config JSON + safetensors: the test's 'checkpoint' (the
    one `benchmarks/tiny_backbone.py` writes for an offline demo)."""
    return tiny_models.save_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


@pytest.fixture(scope="session")
def tiny_dino(tmp_path_factory):
    """A tiny randomly initialised DINOv2 (transformers) with its image processor, saved with save_pretrained."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    from benchmark.encoders.spec import BackboneSpec

    folder = tmp_path_factory.mktemp("tiny-dinov2")
    torch.manual_seed(0)
    config = Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          patch_size=8, image_size=32)
    Dinov2Model(config).save_pretrained(folder)
    BitImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    return BackboneSpec("hf_vision", str(folder))


@pytest.fixture(scope="session")
def backbones_file(tmp_path_factory, tiny_clip, tiny_dino) -> Path:
    """A backbones JSON pointing the papers' backbone ids at the tiny models (what a user does for local weights)."""
    path = tmp_path_factory.mktemp("backbones") / "backbones.json"
    path.write_text(json.dumps({"clip-vit-b-32": tiny_clip.to_dict(), "dinov2-base": tiny_dino.to_dict()}))
    return path


@pytest.fixture(scope="session")
def tiny_upstream(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("upstream") / "tiny_cube.json"
    path.write_text(json.dumps(TINY_UPSTREAM, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_dataset_root(tmp_path_factory, tiny_upstream) -> Path:
    """A datasets/ root holding a 6-prompt CUBE-format dataset under the default repo name."""
    return tiny_cube(tmp_path_factory.mktemp("datasets"), tiny_upstream)




# --- tiny vision-language models (the judges', the diversity tagger's) ----------------------------------------
@pytest.fixture(scope="session")
def tiny_qwen_vl(tmp_path_factory) -> Path:
    """A tiny random Qwen2.5-VL saved as a model folder (``tests/tiny_qwen.py``): the relevance and expectations
    judges' model, in miniature."""
    return save_tiny_vlm(tmp_path_factory.mktemp("tiny-qwen2.5-vl"))


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """A tiny randomly initialised LLaVA (CLIP vision tower + Llama) with its processor and a chat template,
    saved with save_pretrained: the diversity tagger's model (what from_pretrained loads in production), in
    miniature."""
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    folder = tmp_path_factory.mktemp("tiny-llava")
    tokenizer = byte_level_clip_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    template = ("{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}"
                "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}\n"
                "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default", num_additional_image_tokens=1,
        chat_template=template, image_token="<image>")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_attention_heads=4,
                                       num_hidden_layers=1, image_size=32, patch_size=8),
        text_config=LlamaConfig(hidden_size=32, intermediate_size=37, num_attention_heads=4, num_key_value_heads=2,
                                num_hidden_layers=2, vocab_size=len(tokenizer)),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1)
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


# --- a suite: built from tiny stand-ins of every source, and one submission generated for it ------------------
@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory) -> Path:
    """A tiny randomly initialised Stable Diffusion pipeline of diffusers' classes, saved as a model folder."""
    return save_tiny_stable_diffusion(tmp_path_factory.mktemp("sd") / "tiny-sd")


@pytest.fixture(scope="session")
def built_suite(tmp_path_factory, tiny_upstream, tiny_clip, tiny_dino):
    """``culturelens suite build`` on tiny stand-ins of every source: (suite folder, its output, backbones file)."""
    root = tmp_path_factory.mktemp("suite-sources")
    backbones = suite_stand_ins.write_backbones(root, tiny_clip, tiny_dino)
    sources = suite_stand_ins.write_sources(root, tiny_dino)
    out = tmp_path_factory.mktemp("suite") / "suite"
    result = culturelens_here(*suite_stand_ins.build_arguments(out, sources, tiny_upstream, backbones))
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result, backbones


@pytest.fixture(scope="session")
def tiny_suite(built_suite, tmp_path_factory):
    """A copy of the built suite with a test's seeds (``TEST_SEEDS``): (folder, suite, backbones file)."""
    out, _, backbones = built_suite
    folder = tmp_path_factory.mktemp("tiny-suite") / "suite"
    shutil.copytree(out, folder)
    return folder, suite_stand_ins.with_seeds(folder, suite_stand_ins.TEST_SEEDS), backbones


@pytest.fixture(scope="session")
def suite_generated(tiny_suite, tiny_sd, tmp_path_factory):
    """One suite submission made by ``generate --suite`` with the tiny pipeline (placeholder images): (its folder,
    the command's output)."""
    folder, _, _ = tiny_suite
    out = tmp_path_factory.mktemp("generated") / "tiny-sd"
    with torch_threads(1):  # whichever module asks first: one thread, as generate's hint says on a busy CPU
        result = culturelens_here("generate", "--suite", folder, "--model", tiny_sd, "--model-name", "Tiny SD",
                                  "--out", out, *suite_stand_ins.SIZE)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


@pytest.fixture(scope="session")
def small_suite(tmp_path_factory, tiny_upstream):
    """A suite folder with the two datasets that need no model (CUBE-1K from the tiny upstream, the diversity
    prompts), and a test's definition of few seeds: (folder, suite)."""
    out = tmp_path_factory.mktemp("small") / "suite"
    result = culturelens_here("suite", "build", "--out", out, "--only", "cube-1k", "cube-diversity",
                              "--cube-source", tiny_upstream)
    assert result.returncode == 0, result.stderr
    return out, suite_stand_ins.with_seeds(out, {"cube-1k": (0, 1), "cube-diversity": (0, 1, 2)})

# --- queue backends: SQLite (the store's file) and a real PostgreSQL server (tests/postgres.py) ---------------
QUEUE_BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the session, in a temporary folder; skipped, with the reason, where none can run."""
    from culturelens.testing.postgres import PostgresServer, missing

    if reason := missing():
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture()
def postgres_url(postgres_server) -> str:
    """A fresh, empty database of the session's server (dropped after the test)."""
    url = postgres_server.database()
    yield url
    postgres_server.drop(url)


@pytest.fixture(params=QUEUE_BACKENDS)
def store_queue(request) -> str | None:
    """``Store(queue=...)`` for each backend: None (the store's own SQLite file) or a fresh PostgreSQL database."""
    return None if request.param == "sqlite" else request.getfixturevalue("postgres_url")

"""Helpers for tests: tiny upstream records, tiny CLIP config, submissions made on the fly."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CUBE_FILE = SHARED_DATA / "cube" / "cube_1k.json"

# Upstream-format records (same keys and encodings as the authors' cube_1k.json) for a small dataset.
TINY_UPSTREAM = [
    {"id": "Q1", "name": "feijoada", "country": "Brazil", "domain": "cuisine",
     "prompt": "A high resolution image of feijoada from Brazilian cuisine, realistic"},
    {"id": "LLM", "name": "pão de queijo", "country": "Brazil", "domain": "cuisine",
     "prompt": "A high resolution image of pão de queijo from Brazilian cuisine, realistic"},
    {"id": "Q2", "name": "Christ the Redeemer", "country": "Brazil", "domain": "landmarks",
     "prompt": "A panoramic view of Christ the Redeemer in Brazil, realistic"},
    {"id": "Q3", "name": "jollof rice", "country": "Nigeria", "domain": "cuisine",
     "prompt": "A high resolution image of jollof rice from Nigerian cuisine, realistic"},
    {"id": "Q4", "name": "Zuma Rock", "country": "Nigeria", "domain": "landscapes",
     "prompt": "A panoramic view of Zuma Rock in Nigeria, realistic"},
    {"id": "LLM", "name": "atilogwu", "country": "Nigeria", "domain": "art",
     "prompt": "An image of atilogwu performance from Nigeria, realistic"},
]
for _record in TINY_UPSTREAM:
    for _key in ("P31", "P279", "P495", "P17", "P2012", "P361"):
        _record.setdefault(_key, "nan")


def culturelens_command(*args) -> list[str]:
    """The command line of ``culturelens ARGS`` run by this interpreter (so of this checkout: the tests'
    PYTHONPATH is inherited), for a process that runs beside the test (``subprocess.Popen``, a supervisor)."""
    return [sys.executable, "-m", "culturelens.cli", *map(str, args)]


def culturelens(*args, env: dict | None = None, cwd: Path | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``culturelens ARGS`` to its end, with this process's environment changed by ``env``; its output
    captured as text."""
    return subprocess.run(culturelens_command(*args), capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def culturelens_here(*args) -> subprocess.CompletedProcess:
    """``culturelens ARGS`` run in this process (tiny models load once per test session), its output captured as
    text: for commands whose steps a test inspects after they return."""
    from culturelens import cli

    argv = [str(a) for a in args]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(argv)
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def until(condition, timeout: float, what: str):
    """The first truthy value of ``condition()``, asked every 50 ms: a wait for a state, failing after ``timeout``
    seconds (a bound, never a pause) saying which state did not come."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(store_root: Path, log_path: Path, *options: str, timeout: float = 180) -> Iterator[str]:
    """A real `culturelens serve` on ``store_root`` (extra ``options``), on a free loopback port, logging to
    ``log_path``: yields its URL once it answers, stops it (SIGTERM) afterwards."""
    import pytest

    port = free_port()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            culturelens_command("serve", "--store", store_root, "--port", port, *options), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.time() + timeout
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2)
                    break
                except OSError:
                    if process.poll() is not None:
                        pytest.fail(f"the app exited: {Path(log_path).read_text()[-3000:]}")
                    if time.time() > deadline:
                        pytest.fail(f"the app did not start within {timeout:.0f} s")
                    time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)


def write_image(path: Path, seed: int, size: int = 64, fmt: str = "PNG") -> None:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, format=fmt)


def manifest(prompts_repo: str = "culturelens/cube-1k", config: str = "cube_1k", seeds=(0, 1), **overrides) -> dict:
    data = {
        "format_version": 1,
        # No revision: the store rejects a second submission of one model revision for one dataset, and the
        # tests submit the tiny model many times.
        "model": {"name": "Tiny Test Model", "id": "local/tiny", "revision": None, "type": "open"},
        "dataset": {"repo": prompts_repo, "config": config, "split": "test"},
        "images_per_prompt": len(seeds),
        "seeds": list(seeds),
        "generation": {"pipeline": "StableDiffusionPipeline", "steps": 2, "guidance_scale": 7.5,
                       "width": 64, "height": 64},
        "license": "CC-BY-4.0",
        "contact": "tester@example.org",
    }
    data.update(overrides)
    return data


def make_submission(folder: Path, prompt_ids: list[str], seeds=(0, 1), model_name: str = "Tiny Test Model",
                    **overrides) -> Path:
    """A valid submission folder: manifest + one 64x64 PNG per (prompt, seed)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = manifest(seeds=seeds, **overrides)
    data["model"]["name"] = model_name
    (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    for i, prompt_id in enumerate(prompt_ids):
        for seed in seeds:
            write_image(folder / "images" / prompt_id / f"{seed}.png", seed=1000 * i + seed)
    return folder


def zip_folder(folder: Path, archive: Path, wrapper: str = "") -> Path:
    import zipfile

    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, wrapper + path.relative_to(folder).as_posix())
    return archive



def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte-level alphabet: printable bytes map to themselves, others above U+0100."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


def byte_level_clip_tokenizer():
    """A CLIPTokenizer over a byte-level vocabulary (no merges) written here: tokenises any text offline."""
    from transformers import CLIPTokenizer

    chars = list(bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def save_tiny_stable_diffusion(folder: Path, flag_everything: bool = False) -> Path:
    """A tiny randomly initialised StableDiffusionPipeline (same classes as the real one), saved with save_pretrained.

    ``flag_everything``: add a tiny StableDiffusionSafetyChecker whose concept thresholds flag every image.
    """
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPTextConfig, CLIPTextModel

    tokenizer = byte_level_clip_tokenizer()
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=32, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
        hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
        vocab_size=len(tokenizer), max_position_embeddings=77))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    checker, extractor = None, None
    if flag_everything:
        config = CLIPConfig(text_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                                         "num_hidden_layers": 1},
                            vision_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                                           "num_hidden_layers": 1, "image_size": 32, "patch_size": 8},
                            projection_dim=32)
        checker = StableDiffusionSafetyChecker(config)
        with torch.no_grad():
            checker.concept_embeds_weights.fill_(-10.0)  # every cosine exceeds the threshold: all flagged
        extractor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    pipeline = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                                       scheduler=scheduler, safety_checker=checker, feature_extractor=extractor,
                                       requires_safety_checker=flag_everything)
    pipeline.save_pretrained(folder)
    return folder


def tiny_cube(datasets_root: Path, upstream: Path) -> Path:
    """``datasets_root`` (a store's ``datasets/``) holding the 6-prompt CUBE-format dataset built from ``upstream``
    (the ``tiny_upstream`` fixture's file) under the default repo name, as ``culturelens serve --cube-source``
    builds it. Every test that needs that dataset builds it here (``serving_tiny_cube`` for a ``Store``)."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    cube_1k.build(str(upstream), local_folder(datasets_root, cube_1k.HUB_REPO))
    return datasets_root


def serving_tiny_cube(store, upstream: Path):
    """``store`` (a ``leaderboard.store.Store``) with the tiny CUBE dataset (``tiny_cube``) in its datasets."""
    tiny_cube(store.datasets, upstream)
    return store


# Three models scored on the suite (``suite_results``): per track the values of their 10 prompts. A beats B beats C
# on every prompt of every track but relevance, where C beats B: each track's win rates are A 1, B 1/2, C 0, and on
# relevance A 1, C 1/2, B 0; over the five tracks of the mean (variability has no win rate), A 1, B 2/5, C 1/10.
SUITE_MODELS = {
    "Alpha": {"awareness": 0.8, "diversity": 0.6, "iconicity": 0.5, "relevance": 4.5, "expectations": 8.0,
              "variability": 0.70},
    "Beta": {"awareness": 0.6, "diversity": 0.4, "iconicity": 0.3, "relevance": 2.0, "expectations": 6.0,
             "variability": 0.50},
    "Gamma": {"awareness": 0.4, "diversity": 0.2, "iconicity": 0.1, "relevance": 3.0, "expectations": 4.0,
              "variability": 0.30},
}
SUITE_WIN_RATES = {"Alpha": 1.0, "Beta": 0.4, "Gamma": 0.1}


def suite_results(store, models: dict = SUITE_MODELS, prompts: int = 10) -> list[str]:
    """Write one results folder per model, as a scored suite submission leaves them: per track its headline
    metric under the suite's protocol for the track (``Suite.answered_by``), overall and per prompt (the model's
    value -0.01 and +0.01 in turn, the same for every model: the mean is the value, and the order on every prompt is
    the order of the values). Returns the submission ids (sub-<model>), oldest first."""
    from benchmark import results
    from benchmark import tracks as track_registry

    ids = []
    for rank, (model, values) in enumerate(models.items()):
        sid = f"sub-{model.lower()}"
        rows = []
        for track, value in values.items():
            part = store.suite.part_of_track(track)
            protocol = results.protocol_columns({
                "dataset": str(part.dataset), "dataset_revision": part.dataset.digest,
                "images_per_prompt": part.images_per_prompt, "metric_version": "1", "backbones": []})
            headline = track_registry.get(track).headline
            per_prompt = [value + (0.01 if i % 2 else -0.01) for i in range(prompts)]
            common = {"provenance": "scored", "submission_id": sid, "model": model, "model_id": f"org/{model.lower()}",
                      "model_type": "open", "track": track, "metric": headline, "metric_label": headline,
                      "metric_version": "1", "higher_is_better": True, "harness_version": "0.1.0",
                      "dataset": str(part.dataset), "seeds": ",".join(map(str, part.seeds)),
                      "scored_at": f"2026-03-0{rank + 1}T00:00:00+00:00", **protocol}
            mean = sum(per_prompt) / prompts
            rows.append({**common, "slice": "overall", "slice_value": "all", "value": mean, "ci_low": mean - 0.01,
                         "ci_high": mean + 0.01, "n": prompts, "excluded": 0})
            rows += [{**common, "slice": "prompt", "slice_value": f"{track}-{i}", "value": v, "n": 1}
                     for i, v in enumerate(per_prompt)]
        results.write_folder(store.results / sid, [], rows, [], {"submission_id": sid})
        ids.append(sid)
    return ids

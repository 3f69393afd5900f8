"""`culturelens generate` with a tiny random Stable Diffusion pipeline saved in the test."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts, local_folder
from benchmark.generation.presets import PRESETS
from benchmark.generation.runner import GenerationError, parse_seeds
from benchmark.submission import stage
from tests.helpers import culturelens, culturelens_command, culturelens_here, tiny_cube
from culturelens.testing.tiny_models import save_tiny_stable_diffusion

REPO = Path(__file__).resolve().parents[1]
SIZE = ["--width", "64", "--height", "64", "--steps", "2", "--guidance-scale", "7.5"]


@pytest.fixture(scope="module")
def refusing_sd(tmp_path_factory) -> Path:
    return save_tiny_stable_diffusion(tmp_path_factory.mktemp("sd") / "refusing-sd", flag_everything=True)


@pytest.fixture(scope="module")
def datasets_root(tmp_path_factory, tiny_upstream) -> Path:
    return tiny_cube(tmp_path_factory.mktemp("gen-datasets"), tiny_upstream)


def generate(datasets_root: Path, model: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """`culturelens generate ...`, run in this process (the pipeline loads in about a second)."""
    return culturelens_here("generate", "--model", model, "--dataset", local_folder(datasets_root, cube_1k.HUB_REPO),
                            "--config", "cube_1k", "--out", out, "--device", "cpu", *SIZE, *extra)


def validate(datasets_root: Path, folder: Path, tmp: Path):
    def loader(m):
        return load_prompts(m.dataset.repo, m.dataset.config, local_root=datasets_root)
    return stage(folder, tmp / "staging", loader)


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB")).astype(int)


@pytest.mark.slow
def test_generated_submission_validates_and_records_every_setting(tiny_sd, datasets_root, tmp_path):
    out = tmp_path / "sub"
    result = generate(datasets_root, tiny_sd, out, "--images-per-prompt", "2", "--seeds", "3,7",
                      "--cube-negative-prompt")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "12 images generated" in result.stdout
    report = validate(datasets_root, out, tmp_path)
    assert report.ok, report.errors
    manifest = json.loads((out / "manifest.json").read_text())
    g = manifest["generation"]
    assert manifest["seeds"] == [3, 7] and manifest["dataset"]["repo"] == cube_1k.HUB_REPO
    assert (g["pipeline"], g["scheduler"], g["steps"], g["guidance_scale"], g["width"], g["height"], g["dtype"]) == \
        ("StableDiffusionPipeline", "DDIMScheduler", 2, 7.5, 64, 64, "float32")
    assert g["negative_prompt"].startswith("multiple items, blurry")
    assert {"diffusers", "torch", "transformers", "culturelens", "batch_size"} <= set(g["extra"])
    assert manifest["model"]["id"] == str(tiny_sd) and manifest["missing"] == []
    assert not (tmp_path / ".sub.tmp").exists()


@pytest.mark.slow
def test_an_image_is_the_same_alone_in_a_batch_and_in_a_full_run(tiny_sd, datasets_root, tmp_path):
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table.index)
    full = tmp_path / "full"
    assert generate(datasets_root, tiny_sd, full, "--images-per-prompt", "3").returncode == 0
    alone = tmp_path / "alone"
    target = ids[3]
    assert generate(datasets_root, tiny_sd, alone, "--images-per-prompt", "3",
                    "--prompts-where", f"prompt_id={target}").returncode == 0
    assert [p.name for p in (alone / "images").iterdir()] == [target]
    for seed in range(3):  # batch size 1: bit-identical however the run was cut
        assert np.array_equal(pixels(full / "images" / target / f"{seed}.png"),
                              pixels(alone / "images" / target / f"{seed}.png"))
    batched = tmp_path / "batched"
    assert generate(datasets_root, tiny_sd, batched, "--images-per-prompt", "3", "--batch-size", "4").returncode == 0
    for prompt_id in ids:  # batched: same noise, pixels equal up to one rounding step of the kernels
        for seed in range(3):
            difference = np.abs(pixels(full / "images" / prompt_id / f"{seed}.png")
                                - pixels(batched / "images" / prompt_id / f"{seed}.png"))
            assert difference.max() <= 1


def _inline_png(pipeline, text: str, seed: int) -> bytes:
    """What the runner wrote before the writes moved to other threads: the pipeline's own PIL output for one
    image (batch size 1), encoded as PNG in line."""
    import io

    import torch

    image = pipeline(prompt=[text], generator=[torch.Generator("cpu").manual_seed(seed)], output_type="pil",
                     num_inference_steps=2, guidance_scale=7.5, width=64, height=64).images[0]
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.slow
def test_overlapped_writes_are_written_while_the_next_batch_runs_with_the_same_bytes(tiny_sd, datasets_root,
                                                                                      tmp_path, monkeypatch):
    """Each batch's images are converted and encoded on the writer's threads, and each write of a batch (all but
    the last) waits here until the pipeline has started the next batch: inline, the run would never get there.
    The files are the bytes the pipeline's own "pil" output gives when encoded in line."""
    import functools
    import threading

    from diffusers import StableDiffusionPipeline

    from benchmark.generation import writer

    calls: list[threading.Event] = []
    real_call, real_write = StableDiffusionPipeline.__call__, writer.atomic_write

    @functools.wraps(real_call)  # the runner reads the pipeline's signature
    def call(self, *args, **kwargs):
        calls.append(threading.Event())
        if len(calls) > 1:
            calls[-2].set()  # the next batch has started
        return real_call(self, *args, **kwargs)

    seen = []

    def write(path, save, **options):
        batch = len(calls) - 1
        started_next = calls[batch].wait(timeout=120) if batch < 5 else True  # 6 batches: the last has no next
        seen.append((threading.current_thread().name, started_next))
        return real_write(path, save, **options)

    monkeypatch.setattr(StableDiffusionPipeline, "__call__", call)
    monkeypatch.setattr(writer, "atomic_write", write)
    out = tmp_path / "overlapped"
    result = generate(datasets_root, tiny_sd, out, "--images-per-prompt", "2", "--limit", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(calls) == 6 and len(seen) == 6
    assert all(name.startswith("png-writer") and started_next for name, started_next in seen)
    monkeypatch.undo()
    pipeline = StableDiffusionPipeline.from_pretrained(tiny_sd)
    pipeline.set_progress_bar_config(disable=True)
    table = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table
    for prompt_id in table.index[:3]:
        for seed in range(2):
            written = (out / "images" / prompt_id / f"{seed}.png").read_bytes()
            assert written == _inline_png(pipeline, table.loc[prompt_id, "prompt"], seed), (prompt_id, seed)


@pytest.mark.slow
def test_overlapped_writes_a_failed_write_stops_the_run_with_its_error(tiny_sd, datasets_root, tmp_path):
    """A write that fails on a writer thread (here the image's path is taken by a folder) is the run's error, as it
    was when the main thread wrote: it reaches the command, never a silent hole; the images before it are kept."""
    out = tmp_path / "blocked"
    table = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=datasets_root).table
    (out / "images" / table.index[1] / "0.png").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=f"{table.index[1]}/0.png"):
        generate(datasets_root, tiny_sd, out, "--images-per-prompt", "1", "--limit", "3")
    assert (out / "images" / table.index[0] / "0.png").is_file()


@pytest.mark.slow
def test_overlapped_writes_a_killed_run_resumes_where_it_stopped(tiny_sd, datasets_root, tmp_path):
    """Killed while images may still be on the writer's threads: every file in the submission is complete,
    the rerun makes only the missing ones, and the result is a clean run's, byte for byte."""
    out = tmp_path / "resumed"
    args = ["generate", "--model", str(tiny_sd), "--dataset", str(local_folder(datasets_root, cube_1k.HUB_REPO)),
            "--out", str(out), "--device", "cpu", *SIZE, "--images-per-prompt", "4"]
    process = subprocess.Popen(culturelens_command(*args), cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    images = out / "images"
    while process.poll() is None and len(list(images.rglob("*.png"))) < 5:
        pass
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = sorted(images.rglob("*.png"))
    assert 5 <= len(written) < 24, "the run must be cut midway for this test to mean something"
    before = {p: p.stat().st_mtime_ns for p in written}
    resumed = culturelens(*args, cwd=REPO, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{24 - len(written)} images generated, {len(written)} already done" in resumed.stdout
    assert all(p.stat().st_mtime_ns == t for p, t in before.items()), "finished images were regenerated"
    assert validate(datasets_root, out, tmp_path).ok
    clean = tmp_path / "clean"
    assert generate(datasets_root, tiny_sd, clean, "--images-per-prompt", "4").returncode == 0
    for path in sorted(images.rglob("*.png")):
        assert path.read_bytes() == (clean / path.relative_to(out)).read_bytes()


def test_resuming_with_other_settings_is_refused(tiny_sd, datasets_root, tmp_path):
    out = tmp_path / "sub"
    assert generate(datasets_root, tiny_sd, out, "--images-per-prompt", "1", "--limit", "1").returncode == 0
    other = generate(datasets_root, tiny_sd, out, "--images-per-prompt", "1", "--limit", "1", "--steps", "3")
    assert other.returncode == 2 and "holds images made with other settings" in other.stderr


@pytest.mark.slow
def test_refused_images_are_recorded_not_crashed(refusing_sd, datasets_root, tmp_path):
    out = tmp_path / "refused"
    result = generate(datasets_root, refusing_sd, out, "--images-per-prompt", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "0 images generated" in result.stdout and "12 refused by the safety filter" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["missing"]) == 12 and {m["reason"] for m in manifest["missing"]} == {"safety_filter"}
    assert not list(out.rglob("*.png"))
    # Every refusal is recorded and the manifest is valid; with no image at all there is nothing to score.
    assert validate(datasets_root, out, tmp_path).errors == [
        "images/: no image at all; a submission needs at least one (refusals alone score nothing)"]


def test_a_missing_model_is_a_clear_error(datasets_root, tmp_path):
    result = generate(datasets_root, tmp_path / "no-such-model", tmp_path / "o", "--images-per-prompt", "1")
    assert result.returncode == 2 and "cannot load the diffusers pipeline" in result.stderr
    assert "Traceback" not in result.stderr


def test_presets_carry_the_papers_settings():
    expected = {"sdxl": (30, 7.5, 1024, None), "sd-2.1": (50, 7.5, 768, None), "sd3": (30, 4.5, 1024, None),
                "sd-3.5-large": (40, 4.5, 1024, None), "flux.1-schnell": (4, 3.5, 1024, 256),
                "flux.1-dev": (50, 3.5, 1024, 512)}
    assert {k: (p.steps, p.guidance_scale, p.width, p.max_sequence_length) for k, p in PRESETS.items()} == expected


def test_seed_ranges_parse():
    assert parse_seeds("0-9") == list(range(10)) and parse_seeds("0-2,10") == [0, 1, 2, 10]
    for bad in ("3-1", "a", "1,1"):
        with pytest.raises(GenerationError):
            parse_seeds(bad)


def test_preset_values_are_overridable(tiny_sd, datasets_root, tmp_path):
    out = tmp_path / "preset"
    result = generate(datasets_root, tiny_sd, out, "--preset", "sdxl", "--images-per-prompt", "1", "--limit", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["name"] == "SDXL base 1.0" and manifest["model"]["id"] == str(tiny_sd)
    assert manifest["generation"]["steps"] == 2 and manifest["generation"]["extra"]["preset"] == "sdxl"
    assert "partial: 1 of 6 prompts" in result.stdout

"""Generate the images of a submission with a ``diffusers`` text-to-image pipeline.

Determinism: every image gets its own ``torch.Generator`` on the CPU, seeded with
its seed, so its initial noise depends on nothing but the seed. At batch size 1
(the default) an image is the same, bit for bit, whether generated alone, among
others or after a resume. At larger batch sizes the noise is still identical,
but the matrix kernels of CPUs and GPUs are not batch-invariant: pixels may then
differ by a rounding step (measured: at most 1/255, float difference ~2e-6).

Resume: an image is written to a temporary file outside the submission and
renamed into place, so a file under ``images/`` is always complete; the
manifest (with refusals so far) is rewritten atomically after every batch. A
rerun skips images that exist and decode, and refusals already recorded; it
tries failed images again, and refuses to mix settings with an earlier run in
the same folder.

The disk never holds the pipeline up: a batch's images are converted to PIL and
encoded as PNG on other threads while the next batch runs
(``benchmark.generation.writer``), the same bytes as converting and encoding
them in line.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pydantic
import torch
from PIL import Image

from benchmark import __version__
from benchmark.atomic import atomic_write_text
from benchmark.errors import CultureLensError
from benchmark.generation.writer import ImageWriter, output_type, pending_images
from benchmark.layout import MANIFEST, image_name
from benchmark.submission.manifest import Manifest


class GenerationError(CultureLensError, RuntimeError):
    """A run cannot start or continue; the message says why and what to do."""


@dataclass(frozen=True)
class Settings:
    """Everything that decides the pixels (recorded in the manifest's ``generation``)."""

    model: str
    revision: str | None
    steps: int
    guidance_scale: float
    width: int
    height: int
    negative_prompt: str | None
    dtype: str
    max_sequence_length: int | None = None
    batch_size: int = 1


@dataclass
class Outcome:
    generated: int = 0
    skipped: int = 0
    refused: int = 0
    failed: int = 0


def parse_seeds(text: str) -> list[int]:
    """'0-9' -> 0..9; '0,3,7' -> [0, 3, 7]; '0-2,10' -> [0, 1, 2, 10]; GenerationError for anything else."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise GenerationError(f"seeds {text!r}: expected numbers and ranges like '0-9' or '0,3,7'")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise GenerationError(f"seeds {text!r}: range {low}-{high} is empty")
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise GenerationError(f"seeds {text!r}: a seed appears twice")
    return seeds


def load_pipeline(settings: Settings, *, device: str, cpu_offload: bool = False, attention_slicing: bool = False):
    """Any diffusers text-to-image pipeline by Hub id or local folder, in the requested dtype."""
    from diffusers import AutoPipelineForText2Image, DiffusionPipeline

    dtype = getattr(torch, settings.dtype)
    try:
        try:
            pipeline = AutoPipelineForText2Image.from_pretrained(settings.model, dtype=dtype,
                                                                 revision=settings.revision)
        except ValueError:  # a pipeline class AutoPipeline does not map: load it as saved
            pipeline = DiffusionPipeline.from_pretrained(settings.model, dtype=dtype, revision=settings.revision)
    except OSError as error:
        raise GenerationError(
            f"cannot load the diffusers pipeline {settings.model!r}: "
            f"{textwrap.shorten(str(error), 300, placeholder=' ...')}. Give a local folder made with "
            "save_pretrained, or run where the Hugging Face Hub (or a cache holding the model) is reachable; "
            "gated models need `hf auth login`.") from None
    if cpu_offload:
        pipeline.enable_model_cpu_offload()
    else:
        pipeline.to(device)
    if attention_slicing:
        pipeline.enable_attention_slicing()
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


def _call_options(pipeline, settings: Settings) -> dict:
    """Arguments for the pipeline's __call__, keeping only those it accepts."""
    accepted = inspect.signature(pipeline.__call__).parameters
    options = {"num_inference_steps": settings.steps, "guidance_scale": settings.guidance_scale,
               "height": settings.height, "width": settings.width}
    if settings.max_sequence_length is not None:
        options["max_sequence_length"] = settings.max_sequence_length
    unsupported = sorted(k for k in options if k not in accepted)
    if unsupported:
        raise GenerationError(f"{type(pipeline).__name__} does not accept {unsupported}; remove those options")
    if settings.negative_prompt and "negative_prompt" not in accepted:
        raise GenerationError(f"{type(pipeline).__name__} takes no negative prompt; drop --negative-prompt")
    return options


def generation_record(pipeline, settings: Settings, preset: str | None) -> dict:
    """The manifest's ``generation`` block: the settings, the classes, and library versions."""
    import diffusers
    import transformers

    extra = {"batch_size": settings.batch_size, "diffusers": diffusers.__version__, "torch": torch.__version__,
             "transformers": transformers.__version__, "culturelens": __version__,
             "generator": "torch.Generator('cpu').manual_seed(seed), one per image"}
    if settings.max_sequence_length is not None:
        extra["max_sequence_length"] = settings.max_sequence_length
    if preset:
        extra["preset"] = preset
    return {"pipeline": type(pipeline).__name__, "scheduler": type(pipeline.scheduler).__name__,
            "steps": settings.steps, "guidance_scale": settings.guidance_scale, "width": settings.width,
            "height": settings.height, "negative_prompt": settings.negative_prompt, "dtype": settings.dtype,
            "extra": extra}


def _decodes(path: Path, width: int, height: int) -> bool:
    try:
        with Image.open(path) as image:
            image.load()
            return image.size == (width, height)
    except (OSError, SyntaxError, ValueError):
        return False


def _write_manifest(out: Path, manifest: dict, tmp_dir: Path) -> None:
    try:  # never write a manifest `validate` would refuse: its fields come from the options
        Manifest.model_validate(manifest)
    except pydantic.ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise GenerationError(f"the submission's manifest would be refused ({problems}); change the option that "
                              "sets it") from None
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", temp_dir=tmp_dir)


def _comparable(manifest: dict) -> dict:
    generation = {k: v for k, v in manifest["generation"].items() if k != "extra"}
    extra = manifest["generation"].get("extra", {})
    return {"model": (manifest["model"]["id"], manifest["model"].get("revision")), "dataset": manifest["dataset"],
            "seeds": manifest["seeds"], "generation": generation,
            "max_sequence_length": extra.get("max_sequence_length"), "batch_size": extra.get("batch_size")}


def run(pipeline, prompts: list[tuple[str, str]], seeds: list[int], settings: Settings, out: Path, manifest: dict,
        *, progress: Callable[[int, int], None] | None = None, tmp_dir: Path | None = None) -> Outcome:
    """Generate every (prompt, seed) not yet done into the submission folder ``out``.

    ``prompts`` is [(prompt_id, text)]; ``manifest`` the manifest to write, without ``missing``. ``tmp_dir``:
    where images are written before they are renamed into place (default ``.<out>.tmp`` beside ``out``), outside
    the submission: a killed run leaves no stray file in it.
    """
    out.mkdir(parents=True, exist_ok=True)
    tmp_dir = tmp_dir or out.parent / f".{out.name}.tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    missing: dict[tuple[str, int], dict] = {}
    existing = out / MANIFEST
    if existing.exists():
        previous = json.loads(existing.read_text(encoding="utf-8"))
        if _comparable(previous) != _comparable(manifest):
            raise GenerationError(f"{out} holds images made with other settings (see its manifest.json); "
                                  "use another --out, or the same settings to resume")
        # refusals are results and stay; failures (e.g. out of memory) are tried again
        missing = {(m["prompt_id"], m["seed"]): m for m in previous.get("missing", []) if m["reason"] != "error"}
    options = _call_options(pipeline, settings)
    outcome = Outcome()
    todo = []
    for prompt_id, text in prompts:
        for seed in seeds:
            path = out / image_name(prompt_id, seed, "png")
            if (prompt_id, seed) in missing or (path.exists() and _decodes(path, settings.width, settings.height)):
                outcome.skipped += 1
            else:
                todo.append((prompt_id, text, seed, path))
    _write_manifest(out, {**manifest, "missing": list(missing.values())}, tmp_dir)

    returned = output_type(pipeline)

    def generate(batch):
        return pipeline(prompt=[text for _, text, _, _ in batch],
                        negative_prompt=[settings.negative_prompt] * len(batch) if settings.negative_prompt else None,
                        generator=[torch.Generator("cpu").manual_seed(seed) for _, _, seed, _ in batch],
                        output_type=returned, **options)

    writer = ImageWriter(tmp_dir)
    try:
        _generate_all(generate, pipeline, todo, settings, out, manifest, missing, outcome, writer, tmp_dir, progress)
    finally:
        writer.close()
    shutil.rmtree(tmp_dir, ignore_errors=True)
    return outcome


def _generate_all(generate, pipeline, todo, settings: Settings, out: Path, manifest: dict, missing: dict,
                  outcome: Outcome, writer: ImageWriter, tmp_dir: Path, progress) -> None:
    """Each batch of ``todo`` generated, its refusals and failures recorded, its images handed to ``writer``."""
    done = 0
    for start in range(0, len(todo), settings.batch_size):
        batch = todo[start:start + settings.batch_size]
        try:
            results = [(batch, generate(batch))]
        except Exception:  # noqa: BLE001 - a failing batch is retried image by image, below
            results = []
            for item in batch:
                try:
                    results.append(([item], generate([item])))
                except Exception as error:  # noqa: BLE001 - a failed image is a result, recorded
                    prompt_id, _, seed, _ = item
                    missing[(prompt_id, seed)] = {"prompt_id": prompt_id, "seed": seed, "reason": "error",
                                                  "detail": textwrap.shorten(f"{type(error).__name__}: {error}", 480)}
                    outcome.failed += 1
        for items, result in results:
            flags = getattr(result, "nsfw_content_detected", None) or [False] * len(items)
            for (prompt_id, _, seed, _), flagged in zip(items, flags):
                if flagged:
                    missing[(prompt_id, seed)] = {"prompt_id": prompt_id, "seed": seed, "reason": "safety_filter",
                                                  "detail": f"{type(pipeline).__name__} safety checker"}
                    outcome.refused += 1
                else:
                    outcome.generated += 1
            writer.write([path for *_, path in items], pending_images(pipeline, result.images),
                         [not flagged for flagged in flags])
        _write_manifest(out, {**manifest, "missing": list(missing.values())}, tmp_dir)
        done += len(batch)
        if progress:
            progress(done, len(todo))


def select_prompts(table, where: list[str], limit: int | None) -> list[tuple[str, str]]:
    """[(prompt_id, prompt)] of a prompt table (index prompt_id), filtered by 'column=value' pairs, in order."""
    table = table.reset_index()
    for condition in where:
        column, sep, value = condition.partition("=")
        if not sep or column not in table.columns:
            raise GenerationError(f"--prompts-where {condition!r}: expected COLUMN=VALUE with COLUMN one of "
                                  f"{sorted(table.columns)}")
        table = table[table[column].astype(str) == value]
    if limit is not None:
        table = table.head(limit)
    return list(zip(table["prompt_id"], table["prompt"]))

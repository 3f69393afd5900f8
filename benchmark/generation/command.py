"""``culturelens generate``: from a dataset config to a submission folder, in one command."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from benchmark.generation.presets import CUBE_NEGATIVE_PROMPT, PRESETS
from benchmark.suite import SUITE_REPO


def default_contact() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model (a preset fills these in; any flag overrides it)")
    model.add_argument("--preset", choices=sorted(PRESETS), help="settings a paper used for this model")
    model.add_argument("--model", help="diffusers pipeline: Hub id or local folder")
    model.add_argument("--revision", default=None, help="model revision (commit sha or tag)")
    model.add_argument("--model-name", default=None, help="display name on the leaderboard")
    model.add_argument("--model-type", choices=["open", "closed"], default="open")
    model.add_argument("--steps", type=int, help="inference steps")
    model.add_argument("--guidance-scale", type=float, help="classifier-free guidance scale")
    model.add_argument("--width", type=int, help="image width (default: the preset's, else 1024)")
    model.add_argument("--height", type=int, help="image height (default: the preset's, else 1024)")
    model.add_argument("--max-sequence-length", type=int, help="text length for T5-based pipelines (FLUX)")
    model.add_argument("--negative-prompt", default=None, help="negative prompt text")
    model.add_argument("--cube-negative-prompt", action="store_true", help="use CUBE's negative prompt (Table 12)")
    model.add_argument("--dtype", choices=["auto", "float16", "bfloat16", "float32"], default="auto",
                       help="auto: the preset's half precision on GPU, float32 on CPU")
    data = parser.add_argument_group("prompts (or --suite)")
    data.add_argument("--suite", nargs="?", const="", default=None, metavar="REPO_OR_DIR",
                      help=f"every image of every part of the suite, as one suite submission, OUT/parts/<part>/; the "
                           "suite fixes the datasets and seeds (a folder from `culturelens suite build`, or a Hub "
                           f"repo; given alone: the suite `serve --suite` serves on the store, else {SUITE_REPO})")
    data.add_argument("--parts", nargs="+", default=None, metavar="PART",
                      help="with --suite: only these parts (a partial suite submission, scored on those)")
    data.add_argument("--dataset", help="dataset: Hub repo id or local folder")
    data.add_argument("--dataset-repo", default=None,
                      help="Hub repo id to record for a local --dataset folder (default: from a folder named ORG__NAME)")
    data.add_argument("--config", default="cube_1k", help="dataset config")
    data.add_argument("--split", default="test", help="dataset split")
    data.add_argument("--images-per-prompt", type=int, help="images per prompt")
    data.add_argument("--seeds", default=None, help="seeds, e.g. '0-9' or '0,3,7' (default: 0..N-1)")
    data.add_argument("--limit", type=int, default=None, help="only the first N prompts (a partial submission)")
    data.add_argument("--prompts-where", action="append", default=[], metavar="COLUMN=VALUE",
                      help="only prompts whose column equals value (repeatable), e.g. country=Brazil")
    run_ = parser.add_argument_group("run")
    run_.add_argument("--out", required=True, help="submission folder (resumed if it exists)")
    run_.add_argument("--batch-size", type=int, default=1,
                      help="images per pipeline call; 1 keeps every image bit-identical across runs")
    run_.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    run_.add_argument("--cpu-offload", action="store_true", help="enable_model_cpu_offload (less GPU memory)")
    run_.add_argument("--attention-slicing", action="store_true", help="enable_attention_slicing (less memory)")
    run_.add_argument("--license", default="see the model's licence", help="licence of the generated images")
    run_.add_argument("--contact", default=default_contact(), help="e-mail or Hugging Face user name")


def cpu_threads_hint(device: str, threads: int, load: float | None = None, cores: int | None = None) -> str | None:
    """What ``generate`` says before it starts on the CPU with several threads (torch's default: one per core):
    where other work keeps the cores busy they wait for each other, and one thread was about 10x faster with the
    tests' tiny pipeline on a busy 2-core machine (``benchmarks/generate_threads.py``); None on a GPU or with one
    thread. ``load`` and ``cores`` (default: this
    machine's 1-minute load average and core count) say how busy it is now."""
    if not device.startswith("cpu") or threads <= 1:
        return None
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cores = cores or os.cpu_count() or threads
    busy = f" (load {load:.1f} on {cores} cores now)" if load is not None else ""
    return (f"generating on the CPU with {threads} threads{busy}: where other work keeps the cores busy, one thread "
            "can be many times faster (about 10x on a busy 2-core machine); to use one, run the same command "
            "with OMP_NUM_THREADS=1 before it")


def _settings(args: argparse.Namespace, device: str):
    from benchmark.generation.runner import GenerationError, Settings

    preset = PRESETS.get(args.preset) if args.preset else None
    model = args.model or (preset.model if preset else None)
    if not model:
        raise GenerationError("give --model (a diffusers Hub id or folder) or --preset")
    pick = lambda value, attribute, default: value if value is not None else (  # noqa: E731
        getattr(preset, attribute) if preset else default)
    dtype = args.dtype
    if dtype == "auto":
        dtype = (preset.dtype if preset else "float16") if device.startswith("cuda") else "float32"
    negative = CUBE_NEGATIVE_PROMPT if args.cube_negative_prompt else args.negative_prompt
    return Settings(model=model, revision=args.revision, steps=pick(args.steps, "steps", 30),
                    guidance_scale=pick(args.guidance_scale, "guidance_scale", 7.5),
                    width=pick(args.width, "width", 1024), height=pick(args.height, "height", 1024),
                    negative_prompt=negative, dtype=dtype,
                    max_sequence_length=pick(args.max_sequence_length, "max_sequence_length", None),
                    batch_size=args.batch_size)


def _dataset_repo(args: argparse.Namespace) -> tuple[str, Path | None]:
    from benchmark.generation.runner import GenerationError

    folder = Path(args.dataset)
    if not folder.is_dir():
        return args.dataset, None
    if args.dataset_repo:
        return args.dataset_repo, folder
    if "__" in folder.name:
        return folder.name.replace("__", "/", 1), folder
    raise GenerationError(f"{folder} is a local folder: say which Hub dataset it is with --dataset-repo ORG/NAME")


def _model_record(args: argparse.Namespace, settings) -> dict:
    return {"name": args.model_name or (PRESETS[args.preset].name if args.preset else Path(settings.model).name),
            "id": settings.model, "revision": settings.revision, "type": args.model_type}


def main(args: argparse.Namespace, suite=None) -> int:
    """``culturelens generate``: one dataset config, or with ``suite`` (a ``benchmark.suite_assets.SuiteRef``)
    every part of the suite."""
    import torch

    from benchmark.datasets.prompts import load_prompts
    from benchmark.generation.runner import (GenerationError, generation_record, load_pipeline, parse_seeds, run,
                                             select_prompts)
    from benchmark.progress import Bars

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = _settings(args, device)
    if hint := cpu_threads_hint(device, torch.get_num_threads()):
        print(hint, file=sys.stderr)
    if suite is not None:
        from benchmark.generation.suite import generate_suite

        return generate_suite(args, suite, settings, device, _model_record(args, settings))
    if not args.dataset or not args.images_per_prompt:
        raise GenerationError("give --dataset and --images-per-prompt (or --suite for every part of the suite)")
    seeds = parse_seeds(args.seeds) if args.seeds else list(range(args.images_per_prompt))
    if len(seeds) != args.images_per_prompt:
        raise GenerationError(f"--seeds gives {len(seeds)} seeds but --images-per-prompt is "
                              f"{args.images_per_prompt}")
    repo, folder = _dataset_repo(args)
    prompt_set = load_prompts(repo, args.config, args.split, folder=folder)
    prompts = select_prompts(prompt_set.table, args.prompts_where, args.limit)
    if not prompts:
        raise GenerationError("no prompt matches --prompts-where / --limit")
    pipeline = load_pipeline(settings, device=device, cpu_offload=args.cpu_offload,
                             attention_slicing=args.attention_slicing)
    manifest = {
        "format_version": 1,
        "model": _model_record(args, settings),
        "dataset": {"repo": repo, "config": args.config, "split": args.split},
        "images_per_prompt": len(seeds),
        "seeds": seeds,
        "generation": generation_record(pipeline, settings, args.preset),
        "license": args.license,
        "contact": args.contact,
    }
    bars = Bars(unit="img")
    try:
        outcome = run(pipeline, prompts, seeds, settings, Path(args.out), manifest,
                      progress=bars.stage("generating"))
    finally:
        bars.close()
    print(f"{outcome.generated} images generated, {outcome.skipped} already done, {outcome.refused} refused by "
          f"the safety filter, {outcome.failed} failed (recorded in manifest.json) -> {args.out}")
    if len(prompts) < len(prompt_set):
        print(f"partial: {len(prompts)} of {len(prompt_set)} prompts; the submission validates once all are done")
    return 0

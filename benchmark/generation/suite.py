"""``culturelens generate --suite``: every image of every part of a suite (``benchmark.suite``), as one suite
submission: ``OUT/parts/<part>/`` is each part's submission folder (``benchmark.layout``), made by the same runner
as a single dataset's (``runner.run``: resumable, refusals recorded), its manifest naming the part's dataset and
suite part. The pipeline is loaded once; each part has its own progress bar.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark.layout import part_folder


def refuse_fixed_options(args: argparse.Namespace) -> None:
    """A GenerationError naming the options given that the suite fixes (its datasets, prompts and seeds)."""
    from benchmark.generation.runner import GenerationError

    fixed = [flag for flag, value in (("--dataset", args.dataset), ("--images-per-prompt", args.images_per_prompt),
                                      ("--seeds", args.seeds), ("--limit", args.limit),
                                      ("--prompts-where", args.prompts_where)) if value]
    if fixed:
        raise GenerationError(f"{', '.join(fixed)}: the suite fixes each part's prompts and seeds; leave them out "
                              "with --suite (choose parts with --parts)")


def generate_suite(args: argparse.Namespace, ref, settings, device: str, model: dict) -> int:
    """Generate the parts ``args.parts`` (default: all) of the suite ``ref`` (``suite_assets.SuiteRef``) into
    ``args.out``, with the pipeline and settings ``settings`` (``runner.Settings``), the manifests naming
    ``model`` (the manifest's model record)."""
    from benchmark.datasets.prompts import load_prompts
    from benchmark.generation.runner import generation_record, load_pipeline, run
    from benchmark.progress import Bars

    refuse_fixed_options(args)
    suite = ref.suite
    parts = [suite.part(name) for name in args.parts] if args.parts else list(suite.parts)
    prompt_sets = {}
    for part in parts:  # every dataset first: a missing one is said before minutes of loading the pipeline
        pin = part.dataset
        prompt_sets[part.name] = load_prompts(pin.repo, pin.config, pin.split, revision=pin.revision,
                                              local_root=ref.datasets_root)
    pipeline = load_pipeline(settings, device=device, cpu_offload=args.cpu_offload,
                             attention_slicing=args.attention_slicing)
    common = {"format_version": 1, "model": model,
              "generation": generation_record(pipeline, settings, args.preset), "license": args.license,
              "contact": args.contact}
    out = Path(args.out)
    bars = Bars(unit="img")
    try:
        for part in parts:
            pin = part.dataset
            manifest = {**common, "dataset": {"repo": pin.repo, "config": pin.config, "split": pin.split,
                                              "revision": pin.revision},
                        "images_per_prompt": part.images_per_prompt, "seeds": list(part.seeds),
                        "suite": {"repo": suite.repo, "version": suite.version, "part": part.name}}
            table = prompt_sets[part.name].table
            prompts = list(zip(table.index, table["prompt"]))
            outcome = run(pipeline, prompts, list(part.seeds), settings, out / part_folder(part.name), manifest,
                          progress=bars.stage(f"generating {part.name}"),
                          tmp_dir=out.parent / f".{out.name}.{part.name}.tmp")  # outside the submission
            print(f"{part.name}: {outcome.generated} images generated, {outcome.skipped} already done, "
                  f"{outcome.refused} refused by the safety filter, {outcome.failed} failed (recorded in its "
                  "manifest.json)")
    finally:
        bars.close()
    left = [p for p in suite.names if p not in {part.name for part in parts}]
    print(f"-> {out}: {len(parts)} of {len(suite.parts)} parts of {suite.label}"
          + (f" (not made: {', '.join(left)}; the submission is scored on the parts it holds)" if left else ""))
    return 0

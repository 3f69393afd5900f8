"""The CulturalFrames images the raters scored, as a CultureLens submission: scored by the harness like any
other, their per-image values are what ``meta_eval.scores_from_results`` sets against the raters (`culturelens
export-culturalframes`). It builds on both the dataset (``benchmark.datasets.culturalframes``) and the submission
format (``benchmark.submission``), so it sits above the two, in the track's package.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from benchmark.atomic import atomic_folder
from benchmark.datasets.culturalframes import (
    HUB_REPO,
    PROMPTS_CONFIG,
    SOURCE_REPO,
    SPLIT,
    CulturalFramesSourceError,
    canonical_model,
    images_of,
    load_config,
)
from benchmark.errors import OutputExists
from benchmark.layout import MANIFEST, image_name
from benchmark.submission.manifest import FORMAT_VERSION, Dataset, Generation, Manifest, MissingImage, Model


def export_submission(folder: str | Path, model: str, out: Path | str, *, repo: str = HUB_REPO,
                      contact: str = "culturelens maintainers") -> Path:
    """One model's images of a built CulturalFrames ``folder`` as a CultureLens submission (seed 0), so that the
    harness scores the rated images themselves; prompts without an image of that model are listed as
    ``missing`` (safety filter: the paper reports 290 refusals for Imagen 3 and 5 for GPT-Image, Sec. 4)."""
    model, folder, out = canonical_model(model), Path(folder), Path(out)
    if out.exists():
        raise OutputExists(f"{out} exists; choose another folder")
    prompts = load_config(folder, "prompts", columns=["prompt_id"])["prompt_id"]
    with atomic_folder(out) as staging:  # appears complete, or not at all
        answered = set()
        for image_id, prompt, data in images_of(folder, model):
            with Image.open(io.BytesIO(data)) as picture:
                extension = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp"}.get(picture.format)
            if extension is None:
                raise CulturalFramesSourceError(f"image {image_id}: format {picture.format} cannot be submitted")
            target = staging / image_name(prompt, 0, extension)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            answered.add(prompt)
        if not answered:
            models = sorted(set(load_config(folder, "images", columns=["model"])["model"]))
            raise CulturalFramesSourceError(f"no CulturalFrames image is from {model!r}; models: {', '.join(models)}")
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            model=Model(name=model, id=f"CulturalFrames images of {model} ({SOURCE_REPO})",
                        type="closed" if model in ("GPT-Image", "Imagen 3") else "open"),
            dataset=Dataset(repo=repo, config=PROMPTS_CONFIG, split=SPLIT), images_per_prompt=1, seeds=[0],
            generation=Generation(width=1024, height=1024,
                                  extra={"source": f"{SOURCE_REPO}, arXiv:2506.08835 App. A.4"}),
            license="see the CulturalFrames release and the model provider's terms", contact=contact,
            missing=[MissingImage(prompt_id=p, seed=0, reason="safety_filter",
                                  detail="no image of this model in the CulturalFrames release")
                     for p in sorted(set(prompts) - answered)])
        (staging / MANIFEST).write_text(manifest.model_dump_json(indent=2, exclude_none=True), encoding="utf-8")
    return out

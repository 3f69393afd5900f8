"""Draw ``submissions/example``: a complete submission for CUBE-1K's demo config, with placeholder images.

One 64 x 64 PNG per demo prompt (seed 0), drawn from the prompt id alone: a background and two shapes whose
colours come from its sha256. No model made them, so their scores say nothing about any model; they exist so that
a submitter can validate, submit and see a scored demo row in minutes. Rerun after the demo prompts change:

    culturelens data build cube-1k --out /tmp/cube-1k
    python submissions/draw_example.py /tmp/cube-1k
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import datasets
from PIL import Image, ImageDraw

from benchmark.datasets import cube_1k

SIZE = 64
SEED = 0
MANIFEST = {
    "format_version": 1,
    "model": {"name": "Example (placeholder drawings)", "id": "none: drawn by submissions/draw_example.py",
              "revision": None, "type": "open", "parameters_billions": None},
    "dataset": {"repo": cube_1k.HUB_REPO, "config": cube_1k.CONFIG_DEMO, "split": cube_1k.SPLIT, "revision": None},
    "images_per_prompt": 1,
    "seeds": [SEED],
    "generation": {"pipeline": "none (PIL drawing)", "width": SIZE, "height": SIZE},
    "license": "CC0-1.0",
    "contact": "culturelens maintainers",
    "missing": [],
    "notes": "A complete demo submission: one placeholder image per prompt of culturelens/cube-1k's cube_1k_demo "
             "config, drawn from the prompt id by submissions/draw_example.py. No model made these images; their "
             "scores mean nothing.",
}


def draw(prompt_id: str) -> Image.Image:
    """A background and two shapes, coloured by the prompt id's sha256: the same id always gives the same image."""
    digest = hashlib.sha256(prompt_id.encode("utf-8")).digest()
    image = Image.new("RGB", (SIZE, SIZE), tuple(digest[0:3]))
    pen = ImageDraw.Draw(image)
    pen.ellipse((8, 8, 8 + digest[9] % 40 + 16, 8 + digest[10] % 40 + 16), fill=tuple(digest[3:6]))
    pen.rectangle((digest[11] % 32, 40, digest[11] % 32 + 24, 60), fill=tuple(digest[6:9]))
    return image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="a CUBE-1K folder built by `culturelens data build cube-1k`")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "example"), help="submission folder")
    args = parser.parse_args()
    ids = datasets.load_dataset(args.dataset, cube_1k.CONFIG_DEMO, split=cube_1k.SPLIT,
                                download_mode="force_redownload")["prompt_id"]  # never a stale cache of the folder
    out = Path(args.out)
    shutil.rmtree(out / "images", ignore_errors=True)
    for prompt_id in ids:
        path = out / "images" / prompt_id / f"{SEED}.png"
        path.parent.mkdir(parents=True)
        draw(prompt_id).save(path, format="PNG", optimize=True)
    (out / "manifest.json").write_text(json.dumps(MANIFEST, indent=2) + "\n", encoding="utf-8")
    print(f"drew {len(ids)} images into {out}")


if __name__ == "__main__":
    main()

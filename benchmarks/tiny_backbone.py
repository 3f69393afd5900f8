"""Write a tiny, randomly initialised CLIP (open_clip) and a backbones file that points `clip-vit-b-32` at it.

The tests score with this model (``culturelens.testing.tiny_models.save_tiny_clip``, the ``tiny_clip`` fixture);
it lets the demo run offline, with no weights to download. Its scores are noise: use it to see the pipeline work, never to compare models.

    python benchmarks/tiny_backbone.py /tmp/tiny            # writes /tmp/tiny/backbones.json
    make run CULTURELENS_BACKBONES=/tmp/tiny/backbones.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from culturelens.testing.tiny_models import write_backbones_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="where to write the model and backbones.json")
    print(write_backbones_file(Path(parser.parse_args().folder)))


if __name__ == "__main__":
    main()

"""Awareness (CUBE, Kannen et al., arXiv:2407.06863): does the image show the cultural artifact its prompt names?"""

from __future__ import annotations

from benchmark.datasets import cube_1k
from benchmark.track import Papers, Protocol, Track
from benchmark.papers import CUBE
from benchmark.tracks.papers import cube


def metrics(settings, backbones) -> list:
    """CLIP cosine and CLIPScore (alignment), artifact and country recognition, HPS v2 quality."""
    from benchmark.metrics import awareness
    from benchmark.metrics.alignment import ClipCosine, ClipScore

    return [ClipCosine(settings.clip_backbone), ClipScore(settings.clip_backbone),
            *awareness.metrics(clip=settings.clip_backbone, quality=settings.quality_backbone)]


TRACK = Track(
    "awareness", "Awareness (CUBE)", "clip_score",
    "Does the image show the cultural artifact the prompt names, faithfully and realistically?",
    r"""
CUBE-1K prompts (cuisine, landmarks, art; 8 countries). Automatic proxies for the paper's human judgements:

- **CLIPScore** = 2.5 · max(cos(image, prompt), 0) (Hessel et al., Eq. 1), ViT-B/32 by default; CLIP cosine too.
- **Artifact recognised (top-1 / top-5)**: zero-shot over every artifact of the prompt's concept from all
  countries, texts "a photo of {artifact}"; 1 if the prompt's artifact ranks within the top k.
- **Country recognised**: zero-shot over the dataset's countries, "{food / a landmark / art} from {country}".
- **HPS v2 quality**: cosine of image and prompt under the HPS v2 ViT-H-14 (Wu et al., arXiv:2306.09341).

Prompt = unit: a prompt's score is the mean over its seeds; a slice's is the mean over its prompts, with a
95% CI over prompts (Student-t; Wilson for 0/1 values; none below 5 prompts). Reported rows: the paper's human Tables 3 and 4.
""", Papers(CUBE, cube.AWARENESS),
    # Images per prompt not pinned: CUBE's awareness count is not recorded here yet.
    Protocol(f"{cube_1k.HUB_REPO}:{cube_1k.CONFIG}:{cube_1k.SPLIT}", None, "1", ("clip-vit-b-32",)),
    metrics=metrics, order=10)

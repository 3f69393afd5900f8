"""CUBE's under-specified prompts for the cultural-diversity track, five rephrasings per concept, as a Hub dataset.

Kannen et al., "Beyond Aesthetics: Cultural Competence in Text-to-Image Models", NeurIPS 2024 D&B,
arXiv:2407.06863, Sec. 5.2.1 and Appendix H.1: a prompt names only the concept ("Image of traditional
clothing."), in five rephrasings; each rephrasing is generated with seeds 0-79, in ten batches of eight
consecutive seeds; a diversity score is computed on each batch (N = 8) and the reported score is the mean over
the 5 x 10 = 50 batches.

The paper does not list its five variants (Appendix F: its within-culture variants were written with
GPT-4-Turbo). The wordings it quotes are used as written, with where they are quoted; the others are CultureLens
rephrasings of those, and every row says which it is (``source``).
"""

from __future__ import annotations

from pathlib import Path

import datasets

from benchmark.datasets import hub_layout, names
from benchmark.datasets.cube_1k import CONCEPTS

HUB_REPO, CONFIG, SPLIT = names.CUBE_DIVERSITY
SEEDS = names.CUBE_DIVERSITY_SEEDS
BATCH_SIZE = 8  # images per diversity score (N in Eq. 3)
OURS = "CultureLens rephrasing"

# concept -> five (prompt, source) pairs, in the order of the rephrasing index.
PROMPTS: dict[str, tuple[tuple[str, str], ...]] = {
    "cuisine": (
        ("Produce a high quality image of a dish.", "paper, Figure 8 caption"),
        ("Image of a dish.", OURS),
        ("High definition photo of a dish.", OURS),
        ("A photo of a traditional dish.", OURS),
        ("An image of a plate of food.", OURS),
    ),
    "landmarks": (
        ("High definition photo of a monument.", "paper, Figure 8 caption"),
        ("Image of tourist landmarks", "paper, Sec. 5"),
        ("Image of landmarks", "paper, Sec. 5.2.1"),
        ("Image of monuments", "paper, Appendix H.1"),
        ("Produce a high quality image of a famous landmark.", OURS),
    ),
    "art": (
        ("Image of traditional clothing.", "paper, Sec. 5.2; the authors' notebook cultural_diversity.ipynb"),
        ("Produce a high quality image of traditional clothing.", OURS),
        ("High definition photo of traditional clothing.", OURS),
        ("Image of a traditional costume.", OURS),
        ("A photo of traditional attire.", OURS),
    ),
}


def seed_batches(seeds: tuple[int, ...] = SEEDS, size: int = BATCH_SIZE) -> list[tuple[int, ...]]:
    """The seed batches of one rephrasing: consecutive seeds, ``size`` per batch (0-7, 8-15, ..., 72-79)."""
    if len(seeds) % size:
        raise ValueError(f"{len(seeds)} seeds do not split into batches of {size}")
    return [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]


def diversity_prompts() -> list[dict]:
    """One row per (concept, rephrasing): prompt_id ``div-<concept>-<rephrasing>``, stable across builds."""
    return [{"prompt_id": f"div-{concept}-{index}", "prompt": prompt, "concept": concept, "rephrasing": index,
             "source": source}
            for concept in CONCEPTS for index, (prompt, source) in enumerate(PROMPTS[concept], start=1)]


def features() -> datasets.Features:
    string = datasets.Value("string")
    return datasets.Features({"prompt_id": string, "prompt": string, "concept": string,
                              "rephrasing": datasets.Value("int32"), "source": string})


def build_diversity(out: Path, *, repo: str = HUB_REPO) -> Path:
    """Write the ``diversity`` prompt set as a Hub-layout folder with its card."""
    from benchmark import __version__
    from benchmark.papers import CUBE, bibtex

    rows = diversity_prompts()
    data = hub_layout.card_data(
        pretty_name="CUBE diversity prompts (CultureLens build)", licence=hub_layout.Licence("cc-by-4.0"),
        configs={CONFIG: [SPLIT]}, default=CONFIG, task_categories=["text-to-image"], language=["en"],
        size_categories=[hub_layout.size_category(len(rows))],
        tags=["culture", "cultural-competence", "diversity", "benchmark"])
    batches = seed_batches()
    card = hub_layout.render_card(
        "cube_diversity", data, version=__version__, repo=repo, config=CONFIG, split=SPLIT, rows=rows,
        concepts=CONCEPTS, seeds=SEEDS, batch_size=BATCH_SIZE, n_batches=len(batches),
        per_concept=len(rows) // len(CONCEPTS), citation=CUBE.text, bibtex=bibtex(CUBE), ours=OURS)
    return hub_layout.write_folder(
        out, {(CONFIG, SPLIT): datasets.Dataset.from_list(rows, features=features())}, card)

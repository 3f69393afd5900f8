"""The papers CultureLens implements, as bibliographic records: each ``Paper`` gives its reference text (cards,
method pages, a reported row's ``citation``), its short form (table cells, a metric's source) and its BibTeX, so
they cannot disagree. The lowest layer of the library: datasets, metrics and tracks cite from here.

Which paper a track implements, and what that paper published, the track declares (``benchmark.track.Papers`` in
``Track.papers``; the published tables are in ``benchmark/tracks/papers/``); the About page's BibTeX is made from
the registered tracks' declarations, so a track kept outside this repository cites a ``Paper`` of its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A paper's record, from which its reference text (method pages, cards, the About page), its short form (table
    cells) and its BibTeX are all made, so they cannot disagree."""

    key: str  # BibTeX key
    title: str
    authors: tuple[str, ...]  # "Last, First", as BibTeX writes them
    arxiv: str
    year: int
    venue: str = ""  # where it was published, when not only on arXiv
    name: str = ""  # what the field calls the paper or its benchmark ("CRT"); the app names its protocol by it

    @property
    def called(self) -> str:
        """The paper by its name, else by its short form."""
        return self.name or self.short

    @property
    def surnames(self) -> list[str]:
        return [a.split(",")[0] for a in self.authors]

    @property
    def text(self) -> str:
        """The full reference: surnames, title, venue and arXiv id (a reported row's ``citation``)."""
        names = self.surnames
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " & " + names[-1]
        return ", ".join(p for p in (who, f'"{self.title}"', self.venue, f"arXiv:{self.arxiv}") if p)

    @property
    def short(self) -> str:
        """For table cells: first author (and the second when there are two), arXiv id."""
        names = self.surnames
        who = " & ".join(names) if len(names) <= 2 else f"{names[0]} et al."
        return f"{who}, arXiv:{self.arxiv}"

    @property
    def bibtex(self) -> str:
        """An ``@inproceedings`` entry where the paper has a venue (its arXiv id as ``eprint``), else an arXiv
        ``@article``."""
        head = f"{{{self.key},\n  title = {{{self.title}}},\n  author = {{{' and '.join(self.authors)}}},\n"
        if self.venue:
            return (f"@inproceedings{head}  booktitle = {{{self.venue}}},\n  eprint = {{{self.arxiv}}},\n"
                    f"  archivePrefix = {{arXiv}},\n  year = {{{self.year}}}\n}}")
        return f"@article{head}  journal = {{arXiv preprint arXiv:{self.arxiv}}},\n  year = {{{self.year}}}\n}}"


CUBE = Paper("kannen2024beyond", "Beyond Aesthetics: Cultural Competence in Text-to-Image Models",
             ("Kannen, Nithish", "Ahmad, Arif", "Andreetto, Marco", "Prabhakaran, Vinodkumar", "Prabhu, Utsav",
              "Dieng, Adji Bousso", "Bhattacharyya, Pushpak", "Dave, Shachi"), "2407.06863", 2024,
             "Advances in Neural Information Processing Systems (NeurIPS 2024), Datasets and Benchmarks Track",
             name="CUBE")

CRT = Paper("derosapalmini2025persistence", "The Persistence of Cultural Memory: Investigating Multimodal "
            "Iconicity in Diffusion Models", ("De Rosa Palmini, Maria-Teresa", "Cetinic, Eva"), "2511.11435", 2025,
            name="CRT")

W1KP = Paper("tang2024words", "Words Worth a Thousand Pictures: Measuring and Understanding Perceptual Variability "
             "in Text-to-Image Generation", ("Tang, Raphael", "Zhang, Xinyu", "Xu, Lixinyue", "Lu, Yao", "Li, Wenyan",
                                             "Stenetorp, Pontus", "Lin, Jimmy", "Ture, Ferhan"), "2406.08482", 2024,
             name="W1KP")

CAIRE = Paper("yayavaram2025caire", "CAIRE: Cultural Attribution of Images with Retrieval",
              ("Yayavaram, Arnav", "Yayavaram, Siddharth", "Khanuja, Simran", "Saxon, Michael", "Neubig, Graham"),
              "2506.09109", 2025, "EACL 2026", name="CAIRE")

CULTURALFRAMES = Paper("nayak2025culturalframes", "CulturalFrames: Assessing Cultural Expectation Alignment in "
                       "Text-to-Image Models and Evaluation Metrics",
                       ("Nayak, Shravan", "Bhatia, Mehar", "Zhang, Xiaofeng", "Rieser, Verena", "Hendricks, Lisa Anne",
                        "van Steenkiste, Sjoerd", "Goyal, Yash", "Stańczak, Karolina", "Agrawal, Aishwarya"),
                       "2506.08835", 2025, name="CulturalFrames")

CULTURELENS_BIBTEX = """@software{culturelens,
  title = {CultureLens: an open benchmark and leaderboard for the cultural competence of text-to-image models},
  author = {{The CultureLens contributors}},
  year = {2026},
  url = {https://huggingface.co/culturelens}
}"""
"""How to cite this project (the software: it has no paper of its own), beside the papers whose methods and data it
builds on; every card it writes gives both (``bibtex``)."""


def bibtex(*papers: Paper) -> str:
    """The BibTeX of ``papers`` (a dataset's source papers), then CultureLens's: what a card's citation gives."""
    return "\n\n".join([*(paper.bibtex for paper in papers), CULTURELENS_BIBTEX])

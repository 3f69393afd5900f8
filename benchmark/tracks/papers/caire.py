"""CAIRE (Yayavaram et al., arXiv:2506.09109), the relevance track's paper: its record only (the track shows no
number of the paper)."""

from __future__ import annotations

from benchmark.track import Paper

PAPER = Paper("yayavaram2025caire", "CAIRE: Cultural Attribution of Images with Retrieval",
              ("Yayavaram, Arnav", "Yayavaram, Siddharth", "Khanuja, Simran", "Saxon, Michael", "Neubig, Graham"),
              "2506.09109", 2025, "EACL 2026")

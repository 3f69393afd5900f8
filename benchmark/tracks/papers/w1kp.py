"""W1KP (Tang et al., arXiv:2406.08482), the variability track's paper: its record only (the track shows no number
of the paper)."""

from __future__ import annotations

from benchmark.track import Paper

PAPER = Paper("tang2024words", "Words Worth a Thousand Pictures: Measuring and Understanding Perceptual Variability "
              "in Text-to-Image Generation", ("Tang, Raphael", "Zhang, Xinyu", "Xu, Lixinyue", "Lu, Yao", "Li, Wenyan",
                                              "Stenetorp, Pontus", "Lin, Jimmy", "Ture, Ferhan"), "2406.08482", 2024)

"""Where each dataset CultureLens builds lives on the Hub (repo, config, split), as plain names: the track registry
and the leaderboard service read them without importing any data library; the builders take theirs from here."""

from __future__ import annotations

from typing import NamedTuple


class DatasetName(NamedTuple):
    repo: str
    config: str
    split: str = "test"

    def __str__(self) -> str:
        """``repo:config:split``, as results record a dataset."""
        return f"{self.repo}:{self.config}:{self.split}"


CUBE_DIVERSITY = DatasetName("culturelens/cube-diversity", "diversity")
# Appendix H.1: "80 unique seed values per prompt, spanning the range from 0 to 79".
CUBE_DIVERSITY_SEEDS = tuple(range(80))
ICONIC_REFERENCES = DatasetName("culturelens/iconic-references", "references")
CUBE_1K = DatasetName("culturelens/cube-1k", "cube_1k")
CUBE_CSPACE = DatasetName("culturelens/cube-cspace", "cspace")
# The CulturalFrames prompt set a model answers, one image each (Nayak et al., Sec. 3.3, 4); its other configs
# hold the four models' rated images.
CULTURALFRAMES = DatasetName("culturelens/culturalframes", "prompts")

# The CUBE authors' repository at the commit the suite pins (github.com/google-deepmind/cube, 20 Jan 2025), and
# its CUBE-1K file there: where CUBE-1K is built from by default (``benchmark.suite.SOURCES`` pins its bytes).
CUBE_COMMIT = "4ec2d350102dcfc03e41aa51ee0f2398d642a1a6"
CUBE_1K_SOURCE = f"https://raw.githubusercontent.com/google-deepmind/cube/{CUBE_COMMIT}/dataset/cube_1k.json"

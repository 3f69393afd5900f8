"""How counts read in the sentences people see (a refusal, a note beside a table): "1 image", "1,962 images"."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun as a sentence says them: "1 track", "3 tracks", "1,962 images" (``plural`` where
    adding "s" is wrong: "1 entry", "2 entries")."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"

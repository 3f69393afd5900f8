"""How counts read in the sentences people see (a refusal, a note beside a table): "1 image", "1,962 images"."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun as a sentence says them: "1 track", "3 tracks", "1,962 images" (``plural`` where
    adding "s" is wrong: "1 entry", "2 entries")."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def joined(words: list[str]) -> str:
    """Words as a sentence lists them: "a", "a and b", "a, b and c"."""
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)

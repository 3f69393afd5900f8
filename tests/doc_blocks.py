"""The fenced code blocks of README.md and of the manual (docs/), and what each says about how it is tested.

A block runs in ``tests/test_docs.py`` unless the HTML comment just above it (invisible on the Hub and in the
site) says otherwise, in one of two forms:

    <!-- docs-test: run by tests/test_first_day.py::test_first_day_the_readmes_commands_... -->
    <!-- docs-test: not run: `make run` serves until it is stopped -->

The first names the test that runs the block as written (it reads the block from its page); the second says why
the block cannot run offline here (a GPU, a model's weights, the Hub, a server that runs until stopped).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ("bash", "python")  # the languages a block must run in; other fences (json, text, diagrams) are shown only
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"^ *<!-- docs-test: (?:run by (?P<test>\S+)|not run: (?P<reason>.*?)) -->$")
_COMMENT = re.compile(r"^ *<!--.*-->$")
_HEADING = re.compile(r"^#{1,6} .+$", re.M)


@dataclass(frozen=True)
class Block:
    page: str  # from the repository's root: README.md, docs/...
    line: int  # of the opening fence, 1-based
    lang: str
    code: str  # dedented, as a reader copies it
    heading: str  # the heading line the block sits under ("" above the first)
    run_by: str | None  # tests/FILE.py::TEST, from the marker
    not_run: str | None  # why not, from the marker

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of the manual (not the hooks' folder, which holds no page)."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the marker of the HTML comments right above it, if any."""
    text = page.read_text(encoding="utf-8")
    fences = list(_FENCE.finditer(text))
    # headings outside the blocks (a shell or Python comment at a line's start is not one)
    headings = [h for h in _HEADING.finditer(text) if not any(f.start() <= h.start() < f.end() for f in fences)]
    found = []
    for match in fences:
        above = text[:match.start()].splitlines()
        marker = None
        while above and _COMMENT.match(above[-1]):
            marker = marker or _MARKER.match(above.pop())
        heading = [h[0] for h in headings if h.start() < match.start()][-1:]
        found.append(Block(page=page.relative_to(ROOT).as_posix(), line=text.count("\n", 0, match.start()) + 1,
                           lang=match["lang"], code=textwrap.dedent(match["body"]), heading="".join(heading),
                           run_by=marker["test"] if marker else None,
                           not_run=marker["reason"] if marker else None))
    return found


def every_block(langs: tuple[str, ...] | None = RUN) -> list[Block]:
    """The blocks of README.md and the manual in ``langs`` (None: all), page by page, in a reader's order."""
    return [b for page in pages() for b in blocks(page) if langs is None or b.lang in langs]

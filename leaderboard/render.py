"""Text and pictures the app renders: every piece of user-supplied text goes through ``plain`` (or ``code``)."""

from __future__ import annotations

import html
import math
import re
import string
import sys
import tempfile
from pathlib import Path, PurePath

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from benchmark import tracks
from benchmark.aggregate import CROSSED
from benchmark.track import JUDGE

# Every ASCII punctuation character: with each written as a numeric character reference, Markdown finds no
# syntax in the text at all (CommonMark: "entity and numeric character references cannot be used in place of
# symbols indicating structure"), and no autolink either (a URL loses its ":" and ".", an e-mail its "@").
_PUNCTUATION = frozenset(string.punctuation)


def plain(text: object) -> str:
    """User-supplied (or user-influenced) text for a Markdown component, shown exactly as typed and as nothing
    else: no emphasis, link, bare-URL autolink, image, HTML or code span can form. Line breaks become spaces.
    (Math is off in every component that shows such text: ``leaderboard.app.text_markdown``.)"""
    text = " ".join(str(text).splitlines())
    return "".join(f"&#{ord(ch)};" if ch in _PUNCTUATION else ch for ch in text)


QUOTE_CHARS = 200  # of a visitor's text, that a note may quote


def excerpt(text: object) -> str:
    """A visitor's text as a note quotes it: its first ``QUOTE_CHARS`` characters, and "…" when it had more. A note
    never repeats a whole query back: what was typed may be megabytes (``leaderboard.bounds``). Still text: show it
    with ``plain`` or ``code``."""
    text = str(text)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…"


def code(text: object) -> str:
    """User text in monospace (an id, a file name): ``plain`` inside an HTML ``<code>`` element, because inside
    a Markdown code span character references would show as typed (``&#95;``) instead of the character."""
    return f"<code>{plain(text)}</code>"


# What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection"), as a pattern over a cell's text.
_FORMULA_START = "^[=+\\-@\t\r]"


def spreadsheet_safe(table: pa.Table) -> pa.Table:
    """``table`` for a CSV download: a text cell that begins like a formula (``= + - @``, tab, carriage return)
    gets a leading ``'``, as OWASP advises against CSV injection, so a model named ``=HYPERLINK(...)`` stays
    text in Excel or LibreOffice. Numbers (a negative score) are left alone. A text column's distinct values are
    tested first (a download's columns repeat few values: 34 ms for a track's 250,000 rows against 138 ms testing
    every cell), its cells only where one of them begins like a formula."""
    columns = []
    for column in table.columns:
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if text and pc.any(pc.match_substring_regex(pc.unique(column), _FORMULA_START)).as_py():
            formula = pc.fill_null(pc.match_substring_regex(column, _FORMULA_START), False)
            quote, joined = pa.scalar("'", column.type), pa.scalar("", column.type)
            column = pc.if_else(formula, pc.binary_join_element_wise(quote, column, joined), column)
        columns.append(column)
    return pa.table(columns, schema=table.schema)


def server_places(store_root: Path) -> dict[str, str]:
    """Server folders that error texts may name, and what a visitor sees instead: the store (as given and
    resolved), this checkout, the Python installation, the temporary folder (Gradio's uploads) and the home
    folder. Absolute paths only (``hide_paths``)."""
    places = {str(Path(store_root).resolve()): "STORE", str(store_root): "STORE",
              str(Path(__file__).resolve().parents[1]): "<culturelens>", sys.prefix: "<python>",
              sys.base_prefix: "<python>", tempfile.gettempdir(): "<tmp>", str(Path.home()): "~"}
    return {path: name for path, name in places.items() if len(path) > 1 and Path(path).is_absolute()}


# What may stand on either side of a path in a text without being part of it: before it, anything but a name's
# characters ("file:///srv/store" hides the store too); after it, anything but those and "/" (a "." only where no
# name character follows: the end of a sentence).
_BEFORE = r"(?<![\w.~-])"
_AFTER = r"(?=$|/|\\|\.(?![\w-])|[^\w./-])"


def hide_paths(text: object, places: dict[str, str]) -> str:
    """``text`` with each server folder of ``places`` (absolute paths) replaced by its public name where it stands
    as a path of its own (a folder or what is under it, the longest first): a reason or log excerpt shown to
    visitors says which file, not where the server keeps it. Words are never touched: a suite folder called
    ``/srv/suite`` hides that path, not the word of ``culturelens suite build``, nor ``/srv/suite2``."""
    absolute = sorted((p for p in places if Path(p).is_absolute()), key=len, reverse=True)
    if not absolute:
        return str(text)
    pattern = re.compile(_BEFORE + "(" + "|".join(map(re.escape, absolute)) + ")" + _AFTER)
    return pattern.sub(lambda found: places[found.group(1)], str(text))


LOCAL = " (local folder)"  # what ``public_id`` adds to the last name of a path


def public_id(value: object) -> str:
    """A model id or backbone source as a visitor may read it: a Hub id or URL as it is, a path of someone's
    machine (an operator's weights, a submitter's model folder) by its last name only, marked as local."""
    text = str(value)
    if text.startswith(("/", "~", "./", "../")) or re.match(r"^[A-Za-z]:[\\/]", text):
        return f"{PurePath(text).name or text}{LOCAL}"
    return text


def public_backbones(backbones: list[str]) -> str:
    """A protocol's backbones (``id=source@revision``, or ``id@revision``) with each source as ``public_id`` names
    it: the id and revision (a digest for local weights) say which weights, the operator's path does not."""
    shown = []
    for entry in backbones:
        name, _, rest = str(entry).partition("=")
        source, at, revision = rest.rpartition("@") if "@" in rest else (rest, "", "")
        shown.append(f"{name}={public_id(source)}{at}{revision}" if rest else name)
    return ", ".join(shown)


def public_judge(judge: str) -> str:
    """A judge (``id@revision``, as a metric version names it: ``benchmark.track.judge_named``) as a visitor may read
    it: a Hub id as it is, an operator's local folder by its last name (``public_id``), the revision kept."""
    source, at, revision = judge.rpartition("@") if "@" in judge else (judge, "", "")
    shown = public_id(source)
    return shown.removesuffix(LOCAL) + at + revision + (LOCAL if shown.endswith(LOCAL) else "")


def public_version(version: object) -> str:
    """A metric version as a visitor may read it: the judge it names (``benchmark.track.JUDGE``) by ``public_judge``,
    never the server folder the operator loaded it from; the rest as it is."""
    return JUDGE.sub(lambda found: f"judge {public_judge(found.group(1))}", str(version))


def link(text: object, url: str | None) -> str:
    """Markdown for ``text`` (shown as typed, ``plain``) linking to ``url``, an address from ``leaderboard.links``
    (http(s), or a model's page here; percent-encoded: nothing in it can end the link); the text alone without one."""
    return f"[{plain(text)}]({url})" if url else plain(text)


# Markers are words, never emoji: they read the same on a machine without an emoji font and to a screen reader.
PROVENANCE = {"reported": "paper", "scored": "scored"}  # how each ``provenance`` value is named to visitors
# Badge colours (border and text) per marker: provenance and a submission's queue state.
_TONES = {"paper": "#1d4ed8", "scored": "#047857", "PENDING": "#6b7280", "RUNNING": "#b45309",
          "FINISHED": "#047857", "FAILED": "#b91c1c"}


def badge(word: str) -> str:
    """A marker for Markdown or HTML: ``word`` in a small outlined box (inline style, so it needs no stylesheet
    and no emoji font). ``word`` is one of ours (a provenance name or a queue state), but a queue state is what a
    queue client wrote (issue 40): shown as text (``plain``: Markdown inside an HTML span is still Markdown)."""
    tone = _TONES.get(word, "#374151")
    return (f'<span class="cl-badge" style="border:1px solid {tone};color:{tone};border-radius:4px;'
            f'padding:0 4px;font-size:0.85em;white-space:nowrap">{plain(word)}</span>')


HEADER = (
    "# CultureLens\n"
    "How well do text-to-image models know the world's cultures? Six tracks from five papers: awareness and "
    "diversity (CUBE), iconicity (CRT), variability (W1KP), relevance (CAIRE) and expectations (CulturalFrames). "
    f"{badge('paper')} rows are copied from a paper's table (cited on the row, with a link to the paper); "
    f"{badge('scored')} rows were computed by this leaderboard's harness from submitted images. Nothing is "
    "hidden unless a filter says so."
)

WIN_RATE_FOOTNOTE = (
    "**Overall win rate**: on each track's headline metric, the share of the other models a model beats "
    "significantly (one it cannot be told from counts half), averaged over the tracks it has a score on. This is "
    "the \"mean win rate\" of HEIM (Lee et al., Holistic Evaluation of Text-to-Image Models, arXiv:2311.04287): "
    "a model without a score on a track leaves that track's comparison, and only models scored on the same set of "
    "tracks are ranked together. On each track the models are compared on the protocol's prompts, a prompt a model "
    "did not answer counting as the metric's worst value. A track with no better end (variability: pure noise is "
    "the most variable) is not part of it: its headline value is shown beside."
)

# The slices whose name alone would not say what they are, for people; every other slice keeps its name.
SLICE_LABELS = {"kind": "still or moving"}


def slice_label(name: str) -> str:
    """A slice's name for people ('country_concept' -> 'country × concept', after ``aggregate.CROSSED``); ids stay
    in downloads and the API."""
    if name in CROSSED:
        return " × ".join(CROSSED[name])
    return SLICE_LABELS.get(name, str(name).replace("_", " "))


def method_page(name: str | None) -> str:
    """A track's method page (Markdown; the Metrics tab's and the ``/method`` API's): what it asks, how it is
    measured, its paper, headline metric and ranking protocol. No name, or one no track module registers (a track
    only the results name), is answered with a sentence naming the tracks that have a page."""
    known = ", ".join(t for t, declared in tracks.all_tracks().items() if declared.method)
    if not isinstance(name, str) or not name.strip():
        return f"Pick a track to read its method page: {known} (track ids)."
    track = tracks.get(name)
    if not track.method:
        return (f"### {plain(excerpt(track.title))}\n\nNo method page is registered for the track "
                f"{code(excerpt(name))}: the tracks with one are {known}.")
    return (f"### {track.title}\n\n*{track.question}*\n{track.method}\n"
            f"Paper: {track.citation}. Headline metric: `{track.headline}`. Headline ranking protocol (rows scored "
            f"otherwise are ranked under their own, each named on the page; About explains): "
            f"{plain(track.protocol.describe())}." +
            (f" Not in the overall win rate: {plain(track.not_in_overall)}." if track.not_in_overall else ""))


def _colour(t: float) -> str:
    """White (0) to a saturated teal (1)."""
    r, g, b = (round(255 + (c - 255) * t) for c in (0, 128, 128))
    return f"rgb({r},{g},{b})"


def heatmap_html(matrix: pd.DataFrame, higher_is_better: bool = True, caption: str = "",
                 empty: str = "No rows for this choice yet.") -> str:
    """A model x slice table whose cells are shaded by value (darker = better), values printed in each cell;
    ``empty`` (why there is nothing, one sentence) in its place when there is nothing to shade."""
    if matrix.empty:
        return f"<p>{html.escape(empty)}</p>"
    values = matrix.to_numpy(dtype=float)
    finite = values[~pd.isna(values)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    span = high - low or 1.0
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in matrix.columns)
    rows = []
    for name, row in matrix.iterrows():
        cells = []
        for value in row:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                cells.append('<td style="background:#f3f3f3;color:#999">–</td>')
                continue
            t = (value - low) / span if higher_is_better else (high - value) / span
            ink = "#fff" if t > 0.6 else "#111"
            cells.append(f'<td style="background:{_colour(t)};color:{ink};text-align:right">{value:.3f}</td>')
        rows.append(f"<tr><th style='text-align:left'>{html.escape(str(name))}</th>{''.join(cells)}</tr>")
    caption = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f'<div style="overflow-x:auto"><table class="cl-heatmap" style="border-collapse:collapse;font-size:13px">'
            f"{caption}<tr><th></th>{head}</tr>{''.join(rows)}</table></div>")

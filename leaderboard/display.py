"""How ranked tables read to people: each column described once (``Column``: name, Gradio datatype, shown unless a
visitor chooses, as the HF leaderboard template's ``ColumnContent``), and the ranked rows of ``tables`` as those
columns (rank with its range or why a row is not ranked, the model linked, rounded scores, the CI as text, the
refusal rate, provenance, protocol and source). Typed rows for scripts are ``leaderboard.exports``'."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import ranking
from benchmark import tracks as track_registry
from leaderboard import links, render, tables
from leaderboard.rankings import censored


@dataclass(frozen=True)
class Column:
    """One column of a table on the page: its header, how a Dataframe shows it (``number``, ``markdown`` for
    links around ``render.plain`` text, shown with math off: ``latex_delimiters=[]``; else text) and whether it is
    shown unless a visitor chooses (the others are behind "Columns")."""

    name: str
    datatype: str = "str"
    shown: bool = False


RANKED = (
    Column("Rank", "number", True), Column("Rank range (95%)", shown=True), Column("Tie group"),
    Column("Model", "markdown", True), Column("Score", "number", True), Column("95% CI", shown=True),
    Column("n", "number"), Column("Refused", shown=True), Column("Type"), Column("Size (B)", "number"),
    Column("Date"), Column("Provenance", "markdown", True), Column("Protocol"), Column("Source", "markdown"),
    Column("Submission"),
)
WIN_RATES = (
    Column("Rank", "number"), Column("Rank range (95%)"), Column("Model", "markdown"), Column("Provenance", "markdown"),
    Column("Overall win rate", "number"), Column("95% interval"), Column("Tracks", "number"),
)
RANK_COLUMNS = [c.name for c in RANKED]
SHOWN_COLUMNS = [c.name for c in RANKED if c.shown]
WIN_COLUMNS = [c.name for c in WIN_RATES]
WIN_RATE = " win rate"  # a track's column in the overall: "<track title> win rate" (a share of models beaten)
OWN_SCORE = " score"  # beside it: "<track title> score", the track's own score (its headline metric)
DATATYPES = {c.name: c.datatype for c in (*RANKED, *WIN_RATES) if c.datatype != "str"}


def datatypes(columns, frame: pd.DataFrame | None = None) -> list[str]:
    """The Dataframe datatypes of these display columns (``DATATYPES``; text otherwise); with the table shown,
    also text for a number column that holds text (a censored score, "> 10")."""
    def holds_text(column) -> bool:
        return frame is not None and frame[column].map(lambda v: isinstance(v, str)).any()

    def kind(column) -> str:
        if column.endswith(WIN_RATE) and column not in DATATYPES and frame is not None and holds_text(column):
            return "markdown"  # the page's track cell: the win rate and the track's own score, linked to its table
        return "str" if DATATYPES.get(column) == "number" and holds_text(column) else DATATYPES.get(column, "str")

    return [kind(c) for c in columns]


def _sources(frame: pd.DataFrame) -> pd.Series:
    """Where each row comes from, as Markdown: the paper (linked to it on arXiv) and table, or the harness
    version, backbones and seeds."""
    short = {text: paper.short for text, paper in track_registry.cited_papers().items()}
    reported = pd.Series([render.link(short.get(c, c) if isinstance(c, str) else "", links.paper_url(c))
                          + ", " + render.plain(t if isinstance(t, str) else "")
                          for c, t in zip(frame["citation"], frame["source_table"])], index=frame.index)
    seeds = frame["seeds"].fillna("").str.split(",")
    seeds = seeds.map(lambda s: s[0] if len(s) == 1 else f"{s[0]}-{s[-1]} ({len(s)})")
    scored = ("CultureLens " + frame["harness_version"].fillna("") + ", " + frame["backbone"].fillna("") +
              ", seeds " + seeds).map(render.plain)
    return reported.where(frame["provenance"] == "reported", scored)


def model_links(frame: pd.DataFrame) -> list[str]:
    """Each row's model name as Markdown, linked to its page on this leaderboard (``links.model_page``: its
    profile, map and badge; the page links on to its Hub page or URL)."""
    return [render.link(name, links.model_page(name)) for name in frame["model"]]


def rank_range(low, high) -> str:
    """'2–4': the 95% interval of a rank ('3' when it is one rank); '' without one."""
    if pd.isna(low):
        return ""
    return f"{low}" if low == high else f"{low}–{high}"


def share(value) -> str:
    """A refusal rate as people read it: '0%', '9.5%', a row that left most prompts unanswered flagged ('98.5%:
    mostly refused'; '' without one: no per-prompt values)."""
    if pd.isna(value):
        return ""
    return f"{100 * value:.3g}%" + (": mostly refused" if value > ranking.MOSTLY_REFUSED else "")


def interval_text(low, high, n) -> str:
    """A 95% CI as people read it: '[0.412, 0.530]'; a side the prompts cannot bound (infinite) says so, '[0.002, not
    bounded by 200 prompts]', 'not bounded by 10 prompts' for both; '' without an interval."""
    if pd.isna(low) or pd.isna(high):
        return ""
    unbounded = f"not bounded by {int(n)} prompts" if pd.notna(n) else "not bounded"
    if np.isinf(low) and np.isinf(high):
        return unbounded
    return "[" + ", ".join(unbounded if np.isinf(side) else f"{side:.3f}" for side in (low, high)) + "]"


def display(frame: pd.DataFrame, protocol_names: dict[str, str] | None = None) -> pd.DataFrame:
    """``tables.ranked`` rows for people (``RANK_COLUMNS``): the rank and its 95% range (or why the row is not ranked),
    tie group, the model linked to its page, rounded scores ("> k" for a censored value), the CI as text
    (``interval_text``), n, the refusal rate (``share``: a row mostly refused flagged), the provenance as a word, the
    protocol (by its name from ``protocol_names`` when given, else its id, headline or off-protocol), a source per row
    (Markdown columns: ``DATATYPES``)."""
    if frame.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    ci = pd.Series([interval_text(*bounds) for bounds in zip(frame["ci_low"], frame["ci_high"], frame["n"])],
                   index=frame.index, dtype=object)
    low, high = (frame[c].astype("Float64").astype("Int64") for c in ("rank_low", "rank_high"))
    why = frame["not_ranked"] if "not_ranked" in frame.columns else pd.Series("", index=frame.index)
    why = why.fillna("").where(~frame["beside"].fillna(False).astype(bool), "other protocol")
    ranges = [rank_range(lo, hi) if not reason else f"not ranked: {reason}" for lo, hi, reason in zip(low, high, why)]
    protocol = (frame["protocol_id"].map(lambda p: protocol_names.get(p, p)) if protocol_names is not None
                else frame["protocol_id"] + np.where(frame["on_protocol"], " (headline)", " (off-protocol)"))
    above = censored(frame)
    score = frame["value"].round(3)
    if above.any():  # a text column then: "> 10" beside the numbers
        score = score.astype(object).where(~above, "> " + frame["ci_low"].map("{:g}".format))
    refused = frame["refused"] if "refused" in frame.columns else pd.Series(np.nan, index=frame.index)
    return pd.DataFrame({
        "Rank": frame["rank"].astype("Float64").astype("Int64"),
        "Rank range (95%)": ranges,
        "Tie group": frame["tie_group"].astype("Int64").astype("string").fillna(""),
        "Model": model_links(frame),
        "Score": score,
        "95% CI": ci.where(~above, ""),
        "n": frame["n"].astype("Float64").astype("Int64"),
        "Refused": refused.map(share),
        "Type": frame["model_type"].fillna(""),
        "Size (B)": frame["parameters_billions"],
        "Date": frame["scored_at"].fillna("").str[:10],
        "Provenance": frame["provenance"].map(render.PROVENANCE),
        "Protocol": protocol,
        "Source": _sources(frame),
        "Submission": frame["submission_id"].fillna(""),
    })


def display_win_rates(wide: pd.DataFrame) -> pd.DataFrame:
    """``tables.overall``'s table for people (``WIN_COLUMNS``, then for each track in the README's order its win
    rate, "<title> win rate", and its own score, "<title> score", then the values shown beside them): the rank and
    its 95% range, the model (linked to its page, ``model_links``), the overall win rate with
    its interval (``render.WIN_RATE_FOOTNOTE`` says what a win rate is). A model alone on its tracks has no win
    rate, and its own scores."""
    if wide.empty:
        return pd.DataFrame(columns=WIN_COLUMNS)
    rank = wide.get("rank", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    why = wide.get("not_ranked", pd.Series("", index=wide.index)).fillna("")
    low = wide.get("rank_low", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    high = wide.get("rank_high", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    win_low, win_high = (wide.get(c, pd.Series(np.nan, index=wide.index)) for c in ("win_low", "win_high"))
    shown = pd.DataFrame({
        "Rank": rank,
        "Rank range (95%)": [f"not ranked: {w}" if w else rank_range(lo, hi) for lo, hi, w in zip(low, high, why)],
        "Model": model_links(wide),
        "Provenance": wide["provenance"].map(render.PROVENANCE),
        "Overall win rate": wide["win_rate"].round(3),
        "95% interval": [f"[{lo:.3f}, {hi:.3f}]" if pd.notna(lo) else "" for lo, hi in zip(win_low, win_high)],
        "Tracks": wide["tracks"].astype(int),
    })
    for column in tables.win_rate_columns(wide):
        title = track_registry.get(column).title
        shown[title + WIN_RATE] = wide[column].round(3)
        shown[title + OWN_SCORE] = wide[column + tables.SCORE].round(3) if column + tables.SCORE in wide else np.nan
    for column in tables.beside_columns(wide):
        track = track_registry.get(column.removesuffix(tables.BESIDE))
        shown[f"{track.title}: {track.headline} (not in the mean)"] = wide[column].round(3)
    return shown

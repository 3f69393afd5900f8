"""What the Overview and the Slices say beside a ranked table: the protocol it ranks under, how its ranks, intervals
and tie groups are read, the overall rule, the filters at work. Markdown; user text goes through ``render.plain``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import ranking
from benchmark import tracks as track_registry
from benchmark.suite import Suite
from benchmark.track import judge_named
from benchmark.words import counted, joined
from leaderboard import display, protocol_names, render, tables


def protocol_choices(table: pd.DataFrame, names: dict[str, str]) -> list[tuple[str, str]]:
    """The protocol picker's (label, id) pairs: the protocol's name (``protocol_names``) and its row count."""
    return [(f"{names[pid]} · {counted(rows, 'row')}"[:200], pid)
            for pid, rows in zip(table["protocol_id"], table["rows"])]


def protocol_line(chosen: str, table: pd.DataFrame, names: dict[str, str], track: str, suite: Suite) -> str:
    """The note's one line on the protocol a table is ranked under: its name and how it differs from the suite's
    (Markdown; a submitter's dataset name is escaped)."""
    row = table[table["protocol_id"] == chosen].iloc[0]
    return (f"Ranked under **{render.plain(names[chosen])}**: "
            f"{render.plain(protocol_names.difference(track, row['protocol'], suite))}")


def protocol_note(table: pd.DataFrame | None, chosen: str | None, track: str,
                  names: dict[str, str] | None = None) -> str:
    """The details of the protocol shown (Markdown; the dataset is the submitter's text, escaped) and how rank
    intervals are read: what the note's line says in full, one click away."""
    if table is None or chosen is None:
        return ""
    row = table[table["protocol_id"] == chosen].iloc[0]
    others = len(table) - 1
    status = ("the track's headline protocol" if row["on_protocol"] else "not the track's headline protocol, "
              f"which is: {render.plain(track_registry.get(track).protocol.describe())}")
    if row["suite"]:
        status = f"the suite's protocol for this track, and {status}"
    name = f"**{render.plain(names[chosen])}**, id " if names else "Protocol "
    return (f"{name}{render.code(chosen)} ({status}): {render.plain(tables.describe_protocol(row['protocol']))}. "
            + (f"{counted(others, 'other protocol')} {'is' if others == 1 else 'are'} one choice away "
               "(picker above), never mixed in."
               if others else "") + "\n\n" + RANKS_IN_WORDS + " Paper rows of other protocols are listed below, "
            "not ranked.")


# How a ranked table's ranks, intervals and tie groups are read (the Overview and Slices notes; About says more).
RANKS_IN_WORDS = (
    "**One set of prompts, the protocol's**: each model's score, CI, rank and rank range come from the same "
    "prompts, the protocol's (the note below gives their number), whoever submitted first. **Withholding never "
    "pays**: a prompt a model did not answer (refused or missing) counts as the metric's worst value, so leaving "
    "prompts out can only lower a score, and **Refused** gives each row's share of such prompts (\"mostly refused\" "
    f"past {ranking.MOSTLY_REFUSED:.0%}; on a track without a worse end, such a row is listed apart, not ranked). "
    f"**Rank** (rank rule {ranking.RULE_VERSION}, LMArena's): 1 + the models significantly better on those prompts, "
    "compared prompt by prompt (an exact sign test of the prompts each wins, with the better score), every pair of "
    f"the table at {ranking.CONFIDENCE:.0%} together; a model above one that is above a third is above it too, so "
    "models at one rank never differ significantly. **Rank range**, e.g. 2-5: from that rank to the number of "
    "models less those significantly worse, the ranks the comparisons allow. **Tie group**: the models sharing a "
    f"rank. Below {ranking.MIN_PROMPTS} prompts nothing is ranked: the values are shown. A side of a 95% CI the "
    "prompts cannot bound says so (\"not bounded by n prompts\"). One submission per model is ranked, its latest.")


def direction(higher: bool, directed: bool = True) -> str:
    """Which way a table reads: "higher is better", or for a track with no better end (``Track.not_in_overall``,
    variability) its order and the overall's words for it, so the track's table, its paper card and the overall
    agree."""
    end = "higher" if higher else "lower"
    return f"{end} is better" if directed else f"ordered {end} first: neither end is better, no direction to win on"


@dataclass(frozen=True)
class LeftOut:
    """Headline rows of one track and protocol that the overall leaves out (``tables.overall``): the track, the
    protocol's name (``protocol_names``), how it differs from the protocol the overall takes, in a sentence
    (``protocol_names.difference``), and how many models' rows."""

    track: str
    protocol: str
    why: str
    models: int


def left_out_line(left: list[LeftOut]) -> str:
    """One sentence for the overall's first lines: which tracks' rows it leaves out (the details say why); '' for
    none."""
    if not left:
        return ""
    models = {}
    for item in left:
        models[item.track] = models.get(item.track, 0) + item.models
    said = [f"{render.plain(track_registry.get(t).title)} ({counted(n, 'model')})" for t, n in models.items()]
    return (f"**Left out**: the rows of {joined(said)} scored under another protocol than the one each track "
            "enters the overall with; the details below say which and why, and each track's own table ranks them.")


def left_out_note(left: list[LeftOut]) -> str:
    """Each track and protocol whose rows the overall leaves out, named, with why in words (Markdown)."""
    if not left:
        return ""
    lines = [f"- **{render.plain(track_registry.get(item.track).title)}** under **{render.plain(item.protocol)}** "
             f"({counted(item.models, 'model')}): {render.plain(item.why[:1].lower() + item.why[1:])}"
             for item in left]
    return ("**Left out of the overall**: a track's rows enter it under one protocol, the suite's for that track "
            "(else the track's headline protocol, else the papers'), so that every model in it is compared on the "
            "same prompts, images and judge; rows scored otherwise stay on their track's own table (pick the track "
            "above, then the protocol):\n" + "\n".join(lines))


def overall_note(chosen: str, sets: list[tuple[str, int]], left: list[LeftOut], basis: str = "") -> str:
    """The overall view's note: the rule, the track set shown and the others, the tracks left out (their value
    shown beside), what each track's win rates rest on (``tables.win_rates``' note), and the rows of other
    protocols left out, each track and protocol named with why (``left_out_note``)."""
    left_note = left_out_note(left)
    if not sets:
        return ("No model has been scored on the suite's tracks yet (or the filters hide every one): a submission "
                "scored on the suite appears here, with its own score on each track (see **Submit**); ranks appear "
                "once a second model on the same tracks is scored." + (f"\n\n{left_note}" if left_note else ""))
    others = ", ".join(f"{render.plain(s)} ({n})" for s, n in sets if s != chosen)
    left_out = " ".join(f"{render.plain(t.not_in_overall[:1].upper() + t.not_in_overall[1:])}; its "
                        f"{render.plain(t.headline)} is shown in its own column, beside the mean."
                        for t in track_registry.all_tracks().values() if t.not_in_overall)
    return ("**Mean win rate** (the rule of Stanford's HEIM benchmark): on each track's headline metric (overall "
            "slice; the track's rows of one protocol: the suite's part for that track when it has rows, so a "
            "model's suite submission is one row across the tracks, else the track's headline protocol, else the "
            "papers'; never the metric scored on other prompts, nor by another judge), the share of the other models "
            "a model beats on that track's ranking (its own table's prompts, a prompt left unanswered counting as "
            "the worst value), ties counting half; a model not ranked on a track leaves that track's comparison. "
            "Only models scored on the same set of tracks are ranked together: here "
            f"**{render.plain(chosen)}**" + (f"; other sets (models): {others}" if others else "") +
            ". A track's win rates come from the comparisons behind its ranks (rank rule "
            f"{ranking.RULE_VERSION}: a model beats those significantly worse, ties half with those it cannot be "
            "told from), each track's pairs decided at 95% shared out over the tracks, so that the win-rate ranges "
            "hold together; the overall rank is 1 + the models whose range lies wholly above. Paper rows have no "
            "per-prompt values and get no range. Reported and scored rows of one model are kept apart. " + left_out +
            (f" {render.plain(basis[:1].upper() + basis[1:])}." if basis else "") +
            (f"\n\n{left_note}" if left_note else ""))


def overall_line(chosen: str, protocols: dict[str, str], models: int = 2, left: list[LeftOut] = ()) -> str:
    """The overall view's first line: what the ranking is, over which tracks, and under which protocol each track's
    rows are (``protocols``: track -> the protocol's name), said once when they all share it; with one model
    (``models``), that it is shown with its own scores, unranked, until a second is scored on the same tracks; and
    which tracks' rows are left out (``left_out_line``)."""
    tracks = chosen.split(" + ")
    titles = {t: track_registry.get(t).title for t in tracks}
    named = set(protocols.values())
    under = (f"every track's rows under **{render.plain(named.pop())}**" if len(named) == 1 else
             "; ".join(f"{render.plain(titles[t])} under **{render.plain(n)}**" for t, n in protocols.items()))
    over = f"{counted(len(tracks), 'track')} ({render.plain(joined(list(titles.values())))})"
    out = f"\n\n{line}" if (line := left_out_line(list(left))) else ""
    if models < 2:
        return (f"**One model scored** on {over}, {under}: its own score on each track is shown, unranked; "
                f"{tables.LONE}. A track's score links to its table.{out}")
    return (f"**Mean win rate** over {over}: on each, the share of the other models a model beats on that track's "
            f"ranking; higher is better. Ranked on {under}.{out}")


def agreement_note(table: pd.DataFrame, metric: str, version: str | None) -> str:
    """The sentence beside a judged metric's ranking (``version``, the ranked protocol's metric version, names a
    judge: ``benchmark.track.judge_named``) on how far that judge agrees with the CulturalFrames raters, as
    ``culturelens meta-eval --store`` measured it for this very version (``meta_eval.agreement``: alignment, every
    country): per image (Spearman ρ with its CI, against the raters' own ceiling) and per model (the judge's order
    of the CulturalFrames models against the raters'), which a ranking of models needs and per-image agreement does
    not give; "not measured for this judge" where no run measured it. '' for a metric no judge scores."""
    from benchmark.expectations import meta_eval

    judge = judge_named(version)
    if judge is None:
        return ""
    head = f" **Agreement of the judge {render.code(render.public_judge(judge))} with the CulturalFrames raters**"
    row = meta_eval.agreement(table, metric, version=version)
    if row is None:
        command = render.code(f"culturelens meta-eval --results ... --metrics {metric} --store STORE")
        return (f"{head}: not measured for this judge ({command} measures it; a table of another judge or version "
                "says nothing of this one).")
    if pd.isna(row["spearman"]):
        rho = "undefined (the metric's values or the raters' do not vary)"
    else:
        interval = f" [{row['ci_low']:.2f}, {row['ci_high']:.2f}]" if pd.notna(row["ci_low"]) else ""
        rho = f"{row['spearman']:.2f}{interval}"
    ceiling = f", against {row['ceiling']:.2f} between raters" if pd.notna(row["ceiling"]) else ""
    models = row.get("models")
    if pd.notna(row.get("model_spearman", np.nan)):
        order = (f"per model, Spearman ρ {row['model_spearman']:.2f} between its order of the {int(models)} "
                 "CulturalFrames models and the raters' (1: the same order, -1: reversed)")
    else:
        order = "per model: not measured (no model column in that run, or fewer than 3 models)"
    return (f"{head} (alignment, `culturelens meta-eval`): per image, Spearman ρ {rho} over {int(row['n']):,} "
            f"images{ceiling}; {order} (Metrics tab).")


def empty_track_note(track: str) -> str:
    """Why a registered track shows no rows: nothing scored on it yet, and no paper table copied for it."""
    title = render.plain(track_registry.get(track).title)
    return (f"No {title} results yet: no submission has been scored on this track, and this leaderboard copies no "
            "paper table for it. The **Metrics** tab's method page says how it is measured; the **Submit** tab says "
            "how to take part.")


def filters_label(filters: tables.Filters, columns) -> str:
    """The filter panel's title: which filters are active (each may hide rows; the note counts them)."""
    active = [name for name, on in (("model search", filters.models), ("model type", filters.types),
                                    ("size", filters.size_min is not None or filters.size_max is not None),
                                    ("date", filters.since), ("provenance", filters.provenance)) if on]
    if columns and set(columns) != set(display.SHOWN_COLUMNS):
        active.append(f"{len(columns)} of {len(display.RANK_COLUMNS)} columns chosen")
    return "Filters and columns (" + (f"{len(active)} active: {', '.join(active)}" if active else
                                      "none active: every row is shown") + ")"

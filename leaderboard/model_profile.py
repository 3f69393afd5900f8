"""One model's place on the leaderboard, for its page, badge and card: where it stands overall (rank of how many,
mean win rate, the protocol and the date the ranking stands at), per track (rank, interval, win rate), its best and
worst countries, its papers' rows and its submissions. Every number is a table's own: the overall is
``tables.overall`` (the Overview's), a track's row is ``tables.ranked`` on its headline metric (the Overview's and the
``/leaderboard`` API's default protocol), the countries are ``world_map.country_rows`` (the Slices table's).

A model is named by its name, as the tables rank it (one row per model and provenance); its page's address is
``links.model_page``. A name that is no model's finds nothing (``known`` says so), and is never looked up elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import tracks as track_registry
from benchmark.datasets.prompts import DatasetUnavailable
from leaderboard import display, paper_tables, tables, world_map
from leaderboard.catalog import Catalog

TOP = 3  # best and worst countries a page shows, each with its lowest- and highest-scored image (``examples``)


def names(cat: Catalog) -> list[str]:
    """Every model the leaderboard has a row of (scored or a paper's), by name."""
    frame = cat.query("SELECT DISTINCT model FROM aggregates WHERE model IS NOT NULL")
    return sorted(frame["model"], key=str.casefold)


def known(cat: Catalog, asked: object) -> str | None:
    """The model ``asked`` names: a model's name, else the Hub id or URL its rows record (``model_id``); None for
    anything else (not text, too long, no model's)."""
    if not isinstance(asked, str) or not asked.strip() or len(asked) > 300:
        return None
    every = names(cat)
    if asked in every:
        return asked
    ids = cat.query("SELECT model, model_id FROM aggregates WHERE model_id = ? LIMIT 1", [asked.strip()])
    return ids["model"].iloc[0] if len(ids) else None


def model_id(cat: Catalog, model: str) -> str | None:
    """The Hub id or URL the model's rows record (``links.model_url`` makes it a link when it is one)."""
    frame = cat.query("SELECT max(model_id) AS model_id FROM aggregates WHERE model = ?", [model])
    return frame["model_id"].iloc[0] if len(frame) and pd.notna(frame["model_id"].iloc[0]) else None


@dataclass(frozen=True)
class Standing:
    """Where a model stands in the overall ranking (the mean win rate over the tracks of its track set): rank (None
    when not ranked, ``why`` says why), its 95% range, how many models the ranking holds, the mean win rate and its
    interval, the track set, the protocol's name and the date of the newest result the ranking rests on."""

    rank: int | None
    rank_low: int | None
    rank_high: int | None
    models: int
    win_rate: float | None
    win_low: float | None
    win_high: float | None
    why: str
    track_set: str
    protocol: str
    date: str

    @property
    def short(self) -> str:
        """'rank 3 of 12', or 'not ranked'."""
        return f"rank {self.rank} of {self.models}" if self.rank is not None else "not ranked"


def _whole(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def standing(overall: tuple, model: str, protocol: str) -> Standing | None:
    """``model``'s row of the overall ranking (``overall``: what ``tables.overall`` gives with its default track
    set, the Overview's), its scored row where it has one; None when the ranking does not hold it (its track set is
    another, or it has no scored headline row). ``protocol``: the name of what the ranking ranks under (the
    suite's)."""
    wide, _, chosen, _ = overall
    mine = wide[wide["model"] == model].sort_values("provenance", key=lambda p: p.ne("scored"), kind="stable")
    if mine.empty:
        return None
    row = mine.iloc[0]
    dates = [str(frame["scored_at"].dropna().max())[:10] for frame in wide.attrs.get("ranked", {}).values()
             if "scored_at" in frame and frame["scored_at"].notna().any()]
    ranked = int((wide["not_ranked"].fillna("") == "").sum())
    return Standing(_whole(row.get("rank")), _whole(row.get("rank_low")), _whole(row.get("rank_high")), ranked,
                    _number(row.get("win_rate")), _number(row.get("win_low")), _number(row.get("win_high")),
                    str(row.get("not_ranked") or ""), chosen, protocol, max(dates) if dates else "")


PROFILE_COLUMNS = ["Track", "Metric", "Rank", "Rank range (95%)", "Score", "95% CI", "Win rate", "Models ranked"]


def profile(cat: Catalog, overall: tuple, model: str) -> pd.DataFrame:
    """Per track (in the README's order) ``model``'s row of the track's headline metric on its whole prompt set, as
    the Overview's table and the ``/leaderboard`` API rank it (``tables.ranked`` with its defaults): its rank, range,
    score with interval, its win rate on the track (``overall``'s, what ``tables.overall`` gives), and how many
    models are ranked there."""
    wide = overall[0]
    mine = wide[wide["model"] == model].sort_values("provenance", key=lambda p: p.ne("scored"), kind="stable")
    rows = []
    for track in tables.tracks(cat):
        headline = track_registry.get(track).headline
        frame, _ = tables.ranked(cat, track, headline)
        frame = frame[~frame["beside"].astype(bool) & ~frame["not_ranked"].str.startswith(world_map.EARLIER)]
        row = frame[frame["model"] == model].sort_values("provenance", key=lambda p: p.ne("scored"), kind="stable")
        if row.empty:
            continue
        row = row.iloc[0]
        rate = mine[track].iloc[0] if len(mine) and track in mine.columns else np.nan
        why = row["not_ranked"]
        rows.append({
            "Track": track_registry.get(track).title, "Metric": str(row["metric_label"] or headline),
            "Rank": _whole(row["rank"]),
            "Rank range (95%)": f"not ranked: {why}" if why else display.rank_range(row["rank_low"], row["rank_high"]),
            "Score": None if pd.isna(row["value"]) else round(float(row["value"]), 3),
            "95% CI": display.interval_text(row["ci_low"], row["ci_high"], row["n"]),
            "Win rate": None if pd.isna(rate) else round(float(rate), 3),
            "Models ranked": int((frame["not_ranked"] == "").sum())})
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def mapped(cat: Catalog, model: str) -> tuple[str, str, str, pd.DataFrame] | None:
    """The first track (README's order) whose headline metric has values by country for ``model``: (track, metric,
    its label, ``world_map.country_rows``); None when none has."""
    for track in tables.tracks(cat):
        metric = track_registry.get(track).headline
        if world_map.COUNTRY not in tables.slice_names(cat, track, metric):
            continue
        rows = world_map.country_rows(cat, track, metric)
        if model in set(rows["model"]):
            label = dict((m, text) for text, m in tables.metrics(cat, track)).get(metric, metric)
            return track, metric, label, rows
    return None


def best_and_worst(rows: pd.DataFrame, model: str, top: int = TOP) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``model``'s best and worst countries of ``rows`` (``world_map.country_rows``) by its value (the best
    first, the worst first): at most ``top`` of each, and never a country in both (of 5 countries, the best 3 and
    the worst 2; of 2, one each)."""
    mine = world_map.of_model(rows, model)
    mine = mine[mine["value"].notna()]
    higher = tables.higher_is_better(rows) if len(rows) else True
    ordered = mine.sort_values("value", ascending=not higher, kind="stable")
    best = ordered.head(min(top, -(-len(ordered) // 2)))
    worst = ordered.iloc[len(best):].tail(top)
    return best, worst.iloc[::-1]


@dataclass(frozen=True)
class Example:
    """An image of one of a model's best or worst countries (``side``): the ``which`` ('lowest' or 'highest')
    scored of that country's images in the submission its row was scored from, with its prompt and its value."""

    side: str
    country: str
    which: str
    submission_id: str
    image_path: str
    prompt: str
    value: float


def examples(cat: Catalog, metric: str, best: pd.DataFrame, worst: pd.DataFrame) -> list[Example]:
    """For each of the best and worst countries (``best_and_worst``' rows, by country) a scored row stands on: the
    lowest- and highest-scored of that country's images (its per-image values of ``metric``; ties by prompt and
    seed) in the row's submission. No example for a paper's row, nor for a metric with no per-image values (a
    prompt-level one)."""
    out = []
    for side, part in (("best", best), ("worst", worst)):
        for country, row in part.iterrows():
            if row.get("provenance") != "scored" or not isinstance(row.get("submission_id"), str):
                continue
            sid = row["submission_id"]
            images = cat.per_image([sid], "metric = ? AND country = ? AND value IS NOT NULL AND image_path IS NOT "
                                   "NULL", [metric, country])
            if images.empty:
                continue
            images = images.sort_values(["value", "prompt_id", "seed"], kind="stable")
            texts = _prompt_texts(cat, sid)
            picks = [("lowest", images.iloc[0]), ("highest", images.iloc[-1])] if len(images) > 1 else \
                [("only", images.iloc[0])]
            out += [Example(side, country, which, sid, str(image["image_path"]),
                            texts.get(image["prompt_id"], str(image["prompt_id"])), float(image["value"]))
                    for which, image in picks]
    return out


def _prompt_texts(cat: Catalog, submission_id: str) -> dict[str, str]:
    """A submission's prompts' texts as the store serves them, by prompt id (empty when no longer served)."""
    try:
        texts = pd.concat([p.table["prompt"] for p in cat.store.prompt_sets(submission_id)])
    except (DatasetUnavailable, OSError, ValueError, KeyError):
        return {}
    return {str(k): str(v) for k, v in texts.items()}


def paper_rows(cat: Catalog, model: str) -> pd.DataFrame:
    """The papers' rows of a model of the same name (case and spaces aside): track, metric, slice, value, source."""
    frame = paper_tables.paper_rows(cat)
    same = frame["model"].str.casefold().str.strip() == model.casefold().strip()
    return frame[same][["track", "metric_label", "slice", "slice_value", "value", "citation", "source_table"]]


def submissions(cat: Catalog, model: str) -> pd.DataFrame:
    """The model's scored submissions: id, datasets, date scored."""
    frame = tables.submissions(cat)
    return frame[frame["model"] == model][["submission_id", "dataset", "scored_at"]].reset_index(drop=True)

"""The leaderboard's tables, as queries over the catalog (all reads; results on disk are never modified).

Ranking: best first by the metric's direction, ties share a rank. The ``≈`` marker says a row's 95% CI overlaps
the next row's: the two are not distinguishable at this sample size by the CIs (a conservative reading; the
paired Wilcoxon test of ``culturelens compare`` is the sharper one). Win rate (as HEIM's "mean win rate"): for
each track's headline metric on the overall slice, the share of the other models a model beats (ties count
half); the overall score is the mean over the tracks a model has a score on, and the table says how many.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import citations
from leaderboard import tracks as track_registry
from leaderboard.catalog import Catalog

OVERALL = "overall"
# The columns the views read (never SELECT *: the catalog holds every provenance field).
COLUMNS = ("track, metric, slice, slice_value, model, value, ci_low, ci_high, n, model_type, parameters_billions, "
           "scored_at, provenance, citation, source_table, higher_is_better, harness_version, backbone, seeds, "
           "submission_id")
HEATMAP_MODELS = 40  # rows of a heatmap: the best models on the slice's mean (filters choose others)
RANK_COLUMNS = ["Rank", "Model", "Score", "95% CI", "≈", "n", "Type", "Size (B)", "Date", "Provenance", "Source",
                "Submission"]
WIN_COLUMNS = ["Rank", "Model", "Provenance", "Mean win rate", "Tracks"]
MAX_TERMS = 20  # model search terms a filter uses
MAX_TERM_CHARS = 100  # characters of each (a model name is at most 100)


@dataclass(frozen=True)
class Filters:
    """What a visitor narrows the rows to; empty means everything."""

    models: tuple[str, ...] = ()  # case-insensitive substrings, any of them matches
    types: tuple[str, ...] = ()  # "open", "closed", "unknown"
    size_min: float | None = None  # billions of parameters; rows of unknown size are hidden when a bound is set
    size_max: float | None = None
    since: str | None = None  # ISO date: scored on or after (reported rows have no date and are kept)
    provenance: tuple[str, ...] = ()  # "scored", "reported"
    ignored_terms: int = 0  # search terms past MAX_TERMS (the note says so)

    @classmethod
    def parse(cls, models: str = "", types=(), size_min=None, size_max=None, since: str = "", provenance=()):
        """Filters from the controls' values. The model search is bounded (``MAX_TERMS`` terms of at most
        ``MAX_TERM_CHARS`` characters): each term is one pass over the rows, and a request is not a workload."""
        text = models if isinstance(models, str) else ""
        terms = list(dict.fromkeys(t.strip()[:MAX_TERM_CHARS] for t in text.replace(";", ",").split(",") if t.strip()))
        number = lambda v: float(v) if v not in (None, "") else None  # noqa: E731
        return cls(tuple(terms[:MAX_TERMS]), tuple(types or ()), number(size_min), number(size_max),
                   (since or "").strip() or None, tuple(provenance or ()), max(len(terms) - MAX_TERMS, 0))

    def apply(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
        """The rows kept, and a sentence saying how many each filter hid ('' if none)."""
        hidden = []
        keep = pd.Series(True, index=frame.index)

        def narrow(mask: pd.Series, what: str):
            nonlocal keep
            dropped = int((keep & ~mask).sum())
            if dropped:
                hidden.append(f"{dropped} by {what}")
            keep &= mask

        if self.models:
            names = frame["model"].fillna("").str.casefold()
            narrow(pd.concat([names.str.contains(t.casefold(), regex=False) for t in self.models], axis=1).any(axis=1),
                   "model search")
        if self.types:
            narrow(frame["model_type"].fillna("unknown").isin(self.types), "model type")
        if self.size_min is not None or self.size_max is not None:
            size = frame["parameters_billions"]
            mask = size.notna()
            if self.size_min is not None:
                mask &= size >= self.size_min
            if self.size_max is not None:
                mask &= size <= self.size_max
            narrow(mask.fillna(False), "size (unknown sizes hidden)")
        if self.since:
            date = frame["scored_at"].fillna("")
            narrow((date == "") | (date.str[:10] >= self.since), "date")
        if self.provenance:
            narrow(frame["provenance"].isin(self.provenance), "provenance")
        note = f"{int((~keep).sum())} row(s) hidden: " + ", ".join(hidden) + "." if hidden else ""
        if self.ignored_terms:
            note = (note + " " if note else "") + (f"Only the first {MAX_TERMS} model search terms were used "
                                                   f"({self.ignored_terms} more ignored).")
        return frame[keep], note


def tracks(cat: Catalog) -> list[str]:
    present = set(cat.query("SELECT DISTINCT track FROM aggregates")["track"])
    registered = [t for t in track_registry.REGISTRY if t in present]
    return registered + sorted(present - set(registered))


def metrics(cat: Catalog, track: str) -> list[tuple[str, str]]:
    """(label, metric) pairs of a track: the headline first, then scored metrics, then reported-only ones."""
    frame = cat.query(
        "SELECT metric, coalesce(min(metric_label) FILTER (WHERE provenance = 'scored'), min(metric_label)) AS label,"
        " max(CASE WHEN provenance = 'scored' THEN 1 ELSE 0 END) AS scored"
        " FROM aggregates WHERE track = ? GROUP BY metric", [track])
    headline = track_registry.get(track).headline
    frame["first"] = frame["metric"] == headline
    frame = frame.sort_values(["first", "scored", "metric"], ascending=[False, False, True])
    return list(zip(frame["label"], frame["metric"]))


def slice_names(cat: Catalog, track: str, metric: str) -> list[str]:
    """The slices a metric has (overall first)."""
    names = cat.query("SELECT DISTINCT slice FROM aggregates WHERE track = ? AND metric = ?", [track, metric])["slice"]
    return sorted(names, key=lambda s: (s != OVERALL, s))


def slice_values(cat: Catalog, track: str, metric: str, slice_name: str) -> list[str]:
    return list(cat.query("SELECT DISTINCT slice_value FROM aggregates WHERE track = ? AND metric = ? AND slice = ?"
                          " ORDER BY slice_value", [track, metric, slice_name])["slice_value"])


def _rank(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame.assign(rank=pd.Series(dtype=int), overlaps_next=pd.Series(dtype=bool))
    higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() else True
    key = -frame["value"] if higher else frame["value"]
    # A null value (e.g. "not reached within k") has no rank and sorts last.
    frame = frame.assign(rank=key.rank(method="min").astype("Int64")).sort_values(
        ["rank", "model"], kind="stable", na_position="last")
    low, high = frame["ci_low"].to_numpy(), frame["ci_high"].to_numpy()
    overlaps = np.zeros(len(frame), dtype=bool)
    overlaps[:-1] = (~np.isnan(low[:-1]) & ~np.isnan(low[1:]) & (low[:-1] <= high[1:]) & (low[1:] <= high[:-1]))
    return frame.assign(overlaps_next=overlaps).reset_index(drop=True)


def ranked(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL, slice_value: str = "all",
           filters: Filters = Filters()) -> tuple[pd.DataFrame, str]:
    """The ranked rows of one metric and slice (after filters), and the note on what the filters hid."""
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    frame, note = filters.apply(frame)
    return _rank(frame), note


def _sources(frame: pd.DataFrame) -> pd.Series:
    """Where each row comes from: the paper and table, or the harness version, backbones and seeds."""
    reported = frame["citation"].map(lambda c: citations.SHORT.get(c, c)).fillna("") + ", " + \
        frame["source_table"].fillna("")
    seeds = frame["seeds"].fillna("").str.split(",")
    seeds = seeds.map(lambda s: s[0] if len(s) == 1 else f"{s[0]}-{s[-1]} ({len(s)})")
    scored = "CultureLens " + frame["harness_version"].fillna("") + ", " + frame["backbone"].fillna("") + \
        ", seeds " + seeds
    return reported.where(frame["provenance"] == "reported", scored)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """``ranked`` rows for people: rounded scores, the CI as text, the marker, a source per row."""
    if frame.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    ci = ("[" + frame["ci_low"].map("{:.3f}".format) + ", " + frame["ci_high"].map("{:.3f}".format) + "]")
    return pd.DataFrame({
        "Rank": frame["rank"].astype("Int64"),
        "Model": frame["model"],
        "Score": frame["value"].round(3),
        "95% CI": ci.where(frame["ci_low"].notna(), ""),
        "≈": np.where(frame["overlaps_next"], "≈", ""),
        "n": frame["n"].astype("Int64"),
        "Type": frame["model_type"].fillna(""),
        "Size (B)": frame["parameters_billions"],
        "Date": frame["scored_at"].fillna("").str[:10],
        "Provenance": frame["provenance"].map({"reported": "📄 reported", "scored": "⚙️ scored"}),
        "Source": _sources(frame),
        "Submission": frame["submission_id"].fillna(""),
    })


def headline_rows(cat: Catalog, filters: Filters = Filters(), slice_name: str = OVERALL,
                  slice_value: str = "all") -> pd.DataFrame:
    """Each track's headline metric on one slice: one row per model (its latest scored submission)."""
    pairs = [(t, track_registry.get(t).headline) for t in tracks(cat) if track_registry.get(t).headline]
    if not pairs:
        return pd.DataFrame()
    frame = cat.query(
        f"SELECT {COLUMNS} FROM aggregates WHERE slice = ? AND slice_value = ? AND list_contains(?, track || '/' || "
        "metric)", [slice_name, slice_value, [f"{t}/{m}" for t, m in pairs]])
    frame, _ = filters.apply(frame)
    return frame.sort_values("scored_at", na_position="first").drop_duplicates(
        ["track", "model", "provenance"], keep="last")


def win_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (model, provenance): win rate on each track and their mean (HEIM's mean win rate), best first.

    On a track with m models, a model's win rate is (models it beats + ties / 2) / (m - 1); a track with one
    model gives no win rate.
    """
    out = []
    for track, group in frame.groupby("track"):
        if len(group) < 2:
            continue
        higher = bool(group["higher_is_better"].iloc[0])
        values = group["value"].to_numpy() * (1 if higher else -1)
        beats = (values[:, None] > values[None, :]).sum(axis=1) + 0.5 * ((values[:, None] == values[None, :]).sum(axis=1) - 1)
        out += [{"model": m, "provenance": p, "track": track, "win_rate": w / (len(group) - 1)}
                for m, p, w in zip(group["model"], group["provenance"], beats)]
    if not out:
        return pd.DataFrame(columns=["model", "provenance", "win_rate", "tracks"])
    per_track = pd.DataFrame(out)
    wide = per_track.pivot_table(index=["model", "provenance"], columns="track", values="win_rate")
    wide["win_rate"] = wide.mean(axis=1)
    wide["tracks"] = wide.drop(columns="win_rate").notna().sum(axis=1)
    return wide.reset_index().sort_values(["win_rate", "model"], ascending=[False, True]).reset_index(drop=True)


def display_win_rates(wide: pd.DataFrame) -> pd.DataFrame:
    if wide.empty:
        return pd.DataFrame(columns=WIN_COLUMNS)
    track_columns = [c for c in wide.columns if c not in ("model", "provenance", "win_rate", "tracks")]
    shown = pd.DataFrame({
        "Rank": wide["win_rate"].rank(ascending=False, method="min").astype(int),
        "Model": wide["model"],
        "Provenance": wide["provenance"].map({"reported": "📄 reported", "scored": "⚙️ scored"}),
        "Mean win rate": wide["win_rate"].round(3),
        "Tracks": wide["tracks"].astype(int),
    })
    for column in track_columns:
        shown[track_registry.get(column).title] = wide[column].round(3)
    return shown


def heatmap(cat: Catalog, track: str, metric: str, slice_name: str, filters: Filters = Filters()) -> pd.DataFrame:
    """Model x slice value matrix of one metric (the latest submission per model and provenance), the
    ``HEATMAP_MODELS`` best models by their mean over the slice's values, best first."""
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ?",
                      [track, metric, slice_name])
    frame, _ = filters.apply(frame)
    if frame.empty:
        return pd.DataFrame()
    frame = frame.assign(who=frame["model"] + np.where(frame["provenance"] == "reported", " 📄", ""))
    frame = frame.sort_values("scored_at", na_position="first").drop_duplicates(["who", "slice_value"], keep="last")
    matrix = frame.pivot(index="who", columns="slice_value", values="value")
    higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() else True
    order = matrix.mean(axis=1).sort_values(ascending=not higher).index
    return matrix.loc[order[:HEATMAP_MODELS]]


def submissions(cat: Catalog) -> pd.DataFrame:
    """Scored submissions: id, model, dataset, scored_at (for pickers)."""
    return cat.query("SELECT DISTINCT submission_id, model, dataset, max(scored_at) AS scored_at FROM aggregates "
                     "WHERE provenance = 'scored' GROUP BY submission_id, model, dataset ORDER BY model, scored_at")

"""The leaderboard's tables, as queries over the catalog (all reads; results on disk are never modified).

Protocols: a ranking compares the rows of one protocol only (``protocol_id``: dataset, images per prompt, the
metric's version with its settings, backbones; ``unrecorded`` for results scored before protocols were recorded).
By default it is the track's headline protocol (``benchmark.tracks``) when it has rows, else the largest; the
others are one choice away, and paper-reported rows of other protocols are listed beside, not ranked.

Ranking: best first by the metric's direction, ties share a rank. Each rank has a 95% interval from a paired
bootstrap over the prompts the scored models share (the same resampled prompts for every model; each replicate
ranked), and rows whose intervals overlap form a tie group. Win rate (HEIM's "mean win rate"): for each
track's headline metric on the overall slice, the share of the other models a model beats (ties count half; a
null value leaves the comparison); the overall score is the mean over the tracks a model has a score on, and
only models scored on the same set of tracks are ranked together.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from benchmark import results
from benchmark import tracks as track_registry
from leaderboard import links, render
from leaderboard.catalog import Catalog

OVERALL = "overall"
UNRECORDED = "unrecorded"  # the protocol id of rows scored before protocols were recorded
REPLICATES = 1000  # bootstrap replicates of a rank interval
SEED = 0  # the bootstrap's seed: the same rows always give the same intervals
# The columns the views read (never SELECT *: the catalog holds every provenance field).
COLUMNS = ("track, metric, metric_label, slice, slice_value, model, model_id, value, ci_low, ci_high, n, excluded, "
           "model_type, parameters_billions, scored_at, provenance, citation, source_table, higher_is_better, "
           "harness_version, backbone, seeds, dataset, metric_version, submission_id, protocol, "
           f"coalesce(protocol_id, '{UNRECORDED}') AS protocol_id")
HEATMAP_MODELS = 40  # rows of a heatmap: the best models on the slice's mean (filters choose others)
RANK_COLUMNS = ["Rank", "Rank range (95%)", "Tie group", "Model", "Score", "95% CI", "n", "Type", "Size (B)", "Date",
                "Provenance", "Protocol", "Source", "Submission"]
WIN_COLUMNS = ["Rank", "Rank range (95%)", "Model", "Provenance", "Overall win rate", "95% interval", "Tracks"]
# How a Dataframe shows each column of ``display`` and ``display_win_rates`` (others: text). The Markdown ones
# carry links around ``render.plain`` text: show them with math off (``latex_delimiters=[]``).
DATATYPES = {"Rank": "number", "Model": "markdown", "Score": "number", "n": "number", "Size (B)": "number",
             "Source": "markdown", "Overall win rate": "number", "Tracks": "number"}
MAX_TERMS = 20  # model search terms a filter uses
MAX_TERM_CHARS = 100  # characters of each (a model name is at most 100)


def _bound(value) -> float | None:
    """A size bound from a number box: None when empty, 0 (no model has 0 parameters) or not a number."""
    try:
        bound = float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
    return bound if bound else None


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
    ignored_since: str | None = None  # a "Scored since" that is not a date (ignored; the note says so)

    @classmethod
    def parse(cls, models: str = "", types=(), size_min=None, size_max=None, since: str = "", provenance=()):
        """Filters from the controls' values. The model search is bounded (``MAX_TERMS`` terms of at most
        ``MAX_TERM_CHARS`` characters): each term is one pass over the rows, and a request is not a workload.
        A size bound of 0 is no bound (sizes are positive; an opened panel's empty number boxes send 0), and a
        "since" that is not a date YYYY-MM-DD is ignored, never taken to hide every row."""
        text = models if isinstance(models, str) else ""
        terms = list(dict.fromkeys(t.strip()[:MAX_TERM_CHARS] for t in text.replace(";", ",").split(",") if t.strip()))
        since = (since or "").strip() if isinstance(since, str) else ""
        try:
            date = datetime.date.fromisoformat(since).isoformat() if since else None
        except ValueError:
            date = None
        return cls(tuple(terms[:MAX_TERMS]), tuple(types or ()), _bound(size_min), _bound(size_max), date,
                   tuple(provenance or ()), max(len(terms) - MAX_TERMS, 0), since if since and not date else None)

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
        if self.ignored_since:
            note = (note + " " if note else "") + (f"“Scored since” must be a date such as 2026-01-31: "
                                                   f"“{self.ignored_since[:40]}” was ignored.")
        if self.ignored_terms:
            note = (note + " " if note else "") + (f"Only the first {MAX_TERMS} model search terms were used "
                                                   f"({self.ignored_terms} more ignored).")
        return frame[keep], note


def tracks(cat: Catalog) -> list[str]:
    present = set(cat.query("SELECT DISTINCT track FROM aggregates")["track"])
    registered = [t for t in track_registry.all_tracks() if t in present]
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


def metric_id(cat: Catalog, track: str, chosen: str | None) -> str | None:
    """The metric a picker's value or a link names, by id or by label (as older links carry); when it names
    none, the one the track's Overview opens on (``tracks.Track.opens_on``) where it has rows, else the track's
    first; None for a track without metrics."""
    pairs = metrics(cat, track)
    ids = [metric for _, metric in pairs]
    named = next((metric for label, metric in pairs if chosen in (metric, label)), None)
    opens = track_registry.get(track).opens_on
    return named or (opens if opens in ids else (ids[0] if ids else None))


def overview_slice(cat: Catalog, track: str, metric: str) -> tuple[str, list[str]]:
    """The slice the Overview shows ``metric`` on, with its values (each ranked apart): the track's overview
    slice (``tracks.Track.overview_slice``) when the metric has it, else overall, else the slice with the fewest
    values (a paper that reports only per country, say): never one cell of a finer slice."""
    names = slice_names(cat, track, metric)
    values = {name: slice_values(cat, track, metric, name) for name in names}
    name = track_registry.get(track).overview_slice
    if name not in values:
        name = OVERALL if OVERALL in values else min(names, key=lambda n: (len(values[n]), n))
    return name, values[name]


def datatypes(columns) -> list[str]:
    """The Dataframe datatypes of these display columns (``DATATYPES``; text otherwise)."""
    return [DATATYPES.get(c, "str") for c in columns]


def metric_labels(cat: Catalog, submission_ids: list[str]) -> dict[str, str]:
    """metric id -> its label, for the metrics these submissions were scored on."""
    frame = cat.query("SELECT metric, min(metric_label) AS label FROM aggregates WHERE provenance = 'scored' AND "
                      "list_contains(?, submission_id) AND metric_label IS NOT NULL GROUP BY metric",
                      [list(submission_ids)])
    return dict(zip(frame["metric"], frame["label"]))


def slice_names(cat: Catalog, track: str, metric: str) -> list[str]:
    """The slices a metric has (overall first)."""
    names = cat.query("SELECT DISTINCT slice FROM aggregates WHERE track = ? AND metric = ?", [track, metric])["slice"]
    return sorted(names, key=lambda s: (s != OVERALL, s))


def slice_choices(cat: Catalog, track: str, metric: str) -> list[tuple[str, str]]:
    """A slice picker's (label, id) pairs ('country × concept', 'country_concept'), overall first."""
    return [(render.slice_label(name), name) for name in slice_names(cat, track, metric)]


def slice_values(cat: Catalog, track: str, metric: str, slice_name: str) -> list[str]:
    return list(cat.query("SELECT DISTINCT slice_value FROM aggregates WHERE track = ? AND metric = ? AND slice = ?"
                          " ORDER BY slice_value", [track, metric, slice_name])["slice_value"])


def protocols(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL,
              slice_value: str = "all") -> pd.DataFrame:
    """The protocols the rows of one metric and slice were scored under: protocol_id, protocol, rows,
    provenance and on_protocol (the track's headline protocol); on-protocol first, then the largest."""
    frame = cat.query(f"SELECT coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, any_value(protocol) AS protocol, "
                      "count(*) AS rows, min(provenance) AS provenance FROM aggregates WHERE track = ? AND metric = ? "
                      "AND slice = ? AND slice_value = ? GROUP BY 1", [track, metric, slice_name, slice_value])
    frame["on_protocol"] = [track_registry.on_protocol(track, p) for p in frame["protocol"]]
    return frame.sort_values(["on_protocol", "rows", "protocol_id"], ascending=[False, False, True],
                             ignore_index=True)


def pick_protocol(table: pd.DataFrame, wanted: str | None = None) -> str | None:
    """``wanted`` if ``protocols`` lists it, else the track's headline protocol when it has rows, else the
    protocol with the most rows (None without rows)."""
    ids = list(table["protocol_id"])
    return wanted if wanted in ids else (ids[0] if ids else None)


def describe_protocol(protocol: str | None) -> str:
    """A protocol's JSON in words (plain text: the dataset is the submitter's); 'unrecorded' for old results."""
    fields = results.protocol_fields(protocol)
    if fields is None:
        return "unrecorded (scored before protocols were recorded, or not readable)"
    images = fields.get("images_per_prompt")
    backbones = ", ".join(fields.get("backbones") or []) or "none"
    return (f"dataset {fields.get('dataset')}; {images if images is not None else 'unstated'} images per prompt; "
            f"metric version {fields.get('metric_version')}; backbones {backbones}")


def resampled(point: np.ndarray, per_prompt: np.ndarray, has: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Replicates x rows of a paired bootstrap: a row with per-prompt values (``has``; their rows of
    ``per_prompt``, rows x shared prompts, in order) takes its mean over each replicate's drawn prompts (``draws``,
    replicates x prompts: the same prompts for every row); any other row keeps its ``point`` value."""
    out = np.tile(np.asarray(point, dtype=float), (len(draws), 1))
    if has.any():
        counts = np.stack([np.bincount(d, minlength=draws.shape[1]) for d in draws])
        out[:, has] = counts @ per_prompt.T / draws.shape[1]
    return out


def replicate_ranks(values: np.ndarray, higher: bool) -> np.ndarray:
    """Per replicate (row of ``values``), each model's rank: 1 + the models strictly better; null stays null."""
    key = np.where(np.isnan(values), np.nan, -values if higher else values)
    ranks = stats.rankdata(key, axis=1, method="min", nan_policy="omit")
    return np.where(np.isnan(values), np.nan, ranks)


def interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each column: the 2.5% and 97.5% order statistics (numpy's 'lower' / 'higher')."""
    low, high = np.full(samples.shape[1], np.nan), np.full(samples.shape[1], np.nan)
    some = ~np.isnan(samples).all(axis=0)  # a column with no value in any replicate has no interval
    low[some] = np.nanquantile(samples[:, some], 0.025, axis=0, method="lower")
    high[some] = np.nanquantile(samples[:, some], 0.975, axis=0, method="higher")
    return low, high


def tie_groups(low: pd.Series, high: pd.Series) -> pd.Series:
    """Rows in rank order -> their tie group (1, 2, ...): a row starts a new group when its interval starts after
    every interval of the current group ends; rows without an interval have none."""
    groups, group, reach = [], 0, -np.inf
    for lo, hi in zip(low, high):
        if pd.isna(lo):
            groups.append(pd.NA)
            continue
        if lo > reach:
            group += 1
        reach = max(reach, hi)
        groups.append(group)
    return pd.Series(groups, index=low.index, dtype="Int64")


def _draws(n_prompts: int, rng: np.random.Generator) -> np.ndarray:
    """Replicates x prompts: the prompt indices each bootstrap replicate draws (with replacement)."""
    return rng.integers(0, n_prompts, size=(REPLICATES, n_prompts))


def _shared(cat: Catalog, frame: pd.DataFrame, metric: str, slice_name: str, slice_value: str
            ) -> tuple[np.ndarray, pd.DataFrame, str]:
    """Which rows of ``frame`` have per-prompt values, their values on the prompts all of them share (prompts x
    submissions), and why rows have none ('' if every scored row has them)."""
    has = np.zeros(len(frame), dtype=bool)
    scored = frame["provenance"].eq("scored") & frame["value"].notna() & frame["submission_id"].notna()
    values = cat.per_prompt(list(frame.loc[scored, "submission_id"]), metric)
    if len(values) and slice_name != OVERALL:
        inside = cat.prompts_in_slice(values["submission_id"].iloc[0], metric, slice_name, slice_value)
        values = values[values["prompt_id"].isin(inside or set())]
    wide = values.pivot_table(index="prompt_id", columns="submission_id", values="value")
    has[:] = scored.to_numpy() & frame["submission_id"].isin(wide.columns).to_numpy()
    shared = wide[list(frame.loc[has, "submission_id"])].dropna() if has.any() else wide.iloc[0:0]
    why = []
    if (scored.to_numpy() & ~has).any():
        why.append(f"{int((scored.to_numpy() & ~has).sum())} scored row(s) have no per-prompt values for this metric")
    if has.sum() > 1 and shared.empty:
        why.append("the scored models share no prompts, so there is no paired bootstrap")
        has[:] = False
    return has, shared, "; ".join(why)


def _rank(frame: pd.DataFrame, higher: bool) -> pd.DataFrame:
    """Rows ranked best first by value (ties share a rank; a null value has none and sorts last)."""
    key = -frame["value"] if higher else frame["value"]
    return frame.assign(rank=key.rank(method="min").astype("Int64")).sort_values(
        ["rank", "model"], kind="stable", na_position="last", ignore_index=True)


def rank_with_intervals(cat: Catalog, frame: pd.DataFrame, metric: str, slice_name: str = OVERALL,
                        slice_value: str = "all") -> tuple[pd.DataFrame, str]:
    """Rows of one protocol ranked, each with a 95% rank interval (rank_low, rank_high) from a paired bootstrap
    over the prompts the scored models share (``REPLICATES`` replicates, seed ``SEED``; rows without per-prompt
    values keep their value in every replicate and get no interval) and its tie group; and a note on the
    rows without an interval."""
    higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() else True
    frame = _rank(frame, higher)
    has, shared, why = _shared(cat, frame, metric, slice_name, slice_value)
    low = high = np.full(len(frame), np.nan)
    if has.any():
        draws = _draws(len(shared), np.random.default_rng(SEED))
        ranks = replicate_ranks(resampled(frame["value"].to_numpy(), shared.to_numpy().T, has, draws), higher)
        low, high = (np.where(has, bound, np.nan) for bound in interval(ranks))
    frame = frame.assign(rank_low=pd.array(low, dtype="Float64").astype("Int64"),
                         rank_high=pd.array(high, dtype="Float64").astype("Int64"))
    reported = int(frame["provenance"].eq("reported").sum())
    notes = [why] if why else []
    if reported:
        notes.append(f"{reported} paper-reported row(s) have no per-prompt values: ranked by their value, no interval")
    return frame.assign(tie_group=tie_groups(frame["rank_low"], frame["rank_high"])), "; ".join(notes)


def ranked(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL, slice_value: str = "all",
           filters: Filters = Filters(), protocol_id: str | None = None) -> tuple[pd.DataFrame, str]:
    """The rows of one metric, slice and protocol (``pick_protocol``), after filters, ranked with rank intervals
    (``rank_with_intervals``), then the paper-reported rows of other protocols, unranked (``beside``); and the
    note on what the filters hid and which rows have no interval."""
    chosen = pick_protocol(protocols(cat, track, metric, slice_name, slice_value), protocol_id)
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    frame, note = filters.apply(frame)
    frame = frame.assign(on_protocol=[track_registry.on_protocol(track, p) for p in frame["protocol"]])
    mine = frame["protocol_id"] == chosen
    ranks, why = rank_with_intervals(cat, frame[mine], metric, slice_name, slice_value) if mine.any() else \
        (frame[mine].assign(rank=pd.Series(dtype="Int64")), "")
    beside = frame[~mine & (frame["provenance"] == "reported")].assign(beside=True)
    out = pd.concat([ranks.assign(beside=False), beside], ignore_index=True) if len(beside) else \
        ranks.assign(beside=False)
    return out, " ".join(n for n in (note, why and f"No rank interval: {why}.") if n)


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
    """Each row's model name as Markdown, linked to its page where its ``model_id`` is a Hub id or an http(s)
    URL (``leaderboard.links``)."""
    ids = frame["model_id"] if "model_id" in frame.columns else pd.Series(None, index=frame.index)
    return [render.link(name, links.model_url(i)) for name, i in zip(frame["model"], ids)]


def rank_range(low, high) -> str:
    """'2–4': the 95% interval of a rank ('3' when it is one rank); '' without one."""
    if pd.isna(low):
        return ""
    return f"{low}" if low == high else f"{low}–{high}"


def who(frame: pd.DataFrame) -> pd.Series:
    """A row's model as a chart or heatmap names it: paper rows marked '(paper)', as one model may be both."""
    return frame["model"] + np.where(frame["provenance"] == "reported", " (paper)", "")


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """``ranked`` rows for people: the rank and its 95% range, tie group, the model linked to its page, rounded
    scores, the CI as text, the provenance as a word, the protocol (headline or off-protocol; rows beside marked
    not ranked), a source per row (Markdown columns: ``DATATYPES``). Typed rows: ``leaderboard.exports``."""
    if frame.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    ci = ("[" + frame["ci_low"].map("{:.3f}".format) + ", " + frame["ci_high"].map("{:.3f}".format) + "]")
    low, high = (frame[c].astype("Float64").astype("Int64") for c in ("rank_low", "rank_high"))
    ranges = [rank_range(lo, hi) for lo, hi in zip(low, high)]
    protocol = frame["protocol_id"] + np.where(frame["on_protocol"], " (headline)", " (off-protocol)")
    return pd.DataFrame({
        "Rank": frame["rank"].astype("Float64").astype("Int64"),
        "Rank range (95%)": np.where(frame["beside"], "not ranked: other protocol", ranges),
        "Tie group": frame["tie_group"].astype("Int64").astype("string").fillna(""),
        "Model": model_links(frame),
        "Score": frame["value"].round(3),
        "95% CI": ci.where(frame["ci_low"].notna(), ""),
        "n": frame["n"].astype("Int64"),
        "Type": frame["model_type"].fillna(""),
        "Size (B)": frame["parameters_billions"],
        "Date": frame["scored_at"].fillna("").str[:10],
        "Provenance": frame["provenance"].map(render.PROVENANCE),
        "Protocol": protocol,
        "Source": _sources(frame),
        "Submission": frame["submission_id"].fillna(""),
    })


def headline_rows(cat: Catalog, filters: Filters = Filters(), slice_name: str = OVERALL,
                  slice_value: str = "all") -> pd.DataFrame:
    """Each track's headline metric on one slice: one row per model, provenance and protocol (its latest)."""
    pairs = [(t, track_registry.get(t).headline) for t in tracks(cat) if track_registry.get(t).headline]
    if not pairs:
        return pd.DataFrame()
    frame = cat.query(
        f"SELECT {COLUMNS} FROM aggregates WHERE slice = ? AND slice_value = ? AND list_contains(?, track || '/' || "
        "metric)", [slice_name, slice_value, [f"{t}/{m}" for t, m in pairs]])
    frame, _ = filters.apply(frame)
    return frame.sort_values("scored_at", na_position="first").drop_duplicates(
        ["track", "model", "provenance", "protocol_id"], keep="last")


def headline_protocol_rows(cat: Catalog, frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``headline_rows`` kept to each track's chosen protocol (``pick_protocol``), and how many were left out."""
    keep = pd.Series(False, index=frame.index)
    for track in frame["track"].unique():
        chosen = pick_protocol(protocols(cat, track, track_registry.get(track).headline))
        keep |= (frame["track"] == track) & (frame["protocol_id"] == chosen)
    return frame[keep], int((~keep).sum())


def track_win_rates(values: np.ndarray, higher: bool) -> np.ndarray:
    """Replicates x models -> each model's win rate in each replicate (HEIM): the share of the other models with
    a value it beats, ties counting half. A null value leaves the comparison: it has no win rate and is not
    counted in the others' denominators; with fewer than two values, none has one."""
    key = np.where(np.isnan(values), np.nan, values if higher else -values)
    m = (~np.isnan(key)).sum(axis=1, keepdims=True)
    below = stats.rankdata(key, axis=1, method="average", nan_policy="omit") - 1  # beaten + ties / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = below / (m - 1)
    return np.where(np.isnan(key) | (m < 2), np.nan, rates)


def track_sets(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (model, provenance) of headline rows: the set of tracks it has a row on, as text ('a + b')."""
    return frame.groupby(["model", "provenance"])["track"].agg(lambda t: " + ".join(sorted(set(t)))).rename(
        "track_set").reset_index()


def win_rates(frame: pd.DataFrame, cat: Catalog | None = None) -> pd.DataFrame:
    """Per (model, provenance): win rate on each track, their mean (HEIM's mean win rate) over the tracks it has
    one on, and ``tracks``; best first. With ``cat``, also a 95% interval on the mean win rate (win_low,
    win_high) and on the rank, from a paired bootstrap over each track's shared prompts (``REPLICATES``, seed
    ``SEED``, tracks in name order): the models without per-prompt values keep their value and get none."""
    entities = frame[["model", "provenance"]].drop_duplicates().reset_index(drop=True)
    if entities.empty:
        return pd.DataFrame(columns=["model", "provenance", "win_rate", "tracks"])
    index = {key: i for i, key in enumerate(zip(entities["model"], entities["provenance"]))}
    rng = np.random.default_rng(SEED)
    point, boot, intervals = {}, [], np.ones(len(entities), dtype=bool)
    for track, group in sorted(frame.groupby("track"), key=lambda item: item[0]):
        higher = bool(group["higher_is_better"].dropna().iloc[0]) if group["higher_is_better"].notna().any() else True
        where = [index[key] for key in zip(group["model"], group["provenance"])]
        values = np.full((1, len(entities)), np.nan)
        values[0, where] = group["value"].to_numpy(dtype=float)
        point[track] = track_win_rates(values, higher)[0]
        if cat is None:
            continue
        has, shared, _ = _shared(cat, group.reset_index(drop=True), track_registry.get(track).headline, OVERALL, "all")
        intervals[where] &= has
        draws = _draws(len(shared), rng) if has.any() else np.zeros((REPLICATES, 0), dtype=int)
        replicates = np.full((REPLICATES, len(entities)), np.nan)
        replicates[:, where] = resampled(group["value"].to_numpy(dtype=float), shared.to_numpy().T, has, draws)
        boot.append(track_win_rates(replicates, higher))
    wide = entities.assign(**{t: v for t, v in point.items()})
    rates = wide[list(point)]
    wide["win_rate"] = rates.mean(axis=1)
    wide["tracks"] = rates.notna().sum(axis=1)
    if boot:
        stacked = np.stack(boot)  # tracks x replicates x models
        counted = (~np.isnan(stacked)).sum(axis=0)
        with np.errstate(invalid="ignore"):
            means = np.where(counted > 0, np.nansum(stacked, axis=0) / counted, np.nan)
        rank_low, rank_high = interval(replicate_ranks(means, True))
        win_low, win_high = interval(means)
        bounds = {"win_low": win_low, "win_high": win_high, "rank_low": rank_low, "rank_high": rank_high}
        wide = wide.assign(**{name: np.where(intervals, bound, np.nan) for name, bound in bounds.items()})
    wide = wide[wide["tracks"] > 0]
    return wide.sort_values(["win_rate", "model"], ascending=[False, True]).reset_index(drop=True)


def overall(cat: Catalog, filters: Filters = Filters(), track_set: str | None = None
            ) -> tuple[pd.DataFrame, list[tuple[str, int]], str, int]:
    """The overall ranking: each track's headline rows under its chosen protocol, the models scored on one
    set of tracks (``track_set``; default: of the sets with at least two models, the one with the most tracks,
    then the most models) ranked by mean win rate with intervals. Returns the ``win_rates`` table, every set with
    its model count (in that order), the set shown, and how many headline rows other protocols left out."""
    frame, off = headline_protocol_rows(cat, headline_rows(cat, filters))
    if frame.empty:
        return win_rates(frame), [], "", off
    sets = track_sets(frame)
    counts = sets["track_set"].value_counts()
    choices = sorted(counts.items(), key=lambda item: (item[1] < 2, -item[0].count("+"), -item[1], item[0]))
    chosen = track_set if track_set in counts else choices[0][0]
    members = sets[sets["track_set"] == chosen]
    frame = frame.merge(members[["model", "provenance"]], on=["model", "provenance"])
    return win_rates(frame, cat), choices, chosen, off


def model_ids(cat: Catalog) -> dict[tuple[str, str], str]:
    """(model, provenance) -> the model's id (Hub id or URL, as its rows record it), for ``display_win_rates``."""
    frame = cat.query("SELECT model, provenance, max(model_id) AS model_id FROM aggregates WHERE model_id IS NOT "
                      "NULL GROUP BY model, provenance")
    return dict(zip(zip(frame["model"], frame["provenance"]), frame["model_id"]))


def display_win_rates(wide: pd.DataFrame, ids: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """``win_rates`` for people: the rank and its 95% range, the model (linked to its page with ``ids``, from
    ``model_ids``), the overall win rate with its interval, each track's (``render.WIN_RATE_FOOTNOTE`` says
    what a win rate is)."""
    if wide.empty:
        return pd.DataFrame(columns=WIN_COLUMNS)
    track_columns = [c for c in wide.columns if c not in ("model", "provenance", "win_rate", "tracks", "win_low",
                                                          "win_high", "rank_low", "rank_high")]
    rank = wide["win_rate"].rank(ascending=False, method="min").astype(int)
    low = wide.get("rank_low", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    high = wide.get("rank_high", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    win_low, win_high = (wide.get(c, pd.Series(np.nan, index=wide.index)) for c in ("win_low", "win_high"))
    ids = ids or {}
    shown = pd.DataFrame({
        "Rank": rank,
        "Rank range (95%)": [rank_range(lo, hi) for lo, hi in zip(low, high)],
        "Model": model_links(wide.assign(model_id=[ids.get(k) for k in zip(wide["model"], wide["provenance"])])),
        "Provenance": wide["provenance"].map(render.PROVENANCE),
        "Overall win rate": wide["win_rate"].round(3),
        "95% interval": [f"[{lo:.3f}, {hi:.3f}]" if pd.notna(lo) else "" for lo, hi in zip(win_low, win_high)],
        "Tracks": wide["tracks"].astype(int),
    })
    for column in track_columns:
        shown[track_registry.get(column).title] = wide[column].round(3)
    return shown


def heatmap(cat: Catalog, track: str, metric: str, slice_name: str, filters: Filters = Filters(),
            protocol_id: str | None = None) -> pd.DataFrame:
    """Model x slice value matrix of one metric under one protocol (all, if None; the latest submission per
    model and provenance), the ``HEATMAP_MODELS`` best models by their mean over the slice's values, best first."""
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ?",
                      [track, metric, slice_name])
    frame, _ = filters.apply(frame)
    if protocol_id is not None:
        frame = frame[frame["protocol_id"] == protocol_id]
    if frame.empty:
        return pd.DataFrame()
    frame = frame.assign(who=who(frame))
    frame = frame.sort_values("scored_at", na_position="first").drop_duplicates(["who", "slice_value"], keep="last")
    matrix = frame.pivot(index="who", columns="slice_value", values="value")
    higher = bool(frame["higher_is_better"].dropna().iloc[0]) if frame["higher_is_better"].notna().any() else True
    order = matrix.mean(axis=1).sort_values(ascending=not higher).index
    return matrix.loc[order[:HEATMAP_MODELS]]


def submissions(cat: Catalog) -> pd.DataFrame:
    """Scored submissions: id, model, dataset, scored_at (for pickers)."""
    return cat.query("SELECT DISTINCT submission_id, model, dataset, max(scored_at) AS scored_at FROM aggregates "
                     "WHERE provenance = 'scored' GROUP BY submission_id, model, dataset ORDER BY model, scored_at")

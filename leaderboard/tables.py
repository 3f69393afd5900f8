"""The leaderboard's tables, as queries over the catalog (all reads; results on disk are never modified).

Protocols: a ranking compares the rows of one protocol only (``protocol_id``: dataset and its revision, images
per prompt present, the metric's version with its settings, backbones). By default it is the suite's: the one of
the track's part of the suite the store serves (``benchmark.suite.Suite.answered_by``: that dataset, its pinned
prompt rows, that many images per prompt) when it has rows, then the track's headline protocol
(``benchmark.tracks``), else the largest; the others are one choice away, and paper-reported rows of other
protocols are listed beside, not ranked. Rows scored before protocols were recorded (``unrecorded``) are listed,
never ranked.

One set of prompts per ranking (``basis``): a model's score, its rank and its rank interval all come from the
prompts every ranked model answered, whose count the note gives; a model that answered fewer than
``MIN_COVERAGE`` of the table's prompts is listed apart, not ranked, and below ``MIN_SHARED_PROMPTS`` shared
prompts no rank interval is given. Ranking: best first by the metric's direction, ties share a rank. Each rank
has a 95% interval from a paired bootstrap over the shared prompts (the same resampled prompts for every model;
each replicate ranked), and tie groups collect models whose intervals all hold one common rank (``tie_groups``).
Win rate (HEIM's "mean win rate"): for each track's headline metric on the overall slice, the share of the other
models a model beats on that track's shared prompts (ties count half; a null value leaves the comparison); the
overall score is the mean over the tracks a model has a score on, only models scored on the same set of tracks
are ranked together, and tracks with no direction to win on (variability) are left out of the mean, their
headline value shown beside it. Each track's rows come from one protocol (``overall_protocol``): the suite's, else
the track's headline one, else the papers'; a protocol on other prompts never stands in for a track's.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from benchmark import results
from benchmark import tracks as track_registry
from benchmark.stats import mean_ci
from leaderboard import links, render
from leaderboard.catalog import Catalog

OVERALL = "overall"
UNRECORDED = "unrecorded"  # the protocol id of rows scored before protocols were recorded
REPLICATES = 1000  # bootstrap replicates of a rank interval
SEED = 0  # the bootstrap's seed: the same rows always give the same intervals
# Below this many prompts shared by the ranked models no rank interval is given: a percentile bootstrap over
# fewer prompts is too narrow (its interval of a mean covers 0.83 of the nominal 0.95 at 5 values, 0.91 at 10:
# benchmarks/README.md, "coverage.py").
MIN_SHARED_PROMPTS = 10
# A model that answered fewer than this share of the prompts a table's models answered between them is listed
# apart, not ranked: ranking it would shrink every other model's prompt set to its own.
MIN_COVERAGE = 0.9
# The columns the views read (never SELECT *: the catalog holds every provenance field).
COLUMNS = ("track, metric, metric_label, slice, slice_value, model, model_id, value, ci_low, ci_high, n, excluded, "
           "model_type, parameters_billions, scored_at, provenance, citation, source_table, higher_is_better, "
           "harness_version, backbone, seeds, dataset, metric_version, submission_id, protocol, "
           f"coalesce(protocol_id, '{UNRECORDED}') AS protocol_id")
HEATMAP_MODELS = 40  # rows of a heatmap: the best models on the slice's mean (filters choose others)
RANK_COLUMNS = ["Rank", "Rank range (95%)", "Tie group", "Model", "Score", "95% CI", "n", "Type", "Size (B)", "Date",
                "Provenance", "Protocol", "Source", "Submission"]
# What a ranked table on the page shows unless a visitor chooses: rank with its range, model, score with its interval,
# provenance (the page puts each pair in one cell); the others are behind "Columns".
SHOWN_COLUMNS = ["Rank", "Rank range (95%)", "Model", "Score", "95% CI", "Provenance"]
WIN_COLUMNS = ["Rank", "Rank range (95%)", "Model", "Provenance", "Overall win rate", "95% interval", "Tracks"]
# The columns of ``win_rates`` that are not a track's win rate.
WIDE_COLUMNS = ("model", "provenance", "win_rate", "tracks", "not_ranked", "win_low", "win_high", "rank_low",
                "rank_high")
BESIDE = ":value"  # ``overall``'s column "<track>:value": a track's headline value shown beside the win rates
# How a Dataframe shows each column of ``display`` and ``display_win_rates`` (others: text). The Markdown ones
# carry links around ``render.plain`` text: show them with math off (``latex_delimiters=[]``).
DATATYPES = {"Rank": "number", "Model": "markdown", "Score": "number", "n": "number", "Size (B)": "number",
             "Provenance": "markdown", "Source": "markdown", "Overall win rate": "number", "Tracks": "number"}
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


def datatypes(columns, frame: pd.DataFrame | None = None) -> list[str]:
    """The Dataframe datatypes of these display columns (``DATATYPES``; text otherwise); with the table shown,
    also text for a number column that holds text (a censored score, "> 10")."""
    def holds_text(column) -> bool:
        return frame is not None and frame[column].map(lambda v: isinstance(v, str)).any()

    return ["str" if DATATYPES.get(c) == "number" and holds_text(c) else DATATYPES.get(c, "str") for c in columns]


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
    provenance, suite (the track's part of the suite the store serves: ``Suite.answered_by``) and on_protocol
    (the track's headline protocol); the suite's first, then on-protocol ones, then recorded ones, the largest
    first, then ``unrecorded``."""
    frame = cat.query(f"SELECT coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, any_value(protocol) AS protocol, "
                      "count(*) AS rows, min(provenance) AS provenance FROM aggregates WHERE track = ? AND metric = ? "
                      "AND slice = ? AND slice_value = ? GROUP BY 1", [track, metric, slice_name, slice_value])
    suite = cat.store.suite
    frame["suite"] = [suite.answered_by(track, results.protocol_fields(p) or {}) for p in frame["protocol"]]
    frame["on_protocol"] = [track_registry.on_protocol(track, p) for p in frame["protocol"]]
    frame["recorded"] = frame["protocol_id"] != UNRECORDED
    return frame.sort_values(["suite", "on_protocol", "recorded", "rows", "protocol_id"],
                             ascending=[False, False, False, False, True], ignore_index=True).drop(columns="recorded")


def higher_is_better(frame: pd.DataFrame) -> bool:
    """Whether higher values of ``frame``'s rows (one metric) are better: as their rows say, else yes."""
    known = frame["higher_is_better"].dropna()
    return bool(known.iloc[0]) if len(known) else True


def pick_protocol(table: pd.DataFrame, wanted: str | None = None) -> str | None:
    """``wanted`` if ``protocols`` lists it, else the suite's when it has rows, else the track's headline protocol
    when it has rows, else the recorded protocol with the most rows, else ``unrecorded`` (None without rows)."""
    ids = list(table["protocol_id"])
    return wanted if wanted in ids else (ids[0] if ids else None)


def overall_protocol(cat: Catalog, track: str, table: pd.DataFrame | None = None) -> str | None:
    """The protocol of a track's headline rows in the overall ranking: the suite's when it has rows, else the
    track's headline protocol, else the papers' (``protocols``' order); never another protocol of scored rows (the
    headline metric scored on other prompts, say CLIPScore on the diversity prompts, is not awareness), nor
    ``unrecorded``. None when the track has no such rows. ``table``: the track's headline ``protocols``, when
    the caller has them already."""
    table = protocols(cat, track, track_registry.get(track).headline) if table is None else table
    eligible = table[(table["suite"] | table["on_protocol"] | (table["provenance"] == "reported"))
                     & (table["protocol_id"] != UNRECORDED)]
    return eligible["protocol_id"].iloc[0] if len(eligible) else None


def describe_protocol(protocol: str | None) -> str:
    """A protocol's JSON in words (plain text: the dataset is the submitter's); 'unrecorded' for old results."""
    fields = results.protocol_fields(protocol)
    if fields is None:
        return "unrecorded (scored before protocols were recorded, or not readable)"
    images = fields.get("images_per_prompt")
    backbones = ", ".join(fields.get("backbones") or []) or "none"
    revision = f" (prompt rows {fields['dataset_revision']})" if fields.get("dataset_revision") else ""
    return (f"dataset {fields.get('dataset')}{revision}; {images if images is not None else 'unstated'} images per "
            f"prompt; metric version {fields.get('metric_version')}; backbones {backbones}")


def chart_protocols(cat: Catalog, track: str) -> pd.DataFrame | None:
    """``protocols`` of the table a track's Overview opens on (``metric_id``, ``overview_slice``); None without
    rows."""
    metric = metric_id(cat, track, None)
    if metric is None:
        return None
    name, values = overview_slice(cat, track, metric)
    return protocols(cat, track, metric, name, values[0]) if values else None


def interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each column: the 2.5% and 97.5% order statistics (numpy's 'lower' / 'higher')."""
    low, high = np.full(samples.shape[1], np.nan), np.full(samples.shape[1], np.nan)
    some = ~np.isnan(samples).all(axis=0)  # a column with no value in any replicate has no interval
    low[some] = np.nanquantile(samples[:, some], 0.025, axis=0, method="lower")
    high[some] = np.nanquantile(samples[:, some], 0.975, axis=0, method="higher")
    return low, high


def replicate_ranks(values: np.ndarray, higher: bool) -> np.ndarray:
    """Per replicate (row of ``values``), each model's rank: 1 + the models strictly better; null stays null."""
    key = np.where(np.isnan(values), np.nan, -values if higher else values)
    ranks = stats.rankdata(key, axis=1, method="min", nan_policy="omit")
    return np.where(np.isnan(values), np.nan, ranks)


def tie_groups(low: pd.Series, high: pd.Series) -> pd.Series:
    """Rows in rank order -> their tie group (1, 2, ...): reading down, a group takes the next row while some rank
    lies inside every interval of the group and that row's (the largest low bound <= the smallest high bound);
    a row whose interval would leave no rank common to all starts the next group. So every group is a set of
    models that may all hold one same rank, and intervals 1-2, 2-3, 3-4, 4-5 make two groups ({1-2, 2-3} share
    rank 2, {3-4, 4-5} rank 4), not one chain. Rows without an interval have none."""
    groups, group, top, bottom = [], 0, np.inf, -np.inf  # the ranks common to the current group: [top, bottom]
    for lo, hi in zip(low, high):
        if pd.isna(lo):
            groups.append(pd.NA)
            continue
        if max(top, lo) > min(bottom, hi):  # always for the first row: no group yet, no common rank
            group, top, bottom = group + 1, lo, hi
        else:
            top, bottom = max(top, lo), min(bottom, hi)
        groups.append(group)
    return pd.Series(groups, index=low.index, dtype="Int64")


@dataclass
class Basis:
    """What one ranking (one protocol's rows of a metric on one slice value) rests on: per row, the value it is
    ranked on with its CI and n, why it is not ranked ('' when it is), and ``REPLICATES`` bootstrap values of
    the ranked rows (None: no interval); all from one set of prompts. ``note`` says which, in words."""

    value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: np.ndarray
    not_ranked: np.ndarray
    replicates: np.ndarray | None
    note: str


def _per_prompt(cat: Catalog, submissions: list[str], metric: str, slice_name: str, slice_value: str
                ) -> pd.DataFrame:
    """Prompts x submissions: the per-prompt values of ``metric`` (nan where a submission has none) of the
    prompts in the slice value (its prompts are read from the first submission's rows: a prompt's slice is its
    dataset's, the same in every submission of a protocol)."""
    values = cat.per_prompt(submissions, metric)
    if len(values) and slice_name != OVERALL:
        inside = cat.prompts_in_slice(values["submission_id"].iloc[0], metric, slice_name, slice_value)
        values = values[values["prompt_id"].isin(inside or set())]
    return values.pivot_table(index="prompt_id", columns="submission_id", values="value")


def _means(matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted means of each column of ``matrix`` (prompts x rows) with ``weights`` (draws x prompts: how often
    each draw takes each prompt), leaving out its nan cells: draws x rows, nan where a draw takes none."""
    present = ~np.isnan(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ np.where(present, matrix, 0.0)) / (weights @ present)


def basis(cat: Catalog, frame: pd.DataFrame, track: str, metric: str, slice_name: str = OVERALL,
          slice_value: str = "all", rng: np.random.Generator | None = None) -> Basis:
    """One set of prompts for the score, rank and interval of every row of ``frame`` (one protocol's rows of
    ``metric`` on one slice value).

    - Scored rows with per-prompt values are ranked on the prompts they all answered (the shared prompts): each
      score is its mean over them (for a ``benchmark.track.FromMeans`` metric, such as CRT from column means, the
      metric recomputed from its inputs' means over them), with its CI over them and n = their count. A row that
      answered exactly those prompts keeps its stored value, CI and n (the same numbers).
    - A scored row that answered fewer than ``MIN_COVERAGE`` of the prompts the table's models answered between
      them (a submission of 3 prompts out of 200) is listed apart, not ranked, rather than shrink every other
      model's prompt set to its own; so is a row without per-prompt values beside rows with them.
    - With at least ``MIN_SHARED_PROMPTS`` shared prompts, ``REPLICATES`` bootstrap draws of them (the same draw
      for every row, from ``rng``, default seeded ``SEED``) give each row's replicate values; with fewer, no
      interval (a percentile bootstrap over a handful of prompts covers poorly).
    - When no row has per-prompt values (paper rows, a model-level metric), each is ranked on its own value,
      without interval."""
    rng = rng if rng is not None else np.random.default_rng(SEED)
    rows = len(frame)
    value, n, low, high = (frame[c].astype("Float64").to_numpy(float, na_value=np.nan)
                           for c in ("value", "n", "ci_low", "ci_high"))
    not_ranked = np.full(rows, "", dtype=object)
    composite = next((f for f in track_registry.get(track).from_means if f.metric == metric), None)
    inputs = composite.inputs if composite else (metric,)
    scored = (frame["provenance"].eq("scored") & frame["submission_id"].notna()).to_numpy()
    ids = frame["submission_id"].to_numpy(object)
    wide = {i: _per_prompt(cat, list(ids[scored]), i, slice_name, slice_value) for i in inputs}
    answered = {s: set(wide[inputs[0]][s].dropna().index) for s in wide[inputs[0]].columns}
    has = scored & np.array([bool(answered.get(s)) for s in ids], dtype=bool)
    if not has.any():
        why = []
        if scored.any():
            why.append(f"{int(scored.sum())} scored row(s) have no per-prompt values for this metric")
        if (~scored).any():
            why.append(f"{int((~scored).sum())} paper-reported row(s) have no per-prompt values")
        note = ("; ".join(why) + ": each is ranked on its own value, with no rank interval") if why else ""
        return Basis(value, low, high, n, not_ranked, None, note)
    not_ranked[~has] = "no per-prompt values for this metric"
    union = set().union(*(answered[s] for s in ids[has]))
    counts = np.array([len(answered.get(s, ())) for s in ids])
    thin = has & (counts < MIN_COVERAGE * len(union))
    for i in np.flatnonzero(thin):
        not_ranked[i] = f"answered {counts[i]} of the {len(union)} prompts the models of this table answered"
    ranked = has & ~thin
    notes = [f"{int(thin.sum())} model(s) answered fewer than {MIN_COVERAGE:.0%} of the {len(union)} prompts "
             "this table's models answered between them: listed apart, not ranked"] if thin.any() else []
    if (~has).any():
        notes.append(f"{int((~has).sum())} row(s) without per-prompt values: listed apart, not ranked")
    shared = sorted(set.intersection(*(answered[s] for s in ids[ranked]))) if ranked.any() else []
    if not shared:
        not_ranked[ranked] = "the models share no prompt"
        notes.insert(0, "the models share no prompt: none is ranked" if ranked.any() else "no model is ranked")
        return Basis(value, low, high, n, not_ranked, None, "; ".join(notes))
    where = np.flatnonzero(ranked)
    matrices = [wide[i].reindex(index=shared, columns=ids[ranked]).to_numpy(float) for i in inputs]
    combine = composite.combine if composite else (lambda mean: mean)
    point = combine(*(_means(m, np.ones((1, len(shared))))[0] for m in matrices))
    replicates = None
    if len(shared) >= MIN_SHARED_PROMPTS:
        draws = rng.integers(0, len(shared), size=(REPLICATES, len(shared)))
        weights = np.stack([np.bincount(d, minlength=len(shared)) for d in draws]).astype(float)
        replicates = np.full((REPLICATES, rows), np.nan)
        replicates[:, where] = combine(*(_means(m, weights) for m in matrices))
    boot_low, boot_high = interval(replicates[:, where]) if replicates is not None else (None, None)
    for j, i in enumerate(where):
        if answered[ids[i]] != set(shared):
            value[i], n[i] = point[j], len(shared)
            low[i], high[i] = (np.nan, np.nan) if composite else mean_ci(matrices[0][:, j])
        if composite and np.isnan(low[i]) and boot_low is not None:
            low[i], high[i] = boot_low[j], boot_high[j]  # CRT from means: a bootstrap CI over references
    notes.insert(0, f"score, rank and interval of the {int(ranked.sum())} ranked model(s) all come from the "
                    f"{len(shared)} prompts they all answered" +
                 ("" if replicates is not None else
                  f"; with fewer than {MIN_SHARED_PROMPTS} shared prompts there is no rank interval"))
    return Basis(value, low, high, n, not_ranked, replicates, "; ".join(notes))


def _rank(frame: pd.DataFrame, higher: bool) -> pd.DataFrame:
    """Rows ranked best first by value among the rows ranked (``not_ranked`` empty; ties share a rank); a
    right-censored value (null, with the bound it exceeds in ci_low: ``benchmark.results``) counts as above every
    value, a plain null has no rank. Ranked rows first, then the rows listed apart, best first."""
    censored = frame["value"].isna() & frame["ci_low"].notna() & frame["ci_high"].isna()
    value = frame["value"].where(~censored, np.inf)
    key = -value if higher else value
    ranked = frame["not_ranked"].eq("")
    rank = key.where(ranked).rank(method="min").astype("Int64")
    return frame.assign(rank=rank, _apart=~ranked, _key=key).sort_values(
        ["_apart", "rank", "_key", "model"], kind="stable", na_position="last", ignore_index=True).drop(
        columns=["_apart", "_key"])


def rank_with_intervals(cat: Catalog, frame: pd.DataFrame, metric: str, slice_name: str = OVERALL,
                        slice_value: str = "all") -> tuple[pd.DataFrame, str]:
    """Rows of one protocol ranked on one set of prompts (``basis``: value, CI and n replaced by those on the
    shared prompts; ``not_ranked`` says why a row listed apart is not ranked), each ranked row with a 95% rank
    interval (rank_low, rank_high: the 2.5% and 97.5% order statistics of its ranks over the bootstrap draws)
    and its tie group (``tie_groups``); and a note that says which prompts, how many, and what is listed apart."""
    higher = higher_is_better(frame)
    track = frame["track"].iloc[0]
    b = basis(cat, frame.reset_index(drop=True), track, metric, slice_name, slice_value)
    frame = frame.reset_index(drop=True).assign(value=b.value, ci_low=b.ci_low, ci_high=b.ci_high, n=b.n,
                                                not_ranked=b.not_ranked)
    low = high = np.full(len(frame), np.nan)
    if b.replicates is not None:
        low, high = interval(replicate_ranks(b.replicates, higher))
    frame = frame.assign(rank_low=pd.array(low, dtype="Float64").astype("Int64"),
                         rank_high=pd.array(high, dtype="Float64").astype("Int64"))
    frame = _rank(frame, higher)
    return frame.assign(tie_group=tie_groups(frame["rank_low"], frame["rank_high"])), b.note


def ranked(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL, slice_value: str = "all",
           filters: Filters = Filters(), protocol_id: str | None = None) -> tuple[pd.DataFrame, str]:
    """The rows of one metric, slice and protocol (``pick_protocol``), after filters, ranked with rank intervals
    (``rank_with_intervals``), then the paper-reported rows of other protocols, unranked (``beside``); and the
    note on what the filters hid and on what the ranking rests (which prompts, how many, what is apart). Rows
    of the ``unrecorded`` protocol are listed, never ranked: nothing says how they were scored."""
    chosen = pick_protocol(protocols(cat, track, metric, slice_name, slice_value), protocol_id)
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    frame, note = filters.apply(frame)
    frame = frame.assign(on_protocol=[track_registry.on_protocol(track, p) for p in frame["protocol"]])
    mine = frame["protocol_id"] == chosen
    why = ""
    if chosen == UNRECORDED:
        ranks = _rank(frame[mine].assign(not_ranked="scored before protocols were recorded"), True).assign(
            rank_low=pd.NA, rank_high=pd.NA, tie_group=pd.NA)
        why = ("These rows were scored before protocols were recorded, so nothing says they were scored alike: "
               "they are listed, never ranked.")
    elif mine.any():
        ranks, why = rank_with_intervals(cat, frame[mine], metric, slice_name, slice_value)
        why = why[:1].upper() + why[1:] + "." if why else ""
    else:
        ranks = frame[mine].assign(rank=pd.Series(dtype="Int64"), not_ranked=pd.Series(dtype=object))
    beside = frame[~mine & (frame["provenance"] == "reported")].assign(beside=True, not_ranked="other protocol")
    out = pd.concat([ranks.assign(beside=False), beside], ignore_index=True) if len(beside) else \
        ranks.assign(beside=False)
    return out, " ".join(n for n in (note, why) if n)


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


def censored(frame: pd.DataFrame) -> pd.Series:
    """Which rows hold a right-censored value: null, with the bound it exceeds in ``ci_low`` (``benchmark.results``:
    e.g. a W1KP reusability never reached, shown "> k")."""
    return frame["value"].isna() & frame["ci_low"].notna() & frame["ci_high"].isna()


def display(frame: pd.DataFrame, protocol_names: dict[str, str] | None = None) -> pd.DataFrame:
    """``ranked`` rows for people: the rank and its 95% range (or why the row is not ranked), tie group, the model
    linked to its page, rounded scores ("> k" for a censored value), the CI as text, the provenance as a word,
    the protocol (by its name from ``protocol_names`` when given, else its id, headline or off-protocol), a source
    per row (Markdown columns: ``DATATYPES``). Typed rows: ``leaderboard.exports``."""
    if frame.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    ci = ("[" + frame["ci_low"].map("{:.3f}".format) + ", " + frame["ci_high"].map("{:.3f}".format) + "]")
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
    return pd.DataFrame({
        "Rank": frame["rank"].astype("Float64").astype("Int64"),
        "Rank range (95%)": ranges,
        "Tie group": frame["tie_group"].astype("Int64").astype("string").fillna(""),
        "Model": model_links(frame),
        "Score": score,
        "95% CI": ci.where(frame["ci_low"].notna() & ~above, ""),
        "n": frame["n"].astype("Float64").astype("Int64"),
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


def headline_protocol_rows(cat: Catalog, frame: pd.DataFrame, beside: bool = False) -> tuple[pd.DataFrame, int]:
    """``headline_rows`` of the tracks in the overall (``benchmark.track.Track.not_in_overall`` empty; with
    ``beside``, of those shown beside it instead) kept to each track's ``overall_protocol``, and how many rows of
    those tracks other protocols left out."""
    keep = pd.Series(False, index=frame.index)
    chosen_tracks = pd.Series(False, index=frame.index)
    for track in frame["track"].unique():
        if bool(track_registry.get(track).not_in_overall) != beside:
            continue
        chosen_tracks |= frame["track"] == track
        if (chosen := overall_protocol(cat, track)) is not None:
            keep |= (frame["track"] == track) & (frame["protocol_id"] == chosen)
    return frame[keep], int((~keep & chosen_tracks).sum())


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
    one on, and ``tracks``; best first. With ``cat``, each track's win rates come from one set of prompts
    (``basis``: the models' scores on the prompts they all answered; a model listed apart on a track is listed
    apart here too, ``not_ranked`` saying why), with a 95% interval on the mean win rate (win_low, win_high) and
    on the rank from the paired bootstrap over each track's shared prompts (``REPLICATES``, seed ``SEED``, tracks
    in name order), given only when every track has one. ``attrs["note"]`` says what the ranking rests on."""
    entities = frame[["model", "provenance"]].drop_duplicates().reset_index(drop=True)
    if entities.empty:
        return pd.DataFrame(columns=["model", "provenance", "win_rate", "tracks"])
    index = {key: i for i, key in enumerate(zip(entities["model"], entities["provenance"]))}
    rng = np.random.default_rng(SEED)
    point, boot, notes = {}, [], []
    not_ranked = np.full(len(entities), "", dtype=object)
    for track, group in sorted(frame.groupby("track"), key=lambda item: item[0]):
        group = group.reset_index(drop=True)
        higher = higher_is_better(group)
        where = np.array([index[key] for key in zip(group["model"], group["provenance"])])
        values = np.full((1, len(entities)), np.nan)
        values[0, where] = group["value"].to_numpy(dtype=float)
        if cat is not None:
            b = basis(cat, group, track, track_registry.get(track).headline, OVERALL, "all", rng)
            values[0, where] = np.where(b.not_ranked == "", b.value, np.nan)
            title = track_registry.get(track).title
            for i, why in zip(where, b.not_ranked):
                if why and not not_ranked[i]:
                    not_ranked[i] = f"{title}: {why}"
            notes.append(f"{title}: {b.note}")
            if b.replicates is None:
                boot = None
            elif boot is not None:
                replicates = np.full((REPLICATES, len(entities)), np.nan)
                replicates[:, where] = np.where(b.not_ranked == "", b.replicates, np.nan)
                boot.append(track_win_rates(replicates, higher))
        point[track] = track_win_rates(values, higher)[0]
    wide = entities.assign(**{t: v for t, v in point.items()})
    rates = wide[list(point)]
    wide["tracks"] = rates.notna().sum(axis=1)
    wide["win_rate"] = rates.mean(axis=1).where(not_ranked == "")
    wide["not_ranked"] = not_ranked
    if boot:
        stacked = np.stack(boot)  # tracks x replicates x models
        counted = (~np.isnan(stacked)).sum(axis=0)
        with np.errstate(invalid="ignore"):
            means = np.where(counted > 0, np.nansum(stacked, axis=0) / counted, np.nan)
        rank_low, rank_high = interval(replicate_ranks(means, True))
        win_low, win_high = interval(means)
        bounds = {"win_low": win_low, "win_high": win_high, "rank_low": rank_low, "rank_high": rank_high}
        wide = wide.assign(**{name: np.where(not_ranked == "", bound, np.nan) for name, bound in bounds.items()})
    elif cat is not None:
        notes.append("no interval on the mean win rate: a track above has none")
    wide = wide[(wide["tracks"] > 0) | (wide["not_ranked"] != "")]
    wide = wide.sort_values(["win_rate", "model"], ascending=[False, True], na_position="last").reset_index(drop=True)
    wide.attrs["note"] = "; ".join(notes)
    return wide


def overall(cat: Catalog, filters: Filters = Filters(), track_set: str | None = None
            ) -> tuple[pd.DataFrame, list[tuple[str, int]], str, int]:
    """The overall ranking: each track's headline rows under its chosen protocol (the tracks in the overall
    only), the models scored on one set of tracks (``track_set``; default: of the sets with at least two models,
    the one with the most tracks, then the most models) ranked by mean win rate with intervals. Returns the
    ``win_rates`` table, every set with its model count (in that order), the set shown, and how many headline
    rows other protocols left out."""
    headline = headline_rows(cat, filters)
    frame, off = headline_protocol_rows(cat, headline)
    if frame.empty:
        return win_rates(frame), [], "", off
    sets = track_sets(frame)
    counts = sets["track_set"].value_counts()
    choices = sorted(counts.items(), key=lambda item: (item[1] < 2, -item[0].count("+"), -item[1], item[0]))
    chosen = track_set if track_set in counts else choices[0][0]
    members = sets[sets["track_set"] == chosen]
    frame = frame.merge(members[["model", "provenance"]], on=["model", "provenance"])
    wide = win_rates(frame, cat)
    beside, _ = headline_protocol_rows(cat, headline, beside=True)
    for track, group in beside.groupby("track", sort=False):
        values = dict(zip(zip(group["model"], group["provenance"]), group["value"]))
        wide[track + BESIDE] = [values.get(key, np.nan) for key in zip(wide["model"], wide["provenance"])]
    return wide, choices, chosen, off


def win_rate_columns(wide: pd.DataFrame) -> list[str]:
    """The tracks of an ``overall`` table that have a win rate (in its mean)."""
    return [c for c in wide.columns if c not in WIDE_COLUMNS and not c.endswith(BESIDE)]


def beside_columns(wide: pd.DataFrame) -> list[str]:
    """The columns of an ``overall`` table holding a track's headline value beside the win rates, not in their mean
    (``Track.not_in_overall``: variability), as "<track>:value"."""
    return [c for c in wide.columns if c.endswith(BESIDE)]


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
    rank = wide["win_rate"].rank(ascending=False, method="min").astype("Int64")
    why = wide.get("not_ranked", pd.Series("", index=wide.index)).fillna("")
    low = wide.get("rank_low", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    high = wide.get("rank_high", pd.Series(np.nan, index=wide.index)).astype("Float64").astype("Int64")
    win_low, win_high = (wide.get(c, pd.Series(np.nan, index=wide.index)) for c in ("win_low", "win_high"))
    ids = ids or {}
    shown = pd.DataFrame({
        "Rank": rank,
        "Rank range (95%)": [f"not ranked: {w}" if w else rank_range(lo, hi) for lo, hi, w in zip(low, high, why)],
        "Model": model_links(wide.assign(model_id=[ids.get(k) for k in zip(wide["model"], wide["provenance"])])),
        "Provenance": wide["provenance"].map(render.PROVENANCE),
        "Overall win rate": wide["win_rate"].round(3),
        "95% interval": [f"[{lo:.3f}, {hi:.3f}]" if pd.notna(lo) else "" for lo, hi in zip(win_low, win_high)],
        "Tracks": wide["tracks"].astype(int),
    })
    for column in win_rate_columns(wide):
        shown[track_registry.get(column).title] = wide[column].round(3)
    for column in beside_columns(wide):
        track = track_registry.get(column.removesuffix(BESIDE))
        shown[f"{track.title}: {track.headline} (not in the mean)"] = wide[column].round(3)
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
    higher = higher_is_better(frame)
    order = matrix.mean(axis=1).sort_values(ascending=not higher).index
    return matrix.loc[order[:HEATMAP_MODELS]]


def submissions(cat: Catalog) -> pd.DataFrame:
    """Scored submissions, one row each (for pickers): id, model, dataset (a suite submission's parts' datasets,
    joined by " + "), scored_at."""
    return cat.query("SELECT submission_id, model, string_agg(DISTINCT dataset, ' + ' ORDER BY dataset) AS dataset, "
                     "max(scored_at) AS scored_at FROM aggregates WHERE provenance = 'scored' "
                     "GROUP BY submission_id, model ORDER BY model, scored_at")


# What each row of the metric-agreement table measures (the Metrics tab), by provenance.
AGREEMENT_MEASURES = {
    "scored": "Spearman with the mean of the other raters, one rater left out in turn (like for like with the "
              "ceiling)",
    "reported": "Spearman with the human ratings as the paper pooled them (not stated; Fig. 7)",
}


def agreement_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The metric-agreement table (``Store.meta_evaluation``) for the Metrics tab: a ``measures`` column saying
    what each row's Spearman is (``AGREEMENT_MEASURES``), the scored rows first, each criterion and country's
    sorted by Spearman, then the paper's rows of another definition, by criterion: never ordered together."""
    if frame.empty:
        return frame
    frame = frame.assign(measures=frame["provenance"].map(AGREEMENT_MEASURES).fillna(""),
                         _paper=frame["provenance"] != "scored")
    frame = frame.sort_values(["_paper", "criterion", "country", "spearman"], ascending=[True, True, True, False],
                              kind="stable", na_position="last")
    columns = ["provenance", "measures", *[c for c in frame.columns if c not in ("provenance", "measures", "_paper")]]
    return frame[columns].reset_index(drop=True)


def rows(cat: Catalog, track: str, metric: str | None = None, slice_name: str | None = None) -> pd.DataFrame:
    """The rows (``COLUMNS``) of a track, or of one of its metrics, or of that metric on one slice (every value)."""
    where = " AND ".join(["track = ?"] + [f"{column} = ?" for column, value in (("metric", metric),
                                                                             ("slice", slice_name)) if value])
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE {where}",
                     [track, *(value for value in (metric, slice_name) if value)])


def curves(cat: Catalog) -> pd.DataFrame:
    """Every model-level curve the catalog holds (W1KP_k...), by model and x."""
    return cat.query("SELECT * FROM curves ORDER BY model, x")


def suite_tracks(cat: Catalog) -> list[str]:
    """The tracks with scored rows that answer the suite the store serves (``Suite.answered_by``), in display
    order: where there are any, the Overview opens on the overall ranking."""
    frame = cat.query("SELECT DISTINCT track, protocol FROM aggregates WHERE provenance = 'scored'")
    answered = {t for t, p in zip(frame["track"], frame["protocol"])
                if cat.store.suite.answered_by(t, results.protocol_fields(p) or {})}
    return [t for t in tracks(cat) if t in answered]


@dataclass
class PaperTable:
    """A paper's headline table as the Overview's first view shows it on a card: ``table`` has a row per model
    (Rank, Model, model_id, then the value on each slice value, or their mean), best first."""

    track: str
    metric: str
    label: str
    slice_name: str
    source: str
    citation: str
    protocol: str
    higher: bool
    table: pd.DataFrame


MAX_CARD_VALUES = 3  # slice values a card shows side by side (still and moving, three concepts); more: their mean


def paper_table(cat: Catalog, track: str, filters: Filters = Filters()) -> PaperTable | None:
    """The table of ``track``'s paper that the first view shows (None when the paper published none copied here):
    of the metric the track's Overview opens on if the paper reports it, else the paper's first; on the slice
    the Overview ranks it on (``overview_slice``); under that paper protocol with the most rows. Models are ranked
    on the value, or on the mean of the slice values when there are several (each shown when there are at most
    ``MAX_CARD_VALUES``, else only the mean, which the column's name says)."""
    frame, _ = filters.apply(paper_rows(cat, track))
    if frame.empty:
        return None
    declared = track_registry.get(track)
    order = list(dict.fromkeys(r.metric for r in declared.papers.rows)) if declared.papers else []
    present = list(dict.fromkeys([*order, *sorted(frame["metric"])]))
    metric = declared.opens_on if declared.opens_on in set(frame["metric"]) else next(
        m for m in present if m in set(frame["metric"]))
    frame = frame[frame["metric"] == metric]
    names = sorted(set(frame["slice"]), key=lambda n: (n != declared.overview_slice, n != OVERALL,
                                                       frame.loc[frame["slice"] == n, "slice_value"].nunique(), n))
    frame = frame[frame["slice"] == names[0]]
    frame = frame[frame["protocol_id"] == frame["protocol_id"].value_counts().index[0]]
    higher = higher_is_better(frame)
    wide = frame.pivot_table(index="model", columns="slice_value", values="value", aggfunc="first")
    mean = wide.mean(axis=1)
    if names[0] == OVERALL:
        wide.columns = ["Score"]
    elif wide.shape[1] > MAX_CARD_VALUES:
        wide = pd.DataFrame({f"mean of {wide.shape[1]} {render.slice_label(names[0])} values": mean})
    wide = wide.loc[mean.sort_values(ascending=not higher, kind="stable").index]
    ids = dict(zip(frame["model"], frame["model_id"]))
    table = wide.reset_index().rename(columns={"model": "Model"})
    table.insert(0, "Rank", mean.loc[wide.index].rank(ascending=not higher, method="min").astype(int).to_numpy())
    table.insert(2, "model_id", table["Model"].map(ids))
    first = frame.iloc[0]
    return PaperTable(track, metric, str(first["metric_label"] or metric), names[0], str(first["source_table"] or ""),
                      str(first["citation"] or ""), str(first["protocol"]), higher, table)


def paper_rows(cat: Catalog, track: str | None = None) -> pd.DataFrame:
    """Every row the papers published (``COLUMNS``), or those of one track."""
    if track is None:
        return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE provenance = 'reported'")
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE provenance = 'reported' AND track = ?", [track])


def scored_protocols(cat: Catalog) -> pd.DataFrame:
    """The protocols scored rows were scored under, per track: track, protocol_id, protocol and the number of
    models, in display order."""
    frame = cat.query(f"SELECT track, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, any_value(protocol) AS "
                      "protocol, count(DISTINCT model) AS models FROM aggregates WHERE provenance = 'scored' "
                      "GROUP BY 1, 2 ORDER BY 1, 2")
    order = {t: i for i, t in enumerate(tracks(cat))}
    return frame.sort_values("track", key=lambda t: t.map(order), kind="stable", ignore_index=True)


"""The leaderboard's tables, as queries over the catalog (all reads; results on disk are never modified); rankings
rest on ``leaderboard.rankings``, which reads what a ranking stands on and applies ``benchmark.ranking``'s rules.

Protocols: a ranking compares the rows of one protocol only (``protocol_id``: dataset and its revision, images
per prompt declared, the metric's version with its settings, backbones). By default it is the suite's: the one of
the track's part of the suite the store serves (``benchmark.suite.Suite.answered_by``: that dataset, its pinned
prompt rows, that many images per prompt; for a judged track, its protocol's judge) when it has rows, then the
track's headline protocol (``benchmark.tracks``), else the largest; the others are one choice away, and
paper-reported rows of other protocols are listed beside, not ranked. Rows scored before protocols were recorded
(``unrecorded``) are listed, never ranked.

One prompt set per ranking, the protocol's (``leaderboard.rankings``): every row's score, rank, rank interval, n
and refusal rate come from it, a prompt a row did not answer counting as the metric's worst value, so that
withholding prompts never raises a rank and no model's answers shrink another's comparison. Ranking: by rank rule
``benchmark.ranking.RULE_VERSION``, 1 + the models significantly better, with the range of ranks the comparisons
allow; below ``ranking.MIN_PROMPTS`` prompts nothing is ranked. Win rate (HEIM's "mean win rate",
``rankings.win_rates``): for each track's headline metric on the overall slice, from that track's comparisons (a
model beats those significantly worse, ties half; a model not ranked there leaves the comparison); the overall
score is the mean over the tracks a model has a score on, only models scored on the same set of tracks are ranked
together, and tracks with no direction to win on (variability) are left out of the mean, their headline value
shown beside it. Each track's rows come from one protocol (``overall_protocol``): the suite's, else the track's
headline one, else the papers'; a protocol on other prompts never stands in for a track's.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from benchmark import results
from benchmark import tracks as track_registry
from leaderboard import rankings, render, stored_rankings
from leaderboard.catalog import Catalog
from leaderboard.filters import Filters
from leaderboard.rankings import COLUMNS, OVERALL, SCORE, UNRECORDED, higher_is_better, track_order

HEATMAP_MODELS = 40  # rows of a heatmap: the first of the metric's ranking (filters choose others)
# The columns of ``rankings.win_rates`` that are not a track's win rate.
WIDE_COLUMNS = ("model", "provenance", "win_rate", "tracks", "not_ranked", "win_low", "win_high", "rank", "rank_low",
                "rank_high")
BESIDE = ":value"  # ``overall``'s column "<track>:value": a track's headline value shown beside the win rates
LONE = "ranks appear when a second model on the same tracks is scored"  # a track set of one model
LONE_ON_TABLE = "ranks appear when a second model is ranked under this protocol"  # a track's table of one
NOT_YET = (LONE, LONE_ON_TABLE)  # why a model alone is not ranked: the page says "not ranked yet"


def _per_state(lookup):
    """``lookup(cat, *args)`` answered once per state of the catalog's results (``Catalog.cached``): the lists the
    pickers show and every view's choices are checked against, each a query, then a lookup; each caller gets its
    own copy."""
    @functools.wraps(lookup)
    def kept(cat: Catalog, *args):
        return stored_rankings.own_copy(cat.cached((lookup.__name__, *args), lambda: lookup(cat, *args)))
    return kept


@_per_state
def tracks(cat: Catalog) -> list[str]:
    present = set(cat.query("SELECT DISTINCT track FROM aggregates")["track"])
    registered = [t for t in track_registry.all_tracks() if t in present]
    return registered + sorted(present - set(registered))


@_per_state
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


def metric_labels(cat: Catalog, submission_ids: list[str]) -> dict[str, str]:
    """metric id -> its label, for the metrics these submissions were scored on."""
    frame = cat.query("SELECT metric, min(metric_label) AS label FROM aggregates WHERE provenance = 'scored' AND "
                      "list_contains(?, submission_id) AND metric_label IS NOT NULL GROUP BY metric",
                      [list(submission_ids)])
    return dict(zip(frame["metric"], frame["label"]))


def metric_directions(cat: Catalog, submission_ids: list[str]) -> dict[str, bool]:
    """metric id -> whether higher is better, for the metrics these submissions were scored on."""
    frame = cat.query("SELECT metric, bool_and(higher_is_better) AS higher FROM aggregates WHERE provenance = "
                      "'scored' AND list_contains(?, submission_id) AND higher_is_better IS NOT NULL GROUP BY metric",
                      [list(submission_ids)])
    return dict(zip(frame["metric"], frame["higher"].astype(bool)))


@_per_state
def slice_names(cat: Catalog, track: str, metric: str) -> list[str]:
    """The slices a metric has (overall first)."""
    names = cat.query("SELECT DISTINCT slice FROM aggregates WHERE track = ? AND metric = ?", [track, metric])["slice"]
    return sorted(names, key=lambda s: (s != OVERALL, s))


def slice_choices(cat: Catalog, track: str, metric: str) -> list[tuple[str, str]]:
    """A slice picker's (label, id) pairs ('country × concept', 'country_concept'), overall first."""
    return [(render.slice_label(name), name) for name in slice_names(cat, track, metric)]


@_per_state
def slice_values(cat: Catalog, track: str, metric: str, slice_name: str) -> list[str]:
    return list(cat.query("SELECT DISTINCT slice_value FROM aggregates WHERE track = ? AND metric = ? AND slice = ?"
                          " ORDER BY slice_value", [track, metric, slice_name])["slice_value"])


@_per_state
def protocols(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL,
              slice_value: str = "all") -> pd.DataFrame:
    """The protocols the rows of one metric and slice were scored under: protocol_id, protocol, rows,
    provenance, suite (the track's part of the suite the store serves, ``Suite.answered_by``, judged by its
    protocol's judge where the track pins one: ``Protocol.judged_alike``) and on_protocol
    (the track's headline protocol); the suite's first, then on-protocol ones, then recorded ones, the largest
    first, then ``unrecorded``."""
    frame = cat.query(f"SELECT coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, any_value(protocol) AS protocol, "
                      "count(*) AS rows, min(provenance) AS provenance FROM aggregates WHERE track = ? AND metric = ? "
                      "AND slice = ? AND slice_value = ? GROUP BY 1", [track, metric, slice_name, slice_value])
    suite, declared = cat.store.suite, track_registry.get(track).protocol
    frame["suite"] = [suite.answered_by(track, results.protocol_fields(p) or {}) and declared.judged_alike(p)
                      for p in frame["protocol"]]
    frame["on_protocol"] = [track_registry.on_protocol(track, p) for p in frame["protocol"]]
    frame["recorded"] = frame["protocol_id"] != UNRECORDED
    return frame.sort_values(["suite", "on_protocol", "recorded", "rows", "protocol_id"],
                             ascending=[False, False, False, False, True], ignore_index=True).drop(columns="recorded")


def pick_protocol(table: pd.DataFrame, wanted: str | None = None) -> str | None:
    """``wanted`` if ``protocols`` lists it, else the suite's when it has rows, else the track's headline protocol
    when it has rows, else the recorded protocol with the most rows, else ``unrecorded`` (None without rows)."""
    ids = list(table["protocol_id"])
    return wanted if wanted in ids else (ids[0] if ids else None)


def overall_protocol(cat: Catalog, track: str, table: pd.DataFrame | None = None) -> str | None:
    """The protocol of a track's headline rows in the overall ranking: the suite's when it has rows, else the
    track's headline protocol, else the papers' (``protocols``' order); never another protocol of scored rows (the
    headline metric scored on other prompts, say CLIPScore on the diversity prompts, is not awareness; a judged
    track's rows by another judge than its protocol's, say the CLIP probe's relevance, are not relevance), nor
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
    backbones = render.public_backbones(fields.get("backbones") or []) or "none"
    revision = f" (prompt rows {fields['dataset_revision']})" if fields.get("dataset_revision") else ""
    missing = (" (an image declared but missing scored as a failure)" if fields.get("missing_images") ==
               results.MISSING_AS_FAILURES else "")
    count = "unstated images" if images is None else f"{images} image{'' if images == 1 else 's'}"
    build = "; an unpinned build of the suite" if fields.get("build") else ""
    return (f"dataset {fields.get('dataset')}{revision}; {count} per prompt{missing}; metric version "
            f"{render.public_version(fields.get('metric_version'))}; backbones {backbones}{build}")


def chart_protocols(cat: Catalog, track: str) -> pd.DataFrame | None:
    """``protocols`` of the table a track's Overview opens on (``metric_id``, ``overview_slice``); None without
    rows."""
    metric = metric_id(cat, track, None)
    if metric is None:
        return None
    name, values = overview_slice(cat, track, metric)
    return protocols(cat, track, metric, name, values[0]) if values else None


def ranked(cat: Catalog, track: str, metric: str, slice_name: str = OVERALL, slice_value: str = "all",
           filters: Filters = Filters(), protocol_id: str | None = None) -> tuple[pd.DataFrame, str]:
    """The rows of one metric, slice and protocol (``pick_protocol``), after filters, ranked on the protocol's
    prompt set (``rankings.rank_frame``: value, CI and n the ranking's, with the refusal rate, rank, its 95%
    interval and tie group, or why a row is listed apart), then the paper-reported rows of other protocols, unranked
    (``beside``); and the note on what the filters hid and on what the ranking rests (which prompts, how many,
    what is apart). Rows of the ``unrecorded`` protocol are listed, never ranked: nothing says how they were
    scored. Made once per state of the results for the same choices, then read (``StoredRankings.view``)."""
    return stored_rankings.of(cat).view("ranked", (track, metric, slice_name, slice_value, filters, protocol_id),
                                        lambda: _ranked(cat, track, metric, slice_name, slice_value, filters,
                                                        protocol_id))


def _ranked(cat: Catalog, track: str, metric: str, slice_name: str, slice_value: str, filters: Filters,
            protocol_id: str | None) -> tuple[pd.DataFrame, str]:
    chosen = pick_protocol(protocols(cat, track, metric, slice_name, slice_value), protocol_id)
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    if chosen not in (None, UNRECORDED) and slice_name != OVERALL:  # one that answered none of its prompts: ranked
        frame = rankings.with_absent(frame, rankings.overall_rows(cat, track, metric, chosen), slice_name, slice_value)
    protocol_models = frame.loc[frame["protocol_id"] == chosen, ["model", "provenance"]].drop_duplicates()
    frame, note = filters.apply(frame)
    admitted = {p: track_registry.on_protocol(track, p) for p in set(frame["protocol"])}  # few protocols, many rows
    frame = frame.assign(on_protocol=[admitted[p] for p in frame["protocol"]])
    mine = frame["protocol_id"] == chosen
    why = ""
    if chosen == UNRECORDED:
        ranks = rankings.listed(frame[mine], "scored before protocols were recorded")
        why = ("These rows were scored before protocols were recorded, so nothing says they were scored alike: "
               "they are listed, never ranked.")
    elif mine.any():  # the protocol's stored ranking (``leaderboard.stored_rankings``), its rows the filters keep
        ranks, why = stored_rankings.apply(cat, frame[mine], track, metric, slice_name, slice_value)
        ranks = _alone(ranks) if len(protocol_models) == 1 else ranks  # alone, not the filters' doing
        why = why[:1].upper() + why[1:] + "." if why else ""
        if ranks["not_ranked"].eq(LONE_ON_TABLE).any():
            why += f" One model alone is not ranked yet: {LONE_ON_TABLE}."
    else:
        ranks = rankings.listed(frame[mine], "")
    beside = frame[~mine & (frame["provenance"] == "reported")].assign(beside=True, not_ranked="other protocol")
    out = pd.concat([ranks.assign(beside=False), beside], ignore_index=True) if len(beside) else \
        ranks.assign(beside=False)
    return out, " ".join(n for n in (note, why) if n)


def _alone(ranks: pd.DataFrame) -> pd.DataFrame:
    """The ranking of a protocol that holds one model (whatever the filters): its row not ranked yet
    (``LONE_ON_TABLE``), as the overall says of a model alone on its tracks: "1" of one compares it with nothing."""
    ranked = ranks["not_ranked"].eq("") & ranks["rank"].notna()
    if ranked.sum() != 1:
        return ranks
    places = ["rank", "rank_low", "rank_high", "tie_group"]
    return ranks.assign(**{c: ranks[c].mask(ranked) for c in places},
                        not_ranked=ranks["not_ranked"].mask(ranked, LONE_ON_TABLE))


def headline_rows(cat: Catalog, filters: Filters = Filters(), slice_name: str = OVERALL,
                  slice_value: str = "all") -> pd.DataFrame:
    """Each track's headline metric on one slice: one row per model, provenance and protocol (its latest). No
    rows (a store with nothing scored yet) is a frame of the columns with no row, as every caller reads columns."""
    pairs = [(t, track_registry.get(t).headline) for t in tracks(cat) if track_registry.get(t).headline]
    if not pairs:
        return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE false")
    frame = cat.query(
        f"SELECT {COLUMNS} FROM aggregates WHERE slice = ? AND slice_value = ? AND list_contains(?, track || '/' || "
        "metric)", [slice_name, slice_value, [f"{t}/{m}" for t, m in pairs]])
    frame, _ = filters.apply(frame)
    return frame.sort_values("scored_at", na_position="first").drop_duplicates(
        ["track", "model", "provenance", "protocol_id"], keep="last")


def headline_protocol_rows(cat: Catalog, frame: pd.DataFrame, beside: bool = False
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``headline_rows`` of the tracks in the overall (``benchmark.track.Track.not_in_overall`` empty; with
    ``beside``, of those shown beside it instead) kept to each track's ``overall_protocol``, and the rows of those
    tracks left out (under other protocols, or of a track with no eligible protocol), for the note to name."""
    keep = pd.Series(False, index=frame.index)
    chosen_tracks = pd.Series(False, index=frame.index)
    for track in frame["track"].unique():
        if bool(track_registry.get(track).not_in_overall) != beside:
            continue
        chosen_tracks |= frame["track"] == track
        if (chosen := overall_protocol(cat, track)) is not None:
            keep |= (frame["track"] == track) & (frame["protocol_id"] == chosen)
    return frame[keep], frame[~keep & chosen_tracks]


def track_sets(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (model, provenance) of headline rows: the set of tracks it has a row on, as text ('a + b')."""
    held: dict[tuple, set] = {}
    for model, provenance, track in zip(frame["model"], frame["provenance"], frame["track"]):
        held.setdefault((model, provenance), set()).add(track)
    return pd.DataFrame([(model, provenance, " + ".join(sorted(tracks, key=track_order)))
                         for (model, provenance), tracks in sorted(held.items())],
                        columns=["model", "provenance", "track_set"])


def overall(cat: Catalog, filters: Filters = Filters(), track_set: str | None = None
            ) -> tuple[pd.DataFrame, list[tuple[str, int]], str, pd.DataFrame]:
    """The overall ranking: each track's headline rows under its chosen protocol (the tracks in the overall only), the
    models scored on one set of tracks (``track_set``; default: of the sets with at least two models, the one with the
    most tracks, then the most models) ranked by mean win rate with intervals. Returns the ``rankings.win_rates`` table
    (with each track shown beside the mean, ``Track.not_in_overall``, as "<track>:value": the value its own ranking
    gives, whose rows are in ``attrs["ranked"]`` too), every set with its model count (in that order), the set shown,
    and the headline rows left out (``headline_protocol_rows``: under other protocols).

    The ranking of each set is stored (``stored_rankings.StoredRankings.overall``: computed once per change of the
    results); filters hide its models, never change it: a model is shown when the filters keep one of its headline
    rows, with its win rates and ranks among every model of the set (the sets and their counts are the unfiltered
    ones). This answer is made once per state of the results for the same choices, then read
    (``StoredRankings.view``)."""
    return stored_rankings.of(cat).view("overall", (filters, track_set), lambda: _overall(cat, filters, track_set))


def _overall(cat: Catalog, filters: Filters, track_set: str | None
             ) -> tuple[pd.DataFrame, list[tuple[str, int]], str, pd.DataFrame]:
    """``overall`` made: what the recompute calls (never a view made before the rankings it stores)."""
    stored = stored_rankings.of(cat)
    # The state before the rows are read: results that land while they are read make what is kept stale (computed
    # again), never current with the rows before them.
    state = stored.state()
    headline = headline_rows(cat)
    frame, off = headline_protocol_rows(cat, headline)
    if frame.empty:
        return rankings.win_rates(frame, cat), [], "", off
    sets = track_sets(frame)
    counts = sets["track_set"].value_counts()
    choices = sorted(counts.items(), key=lambda item: (item[1] < 2, -item[0].count("+"), -item[1], item[0]))
    chosen = track_set if track_set in counts else choices[0][0]
    (wide, ranked), updating = stored.overall(chosen, lambda: _set_ranking(cat, frame, headline, sets, chosen), state)
    kept, _ = filters.apply(headline)
    shown = set(zip(kept["model"], kept["provenance"]))
    keep = [key in shown for key in zip(wide["model"], wide["provenance"])]
    out = wide[keep].reset_index(drop=True)
    out.attrs["note"] = (f"{stored_rankings.UPDATING}; " if updating else "") + wide.attrs.get("note", "")
    out.attrs["ranked"] = {track: rows[[key in shown for key in zip(rows["model"], rows["provenance"])]]
                           for track, rows in ranked.items()}
    return out, choices, chosen, off


def _set_ranking(cat: Catalog, frame: pd.DataFrame, headline: pd.DataFrame, sets: pd.DataFrame, chosen: str
                 ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The overall ranking of one track set, unfiltered (``rankings.win_rates`` over its members' headline rows,
    with the tracks beside the mean from their stored rankings), and its rows per track (``attrs["ranked"]``)."""
    members = sets[sets["track_set"] == chosen]
    frame = frame.merge(members[["model", "provenance"]], on=["model", "provenance"])
    wide = rankings.win_rates(frame, cat)
    if len(members) < 2:  # one model: shown with its own scores, unranked, saying what ranks it
        wide["not_ranked"] = wide["not_ranked"].where(wide["not_ranked"] != "", LONE)
    ranked = dict(wide.attrs["ranked"])
    beside, _ = headline_protocol_rows(cat, headline, beside=True)
    for track, group in beside.groupby("track", sort=False):
        rows, _ = stored_rankings.apply(cat, group, track, track_registry.get(track).headline)
        ranked[track] = rows
        values = dict(zip(zip(rows["model"], rows["provenance"]), rows["value"]))
        wide[track + BESIDE] = [values.get(key, np.nan) for key in zip(wide["model"], wide["provenance"])]
    return wide, ranked


def recompute(cat: Catalog) -> int:
    """Compute every ranking whose results changed since it was stored (``leaderboard.stored_rankings``): each
    protocol's ranking on each slice value of each metric, group by group (a group whose submissions did not change
    is left as it is), then the overall ranking of every track set. Returns how many rankings were computed. What
    the app's thread runs when results change; ``benchmarks/app_speed.py`` times it."""
    with cat.keeping_track_rows():  # each track's per-prompt rows read once for all its metrics
        return _recompute(cat)


def _recompute(cat: Catalog) -> int:
    stored = stored_rankings.of(cat)
    keys = cat.query(f"SELECT DISTINCT track, metric, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, slice, "
                     "slice_value FROM aggregates ORDER BY 1, 3, 2, 4, 5")
    groups = [(track, protocol_id, [tuple(k) for k in group.itertuples(index=False)])
              for (track, protocol_id), group in keys.groupby(["track", "protocol_id"], sort=False)]
    # What the first page shows first: each group's headline ranking on the whole prompt set, then the overall.
    computed = sum(stored.current(key) for _, _, group in groups for key in group
                   if key[1] == track_registry.get(key[0]).headline and key[3] == OVERALL)
    frame, _ = headline_protocol_rows(cat, headline_rows(cat))
    for track_set in (sorted(set(track_sets(frame)["track_set"])) if len(frame) else []):
        _overall(cat, Filters(), track_set)
    stored.publish()  # the pages show these now, the others while they are recomputed
    for track, protocol_id, group in groups:
        computed += stored.refresh_group(track, protocol_id, group)
    return computed


def win_rate_columns(wide: pd.DataFrame) -> list[str]:
    """The tracks of an ``overall`` table that have a win rate (in its mean), in the README's order."""
    return sorted((c for c in wide.columns if c not in WIDE_COLUMNS and not c.endswith((BESIDE, SCORE))),
                  key=track_order)


def beside_columns(wide: pd.DataFrame) -> list[str]:
    """The columns of an ``overall`` table holding a track's headline value beside the win rates, not in their mean
    (``Track.not_in_overall``: variability), as "<track>:value"."""
    return [c for c in wide.columns if c.endswith(BESIDE)]


def model_ids(cat: Catalog) -> dict[tuple[str, str], str]:
    """(model, provenance) -> the model's id (Hub id or URL, as its rows record it), for ``display_win_rates``."""
    frame = cat.query("SELECT model, provenance, max(model_id) AS model_id FROM aggregates WHERE model_id IS NOT "
                      "NULL GROUP BY model, provenance")
    return dict(zip(zip(frame["model"], frame["provenance"]), frame["model_id"]))


def heatmap(cat: Catalog, track: str, metric: str, slice_name: str, filters: Filters = Filters(),
            protocol_id: str | None = None) -> pd.DataFrame:
    """Model x slice value matrix of one metric under one protocol (default ``pick_protocol``'s on the first
    value), as ``stored_rankings.heatmap`` fills and orders it: each cell the number of that value's table, the rows in
    the order of the metric's ranking on its whole prompt set, the first ``HEATMAP_MODELS``. Made once per state
    of the results for the same choices, then read (``StoredRankings.view``)."""
    return stored_rankings.of(cat).view("heatmap", (track, metric, slice_name, filters, protocol_id),
                                        lambda: _heatmap(cat, track, metric, slice_name, filters, protocol_id))


def _heatmap(cat: Catalog, track: str, metric: str, slice_name: str, filters: Filters, protocol_id: str | None
             ) -> pd.DataFrame:
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ?",
                      [track, metric, slice_name])
    frame, _ = filters.apply(frame)
    if frame.empty:
        return pd.DataFrame()
    first = min(frame["slice_value"].unique())
    chosen = protocol_id or pick_protocol(protocols(cat, track, metric, slice_name, first))
    frame = frame[frame["protocol_id"] == chosen]
    if frame.empty:
        return pd.DataFrame()
    overall = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                        f"coalesce(protocol_id, '{UNRECORDED}') = ?", [track, metric, OVERALL, chosen])
    overall, _ = filters.apply(overall)
    return stored_rankings.heatmap(cat, frame, overall, track, metric, slice_name, HEATMAP_MODELS)


def submissions(cat: Catalog) -> pd.DataFrame:
    """Scored submissions, one row each (for pickers): id, model, dataset (a suite submission's parts' datasets,
    joined by " + "), scored_at; read once per state of the results (``StoredRankings.view``)."""
    return stored_rankings.of(cat).view("submissions", (), lambda: _submissions(cat))


def _submissions(cat: Catalog) -> pd.DataFrame:
    return cat.query("SELECT submission_id, model, string_agg(DISTINCT dataset, ' + ' ORDER BY dataset) AS dataset, "
                     "max(scored_at) AS scored_at FROM aggregates WHERE provenance = 'scored' "
                     "GROUP BY submission_id, model ORDER BY model, scored_at")


def rows(cat: Catalog, track: str, metric: str | None = None, slice_name: str | None = None) -> pd.DataFrame:
    """The rows (``COLUMNS``) of a track, or of one of its metrics, or of that metric on one slice (every value)."""
    where = " AND ".join(["track = ?"] + [f"{column} = ?" for column, value in (("metric", metric),
                                                                             ("slice", slice_name)) if value])
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE {where}",
                     [track, *(value for value in (metric, slice_name) if value)])


def chart_rows(cat: Catalog, track: str, protocol_id: str | None, metrics: tuple[str, ...], slices: tuple[str, ...]
               ) -> pd.DataFrame:
    """The rows a chart of ``track`` reads under one protocol: those of its ``metrics`` on its ``slices``, and every
    metric's on the whole prompt set (each submission the protocol ranks: whose curves a chart draws); none
    without a protocol."""
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND protocol_id = ? AND (slice = '{OVERALL}' "
                     "OR (list_contains(?, metric) AND list_contains(?, slice)))",
                     [track, protocol_id, list(metrics), list(slices)])


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


def scored_protocols(cat: Catalog) -> pd.DataFrame:
    """The protocols scored rows were scored under, per track: track, protocol_id, protocol and the number of
    models, in display order."""
    frame = cat.query(f"SELECT track, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id, any_value(protocol) AS "
                      "protocol, count(DISTINCT model) AS models FROM aggregates WHERE provenance = 'scored' "
                      "GROUP BY 1, 2 ORDER BY 1, 2")
    order = {t: i for i, t in enumerate(tracks(cat))}
    return frame.sort_values("track", key=lambda t: t.map(order), kind="stable", ignore_index=True)


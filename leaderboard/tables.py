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
withholding prompts never raises a rank and no model's answers shrink another's comparison. Ranking: best first by
the metric's direction, ties share a rank, each rank with a 95% interval from a paired bootstrap over the prompt
set and tie groups of models whose intervals all hold one common rank. Win rate (HEIM's "mean win rate"): for each
track's headline metric on the overall slice, the share of the other models a model beats on that track's
ranking (the same scores; ties count half; a model not ranked there leaves the comparison); the overall score is
the mean over the tracks a model has a score on, only models scored on the same set of tracks are ranked
together, and tracks with no direction to win on (variability) are left out of the mean, their headline value
shown beside it. Each track's rows come from one protocol (``overall_protocol``): the suite's, else the track's
headline one, else the papers'; a protocol on other prompts never stands in for a track's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark import ranking, results
from benchmark import tracks as track_registry
from leaderboard import rankings, render
from leaderboard.catalog import Catalog
from leaderboard.filters import Filters
from leaderboard.rankings import OVERALL, UNRECORDED, higher_is_better

# The columns the views read (never SELECT *: the catalog holds every provenance field).
COLUMNS = ("track, metric, metric_label, slice, slice_value, model, model_id, value, ci_low, ci_high, n, excluded, "
           "model_type, parameters_billions, scored_at, provenance, citation, source_table, higher_is_better, "
           "range_low, range_high, value_kind, harness_version, backbone, seeds, dataset, metric_version, submission_id, "
           f"protocol, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id")
HEATMAP_MODELS = 40  # rows of a heatmap: the best models on the slice's mean (filters choose others)
# The columns of ``win_rates`` that are not a track's win rate.
WIDE_COLUMNS = ("model", "provenance", "win_rate", "tracks", "not_ranked", "win_low", "win_high", "rank_low",
                "rank_high")
BESIDE = ":value"  # ``overall``'s column "<track>:value": a track's headline value shown beside the win rates
SCORE = ":score"  # ``overall``'s column "<track>:score": the track's own score of each model (its ranking's value)
LONE = "ranks appear when a second model on the same tracks is scored"  # a track set of one model


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
            f"{fields.get('metric_version')}; backbones {backbones}{build}")


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
    scored."""
    chosen = pick_protocol(protocols(cat, track, metric, slice_name, slice_value), protocol_id)
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ? AND "
                      "slice_value = ?", [track, metric, slice_name, slice_value])
    frame, note = filters.apply(frame)
    frame = frame.assign(on_protocol=[track_registry.on_protocol(track, p) for p in frame["protocol"]])
    mine = frame["protocol_id"] == chosen
    why = ""
    if chosen == UNRECORDED:
        ranks = rankings.listed(frame[mine], "scored before protocols were recorded")
        why = ("These rows were scored before protocols were recorded, so nothing says they were scored alike: "
               "they are listed, never ranked.")
    elif mine.any():
        ranks, _, why = rankings.rank_frame(cat, frame[mine], track, metric, slice_name, slice_value)
        why = why[:1].upper() + why[1:] + "." if why else ""
    else:
        ranks = rankings.listed(frame[mine], "")
    beside = frame[~mine & (frame["provenance"] == "reported")].assign(beside=True, not_ranked="other protocol")
    out = pd.concat([ranks.assign(beside=False), beside], ignore_index=True) if len(beside) else \
        ranks.assign(beside=False)
    return out, " ".join(n for n in (note, why) if n)


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


def track_sets(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (model, provenance) of headline rows: the set of tracks it has a row on, as text ('a + b')."""
    return frame.groupby(["model", "provenance"])["track"].agg(
        lambda t: " + ".join(sorted(set(t), key=track_order))).rename(
        "track_set").reset_index()


def win_rates(frame: pd.DataFrame, cat: Catalog | None = None) -> pd.DataFrame:
    """Per (model, provenance): win rate on each track, their mean (HEIM's mean win rate) over the tracks it has
    one on, and ``tracks``; best first. With ``cat``, each track's win rates come from its ranking
    (``rankings.rank_frame`` on the headline rows, overall slice: the protocol's prompt set, an unanswered prompt
    counting as worst; a model listed apart on a track is listed apart here too, ``not_ranked`` saying why), with a
    95% interval on the mean win rate (win_low, win_high) and on the rank from the paired bootstrap over each
    track's prompts (``ranking.REPLICATES``, seed ``ranking.SEED``), given only when every track has one.
    ``attrs["note"]`` says what the ranking rests on and ``attrs["ranked"]`` holds each track's ranked rows (the
    numbers behind its win rates: ``leaderboard.exports``' download)."""
    entities = frame[["model", "provenance"]].drop_duplicates().reset_index(drop=True)
    if entities.empty:
        return pd.DataFrame(columns=["model", "provenance", "win_rate", "tracks"])
    index = {key: i for i, key in enumerate(zip(entities["model"], entities["provenance"]))}
    point, boot, notes, shown, own = {}, {}, [], {}, {}
    not_ranked = np.full(len(entities), "", dtype=object)
    for track, group in sorted(frame.groupby("track"), key=lambda item: track_order(item[0])):
        higher = higher_is_better(group)
        values, replicates = np.full((1, len(entities)), np.nan), None
        own[track] = np.full(len(entities), np.nan)
        if cat is None:
            values[0, [index[k] for k in zip(group["model"], group["provenance"])]] = group["value"]
            own[track][[index[k] for k in zip(group["model"], group["provenance"])]] = group["value"]
        else:
            rows, result, note = rankings.rank_frame(cat, group, track, track_registry.get(track).headline)
            shown[track] = rows
            notes.append(f"{track_registry.get(track).title}: {note}")
            where = np.array([index[k] for k in zip(rows["model"], rows["provenance"])])
            # By rank, not value: rows the ranking ties (a shared rank) count half a win each, as equal values do.
            rank = pd.to_numeric(rows["rank"], errors="coerce").to_numpy(float)
            values[0, where] = np.where(rows["not_ranked"].eq("") & rows["value"].notna(), -rank, np.nan)
            own[track][where] = rows["value"].to_numpy(float)
            for i, why in zip(where, rows["not_ranked"]):
                if why and not not_ranked[i]:
                    not_ranked[i] = f"{track_registry.get(track).title}: {why}"
            if result is not None and result.replicates is not None:
                columns = {sid: j for j, sid in enumerate(result.rows.index)}
                replicates = np.full((ranking.REPLICATES, len(entities)), np.nan)
                for i, sid, why in zip(where, rows["submission_id"], rows["not_ranked"]):
                    if not why and sid in columns:
                        replicates[:, i] = result.replicates[:, columns[sid]]
        point[track] = ranking.track_win_rates(values, higher if cat is None else True)[0]
        boot[track] = None if replicates is None else ranking.track_win_rates(replicates, higher)
    if cat is not None and any(b is None for b in boot.values()):
        notes.append("no interval on the mean win rate: a track above has none")
    means = ranking.mean_win_rates(point, boot if cat is not None else {t: None for t in boot})
    wide = entities.assign(**point, **{track + SCORE: values for track, values in own.items()})
    wide["tracks"] = means["tracks"].to_numpy()
    wide["win_rate"] = np.where(not_ranked == "", means["win_rate"], np.nan)
    wide["not_ranked"] = not_ranked
    if cat is not None and all(b is not None for b in boot.values()):
        for name in ("win_low", "win_high", "rank_low", "rank_high"):
            wide[name] = np.where(not_ranked == "", means[name], np.nan)
    scored = np.column_stack([~np.isnan(v) for v in own.values()]).any(axis=1) if own else np.zeros(len(wide), bool)
    wide = wide[(wide["tracks"] > 0) | (wide["not_ranked"] != "") | scored]
    wide = wide.sort_values(["win_rate", "model"], ascending=[False, True], na_position="last").reset_index(drop=True)
    wide.attrs["note"] = "; ".join(notes)
    wide.attrs["ranked"] = shown
    return wide


def overall(cat: Catalog, filters: Filters = Filters(), track_set: str | None = None
            ) -> tuple[pd.DataFrame, list[tuple[str, int]], str, int]:
    """The overall ranking: each track's headline rows under its chosen protocol (the tracks in the overall
    only), the models scored on one set of tracks (``track_set``; default: of the sets with at least two models,
    the one with the most tracks, then the most models) ranked by mean win rate with intervals. Returns the
    ``win_rates`` table (with each track shown beside the mean, ``Track.not_in_overall``, as "<track>:value": the
    value its own ranking gives, whose rows are in ``attrs["ranked"]`` too), every set with its model count (in
    that order), the set shown, and how many headline rows other protocols left out."""
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
    if len(members) < 2:  # one model: shown with its own scores, unranked, saying what ranks it
        wide["not_ranked"] = wide["not_ranked"].where(wide["not_ranked"] != "", LONE)
    beside, _ = headline_protocol_rows(cat, headline, beside=True)
    for track, group in beside.groupby("track", sort=False):
        rows, _, _ = rankings.rank_frame(cat, group, track, track_registry.get(track).headline, intervals=False)
        wide.attrs["ranked"][track] = rows
        values = dict(zip(zip(rows["model"], rows["provenance"]), rows["value"]))
        wide[track + BESIDE] = [values.get(key, np.nan) for key in zip(wide["model"], wide["provenance"])]
    return wide, choices, chosen, off


def track_order(track: str) -> tuple[int, str]:
    """Where a track's column stands: the README's order (``Track.order``), then by name."""
    known = list(track_registry.all_tracks())
    return (known.index(track) if track in known else len(known), track)


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
    value; a model's latest row), each value as its ranking gives it (``rankings.scores`` on that value's prompts:
    the numbers of the table the Slices tab ranks), the ``HEATMAP_MODELS`` best models by their mean over the
    slice's values, best first."""
    frame = cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = ?",
                      [track, metric, slice_name])
    frame, _ = filters.apply(frame)
    if frame.empty:
        return pd.DataFrame()
    first = sorted(frame["slice_value"])[0]
    chosen = protocol_id or pick_protocol(protocols(cat, track, metric, slice_name, first))
    frame = frame[frame["protocol_id"] == chosen]
    if frame.empty:
        return pd.DataFrame()
    values = rankings.read(cat, track, metric, frame) if chosen != UNRECORDED else None
    frame = frame.sort_values("scored_at", na_position="first").drop_duplicates(["model", "provenance",
                                                                                 "slice_value"], keep="last")
    frame = frame.assign(value=pd.concat([rankings.scores(group, values, slice_name, value)
                                          for value, group in frame.groupby("slice_value", sort=False)]))
    matrix = frame.assign(who=who(frame)).pivot_table(index="who", columns="slice_value", values="value",
                                                      aggfunc="first")
    order = matrix.mean(axis=1).sort_values(ascending=not higher_is_better(frame)).index
    return matrix.loc[order[:HEATMAP_MODELS]]


def who(frame: pd.DataFrame) -> pd.Series:
    """A row's model as a chart or heatmap names it: paper rows marked '(paper)', as one model may be both."""
    return frame["model"] + np.where(frame["provenance"] == "reported", " (paper)", "")


def ranked_values(cat: Catalog, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of one track and protocol (any metrics and slices), a model's latest, with each value the ranking's
    (``rankings.scores``: the protocol's prompts, an unanswered one counting as worst): what a chart draws."""
    frame = frame.sort_values("scored_at", na_position="first").drop_duplicates(
        ["metric", "slice", "slice_value", "model", "provenance"], keep="last")
    parts = []
    for (metric, slice_name), rows in frame.groupby(["metric", "slice"], sort=False):
        values = None if rows["protocol_id"].iloc[0] == UNRECORDED else rankings.read(cat, rows["track"].iloc[0],
                                                                                      metric, rows)
        parts += [group.assign(value=rankings.scores(group, values, slice_name, value))
                  for value, group in rows.groupby("slice_value", sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else frame


def submissions(cat: Catalog) -> pd.DataFrame:
    """Scored submissions, one row each (for pickers): id, model, dataset (a suite submission's parts' datasets,
    joined by " + "), scored_at."""
    return cat.query("SELECT submission_id, model, string_agg(DISTINCT dataset, ' + ' ORDER BY dataset) AS dataset, "
                     "max(scored_at) AS scored_at FROM aggregates WHERE provenance = 'scored' "
                     "GROUP BY submission_id, model ORDER BY model, scored_at")


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


"""Typed rows for downloads and the API: one row per model x metric x slice (and protocol), numbers as numbers.

What a script or a spreadsheet reads back: ids, never labels (track, metric, slice), each value with its 95%
CI, n and refusal rate (for a ranked table's rows: the ranking's, on the protocol's prompt set,
``leaderboard.rankings``), the rank with its 95% interval and tie group where the view ranks the row (or why a row
of that table is not ranked), the protocol in columns,
the provenance as stored (``scored`` / ``reported``), the submission and the model with links. The strings
people read ("[0.009, 0.015]", "paper", rounded scores) stay in ``display.display``.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from benchmark import results
from benchmark.ranking import RULE_VERSION
from benchmark import tracks as track_registry
from benchmark.errors import CultureLensError
from leaderboard import links, render, tables
from leaderboard.catalog import Catalog

# Every column of a typed row, in order, with its pandas dtype (nullable where a value may be missing).
COLUMNS = {
    "track": "string", "metric": "string", "metric_label": "string", "slice": "string", "slice_value": "string",
    "model": "string", "model_id": "string", "model_url": "string", "model_type": "string",
    "parameters_billions": "float64", "provenance": "string", "submission_id": "string",
    "value": "float64", "ci_low": "float64", "ci_high": "float64", "ci_note": "string", "n": "Int64",
    "excluded": "Int64", "refused": "float64", "range_low": "float64", "range_high": "float64",
    "value_kind": "string",
    "higher_is_better": "boolean", "rank": "Int64", "rank_low": "Int64", "rank_high": "Int64", "tie_group": "Int64",
    "rank_rule": "Int64", "not_ranked": "string",
    "protocol_id": "string", "on_protocol": "boolean", "dataset": "string", "images_per_prompt": "Int64",
    "missing_images": "string",
    "metric_version": "string", "backbones": "string",
    "scored_at": "datetime64[us, UTC]", "harness_version": "string", "backbone": "string", "seeds": "string",
    "citation": "string", "source_table": "string", "paper_url": "string",
}
OVERALL_TRACK = "overall"  # the track id of the overall ranking's rows
# What a track download's rows outside the view's ranking are (``not_ranked``): a scored row's value is its
# submission's own mean over the prompts it answered, not the ranking's (the protocol's prompts, a refused one at the
# worst value), so it is not comparable across models.
OWN_PROMPTS = ("not comparable: outside this view's ranking, the submission's own mean over the prompts it answered "
               "(a refused prompt left out, not counted as worst); that metric and slice's own table ranks it")
ONE_PROMPT = "one prompt's value over its images: not ranked"
PAPER_VALUE = "a paper's published value: not ranked in this download"
MEAN_WIN_RATE = "mean_win_rate"  # metric ids of the overall ranking: the mean over tracks, and per track
WIN_RATE = "win_rate"


class UnknownChoice(CultureLensError, ValueError):
    """A track, metric, slice, value or protocol that is not there; the message names the valid ones."""


def _check(kind: str, value, valid: list[str], where: str = "") -> None:
    if value not in valid:
        shown = ", ".join(valid[:50]) + (f" (and {len(valid) - 50} more)" if len(valid) > 50 else "")
        raise UnknownChoice(f"no {kind} {str(value)[:100]!r}{where}; valid {kind} ids: {shown or 'none yet'}")


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Catalog rows (``tables.COLUMNS``, with ranks where ranked) as typed rows of ``COLUMNS``: the protocol's
    fields in their own columns (dataset, images per prompt, metric version, backbones joined by '; ': with
    ``protocol_id``, all of ``results.protocol_columns``; an unrecorded protocol keeps the row's own dataset and
    version), whether it is the track's headline protocol, links, and every column cast to its dtype (a column
    the rows lack is null). A download holds many rows but few protocols, models and papers: each text is made
    once per distinct value and taken for its rows."""
    out = frame.reset_index(drop=True)
    out = out.assign(**{c: None for c in [*COLUMNS, "protocol"] if c not in out.columns})
    low, high = (pd.to_numeric(out[c], errors="coerce").astype(float) for c in ("ci_low", "ci_high"))
    fields = functools.cache(lambda p: results.protocol_fields(p) or {})

    def field(name: str, own: str | None = None, shown=lambda v: v, dtype: str = "string") -> pd.Series:
        """The protocol's ``name`` field per row (``shown`` of it), else the row's own column ``own``."""
        taken = _per_value(out["protocol"], lambda p: shown(fields(p)[name]) if name in fields(p) else None, dtype)
        if own is None:
            return taken
        has = _per_value(out["protocol"], lambda p: name in fields(p), "boolean")
        return taken.where(has, _per_value(out[own], shown, dtype))

    out = out.assign(
        dataset=field("dataset", "dataset"),
        images_per_prompt=field("images_per_prompt", dtype="Int64"),
        missing_images=field("missing_images"),
        metric_version=field("metric_version", "metric_version", _public_version),
        backbones=field("backbones", shown=lambda b: render.public_backbones(b).replace(", ", "; ") if b else None),
        model_id=_per_value(out["model_id"], lambda i: None if i is None else render.public_id(i), "string"),
        on_protocol=_on_protocol(out),
        model_url=_per_value(out["model_id"], links.model_url, "string"),
        paper_url=_per_value(out["citation"], links.paper_url, "string"),
        scored_at=pd.to_datetime(out["scored_at"], utc=True, errors="coerce", format="ISO8601"),
        not_ranked=_per_value(out["not_ranked"], lambda v: v if isinstance(v, str) and v else None, "string"),
        ci_low=low.where(~np.isinf(low)), ci_high=high.where(~np.isinf(high)),
        ci_note=_unbounded_notes(low, high, out["n"]),
        rank_rule=pd.Series(RULE_VERSION, index=out.index).where(pd.notna(out["rank"]) &
                                                                          pd.notna(out["rank_low"])),
    )
    return out[list(COLUMNS)].astype(COLUMNS)


def _public_version(version) -> str | None:
    """A row's metric version as visitors read it (``render.public_version``: no operator's folder); None kept."""
    return None if version is None or pd.isna(version) else render.public_version(version)


def unbounded(low: float, high: float, n) -> str | None:
    """What ``ci_note`` says of an interval a side of which the prompts cannot bound (infinite in the ranking; null
    in ci_low or ci_high here, as JSON has no infinity): "not bounded above by 200 prompts"; None otherwise."""
    sides = [side for side, bound in (("below", low), ("above", high)) if np.isinf(bound)]
    if not sides:
        return None
    count = f" by {int(n)} prompts" if pd.notna(n) else ""
    return f"not bounded {' or '.join(sides)}{count}"


def _on_protocol(rows: pd.DataFrame) -> pd.Series:
    """Whether each row counts in its track's headline ranking (``benchmark.tracks.on_protocol``), asked once per
    track and protocol."""
    out = pd.Series(pd.NA, index=rows.index, dtype="boolean")
    for track in rows["track"].dropna().unique():
        mine = (rows["track"] == track).to_numpy(dtype=bool, na_value=False)
        out[mine] = _per_value(rows.loc[mine, "protocol"], lambda p: track_registry.on_protocol(track, p), "boolean")
    return out


def _unbounded_notes(low: pd.Series, high: pd.Series, n: pd.Series) -> pd.Series:
    """``unbounded`` of each row, computed for the rows with an infinite side only (few of a download's)."""
    notes = pd.Series(None, index=low.index, dtype=object)
    for i in np.flatnonzero(np.isinf(low.to_numpy()) | np.isinf(high.to_numpy())):
        notes.iat[i] = unbounded(low.iat[i], high.iat[i], n.iat[i])
    return notes


def _per_value(values: pd.Series, function, dtype: str | None = None) -> pd.Series:
    """``function`` of each value (missing ones as None), computed once per distinct value and taken for its rows,
    as ``dtype`` (default object)."""
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    computed = [function(v) for v in distinct]
    computed.append(function(None) if (codes < 0).any() else None)  # code -1: a missing value
    taken = np.where(codes < 0, len(computed) - 1, codes)
    if dtype is None:
        out = np.empty(len(computed), dtype=object)
        out[:] = computed
        return pd.Series(out[taken], index=values.index, dtype=object)
    return pd.Series(pd.array(computed, dtype=dtype).take(taken), index=values.index)


def ranking(cat: Catalog, track: str, metric: str, slice_name: str = tables.OVERALL, slice_value: str = "all",
            protocol_id: str | None = None, filters: tables.Filters = tables.Filters()) -> pd.DataFrame:
    """The typed rows of one ranked table (``tables.ranked``: the protocol's rows ranked, then the paper rows of
    other protocols, rank null), every id checked: ``UnknownChoice`` names the valid ones."""
    _check("track", track, tables.tracks(cat))
    _check("metric", metric, [m for _, m in tables.metrics(cat, track)], f" in track {track!r}")
    _check("slice", slice_name, tables.slice_names(cat, track, metric), f" for metric {metric!r}")
    _check("slice value", slice_value, tables.slice_values(cat, track, metric, slice_name),
           f" for slice {slice_name!r}")
    if protocol_id not in (None, ""):
        _check("protocol", protocol_id,
               list(tables.protocols(cat, track, metric, slice_name, slice_value)["protocol_id"]),
               f" for {metric!r} on {slice_name} = {slice_value}")
    frame, _ = tables.ranked(cat, track, metric, slice_name, slice_value, filters, protocol_id or None)
    return typed(frame.drop(columns=["beside"]))


def ranked_choice(cat: Catalog, track: str, metric: str | None = None, protocol_id: str | None = None
                  ) -> tuple[str | None, str | None]:
    """The metric (id) and protocol whose table a track's download ranks (``track_rows``): ``metric`` by id or
    label, default the one the Overview opens on; ``protocol_id`` where that table has it, else ``pick_protocol``'s.
    (None, None) for a track without metrics."""
    metric = tables.metric_id(cat, track, metric)
    if metric is None:
        return None, None
    name, values = tables.overview_slice(cat, track, metric)
    return metric, tables.pick_protocol(tables.protocols(cat, track, metric, name, values[0]), protocol_id)


def track_rows(cat: Catalog, track: str, metric: str | None = None, protocol_id: str | None = None,
               filters: tables.Filters = tables.Filters()) -> pd.DataFrame:
    """A track's download: every row of the track (every metric, slice and protocol; not per prompt) the filters
    keep, typed, ranked metric first. The rows of the table the Overview shows for ``metric`` (by id or label;
    default the one the Overview opens on) and ``protocol_id``, each value of its slice (``tables.overview_slice``)
    ranked apart, carry their rank, interval and tie group; every other row says in ``not_ranked`` what its value is
    (``OWN_PROMPTS``: a scored row's own aggregate, not comparable with a ranked value)."""
    metric, chosen = ranked_choice(cat, track, metric, protocol_id)
    if metric is None:
        return typed(pd.DataFrame())
    name, values = tables.overview_slice(cat, track, metric)
    shown = [tables.ranked(cat, track, metric, name, value, filters, chosen)[0].drop(columns=["beside"])
             for value in values]
    where, params = "", [PAPER_VALUE, ONE_PROMPT, OWN_PROMPTS, track, metric, name, chosen or ""]
    if filters != tables.Filters():  # only the rows of the models some row of which the filters keep are read
        fields = cat.query("SELECT DISTINCT model, model_type, parameters_billions, scored_at, provenance FROM "
                           "aggregates WHERE track = ?", [track])
        where, params = " AND (model IS NULL OR list_contains(?, model))", [*params, sorted(
            set(filters.apply(fields)[0]["model"].dropna()))]
    rest = cat.query(f"SELECT {tables.COLUMNS}, CASE WHEN provenance = 'reported' THEN ? WHEN slice = 'prompt' THEN ? "
                     "ELSE ? END AS not_ranked FROM aggregates WHERE track = ? AND NOT (metric = ? AND slice = ? AND "
                     f"(coalesce(protocol_id, '{tables.UNRECORDED}') = ? OR provenance = 'reported')){where} "
                     "ORDER BY metric, slice, slice_value, model, provenance, protocol_id, submission_id", params)
    rest, _ = filters.apply(rest)  # the rows themselves, as every view filters them
    return typed(pd.concat([*shown, rest], ignore_index=True))


def overall_rows(cat: Catalog, filters: tables.Filters = tables.Filters(), track_set: str | None = None
                 ) -> pd.DataFrame:
    """The overall ranking's download: per model of the track set shown (``tables.overall``) a row of metric
    ``mean_win_rate`` (track ``overall``, slice value the track set; value, 95% interval, rank and its
    interval), a ``win_rate`` row per track, then the headline rows the win rates were computed from, and those of
    the tracks shown beside the mean win rate (variability: its headline value, not in the mean), each with the
    numbers of its track's ranking (score, CI, n, refusal rate, rank: ``tables.win_rates``' ``attrs["ranked"]``),
    never its own-prompt aggregate."""
    wide, _, chosen, _ = tables.overall(cat, filters, track_set)
    if wide.empty:
        return typed(pd.DataFrame())
    rank = wide.get("rank")
    common = {"slice": tables.OVERALL, "model": wide["model"], "provenance": wide["provenance"],
              "higher_is_better": True}
    ids = tables.model_ids(cat)
    model_id = [ids.get(k) for k in zip(wide["model"], wide["provenance"])]
    rows = [pd.DataFrame({**common, "track": OVERALL_TRACK, "metric": MEAN_WIN_RATE,
                          "metric_label": "Overall win rate (HEIM's mean win rate over tracks)",
                          "slice_value": chosen, "model_id": model_id, "value": wide["win_rate"],
                          "ci_low": wide.get("win_low"), "ci_high": wide.get("win_high"), "rank": rank,
                          "rank_low": wide.get("rank_low"), "rank_high": wide.get("rank_high"),
                          "not_ranked": wide["not_ranked"]})]
    for track in chosen.split(" + "):
        rows.append(pd.DataFrame({**common, "track": track, "metric": WIN_RATE, "slice_value": "all",
                                  "metric_label": f"Win rate on {track_registry.get(track).title}'s headline metric",
                                  "model_id": model_id, "value": wide[track]}))
    frame = pd.concat(list(wide.attrs["ranked"].values()), ignore_index=True)  # each track's ranked rows
    frame = frame.merge(wide[["model", "provenance"]], on=["model", "provenance"])
    frame = frame.sort_values(["track", "model"], kind="stable")
    return typed(pd.concat([*rows, frame], ignore_index=True))


def overall_ranking(cat: Catalog, track_set: str | None = None) -> pd.DataFrame:
    """``overall_rows`` of one track set ('awareness + iconicity'; default: ``tables.overall``'s), checked:
    ``UnknownChoice`` names the sets there are."""
    if track_set not in (None, ""):
        frame, _ = tables.headline_protocol_rows(cat, tables.headline_rows(cat))
        _check("track set", track_set, sorted(set(tables.track_sets(frame)["track_set"])) if len(frame) else [])
    return overall_rows(cat, track_set=track_set or None)


def records(frame: pd.DataFrame) -> list[dict]:
    """Typed rows as JSON-ready dicts: None for missing values, times as ISO 8601 text."""
    out = frame.assign(scored_at=frame["scored_at"].map(lambda t: t.isoformat() if pd.notna(t) else None))
    return out.astype(object).where(out.notna(), None).to_dict("records")

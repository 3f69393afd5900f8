"""What a ranking rests on, read from the catalog, and the ranked rows it gives: one protocol's per-prompt values,
which prompts each submission answered and the protocol's prompt set, handed to ``benchmark.ranking`` (the rules).

The prompt set is the protocol's, never the first submission's nor what the ranked rows answered between them:

- the prompts of the dataset the protocol names, at the revision it names, when this store serves exactly that
  (``Catalog.dataset_prompts``); else the prompts any submission of the protocol answered (the note says which);
- of those, the ones the metric is defined on: a prompt that submissions answered without any of them getting a
  value of the metric (CRC on a still reference, an artifact metric on a prompt without an artifact label) is not
  in its set, while a prompt nobody answered is;
- on a slice value, the prompts of that value (the dataset's columns, else the per-image rows of the protocol's
  submissions); for a metric about one label (``Track.ranked_on``: relevance to Japan), those naming it.

A submission answered a prompt, for a metric, when it has a per-prompt value of the metric there, or a row whose
value is undefined by the metric's own rule (null with nothing excluded: VR where no image was recognised), which
the ranking leaves out of its mean (``Catalog.track_prompts``; for a metric made of others' means, of its first
input). Every other prompt of the set is unanswered and counts as the metric's worst value, in the refusal rate:
one it sent nothing for; one whose value was not scored (null with rows excluded: a prompt-level value whose
declared images were not all there, ``harness.refuse_incomplete``, or whose every image failed); and one it
answered for other metrics of the track but has no row of this one, as results scored before undefined values
were recorded hold (a value nothing says is undefined is no choice to leave a prompt out on). One row per model and
provenance is ranked, its latest; an earlier one is listed apart.
A submission of the protocol that answered none of a slice value's prompts has no row there in the results; every
view gives it one (``absent``), at the worst value with 100% refused, as the ranking counts it.

The views' rules live here, so that each reads the ranking's numbers: a table's rows (``rank_frame``), a heatmap's
cell or a chart's value (``scores``) and the overall's win rates from each track's comparisons (``win_rates``).
They compute; views read what ``leaderboard.stored_rankings`` kept of them, computed once per change of results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmark import ranking, results
from benchmark import tracks as track_registry
from benchmark.aggregate import CROSS_SEPARATOR, CROSSED
from benchmark.words import counted
from leaderboard.catalog import Catalog

OVERALL = "overall"
UNRECORDED = "unrecorded"  # the protocol id of rows scored before protocols were recorded
# The columns the views read (never SELECT *: the catalog holds every provenance field).
COLUMNS = ("track, metric, metric_label, slice, slice_value, model, model_id, value, ci_low, ci_high, n, excluded, "
           "model_type, parameters_billions, scored_at, provenance, citation, source_table, higher_is_better, "
           "range_low, range_high, value_kind, harness_version, backbone, seeds, dataset, metric_version, submission_id, "
           f"protocol, coalesce(protocol_id, '{UNRECORDED}') AS protocol_id")
SCORE = ":score"  # ``win_rates``' column "<track>:score": the track's own score of each model (its ranking's value)
FROM_DATASET = "dataset"
FROM_ANSWERS = "answers"


@dataclass
class ProtocolValues:
    """One protocol's per-prompt values of a metric, read once for all of its slice values. ``values``: per input of
    the rule (the metric itself, or the metrics it is made of), prompts x submissions (nan: no value);
    ``answered``: prompts x submissions; ``prompts``: the protocol's prompts the metric is defined on, in order;
    ``dataset``: the dataset's prompt rows when the store serves the protocol's revision (else None, and the
    prompts are those the submissions answered); ``slices``: slice name -> prompt_id -> value, read on demand."""

    track: str
    metric: str
    rule: ranking.Rule
    values: list[pd.DataFrame]
    answered: pd.DataFrame
    prompts: list[str]
    dataset: pd.DataFrame | None
    submissions: list[str]
    catalog: Catalog
    slices: dict[str, pd.Series | None] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return FROM_DATASET if self.dataset is not None else FROM_ANSWERS

    def slice_of(self, slice_name: str) -> pd.Series | None:
        """prompt_id -> its value of a slice (crossed ones joined by ``CROSS_SEPARATOR``): from the dataset's
        columns when it has them, else from the submissions' per-image rows; None when neither holds it."""
        if slice_name not in self.slices:
            columns = list(CROSSED.get(slice_name, (slice_name,)))
            if self.dataset is not None and set(columns) <= set(self.dataset.columns):
                parts = self.dataset[columns].astype(str)
                self.slices[slice_name] = parts.agg(CROSS_SEPARATOR.join, axis=1).where(
                    self.dataset[columns].notna().all(axis=1))
            else:
                self.slices[slice_name] = self.catalog.cached(
                    ("slices", tuple(self.submissions), self.track, slice_name),
                    lambda: self.catalog.prompt_slices(self.submissions, self.track, slice_name))
        return self.slices[slice_name]

    def prompt_set(self, slice_name: str = OVERALL, slice_value: str = "all") -> tuple[list[str] | None, str]:
        """The prompts a ranking on one slice value rests on, and why there are none ('' when there are); None
        when nothing records which prompts the slice holds (no per-image rows, the dataset not served)."""
        prompts = self.prompts
        if slice_name != OVERALL:
            members = self.slice_of(slice_name)
            if members is None:
                return None, ""
            inside = set(members.index[members == slice_value])
            prompts = [p for p in prompts if p in inside]
        label = track_registry.get(self.track).ranked_on(self.metric)
        if label is not None:
            column, value = label
            members = self.slice_of(column)
            naming = set() if members is None else set(members.index[members == value])
            prompts = [p for p in prompts if p in naming]
            if not prompts:
                return [], (f"ranked on the prompts whose {column} is {value} only (where the prompt asks for "
                            "it): " + ("this slice has none, so its values are shown, not ranked" if members is not
                                       None else "nothing here records which those are, so it is not ranked"))
        return prompts, "" if prompts else "no prompt of this protocol on this slice value"


def rule(cat: Catalog, track: str, metric: str, frame: pd.DataFrame, protocol_id: str) -> ranking.Rule:
    """How ``metric`` is ranked: its direction and declared range from its rows, its inputs' from theirs (a
    ``benchmark.track.FromMeans`` metric), what an unanswered prompt does (``Track.unanswered``), and whether
    it has a better end at all (a track left out of the overall for having none, ``Track.not_in_overall``)."""
    declared = track_registry.get(track)
    composite = next((f for f in declared.from_means if f.metric == metric), None)
    higher = higher_is_better(frame)
    low, high = (_number(frame[c]) if c in frame.columns else None for c in ("range_low", "range_high"))
    inputs = (ranking.Quantity(higher, low, high),)
    if composite is not None:
        known = cat.query(f"SELECT metric, bool_and(higher_is_better) AS higher, max(range_low) AS low, "
                          f"max(range_high) AS high FROM aggregates WHERE track = ? AND list_contains(?, metric) AND "
                          f"coalesce(protocol_id, '{UNRECORDED}') = ? GROUP BY metric",
                          [track, list(composite.inputs), protocol_id]).set_index("metric")
        inputs = tuple(ranking.Quantity(bool(known.at[m, "higher"]) if m in known.index else True,
                                        _number(known["low"].get(m)), _number(known["high"].get(m)))
                       for m in composite.inputs)
    return ranking.Rule(inputs, composite.combine if composite else None, higher, not declared.not_in_overall,
                        kind=value_kind(frame), low=low, high=high, unanswered=declared.unanswered)


def value_kind(frame: pd.DataFrame) -> str:
    """What a metric's values are, as its rows declare (``MetricInfo.kind``): "rate" or, by default and for rows
    scored before kinds were recorded, "continuous"."""
    known = frame["value_kind"].dropna() if "value_kind" in frame.columns else pd.Series(dtype=object)
    return "rate" if len(known) and known.iloc[0] == "rate" else "continuous"


def _number(value) -> float | None:
    """A recorded number, or None (null, or a column of nulls)."""
    if isinstance(value, pd.Series):
        value = value.dropna().iloc[0] if value.notna().any() else None
    return None if value is None or pd.isna(value) else float(value)


def higher_is_better(frame: pd.DataFrame) -> bool:
    """Whether higher values of ``frame``'s rows (one metric) are better: as their rows say, else yes."""
    known = frame["higher_is_better"].dropna()
    return bool(known.iloc[0]) if len(known) else True


def read(cat: Catalog, track: str, metric: str, frame: pd.DataFrame) -> ProtocolValues | None:
    """The per-prompt values behind ``frame`` (rows of one protocol of ``metric``): every scored submission of the
    protocol's (the filters hide rows, never prompts), its inputs' values, what each answered and the prompt
    set; None when the protocol's submissions have no per-prompt value of it (paper rows, model-level values).
    Kept by the catalog until its results change (``Catalog.cached``)."""
    protocol_id = frame["protocol_id"].iloc[0]
    return cat.cached(("protocol values", track, metric, protocol_id), lambda: _read(cat, track, metric, frame))


def _read(cat: Catalog, track: str, metric: str, frame: pd.DataFrame) -> ProtocolValues | None:
    protocol_id = frame["protocol_id"].iloc[0]
    submissions = list(cat.query(
        f"SELECT DISTINCT submission_id FROM aggregates WHERE provenance = 'scored' AND track = ? AND metric = ? "
        f"AND coalesce(protocol_id, '{UNRECORDED}') = ? AND submission_id IS NOT NULL ORDER BY 1",
        [track, metric, protocol_id])["submission_id"])
    chosen = rule(cat, track, metric, frame, protocol_id)
    composite = next((f for f in track_registry.get(track).from_means if f.metric == metric), None)
    names = composite.inputs if composite else (metric,)
    rows = cat.track_prompts(submissions, track)
    valued = rows[rows["value"].notna()]
    if not submissions or not (valued["metric"] == names[0]).any():
        return None
    values = [valued[valued["metric"] == name].pivot_table(index="prompt_id", columns="submission_id",
                                                           values="value") for name in names]
    track_rows = _presence(rows)
    # The first input says what was answered: a value, or none by the metric's own rule (nothing excluded).
    first = rows[rows["metric"] == names[0]]
    not_scored = first["value"].isna() & first["excluded"].fillna(0).gt(0)
    given = first[~not_scored]
    answered = _presence(given).reindex(index=track_rows.index, columns=track_rows.columns, fill_value=False)
    dataset = cat.dataset_prompts(results.protocol_fields(frame["protocol"].iloc[0]) or {})
    universe = list(dataset.index) if dataset is not None else sorted(track_rows.index)
    # Defined on: nobody answered it (nothing says otherwise), or someone who answered it has a value, or someone's
    # value there was not scored and nobody's is undefined by the metric's rule (curators' incomplete image sets
    # never take a prompt out of the set; a failed image on a prompt the metric has no value on does not put it in).
    asked = set(track_rows.index[track_rows.any(axis=1)])
    undefined = set(first.loc[first["value"].isna() & ~not_scored, "prompt_id"])
    defined = set(values[0].index[values[0].notna().any(axis=1)]) | (set(first.loc[not_scored, "prompt_id"]) -
                                                                      undefined)
    prompts = [p for p in universe if p not in asked or p in defined]
    return ProtocolValues(track, metric, chosen, values, answered, prompts, dataset, submissions, cat)


def _presence(rows: pd.DataFrame) -> pd.DataFrame:
    """Prompts x submissions: whether ``rows`` hold a row of the pair (both sorted; what ``pd.crosstab(...) > 0``
    gives, without its per-cell Python aggregation: 1M cells at 1,000 submissions)."""
    pairs = rows[["prompt_id", "submission_id"]].dropna().drop_duplicates()
    present = pd.Series(True, index=pd.MultiIndex.from_frame(pairs)).unstack(fill_value=False)
    return present.sort_index().sort_index(axis=1).astype(bool)


def rank_frame(cat: Catalog, frame: pd.DataFrame, track: str, metric: str, slice_name: str = OVERALL,
               slice_value: str = "all", *, intervals: bool = True, values: ProtocolValues | None = None
               ) -> tuple[pd.DataFrame, ranking.Ranking | None, str]:
    """Rows of one protocol of ``metric`` on one slice value (``frame``: catalog rows, one per model at most once
    ranked) ranked on the protocol's prompt set (``benchmark.ranking.rank``): value, ci_low, ci_high and n
    replaced by the ranking's, with refused, rank, rank_low, rank_high, tie_group and not_ranked ('' when
    ranked); ranked rows first, by rank. Also the ranking (None when no row has per-prompt values: each is then
    ranked on its own value, a censored one by what is known of it (``ranking.rank_values``), without interval) and
    a note on what it rests on.
    ``values``: the protocol's values when the caller read them already (``read``)."""
    frame = frame.reset_index(drop=True)
    higher = higher_is_better(frame)
    out = frame.assign(refused=np.nan, not_ranked="", rank=pd.NA, rank_low=pd.NA, rank_high=pd.NA, tie_group=pd.NA)
    latest = frame.sort_values("scored_at", na_position="first", kind="stable").drop_duplicates(
        ["model", "provenance"], keep="last").index
    earlier = ~frame.index.isin(latest)
    out.loc[earlier, "not_ranked"] = "an earlier submission of this model: its latest is ranked"
    values = values if values is not None else read(cat, track, metric, frame)
    scored = (frame["provenance"].eq("scored") & frame["submission_id"].notna() & ~earlier).to_numpy()
    if values is not None:
        scored = scored & frame["submission_id"].isin(values.answered.columns).to_numpy()
    if values is None or not scored.any():
        return _own_values(out, higher, earlier)
    prompts, empty = values.prompt_set(slice_name, slice_value)
    if prompts is None:  # no prompt set, no comparison: the rows' own values are shown, never an order
        why = ("which prompts this slice holds is recorded nowhere here (no per-image rows, and the store does not "
               "serve the dataset at the protocol's revision)")
        out.loc[~earlier, "not_ranked"] = why
        return ordered(out), None, f"{why}: each row shows its own value, not ranked"
    ids = list(frame.loc[scored, "submission_id"])
    apart = ~scored & ~earlier
    out.loc[apart, "not_ranked"] = "no per-prompt values for this metric"
    notes = [f"{counted(int(apart.sum()), 'row')} without per-prompt values: listed apart, not ranked"
             ] if apart.any() else []
    if not prompts:
        out.loc[scored, "not_ranked"] = empty
        return ordered(out), None, "; ".join([empty, *notes])
    matrices = [v.reindex(index=prompts, columns=ids) for v in values.values]
    answered = values.answered.reindex(index=prompts, columns=ids, fill_value=False)
    source = ("the dataset's at the protocol's revision" if values.source == FROM_DATASET else
              "those any submission of this protocol answered: this store does not serve the dataset at the "
              "protocol's revision")
    ranked = ranking.rank(matrices, values.rule, answered, intervals=intervals, source=source)
    got = ranked.rows
    where = np.flatnonzero(scored)
    taken = {}
    for column, source in (("value", "score"), ("ci_low", "ci_low"), ("ci_high", "ci_high"), ("n", "n"),
                           ("refused", "refused"), ("not_ranked", "not_ranked"), ("rank", "rank"),
                           ("rank_low", "rank_low"), ("rank_high", "rank_high"), ("tie_group", "tie_group")):
        cells = out[column].to_numpy(dtype=object, copy=True)
        cells[where] = got[source].to_numpy(dtype=object)
        taken[column] = cells
    out = out.assign(**taken)
    if earlier.any():
        notes.append(f"{counted(int(earlier.sum()), 'earlier submission')} of a ranked model listed apart")
    return ordered(out), ranked, "; ".join([ranked.note, *notes])


def scores(frame: pd.DataFrame, values: ProtocolValues | None, slice_name: str, slice_value: str) -> pd.Series:
    """Each row's score as its ranking on one slice value gives it (``rank_frame``'s value, without intervals,
    ranks or ordering: a heatmap's cells), the stored value where the ranking has none of its own (no per-prompt
    values, a slice nothing records, a label's other prompts)."""
    out = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    if values is None:
        return out
    prompts, _ = values.prompt_set(slice_name, slice_value)
    ids = frame["submission_id"].where(frame["submission_id"].isin(values.answered.columns))
    if not prompts or ids.isna().all():
        return out
    keys = list(ids.dropna())
    matrices = [v.reindex(index=prompts, columns=keys) for v in values.values]
    answered = values.answered.reindex(index=prompts, columns=keys, fill_value=False)
    ranked = ranking.rank(matrices, values.rule, answered, intervals=False, ranks=False).rows["score"]
    out[ids.notna()] = ranked.to_numpy()
    return out


def _own_values(out: pd.DataFrame, higher: bool, earlier: np.ndarray) -> tuple[pd.DataFrame, None, str]:
    """Rows without per-prompt values (paper rows, model-level values) ranked on their own values without interval,
    a censored one (null, with the bound it exceeds in ci_low) above the values its bound reaches and level with the
    others (``ranking.rank_values``)."""
    scored = out["provenance"].eq("scored")
    said = []
    if scored.any():
        said.append(f"{counted(int(scored.sum()), 'scored row')} {_have(scored.sum())} no per-prompt values "
                    "for this metric")
    if (~scored).any():
        said.append(f"{counted(int((~scored).sum()), 'paper-reported row')} {_have((~scored).sum())} no "
                    "per-prompt values")
    note = ("; ".join(said) + ": each is ranked on its own value, with no rank interval") if said else ""
    exceeds = pd.to_numeric(out["ci_low"], errors="coerce").where(censored(out))
    out["rank"] = ranking.rank_values(out["value"], higher, exceeds, ranked=~np.asarray(earlier))
    return ordered(out), None, note


def _have(count: int) -> str:
    return "has" if count == 1 else "have"


def listed(frame: pd.DataFrame, reason: str) -> pd.DataFrame:
    """Rows listed, not ranked (``reason`` says why; '' for none to list), in the columns ``rank_frame`` gives."""
    out = frame.reset_index(drop=True).assign(refused=np.nan, not_ranked=reason, rank=pd.NA, rank_low=pd.NA,
                                              rank_high=pd.NA, tie_group=pd.NA)
    return ordered(out)


def censored(frame: pd.DataFrame) -> pd.Series:
    """Which rows hold a right-censored value: null, with the bound it exceeds in ``ci_low`` (``benchmark.results``:
    e.g. a W1KP reusability never reached, shown "> k")."""
    return frame["value"].isna() & frame["ci_low"].notna() & frame["ci_high"].isna()


def ordered(out: pd.DataFrame) -> pd.DataFrame:
    """Ranked rows first by rank, then the rows listed apart, best first (a censored value above all); numbers
    typed (ranks, n and tie groups whole, nullable)."""
    whole = {c: pd.array(pd.to_numeric(out[c], errors="coerce"), dtype="Float64").astype("Int64")
             for c in ("rank", "rank_low", "rank_high", "tie_group", "n")}
    numbers = {c: pd.to_numeric(out[c], errors="coerce").astype(float) for c in ("value", "ci_low", "ci_high",
                                                                                  "refused")}
    out = out.assign(**whole, **numbers, not_ranked=out["not_ranked"].fillna("").astype(str))
    value = out["value"].where(~censored(out), np.inf)
    out = out.assign(_apart=out["not_ranked"].ne(""), _key=-value if higher_is_better(out) else value)
    out = out.sort_values(["_apart", "rank", "_key", "model"], kind="stable", na_position="last", ignore_index=True)
    return out.drop(columns=["_apart", "_key"])


def overall_rows(cat: Catalog, track: str, metric: str, protocol_id: str) -> pd.DataFrame:
    """The scored rows (``COLUMNS``) of ``metric`` on the whole prompt set (slice ``overall``) under one protocol:
    one per submission that answered some prompt of it."""
    return cat.query(f"SELECT {COLUMNS} FROM aggregates WHERE track = ? AND metric = ? AND slice = '{OVERALL}' AND "
                     f"provenance = 'scored' AND coalesce(protocol_id, '{UNRECORDED}') = ?",
                     [track, metric, protocol_id])


def absent(rows: pd.DataFrame, overall: pd.DataFrame, slice_name: str, slice_value: str) -> pd.DataFrame:
    """The rows a slice value's table lacks (``rows``: its rows): one for each submission of ``overall`` (the
    protocol's scored rows of the metric on its whole prompt set) with no row there, as it answered none of that
    value's prompts; it takes that row's model, protocol and provenance fields, no value (the ranking gives it
    one: the worst, with 100% refused)."""
    missing = overall[~overall["submission_id"].isin(rows["submission_id"])]
    return missing.assign(slice=slice_name, slice_value=slice_value, value=np.nan, ci_low=np.nan, ci_high=np.nan,
                          n=pd.NA, excluded=pd.NA)


def with_absent(rows: pd.DataFrame, overall: pd.DataFrame, slice_name: str, slice_value: str) -> pd.DataFrame:
    """``rows`` and the ``absent`` ones (``rows`` as they are on the whole prompt set, where none is absent)."""
    if slice_name == OVERALL or overall.empty:
        return rows
    extra = absent(rows, overall, slice_name, slice_value)
    return pd.concat([rows, extra], ignore_index=True) if len(extra) else rows


def who(frame: pd.DataFrame) -> pd.Series:
    """A row's model as a chart or heatmap names it: paper rows marked '(paper)', as one model may be both."""
    return frame["model"] + np.where(frame["provenance"] == "reported", " (paper)", "")


def track_order(track: str) -> tuple[int, str]:
    """Where a track's column stands: the README's order (``Track.order``), then by name."""
    known = list(track_registry.all_tracks())
    return (known.index(track) if track in known else len(known), track)


def win_rates(frame: pd.DataFrame, cat: Catalog) -> pd.DataFrame:
    """Per (model, provenance) of ``frame`` (headline rows of the tracks in a mean, one protocol each): its win
    rate on each track and their mean, HEIM's mean win rate, over the tracks it has one on (``tracks``); best
    first. A track's win rates come from its ranking's comparisons (``rank_frame`` on the headline rows, overall
    slice; ``benchmark.ranking.Comparisons.win_rates``: a model beats those it is above, ties count half) at
    ``ranking.overall_confidence`` of the number of tracks, so that their ranges hold together; the mean's range
    (win_low, win_high) is the mean of the tracks' ranges and the rank (rank, rank_low, rank_high) follows from
    those ranges by the rank rule (``ranking.mean_win_rates``). A model listed apart on a track is listed apart here
    (``not_ranked`` says why). A track whose rows have no per-prompt values (papers') gives win rates by its rows'
    order and no range, and the mean then has none. ``attrs["note"]`` says what each ranking rests on and
    ``attrs["ranked"]`` holds each track's ranked rows (the numbers behind its win rates: the overall download)."""
    entities = frame[["model", "provenance"]].drop_duplicates().reset_index(drop=True)
    if entities.empty:
        return pd.DataFrame(columns=["model", "provenance", "win_rate", "tracks"])
    index = {key: i for i, key in enumerate(zip(entities["model"], entities["provenance"]))}
    groups = sorted(frame.groupby("track"), key=lambda item: track_order(item[0]))
    confidence = ranking.overall_confidence(len(groups))
    rates, notes, shown, own = {}, [], {}, {}
    not_ranked = np.full(len(entities), "", dtype=object)
    for track, group in groups:
        title = track_registry.get(track).title
        rows, result, note = rank_frame(cat, group, track, track_registry.get(track).headline)
        shown[track] = rows
        notes.append(f"{title}: {note}")
        where = np.array([index[k] for k in zip(rows["model"], rows["provenance"])])
        own[track] = np.full(len(entities), np.nan)
        own[track][where] = rows["value"].to_numpy(float)
        for i, why in zip(where, rows["not_ranked"]):
            not_ranked[i] = not_ranked[i] or (f"{title}: {why}" if why else "")
        ranked = (rows["not_ranked"].eq("") & rows["rank"].notna()).to_numpy()
        if result is not None and result.comparisons is not None:
            track_rates = [np.full(len(entities), np.nan) for _ in range(3)]
            position = {key: j for j, key in enumerate(result.ranked)}
            computed = result.comparisons.win_rates(confidence)  # once: every pair's test (rows^2)
            for i, sid in zip(where[ranked], rows.loc[ranked, "submission_id"]):
                for mine, theirs in zip(track_rates, computed):
                    mine[i] = theirs[position[sid]]
            rates[track] = tuple(track_rates)
        else:  # ranked on their own values (a paper's rows): by their order, ties counting half, no range
            order = np.full((1, len(entities)), np.nan)
            order[0, where] = np.where(ranked, -pd.to_numeric(rows["rank"], errors="coerce").to_numpy(float), np.nan)
            rates[track] = (ranking.track_win_rates(order, True)[0], None, None)
    if any(r[1] is None for r in rates.values()):
        notes.append("no range on the mean win rate: a track above has no per-prompt values")
    means = ranking.mean_win_rates(rates, not_ranked == "")
    wide = entities.assign(**{t: r[0] for t, r in rates.items()}, **{t + SCORE: v for t, v in own.items()})
    wide["tracks"] = means["tracks"].to_numpy()
    wide["not_ranked"] = not_ranked
    for name in ("win_rate", "win_low", "win_high", "rank", "rank_low", "rank_high"):
        wide[name] = np.where(not_ranked == "", means[name], np.nan)
    scored = (~np.isnan(np.column_stack(list(own.values())))).any(axis=1)
    wide = wide[(wide["tracks"] > 0) | (wide["not_ranked"] != "") | scored]
    wide = wide.sort_values(["rank", "win_rate", "model"], ascending=[True, False, True],
                            na_position="last").reset_index(drop=True)
    wide.attrs["note"] = "; ".join(notes)
    wide.attrs["ranked"] = shown
    return wide

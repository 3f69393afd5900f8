"""DuckDB queries behind the leaderboard's tables (all reads; results on disk are never modified)."""

from __future__ import annotations

import duckdb
import pandas as pd

from benchmark import citations

TRACK_ORDER = ("awareness", "diversity", "iconicity", "variability", "relevance", "expectations")
OVERALL = "overall"
DISPLAY_COLUMNS = ["Rank", "Model", "Score", "95% CI", "n", "Type", "Provenance", "Source"]


def tracks(con: duckdb.DuckDBPyConnection) -> list[str]:
    present = {r[0] for r in con.execute("SELECT DISTINCT track FROM aggregates").fetchall()}
    return [t for t in TRACK_ORDER if t in present] + sorted(present - set(TRACK_ORDER))


def metrics(con: duckdb.DuckDBPyConnection, track: str) -> list[tuple[str, str]]:
    """(label, metric) pairs of a track, scored metrics first."""
    return [(label, metric) for metric, label in con.execute(
        "SELECT metric, coalesce(min(metric_label) FILTER (WHERE provenance = 'scored'), min(metric_label))"
        " FROM aggregates WHERE track = ? GROUP BY metric"
        " ORDER BY max(CASE WHEN provenance = 'scored' THEN 1 ELSE 0 END) DESC, metric", [track]).fetchall()]


def slices(con: duckdb.DuckDBPyConnection, track: str, metric: str) -> list[str]:
    """Slice choices of a metric as 'overall' or '<slice> = <value>', overall first (per-prompt rows are
    for the per-prompt views, not the ranking)."""
    found = con.execute(
        "SELECT DISTINCT slice, slice_value FROM aggregates WHERE track = ? AND metric = ? AND slice <> 'prompt'"
        " ORDER BY slice <> 'overall', slice, slice_value", [track, metric]).fetchall()
    return [OVERALL if s == OVERALL else f"{s} = {v}" for s, v in found]


def parse_slice(choice: str) -> tuple[str, str]:
    if choice == OVERALL or " = " not in choice:
        return OVERALL, "all"
    name, value = choice.split(" = ", 1)
    return name, value


def ranked(con: duckdb.DuckDBPyConnection, track: str, metric: str, choice: str = OVERALL) -> pd.DataFrame:
    """The ranked rows of one metric and slice, best first, with provenance on every row."""
    slice_name, slice_value = parse_slice(choice)
    frame = con.execute(
        """
        SELECT rank() OVER (ORDER BY CASE WHEN higher_is_better THEN -value ELSE value END) AS rank,
               model, value, ci_low, ci_high, n, model_type, provenance, citation, source_table, higher_is_better,
               harness_version, backbone, scored_at, submission_id
        FROM aggregates
        WHERE track = ? AND metric = ? AND slice = ? AND slice_value = ?
        ORDER BY rank, model
        """, [track, metric, slice_name, slice_value]).df()
    return frame


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Format ``ranked`` rows for people: rounded scores, CI as text, a source per row."""
    def ci(row) -> str:
        return "" if pd.isna(row.ci_low) else f"[{row.ci_low:.3f}, {row.ci_high:.3f}]"

    def source(row) -> str:
        if row.provenance == "reported":
            return f"{citations.SHORT.get(row.citation, row.citation)}, {row.source_table}"
        return (f"CultureLens {row.harness_version}, {row.backbone}, scored {str(row.scored_at)[:10]}, "
                f"submission {row.submission_id}")

    if frame.empty:
        return pd.DataFrame(columns=DISPLAY_COLUMNS)
    return pd.DataFrame({
        "Rank": frame["rank"].astype(int),
        "Model": frame["model"],
        "Score": frame["value"].round(3),
        "95% CI": frame.apply(ci, axis=1),
        "n": frame["n"].astype("Int64"),
        "Type": frame["model_type"].fillna(""),
        "Provenance": frame["provenance"].map({"reported": "📄 reported", "scored": "⚙️ scored"}),
        "Source": frame.apply(source, axis=1),
    })

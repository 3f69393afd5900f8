"""What a visitor narrows a table's rows to (model search, type, size, date, provenance), parsed from the controls'
values and applied to catalog rows with a sentence saying what each filter hid. Filters hide rows, never prompts:
a ranking's prompt set and every row's score are the same whatever is hidden (``leaderboard.rankings``)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pandas as pd

from benchmark.words import counted

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
        # A lone surrogate (JSON's "\ud800") is no character of a name and no search can encode it: dropped.
        text = models.encode("utf-8", "ignore").decode("utf-8") if isinstance(models, str) else ""
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
        note = f"{counted(int((~keep).sum()), 'row')} hidden: " + ", ".join(hidden) + "." if hidden else ""
        if self.ignored_since:
            note = (note + " " if note else "") + (f"“Scored since” must be a date such as 2026-01-31: "
                                                   f"“{self.ignored_since[:40]}” was ignored.")
        if self.ignored_terms:
            note = (note + " " if note else "") + (f"Only the first {MAX_TERMS} model search terms were used "
                                                   f"({self.ignored_terms} more ignored).")
        return frame[keep], note

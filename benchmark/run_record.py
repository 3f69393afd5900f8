"""A result's run record: how its values were scored, the ``run.json`` of every results folder, as one typed model.

The harness builds a submission's record once (``benchmark.harness.score``), a suite submission's is built once
from its parts' (``RunRecord.of_suite``), and the worker adds the request and lease it scored under
(``RunRecord.answering``). Everyone who reads run.json reads this model: ``culturelens reproduce`` (what to redo),
the worker (the job's message), the store (do these results answer the job? ``leaderboard.queue.base.refusal``),
the app's Queue tab, the meta-evaluation (metric versions) and the Python API (``culturelens.score``).

On disk (``to_json``): JSON with sorted keys and two-space indents, the fields that do not apply (None: a plain
result's ``suite``, a suite result's ``dataset``) left out, so that one record always gives the same bytes: a seal
over run.json (a digest or an HMAC of its bytes) is over a canonical text. Reading (``parse``) is lenient, as
results already published must stay readable: every field may be absent (a result written before the field
existed; the first results held only ``submission_id``, ``harness_version``, ``backbone``, ``backbone_revision``,
``dataset``, ``seeds``, ``images``, ``missing``, ``prompts_truncated`` and ``scored_at``), and a field this model
does not know is kept as it was (``extra``). A field of the wrong type makes the text no run record (None), as
does anything but a JSON object.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class BackboneUsed(_Record):
    """A backbone a result used: its uid (family, model, weights), the revision of its weights and the version of
    its preprocessing."""

    uid: str
    revision: str
    preprocess: str | None = None


class ScoringSettings(_Record):
    """How the metrics were built (``benchmark.scoring_options.ScoringOptions.record``): every declared metric
    setting's value (``benchmark.tracks.settings_declared``; local paths absolute) and the tracks chosen (None:
    every track that could run)."""

    metric_settings: dict[str, Any]
    tracks: list[str] | None = None


class SuiteScored(_Record):
    """A suite submission's record of its suite: the suite's repo and version, the parts the submission holds
    (scored, or named in ``unscored`` with the reason), and those it lacks."""

    repo: str
    version: int
    parts: list[str]
    missing: list[str]
    unscored: dict[str, str] = {}


class RunRecord(_Record):
    """The run.json of one result (see the module)."""

    submission_id: str | None = None
    harness_version: str | None = None
    scored_at: str | None = None  # ISO 8601, UTC, to the second
    # A plain submission's dataset and seeds (a suite submission records them per part, under ``parts``):
    # ``repo:config:split@fingerprint`` of the local copy or Hub revision, and the digest of its prompt rows, which
    # stays the same wherever the rows are served from (``PromptSet.digest``).
    dataset: str | None = None
    dataset_digest: str | None = None
    seeds: list[int] | None = None
    metrics: dict[str, str] | None = None  # metric -> its version (its settings, thresholds, judge ...)
    protocols: dict[str, str] | None = None  # metric -> the protocol its aggregate rows were scored under
    skipped: dict[str, str] | None = None  # metric -> why it has no value here
    backbones: dict[str, BackboneUsed] | None = None
    backbone_specs: dict[str, dict[str, Any]] | None = None  # backbone id -> ``BackboneSpec.to_dict()``
    settings: ScoringSettings | None = None  # None: the caller built the metrics itself; reproduce refuses it
    batch_size: int | None = None
    images: int | None = None
    missing: int | None = None  # images the manifest declares not produced (refusals, safety filters)
    embeddings_cached: int | None = None
    embeddings_computed: int | None = None
    excluded: int | None = None  # images (or prompt-level values) left out of some metric for an error
    errors: dict[str, int] | None = None  # error -> how many images it left out
    suite: SuiteScored | None = None
    parts: dict[str, RunRecord] | None = None  # a suite submission: each part's own record
    request: int | None = None  # the worker's: the job's request these results answer (None: the first)
    lease: str | None = None  # the worker's: the lease token it scored under

    @model_serializer(mode="wrap")
    def _applying(self, handler) -> dict:
        """Only the fields that apply: a None field (not scored by a suite, not written by a worker) is left out."""
        return {key: value for key, value in handler(self).items() if value is not None}

    def to_json(self) -> str:
        """The record as run.json holds it: sorted keys, two-space indents, ASCII (see the module)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True)

    @classmethod
    def parse(cls, data: bytes | str) -> RunRecord | None:
        """The record in run.json's text; None when it is not a JSON object of this model's fields."""
        try:
            return cls.model_validate_json(data)
        except ValidationError:
            return None

    @property
    def is_suite(self) -> bool:
        return self.suite is not None

    @property
    def scored_parts(self) -> dict[str | None, RunRecord]:
        """Part -> its record: a suite result's parts, or {None: this record} for a plain one."""
        return dict(self.parts or {}) if self.is_suite else {None: self}

    @property
    def request_answered(self) -> int:
        """The job's request these results answer: the one recorded, else the first (results written before
        requests were recorded)."""
        return self.request if self.request is not None else 1

    def answering(self, request: int, lease: str) -> RunRecord:
        """This record as a worker writes it: answering the job's ``request`` under the ``lease`` it claimed."""
        return self.model_copy(update={"request": request, "lease": lease})

    @classmethod
    def of_suite(cls, parts: dict[str, RunRecord], *, repo: str, version: int, names: list[str], submission_id: str,
                 harness_version: str, disabled: dict[str, str], settings: ScoringSettings | None,
                 batch_size: int, unscored: dict[str, str]) -> RunRecord:
        """A suite submission's record from its scored ``parts``' (in the suite's part order ``names``): their
        metrics, backbones, protocols and counts together, each part's record kept. ``disabled``: metrics the
        caller could not run at all (their reason stands; a part's own skips are prefixed with its name)."""
        present = [name for name in names if name in parts or name in unscored]
        skipped = dict(disabled)
        for name, part in parts.items():
            skipped.update({metric: f"{name}: {reason}" for metric, reason in (part.skipped or {}).items()
                            if metric not in disabled})
        errors: Counter = Counter()
        for part in parts.values():
            errors.update(part.errors or {})

        def total(key: str) -> int:
            return sum(getattr(part, key) or 0 for part in parts.values())

        def together(key: str) -> dict:
            return {k: v for part in parts.values() for k, v in (getattr(part, key) or {}).items()}

        return cls(submission_id=submission_id, harness_version=harness_version,
                   suite=SuiteScored(repo=repo, version=version, parts=present,
                                     missing=[name for name in names if name not in present], unscored=unscored),
                   parts=parts, metrics=together("metrics"), skipped=skipped, backbones=together("backbones"),
                   backbone_specs=together("backbone_specs"), settings=settings, batch_size=batch_size,
                   **{key: total(key) for key in ("images", "missing", "embeddings_cached", "embeddings_computed",
                                                  "excluded")},
                   errors=dict(sorted(errors.items())), protocols=together("protocols"), scored_at=now())


def now() -> str:
    """The time a record says it was scored: ISO 8601, UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

"""How submissions are scored, as one object: ``ScoringOptions``.

Whoever scores builds it once and hands it down whole: ``culturelens score`` and ``culturelens worker`` from their
flags (``culturelens.options.scoring_options``), ``culturelens reproduce`` from the run record of the result it
redoes (``ScoringOptions.from_record``), the Python API (``culturelens.score``, ``culturelens.metrics``) from its
keywords. The worker (``leaderboard.worker``), ``benchmark.suite_scoring.score`` and ``benchmark.harness.score``
read it; run.json records what it says of the metrics (``record``), so that the result can be reproduced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneSpec
from benchmark.run_record import ScoringSettings
from benchmark.settings import Settings


@dataclass(frozen=True)
class ScoringOptions:
    """The metrics chosen (``tracks``, ``metric_settings``), the backbones they load (``registry``: id -> spec) and
    how the harness runs (``device``, ``batch_size``, ``num_workers``: DataLoader processes, None for the default;
    ``shard``: this process's (rank, world size) of a multi-process run).

    ``metric_settings`` None: the caller builds its metrics itself (a test, a script) and run.json records no
    settings (``culturelens reproduce`` then refuses the result, as it cannot know how to rebuild them)."""

    metric_settings: Settings | None = None
    tracks: tuple[str, ...] | None = None  # None: every track that can run
    registry: Mapping[str, BackboneSpec] = field(default_factory=lambda: dict(DEFAULT_REGISTRY))
    device: str | None = None
    batch_size: int = 32
    num_workers: int | None = None
    shard: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size}")
        rank, world = self.shard
        if not 0 <= rank < world:
            raise ValueError(f"shard {self.shard} is not a (rank, world size) with 0 <= rank < world size")

    def record(self) -> ScoringSettings | None:
        """What run.json records of how the metrics were built (``RunRecord.settings``); None for metrics the
        caller built itself."""
        if self.metric_settings is None:
            return None
        return ScoringSettings(metric_settings=self.metric_settings.record(),
                               tracks=list(self.tracks) if self.tracks is not None else None)

    def build_metrics(self) -> tuple[list, dict[str, str]]:
        """The metrics these options choose, and {metric: reason} for those that cannot be built here;
        ``MetricUnavailable`` (a CultureLensError) when a track named in ``tracks`` cannot run at all."""
        from benchmark import tracks

        settings = self.metric_settings if self.metric_settings is not None else tracks.metric_settings()
        return tracks.select(*tracks.build(settings, dict(self.registry), self.tracks), self.tracks)

    @classmethod
    def from_record(cls, recorded: ScoringSettings, registry: Mapping[str, BackboneSpec], **runtime) -> ScoringOptions:
        """The options a result's run record says it was scored with (``RunRecord.settings``), on ``registry``;
        ``runtime``: device, batch_size, num_workers as this run chooses. A CultureLensError when a recorded
        setting is not one this version declares."""
        from benchmark import tracks

        return cls(tracks.metric_settings(**recorded.metric_settings),
                   tuple(recorded.tracks) if recorded.tracks is not None else None, registry, **runtime)

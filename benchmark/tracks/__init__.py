"""The registry of tracks: every module of this package, and of the folders named in ``CULTURELENS_TRACK_PATH``
(``os.pathsep``-separated), that exports ``TRACK`` (a ``benchmark.track.Track``).

Adding a track is adding one module: the command line lists its verbs and settings, the harness builds its
metrics, the worker scores them and the app shows its tab, method page, charts, paper rows and BibTeX, with no edit
elsewhere. The papers of this package's tracks are in ``benchmark.tracks.papers``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from benchmark.errors import CultureLensError
from benchmark.settings import TRACK_PATH, Setting, Settings
from benchmark.track import MetricUnavailable, Paper, Track, Unavailable

# Settings more than one track reads: recognition and alignment (awareness, iconicity) and image quality
# (awareness, and the s of CUBE's Eq. 3 in diversity).
SHARED = (
    Setting("clip_backbone", "clip-vit-b-32",
            "backbone id for prompt-image alignment and recognition (CRA, artifacts, countries)"),
    Setting("quality_backbone", "hpsv2",
            "backbone id of the quality scorer (HPS v2: awareness realism, diversity's s)"),
)


class UnknownTrack(CultureLensError):
    """A track name the registry does not know; the message lists the ones it knows."""


def _modules(track_path: str) -> Iterable[ModuleType]:
    """This package's track modules, then those of the folders in ``track_path`` (``os.pathsep``-separated), each
    folder's files in name order."""
    for info in pkgutil.iter_modules(__path__):
        yield importlib.import_module(f"{__name__}.{info.name}")
    for folder in filter(None, track_path.split(os.pathsep)):
        for path in sorted(Path(folder).glob("*.py")):
            spec = importlib.util.spec_from_file_location(f"culturelens_tracks.{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            yield module


def all_tracks() -> dict[str, Track]:
    """Every registered track by name, in display order (``Track.order``, then name), with the modules of the
    folders ``CULTURELENS_TRACK_PATH`` names now."""
    return _registry(TRACK_PATH.resolve())


@functools.cache  # one registry per track path: a path set later (a test, a child's) is read, not an old one
def _registry(track_path: str) -> dict[str, Track]:
    found: dict[str, Track] = {}
    for module in _modules(track_path):
        track = getattr(module, "TRACK", None)
        if isinstance(track, Track):
            if track.name in found:
                raise CultureLensError(f"two track modules register {track.name!r}: {module.__name__} and another")
            found[track.name] = track
    return {t.name: t for t in sorted(found.values(), key=lambda t: (t.order, t.name))}


def get(name: str) -> Track:
    """The registered track, or a plain one for a track only the results know (its first metric is its
    headline; no method page)."""
    return all_tracks().get(name) or Track(name, name.capitalize(), "", "", "")


def on_protocol(track: str, protocol: str | None) -> bool:
    """Whether a row of ``track`` scored under ``protocol`` counts in the track's headline ranking."""
    return get(track).protocol.admits(protocol)


def cited_papers() -> dict[str, Paper]:
    """The paper of every registered track, by its reference text (a reported row's ``citation``), each once (CUBE
    is the paper of two tracks), in track order."""
    return {t.papers.paper.text: t.papers.paper for t in all_tracks().values() if t.papers}


def bibtex() -> str:
    """BibTeX of the registered tracks' papers."""
    return "\n\n".join(paper.bibtex for paper in cited_papers().values())


def settings_declared() -> tuple[Setting, ...]:
    """Every metric setting: the shared ones, then each track's in display order."""
    return SHARED + tuple(s for t in all_tracks().values() for s in t.settings)


def metric_settings(**values: object) -> Settings:
    """Metric settings with these values and every other at its default (an unknown name is refused)."""
    return Settings(settings_declared(), values)


def build(settings: Settings | None = None, backbones: dict | None = None, tracks: Iterable[str] | None = None
          ) -> tuple[list, list[Unavailable]]:
    """The metrics of ``tracks`` (every registered track when None) in display order, and those these settings
    cannot build, with the reason. ``backbones`` (id -> spec) is the registry the probe judge loads from. A track
    not named is not built: building diversity or relevance loads an index and a VLM."""
    settings = settings or metric_settings()
    chosen = all_tracks() if tracks is None else {name: _known(name) for name in tracks}
    metrics, unavailable = [], []
    for name, track in chosen.items():
        if track.metrics is None:
            continue
        try:
            metrics += track.metrics(settings, backbones)
        except MetricUnavailable as why:
            unavailable.append(Unavailable(why.name, name, str(why)))
    return metrics, unavailable


def select(metrics: list, unavailable: list[Unavailable], tracks: Iterable[str] | None
           ) -> tuple[list, dict[str, str]]:
    """The metrics of the given tracks (all when None) and {metric: reason} for those of them that cannot run.
    ``MetricUnavailable`` if a requested track has no metric that can run, with the reasons."""
    if tracks:
        tracks = list(tracks)
        for track in tracks:
            if not any(m.info.track == track for m in metrics):
                reasons = [f"{u.name}: {u.reason}" for u in unavailable if u.track == track]
                raise MetricUnavailable(track, f"no metric of track {track!r} can run: " + "; ".join(reasons))
        metrics = [m for m in metrics if m.info.track in tracks]
        unavailable = [u for u in unavailable if u.track in tracks]
    return metrics, {u.name: u.reason for u in unavailable}


def _known(name: str) -> Track:
    try:
        return all_tracks()[name]
    except KeyError:
        raise UnknownTrack(f"unknown track {name!r} (tracks: {', '.join(all_tracks())})") from None

"""The on-disk names that more than one module of CultureLens (library, CLI, leaderboard) reads or writes.

A submission folder (an upload, ``culturelens generate``'s output, a validated copy)::

    manifest.json                        MANIFEST: what was generated, how (``benchmark.submission.Manifest``)
    images/<prompt_id>/<seed>.<ext>      IMAGES_DIR, ``image_name``: an upload's images, one file each
    data/<name>.parquet                  DATA_DIR: or an upload's images as Parquet rows (``submission.shards``)

A suite submission (``culturelens generate --suite``; ``benchmark.suite``) is one such submission folder per part
of the suite, each manifest naming its part (``suite``); a part of the suite may be absent::

    parts/<part>/manifest.json           PARTS_DIR, ``part_folder``
    parts/<part>/images/<prompt_id>/<seed>.<ext>   (or parts/<part>/data/<name>.parquet)

A validated submission (``STORE/submissions/<id>/``, ``culturelens score``'s ``OUT/submission/``) holds no
image file: its images are rows of a few Parquet shards, in the ``datasets`` layout and with the ``Image``
feature (``load_dataset("parquet", data_files=".../data/*.parquet")`` decodes them)::

    manifest.json
    data/images-00000-of-00003.parquet   ``shard_name``: prompt_id, seed, image {bytes, path}, sha256, width,
    ...                                  height; at most ``max_shard_bytes`` each (``benchmark.submission.shards``)
    images.parquet                       IMAGES_TABLE: the validated image list (no bytes), written last by
                                         ``Report.keep``

and a validated suite submission holds such a folder for each part it has, ``parts/<part>/`` (``SuiteLayout``).

A results folder (the worker's ``STORE/results/<id>/``, ``culturelens score``'s ``OUT/results/<id>/``, both
``results_folder``), written at once (``benchmark.atomic``) and never changed::

    per_image.parquet  aggregates.parquet  curves.parquet  run.json      RESULT_FILES

and, written by a leaderboard's worker, ``seal.json`` (``SEAL``, ``leaderboard.seal``) beside them (``SEALED_FILES``).

A store (``leaderboard.store.Store``) and a score output folder (``ScoreOutput``) share ``datasets/``,
``results/`` and ``submissions/``'s naming, so ``culturelens reproduce`` finds a result's submission in either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUBMISSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def is_submission_id(text: object) -> bool:
    """Whether ``text`` has the form of a submission id (the folder name under ``submissions/`` and
    ``results/``): letters, digits, '-' and '_', so it can never name another path."""
    return isinstance(text, str) and SUBMISSION_ID.fullmatch(text) is not None


MANIFEST = "manifest.json"
"""A submission's manifest, at the top of its folder."""
IMAGES_DIR = "images"
"""The folder of a submission's images, one subfolder per prompt id."""
IMAGES_TABLE = "images.parquet"
"""A validated submission's image table (prompt_id, seed, path, sha256, width, height), beside its manifest."""
PARTS_DIR = "parts"
"""The folder of a suite submission's parts, one subfolder per part name (``benchmark.suite``)."""
DATA_DIR = "data"
"""The folder of a submission's Parquet shards (the ``datasets`` convention for a repo's data files)."""
SHARD_NAME = re.compile(r"images-(\d{5})-of-(\d{5})\.parquet")
"""The file name of a validated submission's shard (in ``DATA_DIR``): ``images-<index>-of-<count>.parquet``."""

PER_IMAGE = "per_image.parquet"
"""A result's per-image metric values."""
AGGREGATES = "aggregates.parquet"
"""A result's aggregates (per metric and slice, with confidence intervals)."""
CURVES = "curves.parquet"
"""A result's curves (e.g. W1KP at k)."""
RUN = "run.json"
"""A result's record of how it was scored; its presence marks a complete results folder."""
RESULT_FILES = (PER_IMAGE, AGGREGATES, CURVES, RUN)
"""Exactly the files of a results folder."""
SEAL = "seal.json"
"""A leaderboard worker's seal over a results folder's run.json and tables (``leaderboard.seal``)."""
SEALED_FILES = (PER_IMAGE, AGGREGATES, CURVES, SEAL, RUN)
"""The files of a results folder a leaderboard's worker writes, run.json last (the mark of a complete folder)."""
RESULT_PARQUET = (AGGREGATES, CURVES, PER_IMAGE)
"""A results folder's Parquet files."""

DATASETS = "datasets"
"""Local Hub-layout dataset folders, under a store (``datasets/<org>__<name>``), served to submissions."""
SUBMISSIONS = "submissions"
"""A store's accepted submissions, one folder per submission id."""
RESULTS = "results"
"""Results folders, one per submission id (a store's and a score output's)."""
STORE_CACHE = "cache/embeddings.sqlite"
"""A store's embedding cache (relative to the store); a score output's is ``ScoreOutput.cache``."""
META_EVAL = "meta_eval"
"""A store's metric-human agreement tables (``culturelens meta-eval --store``), shown in the Metrics tab."""


def image_name(prompt_id: str, seed: int, extension: str) -> str:
    """An image's path inside a submission folder, as the manifest and image table name it (POSIX)."""
    return f"{IMAGES_DIR}/{prompt_id}/{seed}.{extension}"


def shard_name(index: int, count: int) -> str:
    """Shard ``index`` of ``count`` of a validated submission, relative to its folder (POSIX), as the Hub names
    a dataset's data files: ``data/images-00000-of-00003.parquet``."""
    return f"{DATA_DIR}/images-{index:05d}-of-{count:05d}.parquet"


def part_folder(part: str) -> str:
    """A suite part's folder inside a suite submission (POSIX): ``parts/<part>``."""
    return f"{PARTS_DIR}/{part}"


def results_folder(root: Path, submission_id: str) -> Path:
    """Where the results of ``submission_id`` go under ``root`` (a store or ``culturelens score``'s --out):
    ``root/results/<submission id>``, the id its run.json records."""
    return Path(root) / RESULTS / submission_id


@dataclass(frozen=True)
class SubmissionLayout:
    """The files of one submission folder."""

    folder: Path

    @property
    def manifest(self) -> Path:
        return self.folder / MANIFEST

    @property
    def images_table(self) -> Path:
        return self.folder / IMAGES_TABLE

    @property
    def shards(self) -> list[Path]:
        """The folder's shards (``shard_name``), in order; empty when there are none."""
        data = self.folder / DATA_DIR
        return sorted(p for p in data.iterdir() if SHARD_NAME.fullmatch(p.name)) if data.is_dir() else []

    @property
    def is_validated(self) -> bool:
        """Whether the folder holds a validated submission: its image table is written last, by ``Report.keep``."""
        return self.images_table.exists()


@dataclass(frozen=True)
class SuiteLayout:
    """The parts of one suite submission folder."""

    folder: Path

    @property
    def parts(self) -> dict[str, SubmissionLayout]:
        """Part name -> its folder, in name order; empty when the folder holds no part."""
        root = self.folder / PARTS_DIR
        return {p.name: SubmissionLayout(p) for p in sorted(root.iterdir()) if p.is_dir()} if root.is_dir() else {}

    @property
    def is_validated(self) -> bool:
        """Whether every part is validated (``SuiteReport.keep`` publishes them together)."""
        parts = self.parts
        return bool(parts) and all(p.is_validated for p in parts.values())


def submission_layouts(folder: Path) -> dict[str | None, SubmissionLayout]:
    """Part -> its submission folder: {None: ``folder``} for a submission, one per part for a suite submission."""
    return SuiteLayout(Path(folder)).parts or {None: SubmissionLayout(Path(folder))}


def holds_validated_submission(folder: Path) -> bool:
    """Whether ``folder`` holds a whole validated submission: its image table, or every suite part's, written
    last by validation (a folder being written, or fetched part by part, does not)."""
    return all(part.is_validated for part in submission_layouts(folder).values())


def is_submission_folder(folder: Path) -> bool:
    """Whether ``folder`` is laid out as a submission to upload: ``manifest.json`` at its top, or a suite
    submission's ``parts/``."""
    return (Path(folder) / MANIFEST).is_file() or (Path(folder) / PARTS_DIR).is_dir()


def submission_folders_near(folder: Path, up: int = 4) -> list[Path]:
    """The submission folders a person probably meant by ``folder``, which is none (``is_submission_folder``): the
    highest of the ``up`` folders above it that is one (``subs/m1/images``, ``subs/m1/parts``,
    ``subs/m1/parts/cube-1k/images`` all mean ``subs/m1``), else those right below it (``subs`` holding
    ``subs/m1`` and ``subs/m2``), in name order; none when ``folder`` is a submission folder or not a folder. Paths
    are ``folder``'s own, as given (relative stays relative)."""
    folder = Path(folder)
    if not folder.is_dir() or is_submission_folder(folder):
        return []
    above = [parent for parent in list(folder.parents)[:up] if parent != folder and is_submission_folder(parent)]
    if above:
        return [above[-1]]
    return sorted(child for child in folder.iterdir() if child.is_dir() and is_submission_folder(child))


@dataclass(frozen=True)
class ScoreOutput:
    """``culturelens score --out OUT``: the validated copy, the upload staging, the cache and the results."""

    folder: Path

    @property
    def submission(self) -> SubmissionLayout:
        return SubmissionLayout(self.folder / "submission")

    @property
    def staging(self) -> Path:
        return self.folder / ".staging"

    @property
    def cache(self) -> Path:
        return self.folder / "cache.sqlite"

    def results(self, submission_id: str) -> Path:
        return results_folder(self.folder, submission_id)

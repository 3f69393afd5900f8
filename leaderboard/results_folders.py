"""A store's results: its folders (``results/<id>/``) and, for a worker on another machine, its results repo.

``Results`` answers the question every part of the service asks before it scores, publishes or takes results:
do these results answer this job? Results answer a job when their run.json records the job's newest request
(``request``: ``Queue.request_number``; ``leaderboard.queue.base.answers``), so a re-run is never taken as done
by the results of the run before. A worker next to the app looks in the store's folder; a worker on another
machine (``leaderboard.remote``) also in the results repo it publishes to, so a worker killed after publishing
is not scored again. The queue is handed the question when it is built (``Store``), and asks it outside any
transaction: a repo is read over the network.

It is also the one way a results folder enters the store: written by a worker (``write``: every file at once,
by one rename), or taken from a repo (``add``: checked first, ``check``, then copied into place whole), and the
one way it leaves (``drop``; ``set_aside`` while a re-run is requested). Results are never modified in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from benchmark import layout, results
from benchmark.atomic import atomic_folder
from benchmark.layout import RESULT_FILES, is_submission_id
from leaderboard.queue.base import answers
from leaderboard.repo import Repo, RepoError

if TYPE_CHECKING:
    from benchmark.harness import Scores


class Results:
    """The results folders of the store at ``store`` (``root``: its ``results/``) and ``repo``, the results repo a
    worker on another machine publishes to (None for a worker that shares the app's disk)."""

    def __init__(self, store: Path, repo: Repo | None = None):
        self.store, self.repo = Path(store), repo
        self.root = self.store / layout.RESULTS

    def folder(self, submission_id: str) -> Path:
        """``results/<id>``, named as ``culturelens score`` names its results (``layout.results_folder``)."""
        return layout.results_folder(self.store, submission_id)

    def has(self, submission_id: str) -> bool:
        """Whether the store holds a complete results folder of the submission (run.json is written last)."""
        return (self.folder(submission_id) / layout.RUN).exists()

    def run(self, submission_id: str) -> dict | None:
        """The run.json of the submission's results folder (None without one, or one that is not a JSON object)."""
        try:
            return results.read_run((self.folder(submission_id) / layout.RUN).read_bytes())
        except FileNotFoundError:
            return None

    def run_in_repo(self, submission_id: str) -> dict | None:
        """The run.json of the submission's results folder in the results repo, committed last, so a complete
        folder has one (one small download, not a listing of every folder); None without one, or without a repo."""
        if self.repo is None:
            return None
        data = self.repo.read(f"{layout.RESULTS}/{submission_id}/{layout.RUN}")
        return results.read_run(data) if data is not None else None

    # --- do they answer the job? --------------------------------------------------------------------------------
    def answered_here(self, submission_id: str, request: int | None) -> bool:
        """Whether the store's results of the submission answer request number ``request`` (None: a submission
        the queue does not know, whose results cannot be told from others and count)."""
        return answers(self.run(submission_id), request)

    def answered_in_repo(self, submission_id: str, request: int | None) -> bool:
        """Whether the results repo holds results answering ``request`` (False without a repo)."""
        return self.repo is not None and answers(self.run_in_repo(submission_id), request)

    def answered(self, submission_id: str, request: int | None) -> bool:
        """Whether results answering ``request`` exist: in the store, or else in the results repo (read only then).
        Reads a repo over the network: never call it inside a queue transaction."""
        return self.answered_here(submission_id, request) or self.answered_in_repo(submission_id, request)

    # --- in and out ---------------------------------------------------------------------------------------------
    def write(self, submission_id: str, scores: Scores) -> Path:
        """Write one submission's results folder atomically (all files appear at once, or none); FileExistsError
        when it exists (results are immutable: another worker's rename won)."""
        return results.write_folder(self.folder(submission_id), results.records(scores.per_image),
                                    scores.aggregates, results.records(scores.curves), scores.run)

    @staticmethod
    def check(source: Path) -> None:
        """RepoError, naming the file and the reason, unless ``source`` (a folder taken from a repo, named by its
        submission id) is a results folder: a submission id, exactly the result files (no link), Parquet that
        reads (its schema: never unpickled) and a run.json that is JSON."""
        if not is_submission_id(source.name):
            raise RepoError(f"{source}: {source.name!r} is not a submission id (letters, digits, '-' and '_')")
        names = sorted(p.name for p in source.iterdir())
        if names != sorted(RESULT_FILES) or any((source / n).is_symlink() for n in names):
            raise RepoError(f"{source}: a results folder holds exactly {', '.join(RESULT_FILES)}; found "
                            f"{', '.join(names) or 'nothing'}")
        for name in layout.RESULT_PARQUET:
            try:
                pq.read_schema(source / name)
            except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
                raise RepoError(f"{source / name}: not a readable Parquet file ({error})") from None
        try:
            json.loads((source / layout.RUN).read_bytes())
        except (OSError, ValueError) as error:
            raise RepoError(f"{source / layout.RUN}: not readable JSON ({error})") from None

    def add(self, source: Path) -> bool:
        """Take the results folder ``source`` (from a repo: a download, a backup) into the store: checked
        (``check``: RepoError), copied beside its place and renamed into it, so it appears whole or not at all.
        False when the store holds that folder already (nothing copied)."""
        self.check(source)
        target = self.folder(source.name)
        if target.exists():
            return False
        try:
            with atomic_folder(target) as tmp:
                shutil.copytree(source, tmp, dirs_exist_ok=True)
        except FileExistsError:  # another process took the same folder meanwhile
            return False
        return True

    def drop(self, submission_id: str) -> None:
        """Move a results folder out of sight in one rename (readers see it or not), then delete it."""
        folder = self.folder(submission_id)
        if folder.exists():
            hidden = self.root / f".{submission_id}.dropped-{uuid.uuid4().hex[:6]}"
            os.rename(folder, hidden)
            shutil.rmtree(hidden, ignore_errors=True)

    @contextlib.contextmanager
    def set_aside(self, submission_id: str) -> Iterator[None]:
        """Hold the submission's results out of sight for the block (a re-run being requested: no worker may find
        them and call the re-run done); deleted when the block ends, put back if it raises."""
        folder = self.folder(submission_id)
        hidden = self.root / f".{submission_id}.rerun-{uuid.uuid4().hex[:6]}"
        had = folder.exists()
        if had:
            os.rename(folder, hidden)
        try:
            yield
        except BaseException:
            if had:
                os.rename(hidden, folder)
            raise
        shutil.rmtree(hidden, ignore_errors=True)

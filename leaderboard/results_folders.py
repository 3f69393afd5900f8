"""A store's results: its folders (``results/<id>/``) and, for a worker on another machine, its results repo.

``Results`` answers the question every part of the service asks before it scores, publishes or takes results:
do these results answer this job? They do when their run.json carries a lease token the queue issued for the
job's current request and records that request's number (``leaderboard.queue.base.refusal``), so a re-run is
never taken as done by the results of the run before, and results nobody scored under the job's lease never
answer it. A worker next to the app looks in the store's folder; a worker on another machine (``leaderboard.remote``)
also in the results repo it publishes to, so a worker killed after publishing is not scored again. The queue is
handed the question when it is built (``Store``), and asks it outside any transaction: a repo is read over the
network.

It is also the one way a results folder enters the store: written by a worker (``write``: every file at once,
sealed with the store's key, ``leaderboard.seal``, by one rename), or taken from a repo (``add``: checked first, then
copied into place whole), and the one way it leaves (``drop``; ``set_aside`` while a re-run is requested). Results
are never modified in place. A folder taken from a repo is checked for what it is (``check``: its files, Parquet that
reads, JSON) and then against its job (``reason_to_refuse``): every row of its three Parquet files is its own
submission's, every aggregate row is ``scored`` (paper rows come only from the tracks' declarations,
``leaderboard.reported``), its run.json names it, a worker of this queue sealed it as it is, and its results answer
the job. One that is not is quarantined with the reason (``STORE/quarantine/``, listed in the Queue tab; its
run.json is kept there, its files stay in the repo) and taken again only once the repo holds another run.json for
it (or, refused because the queue did not know its submission, once the queue does).
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
from benchmark.run_record import RunRecord
from benchmark.atomic import atomic_folder
from benchmark.layout import RESULT_FILES, SEALED_FILES, is_submission_id
from leaderboard import quarantine, seal
from leaderboard.queue.base import UNKNOWN, Request, refusal
from leaderboard.repo import Repo, RepoError

if TYPE_CHECKING:
    from benchmark.harness import Scores
    from leaderboard.queue import Queue

class Refused(RepoError):
    """A results folder taken from a repo that is not its job's results: the message says which and why. It was
    quarantined with that reason."""


class Results:
    """The results folders of the store at ``store`` (``root``: its ``results/``) and ``repo``, the results repo a
    worker on another machine publishes to (None for a worker that shares the app's disk); ``queue``: the store's
    queue, which says what results must answer (``Queue.request``); ``keys``: what it seals and checks seals with
    (None: the store's, ``seal.keys_for``, read when first needed)."""

    def __init__(self, store: Path, queue: Queue, repo: Repo | None = None, keys: seal.Keys | None = None):
        self.store, self.queue, self.repo = Path(store), queue, repo
        self.root = self.store / layout.RESULTS
        self._keys = keys

    @property
    def keys(self) -> seal.Keys:
        if self._keys is None:
            self._keys = seal.keys_for(self.store)
        return self._keys

    def folder(self, submission_id: str) -> Path:
        """``results/<id>``, named as ``culturelens score`` names its results (``layout.results_folder``)."""
        return layout.results_folder(self.store, submission_id)

    def has(self, submission_id: str) -> bool:
        """Whether the store holds a complete results folder of the submission (run.json is written last)."""
        return (self.folder(submission_id) / layout.RUN).exists()

    def run(self, submission_id: str) -> RunRecord | None:
        """The run record of the submission's results folder (None without one, or one that is not a run record)."""
        try:
            return RunRecord.parse((self.folder(submission_id) / layout.RUN).read_bytes())
        except FileNotFoundError:
            return None

    def run_in_repo(self, submission_id: str) -> RunRecord | None:
        """The run.json of the submission's results folder in the results repo, committed last, so a complete
        folder has one (one small download, not a listing of every folder); None without one, or without a repo."""
        if self.repo is None:
            return None
        data = self.repo.read(f"{layout.RESULTS}/{submission_id}/{layout.RUN}")
        return RunRecord.parse(data) if data is not None else None

    # --- do they answer the job? --------------------------------------------------------------------------------
    def refusal_here(self, submission_id: str, request: Request | None, holder: str | None = None) -> str | None:
        """Why the store's results of the submission do not answer ``request`` (``leaderboard.queue.base.refusal``),
        or None; their seal is checked wherever the queue holds no token of their lease to check them by (a job
        finished before leases, or a queue restored or rebuilt, which knows its leases by their sha256 only)."""
        run = self.run(submission_id)
        needs_seal = request is not None and run is not None and run.lease not in request.leases
        sealed = needs_seal and seal.folder_refusal(self.folder(submission_id), self.keys) is None
        return refusal(run, request, sealed=sealed, holder=holder)

    def answered_here(self, submission_id: str, holder: str | None = None) -> bool:
        """Whether the store's results of the submission answer its current request (``refusal_here``); ``holder``:
        the lease of the worker asking, which may take an earlier attempt's results as its own."""
        return self.refusal_here(submission_id, self.queue.request(submission_id), holder) is None

    def answered_in_repo(self, submission_id: str, holder: str | None = None) -> bool:
        """Whether the results repo holds results answering the submission's current request (False without one)."""
        return self.repo is not None and self.queue.answered_by(submission_id, self.run_in_repo(submission_id),
                                                                holder=holder)

    def answered(self, submission_id: str, holder: str | None = None) -> bool:
        """Whether results answering the submission's current request exist: in the store, or else in the results
        repo (read only then). Reads a repo over the network: never call it inside a queue transaction. ``holder``:
        as ``answered_here``."""
        return self.answered_here(submission_id, holder) or self.answered_in_repo(submission_id, holder)

    def superseded(self, submission_id: str, run: RunRecord | None) -> bool:
        """Whether results whose run.json is ``run`` answer an earlier request of the submission than its current
        one: the run before a re-run, which the re-run's results replace. Not to be taken, nor quarantined."""
        request = self.queue.request(submission_id)
        return request is not None and run is not None and run.request_answered < request.number

    # --- in and out ---------------------------------------------------------------------------------------------
    def write(self, submission_id: str, scores: Scores) -> Path:
        """Write one submission's results folder atomically (all files appear at once, or none), sealed with the
        store's key (``seal.seal_folder``); FileExistsError when it exists (results are immutable: another worker's
        rename won)."""
        return results.write_folder(self.folder(submission_id), results.records(scores.per_image),
                                    scores.aggregates, results.records(scores.curves), scores.run,
                                    then=lambda tmp: seal.seal_folder(tmp, self.keys))

    @staticmethod
    def check(source: Path) -> None:
        """RepoError, naming the file and the reason, unless ``source`` (a folder taken from a repo, named by its
        submission id) is a results folder: a submission id, exactly the result files and at most a seal (no link;
        those of no rows that the repo does not hold written back first: ``results.complete``), Parquet that reads
        (its schema: never unpickled) and a run.json that is JSON."""
        if not is_submission_id(source.name):
            raise RepoError(f"{source}: {source.name!r} is not a submission id (letters, digits, '-' and '_')")
        results.complete(source)
        if damage := _damage(source):
            raise RepoError(f"{source}: {damage}")

    def reason_to_refuse(self, source: Path) -> str | None:
        """Why the results folder ``source`` (``check``ed) is not its job's results, or None: a row of its Parquet
        files under another submission id (or none), an aggregate row not ``scored`` by the harness, a run.json
        naming another submission, no seal of a worker of this queue over it as it is (``seal.folder_refusal``), or
        results that do not answer the job's current request under a lease the queue issued
        (``leaderboard.queue.base.refusal``)."""
        sid = source.name
        columns = {name: ["submission_id"] for name in layout.RESULT_PARQUET}
        columns[layout.AGGREGATES].append("provenance")
        read = {}
        for name, wanted in columns.items():
            try:
                read[name] = pq.read_table(source / name, columns=wanted)
            except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file or column
                return f"{name}: its {' and '.join(wanted)} cannot be read ({str(error)[:200]})"
            if others := set(read[name].column("submission_id").to_pylist()) - {sid}:
                shown = ", ".join(sorted(repr(other)[:80] for other in others)[:3])
                return f"{name} holds rows of other submissions ({shown}), not only of {sid}"
        if unscored := sum(value != "scored" for value in read[layout.AGGREGATES].column("provenance").to_pylist()):
            return (f"{layout.AGGREGATES} holds {unscored} row(s) whose provenance is not 'scored' (a paper's rows "
                    "come only from its track's declaration)")
        run = RunRecord.parse((source / layout.RUN).read_bytes())
        if run is None or run.submission_id != sid:
            named = repr(run.submission_id)[:80] if run is not None else "no submission"
            return f"its run.json names {named}, not {sid}"
        if why := seal.folder_refusal(source, self.keys):
            return f"its seal: {why}"
        if why := refusal(run, self.queue.request(sid), sealed=True):
            return f"its results do not answer the job: {why}"
        return None

    def add(self, source: Path) -> bool:
        """Take the results folder ``source`` (from a repo: a download, a backup) into the store: checked (``check``)
        and checked against its job (``reason_to_refuse``), then copied beside its place and renamed into it, so it
        appears whole or not at all. One that fails is quarantined with the reason (Refused; RepoError for a name
        that is no submission id). False when the store holds that folder already (nothing copied)."""
        if not is_submission_id(source.name):
            self.check(source)  # says so
        target = self.folder(source.name)
        if target.exists():
            return False
        results.complete(source)  # the Parquet files of no rows a repo does not hold
        if reason := _damage(source) or self.reason_to_refuse(source):
            raise self.refuse(source, reason)
        try:
            with atomic_folder(target) as tmp:
                shutil.copytree(source, tmp, dirs_exist_ok=True)
        except FileExistsError:  # another process took the same folder meanwhile
            return False
        for entry in self._set_aside_with(source.name, (source / layout.RUN).read_bytes()):
            shutil.rmtree(entry.folder, ignore_errors=True)  # refused while its submission was unknown: taken now
        # A record restored FINISHED came back PENDING until its sealed results arrived: here they are.
        self.queue.settle(source.name, "scored (its sealed results were taken from the results repo)")
        return True

    def refuse(self, source: Path, reason: str) -> Refused:
        """Quarantine the folder ``source`` taken from a repo with ``reason``, as its run.json (its other files stay
        in the repo; a folder someone put there may be large), and the error that says so."""
        reason = reason.replace(str(source), f"results/{source.name}").replace(str(self.store), "STORE")
        for path in source.iterdir():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.name != layout.RUN or path.is_symlink():
                path.unlink()
        quarantine.move(self.store / quarantine.FOLDER, "results", source, reason)
        return Refused(f"results/{source.name}: {reason}")

    def refused_before(self, submission_id: str, run: bytes) -> bool:
        """Whether the store set aside results of the submission holding exactly this run.json (a repo folder
        refused, or a folder of the store's own that could not be read): not taken again until it changes, but for
        one refused while the queue did not know its submission, looked at again once it does (its requests
        restored since)."""
        return any(not (entry.reason.endswith(UNKNOWN) and self.queue.request(submission_id) is not None)
                   for entry in self._set_aside_with(submission_id, run))

    def _set_aside_with(self, submission_id: str, run: bytes) -> list[quarantine.Quarantined]:
        """What the store set aside of the submission's results holding exactly this run.json."""
        return [entry for entry in quarantine.listing(self.store / quarantine.FOLDER)
                if entry.kind == "results" and entry.name == submission_id and (entry.folder / layout.RUN).is_file()
                and (entry.folder / layout.RUN).read_bytes() == run]

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


def _damage(source: Path) -> str | None:
    """Why the folder ``source`` is not a results folder at all, or None: exactly the result files (no link),
    Parquet that reads (its schema: never unpickled), a run.json that is JSON."""
    names = sorted(p.name for p in source.iterdir())
    if not set(RESULT_FILES) <= set(names) <= set(SEALED_FILES) or any((source / n).is_symlink() for n in names):
        return (f"a results folder holds exactly {', '.join(RESULT_FILES)} and its seal ({layout.SEAL}); found "
                f"{', '.join(names) or 'nothing'}")
    for name in layout.RESULT_PARQUET:
        try:
            pq.read_schema(source / name)
        except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
            return f"{name}: not a readable Parquet file ({error})"
    try:
        json.loads((source / layout.RUN).read_bytes())
    except (OSError, ValueError) as error:
        return f"{layout.RUN}: not readable JSON ({error})"
    return None

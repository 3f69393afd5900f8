"""A worker on another machine: it shares the queue (PostgreSQL) and the two Hub repos with the app, no disk.

``culturelens worker --queue postgresql://... --hub-requests ORG/A --hub-results ORG/B`` scores with a store of
its own (its embedding cache, the datasets it serves, the submission in hand), built with the results repo
(``Store(..., results_repo=remote.results)``). For each job it claims:

1. ``fetch``: the submission's manifest and Parquet shards, and nothing else, from the requests repo
   (``hub_sync.download_submission``). The app's mirror pushes a new submission within a minute, so a
   submission not there yet is waited for (the lease renewed meanwhile) up to ``wait_seconds``.
2. the harness scores it into the worker's store (``leaderboard.worker``);
3. ``publish``: its ``results/<id>/`` folder, in one commit (``Repo.commit``), to the results repo, before the
   job is marked FINISHED; the app's pickup (``leaderboard.pickup``) downloads that folder, and only it, on its
   next round.
4. ``forget``: the submission leaves the worker's disk.

A worker killed between 3 and the end is covered by the queue's takeover rule: the store's results
(``leaderboard.results_folders.Results``) include the results repo, so the next worker marks the job FINISHED
without scoring it again. Results there count only when they answer the job's newest request (run.json
``request``): a re-run replaces the folder of the run before, and is never taken as done by it. Both repos are
``leaderboard.repo`` objects: a local folder laid out like a repo stands in for either (tests, a backup),
through the same code as the Hub.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable

from benchmark import layout, results
from benchmark.layout import SEALED_FILES
from leaderboard import hub_sync
from leaderboard.repo import Repo
from leaderboard.store import Store

log = logging.getLogger("culturelens.remote")


class Remote:
    """The requests and results repos of a worker that shares no disk with the app (``leaderboard.repo``: Hub
    dataset repos, or folders laid out like them; ``open_repo`` checks the names the worker is given)."""

    def __init__(self, requests: Repo, results: Repo, *, wait_seconds: float = 600, poll_seconds: float = 5):
        self.requests, self.results = requests, results
        self.wait_seconds, self.poll_seconds = wait_seconds, poll_seconds

    def __repr__(self) -> str:
        return f"requests {self.requests.name}, results {self.results.name}"

    def fetch(self, store: Store, submission_id: str, alive: Callable[[], None]) -> None:
        """Bring ``submissions/<id>/`` into ``store`` (kept from an earlier attempt if complete). ``alive`` is
        called between tries (it raises when the job's lease is lost); SubmissionMissing after ``wait_seconds``."""
        target = store.submissions / submission_id
        if layout.holds_validated_submission(target):
            return
        shutil.rmtree(target, ignore_errors=True)  # not a submission this worker fetched whole
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                hub_sync.download_submission(self.requests, submission_id, target)
                return
            except hub_sync.SubmissionMissing:
                if time.monotonic() >= deadline:
                    raise
                log.info("%s is not in %s yet; trying again in %.0f s", submission_id, self.requests.name,
                         self.poll_seconds)
            alive()
            time.sleep(self.poll_seconds)

    def publish(self, store: Store, submission_id: str) -> None:
        """Commit the store's ``results/<id>/`` to the results repo, replacing the folder of an earlier run (its
        files this one lacks deleted); run.json, the mark of a complete folder, goes last. A Parquet file of no
        rows is not committed (``results.published``): the app writes it back when it takes the folder."""
        folder = store.results_folder(submission_id)
        names = results.published(folder)
        prefix = f"{layout.RESULTS}/{submission_id}"
        stale = [f"{prefix}/{name}" for name in SEALED_FILES if name not in names]
        self.results.commit({f"{prefix}/{name}": folder / name for name in names},
                            f"CultureLens worker: results of {submission_id}",
                            delete=sorted(set(stale) & set(self.results.files([f"{prefix}/*"]))))

    def forget(self, store: Store, submission_id: str) -> None:
        """Remove the scored submission and its results from the worker's disk, once the results repo holds them
        (its embeddings stay cached)."""
        shutil.rmtree(store.submissions / submission_id, ignore_errors=True)
        shutil.rmtree(store.results_folder(submission_id), ignore_errors=True)

"""What a submission's owner may do with it once it is in: score it again, or delete it.

The store checks the signed-in user against the queue's record (``PermissionDenied`` otherwise). A re-run is a
request to score, counted against the quota as a submission is (``Quota``); deleting gives no quota back (the
queue's submission log keeps the entry).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from leaderboard.intake import PermissionDenied, Quota
from leaderboard.queue import Job, Queue, QuotaExceeded
from leaderboard.results_folders import Results


class Ownership:
    """The owner's actions on the submissions in ``submissions`` queued in ``queue``, with their ``results``."""

    def __init__(self, queue: Queue, results: Results, submissions: Path, quota: Quota):
        self.queue, self.results, self.submissions, self.quota = queue, results, submissions, quota

    def own(self, submission_id: str, owner: str) -> Job:
        """The submission's record; PermissionDenied when there is none or it is not ``owner``'s."""
        job = self.queue.get(submission_id)
        if job is None:
            raise PermissionDenied(f"no submission {submission_id}")
        if job.owner != owner:
            raise PermissionDenied(f"submission {submission_id} belongs to {job.owner}, not {owner}")
        return job

    def rerun(self, submission_id: str, owner: str) -> None:
        """Score a FINISHED or FAILED submission again (owner only): its old results go, it queues as PENDING.
        A re-run is scoring work: it counts against the quota like a submission (PermissionDenied when over)."""
        job = self.own(submission_id, owner)
        if job.state not in ("FINISHED", "FAILED"):
            raise PermissionDenied(f"submission {submission_id} is {job.state}: only a finished or failed one can "
                                   "be re-run")
        try:
            # Out of sight first (a worker must not find them and call the re-run done), back if the quota refuses.
            with self.results.set_aside(submission_id):
                requeued = self.queue.requeue(submission_id, owner, quota=self.quota.window())
        except QuotaExceeded as error:
            raise self.quota.over(owner, error.used) from None
        if not requeued:
            raise PermissionDenied(f"submission {submission_id} changed state meanwhile; refresh and try again")

    def delete(self, submission_id: str, owner: str) -> None:
        """Remove a submission, its images and its results (owner only; not while it is being scored). The quota
        is not given back: the submission log keeps the entry."""
        job = self.own(submission_id, owner)
        if job.state == "RUNNING" or not self.queue.delete(submission_id):
            raise PermissionDenied(f"submission {submission_id} is being scored; delete it once it has finished")
        self.results.drop(submission_id)
        shutil.rmtree(self.submissions / submission_id, ignore_errors=True)

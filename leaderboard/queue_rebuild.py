"""A damaged queue file rebuilt from the store's folders (SQLite only: a PostgreSQL server keeps its own data safe).

When SQLite finds ``queue.sqlite`` damaged, the queue keeps it aside and starts empty (``SQLiteQueue.damaged``);
``rebuild`` then gives every ``submissions/<id>/`` folder its record again, and the operator hears what happened
(the log, and the app's Queue tab).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

from benchmark import layout
from benchmark.layout import is_submission_id, submission_layouts
from benchmark.submission import Manifest
from benchmark.submission.suite import validated_hash
from leaderboard.intake import dataset_label
from leaderboard.queue import DATASETS_JOINED, Job, Queue, now_iso
from leaderboard.results_folders import Results

log = logging.getLogger("culturelens.store")

REBUILT_OWNER = "unknown (rebuilt)"  # the owner of records rebuilt from disk after the queue file was damaged


def rebuild(queue: Queue, submissions: Path, results: Results) -> str:
    """Give every folder in ``submissions`` its record in the (empty) ``queue``: FINISHED if its results exist,
    else PENDING, owner unknown, content hash recomputed as validation computes it. Returns the notice, also
    logged and recorded for the app's Queue tab."""

    def mtime(path: Path) -> str:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")

    states, skipped = [], []
    for folder in sorted(submissions.iterdir()):
        if not is_submission_id(folder.name):
            skipped.append(folder.name)
            continue
        try:  # a submission, or a suite submission's parts (the model is every part's)
            manifests = [Manifest.model_validate_json(part.manifest.read_bytes())
                         for part in submission_layouts(folder).values()]
            digest = validated_hash(folder)
        except (OSError, ValueError):  # not a complete submission folder (ValueError: pydantic, pyarrow)
            skipped.append(folder.name)
            continue
        done = results.has(folder.name)
        manifest = manifests[0]
        job = Job(id=folder.name, content_hash=digest, owner=REBUILT_OWNER,
                  model=manifest.model.name, model_id=manifest.model.id, model_revision=manifest.model.revision,
                  dataset=DATASETS_JOINED.join(map(dataset_label, manifests)), state="FINISHED" if done else "PENDING",
                  created_at=mtime(folder), started_at=None,
                  finished_at=mtime(results.folder(folder.name) / layout.RUN) if done else None,
                  updated_at=now_iso(), attempts=0, lease_owner=None, lease_expires=None,
                  progress=1 if done else None, message="record rebuilt from the submission folder", error=None,
                  log_excerpt=None)
        if queue.restore(job):
            states.append(job.state)
    notice = (f"queue rebuilt from disk at {now_iso()} (damaged file kept as {queue.damaged.name}): "
              f"{len(states)} submissions restored ({states.count('FINISHED')} finished, "
              f"{states.count('PENDING')} pending), owners unknown")
    if skipped:
        notice += f"; not submissions, skipped: {', '.join(skipped)}"
    log.warning(notice)
    queue.add_notice(notice)
    return notice

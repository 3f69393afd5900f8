"""A damaged queue file rebuilt from the store's folders (SQLite only: a PostgreSQL server keeps its own data safe).

When SQLite finds ``queue.sqlite`` damaged, the queue keeps it aside and starts empty (``SQLiteQueue.damaged``);
``rebuild`` then gives every ``submissions/<id>/`` folder its record again, and the operator hears what happened
(the log, and the app's Queue tab). What the folders do not say, the queue's ledger does (``Ledger``: the file beside
the queue's, which damage to the database does not reach): each submission's owner and submission time, the number
of its current request and the sha256 of the leases issued for it, and the deletions, each line sealed with the
store's keys (a line that is not is refused, and the notice says how many). A submission is FINISHED again only where
its results folder is sealed by a worker of this queue (``leaderboard.seal``, checked: a lease hash alone is not
enough) and answers its request under one of those leases (or, a job of no lease recorded, is sealed at all); else it
is PENDING, to be scored. A deleted submission stays
deleted. At start that is the store's first step (``Store``); while the service runs,
``Watch`` does it (``Store.rebuild_damaged_queue``) the moment a view meets the damage, and every
``CHECK_SECONDS`` for damage no view met (a worker meeting it waits meanwhile: ``leaderboard.worker``), so the
service never needs a restart for it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from benchmark import layout
from benchmark.layout import is_submission_id, submission_layouts
from benchmark.submission import Manifest
from benchmark.submission.suite import validated_hash
from leaderboard import seal
from leaderboard.intake import dataset_label, kept_image_sets
from leaderboard.queue import DATASETS_JOINED, Job, Queue, Request, now_iso
from leaderboard.results_folders import Results

log = logging.getLogger("culturelens.store")

REBUILT_OWNER = "unknown (rebuilt)"  # the owner of records rebuilt from disk after the queue file was damaged
CHECK_SECONDS = 300.0  # between the service's own looks at the queue file (SQLite's quick_check)


@dataclass
class Ledger:
    """What a queue's ledger (``Queue.ledger``, written by ``Queue._note``) says, per submission id: its owner and
    when it was submitted, the number of its current request to be scored and the sha256 of the leases issued for it,
    and the deletions (when). Only lines sealed with the store's keys count (``leaderboard.seal.ledger_line``): one
    that is not (edited, forged, written before lines were sealed) is refused, and counted in ``refused``."""

    owners: dict[str, str] = field(default_factory=dict)
    submitted: dict[str, str] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    hashes: dict[str, list[str]] = field(default_factory=dict)
    deleted: dict[str, str] = field(default_factory=dict)
    refused: int = 0
    reason: str = ""  # why the first refused line was

    @classmethod
    def read(cls, path: Path | None, keys: seal.Keys) -> Ledger:
        """The ledger at ``path`` (empty without one); a line that is not one of its records is skipped, one that is
        not sealed with ``keys`` refused."""
        ledger = cls()
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path else []
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:  # a line cut by a crash, or damaged: the others still count
                continue
            if not isinstance(event, dict) or not is_submission_id(sid := event.get("id")):
                continue
            if why := seal.ledger_refusal(event, keys):
                ledger.refused += 1
                ledger.reason = ledger.reason or why
                continue
            kind = event.get("event")
            if kind in ("add", "restore") and isinstance(event.get("owner"), str):
                ledger.owners[sid] = event["owner"]
                ledger.submitted[sid] = str(event.get("created_at") or event.get("at") or "")
                ledger.hashes[sid] = [h for h in event.get("hashes") or [] if isinstance(h, str)]
                request = event.get("request")
                ledger.requests[sid] = request if isinstance(request, int) and request >= 1 else 1
            elif kind == "lease" and isinstance(event.get("hash"), str):
                ledger.hashes.setdefault(sid, []).append(event["hash"])
            elif kind == "rerun":
                ledger.hashes[sid] = []
                ledger.requests[sid] = ledger.requests.get(sid, 1) + 1
            elif kind == "delete":
                ledger.deleted[sid] = str(event.get("at") or now_iso())
        return ledger


def rebuild(queue: Queue, submissions: Path, results: Results) -> str:
    """Give every folder in ``submissions`` its record in the (empty) ``queue``: FINISHED if its results are sealed
    and answer it (``Results.refusal_here``: its request, under the leases the ledger names, the seal checked), else
    PENDING; its owner, submission time and request number from the queue's ledger (``Ledger``, its sealed lines;
    unknown without one), content hash recomputed as validation computes it; and the ledger's deletions remembered
    (a deleted submission's folder is skipped). Returns the notice, also logged and recorded for the app's Queue
    tab."""

    def mtime(path: Path) -> str:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")

    ledger = Ledger.read(queue.ledger, results.keys)
    states, skipped, unknown = [], [], 0
    for folder in sorted(submissions.iterdir()):
        if not is_submission_id(folder.name) or folder.name in ledger.deleted:
            skipped.append(folder.name)
            continue
        try:  # a submission, or a suite submission's parts (the model is every part's)
            manifests = [Manifest.model_validate_json(part.manifest.read_bytes())
                         for part in submission_layouts(folder).values()]
            digest = validated_hash(folder)
            image_sets = list(kept_image_sets(folder).values())
        except (OSError, ValueError):  # not a complete submission folder (ValueError: pydantic, pyarrow)
            skipped.append(folder.name)
            continue
        hashes, number = ledger.hashes.get(folder.name, []), ledger.requests.get(folder.name, 1)
        done = results.has(folder.name) and results.refusal_here(
            folder.name, Request(number, "FINISHED", (), tuple(hashes))) is None
        manifest = manifests[0]
        unknown += folder.name not in ledger.owners
        job = Job(id=folder.name, content_hash=digest, owner=ledger.owners.get(folder.name, REBUILT_OWNER),
                  model=manifest.model.name, model_id=manifest.model.id, model_revision=manifest.model.revision,
                  dataset=DATASETS_JOINED.join(map(dataset_label, manifests)), state="FINISHED" if done else "PENDING",
                  created_at=ledger.submitted.get(folder.name) or mtime(folder), started_at=None,
                  finished_at=mtime(results.folder(folder.name) / layout.RUN) if done else None,
                  updated_at=now_iso(), attempts=0, lease_owner=None, lease_expires=None,
                  progress=1 if done else None, message="record rebuilt from the submission folder", error=None,
                  log_excerpt=None, lease_hashes=" ".join(hashes) or None, requests_before=number)
        if queue.restore(job, image_sets):
            states.append(job.state)
    queue.remember_deleted(ledger.deleted)
    owners = f"{unknown} owner{'s' * (unknown != 1)} unknown" if unknown else "owners from the queue's ledger"
    notice = (f"queue rebuilt from disk at {now_iso()} (damaged file kept as {queue.damaged.name}): "
              f"{len(states)} submissions restored ({states.count('FINISHED')} finished, "
              f"{states.count('PENDING')} pending), {owners}")
    if ledger.deleted:
        notice += f"; {len(ledger.deleted)} deletion{'s' * (len(ledger.deleted) != 1)} kept"
    if ledger.refused:
        notice += (f"; {ledger.refused} ledger line{'s' * (ledger.refused != 1)} not trusted, not sealed with this "
                   f"store's keys ({ledger.reason})")
    if skipped:
        notice += f"; not submissions (or deleted), skipped: {', '.join(skipped)}"
    log.warning(notice)
    queue.add_notice(notice)
    return notice


class Watch:
    """Rebuilds the queue while the service runs when its file is found damaged, in one background thread:
    ``rebuild_damaged`` (``Store.rebuild_damaged_queue``: keep the file aside, rebuild, say so; nothing when the
    file is sound) is run at once when a view met the damage (``noticed``), and every ``every`` seconds once
    ``start``ed (the service starts it). ``rebuilding``: damage was noticed and is not rebuilt yet, so a view
    says so rather than show a queue half rebuilt."""

    def __init__(self, rebuild_damaged: Callable[[], str | None], every: float = CHECK_SECONDS):
        self.rebuild_damaged, self.every = rebuild_damaged, every
        self._wake, self._stop, self._noticed = threading.Event(), threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def rebuilding(self) -> bool:
        return self._noticed.is_set()

    def noticed(self) -> None:
        """A statement met the damage (``QueueDamaged``): rebuild now (the thread is started if it was not)."""
        self._noticed.set()
        self.start()
        self._wake.set()

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="queue-watch")
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.every)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.rebuild_damaged()
            except Exception:  # noqa: BLE001 - the service must outlive a failed rebuild; the next look tries again
                log.exception("rebuilding the damaged queue failed; trying again in %.0f s", self.every)
            finally:
                self._noticed.clear()

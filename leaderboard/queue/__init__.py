"""The submission queue: records, atomic state transitions, leases for crashed workers.

``Queue(location)`` opens it: a path gives the embedded SQLite backend (``sqlite``, the default,
``STORE/queue.sqlite``), a ``postgresql://`` URL the PostgreSQL one (``postgres``), for workers on many machines.
Both run the semantics written once in ``base``: states PENDING -> RUNNING -> FINISHED | FAILED, leases on the
database's clock, attempts and takeover, the per-user quota in the inserting transaction. ``location`` checks a
location and keeps a URL's password out of every message.
"""

from leaderboard.queue.base import DuplicateSubmission, Job, Queue, QueueUnavailable, QuotaExceeded, now_iso
from leaderboard.queue.location import QueueLocationError

__all__ = ["DuplicateSubmission", "Job", "Queue", "QueueLocationError", "QueueUnavailable", "QuotaExceeded",
           "now_iso"]

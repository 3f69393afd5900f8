"""The submission queue: records, atomic state transitions, leases for crashed workers.

``open_queue(location)`` opens it: a path gives the embedded SQLite backend (``sqlite``, the default,
``STORE/queue.sqlite``), a ``postgresql://`` URL the PostgreSQL one (``postgres``), for workers on many machines.
Both run the semantics written once in ``base``: states PENDING -> RUNNING -> FINISHED | FAILED, leases on the
database's clock, attempts and takeover, the per-user quota and one submission per image set in the inserting
transaction. ``location`` checks a location and keeps a URL's password out of every message.
"""

from pathlib import Path

from leaderboard.queue.base import (
    DATASETS_JOINED,
    DuplicateSubmission,
    Job,
    Queue,
    QueueDamaged,
    QueueUnavailable,
    QuotaExceeded,
    Request,
    SameImages,
    now_iso,
    refusal,
)
from leaderboard.queue.location import QueueLocationError, is_url

__all__ = ["DATASETS_JOINED", "DuplicateSubmission", "Job", "Queue", "QueueDamaged", "QueueLocationError",
           "QueueUnavailable", "QuotaExceeded", "Request", "SameImages", "now_iso", "open_queue", "refusal"]


def open_queue(location: str | Path, **options) -> Queue:
    """The queue at ``location``: a ``postgresql://`` URL opens ``postgres.PostgresQueue``, a path
    ``sqlite.SQLiteQueue``; ``options`` go to its constructor (``max_attempts``, ...). Each backend is imported
    only when chosen (psycopg is not loaded for a file)."""
    if is_url(location):
        from leaderboard.queue.postgres import PostgresQueue

        return PostgresQueue(location, **options)
    from leaderboard.queue.sqlite import SQLiteQueue

    return SQLiteQueue(location, **options)

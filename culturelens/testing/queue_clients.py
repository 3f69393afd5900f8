"""A queue as its clients leave it, every text they write chosen by the caller: what the Queue tab reads on every page
and tick (issue 48: megabytes in a worker's message, a supervisor's last exit, a notice)."""

from __future__ import annotations

# The texts ``fill`` writes, each once: a supervisor's last exit, a worker's message and a track's reason, a notice,
# a running job's message, a failed job's error and log excerpt.
TEXTS = 7


def fill(store, text: str) -> None:
    """Fill ``store``'s queue as its clients would, every text they write being ``text``: a running supervisor, a
    scoring worker that cannot score one track, a notice, a RUNNING job ("running") and a FAILED one ("failed")."""
    queue = store.queue
    queue.set_supervisor("supervisor", "running", pid=4242, restarts=1, last_exit=text)
    queue.set_worker("worker", "scoring", text)
    queue.set_worker_tracks("worker", {"awareness": None, "relevance": text})
    queue.add_notice(text)
    for sid in ("failed", "running"):
        queue.add(id=sid, content_hash=f"sha256:{sid}", owner="ada", model="Model", model_id=None,
                  model_revision=None, dataset="culturelens/cube-1k:cube_1k:test")
    queue.claim("worker", 600)
    queue.fail("failed", "worker", text, text)
    queue.claim("worker", 600)
    queue.heartbeat("running", "worker", 600, 0.5, text)

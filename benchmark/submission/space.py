"""The room that uploads in flight share on a server's disk: one cap (``Limits.max_in_flight_bytes``), and a hold per
upload on the bytes it writes there.

A server takes uploads through its upload route (the bytes received, then kept in its upload cache for an hour:
``leaderboard.upload_route``) and stages each one it validates (``validate.stage_with``: the copy, the images its
Parquet rows hold, the shards it is kept in). Each of them takes a ``Hold`` on one ``UploadSpace`` and grows it before
writing; when the space cannot take the bytes, ``grow`` raises ``SpaceFull`` (a ``ServerFault``: not the uploader's
fault, not counted against them, HTTP 507), and what the upload held is given back when its bytes are gone (``release``,
or the end of a ``with`` block).
"""

from __future__ import annotations

import threading

from benchmark.submission.archive import ServerFault


class SpaceFull(ServerFault):
    """The uploads in flight hold the whole of the server's space for them: this one must wait."""

    def __init__(self, needed: int, used: int, capacity: int):
        Exception.__init__(self, f"the server's space for uploads in progress is full: {used:,} of its {capacity:,} "
                                 f"bytes are held, and this upload needs {needed:,} more; this is not a problem with "
                                 "the submission: try again later")


class UploadSpace:
    """Bytes the uploads in flight may hold together (``capacity``), shared by the threads of one server."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()

    def hold(self) -> Hold:
        """A new hold on this space, of no byte yet."""
        return Hold(self)

    def _take(self, size: int) -> None:
        with self._lock:
            if self.used + size > self.capacity:
                raise SpaceFull(size, self.used, self.capacity)
            self.used += size

    def _give(self, size: int) -> None:
        with self._lock:
            self.used -= size


class Hold:
    """The bytes one upload holds in an ``UploadSpace``: grown before they are written, given back together."""

    def __init__(self, space: UploadSpace):
        self.space, self.size = space, 0

    def grow(self, size: int) -> None:
        """Hold ``size`` more bytes; SpaceFull (holding nothing more) when the space cannot take them."""
        self.space._take(size)
        self.size += size

    def release(self) -> None:
        """Give back everything held (the upload's bytes are gone, or kept outside the space)."""
        self.space._give(self.size)
        self.size = 0

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *_) -> None:
        self.release()

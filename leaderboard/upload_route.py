"""The routes of Gradio's server that write a visitor's bytes, bounded by this server: an ASGI middleware in front of
Gradio's app (``UploadRoutes``, installed by ``app.launch_options``).

Gradio writes what anyone posts before any code of the app runs: its upload route (``/gradio_api/upload``) takes any
number of files of up to ``max_file_size`` each in one request, into its cache, with no total; its screen-recording
route (``/gradio_api/process_recording``) copies a video into the system's temporary folder and keeps it; its
component-server route (``/gradio_api/component_server``) spools multipart bodies into temporary files; and a body
cut mid-way leaves its partial files behind on all three (issue 48). Here:

- the upload route takes at most ``Limits.max_upload_bytes`` (and ``ENVELOPE_BYTES`` of multipart framing) in one
  request, whatever the number of files: 413 past it, at once when the request declares its length; every byte it
  receives is held in the store's ``UploadSpace`` (``benchmark.submission.space``) before Gradio's parser writes it,
  so that the uploads in flight, staging included, share one cap: 507 when it is full. Each request writes into a
  folder of its own inside this server's upload cache (``upload_cache``), removed at once when the request fails or
  is cut, ``KEEP_SECONDS`` after it succeeds (its bytes given back), and with the cache when the server stops;
- the recording and component-server routes are not served (404, before a byte of the body is read): no component
  of the app records the screen or has server functions.

Gradio's own parser and file naming are used (``gradio.route_utils.upload_fn``, as its route calls it), so the
paths the route answers are the ones Gradio's components and client take. The app has no password (``auth``), so
Gradio's route checked no login either.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import deque
from pathlib import Path
from urllib.parse import parse_qs

from benchmark.errors import CultureLensError
from benchmark.submission.space import Hold, SpaceFull, UploadSpace

UPLOAD = "/gradio_api/upload"
NOT_SERVED = {"/gradio_api/process_recording": "screen recordings", "/gradio_api/component_server": "component calls"}
ENVELOPE_BYTES = 64 * 2**10  # the multipart boundaries and part headers around one request's files
KEEP_SECONDS = 3600  # an uploaded file stays this long (the app's ``delete_cache`` too): a submitter submits it sooner


class RequestRefused(CultureLensError):
    """The upload request is answered ``status`` with ``message`` (a sentence), and what it wrote is removed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class UploadRoutes:
    """An ASGI middleware over Gradio's app: its upload route bounded (``max_bytes`` a request, every byte held in
    ``space``), the routes no component uses not served."""

    def __init__(self, app, *, space: UploadSpace, max_bytes: int, keep_seconds: float = KEEP_SECONDS):
        self.app, self.space, self.max_bytes, self.keep_seconds = app, space, max_bytes, keep_seconds
        self.kept: deque[tuple[float, Path, Hold]] = deque()  # uploads that succeeded, oldest first

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = _route(scope)
        if route in NOT_SERVED:
            return await _answer(send, 404, f"this server takes no {NOT_SERVED[route]}: nothing was stored")
        if route != UPLOAD or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        self._expire()
        hold = self.space.hold()
        folder = None
        try:
            self._check_declared(scope)
            folder = Path(tempfile.mkdtemp(prefix="upload-", dir=scope["app"].uploaded_file_dir))
            paths = await self._receive_files(scope, _metered(receive, hold, self.max_bytes + ENVELOPE_BYTES), folder)
        except BaseException as error:  # whatever ends it (a refusal, a cut body, a bug), what it wrote goes
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            hold.release()
            if _client_left(error):
                return None
            if answer := _answer_for(error):
                return await _answer(send, *answer)
            raise
        self.kept.append((time.monotonic(), folder, hold))
        await _answer(send, 200, json.dumps(paths), "application/json")

    def _check_declared(self, scope) -> None:
        """Refuse at once, before reading the body, a request whose declared length is over the limit or the room
        left."""
        length = dict(scope["headers"]).get(b"content-length")
        declared = int(length) if length and length.isdigit() else None
        if declared is None:
            return
        if declared > self.max_bytes + ENVELOPE_BYTES:
            raise RequestRefused(413, _over(declared, self.max_bytes))
        if declared > self.space.capacity - self.space.used:
            raise SpaceFull(declared, self.space.used, self.space.capacity)

    async def _receive_files(self, scope, receive, folder: Path) -> list[str]:
        """Gradio's own upload, into ``folder``: the paths of the files it stored, known to Gradio as uploaded."""
        from gradio.route_utils import upload_fn
        from gradio.routes import file_upload_statuses
        from starlette.requests import Request

        upload_id = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("upload_id", [None])[0]
        paths, _, _ = await upload_fn(Request(scope, receive), folder, self.max_bytes, upload_id, force_move=True,
                                      upload_progress=file_upload_statuses if upload_id else None)
        scope["app"].get_blocks().upload_file_set.update(paths)
        return [str(path) for path in paths]

    def _expire(self) -> None:
        """Remove the uploads kept longer than ``keep_seconds``, giving back what they held."""
        while self.kept and self.kept[0][0] < time.monotonic() - self.keep_seconds:
            _, folder, hold = self.kept.popleft()
            shutil.rmtree(folder, ignore_errors=True)
            hold.release()


def _route(scope) -> str:
    """The request's path within the app (without a proxy's root path), without a trailing slash."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    return path.rstrip("/")


def _metered(receive, hold: Hold, most: int):
    """``receive`` that counts the body's bytes: at most ``most`` (413 past them), each held in ``hold`` first
    (507 when the space is full)."""
    received = 0

    async def counted():
        nonlocal received
        message = await receive()
        body = message.get("body", b"") if message["type"] == "http.request" else b""
        received += len(body)
        if received > most:
            raise RequestRefused(413, _over(received, most - ENVELOPE_BYTES, "more than"))
        hold.grow(len(body))
        return message

    return counted


def _over(size: int, limit: int, how: str = "") -> str:
    return (f"this upload is {how + ' ' if how else ''}{size:,} bytes; this server takes at most {limit:,} bytes in "
            "one request (its upload limit, max_upload_bytes), whatever the number of files: nothing was stored")


def _client_left(error: BaseException) -> bool:
    from starlette.requests import ClientDisconnect

    return isinstance(error, ClientDisconnect)


def _answer_for(error: BaseException) -> tuple[int, str] | None:
    """The status and sentence a failed upload is answered with; None for an error that is a bug (raised on)."""
    from fastapi import HTTPException
    from gradio.route_utils import MultiPartException

    if isinstance(error, RequestRefused):
        return error.status, str(error)
    if isinstance(error, SpaceFull):
        return 507, f"{error}; nothing was stored"
    if isinstance(error, MultiPartException):  # as Gradio's route answers it
        return (413 if "maximum allowed size" in error.message else 400), error.message
    if isinstance(error, HTTPException):  # not a multipart body
        return error.status_code, str(error.detail)
    return None


async def _answer(send, status: int, text: str, kind: str = "text/plain; charset=utf-8") -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

"""The badge and the card at stable addresses, ``/badge.svg?model=<name>`` and ``/card.png?model=<name>``: an ASGI
middleware in front of Gradio's app (``CitationRoutes``, installed by ``app.launch_options``) that answers those two
GET routes from the app's Model tab (``ui.model.ModelTab.badge`` and ``card``, which ``app.build_app`` hands the app
as ``model_pages``) and passes every other request on. A name that is no model's is a 404 with a sentence; nothing
but the model's name is read from the request, and nothing is read from disk."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

ROUTES = {"/badge.svg": ("badge", "image/svg+xml; charset=utf-8"), "/card.png": ("card", "image/png")}
MAX_QUERY = 2000  # bytes of query string read (a name is at most a few hundred)
FRESH_SECONDS = 600  # how long a cache (a model card's page, an image proxy) may keep a badge: results change


class CitationRoutes:
    """Answers ``ROUTES`` from ``scope["app"].blocks.model_pages``; passes everything else to ``app``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        route = ROUTES.get(scope.get("path", "")) if scope["type"] == "http" else None
        pages = getattr(getattr(scope.get("app"), "blocks", None), "model_pages", None)
        if route is None or pages is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, b"Only GET reads a badge or a card.", "text/plain; charset=utf-8")
            return
        query = parse_qs(scope.get("query_string", b"")[:MAX_QUERY].decode("utf-8", "replace"))
        asked = (query.get("model") or [""])[0]
        kind, media = route
        made = await asyncio.to_thread(getattr(pages, kind), asked)
        if made is None:
            sentence = (f"No model named \"{asked[:100]}\" is on this leaderboard; its Model tab lists those there "
                        "are." if asked else "Name a model: ?model=<its name, as the tables show it>.")
            await _answer(send, 404, sentence.encode("utf-8"), "text/plain; charset=utf-8")
            return
        body = made.encode("utf-8") if isinstance(made, str) else made
        await _answer(send, 200, b"" if scope["method"] == "HEAD" else body, media, len(body))


async def _answer(send, status: int, body: bytes, media: str, length: int | None = None) -> None:
    headers = [(b"content-type", media.encode()), (b"content-length", str(len(body) if length is None
                                                                           else length).encode()),
               (b"cache-control", f"max-age={FRESH_SECONDS}".encode()), (b"x-content-type-options", b"nosniff")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

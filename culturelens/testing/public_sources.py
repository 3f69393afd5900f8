"""A stand-in for every public service ``culturelens suite build`` reads, on 127.0.0.1, answering in each real API's
format: Wikidata's ``wbgetentities`` and SPARQL JSON, Wikipedia's ``action=query&prop=revisions``, Commons'
``prop=imageinfo`` (with ``extmetadata`` licence and author), the Hugging Face Hub's dataset revision and file API,
and GitHub's raw files.

Its SPARQL endpoint runs each query (rdflib, with the prefixes Wikidata's service predefines) over the items as
Wikidata's RDF states them, and bounds it as the public service does (``SparqlLimits``): a query past its budget is
stopped and answered as a query past the public service's 60 seconds is, and a client past its budget of the window
is answered 429 with a Retry-After. A test fills it with stand-in items, pages, images and files, points the settings at it
(``env``: the ``CULTURELENS_*`` variables and ``HF_ENDPOINT``), and reads back every request it was sent
(``requests``), so that nothing reaches the network and the download code's behaviour can be counted.

``hold`` makes one download stop midway (the bytes so far sent, then nothing until released): a test kills the
build there and checks that the next one resumes.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Item:
    """A Wikidata item: English label and description, images (P18 file names), classes (P31), countries (P495),
    English Wikipedia title, revision, sitelink count and inception (P571, a time value)."""

    qid: str
    label: str
    description: str = ""
    enwiki: str | None = None
    images: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()
    revision: int = 1
    sitelinks: int = 30
    inception: str | None = None


@dataclass(frozen=True)
class SparqlLimits:
    """What the public SPARQL service bounds (Wikidata's: a query stopped after 60 s, a client given 60 s of query
    time a minute and answered HTTP 429 with a Retry-After beyond it), in the stand-in's unit of work, the triples a
    query visits: ``query``, what one query may visit before it is stopped (HTTP 500 with the service's
    java.util.concurrent.TimeoutException); ``window``, what one client (address and User-Agent) may visit in
    ``seconds``. None: no bound."""

    query: int | None = None
    window: int | None = None
    seconds: float = 60.0


class SparqlTimeout(Exception):
    """A query visited more triples than ``SparqlLimits.query``: stopped, as the public service stops one."""


@dataclass
class Page:
    """An English Wikipedia page at its current revision, and its earlier ones (revid -> wikitext)."""

    title: str
    revid: int
    wikitext: str
    earlier: dict[int, str] = field(default_factory=dict)

    def edit(self, revid: int, wikitext: str) -> None:
        """A new current revision; the one it replaces stays readable by its revid."""
        self.earlier[self.revid] = self.wikitext
        self.revid, self.wikitext = revid, wikitext


@dataclass
class CommonsFile:
    """A Commons file (one version): its original's bytes, upload timestamp, licence and author (HTML, as Commons
    gives it). ``sha1``: what Commons states for the version (default: its bytes' own; a test gives the version's
    true sha1 while serving other bytes). Commons also serves a thumbnail at most 1,024 px wide, rendered on its
    side: ``renders`` counts its renderings, each of other bytes (Commons may render a thumbnail again at the same
    version)."""

    name: str
    data: bytes
    timestamp: str = "2021-03-04T05:06:07Z"
    licence: str = "CC BY-SA 4.0"
    author: str = '<a href="//commons.wikimedia.org/wiki/User:Ann">Ann</a>'
    mime: str = "image/png"
    sha1: str | None = None
    renders: int = 0

    def size(self) -> tuple[int, int]:
        import io

        from PIL import Image

        with Image.open(io.BytesIO(self.data)) as image:
            return image.size

    def thumbnail(self) -> bytes:
        """Commons' 1,024 px rendering, as rendered the ``renders``-th time (a PNG with that count in a text chunk)."""
        import io

        from PIL import Image, PngImagePlugin

        with Image.open(io.BytesIO(self.data)) as image:
            image.thumbnail((1024, 1024 * image.height // max(1, image.width)))
            info = PngImagePlugin.PngInfo()
            info.add_text("rendering", str(self.renders))
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", pnginfo=info)
        return buffer.getvalue()


@dataclass
class HubRepo:
    """A Hub dataset repo at one commit (what ``main`` names). ``gated``: the token of the one account that accepted
    its conditions; its files are then served only to a request bearing it (401 without a token, 403 with another),
    as the Hub serves a gated dataset: its listing stays public."""

    commit: str
    files: dict[str, bytes]
    gated: str | None = None


@dataclass
class Hold:
    """A download held midway: ``reached`` is set once ``after`` bytes are sent; it goes on (and ends the
    connection) when ``release`` is set."""

    match: str
    after: int
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    used: bool = False


def _entity(item: Item) -> dict:
    def claim(prop: str, value, kind: str) -> dict:
        return {"mainsnak": {"snaktype": "value", "property": prop, "datavalue": {"value": value, "type": kind}},
                "type": "statement", "rank": "normal"}

    def item_claim(prop: str, qid: str) -> dict:
        return claim(prop, {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid}, "wikibase-entityid")

    claims = {"P18": [claim("P18", name, "string") for name in item.images],
              "P31": [item_claim("P31", q) for q in item.classes],
              "P495": [item_claim("P495", q) for q in item.countries]}
    return {"type": "item", "id": item.qid, "lastrevid": item.revision,
            "labels": {"en": {"language": "en", "value": item.label}},
            "descriptions": {"en": {"language": "en", "value": item.description}} if item.description else {},
            "claims": {k: v for k, v in claims.items() if v},
            "sitelinks": {"enwiki": {"site": "enwiki", "title": item.enwiki, "badges": []}} if item.enwiki else {}}


class PublicSources:
    """The stand-in server. ``items``, ``pages`` (by title), ``files`` (by name), ``hub`` (by repo id) and ``raw``
    (GitHub paths) are what it serves; ``country_labels`` the English labels of country items; ``sparql`` how its
    SPARQL endpoint bounds queries. ``requests`` records every request, a SPARQL one with the ``work`` it cost."""

    def __init__(self, *, items=(), pages=(), files=(), hub=None, raw=None, country_labels=None,
                 sparql: SparqlLimits = SparqlLimits()):
        self.items = {i.qid: i for i in items}
        self.pages = {p.title: p for p in pages}
        self.files = {f.name: f for f in files}
        self.hub = dict(hub or {})
        self.raw = dict(raw or {})
        self.country_labels = dict(country_labels or {})
        self.sparql_limits = sparql
        self._spent: dict[tuple[str, str], list[tuple[float, int]]] = {}  # client -> (when, work) in the window
        self.requests: list[dict] = []
        self.holds: list[Hold] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- life ---------------------------------------------------------------------------------------------
    def start(self) -> PublicSources:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                owner._answer(self, body=True)

            def do_HEAD(self):  # noqa: N802
                owner._answer(self, body=False)

            def log_message(self, *args):
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for hold in self.holds:
            hold.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> PublicSources:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def env(self) -> dict[str, str]:
        """The variables pointing every public source at this server."""
        from benchmark import settings

        base = self.url
        return {settings.WIKIDATA_API.env: f"{base}/wikidata/w/api.php", settings.WIKIDATA_SPARQL.env: f"{base}/sparql",
                settings.WIKIPEDIA_API.env: f"{base}/wikipedia/w/api.php",
                settings.COMMONS_API.env: f"{base}/commons/w/api.php", settings.GITHUB_RAW.env: f"{base}/raw",
                settings.HUB_ENDPOINT.env: f"{base}/hub"}

    # --- what a test asks -----------------------------------------------------------------------------------
    def hold(self, match: str, after: int) -> Hold:
        """Hold the next full download whose path contains ``match`` after ``after`` bytes."""
        hold = Hold(match, after)
        self.holds.append(hold)
        return hold

    def downloads(self) -> list[dict]:
        """The file downloads asked for (Commons images, Hub files and where the Hub sends large ones, GitHub
        files), in order, with their Range and Authorization."""
        return [r for r in self.requests if r["method"] == "GET" and (
            r["path"].startswith(("/upload/", "/raw/", "/cdn/")) or "/resolve/" in r["path"])]

    def api_calls(self) -> list[dict]:
        """The API requests (Wikidata, SPARQL, Wikipedia, Commons, the Hub's revision API)."""
        return [r for r in self.requests if r["method"] == "GET" and r not in self.downloads()]

    def file_url(self, name: str) -> str:
        return f"{self.url}/upload/{urllib.parse.quote(name)}"

    # --- answers --------------------------------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        parsed = urllib.parse.urlparse(handler.path)
        path, params = urllib.parse.unquote(parsed.path), dict(urllib.parse.parse_qsl(parsed.query))
        record = {"method": handler.command, "path": path, "params": params, "range": handler.headers.get("Range"),
                  "authorization": handler.headers.get("Authorization")}
        with self._lock:
            self.requests.append(record)
        if handler.command == "HEAD":
            return self._send(handler, 200, b"", "text/plain", body=False)
        try:
            if path == "/wikidata/w/api.php":
                return self._json(handler, self._wikidata(params))
            if path == "/sparql":
                return self._sparql(handler, params["query"], record)
            if path == "/wikipedia/w/api.php":
                return self._json(handler, self._wikipedia(params))
            if path == "/commons/w/api.php":
                return self._json(handler, self._commons(params))
            if path.startswith("/upload/thumb/") and path.split("/")[3] in self.files:
                return self._bytes(handler, path, self.files[path.split("/")[3]].thumbnail())
            if path.startswith("/upload/") and path[len("/upload/"):] in self.files:
                return self._bytes(handler, path, self.files[path[len("/upload/"):]].data)
            if path.startswith("/raw/") and path[len("/raw/"):] in self.raw:
                return self._bytes(handler, path, self.raw[path[len("/raw/"):]])
            if path.startswith("/hub/"):
                return self._hub(handler, path[len("/hub"):])
            if path.startswith("/cdn/") and path[len("/cdn/"):] in self._lfs():
                return self._bytes(handler, path, self._lfs()[path[len("/cdn/"):]])
        except KeyError as error:
            return self._send(handler, 400, f"bad request: {error}".encode(), "text/plain")
        self._send(handler, 404, b"not found", "text/plain")

    def _send(self, handler, status: int, data: bytes, kind: str, body: bool = True, headers=None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def _json(self, handler, data: dict) -> None:
        self._send(handler, 200, json.dumps(data).encode(), "application/json")

    def _bytes(self, handler, path: str, data: bytes) -> None:
        ranged = handler.headers.get("Range")
        if ranged:
            start = int(re.fullmatch(r"bytes=(\d+)-", ranged).group(1))
            if start >= len(data):
                return self._send(handler, 416, b"", "text/plain",
                                  headers={"Content-Range": f"bytes */{len(data)}"})
            return self._send(handler, 206, data[start:], "application/octet-stream",
                              headers={"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
        hold = next((h for h in self.holds if not h.used and h.match in path), None)
        if hold is None:
            return self._send(handler, 200, data, "application/octet-stream")
        hold.used = True
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data[:hold.after])
        handler.wfile.flush()
        hold.reached.set()
        hold.release.wait(120)
        handler.close_connection = True

    def _wikidata(self, params: dict) -> dict:
        assert params["action"] == "wbgetentities", params
        if "ids" in params:
            return {"entities": {q: _entity(self.items[q]) if q in self.items else {"id": q, "missing": ""}
                                 for q in params["ids"].split("|")}, "success": 1}
        found = {}
        for n, title in enumerate(params["titles"].split("|"), start=1):
            if params.get("normalize"):
                title = title[:1].upper() + title[1:]
            item = next((i for i in self.items.values() if i.enwiki == title), None)
            found[item.qid if item else str(-n)] = _entity(item) if item else {"site": "enwiki", "title": title,
                                                                                 "missing": ""}
        return {"entities": found, "success": 1}

    def _graph(self):
        """The items as Wikidata's RDF states them (truthy statements, sitelinks, revision, English labels, English
        Wikipedia articles), as a graph that counts the triples a query visits and stops it past its budget."""
        from rdflib import Graph, Literal, Namespace, URIRef
        from rdflib.namespace import RDFS, XSD

        wd, wdt = Namespace("http://www.wikidata.org/entity/"), Namespace("http://www.wikidata.org/prop/direct/")
        wikibase, schema = Namespace("http://wikiba.se/ontology#"), Namespace("http://schema.org/")
        budget = self.sparql_limits.query

        class Counted(Graph):
            visited = 0

            def triples(self, pattern):
                for triple in super().triples(pattern):
                    Counted.visited += 1
                    if budget is not None and Counted.visited > budget:
                        raise SparqlTimeout()
                    yield triple

        graph = Counted()
        for item in self.items.values():
            node = wd[item.qid]
            graph.add((node, RDFS.label, Literal(item.label, lang="en")))
            graph.add((node, wikibase.sitelinks, Literal(item.sitelinks, datatype=XSD.integer)))
            graph.add((node, schema.version, Literal(item.revision, datatype=XSD.integer)))
            for name in item.images:
                graph.add((node, wdt.P18, URIRef("http://commons.wikimedia.org/wiki/Special:FilePath/"
                                                 + urllib.parse.quote(name))))
            graph.addN((node, wdt.P31, wd[q], graph) for q in item.classes)
            graph.addN((node, wdt.P495, wd[q], graph) for q in item.countries)
            if item.inception:
                graph.add((node, wdt.P571, Literal(item.inception, datatype=XSD.dateTime)))
            if item.enwiki:
                article = URIRef("https://en.wikipedia.org/wiki/" + urllib.parse.quote(item.enwiki.replace(" ", "_")))
                graph.add((article, schema.about, node))
                graph.add((article, schema.isPartOf, URIRef("https://en.wikipedia.org/")))
        for qid, label in self.country_labels.items():
            graph.add((wd[qid], RDFS.label, Literal(label, lang="en")))
        prefixes = {"wd": wd, "wdt": wdt, "wikibase": wikibase, "schema": schema, "rdfs": RDFS, "xsd": XSD}
        return graph, Counted, prefixes

    def _sparql(self, handler, query: str, record: dict) -> None:
        """The query run over the items, within the limits (``SparqlLimits``); its cost kept in its ``record``."""
        import math
        import time

        limits, client = self.sparql_limits, (handler.client_address[0], handler.headers.get("User-Agent", ""))
        now = time.monotonic()
        with self._lock:
            spent = [(when, work) for when, work in self._spent.get(client, []) if when > now - limits.seconds]
            self._spent[client] = spent
        if limits.window is not None and spent and sum(work for _, work in spent) >= limits.window:
            wait = max(1, math.ceil(spent[0][0] + limits.seconds - now))
            return self._send(handler, 429, b"Too Many Requests", "text/plain", headers={"Retry-After": str(wait)})
        graph, counted, prefixes = self._graph()
        try:
            answer = graph.query(query, initNs=prefixes).serialize(format="json")
            status = 200
        except SparqlTimeout:
            answer, status = b"java.util.concurrent.TimeoutException", 500
        with self._lock:
            self._spent[client].append((time.monotonic(), counted.visited))  # spent by the time it answers
            record["work"] = counted.visited
        if status != 200:
            return self._send(handler, status, answer, "text/plain")
        self._send(handler, 200, answer, "application/sparql-results+json")

    def _wikipedia(self, params: dict) -> dict:
        def page(p: Page, revid: int | None = None) -> dict:
            revid = p.revid if revid is None else revid
            text = p.wikitext if revid == p.revid else p.earlier[revid]
            pageid = int(hashlib.sha1(p.title.encode()).hexdigest()[:6], 16)
            return {"pageid": pageid, "ns": 0, "title": p.title, "revisions": [{
                "revid": revid, "parentid": revid - 1, "slots": {"main": {
                    "contentmodel": "wikitext", "contentformat": "text/x-wiki", "content": text,
                    "sha1": hashlib.sha1(text.encode()).hexdigest()}}}]}

        if "revids" in params:
            wanted = {int(r) for r in params["revids"].split("|")}
            return {"batchcomplete": True, "query": {"pages": [page(p, r) for p in self.pages.values()
                                                               for r in [p.revid, *p.earlier] if r in wanted]}}
        normalized, pages = [], []
        for title in params["titles"].split("|"):
            final = title[:1].upper() + title[1:]
            if final != title:
                normalized.append({"fromencoded": False, "from": title, "to": final})
            pages.append(page(self.pages[final]) if final in self.pages else {"ns": 0, "title": final, "missing": True})
        return {"batchcomplete": True, "query": {"normalized": normalized, "pages": pages}}

    def _commons(self, params: dict) -> dict:
        pages = []
        for title in params["titles"].split("|"):
            name = title.split(":", 1)[1]
            f = self.files.get(name)
            if f is None or ("iistart" in params and params["iistart"] != f.timestamp):
                pages.append({"ns": 6, "title": title, "missing": True, "known": ""} if f is None else
                             {"ns": 6, "title": title, "imagerepository": "local"})
                continue
            url, (width, height), quoted = self.file_url(name), f.size(), urllib.parse.quote(name)
            thumb = {"thumburl": f"{self.url}/upload/thumb/{quoted}/1024px-{quoted}", "thumbwidth": min(width, 1024),
                     "thumbheight": height * min(width, 1024) // width} if "iiurlwidth" in params else {}
            pages.append({"ns": 6, "title": title, "imagerepository": "local", "imageinfo": [{
                "timestamp": f.timestamp, "size": len(f.data), "width": width, "height": height, **thumb, "url": url,
                "descriptionurl": f"https://commons.wikimedia.org/wiki/File:{urllib.parse.quote(name)}",
                "sha1": f.sha1 or hashlib.sha1(f.data).hexdigest(), "mime": f.mime, "extmetadata": {
                    "LicenseShortName": {"value": f.licence, "source": "commons-desc-page", "hidden": ""},
                    "Artist": {"value": f.author, "source": "commons-desc-page"},
                    "LicenseUrl": {"value": "https://creativecommons.org/licenses/by-sa/4.0",
                                   "source": "commons-desc-page", "hidden": ""}}}]})
        return {"batchcomplete": True, "query": {"pages": pages}}

    def _hub(self, handler, path: str) -> None:
        revision = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/revision/([^/]+)", path)
        if revision and revision.group(1) in self.hub:
            repo = self.hub[revision.group(1)]
            if revision.group(2) not in ("main", repo.commit):
                return self._send(handler, 404, b'{"error": "Invalid rev id"}', "application/json")
            siblings = []
            for name, data in sorted(repo.files.items()):
                entry = {"rfilename": name, "size": len(data),
                         "blobId": hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()}
                if name.endswith(".parquet"):
                    entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                siblings.append(entry)
            return self._json(handler, {"_id": "0", "id": revision.group(1), "sha": repo.commit,
                                        "siblings": siblings})
        resolve = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if resolve and resolve.group(1) in self.hub:
            repo = self.hub[resolve.group(1)]
            if repo.gated is not None and handler.headers.get("Authorization") != f"Bearer {repo.gated}":
                status = 403 if handler.headers.get("Authorization") else 401
                message = f"Access to dataset {resolve.group(1)} is restricted"
                return self._send(handler, status, json.dumps({"error": message}).encode(), "application/json")
            if resolve.group(2) == repo.commit and resolve.group(3) in repo.files:
                data = repo.files[resolve.group(3)]
                if resolve.group(3).endswith(".parquet"):  # a large file: sent from the storage's own address
                    location = f"{self.url}/cdn/{hashlib.sha256(data).hexdigest()}"
                    return self._send(handler, 302, b"", "text/plain", headers={"Location": location})
                return self._bytes(handler, path, data)
        self._send(handler, 404, b"not found", "text/plain")

    def _lfs(self) -> dict[str, bytes]:
        """The Hub's large files by sha256, as its storage serves them after a redirect."""
        return {hashlib.sha256(data).hexdigest(): data for repo in self.hub.values()
                for name, data in repo.files.items() if name.endswith(".parquet")}

"""Wikidata, English Wikipedia and Wikimedia Commons, read through their public APIs (addresses:
``benchmark.settings``' ``CULTURELENS_WIKIDATA_API`` and siblings), each answer pinned to a revision.

- Wikidata: ``wbgetentities`` gives an item's English label and description, its images (P18), classes (P31),
  countries (P495, P17), English Wikipedia title and ``lastrevid``, the revision all of them were read at; the
  SPARQL service answers the queries of ``sparql/``.
- Wikipedia: ``action=query&prop=revisions`` gives a page's wikitext at a revision (its current one, or a pinned
  ``revid``) with the revision's sha1, checked here. A revision's wikitext never changes, so the text a knowledge
  base holds can be had again, byte for byte, from its revision id. ``plain_text`` turns it into the text a judge
  reads, as the Hugging Face ``wikipedia`` dataset CAIRE's text came from does: templates, references, tables,
  files and categories dropped, links and emphasis reduced to their words.
- Commons: ``prop=imageinfo`` gives a file's versions (an upload timestamp each), each version's original file
  (its address, size, pixels, and its sha1, which Commons states and never changes for a version), and the licence
  and author of its description page (``extmetadata``). An image is pinned by what Commons itself pins: its file
  name, version and the original's sha1 (and the sha256 of those bytes, once downloaded). The original is
  downloaded and checked against them (bytes other than the pinned ones are refused, naming the file), and the copy
  a dataset holds, at most ``THUMB_WIDTH`` pixels wide, is made from it here (``scaled_copy``): Commons' own
  thumbnails are not pinned, as Commons may render them again, with other bytes, at the same version.
"""

from __future__ import annotations

import hashlib
import html
import re
import urllib.parse
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path

from benchmark import settings
from benchmark.digests import file_digest
from benchmark.downloads import ChangedBytes, DownloadError, Downloads, Expected, Step, get_json

BATCH = 50  # ids, titles or files per API request (the MediaWiki API's limit for most clients)
TEXT_BATCH = 20  # pages per request when their wikitext comes along (large answers are cut short sooner)
THUMB_WIDTH = 1024  # pixels: what the encoders see is far smaller (mSigLIP 384, CLIP 224)
MAX_ORIGINAL_PIXELS = 64_000_000  # an original larger (a scanned map, a panorama) is left out, as a non-image is:
MAX_ORIGINAL_BYTES = 64 * 2**20  # ... what a build downloads and decodes is bounded by what Commons states
COMMONS_FOLDER = "commons"  # under the downloads folder
SPARQL_SECONDS = 60  # Wikidata's SPARQL service stops a query after this long
SCALED = f"scaled here to at most {THUMB_WIDTH} px wide (Pillow, Lanczos; as viewed: EXIF orientation applied)"
"""How a pin's copy is made from its original (``ImagePin.scaled``)."""


# --- Wikidata ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entity:
    """A Wikidata item as read at ``revision``: what the builders use of it."""

    qid: str
    revision: int
    label: str | None
    description: str | None
    enwiki: str | None
    images: tuple[str, ...]
    classes: tuple[str, ...]
    countries: tuple[str, ...]


def _claim_values(claims: dict, prop: str) -> list:
    """The values of one property, best rank first (preferred, then normal; deprecated ones left out), in the
    item's own order within a rank."""
    ranked = [c for c in claims.get(prop, []) if c.get("rank") != "deprecated"
              and c.get("mainsnak", {}).get("snaktype") == "value"]
    ranked.sort(key=lambda c: c.get("rank") != "preferred")
    return [c["mainsnak"]["datavalue"]["value"] for c in ranked]


def entity_from_json(data: dict) -> Entity:
    """An entity of a ``wbgetentities`` answer."""
    claims = data.get("claims", {})

    def ids(prop: str) -> tuple[str, ...]:
        return tuple(v["id"] for v in _claim_values(claims, prop) if isinstance(v, dict) and "id" in v)

    return Entity(
        data["id"], int(data["lastrevid"]), data.get("labels", {}).get("en", {}).get("value"),
        data.get("descriptions", {}).get("en", {}).get("value"),
        data.get("sitelinks", {}).get("enwiki", {}).get("title"),
        tuple(v for v in _claim_values(claims, "P18") if isinstance(v, str)), ids("P31"),
        tuple(dict.fromkeys(ids("P495") + ids("P17"))))


class Wikidata:
    """Wikidata's API and SPARQL service at the addresses the settings give."""

    PROPS = "info|labels|descriptions|claims|sitelinks"

    def __init__(self):
        self.api, self.sparql_url = settings.WIKIDATA_API.resolve(), settings.WIKIDATA_SPARQL.resolve()

    def _get(self, params: dict) -> dict:
        answer = get_json(self.api, {**params, "format": "json"}, what="Wikidata's API")
        if "error" in answer:
            raise DownloadError(f"Wikidata's API ({self.api}) refused {params.get('ids') or params.get('titles')}: "
                                f"{answer['error'].get('info', answer['error'])}")
        return answer

    def entities(self, ids: list[str], step: Step | None = None) -> dict[str, Entity]:
        """The items ``ids`` at their current revisions (an id Wikidata lacks is left out)."""
        found: dict[str, Entity] = {}
        for start in range(0, len(ids), BATCH):
            batch = ids[start:start + BATCH]
            answer = self._get({"action": "wbgetentities", "ids": "|".join(batch), "props": self.PROPS,
                                "languages": "en", "sitefilter": "enwiki"})
            for key, data in answer.get("entities", {}).items():
                if "missing" not in data and "lastrevid" in data:
                    found[key] = entity_from_json(data)
            if step is not None:
                step.bar.update(len(batch))
        return found

    def entity_of_title(self, title: str) -> Entity | None:
        """The item whose English Wikipedia page is ``title`` (normalised as Wikipedia does), or None."""
        answer = self._get({"action": "wbgetentities", "sites": "enwiki", "titles": title, "normalize": "1",
                            "props": self.PROPS, "languages": "en", "sitefilter": "enwiki"})
        for data in answer.get("entities", {}).values():
            if "missing" not in data and "lastrevid" in data:
                return entity_from_json(data)
        return None

    def sparql(self, query: str, *, what: str) -> list[dict]:
        """The ``results.bindings`` of a SPARQL query (``what`` names it in errors). The public service stops a query
        after 60 seconds and answers a client past its 60 seconds of query time a minute with HTTP 429 and a
        Retry-After (honoured: ``benchmark.downloads``); the queries of ``sparql/`` are split (one per class) so
        that each stays within the first, and are sent one at a time, as the service asks."""
        try:
            answer = get_json(self.sparql_url, {"query": query, "format": "json"},
                              what=f"Wikidata's SPARQL service ({what})", timeout=SPARQL_SECONDS + 30)
        except DownloadError as error:
            if "HTTP 500" in str(error):  # how the service answers a query it stopped at its limit
                raise DownloadError(f"{error}: the service stops a query after {SPARQL_SECONDS} seconds; it may be "
                                    "busy now: build again later") from None
            raise
        try:
            return answer["results"]["bindings"]
        except (KeyError, TypeError):
            raise DownloadError(f"Wikidata's SPARQL service ({self.sparql_url}) answered no results.bindings"
                                ) from None


# --- Wikipedia --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Revision:
    """A page's wikitext at one revision."""

    title: str
    revid: int
    wikitext: str


class Wikipedia:
    """English Wikipedia's API at the address the settings give."""

    def __init__(self):
        self.api = settings.WIKIPEDIA_API.resolve()

    def _pages(self, params: dict) -> tuple[list[dict], dict[str, str]]:
        """Every page of a query (following ``continue``) and {requested title: final title} (normalised,
        redirected)."""
        params = {"action": "query", "prop": "revisions", "rvprop": "ids|sha1|content", "rvslots": "main",
                  "format": "json", "formatversion": "2", **params}
        pages, renamed = {}, {}
        while True:
            answer = get_json(self.api, params, what="Wikipedia's API")
            query = answer.get("query", {})
            for kind in ("normalized", "redirects"):
                for entry in query.get(kind, []):
                    renamed[entry["from"]] = entry["to"]
            for page in query.get("pages", []):
                if page.get("revisions"):
                    pages.setdefault(page["title"], page)
            if "continue" not in answer:
                return list(pages.values()), renamed
            params = {**params, **answer["continue"]}

    @staticmethod
    def _revision(page: dict) -> Revision:
        revision = page["revisions"][0]
        slot = revision["slots"]["main"]
        text = slot.get("content", "")
        found = hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324 - the checksum MediaWiki states
        if slot.get("sha1") and found != slot["sha1"]:
            raise ChangedBytes(f"Wikipedia page {page['title']!r}, revision {revision['revid']}: the wikitext "
                               f"served has sha1 {found}, not the {slot['sha1']} the revision states")
        return Revision(page["title"], int(revision["revid"]), text)

    def current(self, titles: list[str], step: Step | None = None) -> dict[str, Revision]:
        """The current revision of each page (by the title asked for; a missing page is left out)."""
        found = {}
        for start in range(0, len(titles), TEXT_BATCH):
            batch = titles[start:start + TEXT_BATCH]
            pages, renamed = self._pages({"titles": "|".join(batch), "redirects": "1"})
            by_title = {page["title"]: self._revision(page) for page in pages}
            for title in batch:
                final = title
                for _ in range(3):  # normalised, then redirected
                    final = renamed.get(final, final)
                if final in by_title:
                    found[title] = by_title[final]
            if step is not None:
                step.bar.update(len(batch))
        return found

    def at(self, revids: list[int], step: Step | None = None) -> dict[int, Revision]:
        """The pages at the pinned revisions ``revids`` (a revision deleted since is left out)."""
        found = {}
        for start in range(0, len(revids), TEXT_BATCH):
            batch = revids[start:start + TEXT_BATCH]
            pages, _ = self._pages({"revids": "|".join(str(r) for r in batch)})
            for page in pages:
                revision = self._revision(page)
                found[revision.revid] = revision
            if step is not None:
                step.bar.update(len(batch))
        return found


def _nested(text: str, opening: str, closing: str) -> str:
    """``text`` without its (possibly nested) ``opening``...``closing`` spans; an unclosed one runs to the end."""
    out, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith(opening, i):
            depth, i = depth + 1, i + len(opening)
        elif depth and text.startswith(closing, i):
            depth, i = depth - 1, i + len(closing)
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_REF = re.compile(r"<ref\b[^>]*?/>|<ref\b[^>]*>.*?</ref\s*>", re.S | re.I)
_DROPPED = re.compile(r"<(gallery|math|chem|score|timeline|syntaxhighlight|source|graph|mapframe|imagemap)\b[^>]*>"
                      r".*?</\1\s*>", re.S | re.I)
_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_NOT_TEXT = re.compile(r"^:?\s*(file|image|media|category)\s*:", re.I)
_EXTERNAL = re.compile(r"\[(?:https?:)?//[^\s\]]*(?:\s+([^\]]*))?\]")
_TAG = re.compile(r"</?[a-zA-Z][^<>]*>")
_MAGIC = re.compile(r"__[A-Z]+__")
_HEADING = re.compile(r"^(={1,6})\s*(.*?)\s*\1\s*$")
_LIST = re.compile(r"^[*#:;]+\s*")
TAIL_SECTIONS = frozenset({"references", "notes", "footnotes", "citations", "sources", "bibliography",
                           "further reading", "external links", "see also"})
"""Sections of lists and links rather than prose: left out with their subsections."""


def _link_text(match: re.Match) -> str:
    inner = match.group(1)
    if _NOT_TEXT.match(inner):
        return ""
    return inner.rsplit("|", 1)[-1] if "|" in inner else inner.lstrip(":")


def plain_text(wikitext: str) -> str:
    """The prose of a page's wikitext: what a judge reads about an entity (module docstring). Deterministic: the
    same revision gives the same text."""
    text = _COMMENT.sub("", wikitext)
    text = _REF.sub("", text)
    text = _DROPPED.sub("", text)
    text = _nested(_nested(text, "{{", "}}"), "{|", "|}")
    while _LINK.search(text):  # innermost first: a file's caption may hold links
        text = _LINK.sub(_link_text, text)
    text = _EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _MAGIC.sub("", _TAG.sub("", text)).replace("'''", "").replace("''", "")
    lines, skip_level = [], 0
    for raw in html.unescape(text).replace("\u00a0", " ").splitlines():
        line = " ".join(raw.split())
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if skip_level and level > skip_level:
                continue
            skip_level = level if heading.group(2).strip().lower() in TAIL_SECTIONS else 0
            if not skip_level:
                lines += ["", heading.group(2).strip(), ""]
            continue
        if not skip_level:
            lines.append(_LIST.sub("", line))
    paragraphs = "\n".join(lines).split("\n\n")
    kept = ["\n".join(p for p in paragraph.split("\n") if p) for paragraph in paragraphs]
    return "\n\n".join(p for p in kept if p).strip()


# --- Commons ----------------------------------------------------------------------------------------------------
class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _html_text(value: str | None) -> str | None:
    if not value:
        return None
    parser = _Text()
    parser.feed(value)
    text = " ".join("".join(parser.parts).split())
    return text or None


@dataclass(frozen=True)
class ImagePin:
    """One Commons image as used: the file, its version (upload timestamp), the sha1 Commons states for that
    version's original, the original's address, the sha256 of its bytes (None until downloaded), the file's
    licence and author, and how the copy used was made from it (``SCALED``)."""

    file: str
    version: str
    sha1: str
    url: str
    sha256: str | None
    licence: str | None
    licence_url: str | None
    author: str | None
    scaled: str = SCALED

    def _path(self, kind: str) -> str:
        suffix = Path(self.file).suffix.lower() or ".jpg"
        key = hashlib.sha256(f"{self.file}\n{self.version}".encode()).hexdigest()[:24]
        return f"{COMMONS_FOLDER}/{key[:2]}/{key}{kind}{suffix}"

    @property
    def local(self) -> str:
        """Where the copy used lies under the downloads folder (``scaled_copy``): one name per (file, version)."""
        return self._path("")

    @property
    def original(self) -> str:
        """Where the original's bytes lie under the downloads folder."""
        return self._path(".original")

    @property
    def credit(self) -> str:
        """The licence and author, as a dataset row credits the image."""
        return f"{self.licence or 'licence not stated'}; {self.author or 'author not stated'}; Wikimedia Commons, " \
               f"File:{self.file} ({self.version})"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ImagePin:
        """A pin as recorded. One recorded before originals were pinned (no ``scaled``) named a Commons thumbnail's
        address and sha256: its file, version and sha1 still pin the image, the rest is read again."""
        if not data.get("scaled"):
            data = {**data, "url": "", "sha256": None, "scaled": SCALED}
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})


def scaled_copy(original: Path, target: Path) -> None:
    """The copy a dataset holds of a Commons original (``SCALED``): the original's bytes when it is at most
    ``THUMB_WIDTH`` pixels wide, else the image as viewed (``benchmark.images.as_viewed``), scaled to that width
    (Lanczos), saved as a JPEG (quality 95) for a JPEG original, a PNG otherwise. Written whole or not at all."""
    import shutil

    from PIL import Image

    from benchmark.atomic import atomic_write
    from benchmark.images import as_viewed

    with Image.open(original) as image:
        turned = image.getexif().get(0x0112, 1) in (5, 6, 7, 8)  # EXIF orientation: shown a quarter turn round
        viewed_width, viewed_height = (image.height, image.width) if turned else image.size
        if viewed_width <= THUMB_WIDTH:
            atomic_write(target, lambda tmp: shutil.copyfile(original, tmp))
            return
        jpeg = image.format == "JPEG"
        size = (THUMB_WIDTH, max(1, round(viewed_height * THUMB_WIDTH / viewed_width)))
        if jpeg:  # decoded at the smallest 1/2^k scale still as large as the copy
            image.draft("RGB", size[::-1] if turned else size)
        scaled = as_viewed(image).resize(size, Image.Resampling.LANCZOS)
    atomic_write(target, lambda tmp: scaled.save(tmp, format="JPEG" if jpeg else "PNG",
                                                **({"quality": 95} if jpeg else {})))


def file_name(value: str) -> str:
    """A Commons file name as Wikidata and SPARQL give it ('Foo bar.jpg', '.../Special:FilePath/Foo%20bar.jpg')."""
    name = urllib.parse.unquote(value.rsplit("/", 1)[-1]) if "/" in value else value
    name = name.replace("_", " ").strip()
    return name[5:] if name.lower().startswith("file:") else name


class Commons:
    """Wikimedia Commons' API at the address the settings give."""

    META = "LicenseShortName|LicenseUrl|Artist"

    def __init__(self):
        self.api = settings.COMMONS_API.resolve()

    def _query(self, titles: list[str], **extra) -> dict[str, dict]:
        """{file name asked for: its page} of one imageinfo request."""
        answer = get_json(self.api, {
            "action": "query", "prop": "imageinfo", "titles": "|".join(f"File:{t}" for t in titles),
            "iiprop": "timestamp|sha1|size|mime|url|extmetadata", "iiextmetadatafilter": self.META,
            "iiextmetadatalanguage": "en", "format": "json", "formatversion": "2", **extra},
            what="Wikimedia Commons' API")
        query = answer.get("query", {})
        renamed = {n["from"]: n["to"] for n in query.get("normalized", [])}
        pages = {page["title"]: page for page in query.get("pages", [])}
        return {t: pages.get(renamed.get(f"File:{t}", f"File:{t}"), {}) for t in titles}

    @staticmethod
    def _pin(name: str, page: dict) -> ImagePin | None:
        info = (page.get("imageinfo") or [None])[0]
        if not info or not str(info.get("mime", "")).startswith("image/"):
            return None  # missing, or not an image (a PDF, a video)
        pixels = int(info.get("width") or 0) * int(info.get("height") or 0)
        if pixels > MAX_ORIGINAL_PIXELS or int(info.get("size") or 0) > MAX_ORIGINAL_BYTES:
            return None  # too large to download and decode for a 1,024 px copy
        meta = {key: _html_text(value.get("value")) for key, value in info.get("extmetadata", {}).items()}
        return ImagePin(name, info["timestamp"], info["sha1"], info["url"], None,
                        meta.get("LicenseShortName"), meta.get("LicenseUrl"), meta.get("Artist"))

    def current(self, names: list[str], step: Step | None = None) -> dict[str, ImagePin]:
        """Each file's current version (a missing file, or one that is no image, is left out)."""
        found = {}
        for start in range(0, len(names), BATCH):
            batch = names[start:start + BATCH]
            for name, page in self._query(batch).items():
                if (pin := self._pin(name, page)) is not None:
                    found[name] = pin
            if step is not None:
                step.bar.update(len(batch))
        return found

    def version(self, name: str, version: str) -> ImagePin | None:
        """The file's version uploaded at ``version`` (an older one than the current: its archived original)."""
        page = self._query([name], iistart=version, iiend=version, iilimit=1)[name]
        pin = self._pin(name, page)
        return pin if pin is not None and pin.version == version else None


def fetch_images(pins: list[ImagePin], downloads: Downloads, *, what: str, progress: bool = True,
                 refresh_hint: str = "") -> list[ImagePin]:
    """Every image of ``pins`` in the downloads folder: its original, checked against the sha1 Commons states for
    its pinned version (and the pinned sha256, when there is one), and the copy made from it (``scaled_copy``);
    each pin with the sha256 of its original. An original not in the downloads folder is asked for at its pinned
    version; bytes other than the pinned ones are refused (ChangedBytes naming the file and version)."""
    missing = [p for p in pins if not downloads.has(p.original, Expected(sha1=p.sha1, sha256=p.sha256))]
    by_name: dict[str, ImagePin] = {}
    asked = sorted({p.file for p in missing if p.sha256 is not None or not p.url})
    if asked:
        by_name = Commons().current(asked)
    step = Step(f"{what}: images", len(pins), enabled=progress)
    done = []
    try:
        for pin in pins:
            url = pin.url
            if pin in missing and (pin.sha256 is not None or not pin.url):
                now = by_name.get(pin.file)
                if now is None or now.version != pin.version:
                    older = Commons().version(pin.file, pin.version)
                    if older is None:
                        raise DownloadError(f"{what}: Wikimedia Commons file {pin.file!r} no longer has its pinned "
                                            f"version {pin.version}{refresh_hint}")
                    now = older
                url = now.url
            try:
                original = downloads.file(url, pin.original, what=f"Wikimedia Commons file {pin.file!r}",
                                          expected=Expected(sha1=pin.sha1, sha256=pin.sha256), step=step)
            except ChangedBytes as error:
                raise ChangedBytes(f"{what}: Wikimedia Commons file {pin.file!r} at its pinned version "
                                   f"{pin.version} now has {error.problem}: the image changed at the same "
                                   f"revision, so it is refused{refresh_hint}") from None
            copy = downloads.path(pin.local)
            if not copy.is_file():
                try:
                    scaled_copy(original, copy)
                except (OSError, ValueError) as error:  # Pillow's refusals (a damaged file, a bomb) among them
                    raise DownloadError(f"{what}: Wikimedia Commons file {pin.file!r} ({pin.version}) cannot be "
                                        f"read as an image ({type(error).__name__}: {str(error)[:160]})") from None
            if pin.sha256 is None:  # a pin just made, or recorded before originals were
                pin = ImagePin(**{**pin.to_dict(), "url": url, "sha256": file_digest(original)})
            done.append(pin)
    finally:
        step.close()
    return done

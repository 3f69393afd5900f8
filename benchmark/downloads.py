"""Reading public services: JSON answers, and files downloaded once, resumably, and verified.

Every public source ``culturelens suite build`` reads (``benchmark.settings.PUBLIC_SOURCES``: Wikidata, Wikipedia,
Wikimedia Commons, the Hugging Face Hub, GitHub's raw files) goes through here:

- ``get_json``: one API request, retried when the service says it is busy (429, 503: its ``Retry-After``, else a
  few seconds, a few times), any other failure a ``DownloadError`` naming the service and what to do.
- ``Downloads.file``: a file kept under a cache folder (a suite folder's ``.downloads/``). A file already there
  is not downloaded again: it is verified (against the sha256 the pin names, or the sha1 the service gives) and
  reused. A file cut off midway (a killed build) waits as ``<name>.part`` and the next call asks only for the
  rest (an HTTP ``Range`` request); a server that ignores the range sends the whole file, which replaces the
  part. A file whose bytes are not the ones expected is refused, naming the file, and not kept.
- ``Step``: a step's progress bar (tqdm, on stderr): files done of the step's total, bytes, and the time left.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from benchmark.digests import file_digest
from benchmark.errors import CultureLensError

USER_AGENT = "CultureLens suite builder (https://huggingface.co/culturelens; culturelens suite build)"
RETRIES = 4  # a busy service (429, 503) is asked again this many times
MAX_WAIT = 30.0  # seconds: the longest Retry-After honoured
CHUNK = 1 << 16


class DownloadError(CultureLensError, OSError):
    """A service cannot be reached or answers with something unusable; the message names it and what to do."""


class ChangedBytes(DownloadError):
    """A file's bytes are not the ones its pin (or the service's checksum) names: refused, naming the file.
    ``problem`` says what differs ("sha256 <found>, not the pinned <pin>")."""

    problem = ""


@dataclass(frozen=True)
class Credential:
    """What a service that needs one is sent (the Hub's token for a gated dataset: ``hub_files``):
    ``authorization``, the header's value, sent to that service's own address only, never along a redirect (a file
    the Hub sends from a CDN gets no token), and never written in an error; ``refused``, what a 401 or 403 answer's
    message adds (how to get access)."""

    authorization: str | None
    refused: str

    def __repr__(self) -> str:  # a record printed in a log or a traceback shows no token
        return f"Credential(authorization={'<set>' if self.authorization else None}, refused={self.refused!r})"


def _request(url: str, headers: dict[str, str] | None = None,
             credential: Credential | None = None) -> urllib.request.Request:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    if credential is not None and credential.authorization:
        # urllib copies a request's headers onto a redirect, to whatever host: an unredirected header stays here
        request.add_unredirected_header("Authorization", credential.authorization)
    return request


def _wait(error: urllib.error.HTTPError, attempt: int) -> float:
    try:
        return min(MAX_WAIT, float(error.headers.get("Retry-After", "")))
    except ValueError:
        return min(MAX_WAIT, 2.0 * 2 ** attempt)


def _open(request: urllib.request.Request, what: str, timeout: float, allow: tuple[int, ...] = (),
          credential: Credential | None = None):
    """The response to ``request``, asking again while the service says it is busy; None for an HTTP status in
    ``allow``; DownloadError otherwise (for 401 and 403, with what ``credential`` says gives access)."""
    for attempt in range(RETRIES + 1):
        try:
            return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http(s) addresses of settings)
        except urllib.error.HTTPError as error:
            if error.code in allow:
                return None
            if error.code in (429, 503) and attempt < RETRIES:
                time.sleep(_wait(error, attempt))
                continue
            access = f"; {credential.refused}" if credential is not None and error.code in (401, 403) else ""
            raise DownloadError(f"{what}: {request.full_url[:160]} answered HTTP {error.code} ({error.reason})"
                                f"{access}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise DownloadError(f"cannot reach {what} ({request.full_url.split('?')[0]}): "
                                f"{getattr(error, 'reason', error)}"
                                "; where there is no network, give the source as a file instead (the "
                                "command's --help names the option)") from None
    raise AssertionError("unreachable")


def get_json(url: str, params: dict[str, object] | None = None, *, what: str, timeout: float = 120,
             credential: Credential | None = None) -> dict:
    """The JSON a service answers to a GET of ``url`` with ``params`` (``what`` names the service in errors;
    ``credential``: what a service that needs one is sent)."""
    full = f"{url}?{urllib.parse.urlencode(params)}" if params else url
    request = _request(full, {"Accept": "application/json, application/sparql-results+json"}, credential)
    with _open(request, what, timeout, credential=credential) as response:
        body = response.read()
    try:
        return json.loads(body)
    except ValueError:
        raise DownloadError(f"{what}: {full[:160]} did not answer JSON ({body[:80]!r})") from None


def sha1_of(path: Path) -> str:
    digest = hashlib.sha1()  # noqa: S324 - the checksum services publish (Commons files, MediaWiki revisions)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Step:
    """One step's progress on stderr: a tqdm bar of files (done of ``files``; or of ``unit``, an API step's items),
    with the bytes so far and the time left; or of bytes when the step knows its total size (``size``)."""

    def __init__(self, desc: str, files: int, size: int | None = None, enabled: bool = True, unit: str = "file"):
        self.files, self.done, self.size = files, 0, size
        self.bar = tqdm(desc=desc, total=size or files, unit="B" if size else unit, unit_scale=bool(size),
                        unit_divisor=1024, disable=not enabled, dynamic_ncols=True)
        self.bytes = 0

    def add_bytes(self, count: int) -> None:
        self.bytes += count
        if self.size:
            self.bar.update(count)
        else:
            self.bar.set_postfix_str(_size(self.bytes), refresh=False)

    def file_done(self, reused: bool = False, size: int = 0) -> None:
        self.done += 1
        if self.size:
            if reused:
                self.bar.update(size)
            self.bar.set_postfix_str(f"{self.done}/{self.files} files", refresh=False)
        else:
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""


@dataclass(frozen=True)
class Expected:
    """What a file's bytes must be: its sha256 (a pin), its sha1 (a service's checksum), its size; None: unknown."""

    sha256: str | None = None
    sha1: str | None = None
    size: int | None = None

    def problem(self, path: Path) -> str | None:
        """None when the file at ``path`` is what is expected, else what differs."""
        if self.size is not None and path.stat().st_size != self.size:
            return f"{path.stat().st_size} bytes, not {self.size}"
        if self.sha256 is not None and (found := file_digest(path)) != self.sha256:
            return f"sha256 {found}, not the pinned {self.sha256}"
        if self.sha1 is not None and (found := sha1_of(path)) != self.sha1:
            return f"sha1 {found}, not the {self.sha1} the service states"
        return None


class Downloads:
    """Files downloaded into ``root`` (created on first use), each at a path the caller names (relative to
    ``root``); what is there and verifies is reused."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, relative: str) -> Path:
        target = (self.root / relative).resolve()
        if not target.is_relative_to(self.root.resolve()):
            raise DownloadError(f"{relative!r}: a download would land outside {self.root}")
        return target

    def has(self, relative: str, expected: Expected = Expected()) -> bool:
        """Whether the file is here whole and as expected (a bad copy is removed, to be downloaded again)."""
        target = self.path(relative)
        if not target.is_file():
            return False
        if expected.problem(target) is None:
            return True
        target.unlink()
        return False

    def file(self, url: str, relative: str, *, what: str, expected: Expected = Expected(),
             step: Step | None = None, progress: bool = False, timeout: float = 120,
             credential: Credential | None = None) -> Path:
        """The file at ``relative``: reused when here and as expected, else downloaded from ``url`` (resuming a
        part left by an earlier, interrupted call) and verified. ChangedBytes names ``what`` when the bytes
        downloaded are not the ones expected; nothing of them is kept. ``step``: the step's bar to count it on;
        else, with ``progress``, a bar of its own (bytes and time left, once the size is known). ``credential``:
        what the service at ``url`` is sent (not where it redirects)."""
        target = self.path(relative)
        if self.has(relative, expected):
            if step is not None:
                step.file_done(reused=True, size=target.stat().st_size)
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        offset = part.stat().st_size if part.is_file() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        # 416: the range starts at the end, so the part is already whole (verified below).
        response = _open(_request(url, headers, credential), what, timeout, allow=(416,) if offset else (),
                         credential=credential)
        own = None
        if response is not None:
            with response:
                mode = "ab" if offset and response.status == 206 else "wb"
                length = response.headers.get("Content-Length")
                expected_total = (int(length) + (offset if mode == "ab" else 0)) if length else None
                if step is None and progress:
                    own = step = Step(what, 1, size=expected_total)
                    if mode == "ab":
                        step.add_bytes(offset)
                try:
                    # Unbuffered, and each chunk as it arrives: what came before a kill is on disk, to resume from.
                    with open(part, mode, buffering=0) as out:
                        for chunk in iter(lambda: response.read1(CHUNK), b""):
                            out.write(chunk)
                            if step is not None:
                                step.add_bytes(len(chunk))
                finally:
                    if own is not None:
                        own.close()
            if expected_total is not None and part.stat().st_size != expected_total:
                raise DownloadError(f"{what}: {url[:120]} ended after {part.stat().st_size} of {expected_total} "
                                    "bytes; run the build again to download the rest")
        problem = expected.problem(part)
        if problem is not None:
            part.unlink()
            error = ChangedBytes(f"{what}: the bytes served at {url[:160]} have {problem}")
            error.problem = problem
            raise error
        os.replace(part, target)
        if step is not None and step is not own:
            step.file_done()
        return target

    def save_json(self, relative: str, data: object) -> None:
        """A small record (a step's pins) kept beside the downloads, written whole or not at all."""
        from benchmark.atomic import atomic_write_text

        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(data, indent=1, ensure_ascii=False) + "\n")

    def load_json(self, relative: str) -> object | None:
        target = self.path(relative)
        if not target.is_file():
            return None
        try:
            return json.loads(target.read_text(encoding="utf-8"))
        except ValueError:
            return None


def unreachable(timeout: float = 3.0) -> list[str]:
    """The hosts of the public sources (``settings.PUBLIC_SOURCES``) that do not answer within ``timeout`` seconds,
    asked all at once; any HTTP answer counts as an answer. The Hub counts as unreachable in offline mode."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmark import settings

    def answers(url: str) -> bool:
        try:
            with urllib.request.urlopen(_request(url), timeout=timeout):  # noqa: S310 (the settings' addresses)
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, TimeoutError, OSError, ValueError):
            return False

    urls = {s.name: s.resolve() for s in settings.PUBLIC_SOURCES}
    with ThreadPoolExecutor(len(urls)) as pool:
        answered = dict(zip(urls, pool.map(answers, urls.values())))
    if settings.HUB_OFFLINE.resolve():
        answered[settings.HUB_ENDPOINT.name] = False
    hosts = [urllib.parse.urlparse(urls[name]).netloc or urls[name] for name, ok in answered.items() if not ok]
    return list(dict.fromkeys(hosts))

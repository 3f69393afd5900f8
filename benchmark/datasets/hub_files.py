"""A Hugging Face Hub dataset's files at one commit, through the Hub's API (``HF_ENDPOINT``): which commit a
revision names and the files there (``/api/datasets/<repo>/revision/<revision>?blobs=true``: path, size, git blob
id, and for large files the sha256 the Hub's LFS storage states), then each file (``/datasets/<repo>/resolve/
<commit>/<path>``) downloaded once, resumably, and verified (``benchmark.downloads``). The commit and every file's
sha256 are the pins: a build at the same pins reads the same bytes, or stops naming the file that changed. The Hub
is sent the token huggingface_hub finds (``HF_TOKEN``, the saved login), so a gated dataset whose conditions the
account accepted can be read; it goes to the Hub's address only, never to where a file is redirected, and is never
written anywhere."""

from __future__ import annotations

import fnmatch
import hashlib
import urllib.parse
from pathlib import Path

from benchmark import settings
from benchmark.digests import file_digest
from benchmark.downloads import Credential, DownloadError, Downloads, Expected, Step, get_json


def git_blob_id(data: bytes) -> str:
    """The id git gives a file's bytes (``git hash-object``): sha1 of "blob <size>\\0" + bytes."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()  # noqa: S324 - git's own id


def credential() -> Credential:
    """What the Hub is sent: the token huggingface_hub finds (``HF_TOKEN``, else the saved login; none where
    ``HF_HUB_DISABLE_IMPLICIT_TOKEN`` says so), as it sends it itself, for a gated or private dataset; and what a
    refusal then says to do."""
    from huggingface_hub.utils import build_hf_headers

    return Credential(build_hf_headers().get("authorization"),
                      "a gated or private dataset: accept its conditions on its Hub page with your account, then set "
                      "HF_TOKEN to a token of that account (or log in with `hf auth login`) and build again")


def _endpoint() -> str:
    if settings.HUB_OFFLINE.resolve():
        raise DownloadError("the Hugging Face Hub is not reachable from here (HF_HUB_OFFLINE is set); where there is "
                            "network, build again, or give a local copy of the dataset")
    return settings.HUB_ENDPOINT.resolve().rstrip("/")


def files_at(repo: str, revision: str, patterns: list[str]) -> tuple[str, dict[str, dict]]:
    """(the commit ``revision`` names, {path: {"size", "sha256" or None, "blob"}} of its files matching one of
    ``patterns``)."""
    url = f"{_endpoint()}/api/datasets/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
    answer = get_json(url, {"blobs": "true"}, what=f"the Hugging Face Hub (dataset {repo})", credential=credential())
    try:
        commit, siblings = answer["sha"], answer["siblings"]
    except (KeyError, TypeError):
        raise DownloadError(f"the Hugging Face Hub answered no commit for {repo}@{revision}") from None
    files = {s["rfilename"]: {"size": s.get("size"), "sha256": (s.get("lfs") or {}).get("sha256"),
                              "blob": s.get("blobId")}
             for s in siblings if any(fnmatch.fnmatch(s["rfilename"], p) for p in patterns)}
    for path in files:  # a repo's file names become local paths: no absolute path, no way up
        if path.startswith("/") or ".." in path.split("/") or "\\" in path:
            raise DownloadError(f"{repo}@{commit[:7]} lists a file named {path!r}: refused as a local path")
    return commit, files


def download(repo: str, commit: str, files: dict[str, dict], downloads: Downloads, *, what: str,
             progress: bool = True) -> tuple[Path, dict[str, dict]]:
    """The folder holding ``files`` (``files_at``'s, or pins with a sha256 each) of ``repo`` at ``commit``, each
    verified; returns it with the files' pins (size and sha256 of each)."""
    folder = f"hub/{repo.replace('/', '__')}/{commit}"
    total = sum(f.get("size") or 0 for f in files.values()) or None
    step = Step(f"{what}: {repo}@{commit[:7]}", len(files), size=total, enabled=progress)
    pins, sent = {}, credential()
    try:
        for path in sorted(files):
            expected = Expected(sha256=files[path].get("sha256"), size=files[path].get("size"))
            relative = f"{folder}/{path}"
            if downloads.has(relative, expected):  # offline too: the Hub is asked only for what is missing
                local = downloads.path(relative)
                step.file_done(reused=True, size=local.stat().st_size)
            else:
                url = f"{_endpoint()}/datasets/{repo}/resolve/{commit}/{urllib.parse.quote(path)}"
                local = downloads.file(url, relative, what=f"{repo}@{commit[:7]} file {path!r}", expected=expected,
                                       step=step, credential=sent)
            if files[path].get("blob") and not files[path].get("sha256") and \
                    git_blob_id(local.read_bytes()) != files[path]["blob"]:
                local.unlink()
                raise DownloadError(f"{repo}@{commit[:7]} file {path!r}: its bytes are not the git blob "
                                    f"{files[path]['blob']} the Hub states")
            pins[path] = {"size": local.stat().st_size, "sha256": file_digest(local)}
    finally:
        step.close()
    return downloads.path(folder), pins

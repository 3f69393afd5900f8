"""Submit from the Hub: a submitter names a Hub dataset repo holding a submission, and it is fetched to validate.

The repo holds a submission in either form: ``manifest.json`` and ``images/``, or ``manifest.json`` and
``data/*.parquet`` (the Parquet form, ``benchmark.submission.shards``); a suite submission holds either form for
each part under ``parts/<part>/`` (``benchmark.layout``). Through the repo interface
(``leaderboard.repo``): the name must be a Hub dataset repo id (a submitter never names a server folder), the
repo's listing is checked against the leaderboard's upload limits before anything is downloaded, and only those
files, at the commit listed, are downloaded, into ``staging/``, where the upload validator takes them as it
takes an upload.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmark import layout
from benchmark.datasets.hub_layout import PushError
from benchmark.submission import Limits
from benchmark.submission.space import Hold
from leaderboard.repo import Repo, RepoError, hub_repo

PATTERNS = [layout.MANIFEST, f"{layout.IMAGES_DIR}/*", f"{layout.DATA_DIR}/*.parquet",
            f"{layout.PARTS_DIR}/*/{layout.MANIFEST}", f"{layout.PARTS_DIR}/*/{layout.IMAGES_DIR}/**",
            f"{layout.PARTS_DIR}/*/{layout.DATA_DIR}/*.parquet"]


def fetch(name: str | Repo, staging: Path, limits: Limits, hold: Hold | None = None) -> Path:
    """Download the submission the Hub dataset repo ``name`` holds into a new folder under ``staging`` and return
    it (the caller validates and removes it); what else the repo holds is not downloaded. RepoError with the
    reason when the name is not a Hub dataset repo id, the Hub cannot give the repo (offline, missing, gated), or
    the repo is over ``limits`` (files, total bytes): then nothing is left in ``staging``. ``hold``: the server's
    hold for this upload (``space``), grown by the listed bytes before any is downloaded (SpaceFull when the
    uploads in flight cannot make room)."""
    repo = hub_repo(name)
    try:
        revision = repo.revision()  # listed and downloaded at one commit: a push meanwhile cannot pass the limits
        files = repo.files(PATTERNS, revision)
    except PushError as error:
        raise RepoError(f"cannot fetch Hub dataset {repo.name}: {error}") from None
    size = sum(files.values())
    if len(files) > limits.max_files or size > limits.max_total_bytes:
        raise RepoError(f"Hub dataset {repo.name} holds {len(files)} files, {size} bytes: over this leaderboard's "
                        f"limits ({limits.max_files} files, {limits.max_total_bytes} bytes)")
    if hold is not None:
        hold.grow(size)
    staging.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix="hub-", dir=staging))
    try:
        repo.download(PATTERNS, target, revision)
    except PushError as error:
        shutil.rmtree(target, ignore_errors=True)
        raise RepoError(f"cannot fetch Hub dataset {repo.name}: {error}") from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target

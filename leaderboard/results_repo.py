"""A results repo as the app reads and writes it: a Hub dataset repo, or a local folder laid out like one.

Both kinds answer the same calls, so the pickup and the releases (``leaderboard.pickup``) run one code
path, and tests run offline on a folder: ``revision`` (the Hub's commit sha, so an unchanged repo costs one
call; None for a folder, listed every time), ``ids`` (the folder names under ``results/``, unchecked: the
caller checks them), ``read`` (one small file's bytes, or None: one lookup, not a listing), ``download`` (repo
paths into a local folder laid out like the repo; a path the repo does not hold is left out) and ``commit``
(files added in one commit; a folder refuses to overwrite a release).
Each records what it downloaded in ``downloaded``, so a start can say (and a test count) what it read.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

from benchmark import layout
from benchmark.atomic import atomic_write, atomic_write_bytes
from benchmark.datasets.hub_layout import hub_errors
from benchmark.errors import CultureLensError
from benchmark.submission.manifest import is_repo_id


class RepoError(CultureLensError, ValueError):
    """A results repo names something we cannot take (not a repo id nor a folder, a file that is not one)."""


class ResultsRepo:
    """What the app needs of a results repo; ``open_repo`` gives the right kind."""

    name: str

    def __init__(self) -> None:
        self.downloaded: list[str] = []

    def revision(self) -> str | None:
        raise NotImplementedError

    def ids(self, revision: str | None = None) -> list[str]:
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """The bytes of the small file ``path`` (a run.json), or None when the repo does not hold it."""
        raise NotImplementedError

    def download(self, paths: list[str], into: Path, revision: str | None = None) -> None:
        raise NotImplementedError

    def commit(self, files: dict[str, bytes | Path], message: str, parent: str | None = None) -> None:
        raise NotImplementedError


class LocalRepo(ResultsRepo):
    """A folder laid out like the repo (``culturelens hub export``'s, or a test's)."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = Path(folder)
        self.name = str(folder)

    def revision(self) -> str | None:
        return None

    def ids(self, revision: str | None = None) -> list[str]:
        root = self.folder / layout.RESULTS
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def read(self, path: str) -> bytes | None:
        target = self.folder / path
        if not target.is_file() or target.is_symlink() or not target.resolve().is_relative_to(self.folder.resolve()):
            return None
        try:
            return target.read_bytes()
        except FileNotFoundError:  # replaced meanwhile
            return None

    def download(self, paths: list[str], into: Path, revision: str | None = None) -> None:
        """Copy these files (regular files inside the folder only: a link is left out, as the Hub has none)."""
        base = self.folder.resolve()
        for path in paths:
            source = self.folder / path
            if not source.resolve().is_relative_to(base) or not source.exists() or \
                    not stat.S_ISREG(source.lstat().st_mode):
                continue
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, into / path)
            self.downloaded.append(path)

    def commit(self, files: dict[str, bytes | Path], message: str, parent: str | None = None) -> None:
        """Write each file atomically, in the order given (a release file before the latest.json naming it; a
        results folder's run.json last). A results folder is replaced by a re-run's; a release never is."""
        for path, content in files.items():
            target = self.folder / path
            if path.endswith(".parquet") and not path.startswith(f"{layout.RESULTS}/") and target.exists():
                raise RepoError(f"{target} exists: a release is never overwritten (another writer made it?)")
            if isinstance(content, bytes):
                atomic_write_bytes(target, content)
            else:
                atomic_write(target, lambda tmp, source=content: shutil.copyfile(source, tmp))


class HubRepo(ResultsRepo):
    """A Hub dataset repo (``huggingface_hub``: PushError with what to do when the Hub refuses or is away)."""

    def __init__(self, repo: str, token: str | None = None):
        super().__init__()
        self.name, self.token = repo, token

    def _api(self):
        from huggingface_hub import HfApi

        return HfApi(token=self.token)

    def revision(self) -> str | None:
        with hub_errors(self.name, "read the leaderboard's results from"):
            return self._api().repo_info(self.name, repo_type="dataset").sha

    def ids(self, revision: str | None = None) -> list[str]:
        from huggingface_hub import RepoFolder
        from huggingface_hub.errors import EntryNotFoundError, RemoteEntryNotFoundError

        with hub_errors(self.name, "list the leaderboard's results in"):
            try:
                entries = list(self._api().list_repo_tree(self.name, path_in_repo=layout.RESULTS,
                                                          repo_type="dataset", revision=revision))
            except (EntryNotFoundError, RemoteEntryNotFoundError):  # no results/ yet
                return []
        return sorted(e.path.split("/", 1)[1] for e in entries if isinstance(e, RepoFolder))

    def read(self, path: str) -> bytes | None:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import RemoteEntryNotFoundError

        with hub_errors(self.name, "read the leaderboard's results from"), \
                tempfile.TemporaryDirectory(prefix="results-repo-") as tmp:
            try:
                return Path(hf_hub_download(self.name, path, repo_type="dataset", local_dir=tmp,
                                            token=self.token)).read_bytes()
            except RemoteEntryNotFoundError:  # the repo answered: no such file (the Hub away is an error)
                return None

    def download(self, paths: list[str], into: Path, revision: str | None = None) -> None:
        from huggingface_hub import snapshot_download

        if not paths:
            return
        with hub_errors(self.name, "download the leaderboard's results from"):
            snapshot_download(self.name, repo_type="dataset", revision=revision, allow_patterns=list(paths),
                              local_dir=into, token=self.token)
        self.downloaded += [path for path in paths if (into / path).is_file()]

    def commit(self, files: dict[str, bytes | Path], message: str, parent: str | None = None) -> None:
        """One commit; with ``parent``, refused if the repo moved since (another writer): tried again later."""
        from huggingface_hub import CommitOperationAdd

        operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=content if isinstance(content, bytes)
                                         else str(content)) for path, content in files.items()]
        with hub_errors(self.name, "publish a leaderboard release to"):
            api = self._api()
            api.create_repo(self.name, repo_type="dataset", exist_ok=True)
            api.create_commit(self.name, operations, commit_message=message, repo_type="dataset",
                              parent_commit=parent)


def open_repo(source: str | Path, token: str | None = None) -> ResultsRepo:
    """A folder that exists is a ``LocalRepo``; a Hub dataset repo id (ORG/NAME) a ``HubRepo``; else RepoError."""
    if Path(source).is_dir():
        return LocalRepo(Path(source))
    if not is_repo_id(str(source)):
        raise RepoError(f"{source!r} is neither a folder nor a Hub dataset repo id (ORG/NAME)")
    return HubRepo(str(source), token)

"""A dataset repo as the service reads and writes it: a Hub dataset repo, or a local folder laid out like one.

The one "folder or Hub repo" of the service: the requests repo (queue records and submissions), the results
repo (results folders and releases) and a submitter's Hub dataset all go through it, so the mirror
(``leaderboard.hub_sync``), the pickup and releases (``leaderboard.pickup``), a worker on another machine
(``leaderboard.remote``) and Submit from the Hub (``leaderboard.hub_submission``) run one code path, and tests run
offline on a folder. Both kinds answer the same calls:

- ``revision``: the Hub's commit sha (an unchanged repo costs one call); None for a folder, read every time;
- ``folders(path)``: the names of the folders directly under ``path`` (e.g. ``results/``: submission ids,
  unchecked: the caller checks them);
- ``files(patterns)``: path -> size of the files matching ``patterns`` (one listing; nothing downloaded);
- ``read(path)``: one small file's bytes, or None when the repo answers that it has no such file;
- ``download(patterns, into)``: the matching files into a local folder laid out like the repo;
- ``commit(files, message, delete=...)``: files added and deleted in one commit (a folder writes each file
  atomically); either kind refuses, before anything is written, a commit that would overwrite a release.

Patterns are the Hub's (``huggingface_hub``'s ``fnmatch`` rule: ``*`` also matches '/'); a folder uses the Hub
client's own matching function, so both kinds select the same files. Each repo records what it downloaded and
read in ``downloaded``, so a start can say (and a test count) what it read.

Opening one: ``open_repo`` (a folder that exists, or a Hub dataset repo id), ``hub_repo`` (a Hub dataset repo id
only: what ``serve`` mirrors to and what a submitter names), ``push_repo`` (what ``hub push`` writes: a Hub
dataset repo id or a folder) and ``folder_repo`` (a folder to write, created if missing). A name none of them can take is a ``RepoError``, as is a repo that holds something the store cannot
take: one error type, whose message has one shape, ``'<name>' is not <what the verb takes>``.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

from benchmark.atomic import atomic_write, atomic_write_bytes
from benchmark.datasets.hub_layout import hub_errors
from benchmark.errors import CultureLensError
from benchmark.submission.manifest import is_repo_id

HUB_ID = "a Hub dataset repo id (ORG/NAME)"
RELEASES = "leaderboard/"  # where a results repo keeps its releases (``leaderboard.snapshot``): never overwritten


class RepoError(CultureLensError, ValueError):
    """A repo we cannot take: a name that is no repo where one is expected (``'<name>' is not ...``), or files
    that are not what the repo should hold (the message names the file and the reason)."""


QUOTED_NAME_CHARS = 200  # of a bad name, that the message quotes: a visitor may type megabytes into the Submit tab


def _not_a_repo(name: str | Path, takes: str) -> RepoError:
    """The one message for a bad repo name, whichever verb was given it: ``'<name>' is <not what it takes>``, the
    name quoted up to ``QUOTED_NAME_CHARS`` characters."""
    name = str(name)
    quoted = repr(name) if len(name) <= QUOTED_NAME_CHARS else f"{name[:QUOTED_NAME_CHARS]!r}…"
    return RepoError(f"{quoted} is {takes}")


class Repo:
    """What the service needs of a dataset repo; ``open_repo``, ``hub_repo`` and ``folder_repo`` give one."""

    name: str

    def __init__(self) -> None:
        self.downloaded: list[str] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def revision(self) -> str | None:
        raise NotImplementedError

    def folders(self, path: str, revision: str | None = None) -> list[str]:
        """The names of the folders directly under ``path`` (none when the repo has no such folder)."""
        raise NotImplementedError

    def files(self, patterns: list[str], revision: str | None = None) -> dict[str, int]:
        """Repo path -> size in bytes, for every file matching ``patterns``."""
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """The bytes of the small file ``path`` (a run.json), or None when the repo does not hold it."""
        raise NotImplementedError

    def download(self, patterns: list[str], into: Path, revision: str | None = None) -> None:
        """Download the files matching ``patterns`` into ``into``, at their repo paths; a pattern the repo has no
        file for brings nothing."""
        raise NotImplementedError

    def commit(self, files: dict[str, bytes | Path], message: str, *, delete: tuple[str, ...] | list[str] = (),
               parent: str | None = None) -> None:
        """Add ``files`` (repo path -> bytes, or a local file to copy) and remove the files ``delete`` names, in
        one commit; with ``parent`` (a revision), refused if the repo moved since (another writer). RepoError, nothing
        written, when one of ``files`` is a release the repo holds (``refuse_overwriting_a_release``)."""
        raise NotImplementedError

    def refuse_overwriting_a_release(self, files: dict[str, bytes | Path], parent: str | None = None) -> None:
        """RepoError when the repo (at ``parent``, else now) holds a release file (``RELEASES``) that ``files`` would
        write: a release is never overwritten, whoever writes (a figure may cite it; a writer who rolled latest.json
        back would otherwise have the next release written over a newer one)."""
        releases = [path for path in files if path.startswith(RELEASES) and path.endswith(".parquet")]
        if releases and (held := self.files(releases, parent)):
            raise RepoError(f"{self.name}: {', '.join(sorted(held))} exists: a release is never overwritten (another "
                            "writer made it, or latest.json was rolled back)")


def _matching(paths, patterns: list[str]) -> list[str]:
    """The paths ``patterns`` select, by the Hub client's own rule (``snapshot_download``'s ``allow_patterns``)."""
    from huggingface_hub.utils import filter_repo_objects

    return list(filter_repo_objects(paths, allow_patterns=patterns))


class LocalRepo(Repo):
    """A folder laid out like the repo (``culturelens hub export``'s, a backup, or a test's). Only regular files
    inside it count: a link is left out, as the Hub has none."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = Path(folder)
        self.name = str(folder)

    def revision(self) -> str | None:
        return None

    def folders(self, path: str, revision: str | None = None) -> list[str]:
        root = self.folder / path
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def _file(self, path: str) -> Path | None:
        """``folder/path`` when it is a regular file inside the folder (not a link, not outside), else None."""
        target = self.folder / path
        try:
            regular = stat.S_ISREG(target.lstat().st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return target if regular and target.resolve().is_relative_to(self.folder.resolve()) else None

    def _listing(self, patterns: list[str]) -> list[str]:
        """The repo paths of the folder's regular files that ``patterns`` select, sorted. A pattern without a
        wildcard is looked up directly, so naming a few files does not walk the whole folder."""
        found: dict[str, None] = {}
        for pattern in patterns:
            if not any(c in pattern for c in "*?["):
                if self._file(pattern) is not None:
                    found[pattern] = None
                continue
            base = self.folder / pattern.split("*")[0].split("?")[0].split("[")[0].rpartition("/")[0]
            if not base.is_dir() or base.is_symlink():
                continue
            paths = [p.relative_to(self.folder).as_posix() for p in base.rglob("*")]
            found |= dict.fromkeys(p for p in _matching(paths, [pattern]) if self._file(p) is not None)
        return list(found)

    def files(self, patterns: list[str], revision: str | None = None) -> dict[str, int]:
        return {path: (self.folder / path).stat().st_size for path in self._listing(patterns)}

    def read(self, path: str) -> bytes | None:
        target = self._file(path)
        try:
            data = target.read_bytes() if target is not None else None
        except FileNotFoundError:  # replaced meanwhile
            return None
        if data is not None:
            self.downloaded.append(path)
        return data

    def download(self, patterns: list[str], into: Path, revision: str | None = None) -> None:
        """Copy the matching files, in the order the patterns name them (a run.json before the rest)."""
        for path in self._listing(patterns):
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(self.folder / path, into / path)
            except FileNotFoundError:  # removed meanwhile: as if it had not been there
                continue
            self.downloaded.append(path)

    def commit(self, files: dict[str, bytes | Path], message: str, *, delete: tuple[str, ...] | list[str] = (),
               parent: str | None = None) -> None:
        """Write each file atomically, in the order given (a release file before the latest.json naming it; a
        results folder's run.json last), then remove the deleted ones (and folders they leave empty, as the Hub
        keeps none). A results folder is replaced by a re-run's; a release never is."""
        self.refuse_overwriting_a_release(files)
        for path, content in files.items():
            target = self.folder / path
            if isinstance(content, bytes):
                atomic_write_bytes(target, content)
            else:
                atomic_write(target, lambda tmp, source=content: shutil.copyfile(source, tmp))
        for path in delete:
            if (target := self._file(path)) is None:
                continue
            target.unlink(missing_ok=True)
            for folder in target.parents:
                if folder == self.folder or not folder.is_relative_to(self.folder) or any(folder.iterdir()):
                    break
                folder.rmdir()


class HubRepo(Repo):
    """A Hub dataset repo (``huggingface_hub``; PushError with what to do when the Hub refuses or is away).
    ``private``: whether the repo is made private when a commit creates it (the requests repo is)."""

    def __init__(self, repo: str, token: str | None = None, *, private: bool = False):
        super().__init__()
        self.name, self.token, self.private = repo, token, private

    def _api(self):
        from huggingface_hub import HfApi

        return HfApi(token=self.token)

    def revision(self) -> str | None:
        with hub_errors(self.name, "read"):
            return self._api().repo_info(self.name, repo_type="dataset").sha

    def folders(self, path: str, revision: str | None = None) -> list[str]:
        from huggingface_hub import RepoFolder
        from huggingface_hub.errors import EntryNotFoundError, RemoteEntryNotFoundError

        with hub_errors(self.name, "list the folders of"):
            try:
                entries = list(self._api().list_repo_tree(self.name, path_in_repo=path, repo_type="dataset",
                                                          revision=revision))
            except (EntryNotFoundError, RemoteEntryNotFoundError):  # no such folder yet
                return []
        return sorted(e.path.rpartition("/")[2] for e in entries if isinstance(e, RepoFolder))

    def files(self, patterns: list[str], revision: str | None = None) -> dict[str, int]:
        with hub_errors(self.name, "list the files of"):
            siblings = self._api().dataset_info(self.name, revision=revision, files_metadata=True).siblings or []
        sizes = {f.rfilename: f.size or 0 for f in siblings}
        return {path: sizes[path] for path in _matching(list(sizes), patterns)}

    def read(self, path: str) -> bytes | None:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import RemoteEntryNotFoundError

        with hub_errors(self.name, "read"), tempfile.TemporaryDirectory(prefix="repo-read-") as tmp:
            try:
                data = Path(hf_hub_download(self.name, path, repo_type="dataset", local_dir=tmp,
                                            token=self.token)).read_bytes()
            except RemoteEntryNotFoundError:  # the repo answered: no such file (the Hub away is an error)
                return None
        self.downloaded.append(path)
        return data

    def download(self, patterns: list[str], into: Path, revision: str | None = None) -> None:
        from huggingface_hub import snapshot_download

        if not patterns:
            return
        with hub_errors(self.name, "download from"):
            snapshot_download(self.name, repo_type="dataset", revision=revision, allow_patterns=list(patterns),
                              local_dir=into, token=self.token)
        shutil.rmtree(Path(into) / ".cache", ignore_errors=True)  # the Hub client's bookkeeping, not the repo's
        there = [p.relative_to(into).as_posix() for p in Path(into).rglob("*") if p.is_file()]
        self.downloaded += [path for pattern in patterns for path in _matching(there, [pattern])
                            if path not in self.downloaded]

    def commit(self, files: dict[str, bytes | Path], message: str, *, delete: tuple[str, ...] | list[str] = (),
               parent: str | None = None) -> None:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=content if isinstance(content, bytes)
                                         else str(content)) for path, content in files.items()]
        operations += [CommitOperationDelete(path_in_repo=path, is_folder=False) for path in delete]
        self.refuse_overwriting_a_release(files, parent or "main")  # at the revision the commit must follow
        with hub_errors(self.name, "commit to"):
            api = self._api()
            api.create_repo(self.name, repo_type="dataset", private=self.private, exist_ok=True)
            api.create_commit(self.name, operations, commit_message=message, repo_type="dataset",
                              parent_commit=parent)


def open_repo(name: str | Path | Repo, token: str | None = None) -> Repo:
    """A folder that exists is a ``LocalRepo``, a Hub dataset repo id (ORG/NAME) a ``HubRepo`` (``token``: a Hub
    token, default HF_TOKEN or the login); a ``Repo`` is itself. RepoError for anything else."""
    if isinstance(name, Repo):
        return name
    if Path(name).is_dir():
        return LocalRepo(Path(name))
    if not is_repo_id(str(name)):
        raise _not_a_repo(name, f"neither a folder nor {HUB_ID}")
    return HubRepo(str(name), token)


def hub_repo(name: str | Repo, token: str | None = None, *, private: bool = False) -> Repo:
    """A Hub dataset repo (what the mirror pushes to, and what a submitter names): RepoError for any other name,
    a folder included (a folder is written with ``folder_repo``). A ``Repo`` is itself."""
    if isinstance(name, Repo):
        return name
    if not is_repo_id(str(name)):
        raise _not_a_repo(name, f"not {HUB_ID}")
    return HubRepo(str(name), token, private=private)


def push_repo(name: str | Path | Repo, token: str | None = None, *, private: bool = False) -> Repo:
    """What ``culturelens hub push`` writes to (``REPO_OR_DIR``): a folder laid out like the repo, one that exists or
    a path that cannot be a Hub repo id (``./backup/requests``, ``/srv/results``: created), else a Hub dataset repo
    id (made ``private`` when a commit creates it). A ``Repo`` is itself; RepoError for anything else (a file)."""
    if isinstance(name, Repo):
        return name
    if Path(name).is_dir() or not is_repo_id(str(name)):
        if Path(name).exists() and not Path(name).is_dir():
            raise _not_a_repo(name, f"neither a folder nor {HUB_ID}")
        return folder_repo(name)
    return HubRepo(str(name), token, private=private)


def folder_repo(name: str | Path) -> LocalRepo:
    """A folder to write a repo into (``culturelens hub export``), created if missing; RepoError when the path
    is something else (a file)."""
    folder = Path(name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _not_a_repo(name, "not a folder") from None
    return LocalRepo(folder)

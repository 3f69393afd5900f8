"""A hosted leaderboard's memory on the Hub: the store's requests and results mirrored to two dataset repos.

The app and the workers always use the local store (``leaderboard.store``): one set of code paths. A
deployment whose disk does not survive a restart (a Hugging Face Space without persistent storage) adds two
dataset repos, as the Hugging Face leaderboard template does::

    requests repo (private)                        results repo (public)
      requests/<id>.json    the queue record         README.md                  card; configs aggregates,
      submissions/<id>/...  manifest, images           results/<id>/*.parquet   per_image, curves
                                                       results/<id>/run.json    (``load_dataset(repo, ...)``)

``push`` commits what changed since the last push, in commits of at most 1,000 files (``CommitOperationAdd``
and ``CommitOperationDelete``; what was pushed is remembered in ``STORE/hub_sync.json``), and never deletes a
file it did not push itself. ``pull`` downloads a repo snapshot (or reads a local copy of one, e.g. from
``export``) and ``restore`` adds to the store whatever it lacks, validating every file as it would an upload:
ids are checked, JSON and Parquet are parsed (never unpickled), and results appear by one rename.
``culturelens serve --hub-requests ORG/A --hub-results ORG/B`` pulls both at start and pushes every minute.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pyarrow.parquet as pq

from benchmark.datasets.hub_layout import PushError, hub_errors
from leaderboard.queue import Job
from leaderboard.store import Store

log = logging.getLogger("culturelens.hub_sync")

KINDS = ("requests", "results")
RESULT_FILES = ("per_image.parquet", "aggregates.parquet", "curves.parquet", "run.json")
SUBMISSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED")
MAX_OPERATIONS = 1000  # per commit: the Hub advises against much larger commits
RESULTS_CARD = """---
license: cc-by-nc-sa-4.0
pretty_name: CultureLens leaderboard results
task_categories: [text-to-image]
configs:
- config_name: aggregates
  data_files: results/*/aggregates.parquet
- config_name: per_image
  data_files: results/*/per_image.parquet
- config_name: curves
  data_files: results/*/curves.parquet
---

# CultureLens leaderboard results

Every submission the leaderboard scored, one folder per submission (`results/<submission id>/`), written once
and never modified: `aggregates.parquet` (per model, country, continent, concept/domain and prompt, with 95%
bootstrap CIs), `per_image.parquet` (every image's score and reason), `curves.parquet` (W1KP reusability
curves) and `run.json` (harness version, backbones and revisions, seeds, date, metrics not scored and why).

```python
from datasets import load_dataset
aggregates = load_dataset("{repo}", "aggregates", split="train")
```

The scores answer prompts of the benchmark's datasets (e.g. CUBE-1K, CC BY-NC-SA 4.0), so this dataset
carries the same licence. Mirrored by `culturelens hub push` (leaderboard/hub_sync.py).
"""


class SyncError(ValueError):
    """A repo snapshot holds something the store cannot take; the message names the file and the reason."""


# --- what a repo holds ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreFile:
    """A file of the store to mirror, with what decides whether it changed since it was pushed."""

    path: Path
    signature: str

    @classmethod
    def of(cls, path: Path) -> StoreFile:
        """Size and modification time: store files are written once (a re-run writes a new results folder)."""
        stat = path.stat()
        return cls(path, f"file:{stat.st_size}:{stat.st_mtime_ns}")


def mirror_files(store: Store, kind: str, repo: str = "ORG/NAME") -> dict[str, StoreFile | bytes]:
    """Path in the repo -> a store file or bytes: everything the ``kind`` repo should hold for this store."""
    files: dict[str, StoreFile | bytes] = {}
    if kind == "requests":
        for job in store.queue.jobs():
            record = {k: v for k, v in asdict(job).items() if k not in ("lease_owner", "lease_expires")}
            files[f"requests/{job.id}.json"] = json.dumps(record, indent=1, sort_keys=True).encode()
            folder = store.submissions / job.id
            if (folder / "images.parquet").exists():
                stamp = (folder / "images.parquet").stat().st_mtime_ns
                for name, digest in _submission_files(str(folder), stamp):
                    files[f"submissions/{job.id}/{name}"] = StoreFile(folder / name, digest)
    elif kind == "results":
        files["README.md"] = RESULTS_CARD.replace("{repo}", repo).encode()
        for folder in sorted(store.results.iterdir()):
            if folder.name.startswith(".") or not (folder / "run.json").exists():
                continue  # a temporary folder of a write in progress
            for name in RESULT_FILES:
                files[f"results/{folder.name}/{name}"] = StoreFile.of(folder / name)
    else:
        raise ValueError(f"unknown repo kind {kind!r} (one of {', '.join(KINDS)})")
    return files


@functools.lru_cache(maxsize=4096)
def _submission_files(folder: str, stamp: int) -> tuple[tuple[str, str], ...]:
    """An accepted submission's files and their signatures, from its image table (validation recorded every
    image's sha256): a push lists millions of images without reading or even stat-ing them. Accepted
    submissions never change; ``stamp`` (the table's mtime) keys the cache all the same."""
    folder = Path(folder)
    images = pq.read_table(folder / "images.parquet", columns=["path", "sha256"]).to_pylist()
    own = [(name, StoreFile.of(folder / name).signature) for name in ("manifest.json", "images.parquet")]
    return tuple(own + [(row["path"], "sha256:" + row["sha256"]) for row in images])


def signature(content: StoreFile | bytes) -> str:
    """What decides whether a file changed since it was pushed."""
    if isinstance(content, bytes):
        return "sha256:" + hashlib.sha256(content).hexdigest()
    return content.signature


def plan(files: dict[str, StoreFile | bytes], pushed: dict[str, str]) -> tuple[list, dict[str, str]]:
    """The commit operations that make a repo holding ``pushed`` (path -> signature) hold ``files``, and the
    signatures afterwards. Only files this store pushed are ever deleted."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    now = {path: signature(content) for path, content in files.items()}
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=content if isinstance(content, bytes)
                                     else str(content.path))
                  for path, content in files.items() if pushed.get(path) != now[path]]
    operations += [CommitOperationDelete(path_in_repo=path, is_folder=False) for path in sorted(set(pushed) - set(now))]
    return operations, now


# --- push ------------------------------------------------------------------------------------------------------
def _state_path(store: Store) -> Path:
    return store.root / "hub_sync.json"


def _load_state(store: Store) -> dict[str, dict[str, str]]:
    try:
        return json.loads(_state_path(store).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def _save_state(store: Store, state: dict) -> None:
    path = _state_path(store)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def push(store: Store, kind: str, repo: str, *, token: str | None = None) -> int:
    """Commit to ``repo`` what changed in this store's ``kind`` since the last push; returns files changed.
    PushError (offline, refused, unreachable) with what to do; what was not committed is tried again next time."""
    from huggingface_hub import HfApi

    _check_repo_id(repo)
    state = _load_state(store)
    key = f"{kind}:{repo}"
    pushed = state.get(key, {})
    operations, now = plan(mirror_files(store, kind, repo), pushed)
    if not operations:
        return 0
    api = HfApi(token=token)
    with hub_errors(repo, "push the leaderboard's " + kind + " to"):
        api.create_repo(repo, repo_type="dataset", private=kind == "requests", exist_ok=True)
        for start in range(0, len(operations), MAX_OPERATIONS):
            part = operations[start:start + MAX_OPERATIONS]
            api.create_commit(repo, part, commit_message=f"CultureLens leaderboard: {len(part)} {kind} files",
                              repo_type="dataset")
            for operation in part:  # remember each committed part, so a failure later re-sends only the rest
                if operation.path_in_repo in now:
                    pushed[operation.path_in_repo] = now[operation.path_in_repo]
                else:
                    pushed.pop(operation.path_in_repo, None)
            state[key] = pushed
            _save_state(store, state)
    return len(operations)


# --- pull and restore ------------------------------------------------------------------------------------------
def pull(store: Store, kind: str, source: str, *, token: str | None = None) -> dict[str, int]:
    """Restore from ``source``: a local folder laid out like the repo, or a Hub dataset repo id (downloaded).
    Returns counts of what was added and skipped; SyncError / PushError with the reason."""
    if Path(source).is_dir():
        return restore(store, kind, Path(source))
    from huggingface_hub import snapshot_download

    _check_repo_id(source, "neither a folder nor ")
    target = Path(tempfile.mkdtemp(prefix=f"hub-{kind}-", dir=store.staging))
    try:
        with hub_errors(source, "pull the leaderboard's " + kind + " from"):
            snapshot_download(source, repo_type="dataset", local_dir=target, token=token)
        counts = restore(store, kind, target)
        # What the repo holds and the store now has need not be pushed back.
        have = {str(p.relative_to(target).as_posix()) for p in target.rglob("*") if p.is_file()}
        files = mirror_files(store, kind, source)
        state = _load_state(store)
        state.setdefault(f"{kind}:{source}", {}).update(
            {path: signature(content) for path, content in files.items()
             if path in have and (not isinstance(content, bytes) or (target / path).read_bytes() == content)})
        _save_state(store, state)
        return counts
    finally:
        shutil.rmtree(target, ignore_errors=True)


def _check_repo_id(repo: str, alternatives: str = "") -> None:
    from benchmark.submission.manifest import is_repo_id

    if not is_repo_id(repo):
        raise SyncError(f"{repo!r} is {alternatives or 'not '}a Hub dataset repo id (ORG/NAME)")


def restore(store: Store, kind: str, folder: Path) -> dict[str, int]:
    """Add to the store what ``folder`` (laid out like the ``kind`` repo) holds and the store lacks."""
    if kind == "results":
        return _restore_results(store, folder)
    if kind == "requests":
        return _restore_requests(store, folder)
    raise ValueError(f"unknown repo kind {kind!r} (one of {', '.join(KINDS)})")


def _checked_id(name: str, where: Path) -> str:
    if not SUBMISSION_ID.fullmatch(name):
        raise SyncError(f"{where}: {name!r} is not a submission id (letters, digits, '-' and '_')")
    return name


def _restore_results(store: Store, folder: Path) -> dict[str, int]:
    root = folder / "results"
    sources = [source for source in (sorted(root.iterdir()) if root.is_dir() else [])
               if not (store.results / _checked_id(source.name, source)).exists()]
    for source in sources:  # check everything before adding anything: a damaged snapshot restores nothing
        names = sorted(p.name for p in source.iterdir())
        if names != sorted(RESULT_FILES) or any((source / n).is_symlink() for n in names):
            raise SyncError(f"{source}: a results folder holds exactly {', '.join(RESULT_FILES)}; found "
                            f"{', '.join(names) or 'nothing'}")
        for name in RESULT_FILES[:3]:
            try:
                pq.read_schema(source / name)
            except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
                raise SyncError(f"{source / name}: not a readable Parquet file ({error})") from None
        _read_json(source / "run.json")
    for source in sources:
        _copy_into_place(source, store.results / source.name)
    present = len(list(root.iterdir())) - len(sources) if root.is_dir() else 0
    return {"added": len(sources), "present": present}


def _restore_requests(store: Store, folder: Path) -> dict[str, int]:
    root = folder / "requests"
    names = {f.name for f in fields(Job)}
    jobs = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:  # check everything before adding anything
        record = _read_json(path)
        if (not isinstance(record, dict) or not set(record) <= names or record.get("state") not in STATES
                or not all(v is None or isinstance(v, (str, int, float)) for v in record.values())):
            raise SyncError(f"{path}: not a submission record (fields: {', '.join(sorted(names))}; state one of "
                            f"{', '.join(STATES)})")
        if record.get("id") != path.stem:
            raise SyncError(f"{path}: the record's id {record.get('id')!r} is not its file name")
        _checked_id(path.stem, path)
        job = Job(**{name: record.get(name) for name in names})
        files = folder / "submissions" / job.id
        if files.is_dir():
            _check_submission(files)
        jobs.append((job, files if files.is_dir() else None))
    counts = {"added": 0, "present": 0, "without_files": 0}
    for job, files in jobs:
        if job.state in ("PENDING", "RUNNING") and files is None and not store.has_results(job.id):
            counts["without_files"] += 1  # nothing to score: the repo lost its images
            continue
        if store.queue.get(job.id) is not None or store.queue.find_by_hash(job.content_hash) is not None:
            counts["present"] += 1
            continue
        target = store.submissions / job.id
        if files is not None and not target.exists():  # files first: a worker may claim the record at once
            _copy_into_place(files, target)
        if store.queue.restore(job):
            counts["added"] += 1
        else:  # the same record arrived meanwhile (another process restoring): keep what it has
            counts["present"] += 1
    return counts


def _copy_into_place(source: Path, target: Path) -> None:
    """Copy a checked folder next to ``target`` and rename it into place: it appears whole, as a worker's
    results and a validated upload do, or not at all."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.restore-", dir=target.parent))
    shutil.copytree(source, tmp, dirs_exist_ok=True)
    tmp.rename(target)


def _check_submission(files: Path) -> None:
    """A mirrored submission folder holds exactly its manifest, its image table and the images that table
    lists, each with the sha256 the table records (as validation wrote it); SyncError otherwise."""
    from benchmark.encoders.base import file_digest
    from benchmark.submission import Manifest

    try:
        Manifest.model_validate_json((files / "manifest.json").read_bytes())
        images = pq.read_table(files / "images.parquet", columns=["path", "sha256"]).to_pylist()
    except Exception as error:  # noqa: BLE001 - pydantic, OSError and pyarrow errors alike
        raise SyncError(f"{files}: not a validated submission ({type(error).__name__}: "
                        f"{str(error).splitlines()[0][:200]})") from None
    expected = {row["path"]: row["sha256"] for row in images} | {"manifest.json": None, "images.parquet": None}
    found = {p.relative_to(files).as_posix(): p for p in files.rglob("*") if p.is_file() or p.is_symlink()}
    if set(found) != set(expected) or any(p.is_symlink() for p in found.values()):
        extra, missing = sorted(set(found) - set(expected)), sorted(set(expected) - set(found))
        raise SyncError(f"{files}: files do not match its image table (unexpected: {extra[:3]}, missing: "
                        f"{missing[:3]}; symlinks are refused)")
    for path, digest in expected.items():
        if digest is not None and file_digest(found[path]) != digest:
            raise SyncError(f"{files / path}: its sha256 is not the one its image table records")


def _read_json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as error:
        raise SyncError(f"{path}: not readable JSON ({error})") from None


def export(store: Store, kind: str, out: Path, repo: str = "ORG/NAME") -> int:
    """Write the ``kind`` repo's files into ``out`` (a backup, or a folder to inspect or upload by hand)."""
    files = mirror_files(store, kind, repo)
    Path(out).mkdir(parents=True, exist_ok=True)  # an empty repo is still a repo to pull from
    for path, content in files.items():
        target = Path(out) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            shutil.copyfile(content.path, target)
    return len(files)


class Mirror(threading.Thread):
    """Pushes the store to its repos every ``interval`` seconds (``culturelens serve --hub-...``); a failed
    push is logged and retried next time, the leaderboard keeps working on its local store."""

    def __init__(self, store: Store, repos: dict[str, str], *, interval: float = 60, token: str | None = None):
        super().__init__(daemon=True, name="hub-mirror")
        self.store, self.repos, self.interval, self.token = store, repos, interval, token
        self.stopped = threading.Event()

    def sync(self) -> None:
        for kind, repo in self.repos.items():
            try:
                changed = push(self.store, kind, repo, token=self.token)
            except (PushError, SyncError) as error:
                log.warning("hub mirror: %s", error)
                continue
            except Exception:  # noqa: BLE001 - the mirror must outlive any one failed push; the store is intact
                log.exception("hub mirror: pushing %s to %s failed", kind, repo)
                continue
            if changed:
                log.info("hub mirror: %d %s files pushed to %s", changed, kind, repo)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sync()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self.sync()  # what landed since the last round


def start(store: Store, repos: dict[str, str | None], *, interval: float = 60, token: str | None = None
          ) -> tuple[Mirror | None, list[str]]:
    """Restore the store from the named repos (results first, so a restored request finds its scores), then
    start a ``Mirror`` pushing to them. Returns it (None when no repo is named) and what happened, in words;
    an unreachable repo is reported and the app starts anyway on what the store has."""
    repos = {kind: repos[kind] for kind in ("results", "requests") if repos.get(kind)}
    if not repos:
        return None, []
    for repo in repos.values():
        _check_repo_id(repo)
    lines = []
    for kind, repo in repos.items():
        try:
            counts = pull(store, kind, repo, token=token)
            lines.append(f"restored {kind} from {repo}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
        except (PushError, SyncError) as error:
            lines.append(f"warning: could not restore {kind} from {repo}: {error}")
    mirror = Mirror(store, repos, interval=interval, token=token)
    mirror.start()
    return mirror, lines

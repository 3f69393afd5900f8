"""A hosted leaderboard's memory on the Hub: the store's requests and results mirrored to two dataset repos.

The app and the workers always use the local store (``leaderboard.store``): one set of code paths. A
deployment whose disk does not survive a restart (a Hugging Face Space without persistent storage) adds two
dataset repos, as the Hugging Face leaderboard template does::

    requests repo (private)                        results repo (public)
      requests/<id>.json    the queue record         README.md                  card; configs leaderboard,
      submissions/<id>/...  manifest, images           results/<id>/*.parquet   aggregates, per_image, curves
                                                       results/<id>/run.json    (``load_dataset(repo, ...)``)
                                                       leaderboard/leaderboard-<NNNNN>.parquet  release N
                                                       leaderboard/latest.json  the newest release

A results folder is written once, by the app's worker or a remote one; a release (``leaderboard.snapshot``:
every submission's leaderboard rows in one Parquet file) and the card are written by ``leaderboard.pickup``,
which also keeps an app's store in step with the results repo (its newest release at start, then only the
folders it lacks): results are never restored whole at start.

``push`` commits what changed since the last push, in commits of at most 1,000 files (``CommitOperationAdd``
and ``CommitOperationDelete``; what was pushed is remembered in ``STORE/hub_sync.json``), and never deletes a
file it did not push itself. ``pull`` downloads a repo snapshot (or reads a local copy of one, e.g. from
``export``) and ``restore`` adds to the store whatever it lacks, validating every file as it would an upload:
ids are checked, JSON and Parquet are parsed (never unpickled), a submission goes through the upload validator
(a refused one is left out, the others restored), and everything appears by one rename.
``culturelens serve --hub-requests ORG/A --hub-results ORG/B`` restores the requests at start (the results:
``leaderboard.pickup``), then every minute pushes both and runs its ``rounds`` (the results pickup).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pyarrow.parquet as pq

from benchmark import layout
from benchmark.atomic import atomic_folder, atomic_write_text
from benchmark.datasets.hub_layout import PushError, hub_errors
from benchmark.errors import CultureLensError
from benchmark.layout import RESULT_FILES, SubmissionLayout
from benchmark.submission.archive import parse_name
from benchmark.submission.validate import Report, check_folder
from leaderboard.queue import Job
from benchmark.layout import is_submission_id
from leaderboard.store import Store

log = logging.getLogger("culturelens.hub_sync")

KINDS = ("requests", "results")
STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED")
MAX_OPERATIONS = 1000  # per commit: the Hub advises against much larger commits
RESULTS_CARD = """---
license: cc-by-nc-sa-4.0
pretty_name: CultureLens leaderboard results
task_categories: [text-to-image]
configs:
- config_name: leaderboard
  data_files: {release}
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

Releases: `leaderboard/leaderboard-<NNNNN>.parquet` holds, in one file, every submission's aggregate rows
(column `part` = `aggregates`; per-prompt rows carry the prompt's country, concept...) and model-level curves
(`part` = `curves`), each row with its submission's `run.json` (column `run`). `leaderboard/latest.json` names
the newest release and the submissions it holds; the `leaderboard` config reads the newest ({release}).
Older releases stay, unchanged: cite the release number.

```python
from datasets import load_dataset
leaderboard = load_dataset("{repo}", "leaderboard", split="train")  # the newest release
aggregates = load_dataset("{repo}", "aggregates", split="train")
release_3 = load_dataset("{repo}", data_files="leaderboard/leaderboard-00003.parquet", split="train")
```

The scores answer prompts of the benchmark's datasets (e.g. CUBE-1K, CC BY-NC-SA 4.0), so this dataset
carries the same licence. Mirrored by `culturelens hub push` (leaderboard/hub_sync.py).
"""


class SyncError(CultureLensError, ValueError):
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
            folder = SubmissionLayout(store.submissions / job.id)
            if folder.is_validated:
                stamp = folder.images_table.stat().st_mtime_ns
                for name, digest in _submission_files(str(folder.folder), stamp):
                    files[f"{layout.SUBMISSIONS}/{job.id}/{name}"] = StoreFile(folder.folder / name, digest)
    elif kind == "results":  # the card and the releases are written by ``leaderboard.pickup.publish``
        for folder in sorted(store.results.iterdir()):
            if folder.name.startswith(".") or not (folder / layout.RUN).exists():
                continue  # a temporary folder of a write in progress
            for name in RESULT_FILES:
                files[f"{layout.RESULTS}/{folder.name}/{name}"] = StoreFile.of(folder / name)
    else:
        raise ValueError(f"unknown repo kind {kind!r} (one of {', '.join(KINDS)})")
    return files


@functools.lru_cache(maxsize=4096)
def _submission_files(folder: str, stamp: int) -> tuple[tuple[str, str], ...]:
    """An accepted submission's files and their signatures, from its image table (validation recorded every
    image's sha256): a push lists millions of images without reading or even stat-ing them. Accepted
    submissions never change; ``stamp`` (the table's mtime) keys the cache all the same."""
    folder = Path(folder)
    images = pq.read_table(folder / layout.IMAGES_TABLE, columns=["path", "sha256"]).to_pylist()
    own = [(name, StoreFile.of(folder / name).signature) for name in (layout.MANIFEST, layout.IMAGES_TABLE)]
    return tuple(own + [(row["path"], "sha256:" + row["sha256"]) for row in images])


def signature(content: StoreFile | bytes) -> str:
    """What decides whether a file changed since it was pushed."""
    if isinstance(content, bytes):
        return "sha256:" + hashlib.sha256(content).hexdigest()
    return content.signature


def plan(files: dict[str, StoreFile | bytes], pushed: dict[str, str],
         keep: tuple[str, ...] = ()) -> tuple[list, dict[str, str]]:
    """The commit operations that make a repo holding ``pushed`` (path -> signature) hold ``files``, and the
    signatures afterwards. Only files this store pushed are ever deleted, and none under a ``keep`` prefix."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    now = {path: signature(content) for path, content in files.items()}
    now |= {path: sign for path, sign in pushed.items() if path.startswith(keep) and path not in now} if keep else {}
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=content if isinstance(content, bytes)
                                     else str(content.path))
                  for path, content in files.items() if pushed.get(path) != now[path]]
    operations += [CommitOperationDelete(path_in_repo=path, is_folder=False) for path in sorted(set(pushed) - set(now))]
    return operations, now


def kept_on_the_hub(store: Store, kind: str) -> tuple[str, ...]:
    """Repo paths a push must not delete although the store no longer has them: the card and the releases
    (``leaderboard.pickup`` writes them), and results this store quarantined (the copy on the Hub may be the
    good one the operator restores from)."""
    if kind != "results":
        return ()
    return ("README.md", "leaderboard/", *(f"results/{entry.name}/" for entry in store.quarantined()
                                          if entry.kind == "results"))


# --- push ------------------------------------------------------------------------------------------------------
def _state_path(store: Store) -> Path:
    return store.root / "hub_sync.json"


def _load_state(store: Store) -> dict[str, dict[str, str]]:
    try:
        return json.loads(_state_path(store).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def _save_state(store: Store, state: dict) -> None:
    atomic_write_text(_state_path(store), json.dumps(state, indent=1, sort_keys=True))


def push(store: Store, kind: str, repo: str, *, token: str | None = None) -> int:
    """Commit to ``repo`` what changed in this store's ``kind`` since the last push; returns files changed.
    PushError (offline, refused, unreachable) with what to do; what was not committed is tried again next time."""
    from huggingface_hub import HfApi

    check_repo_id(repo)
    state = _load_state(store)
    key = f"{kind}:{repo}"
    pushed = state.get(key, {})
    operations, now = plan(mirror_files(store, kind, repo), pushed, kept_on_the_hub(store, kind))
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

    check_repo_id(source, "neither a folder nor ")
    target = Path(tempfile.mkdtemp(prefix=f"hub-{kind}-", dir=store.staging))
    try:
        with hub_errors(source, "pull the leaderboard's " + kind + " from"):
            snapshot_download(source, repo_type="dataset", local_dir=target, token=token,
                              allow_patterns=[f"{layout.RESULTS}/*"] if kind == "results" else None)
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


def check_repo_id(repo: str, alternatives: str = "") -> None:
    """SyncError unless ``repo`` is a Hub dataset repo id (ORG/NAME)."""
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
    if not is_submission_id(name):
        raise SyncError(f"{where}: {name!r} is not a submission id (letters, digits, '-' and '_')")
    return name


def _restore_results(store: Store, folder: Path) -> dict[str, int]:
    root = folder / layout.RESULTS
    sources = [source for source in (sorted(root.iterdir()) if root.is_dir() else [])
               if not (store.results / _checked_id(source.name, source)).exists()]
    for source in sources:  # check everything before adding anything: a damaged snapshot restores nothing
        names = sorted(p.name for p in source.iterdir())
        if names != sorted(RESULT_FILES) or any((source / n).is_symlink() for n in names):
            raise SyncError(f"{source}: a results folder holds exactly {', '.join(RESULT_FILES)}; found "
                            f"{', '.join(names) or 'nothing'}")
        for name in layout.RESULT_PARQUET:
            try:
                pq.read_schema(source / name)
            except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
                raise SyncError(f"{source / name}: not a readable Parquet file ({error})") from None
        _read_json(source / layout.RUN)
    for source in sources:
        _copy_into_place(source, store.results / source.name)
    present = len(list(root.iterdir())) - len(sources) if root.is_dir() else 0
    return {"added": len(sources), "present": present}


def _restore_requests(store: Store, folder: Path) -> dict[str, int]:
    """Records first, all checked before anything is added: a record that is not one of ours (bad id, fields,
    JSON) means the snapshot is not a requests repo, and it restores nothing (SyncError). Then each submission
    the store lacks is validated as an upload is (``_stage_submission``): one that fails is refused, its record
    and files left out and the reasons logged, and the others are restored (counted as ``refused``)."""
    root = folder / "requests"
    names = {f.name for f in fields(Job)}
    jobs = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        record = _read_json(path)
        if (not isinstance(record, dict) or not set(record) <= names or record.get("state") not in STATES
                or not all(v is None or isinstance(v, (str, int, float)) for v in record.values())):
            raise SyncError(f"{path}: not a submission record (fields: {', '.join(sorted(names))}; state one of "
                            f"{', '.join(STATES)})")
        if record.get("id") != path.stem:
            raise SyncError(f"{path}: the record's id {record.get('id')!r} is not its file name")
        _checked_id(path.stem, path)
        job = Job(**{name: record.get(name) for name in names})
        files = folder / layout.SUBMISSIONS / job.id
        jobs.append((job, files if files.is_dir() else None))
    counts = {"added": 0, "present": 0, "without_files": 0, "refused": 0}
    for job, files in jobs:
        if job.state in ("PENDING", "RUNNING") and files is None and not store.has_results(job.id):
            counts["without_files"] += 1  # nothing to score: the repo lost its images
            continue
        if store.queue.get(job.id) is not None or store.queue.find_by_hash(job.content_hash) is not None:
            counts["present"] += 1
            continue
        target = store.submissions / job.id
        if files is not None and not target.exists():  # files first: a worker may claim the record at once
            report, refusal = _stage_submission(store, files, job)
            if refusal:
                log.warning("hub restore: refused submission %s: %s", job.id, refusal)
                counts["refused"] += 1
                continue
            report.keep(target)  # validated copy, with its recomputed image table, renamed into place
        if store.queue.restore(job):
            counts["added"] += 1
        else:  # the same record arrived meanwhile (another process restoring): keep what it has
            counts["present"] += 1
    return counts


def _copy_into_place(source: Path, target: Path) -> None:
    """Copy a checked folder next to ``target`` and rename it into place: it appears whole, as a worker's
    results and a validated upload do, or not at all."""
    with atomic_folder(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)


def _stage_submission(store: Store, files: Path, job: Job) -> tuple[Report | None, str | None]:
    """Validate a snapshot's submission folder as an upload is validated, on a copy in ``staging/``: exactly its
    manifest, its image table and the images that table lists (regular files, within the store's size limits,
    named by the submission layout), then the upload validator (``check_folder``: manifest, dataset served
    here, coverage of its prompts, every image decoded under ``store.limits``), whose recomputed sha256s must be
    the table's and whose content hash must be the record's. Returns the accepted report (its staged copy ready
    for ``Report.keep``) and None, or None and the reasons, naming the files (the staged copy removed)."""
    try:
        images = pq.read_table(files / layout.IMAGES_TABLE, columns=["path", "sha256"]).to_pylist()
    except Exception as error:  # noqa: BLE001 - OSError and pyarrow errors alike
        return None, f"images.parquet: not a readable image table ({type(error).__name__})"
    recorded = {row["path"]: row["sha256"] for row in images}
    found = {p.relative_to(files).as_posix(): p for p in files.rglob("*") if not p.is_dir() or p.is_symlink()}
    expected = set(recorded) | {layout.MANIFEST, layout.IMAGES_TABLE}
    if set(found) != expected or not all(stat.S_ISREG(p.lstat().st_mode) for p in found.values()):
        extra, missing = sorted(set(found) - expected), sorted(expected - set(found))
        return None, (f"files do not match its image table (unexpected: {extra[:3]}, missing: {missing[:3]}; "
                      "only regular files are accepted)")
    misnamed = [name for name in recorded if parse_name(name) is None or name == layout.MANIFEST]
    if misnamed:
        return None, f"{misnamed[0]!r}: not an image's name (images/<prompt_id>/<seed>.<png|jpg|jpeg|webp>)"
    entries = [parse_name(name) for name in [layout.MANIFEST, *recorded]]
    limits = store.limits
    sizes = {e.path: found[e.path].lstat().st_size for e in entries}
    too_big = [path for path, size in sizes.items()
               if size > (limits.max_manifest_bytes if path == layout.MANIFEST else limits.max_file_bytes)]
    if len(entries) > limits.max_files or sum(sizes.values()) > limits.max_total_bytes or too_big:
        return None, (f"{too_big[0] + ': ' if too_big else ''}over this leaderboard's limits ({limits.max_files} "
                      f"files, {limits.max_file_bytes} bytes a file, {limits.max_total_bytes} bytes in all)")
    staged = Path(tempfile.mkdtemp(prefix=f"restore-{job.id}-", dir=store.staging))
    try:
        for entry in entries:
            (staged / entry.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files / entry.path, staged / entry.path)
        report = check_folder(staged, entries, store.prompts_for, limits)
        problems = list(report.errors)
        if report.ok:
            changed = sorted(r.path for r in report.images if recorded[r.path] != r.sha256)
            if changed:
                problems.append(f"{changed[0]}: its sha256 is not the one its image table records"
                                + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""))
            elif report.content_hash != job.content_hash:
                problems.append(f"its content hash {report.content_hash} is not the record's {job.content_hash}")
        elif any(error.startswith("manifest.json: dataset: ") for error in report.errors):
            problems.append("restore or build that dataset in this store's datasets/ first, then pull again")
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if problems:
        shutil.rmtree(staged, ignore_errors=True)
        return None, "; ".join(problems)
    return report, None


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
    """Pushes the store to its repos every ``interval`` seconds (``culturelens serve --hub-...``), then runs
    each of ``rounds`` (the results pickup: ``leaderboard.pickup.Pickup.round``), the first time at once; a
    failed push or round is logged and retried next time, the leaderboard keeps working on its local store."""

    def __init__(self, store: Store, repos: dict[str, str], *, interval: float = 60, token: str | None = None,
                 rounds: tuple[Callable[[], None], ...] = ()):
        super().__init__(daemon=True, name="hub-mirror")
        self.store, self.repos, self.interval, self.token = store, repos, interval, token
        self.rounds = rounds
        self.stopped = threading.Event()

    def sync(self) -> None:
        self._push()
        self._rounds()

    def _push(self) -> None:
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

    def _rounds(self) -> None:
        for round_ in self.rounds:
            try:
                round_()
            except CultureLensError as error:  # offline, refused, a damaged release: said, tried again
                log.warning("hub mirror: %s", error)
            except Exception:  # noqa: BLE001 - as a push: the next round tries again
                log.exception("hub mirror: a round failed")

    def run(self) -> None:
        self._rounds()  # what the repos gained while the app was away, before the first interval
        while not self.stopped.wait(self.interval):
            self.sync()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self._push()  # what landed since the last round


def start(store: Store, repos: dict[str, str | None], *, interval: float = 60, token: str | None = None,
          rounds: tuple[Callable[[], None], ...] = ()) -> tuple[Mirror | None, list[str]]:
    """Restore the store's requests from their repo, then start a ``Mirror`` pushing to the named repos and
    running ``rounds``. The results are not restored here: ``leaderboard.pickup`` installs the newest release
    and fetches the folders it lacks (``leaderboard.service`` starts it first, so a restored request finds its
    scores). Returns the mirror (None when no repo is named) and what happened, in words; an unreachable repo is
    reported and the app starts anyway on what the store has."""
    repos = {kind: repos[kind] for kind in ("results", "requests") if repos.get(kind)}
    if not repos:
        return None, []
    for repo in repos.values():
        check_repo_id(repo)
    lines = []
    if "requests" in repos:
        try:
            counts = pull(store, "requests", repos["requests"], token=token)
            lines.append(f"restored requests from {repos['requests']}: "
                         + ", ".join(f"{n} {what}" for what, n in counts.items()))
        except (PushError, SyncError) as error:
            lines.append(f"warning: could not restore requests from {repos['requests']}: {error}")
    mirror = Mirror(store, repos, interval=interval, token=token, rounds=rounds)
    mirror.start()
    return mirror, lines

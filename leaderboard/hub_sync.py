"""A hosted leaderboard's memory on the Hub: the store's requests and results mirrored to two dataset repos.

The app and the workers always use the local store (``leaderboard.store``): one set of code paths. A
deployment whose disk does not survive a restart (a Hugging Face Space without persistent storage) adds two
dataset repos, as the Hugging Face leaderboard template does::

    requests repo (private)                              results repo (public)
      README.md       card; configs requests, images, votes  README.md                card; configs leaderboard,
      queue.parquet          the records as one table        results/<id>/*.parquet   aggregates, per_image, curves
      requests/<id>.json                  queue record       results/<id>/run.json    (``load_dataset(repo, ...)``)
      seal.json              the app's seal over them        results/<id>/seal.json   its worker's seal
      submissions/<id>/manifest.json
      submissions/<id>/data/images-00000-of-00008.parquet
      submissions/<id>/parts/<part>/manifest.json, .../data/*.parquet   (a suite submission: each part's)
      votes/votes.parquet, voters.parquet, withdrawals.json, seal.json   (the arena's, sealed: arena.publish)
      ...                                                  leaderboard/leaderboard-<NNNNN>.parquet  release N
                                                           leaderboard/latest.json  the newest release

Neither repo holds a Parquet file of no rows (``results.published``: one empty file breaks ``load_dataset`` on a
whole config); a results folder taken from a repo gets its empty tables back (``results.complete``).

A submission's images are Parquet shards (``benchmark.submission.shards``): a 10-seed CUBE-1K submission is 9
files, not 9,920 images. A worker on another machine fetches one submission, and only it, with
``download_submission``. A results folder is written once, by the app's worker or a remote one; a release
(``leaderboard.snapshot``: every submission's leaderboard rows in one Parquet file) and the card are written by
``leaderboard.pickup``, which also keeps an app's store in step with the results repo (its newest release at
start, then only the folders it lacks): results are never restored whole at start.

A queue record in the requests repo holds no lease token, only the sha256 of each lease issued for its request
(``lease_hashes``) and that request's number (``request``). The app seals the repo (``seal.json``,
``leaderboard.seal.requests_seal``): the sha256 of every record file it wrote and every deletion (id -> when), so a
restore takes only records exactly as the app wrote them (one edited, rolled back to an earlier version, or added by
someone else is refused, with the reason) and knows every deletion (removing one breaks the seal, and the snapshot
is refused whole). A push keeps what the repo's seal lists and the store lacks (a record a failed restore did not
bring back stays listed), and drops no deletion: the list only grows. A record cannot make a job FINISHED by itself:
one restored FINISHED whose sealed results (``leaderboard.seal``) the store does not hold, as a folder or in its
installed release, answering its request, comes back PENDING, and is scored again unless such results arrive first.
The Cultural Arena's votes (``votes/``, ``leaderboard.arena.publish``) are sealed by the same rules, in a seal of
their own over the folder's bytes: restored only as the app sealed them, never a withdrawn vote; a push keeps the
repo's withdrawals and the votes the store lacks (``_repo_votes``).

Every repo is reached through ``leaderboard.repo`` (a Hub dataset repo, or a local folder laid out like one: the
same calls). ``push`` commits what changed since the last push, in commits of at most 1,000 files (additions and
deletions; what was pushed is remembered in ``STORE/hub_sync.json``), and never deletes a file it did not push
itself, but for the results folder of a submission its owner deleted, which goes whoever pushed it (the app's
worker or a remote one). ``pull`` downloads a repo snapshot (a Hub repo, or a local copy of one, e.g. from
``export``) and ``restore`` adds to the store whatever it lacks, validating every file as it would an upload: ids
are checked, JSON and Parquet are parsed (never unpickled), a results folder is checked as every folder taken from
a repo is (``Results.add``: one that is not its job's results is quarantined with the reason, the others restored;
so pull the requests before the results), a submission is accepted as an upload in Parquet form is
(``Intake.accept``: every row's name, sha256 and uniqueness, then every check an upload's files meet; a refused one
is left out, the others restored), and everything appears by one rename. A repo that cannot be taken is a
``RepoError``, whatever the verb. ``culturelens serve --hub-requests ORG/A --hub-results ORG/B`` restores the requests at start (the results:
``leaderboard.pickup``), then every minute pushes both and runs its ``rounds`` (the results pickup).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import tempfile
import threading
import typing
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import layout, results
from benchmark.atomic import atomic_folder, atomic_write_text
from benchmark.datasets.hub_layout import PushError
from benchmark.errors import CultureLensError
from benchmark.layout import (
    PARTS_DIR,
    holds_validated_submission,
    is_submission_id,
    submission_layouts,
)
from benchmark.submission.manifest import PART_NAME
from benchmark.submission.shards import Shards, stamp
from leaderboard import seal, snapshot
from leaderboard.arena import publish as arena_votes
from leaderboard.arena.ballots import Ballots
from leaderboard.queue import Job, Request, refusal
from leaderboard.repo import Repo, RepoError, folder_repo, hub_repo, open_repo, push_repo
from leaderboard.store import Store

log = logging.getLogger("culturelens.hub_sync")

KINDS = ("requests", "results")
PRIVATE_FIELDS = ("lease_owner", "lease_expires", "lease_tokens")
"""A queue record's fields that never leave the queue: a results-repo writer who could read a lease token could
forge results for a job. The record's ``lease_hashes`` are the sha256 of every lease issued (``Job.issued_hashes``)."""
UNMIRRORED = (*PRIVATE_FIELDS, "requests_before")
"""A queue record's fields a mirrored record leaves out: the private ones, and ``requests_before``, which its
``request`` (the number of the request it is at) replaces."""
SEAL = layout.SEAL
"""The requests repo's seal: the sha256 of each record the app wrote and its deletions ({id: when}), so a restored
queue takes the records it sealed only, and still knows every deletion (``leaderboard.seal.requests_seal``)."""
QUEUE_TABLE = "queue.parquet"
"""The requests repo's records as one table (config ``requests``); ``requests/<id>.json`` are what a restore reads."""
STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED")
MAX_OPERATIONS = 1000  # per commit: the Hub advises against much larger commits
TIMESTAMP = pa.timestamp("ms", tz="UTC")  # what Parquet keeps of a time (it has no seconds unit)
"""A time in a published table (a queue record's ``created_at`` ...): a timestamp, not its ISO text."""


def record_schema() -> pa.Schema:
    """The mirrored queue record's columns, typed from ``Job`` (a column of nulls keeps its type), its times
    (``*_at``) as timestamps, and ``request`` (the request's number)."""
    types = {str: pa.string(), int: pa.int64(), float: pa.float64()}
    hints = typing.get_type_hints(Job)
    def kind(name: str) -> pa.DataType:
        if name.endswith("_at"):
            return TIMESTAMP
        return types[next(t for t in typing.get_args(hints[name]) or (hints[name],) if t is not type(None))]

    return pa.schema([*[(f.name, kind(f.name)) for f in fields(Job) if f.name not in UNMIRRORED],
                      ("request", pa.int64())])


def _queue_table(records: list[dict]) -> pa.Table:
    """The records as the ``requests`` config's table (``record_schema``): the ISO times of the records read as
    timestamps."""
    from datetime import datetime

    schema = record_schema()
    times = [f.name for f in schema if f.type == TIMESTAMP]
    return pa.Table.from_pylist([{**record, **{name: datetime.fromisoformat(record[name]) if record.get(name) else None
                                               for name in times}} for record in records], schema=schema)


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def requests_card(repo_id: str, records: int, submissions: int, images: int, votes: bool = False) -> str:
    """The requests repo's card (``data_cards/requests.md``): its configs ``requests`` (the queue records, as the
    one table ``QUEUE_TABLE``, once there is one), ``images`` (every kept submission's shards, suite parts'
    included, once there is one) and ``votes`` (the arena's, ``leaderboard.arena.publish``, once there are any);
    sized by images."""
    from benchmark import __version__
    from benchmark.datasets import hub_layout
    from benchmark.papers import bibtex

    configs = {"requests": {"train": QUEUE_TABLE}} if records else {}
    if submissions:
        configs["images"] = {"train": [f"{layout.SUBMISSIONS}/*/{layout.DATA_DIR}/*.parquet",
                                       f"{layout.SUBMISSIONS}/*/{PARTS_DIR}/*/{layout.DATA_DIR}/*.parquet"]}
    if votes:
        configs |= arena_votes.CONFIG
    data = hub_layout.card_data(
        pretty_name="CultureLens leaderboard requests", licence=hub_layout.Licence("unknown"), configs=configs,
        default=next(iter(configs)), task_categories=["text-to-image"], language=["en"],
        size_categories=[hub_layout.size_category(images)], tags=["leaderboard", "culturelens"])
    return hub_layout.render_card("requests", data, version=__version__, repo=repo_id, records=records,
                                  submissions=submissions, images=images, configs=list(configs), bibtex=bibtex())


RESULT_CONFIGS = ("aggregates", "per_image", "curves")
"""The results folders' tables, each a config of the results repo's card (``results_card``)."""


def results_card(repo_id: str, release: str, rows: int, configs: list[str]) -> str:
    """The results repo's card (``data_cards/results.md``): ``leaderboard``, the default config, reads the newest
    release's file (``release``, of ``rows`` rows, which give the size category; a release of none, every
    submission deleted, is no config: a file of no rows fails to load); ``configs``, the results folders' tables the
    repo holds files of (a config whose pattern matches no file would fail to load too)."""
    from benchmark import __version__
    from benchmark.datasets import hub_layout
    from benchmark.papers import bibtex
    from benchmark.tracks import cited_papers

    tables = {**({"leaderboard": {"train": release}} if rows else {}),
              **{name: {"train": f"{layout.RESULTS}/*/{name}.parquet"} for name in configs}}
    data = hub_layout.card_data(
        pretty_name="CultureLens leaderboard results", licence=hub_layout.Licence("cc-by-nc-sa-4.0"),
        configs=tables, default="leaderboard" if rows else None, task_categories=["text-to-image"], language=["en"],
        size_categories=[hub_layout.size_category(rows)], tags=["leaderboard", "culture", "text-to-image-evaluation"],
        **({} if tables else {"viewer": False}))
    return hub_layout.render_card("results", data, version=__version__, repo=repo_id, release=release,
                                  number=int(release.rsplit("-", 1)[1].split(".")[0]), configs=configs,
                                  bibtex=bibtex(*cited_papers().values()))


class SubmissionMissing(RepoError):
    """The requests repo holds no such submission (yet: the app's mirror pushes it within a minute)."""


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


def mirror_files(store: Store, kind: str, repo: str = "ORG/NAME",
                 sealed: tuple[dict[str, str], dict[str, str]] | None = None,
                 votes: arena_votes.Published | None = None) -> dict[str, StoreFile | bytes]:
    """Path in the repo -> a store file or bytes: everything the ``kind`` repo should hold for this store. The
    requests repo's seal lists the store's records and deletions, and ``sealed``'s (records the repo's own seal lists
    that the store lacks, and its deletions: ``_repo_seal``); its arena votes are the store's and those of ``votes``
    it keeps (the repo's sealed votes folder: ``_repo_votes``)."""
    files: dict[str, StoreFile | bytes] = {}
    if kind == "requests":
        images = kept = 0
        jobs, requests = store.queue.jobs(), store.queue.requests()
        records = [{**{k: v for k, v in asdict(job).items() if k not in UNMIRRORED},
                    "lease_hashes": job.issued_hashes, "request": requests[job.id].number if job.id in requests else 1}
                   for job in jobs]
        digests = dict(sealed[0]) if sealed else {}
        deletions = {**(sealed[1] if sealed else {}), **store.queue.deletions()}
        for job, record in zip(jobs, records):
            files[f"requests/{job.id}.json"] = data = json.dumps(record, indent=1, sort_keys=True).encode()
            digests[job.id] = hashlib.sha256(data).hexdigest()
            folder = store.submissions / job.id
            if holds_validated_submission(folder):  # one, or a suite submission's parts, kept together
                for name, part in submission_layouts(folder).items():  # shards kept before they named it
                    stamp(part.folder, job.id, name)
                parts = submission_layouts(folder).values()
                # manifests and shards; the image tables are rebuilt on restore
                for path in (path for part in parts for path in (part.manifest, *part.shards)):
                    name = path.relative_to(folder).as_posix()
                    files[f"{layout.SUBMISSIONS}/{job.id}/{name}"] = StoreFile.of(path)
                images += sum(results.parquet_rows(part.images_table) or 0 for part in parts)
                kept += 1
        if digests or deletions:
            index = seal.requests_seal(store.results_folders.keys, dict(sorted(digests.items())),
                                       dict(sorted(deletions.items())))
            files[SEAL] = json.dumps(index, indent=1).encode()
        if records:  # the records again as one table, for load_dataset: a repo's configs share one file format
            files[QUEUE_TABLE] = _parquet(_queue_table(records))
        arena = arena_votes.files(Ballots(store.queue), store.results_folders.keys, votes)  # the arena's, sealed
        files |= arena
        if records or arena:
            files["README.md"] = requests_card(repo, len(records), kept, images, votes=bool(arena)).encode()
    elif kind == "results":  # the card and the releases are written by ``leaderboard.pickup.publish``
        for folder in sorted(store.results.iterdir()):
            if folder.name.startswith(".") or not (folder / layout.RUN).exists():
                continue  # a temporary folder of a write in progress
            for name in results.published(folder):  # no Parquet file of no rows: it would break load_dataset
                files[f"{layout.RESULTS}/{folder.name}/{name}"] = StoreFile.of(folder / name)
    else:
        raise ValueError(f"unknown repo kind {kind!r} (one of {', '.join(KINDS)})")
    return files


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


def push(store: Store, kind: str, repo: str | Repo, *, token: str | None = None) -> int:
    """Commit to ``repo`` (a Hub dataset repo id, a folder laid out like the repo, ``repo.push_repo``, or a
    ``Repo``) what changed in this store's ``kind`` since the last push; returns files changed. RepoError for a
    name that is neither (a file); PushError (offline, refused, unreachable) with what to do: what was not committed is tried
    again next time. The requests repo is made private when a push creates it. A push to the results repo also
    removes the results folders of submissions their owners deleted (``deleted_results``)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    repo = push_repo(repo, token, private=kind == "requests")
    state = _load_state(store)
    key = f"{kind}:{repo.name}"
    pushed = state.get(key, {})
    operations, now = plan(mirror_files(store, kind, repo.name), pushed, kept_on_the_hub(store, kind))
    if kind == "requests" and operations:  # what the store lacks stays sealed
        sealed, votes = _repo_seal(store, repo), _repo_votes(store, repo, pushed)
        if sealed or votes:
            operations, now = plan(mirror_files(store, kind, repo.name, sealed, votes), pushed)
    handled: set[str] = set()
    if kind == "results":
        try:
            paths, handled = deleted_results(store, repo, set(state.get(f"deleted:{repo.name}", {})))
        except PushError as error:  # e.g. a repo not created yet (the commit below creates it): looked for next time
            log.warning("hub mirror: deleted submissions' results not looked for in %s this time: %s", repo.name,
                        error)
            paths = []
        planned = {op.path_in_repo for op in operations}
        operations += [CommitOperationDelete(path_in_repo=path, is_folder=False) for path in paths
                       if path not in planned]
    for start in range(0, len(operations), MAX_OPERATIONS):
        part = operations[start:start + MAX_OPERATIONS]
        repo.commit({op.path_in_repo: op.path_or_fileobj if isinstance(op.path_or_fileobj, bytes)
                     else Path(op.path_or_fileobj) for op in part if isinstance(op, CommitOperationAdd)},
                    f"CultureLens leaderboard: {len(part)} {kind} files",
                    delete=[op.path_in_repo for op in part if not isinstance(op, CommitOperationAdd)])
        for operation in part:  # remember each committed part, so a failure later re-sends only the rest
            if operation.path_in_repo in now:
                pushed[operation.path_in_repo] = now[operation.path_in_repo]
            else:
                pushed.pop(operation.path_in_repo, None)
        state[key] = pushed
        _save_state(store, state)
    if handled:  # the deletions looked for in this results repo: not listed again
        state.setdefault(f"deleted:{repo.name}", {}).update(dict.fromkeys(sorted(handled), "removed"))
        _save_state(store, state)
    return len(operations)


def _repo_seal(store: Store, repo: Repo) -> tuple[dict[str, str], dict[str, str]] | None:
    """What the requests repo's seal lists that a push must keep: the digests of records the store neither holds nor
    deleted (a restore that failed, or refused an edited file: its sealed digest stays) and every deletion; None when
    the repo holds no seal. RepoError, nothing pushed, for a seal this server cannot check: writing the store's over
    it would drop what it lists (the operator restores it, gives this server the key that sealed it, or removes it)."""
    data = repo.read(SEAL)
    if data is None:
        return None
    try:
        index = json.loads(data)
    except ValueError:
        index = None
    if why := seal.requests_refusal(index, store.results_folders.keys):
        raise RepoError(f"{repo.name}: {SEAL}: {why}: nothing pushed to it (restore it, give this server the key "
                        f"that sealed it, or remove it to seal the repo anew from this store)")
    known = {job.id for job in store.queue.jobs()} | store.queue.deleted() | set(index["deletions"])
    return {sid: digest for sid, digest in index["records"].items() if sid not in known}, index["deletions"]


def _repo_votes(store: Store, repo: Repo, pushed: dict[str, str]) -> arena_votes.Published | None:
    """What the requests repo's arena votes folder holds that a push must keep (``arena_votes.files``: its
    withdrawals, its votes and voters the store lacks), read only when its seal is not the one this store pushed last;
    None when it holds none or that one. RepoError, nothing pushed, for a folder this server cannot check, as for the
    requests seal (``_repo_seal``)."""
    path = f"{arena_votes.FOLDER}/{arena_votes.SEAL}"
    data = repo.read(path)
    if data is None or signature(data) == pushed.get(path):
        return None
    found, why = arena_votes.sealed(lambda name: data if name == arena_votes.SEAL else
                                    repo.read(f"{arena_votes.FOLDER}/{name}"), store.results_folders.keys)
    if found is None:
        raise RepoError(f"{repo.name}: {arena_votes.FOLDER}/: {why}: nothing pushed to it (restore it, give this server "
                        "the key that sealed it, or remove the folder to seal the votes anew from this store)")
    return found


def deleted_results(store: Store, repo: Repo, done: set[str]) -> tuple[list[str], set[str]]:
    """The paths in ``repo`` of the results folders of submissions their owners deleted (``Queue.deleted``) and not
    in ``done`` (those handled before), whoever pushed them; and the deletions looked for (one listing of the
    repo, only when there is a new deletion)."""
    pending = store.queue.deleted() - done
    if not pending:
        return [], set()
    return sorted(repo.files([f"{layout.RESULTS}/{sid}/*" for sid in sorted(pending)])), pending


# --- pull and restore ------------------------------------------------------------------------------------------
def pull(store: Store, kind: str, source: str | Path | Repo, *, token: str | None = None) -> dict[str, int]:
    """Restore from ``source``: a Hub dataset repo id, a local folder laid out like the repo, or a ``Repo``.
    Returns counts of what was added and skipped; RepoError (a bad name, a damaged snapshot) / PushError with the
    reason."""
    repo = open_repo(source, token)
    patterns = [f"{layout.RESULTS}/*"] if kind == "results" else ["*"]  # releases and the card: ``pickup``
    with _snapshot(repo, store.staging, kind, patterns) as folder:
        counts = restore(store, kind, folder)
        # What the repo holds and the store now has need not be pushed back.
        have = {str(p.relative_to(folder).as_posix()) for p in folder.rglob("*") if p.is_file()}
        files = mirror_files(store, kind, repo.name)
        state = _load_state(store)
        state.setdefault(f"{kind}:{repo.name}", {}).update(
            {path: signature(content) for path, content in files.items()
             if path in have and (not isinstance(content, bytes) or (folder / path).read_bytes() == content)})
        _save_state(store, state)
        return counts


@contextlib.contextmanager
def _snapshot(repo: Repo, staging: Path, kind: str, patterns: list[str]) -> Iterator[Path]:
    """The files of ``repo`` that ``patterns`` select, downloaded into a temporary folder under ``staging`` laid out
    like the repo, removed afterwards. What ``pull`` and ``download_submission`` read."""
    staging.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix=f"hub-{kind}-", dir=staging))
    try:
        repo.download(patterns, target)
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def download_submission(source: str | Path | Repo, submission_id: str, dest: Path, *,
                        token: str | None = None) -> Path:
    """Download exactly one submission from a requests repo, for a worker on another machine: its manifest and
    its Parquet shards (``submissions/<id>/manifest.json``, ``submissions/<id>/data/*.parquet``; a suite
    submission's, ``parts/<part>/`` each), nothing else of the repo. ``source``: a Hub dataset repo id, a local
    folder laid out like the repo, or a ``Repo`` (the same calls: ``leaderboard.repo``). ``dest`` must not exist: the folder appears whole (``atomic_folder``)
    or not at all. The shards must be a complete set and every row's bytes must have the row's sha256; the
    folder then gets its image table (``images.parquet``), so it is laid out as a store's ``submissions/<id>/``
    and the worker scores it as a local one does::

        folder = download_submission("org/culturelens-requests", job_id, Path("work") / job_id)
        manifest = Manifest.model_validate_json((folder / "manifest.json").read_bytes())
        images = pq.read_table(folder / "images.parquet").to_pandas()
        scores = harness.score(folder, manifest, prompts, images, metrics, backbones, cache, submission_id=job_id)

    Images by row: ``benchmark.submission.shards.Shards(folder)`` (``read(path)``, ``rows()``). Returns ``dest``;
    RepoError when the repo holds no such submission (``SubmissionMissing``) or its files are not intact,
    PushError when the Hub cannot be reached."""
    repo = open_repo(source, token)
    dest = Path(dest)
    prefix = f"{layout.SUBMISSIONS}/{_checked_id(submission_id, repo.name)}"
    patterns = [f"{prefix}/{layout.MANIFEST}", f"{prefix}/{layout.DATA_DIR}/*.parquet",
                f"{prefix}/{PARTS_DIR}/*/{layout.MANIFEST}", f"{prefix}/{PARTS_DIR}/*/{layout.DATA_DIR}/*.parquet"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _snapshot(repo, dest.parent, "requests", patterns) as folder:
        files = folder / prefix
        found = sorted(p for p in files.rglob("*") if not p.is_dir()) if files.is_dir() else []
        if not found:
            raise SubmissionMissing(f"{repo.name}: no submission {submission_id} ({prefix}/ is missing or empty)")
        with atomic_folder(dest) as tmp:
            for path in found:
                name = path.relative_to(files).as_posix()
                if not _submission_file(name):
                    raise RepoError(f"{prefix}/{name}: not a file of a submission (manifest.json, "
                                    f"{layout.shard_name(0, 1)} ..., or these under {PARTS_DIR}/<part>/)")
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, tmp / name)
            for part in submission_layouts(tmp).values():
                where = f"{prefix}/{part.folder.relative_to(tmp).as_posix()}".removesuffix("/.")
                try:
                    shards = Shards(part.folder)
                    table = shards.table()
                    broken = next((row["path"] for row, data in shards.rows()
                                   if hashlib.sha256(data).hexdigest() != row["sha256"]), None)
                except (ValueError, OSError, pa.ArrowException) as error:  # ShardError is a ValueError
                    raise RepoError(f"{where}: its shards cannot be read ({error})") from None
                if broken is not None:
                    raise RepoError(f"{where}: {broken}: its bytes do not have the sha256 its row records")
                pq.write_table(table, part.images_table)
    return dest


def _submission_file(name: str) -> bool:
    """Whether ``name`` is a file a kept submission pushes: its manifest or a shard, or those of a suite part."""
    top, _, rest = name.partition("/")
    if top == PARTS_DIR:
        part, _, name = rest.partition("/")
        if not PART_NAME.fullmatch(part):
            return False
    return name == layout.MANIFEST or (name.startswith(f"{layout.DATA_DIR}/")
                                       and bool(layout.SHARD_NAME.fullmatch(name[len(layout.DATA_DIR) + 1:])))


def restore(store: Store, kind: str, folder: Path) -> dict[str, int]:
    """Add to the store what ``folder`` (laid out like the ``kind`` repo) holds and the store lacks."""
    if kind == "results":
        return _restore_results(store, folder)
    if kind == "requests":
        return _restore_requests(store, folder)
    raise ValueError(f"unknown repo kind {kind!r} (one of {', '.join(KINDS)})")


def _checked_id(name: str, where: str | Path) -> str:
    if not is_submission_id(name):
        raise RepoError(f"{where}: {name!r} is not a submission id (letters, digits, '-' and '_')")
    return name


def _restore_results(store: Store, folder: Path) -> dict[str, int]:
    """Every results folder the store lacks, all checked before any is added (``Results.check``): a damaged
    snapshot restores nothing (RepoError). Each is then checked against its job (``Results.add``): one that is not
    its job's results (the queue must know it: restore the requests first) is quarantined with the reason and
    logged, the others are added."""
    root = folder / layout.RESULTS
    found = sorted(root.iterdir()) if root.is_dir() else []
    sources = [source for source in found if not store.results_folder(_checked_id(source.name, source)).exists()]
    for source in sources:
        store.results_folders.check(source)
    added = 0
    for source in sources:
        try:
            added += store.results_folders.add(source)
        except RepoError as error:
            log.warning("hub restore: left out (see STORE/quarantine/): %s", error)
    return {"added": added, "present": len(found) - len(sources)}


def _sealed(store: Store, folder: Path, records: list[Path]) -> tuple[dict[str, str], dict[str, str]]:
    """The snapshot's seal (``SEAL``): the digest of each record file the app wrote, and the deletions ({id: when}).
    RepoError, so that nothing is restored, when it holds records but no seal, or a seal this server's keys do not
    check (a deletion removed, a record's digest changed: anything but the app's own)."""
    path = folder / SEAL
    if not path.is_file():
        if records:
            raise RepoError(f"the requests repo holds {len(records)} record(s) but no {SEAL}: records are restored "
                            "only as the app of this queue sealed them (a repo written before: push to it once from "
                            "the store that wrote it, whose push seals every record)")
        return {}, {}
    index = _read_json(path)
    if why := seal.requests_refusal(index, store.results_folders.keys):
        raise RepoError(f"{SEAL}: {why}: nothing is restored from it")
    return index["records"], index["deletions"]


def finished_by_seal(store: Store, job: Job) -> bool:
    """Whether sealed results that answer the restored record ``job`` (its request, under the leases whose sha256 it
    keeps) are the store's: its results folder (``Results.refusal_here``), or its installed release (checked when
    installed). What a record saying FINISHED needs to stay FINISHED."""
    request = Request(max(1, job.requests_before), "FINISHED", (), tuple((job.lease_hashes or "").split()))
    if store.has_results(job.id):
        return store.results_folders.refusal_here(job.id, request) is None
    installed = snapshot.installed(store)
    if installed is None or job.id not in installed[0].submissions:
        return False
    return refusal(snapshot.runs(installed[1]).get(job.id), request, sealed=True) is None


def _restore_requests(store: Store, folder: Path) -> dict[str, int]:
    """The seal first (``_sealed``: a snapshot with records but no seal of this queue's app restores nothing,
    RepoError), then the records, all checked before anything is added: a record file that is not exactly one the
    seal lists (edited, rolled back to an earlier version, or added by someone else) is refused and logged (counted
    as ``edited``); a sealed one that is not one of ours (bad id, fields, JSON) means the snapshot is not a requests
    repo, and it restores nothing (RepoError). The seal's deletions come first (the records of deleted submissions
    are left out). Then each submission the store lacks is accepted as an upload is (``Intake.accept`` with its
    record, and its request's number): one that fails is refused, its record and files left out and the reasons
    logged, and the others are restored (counted as ``refused``). A record FINISHED without sealed results answering
    its request (``finished_by_seal``) comes back PENDING (counted as ``unsealed``): FINISHED again once they are
    taken (``Results.add``: the pickup, a results restore), else scored by the next worker."""
    root = folder / "requests"
    paths = sorted(root.glob("*.json")) if root.is_dir() else []
    digests, deletions = _sealed(store, folder, paths)
    names = {f.name for f in fields(Job)} - {"requests_before"}
    jobs, edited = [], 0
    for path in paths:
        if digests.get(path.stem) != hashlib.sha256(path.read_bytes()).hexdigest():
            edited += 1
            log.warning("hub restore: refused the record requests/%s: %s", path.name[:200],
                        f"not the record the app sealed ({SEAL} lists {'another' if path.stem in digests else 'none'}"
                        ": edited, rolled back or added by someone else)")
            continue
        record = _read_json(path)
        if (not isinstance(record, dict) or not set(record) <= names | {"request"} or record.get("state") not in STATES
                or not all(v is None or isinstance(v, (str, int, float)) for v in record.values())
                or not isinstance(record.get("request", 1), int) or record.get("request", 1) < 1):
            raise RepoError(f"{path}: not a submission record (fields: {', '.join(sorted(names))}, request; state "
                            f"one of {', '.join(STATES)})")
        if record.get("id") != path.stem:
            raise RepoError(f"{path}: the record's id {record.get('id')!r} is not its file name")
        _checked_id(path.stem, path)
        job = Job(**{name: record.get(name) for name in names}, requests_before=record.get("request", 1))
        files = folder / layout.SUBMISSIONS / job.id
        if job.id not in deletions:
            jobs.append((job, files if files.is_dir() else None))
    counts = {"added": 0, "present": 0, "without_files": 0, "refused": 0, "unsealed": 0, "edited": edited,
              "deleted": store.queue.remember_deleted(deletions)}
    for job, files in jobs:
        if job.state == "FINISHED" and not finished_by_seal(store, job):
            counts["unsealed"] += 1
            job = replace(job, state="PENDING", finished_at=None, progress=None,
                          message="restored: its record says FINISHED, but no sealed results answering it are here yet;"
                                  " waiting for them, or for a worker to score it")
        if job.state in ("PENDING", "RUNNING") and files is None and not store.has_results(job.id):
            counts["without_files"] += 1  # nothing to score: the repo lost its images
            continue
        if store.queue.get(job.id) is not None or store.queue.find_by_hash(job.content_hash) is not None:
            counts["present"] += 1
            continue
        if files is not None and not (store.submissions / job.id).exists():  # a worker may claim it at once
            outcome = store.intake.accept(files, record=job)
            if not outcome.report.ok:
                log.warning("hub restore: refused submission %s: %s", job.id, _refusal(outcome.report.errors))
                counts["refused"] += 1
            else:
                counts["added" if outcome.job is not None else "present"] += 1
        elif store.queue.restore(job):
            counts["added"] += 1
        else:  # the same record arrived meanwhile (another process restoring): keep what it has
            counts["present"] += 1
    if (arena := arena_votes.restore(Ballots(store.queue), store.results_folders.keys, folder)) is not None:
        counts |= arena  # the arena's votes, under the seal, never a withdrawn one
    return counts


def _refusal(errors: list[str]) -> str:
    """Why a restored submission was refused, with what to do when it names a dataset not served here."""
    if any(error.startswith("manifest.json: dataset: ") for error in errors):
        errors = [*errors, "restore or build that dataset in this store's datasets/ first, then pull again"]
    return "; ".join(errors)


def _read_json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as error:
        raise RepoError(f"{path}: not readable JSON ({error})") from None


def export(store: Store, kind: str, out: str | Path, repo: str = "ORG/NAME") -> int:
    """Write the ``kind`` repo's files into the folder ``out`` (a backup, or a folder to inspect or upload by
    hand; created if missing, RepoError if it is not a folder), through the repo interface as a commit. Into a
    requests repo's folder, as a push: what its seal lists and the store lacks stays listed (``_repo_seal``), and
    so do its arena votes and withdrawals (``_repo_votes``)."""
    target = folder_repo(out)
    files = mirror_files(store, kind, repo, *((_repo_seal(store, target), _repo_votes(store, target, {}))
                                              if kind == "requests" else ()))
    target.commit({path: content if isinstance(content, bytes) else content.path
                   for path, content in files.items()}, f"CultureLens leaderboard: {kind} exported")
    return len(files)


class Mirror(threading.Thread):
    """Pushes the store to its repos every ``interval`` seconds (``culturelens serve --hub-...``), then runs
    each of ``rounds`` (the results pickup: ``leaderboard.pickup.Pickup.round``), the first time at once; a
    failed push or round is logged and retried next time, the leaderboard keeps working on its local store."""

    def __init__(self, store: Store, repos: dict[str, Repo], *, interval: float = 60,
                 rounds: tuple[Callable[[], None], ...] = ()):
        super().__init__(daemon=True, name="hub-mirror")
        self.store, self.repos, self.interval = store, repos, interval
        self.rounds = rounds
        self.stopped = threading.Event()

    def sync(self) -> None:
        self._push()
        self._rounds()

    def _push(self) -> None:
        for kind, repo in self.repos.items():
            try:
                changed = push(self.store, kind, repo)
            except (PushError, RepoError) as error:
                log.warning("hub mirror: %s", error)
                continue
            except Exception:  # noqa: BLE001 - the mirror must outlive any one failed push; the store is intact
                log.exception("hub mirror: pushing %s to %s failed", kind, repo.name)
                continue
            if changed:
                log.info("hub mirror: %d %s files pushed to %s", changed, kind, repo.name)

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


def start(store: Store, repos: dict[str, str | Repo | None], *, interval: float = 60, token: str | None = None,
          rounds: tuple[Callable[[], None], ...] = ()) -> tuple[Mirror | None, list[str]]:
    """Restore the store's requests from their repo, then start a ``Mirror`` pushing to the named repos (Hub
    dataset repos only: RepoError for any other name) and running ``rounds``. The results are not restored here:
    ``leaderboard.pickup`` installs the newest release and fetches the folders it lacks (``leaderboard.service``
    starts it first, so a restored request finds its scores). Returns the mirror (None when no repo is named) and
    what happened, in words; an unreachable repo is reported and the app starts anyway on what the store has."""
    repos = {kind: hub_repo(repos[kind], token, private=kind == "requests")
             for kind in ("results", "requests") if repos.get(kind)}
    if not repos:
        return None, []
    lines = []
    if "requests" in repos:
        name = repos["requests"].name
        try:
            counts = pull(store, "requests", repos["requests"])
            lines.append(f"restored requests from {name}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
        except (PushError, RepoError) as error:
            lines.append(f"warning: could not restore requests from {name}: {error}")
    mirror = Mirror(store, repos, interval=interval, rounds=rounds)
    mirror.start()
    return mirror, lines

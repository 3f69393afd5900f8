"""The one repo interface (``leaderboard.repo``) and the results that answer a job (``leaderboard.results_folders``).

Every verb that is given a repo opens it the same way, so a bad name is one error, ``RepoError``, with one
message shape; the mirror's push, a submitter's Hub dataset and the queue's takeover rule all go through the
interface, here with a local folder standing in for the Hub (the same calls). And a repo is never read while the
queue holds a transaction open: the takeover rule reads the results repo of a worker on another machine, over
the network, between transactions."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from benchmark import layout
from benchmark.layout import RESULT_FILES
from benchmark.submission import Limits
from leaderboard import hub_submission, hub_sync, render
from leaderboard.repo import LocalRepo, RepoError
from leaderboard.store import Store
from leaderboard.ui.site import Site
from leaderboard.ui.submit import SubmitTab
from culturelens.testing.submissions import make_submission

HUB_ONLY = "is not a Hub dataset repo id (ORG/NAME)"
FOLDER_OR_HUB = "is neither a folder nor a Hub dataset repo id (ORG/NAME)"


def _run(argv: list[str]) -> None:
    """Run a ``culturelens`` verb in this process, as the console script does but letting its error through."""
    from culturelens import cli

    args = cli.parser().parse_args(argv)
    args.run(args)


def test_a_bad_repo_id_gives_the_same_error_from_every_verb(tmp_path):
    bad = tmp_path / "notes.txt"  # neither a Hub dataset repo id nor a folder: bad for every verb, export too
    bad.write_text("not a repo")
    good = tmp_path / "repo"
    good.mkdir()
    store = ["--store", str(tmp_path / "store")]
    queue = ["--queue", "postgresql://nobody@127.0.0.1:9/culturelens"]  # never reached: the repos are checked first
    verbs = {  # what each verb takes decides the end of the sentence; the rest is the same everywhere
        "hub push": (["hub", "push", *store, "--results", str(bad)], FOLDER_OR_HUB),
        "hub pull": (["hub", "pull", *store, "--requests", str(bad)], FOLDER_OR_HUB),
        "hub export": (["hub", "export", *store, "--results", str(bad)], "is not a folder"),
        "hub snapshot": (["hub", "snapshot", *store, "--results", str(bad)], FOLDER_OR_HUB),
        "worker --hub-requests": (["worker", *store, *queue, "--hub-requests", str(bad), "--hub-results", str(good)],
                                  FOLDER_OR_HUB),
        "worker --hub-results": (["worker", *store, *queue, "--hub-requests", str(good), "--hub-results", str(bad)],
                                 FOLDER_OR_HUB),
        "serve --hub-requests": (["serve", *store, "--no-worker", "--hub-requests", str(bad)], HUB_ONLY),
        "serve --hub-results": (["serve", *store, "--no-worker", "--hub-results", str(bad)], HUB_ONLY),
    }
    for verb, (argv, takes) in verbs.items():
        with pytest.raises(RepoError) as raised:
            _run(argv)
        assert str(raised.value) == f"'{bad}' {takes}", verb

    submitter = Store(tmp_path / "app")
    with pytest.raises(RepoError) as raised:
        submitter.submit_from_hub(str(bad), "ada")
    message = f"'{bad}' {HUB_ONLY}"
    assert str(raised.value) == message
    page = SubmitTab(Site(submitter, "ada")).submit(None, str(bad))  # the Submit tab, from the Hub
    assert page == f"### Rejected: nothing was stored\n\n- {render.plain(message)}"
    assert list(submitter.staging.iterdir()) == []  # nothing downloaded, nothing left


def _queue_is_free(store: Store, postgres_url: str | None) -> bool:
    """Whether no transaction of the store's queue is open now, as another client of its database sees it: on
    PostgreSQL no other session is inside a transaction; on SQLite another connection can take the write lock at
    once (``BEGIN IMMEDIATE`` with no wait)."""
    if postgres_url:
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as db:
            # Client sessions only: an autovacuum worker, busy on a loaded machine, has a transaction of its own.
            return db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                              " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
                              " AND xact_start IS NOT NULL").fetchone()[0] == 0
    db = sqlite3.connect(store.root / "queue.sqlite", timeout=0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # "database is locked": a transaction holds it
        return False
    finally:
        db.close()


class _WatchedRepo(LocalRepo):
    """A real folder repo that, each time it is read, notes whether the queue was free of transactions then."""

    def __init__(self, folder: Path):
        super().__init__(folder)
        self.reads: list[tuple[str, bool]] = []
        self.free = lambda: True

    def read(self, path: str) -> bytes | None:
        self.reads.append((path, self.free()))
        return super().read(path)

    def download(self, patterns: list[str], into: Path, revision: str | None = None) -> None:
        self.reads.append((",".join(patterns), self.free()))
        super().download(patterns, into, revision)


def test_no_queue_transaction_is_open_while_a_repo_is_read(tmp_path, store_queue):
    repo = _WatchedRepo(tmp_path / "results-repo")
    store = Store(tmp_path / "worker", queue=store_queue, max_attempts=1, results_repo=repo)
    repo.free = lambda: _queue_is_free(store, store_queue)
    with store.queue._transaction():  # the probe sees a transaction when one is open
        assert not repo.free()
    assert repo.free()
    for sid in ("sub-published", "sub-lost"):
        store.queue.add(id=sid, content_hash=f"sha256:{sid}", owner="ada", model="m", model_id=None,
                        model_revision=None, dataset="d")
    # Both jobs' workers die on their last attempt; one had published its results to the repo, and only there.
    leases = {job.id: job.lease for job in (store.queue.claim("dead", lease_seconds=0.01) for _ in range(2))}
    assert set(leases) == {"sub-published", "sub-lost"}
    run = repo.folder / layout.RESULTS / "sub-published" / layout.RUN
    run.parent.mkdir(parents=True)  # as the worker writes it: under its claim's lease
    run.write_text(json.dumps({"submission_id": "sub-published", "request": 1, "lease": leases["sub-published"]}))
    time.sleep(0.05)

    assert store.queue.claim("next", 60) is None

    published, lost = store.queue.get("sub-published"), store.queue.get("sub-lost")
    assert published.state == "FINISHED"
    assert published.message == "scored (the last attempt wrote its results, then stopped)"
    assert lost.state == "FAILED" and "stopped 1 time " in lost.error
    assert sorted(repo.reads) == [("results/sub-lost/run.json", True), ("results/sub-published/run.json", True)]


def test_a_push_goes_through_the_repo_and_deletes_only_the_files_it_pushed(tmp_path):
    store = Store(tmp_path / "store")
    for sid in ("sub-a", "sub-b"):
        for name in RESULT_FILES:
            (store.results_folder(sid) / name).parent.mkdir(parents=True, exist_ok=True)
            (store.results_folder(sid) / name).write_text(f"{sid} {name}")
    repo = LocalRepo(tmp_path / "repo")
    theirs = repo.folder / "results" / "sub-c" / "run.json"  # another writer's results (a remote worker's)
    theirs.parent.mkdir(parents=True)
    theirs.write_text("{}")

    assert hub_sync.push(store, "results", repo) == 8
    pushed = {p.relative_to(repo.folder).as_posix(): p.read_text() for p in repo.folder.rglob("*") if p.is_file()}
    assert pushed == {f"results/{sid}/{name}": f"{sid} {name}" for sid in ("sub-a", "sub-b") for name in RESULT_FILES} \
        | {"results/sub-c/run.json": "{}"}
    assert hub_sync.push(store, "results", repo) == 0  # nothing changed

    store.results_folders.drop("sub-a")
    assert hub_sync.push(store, "results", repo) == 4
    assert repo.folders("results") == ["sub-b", "sub-c"]  # sub-a's files deleted, and its emptied folder
    assert theirs.read_text() == "{}"


def test_a_hub_submission_is_checked_against_the_limits_before_anything_is_downloaded(tmp_path):
    folder = make_submission(tmp_path / "submitted", ["p1", "p2"], seeds=(0,))  # manifest.json + 2 images
    (folder / "README.md").write_text("a card")
    (folder / "other").mkdir()
    (folder / "other" / "big.bin").write_bytes(b"x" * 10_000)
    staging = tmp_path / "staging"
    staging.mkdir()

    over = LocalRepo(folder)
    with pytest.raises(RepoError, match=f"Hub dataset {re.escape(str(folder))} holds 3 files, [0-9]+ bytes: over this "
                                        r"leaderboard's limits \(2 files, "):
        hub_submission.fetch(over, staging, Limits(max_files=2))
    assert over.downloaded == [] and list(staging.iterdir()) == []

    within = LocalRepo(folder)
    fetched = hub_submission.fetch(within, staging, Limits())
    assert sorted(p.relative_to(fetched).as_posix() for p in fetched.rglob("*") if p.is_file()) == [
        "images/p1/0.png", "images/p2/0.png", "manifest.json"]  # not the card, not other/
    assert sorted(within.downloaded) == ["images/p1/0.png", "images/p2/0.png", "manifest.json"]

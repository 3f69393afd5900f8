"""How results reach an app whose disk does not last: from the newest release at start, then folder by folder.

A results repo (``leaderboard.repo``: the Hub, or a local folder standing in for it) holds one folder per
scored submission and the leaderboard's releases (``leaderboard.snapshot``). ``Pickup`` keeps a store in step
with it, never by reading the whole repo:

- ``start`` (the app starting): download latest.json and, when the store lacks that release, its one Parquet
  file; checked (its seal, ``leaderboard.seal``, then ``snapshot.read``) and installed in ``STORE/leaderboard/``.
  The catalog serves the release's rows at once, so the first page is complete from two files. A release that
  cannot be read, or whose number goes back (below the store's, or a release file the repo holds: latest.json rolled
  back), is said, and the app starts without it: the rounds then fetch the folders it lacks, and the next release
  follows every release there is;
- ``round`` (every ``--hub-interval`` seconds, after the mirror's push): compare the repo's commit sha with the
  last round's (an unchanged repo costs one call), take a newer release another writer published, list
  ``results/`` and download only the folders the store lacks that the installed release does not hold (a
  remote GPU worker's new results), each checked as every folder taken from a repo is (``Results.add``) and
  renamed into place whole; the catalog notices them at its next refresh. A submission re-run since the release
  was built counts as one the release does not hold (``snapshot.current``), and a folder of the run before a
  re-run is not taken (``Results.superseded``) until the re-run's worker has replaced it. A folder that is not
  its job's results (another id's rows, paper rows, no lease the queue issued for its job's current request:
  ``Results.reason_to_refuse``) is quarantined with the reason and not downloaded again until the repo holds
  another run.json for it; a deleted submission's folder is never taken. Every ``release_interval`` seconds it
  also ``publish``es a release when the repo holds results the newest release lacks (or no longer holds some:
  a deleted or re-run submission);
- ``fetch`` (a page needing per-image rows of a submission known only from the release: Compare, pictures):
  that submission's folder, on demand.

A remote worker (``leaderboard.remote``) publishes ``results/<id>/`` and nothing else, in one commit through the
repo interface (``Remote.publish``: ``Repo.commit``, run.json last): the app picks the folder up, and its next
release holds it. ``culturelens hub snapshot`` publishes a release at once.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from benchmark import layout
from benchmark.run_record import RunRecord
from benchmark.datasets.hub_layout import PushError
from benchmark.digests import file_digest
from benchmark.layout import SEALED_FILES, is_submission_id
from leaderboard import hub_sync, seal, snapshot
from leaderboard.repo import Repo, RepoError
from leaderboard.snapshot import Release, SnapshotError
from leaderboard.store import Store

log = logging.getLogger("culturelens.pickup")

RELEASE_SECONDS = 3600.0  # at most one release an hour: each is a new file in the repo, kept for citation


def install_latest(store: Store, repo: Repo, revision: str | None = None) -> Release | None:
    """Make the repo's newest release the store's: latest.json, then its file unless the store holds that
    release already. Returns it (None when the repo has none yet); SnapshotError when latest.json or the file
    is not a release this leaderboard can take (nothing installed): not sealed by this queue's app, or a release
    number that goes back (lower than the store's, or than a release file the repo holds: latest.json rolled back)."""
    staged = Path(tempfile.mkdtemp(prefix="release-", dir=store.staging))
    try:
        repo.download([snapshot.LATEST], staged, revision)
        if not (staged / snapshot.LATEST).is_file():
            return None
        release = Release.parse((staged / snapshot.LATEST).read_bytes(), f"{repo.name}: {snapshot.LATEST}")
        have = snapshot.installed(store)
        if have is not None and (have[0].number, have[0].submissions) == (release.number, release.submissions):
            return have[0]
        newest = max(have[0].number if have is not None else 0, snapshot.newest_file(repo, revision))
        if release.number < newest or (have is not None and release.number == have[0].number):
            raise SnapshotError(f"{repo.name}: {snapshot.LATEST} names release {release.number}, but release "
                                f"{newest} exists: a release number never goes back ({snapshot.LATEST} rolled back, "
                                "or written by someone else); the store keeps the release it holds")
        repo.download([release.file], staged, revision)
        file = staged / release.file
        if not file.is_file():
            raise SnapshotError(f"{repo.name}: {snapshot.LATEST} names {release.file}, which the repo does not hold")
        if why := seal.release_refusal(release.seal, store.results_folders.keys, release.number,
                                       file_digest(file), release.submissions):
            raise SnapshotError(f"{repo.name}: release {release.number}: {why}")
        snapshot.read(file, release)
        snapshot.install(store, release, file)
        return release
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def missing(store: Store, repo: Repo, revision: str | None = None) -> list[str]:
    """Ids of the repo's results folders that the store lacks and its release does not hold as they are now
    (``snapshot.current``: a re-run's folder is fetched again), deleted ones left out. A name that is not a
    submission id is logged and left out."""
    ids = repo.folders(layout.RESULTS, revision)
    for name in ids:
        if not is_submission_id(name):
            log.warning("%s: results/%s is not a submission id: left out", repo.name, name[:200])
    have = snapshot.installed(store)
    held = snapshot.current(store, have) if have else set()
    deleted = store.queue.deleted()
    return [sid for sid in ids if is_submission_id(sid) and sid not in held and sid not in deleted
            and not store.results_folder(sid).exists()]


def fetch(store: Store, repo: Repo, ids: list[str], revision: str | None = None) -> list[str]:
    """Download these results folders and add those the store lacks, each checked against its job and renamed into
    place whole (``Results.add``). Their run.json files come first: a folder whose run.json answers an earlier
    request of its submission (``Results.superseded``: a re-run not yet replaced), or that the store set aside
    before with this very run.json (``Results.refused_before``), is not downloaded. Returns the ids added; a
    folder that is not its job's results is quarantined with the reason (logged), and the others are added."""
    folders = store.results_folders
    wanted = [sid for sid in ids if is_submission_id(sid) and not store.results_folder(sid).exists()]
    if not wanted:
        return []
    staged = Path(tempfile.mkdtemp(prefix="pickup-", dir=store.staging))
    try:
        runs = {sid: f"{layout.RESULTS}/{sid}/{layout.RUN}" for sid in wanted}
        repo.download(list(runs.values()), staged, revision)
        texts = {sid: (staged / run).read_bytes() for sid, run in runs.items() if (staged / run).is_file()}
        wanted = [sid for sid, text in texts.items()
                  if not folders.refused_before(sid, text) and not folders.superseded(sid, RunRecord.parse(text))]
        repo.download([f"{layout.RESULTS}/{sid}/{name}" for sid in wanted for name in SEALED_FILES
                       if name != layout.RUN], staged, revision)
        for sid in wanted:
            try:
                folders.add(staged / layout.RESULTS / sid)
            except RepoError as error:
                log.warning("%s: results/%s left out (see STORE/quarantine/): %s", repo.name, sid, error)
        return [sid for sid in wanted if store.has_results(sid)]
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def publish(store: Store, repo: Repo, *, repo_id: str = "ORG/NAME") -> Release | None:
    """Write the next release to the repo when the repo holds results its newest release lacks (or no longer
    holds some), or the release holds submissions that no longer stand (``snapshot.current``: deleted, re-run):
    built from the newest release as it stands and the store's folders (fetching first those it has neither
    of), committed with latest.json and the card (``hub_sync.results_card``, ``repo_id`` in its example) on the
    revision it was built from, then installed in the store. Its number follows every release there is (the
    store's, and every release file of the repo), so none is written over. Returns it; None when nothing changed
    (or the repo holds neither results nor a release: no empty release 1), unless the repo's latest.json cannot be
    taken (rolled back, damaged): the next release then replaces it. SnapshotError, nothing written, when the
    store's queue knows none of the repo's submissions (not the app's store: its release would hold none)."""
    revision = repo.revision()
    previous, taken = _installed_or_none(store, repo, revision)
    in_repo = [sid for sid in repo.folders(layout.RESULTS, revision) if is_submission_id(sid)]
    listed = set(in_repo) | (set(previous[0].submissions) if previous is not None else set())
    if listed and not listed & (set(store.queue.requests()) | store.queue.deleted()):
        raise SnapshotError(f"{repo.name}: this store's queue ({store.queue.location}) knows none of the "
                            f"{len(listed)} submissions the repo holds; publish with the app's store or its queue "
                            "(--queue), or the release would drop them all")
    fetch(store, repo, missing(store, repo, revision), revision)
    number = max(previous[0].number if previous is not None else 0, snapshot.newest_file(repo, revision)) + 1
    held = snapshot.current(store, previous) if previous is not None else set()
    ids = [sid for sid in in_repo if store.has_results(sid) or sid in held]
    digests = {sid: snapshot.run_digest(store.results_folder(sid)) if store.has_results(sid)
               else previous[0].submissions[sid] for sid in ids}
    if taken and (previous[0].submissions if previous is not None else {}) == digests:
        return None
    staged = Path(tempfile.mkdtemp(prefix="release-", dir=store.staging))
    try:
        file = staged / "release.parquet"
        release = snapshot.build(store, ids, file, previous, number)  # after every release there is: never back
        snapshot.read(file, release)  # what others will check, checked before it leaves
        release = replace(release, seal=seal.release_seal(store.results_folders.keys, release.number,
                                                          file_digest(file), release.submissions))
        listed = repo.files([f"{layout.RESULTS}/*/{name}.parquet" for name in hub_sync.RESULT_CONFIGS], revision)
        held = [name for name in hub_sync.RESULT_CONFIGS if any(p.endswith(f"/{name}.parquet") for p in listed)]
        card = hub_sync.results_card(repo_id, release.file, pq.read_metadata(file).num_rows, held)
        repo.commit({release.file: file, snapshot.LATEST: release.to_json().encode(), "README.md": card.encode()},
                    f"CultureLens leaderboard: release {release.number} ({len(ids)} submissions)", parent=revision)
        snapshot.install(store, release, file)
        return release
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _installed_or_none(store: Store, repo: Repo, revision: str | None) -> tuple[tuple[Release, Path] | None, bool]:
    """The repo's newest release, installed, and whether it could be taken; one that cannot is said and built past:
    the next release then follows the store's own (checked when it was installed; none: the store's folders only)."""
    try:
        release = install_latest(store, repo, revision)
    except SnapshotError as error:
        log.warning("%s: building the next release from this store's", error)
        return snapshot.installed(store), False
    return (snapshot.installed(store) if release is not None else None), True  # none yet: the store's is another's


class Pickup:
    """Keeps a store in step with a results repo: ``start`` at start, ``round`` periodically (the mirror's
    thread calls it after its push), ``fetch`` for a page. ``release_interval``: seconds between releases
    this app publishes (None: it publishes none)."""

    def __init__(self, store: Store, repo: Repo, *, repo_id: str = "ORG/NAME",
                 release_interval: float | None = RELEASE_SECONDS):
        self.store, self.repo, self.repo_id, self.release_interval = store, repo, repo_id, release_interval
        self.seen: str | None = None
        self.published = -math.inf

    def start(self) -> list[str]:
        """Install the repo's newest release; what happened, in words (a failure is said, not raised: the app
        starts on what the store has, and the rounds fetch the rest)."""
        try:
            release = install_latest(self.store, self.repo)
        except (SnapshotError, PushError, RepoError) as error:
            return [f"warning: no leaderboard release from {self.repo.name}: {error}; its results folders are "
                    "fetched one by one instead"]
        if release is None:
            return [f"no leaderboard release in {self.repo.name} yet: its results folders are fetched one by one"]
        return [f"leaderboard release {release.number} from {self.repo.name}: {len(release.submissions)} "
                f"submissions ({', '.join(self.repo.downloaded)} read)"]

    def round(self) -> None:
        """Fetch what the repo gained since the last round, then publish a release when one is due."""
        revision = self.repo.revision()
        if revision is not None and revision == self.seen:
            return
        try:
            install_latest(self.store, self.repo, revision)
        except SnapshotError as error:
            log.warning("%s", error)
        added = fetch(self.store, self.repo, missing(self.store, self.repo, revision), revision)
        if added:
            log.info("picked up %d results folder(s) from %s", len(added), self.repo.name)
        self.seen = revision
        if self.release_interval is not None and time.monotonic() - self.published >= self.release_interval:
            release = publish(self.store, self.repo, repo_id=self.repo_id)
            self.published = time.monotonic()
            if release is not None:
                log.info("published leaderboard release %d to %s", release.number, self.repo.name)

    def fetch(self, ids: list[str]) -> None:
        """Results folders a page needs now (per-image rows), for ids the release holds; a failure is logged
        and the page shows what it has."""
        try:
            fetch(self.store, self.repo, ids)
        except PushError as error:
            log.warning("fetching results of %s: %s", ", ".join(ids), error)

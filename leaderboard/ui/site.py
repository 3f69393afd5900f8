"""What every tab shares: the store, its catalog, the download folder the views hand files out from, who submits."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import gradio as gr
import pandas as pd
import pyarrow as pa
import pyarrow.csv as arrow_csv
import pyarrow.parquet as pq

from benchmark import tracks as track_registry
from benchmark.images import as_shown
from leaderboard import operator_settings, render, stored_rankings, tables
from leaderboard.catalog import Catalog
from leaderboard.downloads import DownloadFolder
from leaderboard.queue import QueueDamaged
from leaderboard.served_suite import ServedSuite
from leaderboard.store import Store
from leaderboard.ui.widgets import Parts


SIGN_IN_MISSING = ("Submissions are closed on this Space: it has no Hugging Face sign-in set up, and every upload "
                   "is owned by the account that signs in. Its maintainer turns sign-in on with `hf_oauth: true` in "
                   "the front matter of the Space's README.md (README.md, \"Deploying the Space\").")


def signs_in() -> bool:
    """Whether visitors sign in with Hugging Face: on a Space (``SYSTEM=spaces`` and ``SPACE_ID``, as Gradio reads
    them) whose OAuth app Gradio finds (the variables a Space with ``hf_oauth: true`` gets). A Space without them
    shows no sign-in button (Gradio would refuse to start with one) and takes no uploads (``SIGN_IN_MISSING``)."""
    from gradio import oauth, utils

    return utils.get_space() is not None and all(
        (oauth.OAUTH_CLIENT_ID, oauth.OAUTH_CLIENT_SECRET, oauth.OAUTH_SCOPES, oauth.OPENID_PROVIDER_URL))


QUEUE_REBUILDING = ("The queue is being rebuilt: its database file was found damaged, so it is kept aside and the "
                    "queue rebuilt from the store's folders, as at a restart. Nothing submitted is lost; look again "
                    "in a minute.")


def while_queue_rebuilt(shown: Callable[[str], object]):
    """For a view (a method of a tab with a ``store``) that reads the queue: while the queue is being rebuilt (its file
    found damaged by this view or another, ``Store.queue_watch``), what ``shown(QUEUE_REBUILDING)`` gives instead of
    Gradio's generic "Error"; the rebuild starts the moment a view meets the damage."""

    def wrap(view):
        @functools.wraps(view)
        def guarded(self, *args, **kwargs):
            watch = self.store.queue_watch
            if not watch.rebuilding:
                try:
                    return view(self, *args, **kwargs)
                except QueueDamaged:
                    watch.noticed()
            return shown(QUEUE_REBUILDING)
        return guarded
    return wrap


class Site:
    """One app's reads and hand-outs: ``store``, its ``catalog`` (``fetch`` brings results folders the store knows
    only from a leaderboard release), the download folder (``leaderboard.downloads``) and the local ``owner``;
    ``suite``, the suite served (default: the package's definition, no assets), and ``metric_settings``, the metric
    settings the service's worker scores with (default: as the environment sets them)."""

    def __init__(self, store: Store, owner: str = "local", fetch: Callable[[list[str]], object] | None = None,
                 suite: ServedSuite | None = None, metric_settings: dict[str, object] | None = None):
        self.store, self.owner = store, owner
        self.suite = suite or ServedSuite(store.suite)
        self.metric_settings = metric_settings if metric_settings is not None else default_metric_settings()
        self.places = render.server_places(store.root)
        if self.suite.assets is not None:  # the suite folder is a server folder too (a relative name, as the
            # operator typed it, says nothing of the server: `--suite suite` stays "suite/" in a command)
            self.places[str(self.suite.assets.folder.resolve())] = "SUITE"
        self.catalog = Catalog(store, fetch)
        self.downloads = DownloadFolder()  # its earlier runs' folders are removed, this one is at exit

    def public(self, text: object) -> str:
        """Server-side text (a reason, an error) for visitors: server folders hidden, then escaped."""
        return render.plain(render.hide_paths(text, self.places))

    def who(self, profile: gr.OAuthProfile | None) -> str | None:
        """The signed-in Hugging Face user on a Space (OAuth; None on a Space without sign-in, ``signs_in``), else
        the configured local user."""
        if operator_settings.on_space():
            return profile.username if profile is not None and signs_in() else None
        return self.owner

    def track_choices(self) -> list[tuple[str, str]]:
        """Every registered track and any other the results hold, as (title, id): a track without rows yet keeps
        its button, and its note says why it is empty."""
        ids = dict.fromkeys([*track_registry.all_tracks(), *tables.tracks(self.catalog)])
        return [(track_registry.get(t).title, t) for t in ids]

    def results_version(self) -> str:
        """A digest of the results the catalog holds (folders and their stamps, the reported file's time, whether
        the rankings are updating): it changes when results land, are re-run or deleted, and costs one directory listing at most every
        ``catalog.REFRESH_SECONDS``."""
        self.catalog.refresh()
        with self.catalog.lock:
            key = f"{self.catalog.reported_stamp}|" + "|".join(f"{name}={self.catalog.stamps.get(name)}"
                                                               for name in sorted(self.catalog.loaded))
            stored = getattr(self.catalog, "stored_rankings", None)  # the page reloads when an update ends too
            if stored is not None:
                key += f"|runs={stored.runs}" + ("|updating" if stored.recomputing() else "")
        return hashlib.sha1(key.encode()).hexdigest()[:16]

    # --- what Gradio may serve: copies in this app's download folder, never a store file -------------------------
    def files(self, arguments: tuple, make: Callable[[], tuple[pd.DataFrame, str]]) -> list[str]:
        """The frame ``make()`` gives, with its name's stem, as files to download (``write_files``), written once per
        state of the results for the same ``arguments`` (``StoredRankings.view``) and handed out again while they are
        there: a click on a download someone already made is a lookup. Each hand-out marks the folder used, so the
        download folder's clean-up (``leaderboard.downloads``) leaves it an hour more."""
        paths = stored_rankings.of(self.catalog).view("files", arguments, lambda: self.write_files(*make()),
                                                      kept=lambda paths: all(os.path.exists(p) for p in paths))
        os.utime(Path(paths[0]).parent)
        return paths

    def write_files(self, frame: pd.DataFrame, stem: str) -> list[str]:
        """The frame as CSV (text cells that a spreadsheet would run as a formula are neutralised; written by Arrow,
        7 times faster than pandas on a track's 250,000 rows: text quoted, times in ISO 8601) and Parquet (typed, as
        is, with pandas' metadata as ``to_parquet`` writes it) files to download, named ``culturelens-<stem>``. One
        Arrow table for both, the Parquet file written beside the CSV on a thread of its own (Arrow writes both
        without Python's lock), joined before this returns. (A plain thread, not an executor: the rankings' thread
        may be writing while the interpreter exits, when an executor takes no more work.)"""
        folder = self.downloads.fresh()
        csv, parquet = folder / f"culturelens-{stem}.csv", folder / f"culturelens-{stem}.parquet"
        frame = frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object})
        table = pa.Table.from_pandas(frame, preserve_index=False)
        failed: list[BaseException] = []

        def write_parquet() -> None:
            try:
                pq.write_table(table, parquet)
            except BaseException as error:  # raised in the caller's thread, below
                failed.append(error)
        beside = threading.Thread(target=write_parquet, name="culturelens-parquet")
        beside.start()
        try:
            arrow_csv.write_csv(render.spreadsheet_safe(table), csv)
        finally:
            beside.join()
        if failed:
            raise failed[0]
        return [str(csv), str(parquet)]

    def serve(self, paths: list[Path], names: list[str] | None = None) -> list[str]:
        """Store files to show or download (under ``names``, default ``<n>-<file name>``), as links (or copies)
        in a folder of this app's: Gradio is blocked from the whole store (``app.launch_options``), so a visitor
        gets exactly the files a view picked."""
        folder, served = self.downloads.fresh(), []
        for i, path in enumerate(paths):
            target = folder / (names[i] if names else f"{i}-{path.name}")
            try:
                os.link(path, target)
            except OSError:  # another filesystem
                shutil.copyfile(path, target)
            served.append(str(target))
        return served

    def serve_images(self, images: list[tuple[str, bytes]]) -> list[str]:
        """Images of submissions (name in the submission, bytes from its shards) to show, written as files in a
        folder of this app's (``<n>-<seed>.<ext>``): what Gradio serves is a copy, never a store file."""
        folder, served = self.downloads.fresh(), []
        for i, (name, data) in enumerate(images):
            target = folder / f"{i}-{PurePosixPath(name).name}"
            target.write_bytes(data)
            served.append(str(target))
        return served

    def serve_shown(self, images: list[tuple[str, bytes]]) -> list[str]:
        """Submitted images (name in the submission, bytes from its shards) as a page shows them: the pixels scored
        (``benchmark.images.as_shown``), named ``.png`` where they are served as a PNG of them (``serve_images``)."""
        shown = []
        for name, data in images:
            viewed = as_shown(data)
            shown.append((name, data) if viewed is data else (str(PurePosixPath(name).with_suffix(".png")), viewed))
        return self.serve_images(shown)

    def write(self, name: str, text: str) -> str:
        """``text`` as a file named ``name`` to download (the Submit tab's schema)."""
        path = self.downloads.fresh() / name
        path.write_text(text, encoding="utf-8")
        return str(path)


def default_metric_settings() -> dict[str, object]:
    """The metric settings as this process's environment sets them, by name (app.py: a Space's worker runs
    elsewhere, with its own)."""
    return {s.name: s.resolve() for s in track_registry.settings_declared()}


class Tab:
    """A tab's views over one ``site``: a subclass adds its views and ``build``, which makes the tab's components
    and names them in ``parts`` (inputs and outputs by name)."""

    def __init__(self, site: Site):
        self.site = site
        self.parts = Parts()

    @property
    def store(self) -> Store:
        return self.site.store

    @property
    def catalog(self):
        return self.site.catalog

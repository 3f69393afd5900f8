"""Starting and stopping the leaderboard service: the one start-up that `culturelens serve` and `app.py` (a
Hugging Face Space's entry point) share.

``start`` opens the suite served (``leaderboard.served_suite``: its datasets put in the store), opens the store (a
damaged queue file is rebuilt, and said; one found damaged while serving is rebuilt by the store's
``queue_watch``, started here), adds the papers' rows, removes uploads an earlier run left half-validated, builds
the default dataset if asked, installs the results repo's newest
leaderboard release and restores the requests from the Hub (``leaderboard.pickup``, ``leaderboard.hub_sync``),
keeps pushing to them and picking up new results, starts a supervised local worker if given its command, and builds the app. ``serve``
launches it and, however it ends (Ctrl-C, SIGTERM), stops the worker and pushes what the mirror has not pushed yet.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmark import layout
from benchmark.errors import CultureLensError
from benchmark.submission import Limits
from leaderboard import hub_sync, pickup, quarantine, seal, stored_rankings
from leaderboard.repo import hub_repo
from leaderboard.served_suite import open_served, remember
from leaderboard.store import Store
from leaderboard.supervisor import Supervisor


def _say(line: str) -> None:
    print(line, file=sys.stderr)


class _ClosingLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """asyncio's default policy, except that setting a thread's event loop closes the one it replaces when nothing
    runs on it. Building the app, Gradio sets a new loop in the main thread for each lock and event it makes
    (``gradio.utils.safe_get_lock``, ``safe_get_stop_event``), dropping the one before unclosed; the garbage
    collector could then close a dropped loop's sockets before the loop itself, whose ``__del__`` wrote "Invalid
    file descriptor: -1" tracebacks into the server's log (a Space's log, ``tests/test_space.py``)."""

    def set_event_loop(self, loop) -> None:
        replaced = getattr(self._local, "_loop", None)
        if replaced is not None and replaced is not loop and not replaced.is_running() and not replaced.is_closed():
            replaced.close()
        super().set_event_loop(loop)


@dataclass
class Service:
    store: Store
    app: object  # the Gradio Blocks
    mirror: hub_sync.Mirror | None = None
    supervisor: Supervisor | None = None

    def stop(self) -> None:
        """Stop the rankings' thread (at its next checkpoint), the local worker, then the mirror (which pushes what
        changed since its last push), then the queue's watch."""
        stored_rankings.stop_threads(self.store.root)
        if self.supervisor is not None:
            self.supervisor.stop()
        if self.mirror is not None:
            self.mirror.stop()
        self.store.queue_watch.stop()


def start(root: Path, *, limits: Limits, quota: dict, user: str, cube_source: str | None = None,
          suite: str | None = None, metric_settings: dict[str, object] | None = None,
          hub_repos: dict[str, str | None] | None = None, hub_interval: float = 60,
          release_interval: float | None = pickup.RELEASE_SECONDS,
          worker: list[str] | None = None, worker_env: dict[str, str] | None = None, queue: str | None = None,
          restart_warning: str | None = None, say: Callable[[str], None] = _say) -> Service:
    """The service over the store at ``root``, ready to launch. ``suite``: the suite served (a suite folder or its
    Hub repo; None: the definition in this package), ``metric_settings``: the metric settings its worker scores with
    (by name: the Queue tab says which tracks are off and how to turn them on); ``quota``: ``Store``'s quota keywords;
    ``hub_repos``: {"requests": repo, "results": repo} to restore from and mirror to (``hub_interval``: seconds
    between pushes and pickups; ``release_interval``: between leaderboard releases, None for none); ``worker``:
    the command of a local worker to supervise (none when None; it must use the same ``queue``); ``queue``: a
    PostgreSQL URL, or None for the store's own queue file. ``restart_warning``: on a Space whose store would not
    outlive a restart, what the page says (``operator_settings.restart_warning``), at the top of every tab and in
    the log. ``say`` hears what an operator should read in the log. A repo name that is not a Hub dataset repo id is a RepoError, and
    a seal key that cannot seal (missing, empty, short, unreadable: ``seal.check_at_start``) a SealError, before anything
    else is done."""
    # The names first: a bad one is said before any work, and before the app's libraries load.
    repos = {kind: hub_repo(name, private=kind == "requests") for kind, name in (hub_repos or {}).items() if name}
    for line in seal.check_at_start(Path(root)):  # a key that cannot seal: a SealError, before anything is scored
        say(line)
    from leaderboard.app import build_app

    served = open_served(suite, Path(root) / layout.DATASETS, say)
    remember(root, suite)  # validate, submit and generate on this store answer the suite it serves
    store = Store(root, limits, **quota, queue=queue, suite=served.suite)
    if queue:
        say(f"queue: {store.queue.location}")  # without its password
    if restart_warning:
        say(f"warning: {restart_warning}".replace("**", ""))
    if store.rebuilt:
        say(store.rebuilt)
    store.queue_watch.start()  # a queue file damaged while serving is rebuilt without a restart
    store.seed_reported()
    for name in store.sweep_staging():
        say(f"removed staging/{name}, left by an upload the app was validating when it stopped")
    if cube_source:
        _ensure_default_dataset(store, cube_source, say)
    say(f"submissions as {user}: {store.quota_note}")
    results = None
    if "results" in repos:
        results = pickup.Pickup(store, repos["results"], repo_id=repos["results"].name,
                                release_interval=release_interval)
        for line in results.start():
            say(line)
    mirror, lines = hub_sync.start(store, repos, interval=hub_interval,
                                   rounds=(results.round,) if results else ())
    for line in lines:
        say(line)
    service = Service(store, None, mirror)
    try:
        if worker is not None:  # restarted when it dies, reaped, and stopped with the service
            service.supervisor = Supervisor(worker, store.queue, env=worker_env)
            service.supervisor.start()
        if type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy:  # not another library's
            asyncio.set_event_loop_policy(_ClosingLoopPolicy())
        service.app = build_app(store, owner=user, fetch=results.fetch if results else None, suite=served,
                                metric_settings=metric_settings, notice=restart_warning, say=say)
        if note := quarantine.note(store.quarantined()):  # building the catalog quarantines damaged results
            say(note)
    except BaseException:
        service.stop()
        raise
    return service


def serve(service: Service, *, host: str | None = None, port: int | None = None) -> None:
    """Launch the app until it is stopped; then stop the worker and the mirror. SIGTERM (a service manager, a
    Space's restart, a test) ends it as Ctrl-C does."""
    from leaderboard.app import launch_options

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        service.app.queue(default_concurrency_limit=8).launch(server_name=host, server_port=port,
                                                              **launch_options(service.store))
    finally:
        service.stop()


def _ensure_default_dataset(store: Store, source: str, say: Callable[[str], None]) -> None:
    """Build the default dataset (CUBE-1K) into the store from ``source`` when the store lacks it; a failed build
    is said, and the app runs without it."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder
    from leaderboard.operator_settings import CUBE_SOURCE

    folder = local_folder(store.datasets, cube_1k.HUB_REPO)
    if cube_1k.has_every_config(folder):
        return
    try:
        summary = cube_1k.build(source, folder, how=f"`culturelens serve --cube-source PATH` ({CUBE_SOURCE.env}; "
                                                   "`make run CUBE_SOURCE=PATH`)")
        say(f"built the default dataset {cube_1k.HUB_REPO}: {summary['prompts']} prompts in {folder}")
    except CultureLensError as error:  # the source cannot be read, or the folder is someone else's
        say(f"warning: the default dataset is not built ({error}); the app runs without it")

"""``culturelens worker`` and ``culturelens serve``: score queued submissions, and run the leaderboard (the app
and a supervised local worker; ``leaderboard.service`` is the start-up ``app.py`` shares)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchmark import settings as declared
from benchmark.errors import CultureLensError
from benchmark.progress import quiet_datasets
from benchmark.track import Verb
from culturelens import options
from culturelens.hub_access import offline_unless_hub_reachable
from leaderboard import operator_settings


def worker(args: argparse.Namespace) -> int:
    from benchmark import layout
    from leaderboard import seal, worker
    from leaderboard.served_suite import open_served
    from leaderboard.store import Store

    quiet_datasets()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    if args.supervised:
        worker.stop_when_parent_dies()
    queue = options.queue(args)
    remote = _remote(args, queue)  # its options checked before any model library loads
    root = options.store(args)
    say = logging.getLogger("culturelens.worker").info
    for line in seal.check_at_start(root):  # a key that cannot seal: a SealError (exit 2) before anything is scored
        say(line)
    served = open_served(options.suite(args), root / layout.DATASETS, say)
    if served.assets is not None:
        options.use_suite_assets(vars(args), served.assets)  # every track whose assets the suite holds is on
    scoring = options.scoring_options(vars(args))
    metrics, unavailable = scoring.build_metrics()
    store = Store(root, max_attempts=options.max_attempts(args), queue=queue,
                  results_repo=remote.results if remote is not None else None, suite=served.suite)
    return worker.main(store, scoring, metrics, unavailable, once=args.once, lease_seconds=args.lease_seconds,
                       id=args.supervised, remote=remote)


def _remote(args: argparse.Namespace, queue: str | None):
    """The repos of a worker on another machine than the app (``leaderboard.remote``), or None; a name that is
    neither a folder nor a Hub dataset repo id is a RepoError, before any model library loads."""
    if not (args.hub_requests or args.hub_results):
        return None
    if not (args.hub_requests and args.hub_results):
        raise CultureLensError("a worker on another machine needs both --hub-requests (where it fetches "
                               "submissions) and --hub-results (where it publishes results)")
    if not queue:
        raise CultureLensError("a worker that fetches from --hub-requests needs the app's queue: --queue "
                               "postgresql://... (or CULTURELENS_QUEUE); the store's own queue file holds no job "
                               "of the app's")
    if not operator_settings.SEAL_SECRET.resolve():
        raise CultureLensError(f"a worker on another machine seals its results with the app's secret: set "
                               f"{operator_settings.SEAL_SECRET.env} as the app has it (its own store's key, "
                               "STORE/seal.key, is no key the app holds: the app would refuse every result)")
    from leaderboard.remote import Remote
    from leaderboard.repo import open_repo

    return Remote(open_repo(args.hub_requests), open_repo(args.hub_results), wait_seconds=args.hub_wait)


def serve(args: argparse.Namespace) -> int:
    from leaderboard import service

    quiet_datasets()
    # Off a Space there is no sign-in: on loopback the one user is the operator at this machine; reachable from
    # other machines, every visitor acts as --user, and the quota bounds the work they can ask for.
    chosen = operator_settings.service(args, public=not operator_settings.is_loopback(args.host))
    command, env = (None, None) if args.no_worker else local_worker(args, chosen.queue, chosen.suite)
    running = service.start(chosen.store, limits=chosen.limits, quota=chosen.quota, user=chosen.user,
                            cube_source=chosen.cube_source, suite=chosen.suite, metric_settings=metric_settings(args),
                            hub_repos=chosen.hub_repos, hub_interval=args.hub_interval,
                            release_interval=args.hub_release_interval or None, worker=command, worker_env=env,
                            queue=chosen.queue, restart_warning=chosen.restart_warning)
    service.serve(running, host=args.host, port=args.port)
    return 0


def metric_settings(args: argparse.Namespace) -> dict[str, object]:
    """The metric settings serve's flags (else their environment variables) give, by name: what its worker scores
    with, as the app's Queue tab tells it."""
    from benchmark import tracks

    return dict(declared.from_args(tracks.settings_declared(), args))


def local_worker(args: argparse.Namespace, queue: str | None,
                 suite: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment of ``serve``'s supervised worker: the same store, queue and suite as serve's
    (the queue and the suite in the environment, ``CULTURELENS_QUEUE`` and ``CULTURELENS_SUITE``: a command line is
    visible to every user of the machine), and the metric options serve was given that are not their defaults."""
    from benchmark import tracks

    command = [sys.executable, "-m", "culturelens", "worker", "--store", str(options.store(args)),
               *(["--backbones", args.backbones] if args.backbones else [])]
    for setting in tracks.settings_declared():
        value = getattr(args, setting.name, None)
        if value is not None and value != setting.default:
            command += [setting.flag, str(value)]
    if getattr(args, "tracks", None):
        command += ["--tracks", *args.tracks]
    local = suite is not None and Path(suite).is_dir()  # the worker may start elsewhere than serve's folder
    env = declared.child_environment({operator_settings.QUEUE: queue,
                                      operator_settings.SUITE: str(Path(suite).resolve()) if local else suite})
    # Unreachable, the Hub client retries every weights file for ~25 s: the worker would take minutes to say
    # it cannot load them. Offline mode reads the local cache only, and fails at once if it must. Only the
    # worker goes offline: the app's Hub mirror keeps trying, and recovers when the network does.
    offline_unless_hub_reachable(env)
    return command, env


def _worker_options(p: argparse.ArgumentParser) -> None:
    options.add_store(p, "leaderboard store")
    options.add_queue(p)
    p.add_argument("--once", action="store_true", help="exit when the queue is empty")
    p.add_argument("--lease-seconds", type=float, default=60, help="a job silent this long is taken over")
    options.add_max_attempts(p)
    p.add_argument("--supervised", metavar="ID", default=None,
                   help=argparse.SUPPRESS)  # set by `culturelens serve`: worker id; stop when stdin closes
    p.add_argument("--hub-requests", default=None,
                   help="on another machine than the app: the requests repo (Hub dataset id, or a folder laid out "
                        "like one) each job's submission is fetched from; needs --queue and --hub-results")
    p.add_argument("--hub-results", default=None,
                   help="on another machine than the app: the results repo each job's results are published to")
    p.add_argument("--hub-wait", type=float, default=600,
                   help="seconds to wait for a claimed submission to reach the requests repo (the app pushes "
                        "every --hub-interval)")
    operator_settings.SUITE.add_to(p, help="the suite whose submissions this worker scores (a folder from "
                                           "`culturelens suite build`, or its Hub repo): its scoring assets turn its "
                                           "tracks on, where no flag or variable sets them, and the store serves its "
                                           "datasets (default: the definition v1 in this package, no assets)")
    declared.add_runtime_options(p)
    options.add_metric_options(p)
    p.set_defaults(run=worker, hub=True)


def _serve_options(p: argparse.ArgumentParser) -> None:
    options.add_store(p, "leaderboard store (created if missing)")
    options.add_queue(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; any other than loopback opens the app, without sign-in, to other "
                        "machines (see SECURITY.md)")
    p.add_argument("--port", type=int, default=7860, help="port to listen on")
    operator_settings.USER.add_to(p)
    p.add_argument("--no-worker", action="store_true", help="do not start a local worker")
    operator_settings.CUBE_SOURCE.add_to(p)
    operator_settings.SUITE.add_to(p)
    declared.BACKBONES.add_to(p, help="backbones JSON file passed to the worker")
    operator_settings.HUB_REQUESTS.add_to(p)
    operator_settings.HUB_RESULTS.add_to(p)
    p.add_argument("--hub-interval", type=float, default=60,
                   help="seconds between pushes to the Hub repos and pickups of new results")
    p.add_argument("--hub-release-interval", type=float, default=3600,
                   help="seconds between leaderboard releases the app publishes to --hub-results (0: none)")
    options.add_limit(p)
    options.add_quota(p, "Bound to loopback (the default) the one user is you, the operator: no quota unless you "
                         "set one. With any other --host every visitor acts as --user and the quota defaults to 5 "
                         "accepted submissions and 20 uploads per user and 24 h.")
    options.add_metric_options(p)  # passed on to the local worker
    p.set_defaults(run=serve)


VERBS = (
    Verb("worker", "score queued submissions (run next to the app, or on a GPU machine)",
         f"culturelens worker --store {operator_settings.STORE.default}", _worker_options),
    Verb("serve", "run the leaderboard app and a local worker",
         f"culturelens serve --store {operator_settings.STORE.default} --suite suite/ --port 7860", _serve_options),
)

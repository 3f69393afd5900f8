"""``culturelens hub push|pull|export``: mirror a store's requests and results to Hub dataset repos
(``leaderboard.hub_sync``), restore a store from them, or write a local copy."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark.errors import CultureLensError
from benchmark.track import Verb
from culturelens import options


def hub(args: argparse.Namespace) -> int:
    from leaderboard import hub_sync
    from leaderboard.store import Store

    store = Store(Path(args.store), queue=options.queue(args))
    repos = {kind: getattr(args, kind) for kind in hub_sync.KINDS if getattr(args, kind)}
    if not repos:
        raise CultureLensError("name at least one of --requests and --results")
    for kind, repo in repos.items():  # a PushError or SyncError says which repo and why
        if args.action == "push":
            print(f"{kind}: {hub_sync.push(store, kind, repo, token=args.token)} files changed in {repo}")
        elif args.action == "pull":
            counts = hub_sync.pull(store, kind, repo, token=args.token)
            print(f"{kind} from {repo}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
        else:
            out = Path(repo)
            print(f"{kind}: {hub_sync.export(store, kind, out)} files written to {out}")
    return 0


def _options(action: str, meaning: str):
    def add(p: argparse.ArgumentParser) -> None:
        options.add_store(p, "leaderboard store")
        options.add_queue(p)
        p.add_argument("--requests", default=None, help=f"requests (queue records and submitted files): {meaning}")
        p.add_argument("--results", default=None, help=f"results (scores, one folder per submission): {meaning}")
        p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
        p.set_defaults(run=hub, action=action)
    return add


VERBS = (
    Verb("push", "commit what changed since the last push",
         "culturelens hub push --results my-org/culturelens-results", _options("push", "Hub dataset repo"),
         under=("hub",)),
    Verb("pull", "add to the store what the repos (or local copies of them) hold and it lacks",
         "culturelens hub pull --requests my-org/culturelens-requests --results backup/results",
         _options("pull", "Hub dataset repo, or a folder laid out like one"), under=("hub",)),
    Verb("export", "write what the repos would hold into local folders (a backup)",
         "culturelens hub export --results backup/results --requests backup/requests",
         _options("export", "folder to write"), under=("hub",)),
)

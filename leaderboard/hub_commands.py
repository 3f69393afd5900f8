"""``culturelens hub push|pull|export``: mirror a store's requests and results to Hub dataset repos
(``leaderboard.hub_sync``), restore a store from them, or write a local copy."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmark.errors import CultureLensError


def cmd_hub(args: argparse.Namespace) -> int:
    """Push, pull or export each repo named; PushError and SyncError (user errors) stop at the first failure."""
    from leaderboard import hub_sync
    from leaderboard.store import Store

    store = Store(Path(args.store))
    repos = {kind: getattr(args, kind) for kind in hub_sync.KINDS if getattr(args, kind)}
    if not repos:
        raise CultureLensError("name at least one of --requests and --results")
    for kind, repo in repos.items():
        if args.hub_verb == "push":
            print(f"{kind}: {hub_sync.push(store, kind, repo, token=args.token)} files changed in {repo}")
        elif args.hub_verb == "pull":
            counts = hub_sync.pull(store, kind, repo, token=args.token)
            print(f"{kind} from {repo}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
        else:
            out = Path(repo)
            print(f"{kind}: {hub_sync.export(store, kind, out)} files written to {out}")
    return 0


def register(verbs, verb, default_store: str) -> None:
    hub = verb("hub", "mirror the store's requests and results to Hub dataset repos, or restore from them",
               "culturelens hub push --requests my-org/culturelens-requests --results my-org/culturelens-results")
    hub_verbs = hub.add_subparsers(dest="hub_verb", required=True, metavar="ACTION")
    for name, help_text, example, meaning in (
            ("push", "commit what changed since the last push",
             "culturelens hub push --results my-org/culturelens-results", "Hub dataset repo"),
            ("pull", "add to the store what the repos (or local copies of them) hold and it lacks",
             "culturelens hub pull --requests my-org/culturelens-requests --results backup/results",
             "Hub dataset repo, or a folder laid out like one"),
            ("export", "write what the repos would hold into local folders (a backup)",
             "culturelens hub export --results backup/results --requests backup/requests", "folder to write")):
        p = verb(name, help_text, example, hub_verbs)
        p.add_argument("--store", default=default_store, help="leaderboard store")
        p.add_argument("--requests", default=None, help=f"requests (queue records and submitted files): {meaning}")
        p.add_argument("--results", default=None, help=f"results (scores, one folder per submission): {meaning}")
        p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
        p.set_defaults(run=cmd_hub)

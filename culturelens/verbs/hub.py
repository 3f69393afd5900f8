"""``culturelens hub push|pull|export|snapshot``: mirror a store's requests and results to Hub dataset repos
(``leaderboard.hub_sync``), restore a store from them, write a local copy, or publish a leaderboard release
(``leaderboard.pickup``)."""

from __future__ import annotations

import argparse

from benchmark.errors import CultureLensError
from benchmark.track import Verb
from culturelens import options


def hub(args: argparse.Namespace) -> int:
    from leaderboard import hub_sync, pickup, snapshot
    from leaderboard.repo import folder_repo, open_repo
    from leaderboard.store import Store

    store = Store(options.store(args), queue=options.queue(args))
    if args.action == "snapshot":
        repo = open_repo(args.results, token=args.token)
        release = pickup.publish(store, repo, repo_id=args.results if repo.name == args.results else "ORG/NAME")
        print(f"release {release.number} written to {repo.name}: {len(release.submissions)} submissions"
              if release else f"{repo.name}: its newest release holds every result already; nothing written"
              if snapshot.installed(store) else f"{repo.name}: no results yet; nothing written")
        return 0
    repos = {kind: getattr(args, kind) for kind in hub_sync.KINDS if getattr(args, kind)}
    if not repos:
        raise CultureLensError("name at least one of --requests and --results")
    for kind, repo in repos.items():  # a PushError or RepoError says which repo and why
        if args.action == "push":
            print(f"{kind}: {hub_sync.push(store, kind, repo, token=args.token)} files changed in {repo}")
        elif args.action == "pull":
            counts = hub_sync.pull(store, kind, repo, token=args.token)
            print(f"{kind} from {repo}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
        else:
            out = folder_repo(repo)
            print(f"{kind}: {hub_sync.export(store, kind, out.folder)} files written to {out.name}")
            if kind == "results":  # with the card and a release of the folders exported
                release = pickup.publish(store, out)
                print(f"results: release {release.number} written to {out.name}" if release else
                      f"results: the newest release in {out.name} is up to date")
    return 0


def _options(action: str, meaning: str):
    def add(p: argparse.ArgumentParser) -> None:
        options.add_store(p, "leaderboard store")
        options.add_queue(p)
        if action == "snapshot":
            p.add_argument("--results", required=True, help=f"results (scores, one folder per submission): {meaning}")
        else:
            p.add_argument("--requests", default=None,
                           help=f"requests (queue records and submitted files): {meaning}")
            p.add_argument("--results", default=None, help=f"results (scores, one folder per submission): {meaning}")
        p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
        p.set_defaults(run=hub, action=action)
    return add


VERBS = (
    Verb("push", "commit what changed since the last push",
         "culturelens hub push --results my-org/culturelens-results",
         _options("push", "Hub dataset repo, or a folder laid out like one (a path that is no ORG/NAME is created)"),
         under=("hub",)),
    Verb("pull", "add to the store what the repos (or local copies of them) hold and it lacks",
         "culturelens hub pull --requests my-org/culturelens-requests --results backup/results",
         _options("pull", "Hub dataset repo, or a folder laid out like one"), under=("hub",)),
    Verb("export", "write what the repos would hold into local folders (a backup)",
         "culturelens hub export --results backup/results --requests backup/requests",
         _options("export", "folder to write"), under=("hub",)),
    Verb("snapshot", "publish a leaderboard release (every result's rows in one file) when the results repo "
         "holds results its newest release lacks",
         "culturelens hub snapshot --results my-org/culturelens-results",
         _options("snapshot", "Hub dataset repo, or a folder laid out like one"), under=("hub",)),
)

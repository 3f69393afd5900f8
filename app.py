"""Gradio entry point in the Hugging Face Spaces convention: `python app.py` or a Space's `app_file`.

Serves the leaderboard over the store in CULTURELENS_STORE (default: on a Space with persistent storage
`/data/culturelens`, else `.culturelens`, which a Space's restart wipes: the page then says so), with the start-up
`culturelens serve` uses (``leaderboard.service``) and no local worker: scoring runs in separate worker processes
(`culturelens worker`), sharing the queue CULTURELENS_QUEUE names (a postgresql:// URL; default the store's
queue.sqlite). On a Space without persistent storage, set CULTURELENS_HUB_REQUESTS and
CULTURELENS_HUB_RESULTS (dataset repo ids) and a write token in HF_TOKEN: at start the requests are restored and
the newest leaderboard release is read (never every results folder), then every minute the store is pushed and
new results folders are picked up, and the store is pushed once more when the Space stops. The default dataset
(CUBE-1K) is built at start from CULTURELENS_CUBE_SOURCE (default: the authors' public file) when the store lacks
it. Every other setting of `culturelens serve` is read from its environment variable too (README.md,
"Environment"). README.md, "Deployment", walks through a CPU Space with a GPU worker elsewhere.
"""

from benchmark.datasets.cube_1k import DEFAULT_SOURCE
from leaderboard import operator_settings, service

# A public deployment: `culturelens serve`'s settings (leaderboard.operator_settings.SERVICE) from the environment
# alone, the public quota unless CULTURELENS_QUOTA... say otherwise.
chosen = operator_settings.service(public=True)
running = service.start(chosen.store, limits=chosen.limits, quota=chosen.quota, user=chosen.user,
                        cube_source=chosen.cube_source or DEFAULT_SOURCE,  # a Space's disk starts empty
                        suite=chosen.suite, hub_repos=chosen.hub_repos, queue=chosen.queue,
                        restart_warning=chosen.restart_warning)
demo = running.app

if __name__ == "__main__":
    service.serve(running)

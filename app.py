"""Gradio entry point in the Hugging Face Spaces convention: `python app.py` or a Space's `app_file`.

Serves the leaderboard over the store in CULTURELENS_STORE (default `.culturelens`), with the start-up
`culturelens serve` uses (``leaderboard.service``) and no local worker: scoring runs in separate worker processes
(`culturelens worker`), sharing the queue CULTURELENS_QUEUE names (a postgresql:// URL; default the store's
queue.sqlite). On a Space without persistent storage, set CULTURELENS_HUB_REQUESTS and
CULTURELENS_HUB_RESULTS (dataset repo ids) and a write token in HF_TOKEN: at start the requests are restored and
the newest leaderboard release is read (never every results folder), then every minute the store is pushed and
new results folders are picked up, and the store is pushed once more when the Space stops. The default dataset
(CUBE-1K) is built at start from CULTURELENS_CUBE_SOURCE (default: the authors' public file) when the store lacks
it. README.md, "Deployment", walks through a CPU Space with a GPU worker elsewhere.
"""

import os
from pathlib import Path

from benchmark.datasets.cube_1k import DEFAULT_SOURCE
from leaderboard import operator_settings, service

# A public deployment: the public quota, unless CULTURELENS_QUOTA... and CULTURELENS_LIMITS say otherwise.
running = service.start(Path(os.environ.get("CULTURELENS_STORE", ".culturelens")), limits=operator_settings.limits(),
                        quota=operator_settings.quota(public=True), user=os.environ.get("CULTURELENS_USER", "local"),
                        cube_source=os.environ.get("CULTURELENS_CUBE_SOURCE", DEFAULT_SOURCE),
                        hub_repos={"requests": os.environ.get("CULTURELENS_HUB_REQUESTS"),
                                   "results": os.environ.get("CULTURELENS_HUB_RESULTS")},
                        queue=operator_settings.queue())
demo = running.app

if __name__ == "__main__":
    service.serve(running)

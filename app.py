"""Gradio entry point in the Hugging Face Spaces convention: `python app.py` or a Space's `app_file`.

Serves the leaderboard over the store in CULTURELENS_STORE (default `.culturelens`), with the start-up
`culturelens serve` uses (``leaderboard.service``) and no local worker: scoring runs in separate worker processes
(`culturelens worker`), sharing the queue CULTURELENS_QUEUE names (a postgresql:// URL; default the store's
queue.sqlite). On a Space without persistent storage, set CULTURELENS_HUB_REQUESTS and
CULTURELENS_HUB_RESULTS (dataset repo ids) and a write token in HF_TOKEN: the store is restored from those repos at
start, pushed to them every minute, and pushed once more when the Space stops.
"""

import os
from pathlib import Path

from leaderboard import operator_settings, service

# A public deployment: the public quota, unless CULTURELENS_QUOTA... and CULTURELENS_LIMITS say otherwise.
running = service.start(Path(os.environ.get("CULTURELENS_STORE", ".culturelens")), limits=operator_settings.limits(),
                        quota=operator_settings.quota(public=True), user=os.environ.get("CULTURELENS_USER", "local"),
                        hub_repos={"requests": os.environ.get("CULTURELENS_HUB_REQUESTS"),
                                   "results": os.environ.get("CULTURELENS_HUB_RESULTS")},
                        queue=operator_settings.queue())
demo = running.app

if __name__ == "__main__":
    service.serve(running)

"""Gradio entry point in the Hugging Face Spaces convention: `python app.py` or a Space's `app_file`.

Serves the leaderboard over the store in CULTURELENS_STORE (default `.culturelens`). Scoring runs in
separate worker processes (`culturelens worker`); `culturelens serve` starts the app with one. On a Space
without persistent storage, set CULTURELENS_HUB_REQUESTS and CULTURELENS_HUB_RESULTS (dataset repo ids) and a
write token in HF_TOKEN: the store is restored from those repos at start and pushed to them every minute.
"""

import os
from pathlib import Path

from leaderboard import hub_sync, operator_settings
from leaderboard.app import build_app, launch_options
from leaderboard.store import Store

# A public deployment: the public quota, unless CULTURELENS_QUOTA... and CULTURELENS_LIMITS say otherwise.
store = Store(Path(os.environ.get("CULTURELENS_STORE", ".culturelens")), operator_settings.limits(),
              **operator_settings.quota(public=True))
if store.rebuilt:  # the queue file was damaged: say so in the Space's log
    print(store.rebuilt)
store.seed_reported()
mirror, restored = hub_sync.start(store, {"requests": os.environ.get("CULTURELENS_HUB_REQUESTS"),
                                          "results": os.environ.get("CULTURELENS_HUB_RESULTS")})
for line in restored:
    print(line)
demo = build_app(store, owner=os.environ.get("CULTURELENS_USER", "local"))

if __name__ == "__main__":
    demo.queue(default_concurrency_limit=8).launch(**launch_options(store))

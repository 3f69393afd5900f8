"""Gradio entry point in the Hugging Face Spaces convention: `python app.py` or a Space's `app_file`.

Serves the leaderboard over the store in CULTURELENS_STORE (default `.culturelens`). Scoring runs in
separate worker processes (`culturelens worker`); `culturelens serve` starts the app with one.
"""

import os
from pathlib import Path

from leaderboard.app import build_app
from leaderboard.store import Store

store = Store(Path(os.environ.get("CULTURELENS_STORE", ".culturelens")))
store.seed_reported()
demo = build_app(store, owner=os.environ.get("CULTURELENS_USER", "local"))

if __name__ == "__main__":
    demo.queue(default_concurrency_limit=8).launch(max_file_size=store.limits.max_total_bytes)

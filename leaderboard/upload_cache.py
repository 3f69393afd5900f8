"""Gradio's upload cache, this server's own: a folder that is emptied when the server stops, and at the next start if
it could not be (a SIGKILL).

Gradio writes every upload (anyone may post a file to its upload route, up to ``launch``'s ``max_file_size``) into
its cache folder, ``$GRADIO_TEMP_DIR`` or ``<temporary folder>/gradio``, shared by every Gradio app of the machine and
otherwise emptied only by ``Blocks(delete_cache=...)`` while the app runs. So before the app's components are made
(Gradio reads the variable when it makes each of them and the server) ``use_own`` points ``GRADIO_TEMP_DIR`` at a
``culturelens-uploads-<random>`` folder under it, which is ``downloads.DownloadFolder``'s kind of folder: locked while
this server runs, removed with what it holds at exit (SIGTERM and Ctrl-C included), and removed by the next server
to start on this machine when its server is gone.
"""

from __future__ import annotations

import functools
from pathlib import Path

from leaderboard.downloads import DownloadFolder
from leaderboard.operator_settings import GRADIO_TEMP_DIR

PREFIX = "culturelens-uploads-"


@functools.cache  # one per process: the app's tests build several apps in one
def use_own() -> Path:
    """This server's upload cache, made now (the folders of servers that are gone removed first) and given to
    Gradio through ``GRADIO_TEMP_DIR``; removed at exit."""
    chosen = GRADIO_TEMP_DIR.resolve()  # an operator's choice of where: the folder goes under it
    folder = DownloadFolder(PREFIX, Path(chosen) if chosen else None).root
    GRADIO_TEMP_DIR.put(str(folder))
    return folder

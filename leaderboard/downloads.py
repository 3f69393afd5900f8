"""The app's download folder: the copies of files and images its views hand Gradio, in a folder that one server owns.

Gradio serves a file a function returns only from its allowed places, and the whole store is blocked
(``app.launch_options``), so the views write what they hand out (a CSV, a per-image Parquet copy, an image) into a
folder under the system's temporary folder: ``culturelens-downloads-<random>``, one per server. While a server runs
it holds an exclusive lock (``flock``) on the folder's ``.lock`` file; the kernel releases it when the process ends,
however it ends (a SIGKILL, the out-of-memory killer). So at start a server removes every such folder whose lock it
can take (its server is gone) and leaves the others (another server on this machine is using it), and at exit it
removes its own. A folder gets its final name only once it is locked (it is made under another name and renamed), so
a server starting at the same moment never takes it for a dead server's. Folders of earlier versions, which hold no
lock, are removed once nothing has been written to them for a day.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

log = logging.getLogger("culturelens.downloads")

PREFIX = "culturelens-downloads-"
MAKING = ".culturelens-downloads-making-"  # a folder being made: not yet locked, never removed by another server
LOCK = ".lock"
KEEP_SECONDS = 3600  # a view's files: Gradio has copied them to its own cache by then (emptied hourly too)
UNLOCKED_SECONDS = 24 * 3600  # a folder of an earlier version (no lock) unused this long has no server


class DownloadFolder:
    """This server's download folder, made at once under the system's temporary folder after the folders of servers
    that are gone are removed; removed with its files at exit (not before: a path a view returned stays good)."""

    def __init__(self, prefix: str = PREFIX, parent: Path | None = None):
        """``prefix``: the folders' names (``upload_cache`` keeps Gradio's uploads in one of its own); ``parent``:
        where they are (the system's temporary folder)."""
        parent = Path(parent or tempfile.gettempdir())
        if removed := remove_abandoned(parent, prefix):
            log.info("removed %d folder(s) of servers that are gone: %s", len(removed), ", ".join(removed))
        making = Path(tempfile.mkdtemp(prefix=MAKING, dir=parent))
        lock = open(making / LOCK, "wb")
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until this process closes it or ends
        self.root = parent / (prefix + making.name.removeprefix(MAKING))
        os.rename(making, self.root)
        atexit.register(_remove, self.root, lock)

    def fresh(self) -> Path:
        """A new folder for one view's files; those of views older than ``KEEP_SECONDS`` are removed here."""
        for old in self.root.iterdir():
            try:
                stale = old.name != LOCK and old.stat().st_mtime < time.time() - KEEP_SECONDS
            except FileNotFoundError:  # removed by another view's call meanwhile
                continue
            if stale:
                shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(dir=self.root))


def _remove(root: Path, lock) -> None:
    shutil.rmtree(root, ignore_errors=True)
    lock.close()


def remove_abandoned(parent: Path, prefix: str = PREFIX) -> list[str]:
    """Remove the folders named ``prefix``... under ``parent`` whose server is gone: this user's, whose lock is free
    (or, for an earlier version's folder, which has none, unused for ``UNLOCKED_SECONDS``). Returns their names."""
    removed = []
    for folder in sorted(parent.glob(prefix + "*")):
        try:
            info = folder.lstat()
        except OSError:  # removed meanwhile by another server starting
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():  # a link, a file, another user's
            continue
        try:
            with open(folder / LOCK, "rb") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)  # under the lock: no other server removes it at once
        except BlockingIOError:  # a live server's
            continue
        except FileNotFoundError:  # no lock: an earlier version's folder, or one another server just removed
            if not folder.exists() or info.st_mtime >= time.time() - UNLOCKED_SECONDS:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # unreadable: not ours to judge
            continue
        removed.append(folder.name)
    return removed

"""Atomic writes: a reader of a file or folder CultureLens writes sees the old content or the new, never a part.

The one rule, for every write that must appear whole:

1. Write into a temporary *sibling* of the target: in the target's own folder, so on the same filesystem
   (a rename across filesystems is a copy, not atomic), named ``.<target name>.<random>`` (``temp_prefix``):
   hidden from listings, and found again by ``leftovers`` when a killed writer left one behind.
2. Flush it to disk (``fsync`` of every file, then of the folders), so a crash after the rename cannot leave
   the new name pointing at empty blocks.
3. Rename it onto the target in one ``rename``, then ``fsync`` the parent folder so the rename itself lasts.
4. On any error (an exception, ``KeyboardInterrupt``), remove the temporary: the target is left as it was.

Files: ``atomic_write(path, write)`` (``write`` fills the temporary path), ``atomic_write_bytes``,
``atomic_write_text``; a file is always replaced. Folders: ``with atomic_folder(target) as tmp: ...`` fills
``tmp``; an existing target is refused (FileExistsError) unless ``replace=True``, which moves the old folder
aside, renames the new one in and removes the old (between those two renames the target is absent for an
instant, never half-written). ``publish(folder, target)`` renames an already complete folder (a validated
upload in ``staging/``, on the same filesystem) into place under the same rule.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def temp_prefix(target: Path) -> str:
    """The name every temporary of ``target`` starts with: ``.<name>.`` (hidden, and tied to the target)."""
    return f".{Path(target).name}."


def leftovers(target: Path) -> list[Path]:
    """Temporaries of ``target`` (``.<name>.*`` beside it) that a writer killed mid-way left behind."""
    target = Path(target)
    return sorted(target.parent.glob(f"{temp_prefix(target)}*"))


def _fsync(path: Path) -> None:
    """Flush one file or folder to disk (a folder's fsync makes the names in it last)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder``, then every folder, deepest first."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                _fsync(path)
        _fsync(Path(root))


def atomic_write(path: str | Path, write: Callable[[Path], object], *, temp_dir: Path | None = None) -> Path:
    """Make the file ``path`` by calling ``write(tmp)`` on a temporary path, then renaming it onto ``path``
    (replacing any file there). ``temp_dir``: where the temporary goes instead of beside ``path``, for a
    folder that must never hold a stray file (a submission being generated); it must be on the same
    filesystem, and its owner removes what a killed writer left there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = temp_dir or path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=temp_prefix(path), dir=folder)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes, *, temp_dir: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (see ``atomic_write``)."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data), temp_dir=temp_dir)


def atomic_write_text(path: str | Path, text: str, *, temp_dir: Path | None = None) -> Path:
    """Write ``text`` to ``path`` as UTF-8, atomically (see ``atomic_write``)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), temp_dir=temp_dir)


def publish(folder: Path, target: Path, *, replace: bool = False) -> Path:
    """Flush the complete ``folder`` and rename it to ``target`` (same filesystem). FileExistsError if
    ``target`` exists, unless ``replace``: then the old folder is renamed aside first (to a temporary name, so
    ``leftovers`` finds it if we are killed), the new one renamed in, and the old removed; if the second
    rename fails the old folder is put back."""
    folder, target = Path(folder), Path(target)
    _fsync_tree(folder)
    if target.exists() and not replace:
        raise FileExistsError(errno.EEXIST, "exists (results and submissions are never overwritten)", str(target))
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f"{temp_prefix(target)}old-", dir=target.parent))
        os.rename(target, old / target.name)
        try:
            os.rename(folder, target)
        except BaseException:
            os.rename(old / target.name, target)
            shutil.rmtree(old, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        # rename(2) also refuses a non-empty target, should one appear since the check above.
        os.rename(folder, target)
    _fsync(target.parent)
    return target


@contextlib.contextmanager
def atomic_folder(target: str | Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside ``target`` to fill; when the block ends without error it becomes
    ``target`` (``publish``: FileExistsError if ``target`` exists, unless ``replace``). On any error the
    temporary is removed and ``target`` left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target), dir=target.parent))
    try:
        yield tmp
        publish(tmp, target, replace=replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

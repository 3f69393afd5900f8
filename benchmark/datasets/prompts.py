"""Load the prompt set a submission answers, from a local Hub-layout folder or the Hub itself."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import datasets
import pandas as pd

# Columns the scoring keeps on every result row and slices by, when a dataset has them.
SLICE_COLUMNS = ("country", "country_code", "continent", "concept", "domain", "kind", "modality")


class DatasetUnavailable(RuntimeError):
    """The dataset cannot be loaded; the message says how to provide it."""


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one dataset config and split, indexed by ``prompt_id``."""

    repo: str
    config: str
    split: str
    fingerprint: str
    table: pd.DataFrame  # index: prompt_id; columns: prompt and the slice columns present

    def __contains__(self, prompt_id: str) -> bool:
        return prompt_id in self.table.index

    def __len__(self) -> int:
        return len(self.table)

    @property
    def label(self) -> str:
        return f"{self.repo} ({self.config}, {self.split})"


def local_folder(root: Path, repo: str) -> Path:
    """Where a local copy of Hub dataset ``org/name`` lives under ``root``: ``root/org__name``."""
    return Path(root) / repo.replace("/", "__")


def _fingerprint(folder: Path) -> str:
    """Changes whenever a file of the folder changes (path, size or modification time)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def load_prompts(repo: str, config: str, split: str = "test", *, revision: str | None = None,
                 local_root: Path | None = None, folder: Path | None = None) -> PromptSet:
    """Load ``repo``/``config``/``split`` from ``folder``, else a local copy under ``local_root``, else the Hub."""
    folder = Path(folder) if folder else (local_folder(local_root, repo) if local_root else None)
    local = bool(folder and (folder / "README.md").exists())
    # datasets caches a local folder by its name and config only, so a folder rebuilt in place would
    # load stale rows (huggingface/datasets#2956): key the cache on the folder's content instead.
    cache_root = Path(local_root) if local_root else folder.parent if local else None
    options = {"cache_dir": str(cache_root / ".hf-cache" / _fingerprint(folder))} if local else {"revision": revision}
    try:
        table = datasets.load_dataset(str(folder) if local else repo, config, split=split, **options)
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as error:
        where = f"no local copy in {folder} and " if folder else ""
        raise DatasetUnavailable(
            f"dataset {repo} (config {config!r}, split {split!r}) cannot be loaded: {where}"
            f"the Hub said: {str(error).splitlines()[0][:200]}. Build it locally with "
            f"`culturelens data build cube-1k --out {folder or 'DIR'}` or connect to the Hub."
        ) from None
    missing = {"prompt_id", "prompt"} - set(table.column_names)
    if missing:
        raise DatasetUnavailable(f"dataset {repo} ({config}) has no column(s) {sorted(missing)}: not a prompt set")
    columns = ["prompt_id", "prompt", *[c for c in SLICE_COLUMNS if c in table.column_names]]
    frame = table.select_columns(columns).to_pandas().set_index("prompt_id")
    if not frame.index.is_unique:
        raise DatasetUnavailable(f"dataset {repo} ({config}) repeats prompt ids: not a prompt set")
    return PromptSet(repo, config, split, table._fingerprint, frame)

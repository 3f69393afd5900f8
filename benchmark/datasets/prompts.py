"""Load the prompt set a submission answers, from a local Hub-layout folder or the Hub itself."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow.compute as pc

from benchmark.errors import CultureLensError

# A dataset's reference images (e.g. iconic_references), when it has them: a list of images per prompt.
REFERENCE_COLUMN = "images"
# Columns the scoring keeps on every result row and slices by, when a dataset has them.
SLICE_COLUMNS = ("country", "country_code", "continent", "concept", "domain", "kind", "modality")
# Columns metrics read but results do not slice by (e.g. the artifact a zero-shot recogniser must name).
LABEL_COLUMNS = ("artifact",)


class DatasetUnavailable(CultureLensError, RuntimeError):
    """The dataset cannot be loaded; the message says how to provide it."""


class DatasetNotServed(DatasetUnavailable):
    """No copy of the dataset where it was looked for (a leaderboard's datasets; elsewhere, there and the Hub), as
    opposed to a copy that cannot be read; ``repo`` names it. A suite submission's part for it is set aside
    (``benchmark.submission.suite``): the other parts can still be checked and scored."""

    def __init__(self, message: str, repo: str):
        super().__init__(message)
        self.repo = repo


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one dataset config and split, indexed by ``prompt_id``."""

    repo: str
    config: str
    split: str
    fingerprint: str
    table: pd.DataFrame  # index: prompt_id; columns: prompt and the slice and label columns present
    rows: datasets.Dataset | None = field(default=None, repr=False, compare=False)  # the split, as loaded

    def __contains__(self, prompt_id: str) -> bool:
        return prompt_id in self.table.index

    def __len__(self) -> int:
        return len(self.table)

    @property
    def label(self) -> str:
        return f"{self.repo} ({self.config}, {self.split})"

    @property
    def digest(self) -> str:
        """The content of the prompt rows (the first 16 hex digits of a sha256): the same wherever the dataset is
        served from (a local folder, the Hub), unlike ``fingerprint``; a result records it (``dataset_digest``) and
        the suite pins it (``benchmark.suite``)."""
        return hashlib.sha256(self.table.to_json(orient="split", default_handler=str).encode()).hexdigest()[:16]

    @property
    def has_references(self) -> bool:
        return self.rows is not None and REFERENCE_COLUMN in self.rows.column_names

    def reference_counts(self) -> pd.Series | None:
        """prompt_id -> number of reference images (read from Arrow metadata, nothing decoded); None without."""
        if not self.has_references:
            return None
        lengths = pc.list_value_length(self.rows.data.column(REFERENCE_COLUMN)).to_numpy(zero_copy_only=False)
        return pd.Series(np.nan_to_num(lengths.astype(float)).astype(int), index=self.rows["prompt_id"])

    def references(self, prompt_ids: set[str] | None = None) -> tuple[ReferenceSource, pd.DataFrame]:
        """The reference images (of ``prompt_ids``, or all): a source that opens reference image i, and a
        table with one row per image (prompt_id, reference: its position in the record's list, image_sha256)."""
        raw = self.rows.cast_column(REFERENCE_COLUMN, datasets.List(datasets.Image(decode=False)))
        locations, table = [], []
        for row, (prompt_id, images) in enumerate(zip(raw["prompt_id"], raw[REFERENCE_COLUMN])):
            if prompt_ids is not None and prompt_id not in prompt_ids:
                continue
            for position, image in enumerate(images or []):
                locations.append((row, position))
                table.append({"prompt_id": prompt_id, "reference": position,
                              "image_sha256": hashlib.sha256(image["bytes"]).hexdigest()})
        return ReferenceSource(raw, locations), pd.DataFrame(table, columns=["prompt_id", "reference", "image_sha256"])


class ReferenceSource:
    """Reference image i as a file-like object, read undecoded from the dataset (picklable for DataLoader workers)."""

    def __init__(self, rows: datasets.Dataset, locations: list[tuple[int, int]]):
        self.rows, self.locations = rows, locations

    def __call__(self, index: int) -> io.BytesIO:
        row, position = self.locations[index]
        return io.BytesIO(self.rows[row][REFERENCE_COLUMN][position]["bytes"])


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
                 local_root: Path | None = None, folder: Path | None = None, local_only: bool = False) -> PromptSet:
    """Load ``repo``/``config``/``split`` from ``folder``, else a local copy under ``local_root``, else (unless
    ``local_only``: a leaderboard serves only the datasets it holds) the Hub."""
    folder = Path(folder) if folder else (local_folder(local_root, repo) if local_root else None)
    local = bool(folder and (folder / "README.md").exists())
    if local_only and not local:
        served = sorted(p.name.replace("__", "/", 1) for p in Path(local_root).iterdir() if (p / "README.md").exists())
        raise DatasetNotServed(f"dataset {repo} is not served here; this leaderboard serves: "
                               f"{', '.join(served) or 'no dataset yet'}", repo)
    # datasets caches a local folder by its name and config only, so a folder rebuilt in place would
    # load stale rows (huggingface/datasets#2956): key the cache on the folder's content instead.
    cache_root = Path(local_root) if local_root else folder.parent if local else None
    options = {"cache_dir": str(cache_root / ".hf-cache" / _fingerprint(folder))} if local else {"revision": revision}
    try:
        table = datasets.load_dataset(str(folder) if local else repo, config, split=split, **options)
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as error:
        if local_only:  # a leaderboard's own copy: the config or split named is not in it (no server path said)
            raise DatasetUnavailable(f"dataset {repo} (config {config!r}, split {split!r}) cannot be loaded here: "
                                     f"{str(error).splitlines()[0][:200].replace(str(folder), repo)}") from None
        where = f"no local copy in {folder} and " if folder else ""
        message = (f"dataset {repo} (config {config!r}, split {split!r}) cannot be loaded: {where}"
                   f"the Hub said: {str(error).splitlines()[0][:200]}. Build it locally with `culturelens data build "
                   f"... --out {folder or 'DIR'}` (see `culturelens data build --help`) or connect to the Hub.")
        raise (DatasetUnavailable(message) if local else DatasetNotServed(message, repo)) from None
    missing = {"prompt_id", "prompt"} - set(table.column_names)
    if missing:
        raise DatasetUnavailable(f"dataset {repo} ({config}) has no column(s) {sorted(missing)}: not a prompt set")
    columns = ["prompt_id", "prompt", *[c for c in (*SLICE_COLUMNS, *LABEL_COLUMNS) if c in table.column_names]]
    frame = table.select_columns(columns).to_pandas().set_index("prompt_id")
    if not frame.index.is_unique:
        raise DatasetUnavailable(f"dataset {repo} ({config}) repeats prompt ids: not a prompt set")
    return PromptSet(repo, config, split, table._fingerprint, frame, table)


def load_prompts_for(manifest, datasets_root: Path | None, *, local_only: bool = False) -> PromptSet:
    """The prompt set a submission's manifest answers (``manifest.dataset``)."""
    d = manifest.dataset
    return load_prompts(d.repo, d.config, d.split, revision=d.revision, local_root=datasets_root, local_only=local_only)

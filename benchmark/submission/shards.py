"""A submission's images as Parquet shards: the ``datasets`` layout, with the ``Image`` feature.

A validated submission keeps no image file: its images are the rows of a few Parquet files,
``data/images-00000-of-00003.parquet`` ... (``layout.shard_name``), each at most ``max_shard_bytes``, in
(prompt_id, seed) order, with the columns ``submission_id`` (the store's id of the submission, the key its queue
record and results carry; null outside a store), ``part`` (a suite submission's part; null for a plain one),
``prompt_id``, ``seed``, ``image`` (``{"bytes", "path"}``, as ``datasets.Image()`` stores an image: the file's bytes
as submitted and its name in the submission, ``images/<prompt_id>/<seed>.<ext>``), ``sha256`` (of the bytes),
``width`` and ``height`` (as a viewer shows the image). Shards written before they named their submission get the
two columns when the Hub mirror publishes them (``stamp``), so that a requests repo's ``images`` config is one
table that joins its ``requests`` config and the results by ``submission_id``. The Hugging Face features metadata
sits in the Parquet schema, so ``load_dataset("parquet", data_files=...)`` (or ``load_dataset(folder)``) decodes the
images. A CUBE-1K submission at 10 seeds (9,920
images of ~1.5 MB, 15 GB) is 8 files of 2 GiB instead of 9,920 (the Hub advises < 10,000 files a folder).

- ``write_shards``: the writer, streaming (one row group of at most ``ROWS_PER_GROUP`` images and
  ``MAX_GROUP_BYTES`` in memory), atomic (``benchmark.atomic``: the shards appear together or not at all).
- ``Shards``: the reader of a validated submission's shards (trusted: written by ``write_shards``): the image
  table without the bytes, every row in order, or one image by its name (``read``, ``source`` for scoring).
- ``expand``: an upload in Parquet form (``manifest.json`` + ``data/*.parquet``, e.g. a Hub dataset) turned
  into the loose files the upload validator checks, every row checked as it goes (schema, names, sha256,
  duplicates, sizes): the rows then meet exactly the checks files meet (``validate.check_folder``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmark.atomic import atomic_folder
from benchmark.errors import CultureLensError
from benchmark.layout import (
    DATA_DIR,
    IMAGES_DIR,
    MANIFEST,
    SHARD_NAME,
    SubmissionLayout,
    image_name,
    shard_name,
)
from benchmark.submission.archive import (
    IMAGE_EXTENSIONS,
    RATIO_FLOOR,
    Budget,
    Entry,
    Limits,
    Rejected,
    write_entry,
)
from benchmark.submission.manifest import PROMPT_ID

MAX_SHARD_BYTES = 2 * 2**30
"""Default bound on a shard's size: a 10-seed CUBE-1K submission of 1024 px PNGs (~15 GB) is 8 shards, so its
folder in the requests repo holds 9 files with the manifest (the Hub advises < 10,000 a folder, < 100,000 a
repo); 2 GiB stays well under the Hub's 50 GB per file and is still one resumable download."""
ROWS_PER_GROUP = 100
"""Images per row group, as ``datasets`` writes image data: a reader holds one row group in memory."""
MAX_GROUP_BYTES = 256 * 2**20
"""A row group is cut earlier when its images reach this many bytes (large JPEGs, 16-bit PNGs)."""
MAX_READ_GROUP_BYTES = 2**30
"""An uploaded Parquet file's row groups may hold at most this many (uncompressed) bytes: each is read whole."""
_FOOTER_BYTES = 64 * 2**10  # reserved in every shard for the footer: schema, features metadata, ...
_GROUP_FOOTER_BYTES = 4 * 2**10  # ... and each row group's column chunk metadata
_ROW_BYTES = 256  # page headers and lengths, per row, beyond its values
_SMALL_COLUMNS = ["prompt_id", "seed", "image.path", "sha256", "width", "height"]


@dataclass(frozen=True)
class ImageRecord:
    """One validated image: a row of the image table (``images.parquet``), and of the shards but for the bytes."""

    prompt_id: str
    seed: int
    path: str  # relative to the submission folder
    sha256: str
    width: int
    height: int


class ShardError(CultureLensError, ValueError):
    """A stored submission's shards are incomplete or unreadable; the message names the file."""


@functools.cache
def schema() -> pa.Schema:
    """The shards' Arrow schema, with the Hugging Face features metadata (``datasets`` writes it itself)."""
    import datasets

    return datasets.Features({
        "submission_id": datasets.Value("string"), "part": datasets.Value("string"),
        "prompt_id": datasets.Value("string"), "seed": datasets.Value("int64"), "image": datasets.Image(),
        "sha256": datasets.Value("string"), "width": datasets.Value("int64"), "height": datasets.Value("int64"),
    }).arrow_schema


# --- writing --------------------------------------------------------------------------------------------------
class _Writer:
    """Fills shards in order, a row group at a time, each file within ``max_shard_bytes``."""

    def __init__(self, folder: Path, max_shard_bytes: int, rows_per_group: int, max_group_bytes: int,
                 ids: dict[str, str | None]):
        self.folder, self.max_shard_bytes, self.ids = folder, max_shard_bytes, ids
        self.rows_per_group, self.max_group_bytes = rows_per_group, max_group_bytes
        self.files: list[Path] = []
        self.sink: pa.OSFile | None = None
        self.writer: pq.ParquetWriter | None = None
        self.groups = 0  # row groups in the open file
        self.pending: list[tuple[ImageRecord, bytes]] = []
        self.pending_bytes = 0

    def _fits(self, extra: int) -> bool:
        """Whether the open shard (or a new one) can take ``extra`` more bytes in one more row group."""
        used = self.sink.tell() if self.sink is not None else 4
        return used + extra + _FOOTER_BYTES + _GROUP_FOOTER_BYTES * (self.groups + 1) <= self.max_shard_bytes

    def add(self, record: ImageRecord, data: bytes) -> None:
        size = len(data) + len(record.path) + len(record.prompt_id) + len(record.sha256) + _ROW_BYTES
        if _FOOTER_BYTES + _GROUP_FOOTER_BYTES + size + 4 > self.max_shard_bytes:
            raise ValueError(f"{record.path}: {len(data):,} bytes cannot fit in a shard of at most "
                             f"{self.max_shard_bytes:,} bytes: raise max_shard_bytes")
        if self.pending and (len(self.pending) == self.rows_per_group
                             or self.pending_bytes + size > self.max_group_bytes):
            self._flush()
        if not self._fits(self.pending_bytes + size):  # the pending group fits the open shard, this row does not
            self._flush()
            self._close()
        self.pending.append((record, data))
        self.pending_bytes += size

    def _flush(self) -> None:
        if not self.pending:
            return
        if self.writer is None:
            path = self.folder / f".part-{len(self.files):05d}"
            self.files.append(path)
            self.sink = pa.OSFile(str(path), "wb")
            self.writer = pq.ParquetWriter(self.sink, schema(), use_dictionary=False,
                                           compression={c: "none" if c == "image.bytes" else "snappy"
                                                        for c in [*_SMALL_COLUMNS, "image.bytes"]},
                                           write_statistics=["prompt_id", "seed", "sha256"])
        table = pa.Table.from_pylist([{**self.ids, "prompt_id": r.prompt_id, "seed": r.seed,
                                       "image": {"bytes": d, "path": r.path}, "sha256": r.sha256, "width": r.width,
                                       "height": r.height} for r, d in self.pending], schema=schema())
        self.writer.write_table(table, row_group_size=len(table))
        self.groups += 1
        self.pending, self.pending_bytes = [], 0

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.sink.close()
        self.writer = self.sink = None
        self.groups = 0

    def finish(self) -> list[str]:
        self._flush()
        self._close()
        names = [shard_name(i, len(self.files)) for i in range(len(self.files))]
        for path, name in zip(self.files, names):
            os.rename(path, self.folder / Path(name).name)
        return names

    def abort(self) -> None:
        if self.writer is not None:
            self.sink.close()


def write_shards(folder: Path, rows: Iterable[tuple[ImageRecord, bytes]], *, max_shard_bytes: int = MAX_SHARD_BYTES,
                 rows_per_group: int = ROWS_PER_GROUP, max_group_bytes: int = MAX_GROUP_BYTES,
                 submission_id: str | None = None, part: str | None = None) -> list[str]:
    """Write ``rows`` (an image's record and its bytes, in the order the shards keep) as the shards of the
    submission ``folder`` (``submission_id`` and ``part`` in every row: see the module): ``folder/data/`` appears
    at once (``atomic_folder``; FileExistsError if it exists). Returns the shards' names, relative to ``folder``.
    Holds one row group in memory at a time."""
    with atomic_folder(Path(folder) / DATA_DIR) as tmp:
        writer = _Writer(tmp, max_shard_bytes, rows_per_group, max_group_bytes,
                         {"submission_id": submission_id, "part": part})
        try:
            for record, data in rows:
                writer.add(record, data)
            return writer.finish()
        except BaseException:
            writer.abort()
            raise


def stamp(folder: Path, submission_id: str, part: str | None) -> int:
    """Give the shards of the validated submission ``folder`` the ``submission_id`` and ``part`` columns where they
    lack them (written before shards named their submission), each shard rewritten a row group at a time with its
    rows, bytes and row groups as they were, and replaced whole (a reader of the old file reads on). Returns the
    shards rewritten (0 when every shard has the columns)."""
    rewritten = 0
    for path in SubmissionLayout(Path(folder)).shards:
        old = pq.ParquetFile(path)
        if old.schema_arrow.get_field_index("submission_id") >= 0:
            continue
        part_path = path.with_name(f".stamp-{path.name}")
        with pq.ParquetWriter(part_path, schema(), use_dictionary=False,
                              compression={c: "none" if c == "image.bytes" else "snappy"
                                           for c in [*_SMALL_COLUMNS, "image.bytes"]},
                              write_statistics=["prompt_id", "seed", "sha256"]) as writer:
            for group in range(old.num_row_groups):
                table = old.read_row_group(group)
                ids = {"submission_id": pa.array([submission_id] * len(table), pa.string()),
                       "part": pa.array([part] * len(table), pa.string())}
                writer.write_table(pa.table({**ids, **{name: table.column(name) for name in table.column_names}})
                                   .cast(schema()), row_group_size=len(table))
        os.replace(part_path, path)
        rewritten += 1
    return rewritten


# --- reading a validated submission -------------------------------------------------------------------------------
class Shards:
    """The shards of a validated submission folder (as ``write_shards`` wrote them). Picklable: a DataLoader
    worker opens the files itself and keeps the last row group it read (the images of a submission are scored
    in shard order, so each row group is read once per worker). Files are memory-mapped (they never change once
    written) and a row group is kept as an Arrow array, only the rows asked for copied out: reading 1024 px PNGs
    in batches of 32 as four workers do cost 1.7 ms per image so, 2.4 ms through pyarrow's buffered read (a
    2-core VM; a decode costs ~25 ms), and a worker no longer holds a second copy of its row group."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.files = SubmissionLayout(self.folder).shards
        counts = {int(SHARD_NAME.fullmatch(p.name).group(2)) for p in self.files}
        if not self.files or counts != {len(self.files)} or [int(SHARD_NAME.fullmatch(p.name).group(1))
                                                              for p in self.files] != list(range(len(self.files))):
            raise ShardError(f"{self.folder.name}/{DATA_DIR}: not a complete set of shards "
                             f"({', '.join(p.name for p in self.files) or 'none'})")
        self._where: dict[str, tuple[int, int, int]] | None = None  # name -> (file, row group, row in group)
        self._group: tuple[tuple[int, int], pa.BinaryArray] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_group": None}

    def _open(self, index: int) -> pq.ParquetFile:
        try:
            return pq.ParquetFile(self.files[index], memory_map=True)
        except (OSError, pa.ArrowException) as error:
            raise ShardError(f"{self.files[index].name}: not a readable shard ({type(error).__name__})") from None

    def table(self) -> pa.Table:
        """The image table (prompt_id, seed, path, sha256, width, height), without the bytes, in shard order."""
        parts = []
        for index in range(len(self.files)):
            part = self._open(index).read(columns=_SMALL_COLUMNS)
            image = part.column("image").combine_chunks()
            parts.append(pa.table({"prompt_id": part.column("prompt_id"), "seed": part.column("seed"),
                                   "path": image.field("path"), "sha256": part.column("sha256"),
                                   "width": part.column("width"), "height": part.column("height")}))
        return pa.concat_tables(parts)

    def rows(self) -> Iterator[tuple[dict, bytes]]:
        """Every row in order: (prompt_id, seed, path, sha256, width, height as a dict, the image's bytes), one
        row group in memory at a time."""
        for index in range(len(self.files)):
            shard = self._open(index)
            for group in range(shard.num_row_groups):
                for row in shard.read_row_group(group).to_pylist():
                    image = row.pop("image")
                    yield {**row, "path": image["path"]}, image["bytes"]

    def _index(self) -> dict[str, tuple[int, int, int]]:
        """Image name -> (file, row group, row in the group), read once from the names column."""
        if self._where is None:
            self._where = {}
            for index in range(len(self.files)):
                shard = self._open(index)
                for group in range(shard.num_row_groups):
                    names = shard.read_row_group(group, columns=["image.path"]).column("image").combine_chunks()
                    self._where.update((name, (index, group, row))
                                       for row, name in enumerate(names.field("path").to_pylist()))
        return self._where

    def names(self) -> set[str]:
        """The names of the images the shards hold (``images/<prompt_id>/<seed>.<ext>``)."""
        return set(self._index())

    def read(self, name: str) -> bytes:
        """The bytes of the image named ``name``; KeyError if the shards hold none of that name."""
        index, group, row = self._index()[name]
        if self._group is None or self._group[0] != (index, group):
            column = self._open(index).read_row_group(group, columns=["image.bytes"]).column("image")
            self._group = ((index, group), column.combine_chunks().field("bytes"))
        return self._group[1][row].as_py()

    def source(self, names: list[str]) -> Callable[[int], bytes]:
        """Row i -> the bytes of the image ``names[i]``: what scoring reads (``features.compute_features``)."""
        return _Source(self, list(names))


class _Source:
    """Row i -> bytes, picklable for DataLoader workers."""

    def __init__(self, shards: Shards, names: list[str]):
        self.shards, self.names = shards, names

    def __call__(self, row: int) -> bytes:
        return self.shards.read(self.names[row])


# --- an upload in Parquet form ------------------------------------------------------------------------------------
def expand(folder: Path, entries: list[Entry], limits: Limits = Limits(), hold=None) -> list[Entry]:
    """``entries`` of a staged upload, with its Parquet files (``data/*.parquet``) replaced by the images their
    rows hold, written as the files ``images/<prompt_id>/<seed>.<ext>`` of ``folder`` (and the Parquet files
    removed). Each row is checked first: the columns (prompt_id, seed, image {bytes, path}, sha256), a prompt id
    and seed of the right form, the image's file name (``<seed>.<ext>`` or ``images/<prompt_id>/<seed>.<ext>``,
    nothing else: no folder, no '..'), the sha256 of its bytes, no second row for a (prompt_id, seed), and the
    size limits: each image's, and all of them together the total's and at most ``max_compression_ratio`` times the
    Parquet files' own bytes (a zip member's rule). ``hold``: a ``space.Hold`` grown by each image before it is
    written. Rejected names the file, the row and the reason."""
    parquets = [e for e in entries if e.path.startswith(f"{DATA_DIR}/")]
    if not parquets:
        return entries
    if any(e.prompt_id is not None for e in entries):
        raise Rejected(f"a submission holds its images either as files under {IMAGES_DIR}/ or as rows of "
                       f"{DATA_DIR}/*.parquet, not both")
    out = [e for e in entries if e.path == MANIFEST]
    seen: dict[tuple[str, int], str] = {}
    packed = sum((folder / entry.path).stat().st_size for entry in parquets)
    most = min(limits.max_total_bytes, max(RATIO_FLOOR, int(limits.max_compression_ratio * packed)))
    budget = Budget(most, f"its rows hold more than {most:,} bytes of images: over the total size limit or "
                          f"{limits.max_compression_ratio:.0f} times the Parquet files' {packed:,} bytes (a Parquet "
                          "bomb?)", hold)
    for entry in parquets:
        out += _extract(folder / entry.path, entry.path, folder, limits, budget, seen)
        (folder / entry.path).unlink()
    shutil.rmtree(folder / DATA_DIR, ignore_errors=True)
    return out


def _checked_file(path: Path, name: str, limits: Limits, rows_so_far: int) -> pq.ParquetFile:
    try:
        shard = pq.ParquetFile(path)
        fields = shard.schema_arrow
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for bytes that are not Parquet
        raise Rejected(f"{name}: not a readable Parquet file ({type(error).__name__})") from None
    wanted = {"prompt_id": pa.types.is_string, "seed": pa.types.is_integer, "sha256": pa.types.is_string}
    bad = [column for column, check in wanted.items()
           if fields.get_field_index(column) < 0 or not check(fields.field(column).type)]
    image = fields.field("image").type if fields.get_field_index("image") >= 0 else None
    if (image is None or not pa.types.is_struct(image) or image.get_field_index("bytes") < 0
            or image.get_field_index("path") < 0 or not pa.types.is_binary(image.field("bytes").type)
            or not pa.types.is_string(image.field("path").type)):
        bad.append("image")
    if bad:
        raise Rejected(f"{name}: columns {', '.join(bad)} missing or of the wrong type; a submission's Parquet "
                       "files have prompt_id (string), seed (integer), image (datasets.Image(): bytes and path) "
                       "and sha256 (hex string of the image's bytes)")
    meta = shard.metadata
    if rows_so_far + meta.num_rows > limits.max_files:
        raise Rejected(f"{name}: more than the limit of {limits.max_files} images in all")
    for group in range(meta.num_row_groups):
        size = meta.row_group(group).total_byte_size
        if size > MAX_READ_GROUP_BYTES:
            raise Rejected(f"{name}: row group {group} holds {size:,} bytes, more than {MAX_READ_GROUP_BYTES:,}; "
                           f"write row groups of about {ROWS_PER_GROUP} images (datasets does)")
    return shard


def _row_entry(prompt_id, seed, file_name, where: str) -> Entry:
    """The entry a row's image is staged as, from its checked prompt id, seed and file name."""
    if not isinstance(prompt_id, str) or not PROMPT_ID.fullmatch(prompt_id) or ".." in prompt_id:
        raise Rejected(f"{where}: prompt_id {prompt_id!r} is not a prompt id (letters, digits, '-', '_', '.')")
    if not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
        raise Rejected(f"{where}: seed {seed!r} is not a seed (an integer from 0 to 2**32 - 1)")
    extension = file_name.rsplit(".", 1)[-1] if isinstance(file_name, str) else None
    if extension not in IMAGE_EXTENSIONS or file_name not in (f"{seed}.{extension}",
                                                              image_name(prompt_id, seed, extension)):
        raise Rejected(f"{where}: the image's file name (image.path) {file_name!r} is not {seed}.<ext> or "
                       f"{image_name(prompt_id, seed, '<ext>')} (<ext>: {'|'.join(IMAGE_EXTENSIONS)})")
    return Entry(image_name(prompt_id, seed, extension), prompt_id=prompt_id, seed=seed)


def _extract(path: Path, name: str, dest: Path, limits: Limits, budget: Budget,
             seen: dict[tuple[str, int], str]) -> list[Entry]:
    shard = _checked_file(path, name, limits, len(seen))
    entries, number = [], 0
    for group in range(shard.metadata.num_row_groups):
        try:
            rows = shard.read_row_group(group, columns=["prompt_id", "seed", "image", "sha256"]).to_pylist()
        except Exception as error:  # noqa: BLE001 - a damaged page, a lying header: pyarrow's many kinds
            raise Rejected(f"{name}: row group {group} cannot be read ({type(error).__name__}: "
                           f"{str(error)[:200]})") from None
        for row in rows:
            where = f"{name}: row {number}"
            number += 1
            image = row["image"] or {}
            entry = _row_entry(row["prompt_id"], row["seed"], image.get("path"), where)
            data = image.get("bytes")
            if not data:
                raise Rejected(f"{where} ({entry.path}): the image has no bytes; embed them (datasets.Image() "
                               "stores a file's bytes when the dataset is pushed or saved)")
            if row["sha256"] != hashlib.sha256(data).hexdigest():
                raise Rejected(f"{where} ({entry.path}): its sha256 {str(row['sha256'])[:70]!r} is not the sha256 "
                               "of its image's bytes")
            key = (entry.prompt_id, entry.seed)
            if key in seen:
                raise Rejected(f"{where}: a second image for prompt {entry.prompt_id} seed {entry.seed} "
                               f"(also {seen[key]})")
            seen[key] = where
            write_entry(dest, entry, iter([data]), limits.max_file_bytes, budget, f"{where} ({entry.path})")
            entries.append(entry)
    return entries

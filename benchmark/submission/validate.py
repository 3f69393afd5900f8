"""Validate a submission before any scoring: layout, manifest, coverage of the prompts, every image.

``stage`` copies a folder or zip into a staging folder (see ``archive``; an upload in Parquet form has its
rows unpacked there as files, ``shards.expand``) and checks it there, each check before what it needs is written
(``Depth``): its names from the archive's directory, before anything is written; its layout (manifest, names and
counts against the prompt set), once its manifests alone are staged; then every image; ``Report.keep`` turns the
staged copy into the kept one (manifest, Parquet shards, image table), so the bytes checked are the bytes scored. A
rejected submission's staging folder is removed: a rejected upload leaves nothing behind.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, UnidentifiedImageError
from pydantic import ValidationError

from benchmark.atomic import publish
from benchmark.datasets.prompts import DatasetUnavailable, PromptSet
from benchmark.errors import CultureLensError
from benchmark.images import ALLOWED_FORMATS, as_viewed
from benchmark.submission.shards import MAX_SHARD_BYTES, ImageRecord, expand, write_shards
from benchmark.submission.archive import Entry, Limits, Rejected, ServerFault, is_manifest, listed, storing
from benchmark.layout import IMAGES_DIR, MANIFEST, PARTS_DIR, SubmissionLayout
from benchmark.submission.manifest import Manifest
from benchmark.submission.space import Hold
from benchmark.words import counted

# PIL format name for each allowed extension.
FORMATS = {"png": "PNG", "jpg": "JPEG", "jpeg": "JPEG", "webp": "WEBP"}
MAX_LISTED = 20
# A split *name*, as the datasets library defines it; its slicing syntax ("test[:10]", "test[50%:]") would let
# a submission answer a subset of the prompts and still be ranked as a whole submission.
SPLIT_NAME = re.compile(r"\w+(\.\w+)*", re.ASCII)

IMAGES_SCHEMA = pa.schema([("prompt_id", pa.string()), ("seed", pa.int64()), ("path", pa.string()),
                           ("sha256", pa.string()), ("width", pa.int64()), ("height", pa.int64())])

PromptLoader = Callable[[Manifest], PromptSet]
Progress = Callable[[int, int], None]


class Depth(enum.IntEnum):
    """How far a check of a staged upload goes: ``stage_with`` runs the three in turn, each before what it stages
    next."""

    NAMES = 0  # its entries' names alone (parts, files outside them): nothing of the upload is written yet
    LAYOUT = 1  # and its manifests, staged alone: names and counts against the prompt set, before any image
    FULL = 2  # and every image


@dataclass
class Report:
    """What validation found. ``ok`` iff there are no errors; each error names the file and the reason.

    ``errors`` lists at most ``MAX_LISTED`` problems of a kind (then "... and N more like these"); ``problems``
    counts them all, and ``answered`` / ``images_missing`` say how much of the prompt set the submission covers
    once its layout could be checked against it: ``summary`` puts that in one line."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    manifest: Manifest | None = None
    prompts: PromptSet | None = None
    images: list[ImageRecord] = field(default_factory=list)
    content_hash: str | None = None
    folder: Path | None = None  # the staged copy, while it exists
    problems: int = 0
    answered: int | None = None  # prompts with at least one image or declared refusal
    images_missing: int = 0  # (prompt, seed) pairs with neither an image nor a manifest.missing entry

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, message: str) -> None:
        self.errors.append(message)
        self.problems += 1

    def error_group(self, messages: list[str], count: int | None = None) -> None:
        """Problems of one kind: the first ``MAX_LISTED`` listed, the rest counted (``count``: how many problems
        the messages hold, when one line says several, e.g. one line per prompt for its seeds)."""
        self.errors += _listed(messages)
        self.problems += len(messages) if count is None else count

    @property
    def summary(self) -> str:
        """One line before the details, e.g. "REJECTED: answered 3 of 992 prompts; 1,962 images missing"."""
        if self.ok:
            m = self.manifest
            return (f"OK: {m.model.name}: {len(self.images)} images for {len(self.prompts)} prompts of "
                    f"{self.prompts.label}, {len(m.missing)} declared missing")
        if self.answered is None:
            return f"REJECTED: {counted(self.problems, 'problem')}"
        parts = [f"answered {self.answered:,} of {len(self.prompts):,} prompts",
                 f"{counted(self.images_missing, 'image')} missing" if self.images_missing else "no image missing"]
        if other := self.problems - self.images_missing:
            parts.append(counted(other, "other problem"))
        return "REJECTED: " + "; ".join(parts)

    def keep(self, target: Path, max_shard_bytes: int = MAX_SHARD_BYTES, hold: Hold | None = None, *,
             submission_id: str | None = None, part: str | None = None) -> Path:
        """Move the staged copy of an accepted submission to ``target``: its manifest, its images as Parquet
        shards in (prompt, seed) order (``shards.write_shards``, each at most ``max_shard_bytes``, each row naming
        ``submission_id`` and ``part``, a store's; the image files are removed as the shards replace them) and its
        image list (``images.parquet``: prompt_id, seed, path, sha256, width, height). ``hold``: grown by the
        images' bytes before their shards are written beside them. If our disk fails meanwhile (or the space is
        full), the staged copy is removed and ServerFault raised."""
        if not self.ok or self.folder is None:
            raise ValueError("only an accepted, staged submission can be kept")
        images = sorted(self.images, key=lambda i: (i.prompt_id, i.seed))
        table = pa.Table.from_pylist([vars(i) for i in images], schema=IMAGES_SCHEMA)
        folder = self.folder
        try:
            if hold is not None:
                hold.grow(sum((folder / i.path).stat().st_size for i in images))
            with storing():
                write_shards(folder, ((i, (folder / i.path).read_bytes()) for i in images),
                             max_shard_bytes=max_shard_bytes, submission_id=submission_id, part=part)
                shutil.rmtree(folder / IMAGES_DIR)
                # Written last: its presence marks a validated folder (SubmissionLayout.is_validated).
                pq.write_table(table, SubmissionLayout(folder).images_table)
                publish(folder, target)
        except ServerFault:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            raise
        self.folder = Path(target)
        return self.folder

    def text(self) -> str:
        """Plain text for the CLI and logs: the summary line, then the details."""
        lines = [self.summary]
        if self.ok:
            lines.append(f"content hash: {self.content_hash}")
        else:
            lines += [f"  - {e}" for e in self.errors]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _listed(items: list[str]) -> list[str]:
    if len(items) <= MAX_LISTED:
        return items
    return items[:MAX_LISTED] + [f"... and {len(items) - MAX_LISTED} more like these"]


def read_manifest(folder: Path, report: Report) -> Manifest | None:
    """Parse with pydantic's own JSON parser, the one ``Store.manifest`` uses when scoring: what is accepted
    here is exactly what the worker reads (and no input can exhaust Python's recursion or int-parsing limits)."""
    path = folder / MANIFEST
    if not path.exists():
        report.error("manifest.json: missing (it must sit at the top of the submission)")
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        report.error("manifest.json: not UTF-8 text")
        return None
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as error:
        for problem in error.errors():
            if problem["type"] == "json_invalid":
                report.error(f"manifest.json: not valid JSON ({problem['msg'].removeprefix('Invalid JSON: ')})")
                continue
            where = ".".join(str(p) for p in problem["loc"]) or "(top level)"
            report.error(f"manifest.json: {where}: {problem['msg']}")
        return None


def check_coverage(entries: list[Entry], manifest: Manifest, prompts: PromptSet, report: Report) -> None:
    """Every (prompt, seed) has exactly one image or a declared reason; nothing else is there."""
    seeds = set(manifest.seeds)
    ordered = sorted(seeds)  # named in each unknown-seed message: once, and short, whatever the number of entries
    seeds_text = str(ordered) if len(ordered) <= 10 else f"[{', '.join(map(str, ordered[:10]))}, ...]"
    declared = {(m.prompt_id, m.seed) for m in manifest.missing}
    present: dict[tuple[str, int], str] = {}
    unknown_seeds, doubles, both = [], [], []
    strangers: dict[str, list[Entry]] = {}  # images of a prompt id not in the set, by prompt: one line each
    for entry in entries:
        if entry.prompt_id is None:
            continue
        key = (entry.prompt_id, entry.seed)
        if entry.prompt_id not in prompts:
            strangers.setdefault(entry.prompt_id, []).append(entry)
        elif entry.seed not in seeds:
            unknown_seeds.append(f"{entry.path}: seed {entry.seed} is not in the manifest's seeds {seeds_text}")
        elif key in present:
            doubles.append(f"{entry.path}: a second image for prompt {entry.prompt_id} seed {entry.seed} "
                           f"(also {present[key]})")
        elif key in declared:
            both.append(f"{entry.path}: exists, but manifest.missing lists it")
        present.setdefault(key, entry.path)
    unknown_prompts = [
        f"{found[0].path}: prompt id {pid!r} is not in {prompts.label}" if len(found) == 1 else
        f"{found[0].path} and {counted(len(found) - 1, 'more image', 'more images')} of prompt id {pid!r} (seeds "
        f"{seed_runs(e.seed for e in found)}): prompt id {pid!r} is not in {prompts.label}"
        for pid, found in ((p, sorted(f, key=lambda e: e.seed)) for p, f in strangers.items())]
    for m in manifest.missing:
        if m.prompt_id not in prompts:
            unknown_prompts.append(f"manifest.json: missing: prompt id {m.prompt_id!r} is not in {prompts.label}")
    lacking = {pid: [seed for seed in manifest.seeds if (pid, seed) not in present and (pid, seed) not in declared]
               for pid in prompts.table.index}
    absent = [f"images/{pid}/{seeds[0]}.*: no image for prompt {pid} seed {seeds[0]}, and manifest.missing does not "
              "list it" if len(seeds) == 1 else
              f"images/{pid}/*: no image for prompt {pid} seeds {seed_runs(seeds)}, and manifest.missing does not "
              "list them" for pid, seeds in lacking.items() if seeds]
    report.answered = len({pid for pid, _ in (*present, *declared) if pid in prompts})
    report.images_missing = sum(map(len, lacking.values()))
    report.error_group(unknown_prompts, sum(map(len, strangers.values())) + len(unknown_prompts) - len(strangers))
    for group in (unknown_seeds, doubles, both):
        report.error_group(group)
    report.error_group(absent, report.images_missing)


def seed_runs(seeds) -> str:
    """Seeds as people read a list of them: sorted, runs of consecutive ones joined ("0-19", "0, 2, 5-7")."""
    runs: list[list[int]] = []
    for seed in sorted(set(seeds)):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def check_image(folder: Path, entry: Entry, limits: Limits) -> tuple[ImageRecord | None, str | None]:
    """Decode one image fully, as scoring will (``benchmark.images``); return its record or the reason it is
    refused. The recorded size is the size a viewer shows (after EXIF rotation)."""
    path = folder / entry.path
    data = path.read_bytes()
    extension = entry.path.rsplit(".", 1)[1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path, formats=ALLOWED_FORMATS) as image:  # no other format's parser sees the bytes
                found = "JPEG" if image.format == "MPO" else image.format  # MPO: a JPEG with extra frames
                if found != FORMATS[extension]:
                    return None, f"{entry.path}: the file is {image.format or 'not an image'}, not {FORMATS[extension]} as its extension says"
                width, height = image.size
                if width * height > limits.max_pixels:
                    return None, f"{entry.path}: {width}x{height} pixels, over the limit of {limits.max_pixels} pixels"
                if min(width, height) < limits.min_side:
                    return None, f"{entry.path}: {width}x{height}, smaller than {limits.min_side} pixels on a side"
                width, height = as_viewed(image).size
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return None, f"{entry.path}: too many pixels (decompression bomb?)"
    except UnidentifiedImageError:
        head = data[:12]
        return None, f"{entry.path}: not an image (starts with {head!r}); images must be PNG, JPEG or WebP"
    except Exception as error:  # noqa: BLE001 - whatever a decoder raises on hostile bytes is a refusal
        reason = str(error).replace(f"{folder}/", "")  # a decoder may name the staged copy: say the entry only
        return None, f"{entry.path}: cannot be decoded ({type(error).__name__}: {reason})"
    digest = hashlib.sha256(data).hexdigest()
    return ImageRecord(entry.prompt_id, entry.seed, entry.path, digest, width, height), None


def content_hash(manifest: Manifest, images: list[ImageRecord]) -> str:
    """sha256 over the canonical manifest and the bytes of every image, in (prompt, seed) order.

    Identical submissions (same manifest content, same image bytes) get the same hash,
    however they were packed (zip or folder, file order, wrapper folder).
    """
    digest = hashlib.sha256()
    digest.update(json.dumps(manifest.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode("utf-8"))
    for image in sorted(images, key=lambda i: (i.prompt_id, i.seed)):
        digest.update(f"\n{image.prompt_id}/{image.seed}:{image.sha256}".encode())
    return "sha256:" + digest.hexdigest()


def image_set(manifest: Manifest, images: Iterable[tuple[str, str]]) -> str:
    """The digest of the images a submission (or a suite submission's part) answers its dataset with: sha256 over the
    dataset (repo:config:split) and each image's (prompt_id, sha256), sorted. The same images for the same prompts
    give the same digest whatever the model's name, the rest of the manifest, the seeds they are filed under and the
    packing: one image set is one row of the leaderboard (``leaderboard.intake`` refuses a second submission holding
    it). ``images``: the (prompt_id, sha256) pairs validation recorded (``ImageRecord``); no image is hashed again."""
    d = manifest.dataset
    lines = "".join(f"\n{prompt_id}:{sha256}" for prompt_id, sha256 in sorted(images))
    return "sha256:" + hashlib.sha256(f"{d.repo}:{d.config}:{d.split}{lines}".encode()).hexdigest()


def check_folder(folder: Path, entries: list[Entry], load_prompts: PromptLoader, limits: Limits = Limits(),
                 progress: Progress | None = None, depth: Depth = Depth.FULL) -> Report:
    """Validate an already staged submission folder, to ``depth`` (``stage_with``): ``NAMES`` finds nothing a
    submission's names can break that ``archive.parse_name`` let through; ``LAYOUT`` checks its manifest and the names
    and counts of its entries (the manifest alone is staged yet), the coverage of an upload in Parquet form left to
    the full check, once its rows are unpacked."""
    report = Report(folder=folder)
    if depth is Depth.NAMES:
        return report
    manifest = report.manifest = read_manifest(folder, report)
    if manifest is None:
        return report
    if manifest.culture_labels:  # accepted, so that older manifests stay valid, but never read
        report.warnings.append("manifest.json: culture_labels is ignored: relevance scores every image against each "
                               "country of the prompt set, the same labels for every submission; remove the field")
    if not SPLIT_NAME.fullmatch(manifest.dataset.split):
        report.error(f"manifest.json: dataset.split: {manifest.dataset.split!r} is not a split name such as 'test' "
                     "(letters, digits, '_', '.'); a submission answers every prompt of a split, so slices are refused")
        return report
    try:
        prompts = report.prompts = load_prompts(manifest)
    except DatasetUnavailable as error:
        report.error(f"manifest.json: dataset: {error}")
        return report
    if depth is Depth.LAYOUT and any(e.prompt_id is None and e.local.path != MANIFEST for e in entries):
        return report  # in Parquet form: its rows name the images
    check_coverage(entries, manifest, prompts, report)
    if report.errors or depth is Depth.LAYOUT:
        return report  # decoding thousands of images is pointless when the layout is wrong
    images = [e for e in entries if e.prompt_id is not None]
    if not images:
        report.error("images/: no image at all; a submission needs at least one (refusals alone score nothing)")
        return report
    refused = []
    started = time.monotonic()
    for done, entry in enumerate(images, start=1):
        record, problem = check_image(folder, entry, limits)
        if problem:
            refused.append(problem)
        else:
            report.images.append(record)
        if progress:
            progress(done, len(images))
        if time.monotonic() - started > limits.max_validation_seconds and done < len(images):
            report.error(f"images/: validation took longer than {limits.max_validation_seconds:g} s ({done} of "
                         f"{len(images)} images checked) and was stopped: use fewer images per prompt or smaller "
                         "image files, and time `culturelens validate` on the submission first")
            break
    report.error_group(refused)
    if report.ok:
        sizes = {(i.width, i.height) for i in report.images}
        g = manifest.generation
        if g.width and g.height and sizes != {(g.width, g.height)}:
            report.warnings.append(f"generation says {g.width}x{g.height} but the images are "
                                   f"{', '.join(f'{w}x{h}' for w, h in sorted(sizes)[:5])}")
        report.content_hash = content_hash(manifest, report.images)
    return report


class _RefusedEarly(CultureLensError):
    """A check refused an upload before its images were unpacked: ``report`` says why (caught by ``stage_with``,
    which returns that report)."""

    def __init__(self, report: Report):
        super().__init__(report.summary)
        self.report = report


Check = Callable[[Path, list[Entry], Depth], Report]
"""``check(folder, entries, depth)``: the report on a staged upload (``check_folder``)."""


def stage_with(source: Path, staging_root: Path, check: Check, limits: Limits, hold: Hold | None = None):
    """Copy ``source`` into a new folder under ``staging_root`` and return ``check(folder, entries, Depth.FULL)``,
    the report on the copy (a ``Rejected`` raised there is a rejection). Before that, in the order the bytes allow:
    the upload is listed from its directory (``archive.listed``: nothing written), its names are checked
    (``Depth.NAMES``), its manifests alone are copied and its layout checked (``Depth.LAYOUT``: linear in its entries),
    then the rest is copied; a check that refuses returns its report, and nothing more is written. What is copied is
    never more than the listing declares; ``hold`` (the server's ``space.Hold`` for this upload) is grown by that
    much before the first byte is. On success ``report.folder`` is the staged copy (the caller moves or removes it);
    on rejection the staged copy is already gone, and so it is when our own disk fails or the space is full
    (``ServerFault``: not the uploader's fault, so not a rejection)."""
    with storing():
        staging_root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="upload-", dir=staging_root))

    def passes(depth: Depth, entries: list[Entry]) -> None:
        early = check(folder, entries, depth)
        if early.errors if depth is Depth.NAMES else not early.ok:  # a names check makes no part's report yet
            raise _RefusedEarly(early)

    try:
        try:
            with listed(Path(source), limits) as listing:
                entries = listing.entries
                passes(Depth.NAMES, entries)
                if hold is not None:
                    hold.grow(listing.declared)
                listing.copy(folder, [m for m in listing.members if is_manifest(m)], limits)
                passes(Depth.LAYOUT, entries)
                listing.copy(folder, [m for m in listing.members if not is_manifest(m)], limits)
            report = check(folder, entries, Depth.FULL)
        except Rejected as error:
            report = Report()
            report.error(str(error))
        except _RefusedEarly as refused:
            report = refused.report
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if not report.ok:
        shutil.rmtree(folder, ignore_errors=True)
        report.folder = None
    return report


def stage(source: Path, staging_root: Path, load_prompts: PromptLoader, limits: Limits = Limits(),
          progress: Progress | None = None, hold: Hold | None = None) -> Report:
    """Copy ``source`` into a new folder under ``staging_root`` and validate it there (``stage_with``; ``hold``:
    the bytes staged are held in it). A suite submission is refused here: ``benchmark.submission.suite.stage`` takes
    both kinds."""

    def check(folder: Path, entries: list[Entry], depth: Depth) -> Report:
        if any(e.part for e in entries):
            raise Rejected(f"{PARTS_DIR}/: a suite submission, one folder per part; check it as one with "
                           "`culturelens validate` (benchmark.submission.suite.stage)")
        return check_folder(folder, entries if depth < Depth.FULL else expand(folder, entries, limits, hold),
                            load_prompts, limits, progress, depth)

    return stage_with(source, staging_root, check, limits, hold)

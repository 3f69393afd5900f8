"""A suite submission: one model's images for the parts of a suite (``benchmark.suite``), one submission folder per
part, ``parts/<part>/`` (``benchmark.layout``), each manifest naming its part (``suite``).

Each part is checked exactly as a submission is (``validate.check_folder``: manifest, coverage of every prompt of
its dataset, every image), and also against the suite: the part exists, its dataset is the part's (repo, config,
split, and the prompt rows the suite pins), its seeds are the part's, and every part is the same model. A
submission may hold some parts only: it is scored on those and the report names the ones missing. A part whose
dataset is not served where it is checked (a server holding some parts of the suite) is set aside, unchecked and
not kept, and the report says which and why: the others are taken, as the Submit tab promises partial submissions
are scored on what is served. One rejected part rejects the upload, as one bad image rejects a submission: what is
kept is always scorable whole.

``stage`` takes any upload, a plain submission or a suite submission, and returns a ``Report`` or a
``SuiteReport``; both answer ``ok``, ``summary``, ``text()``, ``content_hash`` and ``keep(target)``.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.atomic import publish
from benchmark.datasets.prompts import DatasetNotServed, DatasetUnavailable, PromptSet
from benchmark.layout import PARTS_DIR, SuiteLayout, part_folder
from benchmark.submission.archive import Entry, Limits, storing
from benchmark.submission.manifest import Manifest
from benchmark.submission.shards import MAX_SHARD_BYTES, expand
from benchmark.submission.space import Hold
from benchmark.submission.validate import Depth, PromptLoader, Report, check_folder, read_manifest, stage_with
from benchmark.suite import Part, Suite

StageProgress = Callable[[str, int, int], None]  # (stage, done, total), e.g. a ``benchmark.progress.Bars``


@dataclass
class SuiteReport:
    """What validating a suite submission found: a ``Report`` per part present and checked (in the suite's order),
    the parts present but set aside (``set_aside``: part -> why, in a sentence; never kept), and the problems of
    the whole (a part the suite does not have, two models). ``ok`` iff there is no problem, every part checked is
    accepted and there is at least one."""

    suite: Suite
    parts: dict[str, Report] = field(default_factory=dict)
    set_aside: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    folder: Path | None = None  # the staged copy, while it exists
    images_checked: bool = True  # False: a report of the layouts alone (a part refused there stops the rest)

    @property
    def ok(self) -> bool:
        return bool(self.parts) and not self.errors and all(r.ok for r in self.parts.values())

    def error(self, message: str) -> None:
        """A problem of the whole (the intake's: the same content submitted before, say)."""
        self.errors.append(message)

    @property
    def missing(self) -> list[str]:
        """The suite's parts this submission does not hold: it is scored without them."""
        return [name for name in self.suite.names if name not in self.parts and name not in self.set_aside]

    @property
    def manifest(self) -> Manifest | None:
        """The first part's manifest: the model (every part names the same one once accepted)."""
        return next((r.manifest for r in self.parts.values() if r.manifest is not None), None)

    @property
    def warnings(self) -> list[str]:
        return [f"{name}: {w}" for name, r in self.parts.items() for w in r.warnings]

    @property
    def content_hash(self) -> str | None:
        """sha256 over each part's name and content hash, in part order: the same parts give the same hash
        however they were packed."""
        if not self.ok:
            return None
        digest = hashlib.sha256()
        for name, report in sorted(self.parts.items()):
            digest.update(f"{name}:{report.content_hash}\n".encode())
        return "sha256:" + digest.hexdigest()

    @property
    def summary(self) -> str:
        """One line, e.g. "OK: SDXL: 2 of 4 parts of culturelens/suite v1 (cube-1k 9,920 images, ...); missing:
        ..." or "REJECTED: part cube-1k: answered 3 of 992 prompts; ..."."""
        missing = f"; missing: {', '.join(self.missing)} (scored on the parts present)" if self.missing else ""
        aside = (f"; set aside: {', '.join(self.set_aside)} (their datasets are not served here: not checked, not "
                 "kept)" if self.set_aside else "")
        if self.ok:
            held = ", ".join(f"{name} {len(r.images):,} images" for name, r in self.parts.items())
            return (f"OK: {self.manifest.model.name}: {len(self.parts)} of {len(self.suite.parts)} parts of "
                    f"{self.suite.label} ({held}){aside}{missing}")
        if not self.parts and not self.errors and self.set_aside:
            return (f"REJECTED: no part of this upload is served here ({', '.join(self.set_aside)} set aside: their "
                    "datasets are not served here)")
        if not self.parts and not self.errors:
            return f"REJECTED: no part of {self.suite.label} ({', '.join(self.suite.names)}) under {PARTS_DIR}/"
        refused = [f"part {name}: {r.summary.removeprefix('REJECTED: ')}" for name, r in self.parts.items() if not r.ok]
        return "REJECTED: " + "; ".join(refused + self.errors[:1]) + aside + missing

    def text(self) -> str:
        """The summary line, then each part's report (indented) and the problems of the whole."""
        lines = [self.summary]
        if self.ok:
            lines.append(f"content hash: {self.content_hash}")
        refused = ", ".join(name for name, report in self.parts.items() if not report.ok) or "another part"
        for name, report in self.parts.items():
            if report.ok and not self.images_checked:  # its layout passed; its images were never looked at
                lines.append(f"  part {name}: not checked (its manifest and files are laid out right; its images "
                             f"are checked once {refused} is put right)")
                continue
            lines += [f"  part {name}: {report.summary}"] + [f"    - {e}" for e in report.errors]
        lines += [f"  part {name}: SET ASIDE: {why}" for name, why in self.set_aside.items()]
        lines += [f"  - {e}" for e in self.errors]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def keep(self, target: Path, max_shard_bytes: int = MAX_SHARD_BYTES, hold: Hold | None = None, *,
             submission_id: str | None = None) -> Path:
        """Keep the staged copy of an accepted suite submission at ``target``: each part as ``Report.keep``
        keeps a submission (Parquet shards of at most ``max_shard_bytes`` naming ``submission_id`` and the part,
        and image table, held in ``hold``) under ``target/parts/<part>``, all published together (a reader sees
        every part or none)."""
        if not self.ok or self.folder is None:
            raise ValueError("only an accepted, staged suite submission can be kept")
        staged = self.folder
        with storing():
            kept = Path(tempfile.mkdtemp(prefix=".kept-", dir=staged.parent))
            (kept / PARTS_DIR).mkdir()
        try:
            for name, report in self.parts.items():
                report.keep(kept / part_folder(name), max_shard_bytes, hold, submission_id=submission_id, part=name)
            with storing():
                publish(kept, target)
        except BaseException:
            shutil.rmtree(kept, ignore_errors=True)
            shutil.rmtree(staged, ignore_errors=True)
            self.folder = None
            raise
        shutil.rmtree(staged, ignore_errors=True)
        self.folder = Path(target)
        return self.folder


def _model(manifest: Manifest) -> tuple:
    m = manifest.model
    return m.name, m.id, m.revision, m.type


def check_part(folder: Path, entries: list[Entry], part: Part, suite: Suite, load_prompts: PromptLoader,
               limits: Limits, progress: Callable[[int, int], None] | None, depth: Depth = Depth.FULL,
               hold: Hold | None = None) -> Report:
    """One part's folder, checked as a submission against the part's dataset, seeds and pinned prompt rows, to
    ``depth`` (``LAYOUT`` or ``FULL``, as ``validate.check_folder``; ``hold``: the images of its Parquet rows are
    held in it). DatasetNotServed, once its manifest names the part's dataset, where that dataset is not served."""
    report = Report(folder=folder)
    manifest = read_manifest(folder, report)
    if manifest is None:
        return report
    expected = f'{{"repo": "{suite.repo}", "version": {suite.version}, "part": "{part.name}"}}'
    if manifest.suite is None:
        report.error(f"manifest.json: suite: missing; a part of a suite submission names its part: {expected}")
    elif (manifest.suite.repo, manifest.suite.version, manifest.suite.part) != (suite.repo, suite.version, part.name):
        s = manifest.suite
        report.error(f"manifest.json: suite: names {s.repo} v{s.version} part {s.part!r}, but this folder is part "
                     f"{part.name!r} of {suite.label}: {expected}")
    d, pin = manifest.dataset, part.dataset
    if (d.repo, d.config, d.split) != (pin.repo, pin.config, pin.split):
        report.error(f"manifest.json: dataset: {d.repo}:{d.config}:{d.split}, but part {part.name!r} answers {pin}")
    if sorted(manifest.seeds) != sorted(part.seeds):
        report.error(f"manifest.json: seeds: part {part.name!r} is generated with the seeds {_seeds(part.seeds)}, "
                     f"not {_seeds(manifest.seeds)}")
    if report.errors:
        return report

    try:  # before a file of the part is read: a part whose dataset is not served is set aside (``check_suite``)
        prompts = load_prompts(manifest)
    except DatasetNotServed:
        raise
    except DatasetUnavailable as error:  # a copy that cannot be read: as ``check_folder`` says it
        report.error(f"manifest.json: dataset: {error}")
        return report

    def pinned(m: Manifest) -> PromptSet:  # ``m`` names the part's dataset, as ``manifest`` does
        if pin.digest is not None and prompts.digest != pin.digest:
            raise DatasetUnavailable(f"the prompt rows of {pin} served here (digest {prompts.digest}) are not the "
                                     f"ones {suite.label} pins (digest {pin.digest}); a submission generated "
                                     "for a suite folder is checked against it: `--suite DIR`, the folder "
                                     "`generate --suite DIR` read")
        return prompts

    return check_folder(folder, entries if depth < Depth.FULL else expand(folder, entries, limits, hold), pinned,
                        limits, progress, depth)


def _seeds(seeds) -> str:
    ordered = sorted(seeds)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(map(str, ordered[:10])) + (", ..." if len(ordered) > 10 else "")


def check_suite(folder: Path, entries: list[Entry], suite: Suite, load_prompts: PromptLoader,
                limits: Limits = Limits(), progress: StageProgress | None = None,
                depth: Depth = Depth.FULL, hold: Hold | None = None) -> SuiteReport:
    """Validate an already staged suite submission folder: its names (every file in a part the suite has), then each
    part present, then the whole; ``Depth.NAMES``: its names only (nothing of it is staged yet), ``LAYOUT``: as
    ``validate.check_folder``; ``hold``: as ``check_part``'s."""
    report = SuiteReport(suite, folder=folder, images_checked=depth is Depth.FULL)
    by_part: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.part is None:
            report.errors.append(f"{entry.path}: a suite submission holds only {PARTS_DIR}/<part>/ folders; this file "
                                 "sits outside them")
        else:
            by_part.setdefault(entry.part, []).append(entry.local)
    unknown = sorted(set(by_part) - set(suite.names))
    if unknown:
        more = f"; {len(unknown) - 1:,} more parts of this upload are not the suite's either" if unknown[1:] else ""
        report.errors.append(f"{PARTS_DIR}/{unknown[0]}: {suite.label} has no part {unknown[0]!r} (its parts: "
                             f"{', '.join(suite.names)}){more}")
    if report.errors or depth is Depth.NAMES:
        return report
    for part in suite.parts:
        if part.name in by_part:
            stage = f"checking images ({part.name})"
            try:
                report.parts[part.name] = check_part(
                    folder / part_folder(part.name), by_part[part.name], part, suite, load_prompts, limits,
                    progress and (lambda done, total, s=stage: progress(s, done, total)), depth, hold)
            except DatasetNotServed as error:  # its message may name where it was looked for: not said
                report.set_aside[part.name] = (f"its dataset {error.repo} is not served here, so this part is neither "
                                               "checked nor kept; the rest of the upload is taken without it")
    models = {name: _model(r.manifest) for name, r in report.parts.items() if r.manifest is not None}
    if len(set(models.values())) > 1:
        first, *others = models
        other = next(n for n in others if models[n] != models[first])
        report.errors.append(f"{part_folder(other)}: model {models[other][0]!r} ({models[other][1]}) differs from "
                             f"{part_folder(first)}'s {models[first][0]!r} ({models[first][1]}): a suite submission "
                             "is one model's images")
    return report


def stage(source: Path, staging_root: Path, suite: Suite, load_prompts: PromptLoader, limits: Limits = Limits(),
          progress: StageProgress | None = None, hold: Hold | None = None) -> Report | SuiteReport:
    """Copy ``source`` (a folder or ``.zip``: a plain or a suite submission) into a new folder under
    ``staging_root`` and validate it there (``validate.stage_with``: what is left behind, and when; ``hold``: the
    bytes staged are held in it): a ``SuiteReport`` for a suite submission (checked against ``suite``), else the
    ``Report`` of a submission."""

    def check(folder: Path, entries: list[Entry], depth: Depth) -> Report | SuiteReport:
        if any(e.part for e in entries):
            return check_suite(folder, entries, suite, load_prompts, limits, progress, depth, hold)
        checking = progress and (lambda done, total: progress("checking images", done, total))
        return check_folder(folder, entries if depth < Depth.FULL else expand(folder, entries, limits, hold),
                            load_prompts, limits, checking, depth)

    return stage_with(source, staging_root, check, limits, hold)


def validated_hash(folder: Path) -> str:
    """The content hash of a validated (kept) submission folder, plain or suite, as its report gave it."""
    import pyarrow.parquet as pq

    from benchmark.layout import SubmissionLayout
    from benchmark.submission.validate import ImageRecord, content_hash

    def of(layout: SubmissionLayout) -> str:
        manifest = Manifest.model_validate_json(layout.manifest.read_bytes())
        return content_hash(manifest, [ImageRecord(**row) for row in pq.read_table(layout.images_table).to_pylist()])

    parts = SuiteLayout(Path(folder)).parts
    if not parts:
        return of(SubmissionLayout(Path(folder)))
    digest = hashlib.sha256()
    for name, layout in sorted(parts.items()):
        digest.update(f"{name}:{of(layout)}\n".encode())
    return "sha256:" + digest.hexdigest()


def is_suite_upload(source: Path) -> bool:
    """Whether a folder or ``.zip`` holds a suite submission (``parts/``), by its names alone (nothing is read or
    checked: ``stage`` does that; a zip whose directory ``stage`` would refuse before reading it is not read here
    either)."""
    import zipfile

    from benchmark.submission.archive import strip_wrapper
    from benchmark.submission.zip_directory import refusal

    source = Path(source)
    if source.is_dir() and not source.is_symlink():
        return (source / PARTS_DIR).is_dir()
    try:
        with open(source, "rb") as raw:
            if refusal(raw, source.name, Limits().max_files):
                return False
            with zipfile.ZipFile(raw) as archive:
                names = [n for n in archive.namelist() if not n.endswith("/")]
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    wrapper = strip_wrapper(names) if names else ""
    return any(n[len(wrapper):].startswith(f"{PARTS_DIR}/") for n in names)

"""``culturelens reproduce RESULT``: redo the scoring a result's run.json records, and compare.

Every result's ``run.json`` records how it was scored: the metric settings
(every declared metric setting, ``benchmark.tracks.settings_declared``, with the environment's fallbacks
resolved) and
the tracks chosen (``settings``), each backbone's spec and the revision of its
weights (``backbone_specs``, ``backbones``), the batch size, the dataset
(``repo:config:split@fingerprint``, and ``dataset_digest``, the content of its
rows), the seeds and the harness version.
``reproduce`` rebuilds the metrics from that record, checks that the backbones
and the dataset are still the ones recorded (and refuses when they are not),
scores the stored submission again into a temporary folder with a fresh
embedding cache (so that no cached embedding hides a difference), and prints,
per metric, the largest absolute difference over the per-image values and over
the aggregate values.

A suite submission's result records the dataset, its digest and the seeds per part (``parts``): each part is
checked against its own record, and the submission is scored again as ``culturelens score`` scored it
(``benchmark.suite_scoring.score``: each part with its tracks, against the suite the result names).

A result may come from anyone (a copied store, a shared ``score`` output), so nothing in it is trusted before it is
read: no path of the bundle (the results folder, the submission, the dataset folders it answers, and the embedding
cache with ``--use-cache``) may be a symbolic link or a special file (``refuse_links``: a link could make reproduce
read, or write to, any file of the user's), and every table (the result's three, each part's manifest, image table
and shards' footers) is read and checked before anything is loaded or scored (``read_result``,
``check_submission_tables``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark import layout
from benchmark.errors import CultureLensError
from benchmark.layout import ScoreOutput, holds_validated_submission, submission_layouts
from benchmark.run_record import RunRecord

# What run.json must hold for a result to be reproduced (older results lack the first four).
RECORDED = ("settings", "backbone_specs", "batch_size", "dataset_digest", "backbones", "metrics", "dataset",
            "seeds", "harness_version", "submission_id")
# What a suite result records per part instead (under ``parts``: each part's own dataset and seeds).
PART_RECORDED = ("dataset_digest", "dataset", "seeds")


class ReproduceError(CultureLensError):
    """The result cannot be reproduced as asked (a user error: the message says why, in one sentence)."""


@dataclass(frozen=True)
class Target:
    """Where a result, its submission, its datasets and its embedding cache are, and the bundle that holds them
    (``home``: the store, or the ``score`` output folder)."""

    result: Path
    run: RunRecord
    submission: Path
    datasets_root: Path
    cache: Path
    home: Path

    def refuse_links(self, use_cache: bool) -> None:
        """``refuse_links`` for what reproduce reads of the bundle besides the result and the submission (which
        ``locate`` checked): its datasets (a store's own) and, with ``use_cache``, its embedding cache and SQLite's
        files beside it, and their folder inside the bundle."""
        if self.datasets_root.is_relative_to(self.home):
            refuse_dataset_links(self.datasets_root)
        if use_cache:
            above = len(self.cache.relative_to(self.home).parts) - 1  # cache/ of a store
            for name in ("", "-wal", "-shm", "-journal"):
                refuse_links(self.cache.with_name(self.cache.name + name), above, written=True)


def locate(result: str, store: Path, submission: str | None) -> Target:
    """Resolve RESULT (a results folder, or a submission id of ``store``) and the validated submission it scored:
    ``--submission``, else ``STORE/submissions/<id>`` next to a store's results, else ``OUT/submission`` next to
    the results of ``culturelens score --out OUT``."""
    folder = Path(result)
    if not folder.is_dir():
        if not layout.is_submission_id(result):
            raise ReproduceError(f"{result} is neither a results folder nor a submission id")
        folder = layout.results_folder(store, result)
        if not folder.is_dir():
            raise ReproduceError(f"the store {store} has no results for submission {result}")
    folder = Path(os.path.abspath(folder))
    refuse_links(folder, above=1)  # results/<id>/ and results/ of the bundle
    try:
        run = RunRecord.parse((folder / layout.RUN).read_bytes())
    except OSError as error:
        raise ReproduceError(f"{folder} holds no readable run.json ({error.__class__.__name__}): not a results "
                             "folder") from None
    if run is None:
        raise ReproduceError(f"{folder}/run.json is not a run record (a JSON object of its fields): not a results "
                             "folder")
    if not layout.is_submission_id(run.submission_id or ""):
        raise ReproduceError(f"{folder}/run.json names submission {shown(run.submission_id)}, which is not a "
                             "submission id (letters, digits, '-' and '_'): a record never chooses a path")
    missing = unrecorded(run)
    if missing:
        raise ReproduceError(f"{folder}/run.json does not record {', '.join(missing)}: it was written before results "
                             "recorded their scoring settings, so rescore the submission to make it reproducible")
    home = folder.parent.parent  # STORE or OUT, of STORE/results/<id> or OUT/results/<id>
    in_store = home / layout.SUBMISSIONS / run.submission_id
    if submission:
        staged = Path(submission)
        refuse_links(staged)
    else:
        refuse_links(in_store, above=1)
        staged = in_store if holds_validated_submission(in_store) else ScoreOutput(home).submission.folder
        refuse_links(staged)
    if not holds_validated_submission(staged) or \
            not all(part.manifest.exists() for part in submission_layouts(staged).values()):
        raise ReproduceError(f"no validated submission (manifest.json and images.parquet) in {staged}: pass "
                             "--submission with the folder `culturelens score` or the store keeps")
    if staged == in_store:
        return Target(folder, run, staged, home / layout.DATASETS, home / layout.STORE_CACHE, home)
    return Target(folder, run, staged, Path(store) / layout.DATASETS, ScoreOutput(home).cache, home)


def refuse_links(path: Path, above: int = 0, *, written: bool = False) -> None:
    """A ReproduceError when ``path``, one of the ``above`` folders it is in, or anything under it is a symbolic link
    or a special file (a FIFO, a device, a socket), which reproduce would follow or block on; when ``written`` (the
    embedding cache, which reproduce writes with ``--use-cache``), also when ``path`` is a file with other names (a
    hard link). Paths that do not exist pass: nothing is read from them. Folders are walked without following
    links."""
    for place in [*reversed(path.parents[:above]), path]:
        try:
            mode = place.lstat()
        except FileNotFoundError:
            return
        _regular(place, mode.st_mode)
        if written and place == path and stat.S_ISREG(mode.st_mode) and mode.st_nlink > 1:
            raise ReproduceError(f"{shown(place)} has {mode.st_nlink} names (hard links): reproduce would write to "
                                 "a file that is also elsewhere; copy it in its place, or leave out --use-cache")
    if path.is_dir():
        for root, folders, files in os.walk(path):  # links are not followed: each is refused below
            for name in folders + files:
                _regular(Path(root, name), os.lstat(Path(root, name)).st_mode)


def refuse_dataset_links(root: Path) -> None:
    """``refuse_links`` for a store's ``datasets/`` folder, but for the one link a store makes itself: a store
    serving a suite folder links each of its datasets to that folder's copy (``leaderboard.served_suite``), so a
    dataset folder may be a link to a folder of the same name in the ``datasets/`` of a suite folder (one holding
    ``suite.json``), itself holding no link. Any other link is refused."""
    from benchmark.suite import DEFINITION

    try:
        mode = root.lstat()
    except FileNotFoundError:
        return
    _regular(root, mode.st_mode)
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if not entry.is_symlink():
            refuse_links(entry)
            continue
        target = entry.resolve()
        if not (target.is_dir() and target.name == entry.name and target.parent.name == layout.DATASETS
                and (target.parent.parent / DEFINITION).is_file()):
            raise ReproduceError(f"{shown(entry)} is a symbolic link, and not one a store serving a suite makes (to "
                                 f"a suite folder's datasets/{entry.name}): reproduce reads no other link in a "
                                 "result, its submission, its datasets or its cache (a link could point at any file "
                                 "of yours); put a copy of what it points to in its place")
        refuse_links(target)


def _regular(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise ReproduceError(f"{shown(path)} is a symbolic link: reproduce reads no link in a result, its submission, "
                             "its datasets or its cache (a link could point at any file of yours); put a copy of what "
                             "it points to in its place")
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise ReproduceError(f"{shown(path)} is not a file nor a folder (a FIFO, a device or a socket): reproduce "
                             "reads only regular files")


# The columns of each result table that the comparison reads (``compare``); the curves are checked, not compared.
RESULT_COLUMNS = {layout.PER_IMAGE: ("metric", "prompt_id", "seed", "image_sha256", "value"),
                  layout.AGGREGATES: ("metric", "slice", "slice_value", "value"), layout.CURVES: ()}


def read_result(folder: Path) -> dict[str, pd.DataFrame]:
    """The result's tables (``RESULT_COLUMNS``), each read whole: a ReproduceError naming one that is missing, is no
    Parquet table (damaged) or lacks a column the comparison reads. Read before anything is scored, and kept for the
    comparison."""
    import pyarrow as pa

    tables = {}
    for name, columns in RESULT_COLUMNS.items():
        try:
            tables[name] = pd.read_parquet(folder / name)
        except (OSError, pa.ArrowException) as error:
            raise ReproduceError(f"{shown(folder / name)} cannot be read as a Parquet table ({type(error).__name__}: "
                                 f"{shown(error)[:200]}): the result is damaged, so nothing was scored; restore the "
                                 "results folder, or rescore the submission") from None
        if missing := [column for column in columns if column not in tables[name].columns]:
            raise ReproduceError(f"{shown(folder / name)} has no column {', '.join(missing)}: it is not a result "
                                 "table, so nothing was scored")
    return tables


def check_submission_tables(submission: Path) -> None:
    """Each part of the validated ``submission``: its manifest a manifest, its image table a Parquet table read
    whole, each shard's footer (schema and row groups) readable; a ReproduceError naming the first that is not,
    before anything is scored. (A shard's pages, the images' bytes, are read as it is scored.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pydantic import ValidationError

    from benchmark.submission import Manifest

    for part in submission_layouts(submission).values():
        try:
            Manifest.model_validate_json(part.manifest.read_bytes())
        except ValidationError as error:
            raise ReproduceError(f"{shown(part.manifest)} is not a submission manifest ({error.error_count()} "
                                 "problems): the submission is damaged, so nothing was scored") from None
        for table, read in ((part.images_table, pq.read_table),
                            *((shard, pq.read_metadata) for shard in part.shards)):
            try:
                read(table)
            except (OSError, pa.ArrowException) as error:
                raise ReproduceError(f"{shown(table)} cannot be read as a Parquet table ({type(error).__name__}: "
                                     f"{shown(error)[:200]}): the submission is damaged, so nothing was "
                                     "scored") from None


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def shown(text: object) -> str:
    """Text a record holds, as a terminal may print it: every control character (an escape sequence's ESC, a
    carriage return, bidirectional overrides) written as its escape (``\\x1b``), never sent to the terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def fetched_settings(run: RunRecord) -> dict[str, str]:
    """The recorded metric settings (of the result, or of each part of a suite result) whose value is a URL:
    setting -> URL. Reproducing would fetch each."""
    records = [run, *(run.parts or {}).values()]
    return {name: value for record in records if record.settings is not None
            for name, value in record.settings.metric_settings.items()
            if isinstance(value, str) and _URL.match(value)}


def unrecorded(run: RunRecord) -> list[str]:
    """What ``run`` lacks of ``RECORDED``; for a suite result, what each part lacks of ``PART_RECORDED``, as
    ``part: key``."""
    if not run.is_suite:
        return [key for key in RECORDED if getattr(run, key) is None]
    return [key for key in RECORDED if key not in PART_RECORDED and getattr(run, key) is None] + \
        [f"{name}: {key}" for name, part in (run.parts or {}).items() for key in PART_RECORDED
         if getattr(part, key) is None]


def check_datasets(run: RunRecord, submission: Path, datasets_root: Path) -> None:
    """Each part of ``submission`` (or the submission itself) that ``run`` scored holds the seeds it records, and
    its dataset loads from ``datasets_root`` with the recorded name and rows; a ReproduceError naming the part
    otherwise."""
    from benchmark.datasets.prompts import DatasetUnavailable, load_prompts_for
    from benchmark.submission import Manifest

    layouts = submission_layouts(submission)
    for name, record in run.scored_parts.items():
        where = f"part {shown(name)}: " if name else ""
        if name not in layouts:
            raise ReproduceError(f"the submission in {shown(submission)} has no {shown(name)} part, which the result "
                                 "scored")
        manifest = Manifest.model_validate_json(layouts[name].manifest.read_bytes())
        if list(manifest.seeds) != list(record.seeds):
            raise ReproduceError(f"{where}the submission in {shown(layouts[name].folder)} has seeds "
                                 f"{list(manifest.seeds)}, the result was scored on seeds {shown(record.seeds)}")
        try:
            prompts = load_prompts_for(manifest, datasets_root)
        except DatasetUnavailable as error:
            raise ReproduceError(f"{where}{shown(error)}") from None
        dataset = f"{prompts.repo}:{prompts.config}:{prompts.split}@{prompts.fingerprint}"
        if dataset != record.dataset or prompts.digest != record.dataset_digest:
            raise ReproduceError(f"{where}the dataset changed since the result was scored: it was "
                                 f"{shown(record.dataset)} with rows {shown(record.dataset_digest)}, it is now "
                                 f"{shown(dataset)} with rows {prompts.digest}")


_PINNED = re.compile(r"sha256 ([0-9a-f]{64})")


def check_fetched(run: RunRecord, fetches: dict[str, str], built: list) -> None:
    """A metric built from a fetched file (``fetched_settings``: W1KP's calibration) names the file's sha256 in its
    version (``variability.Calibration.sha256``), as the result's record does, so other bytes fetched now change a
    built metric's version: a ReproduceError before anything is loaded, scored or written, naming the file and both
    digests where the versions hold them."""
    changed = [m for m in built if (run.metrics or {}).get(m.info.name, m.info.version) != m.info.version]
    if not fetches or not changed:
        return
    files = ", ".join(f"{shown(url)[:200]} (for {shown(name)})" for name, url in fetches.items())
    for metric in changed:
        pinned, fetched = _PINNED.search(run.metrics[metric.info.name]), _PINNED.search(metric.info.version)
        if pinned and fetched:
            raise ReproduceError(f"the file fetched from {files} has sha256 {fetched.group(1)}, but the result was "
                                 f"scored with a file of sha256 {pinned.group(1)} (metric {shown(metric.info.name)}): "
                                 "it is not the file the result pins, so nothing was scored; serve the pinned file "
                                 "at that address, or rescore the submission")
    raise ReproduceError(f"a file fetched from {files} is not the one the result pins: the versions of "
                         f"{', '.join(shown(m.info.name) for m in changed)} differ from those recorded, so nothing "
                         "was scored")


def suite_of(run: RunRecord, suite: str | None, datasets_root: Path):
    """The suite a suite result answers (``--suite``, else the default, opened as ``culturelens score`` opens it:
    a ``suite_assets.SuiteRef``), checked to be the repo and version the result names; None for a plain result."""
    from benchmark.suite import SuiteError
    from benchmark.suite_assets import open_suite

    if not run.is_suite:
        return None
    try:
        ref = open_suite(suite, datasets_root)
    except SuiteError as error:
        raise ReproduceError(str(error)) from None
    recorded = run.suite
    if (ref.suite.repo, ref.suite.version) != (recorded.repo, recorded.version):
        raise ReproduceError(f"the result answers {shown(recorded.repo)} {shown(recorded.version)}, the suite given "
                             f"is {ref.suite.repo} {ref.suite.version}: pass the one it answers with --suite")
    return ref


def registry_for(run: RunRecord, backbones_file: str | None) -> dict:
    """The registry to rescore with: each backbone the result used as recorded, unless the backbones file names
    it, which must then give weights of the same uid; every other id as ``load_registry`` has it."""
    from benchmark.encoders.spec import DEFAULT_REGISTRY, BackboneSpec, load_registry

    try:
        registry = load_registry(backbones_file)
    except ValueError as error:
        raise ReproduceError(str(error)) from None
    for backbone_id, recorded in run.backbone_specs.items():
        try:
            spec = BackboneSpec.from_dict(recorded, f"run.json: backbone {backbone_id}")
        except ValueError as error:
            raise ReproduceError(f"the recorded backbones cannot be used here: {shown(error)}") from None
        given = registry.get(backbone_id)
        if given is None or given == DEFAULT_REGISTRY.get(backbone_id):
            registry[backbone_id] = spec
        elif given.uid != spec.uid:
            raise ReproduceError(f"the backbones file points {shown(backbone_id)} at {given.uid}, but the result "
                                 f"was scored with {shown(spec.uid)}")
    return registry


@dataclass(frozen=True)
class Difference:
    """One metric's largest absolute differences (None: no such rows; inf: a value on one side only), and how
    many of its per-image and aggregate rows one side has and the other lacks: a row that is not there is
    reported missing, never taken for a null value and so for an equal one."""

    metric: str
    per_image: float | None
    aggregate: float | None
    per_image_missing: int = 0
    aggregate_missing: int = 0

    def within(self, tolerance: float) -> bool:
        return not (self.per_image_missing or self.aggregate_missing) and \
            all(d is None or d <= tolerance for d in (self.per_image, self.aggregate))


def largest_differences(recorded: pd.DataFrame, reproduced: pd.DataFrame, keys: list[str]
                        ) -> dict[str, tuple[float | None, int]]:
    """Metric -> (the largest |value difference| between rows matched on ``keys`` and their order among rows with
    the same keys, or None when no row is on both sides; how many rows are on one side only). Two missing values
    are equal; a value missing on one side is an infinite difference; a row on one side only is missing, whatever
    its value (a recorded null with no reproduced row is not 'equal')."""
    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[[*keys, "value"]].copy()
        for key in keys:  # object, not Arrow, strings: pandas cannot merge an empty Arrow-backed key column
            frame[key] = frame[key].astype("string").fillna("").astype(object)
        return frame.assign(occurrence=frame.groupby(keys).cumcount())

    both = keyed(recorded).merge(keyed(reproduced), on=[*keys, "occurrence"], how="outer",
                                 suffixes=("_recorded", "_reproduced"), indicator=True)
    a, b = both["value_recorded"].astype(float), both["value_reproduced"].astype(float)
    gap = (a - b).abs().where(a.notna() & b.notna(), float("inf")).where(a.notna() | b.notna(), 0.0)
    paired = both["_merge"] == "both"
    out = {}
    for metric, rows in both.groupby("metric").groups.items():
        matched = gap[rows][paired[rows]]
        out[str(metric)] = (float(matched.max()) if len(matched) else None, int((~paired[rows]).sum()))
    return out


def compare(recorded: dict[str, pd.DataFrame], reproduced: dict[str, pd.DataFrame]) -> list[Difference]:
    """Per metric (of either result's tables, ``read_result``), the largest differences of the per-image and
    aggregate values, and the rows present on one side only."""
    per_image = largest_differences(recorded[layout.PER_IMAGE], reproduced[layout.PER_IMAGE],
                                    list(RESULT_COLUMNS[layout.PER_IMAGE][:-1]))
    aggregates = largest_differences(recorded[layout.AGGREGATES], reproduced[layout.AGGREGATES],
                                     list(RESULT_COLUMNS[layout.AGGREGATES][:-1]))
    none = (None, 0)
    return [Difference(metric, per_image.get(metric, none)[0], aggregates.get(metric, none)[0],
                       per_image.get(metric, none)[1], aggregates.get(metric, none)[1])
            for metric in sorted(per_image.keys() | aggregates.keys())]


def report(differences: list[Difference], tolerance: float) -> str:
    """The comparison as a table, one line per metric ('missing' where rows are on one side only), and a closing
    verdict."""
    def number(value: float | None, missing: int) -> str:
        return "missing" if missing else "-" if value is None else f"{value:.6g}"

    width = max([len("metric"), *(len(shown(d.metric)) for d in differences)])
    lines = [f"{'metric':<{width}}  {'per-image max |diff|':>20}  {'aggregate max |diff|':>20}  equal"]
    lines += [f"{shown(d.metric):<{width}}  {number(d.per_image, d.per_image_missing):>20}  "
              f"{number(d.aggregate, d.aggregate_missing):>20}  {'yes' if d.within(tolerance) else 'NO'}"
              for d in differences]
    differing = sum(not d.within(tolerance) for d in differences)
    missing = sum(d.per_image_missing + d.aggregate_missing for d in differences)
    lines.append((f"{differing} of {len(differences)} metrics differ by more than {tolerance:g}" if differing else
                  f"every metric reproduced within {tolerance:g}")
                 + (f"; {missing} row(s) are on one side only (missing)" if missing else ""))
    return "\n".join(lines)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def main(result: str, *, store: Path, submission: str | None, backbones: str | None, device: str | None,
         batch_size: int | None, num_workers: int | None, tolerance: float, use_cache: bool,
         suite: str | None = None, allow_fetch: bool = False) -> int:
    """``culturelens reproduce``: 0 when every difference is within ``tolerance``, 1 otherwise; ReproduceError
    when the result cannot be reproduced here (nothing recorded, other weights, another dataset, a link or a damaged
    table in the bundle). ``suite``: the suite a suite result answers (``--suite``: a folder's datasets are read from
    it). Nothing the record names is fetched unless ``allow_fetch`` (``--allow-fetch``), and then each fetched file
    must have the digest the record's metric versions pin; record text is printed escaped (``shown``)."""
    from benchmark import __version__, harness, results, suite_scoring
    from benchmark.cache import EmbeddingCache
    from benchmark.scoring_options import ScoringOptions
    from benchmark.progress import Bars

    target = locate(result, store, submission)
    run = target.run
    target.refuse_links(use_cache)
    recorded_tables = read_result(target.result)
    check_submission_tables(target.submission)
    fetches = fetched_settings(run)
    if fetches and not allow_fetch:
        name, url = next(iter(fetches.items()))
        raise ReproduceError(f"the result's run.json names {shown(url)[:200]} for {shown(name)}: reproduce fetches "
                             "nothing a record names unless given --allow-fetch (the file's digest is then checked "
                             "against the one the record pins)")
    registry = registry_for(run, backbones)
    try:
        options = ScoringOptions.from_record(run.settings, registry, device=device,
                                             batch_size=batch_size or run.batch_size, num_workers=num_workers)
    except CultureLensError as error:
        raise ReproduceError(f"the recorded settings cannot be used here: {error}") from None
    answered = suite_of(run, suite, target.datasets_root)
    datasets_root = answered.datasets_root if answered is not None else target.datasets_root
    check_datasets(run, target.submission, datasets_root)
    if run.harness_version != __version__:
        _warn(f"the result was scored by harness {shown(run.harness_version)}, this is {__version__}")
    try:
        built, unavailable = options.build_metrics()
    except CultureLensError as error:
        raise ReproduceError(f"the recorded metrics cannot be built here: {error}") from None
    check_fetched(run, fetches, built)
    loaded, metrics, disabled = harness.load_backbones(built, registry, device)
    for backbone_id, recorded in run.backbones.items():
        if backbone_id not in loaded:
            reasons = {disabled[m.info.name] for m in built if m.info.name in disabled
                       and backbone_id in {n.backbone for n in m.info.needs}}
            raise ReproduceError(f"backbone {backbone_id}, which the result used, cannot be loaded here"
                                 + (f": {reasons.pop()}" if reasons else ""))
        if loaded[backbone_id].revision != recorded.revision:
            raise ReproduceError(f"backbone {backbone_id} loads weights of revision {loaded[backbone_id].revision}, "
                                 f"the result was scored with {recorded.revision}")
    workspace = Path(tempfile.mkdtemp(prefix="culturelens-reproduce-"))
    bars = Bars()
    try:
        cache = EmbeddingCache(target.cache if use_cache else workspace / "cache.sqlite")
        scores = suite_scoring.score(target.submission, metrics, loaded, cache, submission_id=run.submission_id,
                                     datasets_root=datasets_root, suite=answered.suite if answered else None,
                                     options=options, progress=bars, disabled={**unavailable, **disabled})
        reproduced = results.write_folder(workspace / "results", results.records(scores.per_image),
                                          scores.aggregates, results.records(scores.curves), scores.run)
        differences = compare(recorded_tables, read_result(reproduced))
    finally:
        bars.close()
        shutil.rmtree(workspace, ignore_errors=True)
    changed = sorted(name for name, version in scores.run.metrics.items() if run.metrics.get(name, version) != version)
    if changed:  # never with fetched files: check_fetched refused those before scoring
        _warn(f"metric versions changed since the result was scored: {', '.join(changed)}")
    print(f"reproduced {run.submission_id} ({shown(target.result)}) on {shown(target.submission)}"
          + (" with the stored embedding cache" if use_cache else " with a fresh embedding cache"))
    print(report(differences, tolerance))
    return 0 if all(d.within(tolerance) for d in differences) else 1

"""The suite a leaderboard serves (``culturelens serve --suite REPO_OR_DIR``, ``worker --suite``, ``app.py`` with
``CULTURELENS_SUITE``): the definition suite submissions answer, its datasets served from the store, and its scoring
assets, which turn tracks on.

``open_served`` reads the suite (``benchmark.suite_assets.open_suite``: a ``culturelens suite build`` folder, or
its Hub repo) and puts each dataset of its parts that the store lacks into the store's ``datasets/``: a link to the
suite folder's copy (nothing is copied), or, for a suite on the Hub, the dataset repo its part pins, downloaded.
So the Datasets tab lists them, uploads are validated against them and the worker scores against them. A dataset
the store already holds is kept (an operator's own build), and said when its prompt rows are not the ones the
suite pins (suite submissions are then refused with the reason); but one the store built by default (the package's
prompt rows, ``_default_build``: ``validate``, ``submit`` and ``generate`` build it where nothing else serves it) is
nobody's choice, and gives way to a suite folder's own copy. Without a suite the service answers the definition v1
of this package, with the store's own datasets and no scoring asset.

``tracks_off`` says, for the Queue tab, which tracks of the suite cannot be scored here and the one command that
turns each on.

``serve`` records in the store which suite it serves (``remember``: ``served-suite.json``), so that ``validate``,
``submit`` and ``generate`` on the same store answer that suite without being told it again (``remembered``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmark.datasets.prompts import local_folder
from benchmark.errors import CultureLensError
from benchmark.suite import SCORING_ASSETS, SUITE_V1, Suite
from benchmark.suite_assets import SETTINGS, Assets, open_suite

DEFAULT_FOLDER = "suite/"  # where the README's operator builds the suite
RECORD = "served-suite.json"  # in a store: the suite its service serves (``remember``)


@dataclass(frozen=True)
class ServedSuite:
    """The suite served: its definition, its assets folder when it has one (a local suite folder, or the Hub
    repo's definition and assets downloaded), and what ``--suite`` named (None: the package's definition)."""

    suite: Suite = SUITE_V1
    assets: Assets | None = None
    ref: str | None = None

    def settings(self) -> dict[str, object]:
        """The metric settings its assets imply (``Assets.settings``); none without assets."""
        return self.assets.settings() if self.assets is not None else {}

    def tracks_off(self, store_datasets: Path, given: Mapping[str, object]) -> dict[str, str]:
        """Track -> why it cannot be scored here and the one command that turns it on, for each track of the suite
        that is off: its part's dataset is not in ``store_datasets``, or its scoring asset (``SCORING_ASSETS``) is
        neither in the suite's assets nor in ``given`` (the metric settings the operator gave, by name), or, for
        expectations, no VLM judge was chosen (an operator's choice, not an asset: an open VLM of several GB)."""
        from benchmark.tracks.expectations import PROTOCOL_JUDGE

        settings = {**{k: v for k, v in given.items() if v}, **self.settings()}
        off = {}
        for part in self.suite.parts:
            for track in part.tracks:
                needs = [] if self.serves(part, store_datasets) else [part.name]
                asset = SCORING_ASSETS.get(track)
                if asset and not settings.get(SETTINGS[asset]):
                    needs.append(asset)
                if needs:
                    off[track] = f"no {' and no '.join(needs)}: {self.command(needs)}"
                elif track == "expectations" and not settings.get("expectations_judge"):
                    off[track] = (f"no VLM judge: restart with `--expectations-judge {PROTOCOL_JUDGE}` (the headline "
                                  "protocol's; or CULTURELENS_EXPECTATIONS_JUDGE)")
        return off

    def unserved_tracks(self, store_datasets: Path) -> set[str]:
        """The tracks whose part's dataset is not in ``store_datasets``: off here whatever a worker can score."""
        return {track for part in self.suite.parts if not self.serves(part, store_datasets) for track in part.tracks}

    @staticmethod
    def serves(part, store_datasets: Path) -> bool:
        """Whether ``store_datasets`` holds the part's dataset: this server accepts that part."""
        return (local_folder(store_datasets, part.dataset.repo) / "README.md").exists()

    def command(self, needs: list[str]) -> str:
        """The command that builds ``needs`` (parts' datasets, scoring assets), then the restart that serves them."""
        if self.assets is not None and self.ref is not None and Path(self.ref).is_dir():
            return f"`{self.assets.command(needs)}`, then restart{Assets.weights_note(needs)}"
        return (f"`culturelens suite build --out {DEFAULT_FOLDER} --only {' '.join(needs)}`, then `culturelens serve "
                f"--suite {DEFAULT_FOLDER}`{Assets.weights_note(needs)}")


def open_served(ref: str | None, store_datasets: Path, say: Callable[[str], None]) -> ServedSuite:
    """The suite ``ref`` names (None: the definition in this package, nothing installed), its datasets installed
    in ``store_datasets`` where the store lacks them; ``say`` hears what was done. A SuiteError (or RepoError)
    when ``ref`` is neither a suite folder nor a suite repo that can be read."""
    if ref is None:
        return ServedSuite()
    opened = open_suite(ref, store_datasets)
    local = Path(ref).is_dir()  # a suite folder holds its datasets; the Hub suite's are repos of their own
    for part in opened.suite.parts:
        target = local_folder(store_datasets, part.dataset.repo)
        source = opened.assets.dataset(part.name) if local else None
        if source is not None and source.resolve() == target.resolve():
            continue
        if (target / "README.md").exists() and not target.is_symlink():
            if source is None or not _default_build(target, part):
                _check_kept(target, part, say)
                continue
            _link(source, target)
            say(f"suite {opened.suite.label}: serving {part.dataset.repo} (part {part.name}) from {source}, in place "
                "of the store's default build (the package's prompt rows, not this suite's; built again where needed)")
        elif source is not None:
            _link(source, target)
            say(f"suite {opened.suite.label}: serving {part.dataset.repo} (part {part.name}) from {source}")
        elif not local and not (target / "README.md").exists():
            say(_download(part, target))
    return ServedSuite(opened.suite, opened.assets, ref)


def remember(store_root: Path, ref: str | None) -> None:
    """Record in the store that its service serves the suite ``ref`` (a folder, kept as its absolute path, or a
    Hub repo id); None: the package's definition, and no record."""
    from benchmark.atomic import atomic_write_text

    path = Path(store_root) / RECORD
    if ref is None:
        path.unlink(missing_ok=True)
        return
    kept = str(Path(ref).resolve()) if Path(ref).is_dir() else ref
    Path(store_root).mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"suite": kept}) + "\n")


def remembered(store_root: Path) -> str | None:
    """The suite the store's service serves (``remember``), or None when it serves the package's definition, has
    never been served, or its record is not readable (then the package's definition, as before the record)."""
    try:
        ref = json.loads((Path(store_root) / RECORD).read_text(encoding="utf-8")).get("suite")
    except (OSError, ValueError, AttributeError):
        return None
    return ref if isinstance(ref, str) and ref else None


def _link(source: Path, target: Path) -> None:
    """``target`` becomes a link to ``source`` (a link there before, to another suite's copy, is replaced; so is a
    folder, a default build ``_default_build`` found: moved aside, then removed)."""
    import shutil
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.link")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(source.resolve(), target_is_directory=True)
    if target.is_dir() and not target.is_symlink():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
        os.replace(target, aside / target.name)
        os.replace(temporary, target)
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.replace(temporary, target)


def _default_build(folder: Path, part) -> bool:
    """Whether the store's own copy of a part's dataset holds what a default build makes (the prompt rows the
    package's definition pins: ``validate``, ``submit`` and ``generate`` build CUBE-1K and the diversity prompts so
    where neither the store nor the Hub has them) while the suite served pins other rows: nothing of the
    operator's, so it gives way to the suite's copy (an unpinned build's, say) rather than refuse its parts."""
    from benchmark.datasets.prompts import DatasetUnavailable, load_prompts

    pin, default = part.dataset, next((p.dataset for p in SUITE_V1.parts if p.name == part.name), None)
    if default is None or default.digest is None or pin.digest == default.digest:
        return False
    try:
        held = load_prompts(pin.repo, pin.config, pin.split, local_root=folder.parent, local_only=True).digest
    except DatasetUnavailable:
        return False
    return held == default.digest


def _download(part, target: Path) -> str:
    """A part's dataset, as pinned, from the Hub into the store; what happened, in words (a failure is said, and
    the service starts without it: the Queue tab then names the part among what is off)."""
    from benchmark.atomic import atomic_folder
    from leaderboard.repo import hub_repo

    pin = part.dataset
    try:
        with atomic_folder(target) as folder:
            hub_repo(pin.repo).download(["*"], folder, pin.revision)
    except (CultureLensError, OSError) as error:  # offline, absent, refused (PushError), our disk
        return f"warning: the dataset {pin.repo} of part {part.name} is not served ({error})"
    return f"downloaded {pin.repo} (part {part.name}) into {target}"


def _check_kept(folder: Path, part, say: Callable[[str], None]) -> None:
    """Say so when the store's own copy of a part's dataset does not hold the prompt rows the suite pins."""
    from benchmark.datasets.prompts import DatasetUnavailable, load_prompts

    pin = part.dataset
    if pin.digest is None:
        return
    try:
        digest = load_prompts(pin.repo, pin.config, pin.split, local_root=folder.parent, local_only=True).digest
    except DatasetUnavailable as error:
        say(f"warning: the store's {pin.repo} cannot serve part {part.name}: {error}")
        return
    if digest != pin.digest:
        say(f"warning: the store's own {pin.repo} (prompt rows {digest}) is kept, but the suite pins {pin.digest}: "
            f"suite submissions' {part.name} parts are refused until {folder} is removed and the service restarted")

"""A suite folder, as ``culturelens suite build`` writes it and the CLI, the worker and the app read it: which tracks'
assets are present, and the metric settings they imply.

Layout (``culturelens suite push`` publishes the folder less ``datasets/`` as the suite's Hub repo, and each
dataset folder as its own Hub dataset repo)::

    README.md                                the suite's card (data_cards/suite.md), generated from the definition;
                                             its configs are the assets' tables (``asset_configs``)
    LICENSE.md                               each asset's licence (the card's ``license_link``)
    suite.json                               ``suite``: the definition, each part's digest as built here;
                                             ``built``: per asset, its source, the bytes' sha256, ``pinned``
                                             (True: the suite's own source, at its public address; False: a file
                                             given, or a mirror's; None: nothing to pin), ``pins`` (for a source
                                             that changes with the day: every record's revision, the Hub commit,
                                             every file's and image's sha256: a later build reads the same),
                                             ``content_digest`` (of the data files built) and what scoring needs to
                                             know of it (a backbone id)
    datasets/<org>__<name>/                  each part's dataset (and cube-cspace), Hub layout: a datasets root
    assets/artifact-index/                   the diversity tagger's index (``benchmark.tagging.ArtifactIndex``),
                                             with its own card (README.md)
    assets/relevance-kb/                     the relevance knowledge base (``benchmark.relevance.kb``), with its card
    assets/w1kp-calibration/<file>           the W1KP calibration (the authors' cdf-xy.pt, or an .npz)
    .downloads/                              what the builds downloaded, kept to resume and rebuild (not pushed)

Nothing here loads a model or a dataset: ``Assets`` only looks at files.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from benchmark.datasets.prompts import local_folder
from benchmark.layout import DATASETS
from benchmark.suite import DEFINITION, SCORING_ASSETS, SOURCES, SUITE_REPO, SUITE_V1, Suite, SuiteError

ASSETS = "assets"
ASSET_FOLDERS = {"artifact-index": f"{ASSETS}/artifact-index", "relevance-kb": f"{ASSETS}/relevance-kb",
                 "w1kp-calibration": f"{ASSETS}/w1kp-calibration"}
"""Where each scoring asset sits in a suite folder."""
SETTINGS = {"artifact-index": "artifact_index", "relevance-kb": "relevance_kb", "w1kp-calibration": "w1kp_calibration"}
"""The metric setting (``benchmark.tracks``) each scoring asset is the value of."""


def asset_configs(folder: Path) -> dict[str, dict[str, str]]:
    """The tables of the scoring assets present in the suite folder ``folder``, as configs of the suite repo's
    card: each config an asset's card declares, named ``<asset>_<config>`` (``relevance_kb_entities`` ...), its
    files under the asset's folder. The W1KP calibration is a file for ``--w1kp-calibration``, not a table."""
    from huggingface_hub import DatasetCard

    configs = {}
    for asset, where in ASSET_FOLDERS.items():
        card = Path(folder) / where / "README.md"
        if not card.is_file():
            continue
        for entry in DatasetCard.load(card).data.to_dict().get("configs") or []:
            configs[f"{asset.replace('-', '_')}_{entry['config_name']}"] = {
                files["split"]: f"{where}/{files['path']}" for files in entry["data_files"]}
    return configs


class Assets:
    """The suite folder ``folder``: its definition (``suite``), what was built (``built``) and where."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        suite = Suite.load(self.folder)  # a SuiteError saying how to make one when it is not a suite folder
        self.built: dict[str, dict] = json.loads((self.folder / DEFINITION).read_text(encoding="utf-8")).get("built", {})
        self.suite = replace(suite, pinned=not self.unpinned)

    @property
    def datasets_root(self) -> Path:
        """The folder holding every part's dataset, as a store's ``datasets/`` holds them (``load_prompts``)."""
        return self.folder / DATASETS

    def dataset(self, part: str) -> Path | None:
        """The local folder of a part's dataset, or None when it was not built here."""
        folder = local_folder(self.datasets_root, self.suite.part(part).dataset.repo)
        return folder if (folder / "README.md").exists() else None

    def scoring_asset(self, asset: str) -> Path | None:
        """The path of a scoring asset (``ASSET_FOLDERS``; the calibration's file), or None when absent."""
        folder = self.folder / ASSET_FOLDERS[asset]
        if not folder.is_dir():
            return None
        if asset != "w1kp-calibration":
            return folder
        files = sorted(folder.iterdir())
        return files[0] if files else None

    def settings(self) -> dict[str, object]:
        """The metric settings the present assets imply (setting name -> value): the artifact index, the
        knowledge base, the W1KP calibration and the backbone it was fitted for."""
        found = {}
        for asset, setting in SETTINGS.items():
            path = self.scoring_asset(asset)
            if path is not None:
                found[setting] = str(path)
        if "w1kp_calibration" in found:
            found["w1kp_backbone"] = self.built.get("w1kp-calibration", {}).get("backbone") or "dreamsim"
        return found

    def tracks(self) -> dict[str, str | None]:
        """Track -> None when its part's dataset and its scoring asset are present here, else what is missing and
        the one command that builds it."""
        state = {}
        for part in self.suite.parts:
            for track in part.tracks:
                needs = [part.name] if self.dataset(part.name) is None else []
                asset = SCORING_ASSETS.get(track)
                if asset and self.scoring_asset(asset) is None:
                    needs.append(asset)
                state[track] = None if not needs else (
                    f"no {' and no '.join(needs)} in {self.folder}: `{self.command(needs)}`{self.weights_note(needs)}")
        return state

    def command(self, assets: list[str]) -> str:
        """The command that builds ``assets`` into this folder (the sources a person must give are named by
        ``culturelens suite build --help``; the weights some need, by ``weights_note``)."""
        return f"culturelens suite build --out {self.folder} --only {' '.join(assets)}"

    @staticmethod
    def weights_note(assets: list[str]) -> str:
        """" (it needs the weights of ...: offline, ...)" where building ``assets`` embeds them with backbones
        (``Source.backbones``), else "": what makes ``command`` work where the Hub cannot be reached."""
        weights = sorted({b for s in SOURCES if s.asset in assets for b in s.backbones})
        if not weights:
            return ""
        return (f" (it needs the weights of {', '.join(weights)}: where the Hub cannot be reached, add `--backbones "
                "FILE` naming local copies)")

    @property
    def unpinned(self) -> list[str]:
        """Assets built here from other bytes than the suite pins (e.g. a test's stand-ins): results on them are
        not the suite's."""
        return [asset for asset, record in self.built.items() if record.get("pinned") is False]


def serving(folder: Path, judges: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """What ``make run`` serves with the suite folder ``folder`` (lines to print: each track off, with why), and the
    tracks a build would turn on (the folder lacks their dataset or scoring asset). ``judges``: track -> why its
    judge cannot run here and what gives it one (a judge is the operator's choice, not the suite's: no build
    turns such a track on)."""
    tracks = [t for part in SUITE_V1.parts for t in part.tracks]
    if not (Path(folder) / DEFINITION).is_file():
        off = [t for t in tracks if t != "awareness"]
        return [f"make run serves CUBE-1K (the default dataset) and scores the awareness track; {', '.join(off)} are "
                f"off: there is no suite folder at {folder}"], off
    state = Assets(folder).tracks()
    unbuilt = [t for t, why in state.items() if why is not None]
    state.update({track: why for track, why in (judges or {}).items() if state.get(track, why) is None})
    on, off = [t for t, why in state.items() if why is None], [t for t, why in state.items() if why is not None]
    return [f"make run serves the suite in {folder}: {len(on)} of {len(state)} tracks on ({', '.join(on) or 'none'})",
            *(f"  {t} is off: {state[t]}" for t in off)], unbuilt


@dataclass(frozen=True)
class SuiteRef:
    """A suite to generate, validate or score against: its definition, where its datasets are (a datasets
    root; the Hub for what it lacks), and its assets folder when one is local."""

    suite: Suite
    datasets_root: Path
    assets: Assets | None = None


def open_suite(ref: str | None, store_datasets: Path) -> SuiteRef:
    """``--suite REPO_OR_DIR``: a suite folder (``culturelens suite build``'s) is read as it is; a Hub repo id
    (default ``culturelens/suite``) is taken from the Hub when reachable, else, for the default, its definition
    in this package (v1) with the datasets of ``store_datasets`` (a store's ``datasets/``, then the Hub)."""
    ref = ref or SUITE_REPO
    if Path(ref).is_dir():
        assets = Assets(Path(ref))
        return SuiteRef(assets.suite, assets.datasets_root, assets)
    from benchmark.submission.manifest import is_repo_id

    if not is_repo_id(ref):
        raise SuiteError(f"--suite {ref}: neither a folder (`culturelens suite build --out DIR`) nor a Hub repo id")
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(ref, repo_type="dataset", allow_patterns=[DEFINITION, "README.md",
                                                                                   f"{ASSETS}/**"]))
        assets = Assets(folder)
        return SuiteRef(assets.suite, store_datasets, assets)
    except Exception as error:  # noqa: BLE001 - offline, absent or refused: the Hub's many kinds
        if ref != SUITE_REPO:
            raise SuiteError(f"--suite {ref}: cannot read it from the Hub ({type(error).__name__}); give a suite "
                             "folder (`culturelens suite build --out DIR`)") from None
        print(f"{ref} is not reachable on the Hub: using its definition v{SUITE_V1.version} from this package and "
              f"the datasets of {store_datasets} (build them with `culturelens suite build`)", file=sys.stderr)
        return SuiteRef(SUITE_V1, store_datasets)

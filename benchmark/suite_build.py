"""``culturelens suite build`` and ``suite push``: every dataset and scoring asset of the suite (``benchmark.suite``),
from public sources, into one suite folder (``benchmark.suite_assets``), and that folder published as Hub datasets.

Every asset has a public source (``suite.SOURCES``), so a build with no source given builds all seven:

- files pinned by this package (CUBE-1K, the CSpace file, the W1KP calibration): their bytes are checked against
  the pin (sha256, or the git blob id of a file in a pinned GitHub commit). The public address serving other
  bytes is an error; a mirror's (``CULTURELENS_GITHUB_RAW``) or a file the operator gives is built, recorded as
  not pinned (``suite.json``, the card), and said in one line: results on it are not the suite's. ``suite.json``'s
  ``pinned`` says whether every asset built is pinned; rows scored against a build that is not carry the protocol
  field ``build: unpinned`` (``benchmark.suite.UNPINNED``), are called "CultureLens suite v1, unpinned build" and
  are never ranked with the pinned build's.
- sources that change with the day (the iconic references' Wikidata query and Commons images, the relevance
  knowledge base's Wikidata items, Wikipedia pages and Commons images, CulturalFrames on the Hub): the build
  records what it read (``pins``: every record's revision, the Hub commit, every file's and image's sha256) in
  ``suite.json``. Building again into the same folder, or with ``pins_from`` another suite's ``suite.json``
  (a published suite's: the pins for everyone after), reads those very revisions and bytes and gives the same
  digests; an image whose bytes changed at the same revision is refused, naming it. ``refresh`` names the
  assets to read anew from the current sources.

Downloads go to the folder's ``.downloads/`` (never published): a killed build, run again, goes on where it
stopped, verifying what it has and asking only for what it lacks (``benchmark.downloads``). Each step shows its
progress (files, bytes, time left). An asset whose source cannot be had (offline, a source given that does not
exist) is not built, with the reason; the others are. ``suite.json`` and the card are written after each asset,
and each asset replaces its earlier build atomically.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmark import settings
from benchmark.atomic import atomic_folder, atomic_write_text
from benchmark.datasets.hub_files import git_blob_id
from benchmark.datasets.prompts import load_prompts, local_folder
from benchmark.digests import file_digest
from benchmark.downloads import Downloads
from benchmark.errors import CultureLensError, OutputExists
from benchmark.layout import DATASETS
from benchmark.suite import DEFINITION, SOURCES, SUITE_V1, Source, Suite, source
from benchmark.suite_assets import ASSET_FOLDERS, asset_configs

ORDER = tuple(s.asset for s in SOURCES)
PART_OF_ASSET = {"cube-1k": "cube-1k", "cube-diversity": "cube-diversity", "iconic-references": "iconic-references",
                 "culturalframes": "culturalframes"}
"""The assets that are a part's dataset (the others are scoring assets)."""
DOWNLOADS = ".downloads"
"""Where a suite folder keeps what its builds downloaded (``suite push`` leaves it out)."""
UNDIGESTED = ("README.md", "kb.json")
"""Files an asset's digest leaves out: its card and the knowledge base's manifest say when and how it was built."""

class SuiteBuildError(CultureLensError, RuntimeError):
    """An asset cannot be built from the source given; the message says which, why and what to give instead."""


class WeightsMissing(SuiteBuildError):
    """An asset cannot be built here for want of a backbone's weights (``backbone``: its id)."""

    def __init__(self, message: str, backbone: str):
        super().__init__(message)
        self.backbone = backbone


@dataclass(frozen=True)
class Outcome:
    """What became of one asset: built (``detail`` says where and from what) or not (``detail`` says why and how)."""

    asset: str
    built: bool
    detail: str
    backbone: str | None = None  # not built for want of this backbone's weights (``WeightsMissing``)


def pin_matches(data: bytes, pin: str | None) -> bool | None:
    """Whether ``data`` are the bytes ``pin`` names ("sha256:<hex>" or "git-blob:<sha1>"); None without a pin."""
    if pin is None:
        return None
    kind, _, value = pin.partition(":")
    found = hashlib.sha256(data).hexdigest() if kind == "sha256" else git_blob_id(data)
    return found == value


def fetch(where: str, downloads: Downloads, what: str, progress: bool = True) -> Path:
    """A local file with the bytes of ``where``: a path as it is, an http(s) URL downloaded (once: resumed when cut
    off, reused when there, its progress shown) into ``downloads``."""
    if not re.match(r"https?://", where):
        path = Path(where)
        if not path.exists():
            raise SuiteBuildError(f"{where}: no such file or folder")
        return path
    name = Path(urllib.parse.urlparse(where).path).name or "file"
    return downloads.file(where, f"files/{hashlib.sha256(where.encode()).hexdigest()[:16]}/{name}", what=what,
                          progress=progress)


def checked(asset: Source, where: str, path: Path) -> dict:
    """The build record of a one-file source: where it came from, its sha256, and whether it is the pinned one
    (the public default's bytes must be: other bytes there are an error, and are not kept)."""
    data = path.read_bytes()
    pinned = pin_matches(data, asset.pin)
    if pinned is False and where == asset.default:
        path.unlink()
        raise SuiteBuildError(f"{where} no longer serves the pinned bytes of {asset.asset} ({asset.pin}): the suite's "
                              "source changed; do not build on it")
    if pinned is False:
        print(f"{asset.asset}: {where} is not the pinned source ({asset.pin}); results on what is built from it "
              "are not the suite's", file=sys.stderr)
    return {"source": where, "sha256": hashlib.sha256(data).hexdigest(), "pinned": pinned}


def public(*endpoints: settings.Setting) -> bool:
    """Whether every service of ``endpoints`` is read at its public address (not a mirror's, nor a stand-in's)."""
    return all(e.resolve() == e.default for e in endpoints)


def content_digest(*folders: Path) -> str:
    """sha256 over the data files of ``folders`` (path and sha256 of each, cards and manifests left out): the same
    for two builds of the same content."""
    lines = []
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder.parent).as_posix()
            if path.name not in UNDIGESTED and not any(part.startswith(".") for part in path.parts[len(folder.parts):]):
                lines.append(f"{relative} {file_digest(path)}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


class _Builder:
    """One ``build`` call: the out folder, its definition so far, the pins to build at, the backbones loaded once."""

    def __init__(self, out: Path, registry: dict | None, device: str | None, batch_size: int, *,
                 refresh: set[str], pins_from: Mapping[str, dict], progress: bool):
        self.out, self.registry, self.device, self.batch_size = out, registry, device, batch_size
        self.refresh, self.progress = refresh, progress
        self.backbones: dict = {}
        self.suite, self.built = SUITE_V1, {}
        if (out / DEFINITION).exists():  # an earlier build: keep what this one does not rebuild
            record = json.loads((out / DEFINITION).read_text(encoding="utf-8"))
            self.suite, self.built = Suite.from_dict(record["suite"]), record.get("built", {})
        elif out.exists() and any(out.iterdir()):
            raise OutputExists(f"{out} exists and is not a suite folder (no {DEFINITION}); choose another --out")
        self.pins_from = {**{a: r for a, r in self.built.items() if r.get("pins")}, **pins_from}
        self.downloads = Downloads(out / DOWNLOADS)
        self.work = Path(tempfile.mkdtemp(prefix="culturelens-suite-"))

    def pins(self, asset: str) -> dict | None:
        """The pins to build ``asset`` at: those of an earlier build of it from its public source (this folder's,
        or ``pins_from``), unless ``refresh`` names it (then none: the build reads the current sources)."""
        if asset in self.refresh:
            return None
        return (self.pins_from.get(asset) or {}).get("pins")

    def backbone(self, backbone_id: str):
        from benchmark.encoders import load_backbone
        from benchmark.encoders.spec import BackboneUnavailable, load_registry

        if backbone_id not in self.backbones:
            registry = self.registry if self.registry is not None else load_registry()
            try:
                self.backbones[backbone_id] = load_backbone(backbone_id, registry, self.device)
            except BackboneUnavailable as error:  # its first sentence: which, and why; the build's end says how
                raise WeightsMissing(f"needs the weights of {backbone_id}: {str(error).split(' Provide backbone')[0]}",
                                     backbone_id) from None
        return self.backbones[backbone_id]

    def dataset_folder(self, part: str) -> Path:
        return local_folder(self.out / DATASETS, self.suite.part(part).dataset.repo)

    def record_dataset(self, part: str, record: dict) -> dict:
        """After a part's dataset is built: its prompt count and digest into the folder's definition, and whether
        the digest is the one the suite pins."""
        pin = SUITE_V1.part(part).dataset
        prompts = load_prompts(pin.repo, pin.config, pin.split, folder=self.dataset_folder(part))
        self.suite = self.suite.with_built(part, prompts=len(prompts), digest=prompts.digest)
        matches = None if pin.digest is None else prompts.digest == pin.digest
        pinned = record.get("pinned")
        return {**record, "prompts": len(prompts), "digest": prompts.digest,
                "pinned": False if False in (pinned, matches) else (True if True in (pinned, matches) else None)}


def read_pins(where: str | Path) -> dict[str, dict]:
    """The build records (with their pins) of a suite: a suite folder, its ``suite.json``, or a Hub repo id."""
    path = Path(where)
    if path.is_dir():
        path = path / DEFINITION
    if not path.is_file():
        from benchmark.submission.manifest import is_repo_id

        if not is_repo_id(str(where)):
            raise SuiteBuildError(f"--pins {where}: neither a suite folder, its {DEFINITION}, nor a Hub repo id")
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(str(where), DEFINITION, repo_type="dataset"))
        except Exception as error:  # noqa: BLE001 - offline, absent or refused: the Hub's many kinds
            raise SuiteBuildError(f"--pins {where}: cannot read its {DEFINITION} from the Hub "
                                  f"({type(error).__name__}); give a suite folder instead") from None
    try:
        built = json.loads(path.read_text(encoding="utf-8")).get("built", {})
    except (OSError, ValueError, AttributeError) as error:
        raise SuiteBuildError(f"--pins {where}: {path} is not a suite definition ({error})") from None
    return {asset: record for asset, record in built.items() if isinstance(record, dict) and record.get("pins")}


def build(out: Path, sources: Mapping[str, object], *, only: list[str] | None = None, registry: dict | None = None,
          device: str | None = None, batch_size: int = 32, prune: bool = True, ner: str | None = None,
          culturalframes_revision: str | None = None, refresh: list[str] | None = None,
          pins_from: Mapping[str, dict] | None = None, progress: bool = True) -> list[Outcome]:
    """Build the assets ``only`` names (default: all, in ``ORDER``) into the suite folder ``out``.

    ``sources``: asset -> a source to take instead of the public one: a path or URL; for ``iconic-references``
    and ``relevance-kb`` a (records file, images folder) pair. ``refresh``: assets to read from the current
    public sources rather than at their recorded pins; ``pins_from``: build records of another suite
    (``read_pins``) whose pins to build at. Writes the folder's ``suite.json`` and card (``README.md``) after
    each asset."""
    out = Path(out).resolve()
    builder = _Builder(out, registry, device, batch_size, refresh=set(refresh or ()), pins_from=pins_from or {},
                       progress=progress)
    outcomes = []
    try:
        if not (out / DEFINITION).exists():  # a killed first build leaves a folder the next one recognises
            write_definition(out, builder.suite, builder.built, {})
        for asset in only or ORDER:
            given = sources.get(asset)
            try:
                record = _BUILDERS[asset](builder, source(asset), given, prune=prune, ner=ner,
                                          revision=culturalframes_revision)
            except (CultureLensError, OSError, ValueError) as error:
                outcomes.append(Outcome(asset, False, str(error), getattr(error, "backbone", None)))
                continue
            record["built_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            if asset in PART_OF_ASSET:
                record = builder.record_dataset(PART_OF_ASSET[asset], record)
            record["content_digest"] = content_digest(*_asset_folders(builder, asset))
            builder.built[asset] = record
            outcomes.append(Outcome(asset, True, f"from {record['source']}" + (
                "" if record.get("pinned") is not False else " (not the pinned source)")))
            write_definition(out, builder.suite, builder.built, {})
        write_definition(out, builder.suite, builder.built, {o.asset: o.detail for o in outcomes if not o.built})
    finally:
        shutil.rmtree(builder.work, ignore_errors=True)
    return outcomes


def _asset_folders(b: _Builder, asset: str) -> list[Path]:
    """The folders an asset's content lies in (its digest's)."""
    if asset in PART_OF_ASSET:
        return [b.dataset_folder(PART_OF_ASSET[asset])]
    if asset == "artifact-index":
        from benchmark.datasets import cspace

        return [local_folder(b.out / DATASETS, cspace.HUB_REPO), b.out / ASSET_FOLDERS[asset]]
    return [b.out / ASSET_FOLDERS[asset]]


def _default(asset: Source, given) -> str:
    return str(given or asset.address)


def _cube_1k(b: _Builder, asset: Source, given, **_) -> dict:
    from benchmark.datasets import cube_1k

    where = _default(asset, given)
    path = fetch(where, b.downloads, asset.asset, b.progress)
    record = checked(asset, where, path)
    cube_1k.build(str(path), b.dataset_folder("cube-1k"))
    return record


def _cube_diversity(b: _Builder, asset: Source, given, **_) -> dict:
    from benchmark.datasets import cube_diversity

    cube_diversity.build_diversity(b.dataset_folder("cube-diversity"))
    return {"source": "benchmark/datasets/cube_diversity.py", "sha256": None, "pinned": None}


def _pair(asset: Source, given) -> tuple[Path, Path]:
    records, images = (Path(p) for p in given)
    for path in (records, images):
        if not path.exists():
            raise SuiteBuildError(f"{asset.asset}: {path}: no such file or folder")
    return records, images


def _given_pair(records: Path, images: Path) -> dict:
    """The record of an asset built from a records file and images the operator gave: not pinned."""
    return {"source": f"{records} with the images of {images}", "sha256": file_digest(records), "pinned": False}


def _iconic_references(b: _Builder, asset: Source, given, *, prune: bool, ner: str | None, **_) -> dict:
    from benchmark.datasets import iconic_references

    if given:
        records, images = _pair(asset, given)
        record = _given_pair(records, images)
    else:
        if asset.asset in b.refresh:
            b.downloads.path(iconic_references.PINS).unlink(missing_ok=True)
        records, images, pins = iconic_references.fetch_public(b.downloads, pins=b.pins(asset.asset),
                                                               progress=b.progress)
        record = {"source": f"{asset.default} ({settings.WIKIDATA_SPARQL.resolve()}, "
                            f"{settings.COMMONS_API.resolve()})",
                  "sha256": file_digest(records),
                  "pinned": public(settings.WIKIDATA_SPARQL, settings.COMMONS_API), "pins": pins}
    iconic_references.build(records, images, b.dataset_folder("iconic-references"), ner_model=ner,
                            prune_backbone=b.backbone(asset.backbones[0]) if prune else None)
    return record


def _culturalframes(b: _Builder, asset: Source, given, *, revision: str | None, **_) -> dict:
    from benchmark.datasets import culturalframes

    if given and str(given) != asset.default:
        where = str(given)
        culturalframes.build(where, b.dataset_folder("culturalframes"), revision=revision)
        return {"source": where + (f"@{revision}" if revision else ""), "sha256": None, "pinned": False}
    pins = b.pins(asset.asset)
    if revision and pins and pins.get("commit") != revision:
        pins = None  # the commit asked for, not the one recorded
    folder, pins = culturalframes.fetch_release(b.downloads, repo=asset.default, revision=revision, pins=pins,
                                                progress=b.progress)
    shown = f"{asset.default}@{pins['commit']}"
    culturalframes.build(folder, b.dataset_folder("culturalframes"), revision=pins["commit"], shown_as=asset.default)
    return {"source": f"{shown} ({settings.HUB_ENDPOINT.resolve()})", "sha256": None,
            "pinned": public(settings.HUB_ENDPOINT), "pins": pins}


def _artifact_index(b: _Builder, asset: Source, given, **_) -> dict:
    import datasets
    from huggingface_hub import DatasetCard

    from benchmark.datasets import cspace
    from benchmark.datasets.hub_layout import Licence
    from benchmark.tagging import ArtifactIndex

    where = _default(asset, given)
    path = fetch(where, b.downloads, asset.asset, b.progress)
    record = checked(asset, where, path)
    folder = local_folder(b.out / DATASETS, cspace.HUB_REPO)
    cspace.build_cspace_from_file(path, folder)
    table = datasets.load_dataset(str(folder), cspace.CONFIG, split=cspace.SPLIT,
                                  cache_dir=str(b.work / "hf-cache")).to_pandas()
    clip = b.backbone(asset.backbones[0])
    ArtifactIndex.from_backbone(table, clip, progress=b.progress).save(
        b.out / ASSET_FOLDERS["artifact-index"], source=f"{cspace.HUB_REPO}, built from {where}",
        licence=Licence.of_card(DatasetCard.load(folder / "README.md").data.to_dict()))
    return {**record, "artifacts": len(table), "backbone": clip.id}


def _relevance_kb(b: _Builder, asset: Source, given, **_) -> dict:
    from benchmark.relevance import kb, public_kb

    out = b.out / ASSET_FOLDERS["relevance-kb"]
    if given:
        records, images = _pair(asset, given)
        backbone = b.backbone(asset.backbones[0])
        kb.build_index(records, images, out, backbone, batch_size=b.batch_size, show_progress=b.progress)
        return {**_given_pair(records, images), "backbone": backbone.id}
    part = SUITE_V1.part_of_track("relevance")
    if not b.dataset_folder(part.name).joinpath("README.md").exists():
        raise SuiteBuildError(f"relevance-kb is built for the relevance prompts, part {part.name}, which is not "
                              f"built in {b.out} yet: build it first (--only {part.name} relevance-kb)")
    backbone = b.backbone(asset.backbones[0])  # its weights before the downloads: a missing one is said at once
    prompts = load_prompts(part.dataset.repo, part.dataset.config, part.dataset.split,
                           folder=b.dataset_folder(part.name))
    if asset.asset in b.refresh:
        b.downloads.path(public_kb.PINS).unlink(missing_ok=True)
    built, pins = public_kb.build(prompts, out, b.downloads, backbone, pins=b.pins(asset.asset),
                                  batch_size=b.batch_size, progress=b.progress)
    endpoints = [getattr(settings, name) for name in public_kb.ENDPOINTS]
    return {"source": f"{asset.default} ({', '.join(e.resolve() for e in endpoints)})",
            "sha256": built.info["records_sha256"], "pinned": public(*endpoints), "pins": pins,
            "backbone": backbone.id, "entities": len(built.entities), "images": len(built.images)}


def _w1kp_calibration(b: _Builder, asset: Source, given, **_) -> dict:
    from benchmark.metrics.variability import Calibration

    where = _default(asset, given)
    path = fetch(where, b.downloads, asset.asset, b.progress)
    record = checked(asset, where, path)
    try:
        calibration = Calibration.load(path)  # refuses a file that is no calibration, naming what it found
    except ValueError as error:
        raise SuiteBuildError(str(error)) from None
    with atomic_folder(b.out / ASSET_FOLDERS["w1kp-calibration"], replace=True) as tmp:
        shutil.copyfile(path, tmp / path.name)
    return {**record, "backbone": calibration.fitted_for}


_BUILDERS = {"cube-1k": _cube_1k, "cube-diversity": _cube_diversity, "iconic-references": _iconic_references,
             "culturalframes": _culturalframes, "artifact-index": _artifact_index, "relevance-kb": _relevance_kb,
             "w1kp-calibration": _w1kp_calibration}


LICENCE_FILE = "LICENSE.md"


def write_definition(out: Path, suite: Suite, built: dict, not_built: dict[str, str]) -> None:
    """The folder's ``suite.json``, ``LICENSE.md`` and card, each written atomically (after every asset a build
    makes)."""
    from benchmark import __version__

    out.mkdir(parents=True, exist_ok=True)
    pinned = all(record.get("pinned") is not False for record in built.values())
    atomic_write_text(out / DEFINITION, json.dumps({"culturelens": __version__, "suite": suite.to_dict(),
                                                    "built": built, "pinned": pinned}, indent=2,
                                                   ensure_ascii=False) + "\n")
    atomic_write_text(out / LICENCE_FILE, licences(suite))
    atomic_write_text(out / "README.md", card(suite, built, not_built, asset_configs(out)))


def licences(suite: Suite) -> str:
    """``LICENSE.md`` of a suite repo: the definition's licence, and each asset's, from its source."""
    rows = "".join(f"| `{s.asset}` | {s.what} | {s.licence} |\n" for s in SOURCES)
    return (f"# Licences of CultureLens suite v{suite.version}\n\nThe definition and the card (`suite.json`, "
            "`README.md`) are CultureLens's, Apache-2.0. Each dataset and scoring asset keeps the licence of its "
            "source; a dataset's own card and repo say it again.\n\n| asset | from | licence |\n|---|---|---|\n"
            + rows)


def card(suite: Suite, built: dict | None = None, not_built: dict[str, str] | None = None,
         configs: dict[str, dict[str, str]] | None = None) -> str:
    """The suite's card (``data_cards/suite.md``), from the definition (and a build's record); ``configs``: the
    assets' tables present (``suite_assets.asset_configs``), none the default (``load_dataset(repo)`` asks which)."""
    from benchmark import __version__
    from benchmark.datasets import hub_layout
    from benchmark.papers import bibtex
    from benchmark.suite import COSTS, CUBE_1K_SEEDS
    from benchmark.tracks import cited_papers

    pinned = {p.name: p for p in SUITE_V1.parts} if suite.version == SUITE_V1.version else {}
    parts = [{"name": p.name, "dataset": pinned.get(p.name, p).dataset, "built": p.dataset.digest,
              "images_per_prompt": p.images_per_prompt, "images": p.images, "tracks": p.tracks, "why": p.why,
              "seed_text": f"seeds {p.seeds[0]}-{p.seeds[-1]}" if len(p.seeds) > 1 else f"seed {p.seeds[0]}"}
             for p in suite.parts]
    k = len(CUBE_1K_SEEDS)
    extra = (20 - k) * (SUITE_V1.part("cube-1k").dataset.prompts or 0)
    costs = [{**vars(c), "hours": suite.gpu_hours(c), "extra_hours": extra * c.seconds_per_image / 3600}
             for c in COSTS]
    prompts = sum(p.dataset.prompts or 0 for p in suite.parts)
    data = hub_layout.card_data(
        pretty_name=f"CultureLens suite v{suite.version}",
        licence=hub_layout.Licence("other", "culturelens-suite-sources", LICENCE_FILE), configs=configs or {},
        default=None, task_categories=["text-to-image"], language=["en"],
        size_categories=[hub_layout.size_category(prompts)], tags=["culture", "benchmark", "cultural-competence"],
        **({} if configs else {"viewer": False}))  # no asset table: nothing for the Hub's viewer to show
    return hub_layout.render_card(
        "suite", data, version=__version__, suite=suite, parts=parts, images=suite.images, costs=costs,
        cube_seeds=k, pairs=k * (k - 1) // 2, extra_images=extra, sources=SOURCES, built=built or {},
        pinned_at={asset: pins_text(record) for asset, record in (built or {}).items()}, not_built=not_built or {},
        configs=configs or {}, licence_file=LICENCE_FILE, papers=list(cited_papers()),
        bibtex=bibtex(*cited_papers().values()))


def pins_text(record: dict) -> str:
    """What a build record's pins hold, in a few words (the card's), or the bytes' sha256 where that is the pin."""
    pins = record.get("pins")
    if not pins:
        if record.get("sha256"):
            return f"sha256 `{record['sha256']}`"
        return f"prompt rows `{record['digest']}`" if record.get("digest") else ""
    if "commit" in pins:
        return f"Hub commit `{pins['commit']}`, {len(pins['files'])} files' sha256"
    if "records" in pins:
        images = sum(len(r["images"]) for r in pins["records"])
        return f"{len(pins['records'])} Wikidata items at their revisions, {images} Commons images' versions and sha256"
    entities = pins.get("entities", [])
    return (f"{len(entities)} Wikidata items at their revisions, "
            f"{sum(1 for e in entities if e.get('wikipedia'))} Wikipedia revisions, "
            f"{sum(len(e['images']) for e in entities)} Commons images' versions and sha256")


def push(folder: Path, repo: str, *, token: str | None = None, private: bool = False,
         to_folder: Path | None = None) -> list[tuple[str, str]]:
    """Publish a suite folder: its card, definition and scoring assets as the Hub dataset ``repo`` (ORG/NAME), and
    each dataset it built as ``ORG/<its name>`` (``culturelens/cube-1k`` ... under ``--repo culturelens/suite``).
    ``to_folder``: a folder standing in for the Hub, each repo written as ``<org>__<name>`` (the layout of a
    store's ``datasets/``). Returns (what, where) per repo."""
    from benchmark.datasets.hub_layout import push_folder
    from benchmark.submission.manifest import is_repo_id

    folder = Path(folder)
    Suite.load(folder)  # a suite folder, or a SuiteError saying how to make one
    if not is_repo_id(repo):
        raise SuiteBuildError(f"--repo {repo}: not a Hub repo id (ORG/NAME)")
    org = repo.split("/")[0]
    targets = [(folder, repo, [f"{DATASETS}/**", f"{DOWNLOADS}/**"])]
    root = folder / DATASETS
    for dataset in sorted(root.iterdir()) if root.is_dir() else []:
        if (dataset / "README.md").exists():
            targets.append((dataset, f"{org}/{dataset.name.split('__', 1)[-1]}", []))
    published = []
    for source_folder, target, ignore in targets:
        if to_folder is None:
            where = push_folder(source_folder, target, token=token, private=private, ignore=ignore)
        else:
            destination = local_folder(Path(to_folder), target)
            with atomic_folder(destination, replace=True) as tmp:
                shutil.copytree(source_folder, tmp, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(DATASETS, DOWNLOADS) if ignore else None)
            where = str(destination)
        published.append((source_folder.name if source_folder != folder else "suite", where))
    return published


"""Write a dataset folder laid out exactly like a Hugging Face dataset repo, and publish it.

A folder is ``README.md`` (the card: YAML front matter with ``configs`` + prose) and each config's split as
Parquet shards, ``<config>/<split>-00000-of-00002.parquet`` ..., each at most ``MAX_SHARD_BYTES`` as the Hub's own
writer cuts them (``Dataset.push_to_hub``). ``datasets.load_dataset(folder, config)`` and
``load_dataset("org/name", config)`` then run the same code, and ``huggingface_hub.upload_folder`` publishes the
folder. Every card carries what the Hub's card checks ask for (``card_data`` refuses one without): a licence (with
its name and link where it is ``other``), task and size categories and languages; its prose gives the BibTeX of
the source papers and of CultureLens (``benchmark.papers.bibtex``).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import math
import re
from dataclasses import dataclass
from pathlib import Path

import datasets
from huggingface_hub import DatasetCard, DatasetCardData, HfApi, constants
from huggingface_hub.errors import HfHubHTTPError

from benchmark.atomic import atomic_folder
from benchmark.errors import CultureLensError, OutputExists

CARD_TEMPLATES = Path(str(importlib.resources.files("data_cards")))  # package data: in a checkout and a wheel
MARKER = "<!-- built by culturelens -->"
MAX_SHARD_BYTES = 500 * 10**6
"""A Parquet shard's size at most (its Arrow data), as ``Dataset.push_to_hub`` cuts a split ("500MB")."""
SIZE_CATEGORIES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B")
"""The Hub's size categories, by rows (each ten times the one before)."""
_LICENCE_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")  # the Hub's form of a license_name


class PushError(CultureLensError, RuntimeError):
    """Publishing a dataset folder to the Hub failed; the message says why and what to do."""


@dataclass(frozen=True)
class Licence:
    """A card's licence: a Hub licence id (``cc-by-4.0``, ``unknown`` ...), or ``other`` with its ``name`` (lower
    case, digits, '-' and '.') and a ``link`` to its terms (a URL, or a file of the repo), as the Hub asks then."""

    id: str
    name: str | None = None
    link: str | None = None

    def fields(self) -> dict:
        """The card's ``license`` (and ``license_name``, ``license_link`` when set) metadata."""
        return {"license": self.id, **({"license_name": self.name} if self.name else {}),
                **({"license_link": self.link} if self.link else {})}

    @classmethod
    def of_card(cls, metadata: dict) -> Licence:
        """The licence a card's metadata declares (``unknown`` when it declares none)."""
        return cls(metadata.get("license") or "unknown", metadata.get("license_name"), metadata.get("license_link"))


def size_category(rows: int) -> str:
    """The Hub's size category of a dataset of ``rows`` rows (its largest config)."""
    return SIZE_CATEGORIES[min(len(SIZE_CATEGORIES) - 1, max(0, len(str(max(rows, 0))) - 3))]  # by digits


def shard_path(config: str, split: str, index: int = 0, count: int = 1) -> str:
    """Where shard ``index`` of ``count`` of a config's split lies in the folder."""
    return f"{config}/{split}-{index:05d}-of-{count:05d}.parquet"


def shards_pattern(config: str, split: str) -> str:
    """The card's ``data_files`` pattern of a config's split: every shard, however many."""
    return f"{config}/{split}-*.parquet"


def parquet_files(folder: Path, config: str, split: str) -> list[Path]:
    """The shards of a config's split in a built folder, in order (none: an empty list)."""
    return sorted(Path(folder).glob(shards_pattern(config, split)))


def render_card(template: str, card_data: DatasetCardData, **variables) -> str:
    """Render ``data_cards/<template>.md`` (a Jinja template) with the card's YAML front matter."""
    path = CARD_TEMPLATES / f"{template}.md"
    if not path.exists():
        raise FileNotFoundError(f"card template {path} is missing: reinstall culturelens (the wheel ships the "
                                f"templates as the data_cards package)")
    card = DatasetCard.from_template(card_data, template_path=str(path), marker=MARKER, **variables)
    return str(card)


def card_data(*, pretty_name: str, licence: Licence, configs: dict[str, list[str] | dict[str, str | list[str]]],
              default: str | None, task_categories: list[str], language: list[str], size_categories: list[str],
              **extra) -> DatasetCardData:
    """Card metadata with one ``configs`` entry per config: ``configs`` maps a config to its splits (its files laid
    out by ``write_folder``) or to {split: the repo's paths or patterns} (files laid out otherwise); ``default``:
    the config ``load_dataset(repo)`` reads (None: it asks for one). ValueError where the Hub's card checks would
    find something missing (a bug: every card this package writes is complete)."""
    entries = []
    for name, files in configs.items():
        layout = files if isinstance(files, dict) else {split: shards_pattern(name, split) for split in files}
        entries.append({"config_name": name, "data_files": [{"split": s, "path": p} for s, p in layout.items()],
                        **({"default": True} if name == default else {})})
    if licence.id == "other" and not (licence.name and _LICENCE_NAME.fullmatch(licence.name) and licence.link):
        raise ValueError(f"{pretty_name}: licence 'other' needs a name (lower case, digits, '-', '.') and a link, "
                         f"not {licence}")
    missing = [field for field, value in (("task_categories", task_categories), ("language", language),
                                           ("size_categories", size_categories)) if not value]
    if missing or not set(size_categories) <= set(SIZE_CATEGORIES):
        raise ValueError(f"{pretty_name}: the card lacks {', '.join(missing) or 'a known size category'}")
    return DatasetCardData(pretty_name=pretty_name, **licence.fields(), configs=entries or None,
                           task_categories=task_categories, language=language, size_categories=size_categories,
                           **extra)


def write_folder(out: Path, tables: dict[tuple[str, str], datasets.Dataset], card: str, *,
                 max_shard_bytes: int = MAX_SHARD_BYTES) -> Path:
    """Write the tables (each cut into shards of at most ``max_shard_bytes`` of Arrow data, contiguous rows, at
    least one row each) and the card to ``out`` atomically.

    The folder is built next to ``out`` and renamed into place, so a failed build
    leaves an earlier ``out`` untouched (nor any shard of it). An existing ``out`` is replaced only if
    an earlier build of ours made it (its card carries our marker).
    """
    out = Path(out).resolve()
    if out.exists():
        readme = out / "README.md"
        if not out.is_dir() or (any(out.iterdir()) and MARKER not in _read(readme)):
            raise OutputExists(f"{out} exists and is not a dataset folder built by culturelens; choose another --out")
    with atomic_folder(out, replace=True) as staging:
        for (config, split), table in tables.items():
            count = max(1, min(len(table), math.ceil(table.data.nbytes / max_shard_bytes)))  # no shard of no rows
            (staging / config).mkdir(parents=True, exist_ok=True)
            for index in range(count):
                shard = table.shard(count, index, contiguous=True) if count > 1 else table
                shard.to_parquet(str(staging / shard_path(config, split, index, count)))
        (staging / "README.md").write_text(card, encoding="utf-8")
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def push_folder(folder: Path, repo: str, *, token: str | None = None, private: bool = False,
                ignore: list[str] | None = None) -> str:
    """Publish a dataset folder to the Hub dataset repo ``repo``, less the paths matching ``ignore`` (glob patterns,
    as ``upload_folder`` takes them); return the repo URL."""
    folder = Path(folder)
    if not (folder / "README.md").exists():
        raise PushError(f"{folder} has no README.md: build it first with `culturelens data build`")
    api = HfApi(token=token)
    with hub_errors(repo, "publish to"):
        url = api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(repo_id=repo, folder_path=str(folder), repo_type="dataset", ignore_patterns=ignore,
                          commit_message="Update dataset (culturelens data push)")
    return str(url)


@contextlib.contextmanager
def hub_errors(repo: str, action: str):
    """Turn the Hub client's failures (offline, refused, unreachable) into a PushError that says what to do."""
    try:
        yield
    except HfHubHTTPError as error:
        status = getattr(error.response, "status_code", "?")
        hint = " Log in with `hf auth login` or set HF_TOKEN." if status in (401, 403) else ""
        raise PushError(f"the Hub refused to let us {action} {repo} (HTTP {status}).{hint}") from None
    except Exception as error:
        if not _is_network_error(error):
            raise
        if constants.HF_HUB_OFFLINE:  # OfflineModeIsEnabled, or a download with nothing cached, in its own words
            raise PushError(f"HF_HUB_OFFLINE is set: unset it to {action} {repo} on the Hub") from None
        raise PushError(f"cannot reach the Hugging Face Hub to {action} {repo} ({type(error).__name__}). "
                        "Check the network (or HF_ENDPOINT) and try again.") from None


def _is_network_error(error: Exception) -> bool:
    """Transport failures of the Hub client (its HTTP library changed across versions)."""
    module = type(error).__module__.split(".")[0]
    return isinstance(error, (OSError, ConnectionError, TimeoutError)) or module in {"httpx", "httpx2", "requests", "urllib3"}

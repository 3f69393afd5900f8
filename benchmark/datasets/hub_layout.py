"""Write a dataset folder laid out exactly like a Hugging Face dataset repo, and publish it.

A folder is ``README.md`` (the card: YAML front matter with ``configs`` + prose)
and one Parquet file per config and split, ``<config>/<split>-00000-of-00001.parquet``.
``datasets.load_dataset(folder, config)`` and ``load_dataset("org/name", config)``
then run the same code, and ``huggingface_hub.upload_folder`` publishes the folder.
"""

from __future__ import annotations

import contextlib
import importlib.resources
from pathlib import Path

import datasets
from huggingface_hub import DatasetCard, DatasetCardData, HfApi, constants
from huggingface_hub.errors import HfHubHTTPError

from benchmark.atomic import atomic_folder
from benchmark.errors import CultureLensError, OutputExists

CARD_TEMPLATES = Path(str(importlib.resources.files("data_cards")))  # package data: in a checkout and a wheel
MARKER = "<!-- built by culturelens -->"


class PushError(CultureLensError, RuntimeError):
    """Publishing a dataset folder to the Hub failed; the message says why and what to do."""


def parquet_path(config: str, split: str) -> str:
    return f"{config}/{split}-00000-of-00001.parquet"


def render_card(template: str, card_data: DatasetCardData, **variables) -> str:
    """Render ``data_cards/<template>.md`` (a Jinja template) with the card's YAML front matter."""
    path = CARD_TEMPLATES / f"{template}.md"
    if not path.exists():
        raise FileNotFoundError(f"card template {path} is missing: reinstall culturelens (the wheel ships the "
                                f"templates as the data_cards package)")
    card = DatasetCard.from_template(card_data, template_path=str(path), marker=MARKER, **variables)
    return str(card)


def card_data(*, pretty_name: str, license: str, configs: dict[str, list[str]], default: str, **extra) -> DatasetCardData:
    """Card metadata with one ``configs`` entry per config; ``configs`` maps config -> splits."""
    return DatasetCardData(
        pretty_name=pretty_name,
        license=license,
        configs=[
            {
                "config_name": name,
                "data_files": [{"split": s, "path": parquet_path(name, s)} for s in splits],
                **({"default": True} if name == default else {}),
            }
            for name, splits in configs.items()
        ],
        **extra,
    )


def write_folder(out: Path, tables: dict[tuple[str, str], datasets.Dataset], card: str) -> Path:
    """Write the tables and the card to ``out`` atomically.

    The folder is built next to ``out`` and renamed into place, so a failed build
    leaves an earlier ``out`` untouched. An existing ``out`` is replaced only if
    an earlier build of ours made it (its card carries our marker).
    """
    out = Path(out).resolve()
    if out.exists():
        readme = out / "README.md"
        if not out.is_dir() or (any(out.iterdir()) and MARKER not in _read(readme)):
            raise OutputExists(f"{out} exists and is not a dataset folder built by culturelens; choose another --out")
    with atomic_folder(out, replace=True) as staging:
        for (config, split), table in tables.items():
            target = staging / parquet_path(config, split)
            target.parent.mkdir(parents=True, exist_ok=True)
            table.to_parquet(str(target))
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

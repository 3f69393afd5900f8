"""CulturalFrames: the prompts, images and per-rater human ratings of the expectations track, as a Hub dataset.

Source: "CulturalFrames: Assessing Cultural Expectation Alignment in Text-to-Image
Models and Evaluation Metrics", Nayak et al., arXiv:2506.08835; the authors' Hub
dataset ``mair-lab/CulturalFrames``. Its layout, as far as it could be read
(the Hub card, revision 7a44117, and third-party code that reads the files):

- ``data/train-*.parquet``: one row per image (3,637), columns ``id``, ``prompt``,
  ``image``, ``country``, ``model``;
- ``culturalframes_human_annotations.json``: a JSON list, one object per image,
  with ``id`` (the image's), ``prompt``, ``country``, ``model_name``, ``category``
  (the domain) and ``human_annotations``, one object per rater. The image id ends
  with ``_<model_name>``; what precedes it identifies the prompt.

Where each value sits is the one table a maintainer edits if the release changes:
``RECORD_FIELDS`` and ``RATING_FIELDS`` below. Entries marked confirmed were seen
in third-party code that reads the real file (it reads ``prompt_alignment.score``,
``.missing_explicit``, ``.missing_implicit``, ``stereotype.is_stereotypical``,
``image_quality.score`` and ``overall_score``, accepting any overall score in
[1, 5]); a build stops if no record has one. The others are unverified and
optional: a rating without one gets null, the card counts how many lacked it,
and a build that never finds one says so. The authors' project page shows its
example annotations under other parent names (``image_prompt_alignment`` with
``missing_elements.explicit`` / ``.implicit``, ``stereotypes.present``) and
fractional overall scores (2.3); where the evidence shows two spellings both are
read, and a rating that holds both with different values is an error.

The build writes three configs (split ``test``): ``prompts`` (loads through
``benchmark.datasets.prompts.load_prompts``), ``images`` and ``ratings`` (one row
per rater); every value is checked, and a bad one is an error naming the record,
the rating and the column.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import pandas as pd
import pyarrow.parquet as pq

from benchmark import geo
from benchmark.datasets import hub_layout, names
from benchmark.errors import CultureLensError

SOURCE_REPO = "mair-lab/CulturalFrames"
HUB_REPO, PROMPTS_CONFIG, SPLIT = names.CULTURALFRAMES
CONFIGS = (PROMPTS_CONFIG, "images", "ratings")
ANNOTATIONS_FILE = "culturalframes_human_annotations.json"
IMAGE_FILES = "data/train-*.parquet"

# Where the release keeps each value: our column -> (paths of keys in the JSON object, confirmed?). The first path
# is the one read in the real file (confirmed) or guessed from it; a second is the project page's spelling.
# A confirmed field that no record has means the layout changed, and the build stops; the others are optional.
ALIGNMENT, SITE_ALIGNMENT = "prompt_alignment", "image_prompt_alignment"
RECORD_FIELDS = {
    "image_id": ((("id",),), True),
    "prompt": ((("prompt",),), True),
    "country": ((("country",),), True),
    "model_name": ((("model_name",),), True),
    "domain": ((("category",),), True),
    "ratings": ((("human_annotations",),), True),
    "source_excerpt": ((("excerpt",),), False),   # the Cultural Atlas paragraph; not seen in the release
}
RATING_FIELDS = {
    "rater_id": ((("annotator_id",),), False),
    "alignment": (((ALIGNMENT, "score"), (SITE_ALIGNMENT, "score")), True),
    "explicit_error": (((ALIGNMENT, "missing_explicit"), (SITE_ALIGNMENT, "missing_elements", "explicit")), True),
    "implicit_error": (((ALIGNMENT, "missing_implicit"), (SITE_ALIGNMENT, "missing_elements", "implicit")), True),
    "flagged_words": (((ALIGNMENT, "incorrect_words"), (SITE_ALIGNMENT, "incorrect_words")), False),
    "justification": (((ALIGNMENT, "feedback"), (SITE_ALIGNMENT, "feedback")), False),
    "stereotype": ((("stereotype", "is_stereotypical"), ("stereotypes", "present")), True),
    "stereotype_comment": ((("stereotype", "comment"), ("stereotypes", "comment")), False),
    "quality": ((("image_quality", "score"),), True),
    "quality_artifacts": ((("image_quality", "issues", "artifacts"),), False),
    "quality_unnatural": ((("image_quality", "issues", "unnatural_impression"),), False),
    "overall": ((("overall_score",),), True),
}
# Columns of the release's image Parquet files.
IMAGE_COLUMNS = {"image_id": "id", "prompt": "prompt", "image": "image", "country": "country", "model": "model"}

# The paper's five domains, as the authors spell them (Sec. 3.2; their image folders).
DOMAINS = ("family", "greetings", "etiquette", "religion", "dates-of-significance")
# Model names as the leaderboard's reported rows spell them; keys are lower-case letters and digits only.
MODEL_NAMES = {
    "gptimage": "GPT-Image", "gptimage1": "GPT-Image",
    "imagen3": "Imagen 3", "imagegen3": "Imagen 3",
    "flux": "FLUX.1-dev", "flux1dev": "FLUX.1-dev",
    "sd35": "SD-3.5-Large", "sd35large": "SD-3.5-Large", "stablediffusion35large": "SD-3.5-Large",
}
# Scales: alignment and quality take one of three values (paper, Sec. 3.3; the third-party reader refuses others);
# the overall score any value in [1, 5] (the third-party reader's check; the project page shows 2.3).
SCORES = {"alignment": (0.0, 0.5, 1.0), "quality": (0.0, 0.5, 1.0)}
OVERALL_RANGE = (1.0, 5.0)
FLAGS = ("explicit_error", "implicit_error", "stereotype", "quality_artifacts", "quality_unnatural")
TEXTS = ("rater_id", "justification", "stereotype_comment")


class CulturalFramesSourceError(CultureLensError, ValueError):
    """The release cannot be read or holds a value outside its schema; the message says where."""


def canonical_model(name: str) -> str:
    """The leaderboard's name of a CulturalFrames model ('flux' -> 'FLUX.1-dev'); unknown names unchanged."""
    return MODEL_NAMES.get(re.sub(r"[^a-z0-9]", "", str(name).lower()), str(name))


def canonical_domain(name: str, where: str) -> str:
    domain = re.sub(r"[\s_]+", "-", str(name).strip().lower())
    if domain not in DOMAINS:
        raise CulturalFramesSourceError(f"{where}: domain {name!r} is not one of {', '.join(DOMAINS)}")
    return domain


def resolve_source(source: str | Path, *, revision: str | None = None) -> Path:
    """A local copy of the release: ``source`` if it is a folder, else the Hub repo ``source`` downloaded."""
    folder = Path(source)
    if folder.is_dir():
        return folder
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        raise CulturalFramesSourceError(f"{source}: neither a folder nor a Hub dataset repo id (ORG/NAME)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(source), repo_type="dataset", revision=revision,
                                      allow_patterns=["README.md", ANNOTATIONS_FILE, IMAGE_FILES]))
    except Exception as error:  # offline mode, network, missing repo: all say the same thing to the user
        raise CulturalFramesSourceError(
            f"cannot download the Hub dataset {source} ({type(error).__name__}: {str(error).splitlines()[0][:200]}). "
            f"Where there is network, run `hf download {source} --repo-type dataset --local-dir DIR` and "
            "pass --source DIR.") from None


def fetch_release(downloads, *, repo: str = SOURCE_REPO, revision: str | None = None, pins: dict | None = None,
                  progress: bool = True) -> tuple[Path, dict]:
    """The release's files (card, ratings, image Parquet files) at one Hub commit in the downloads folder
    (``benchmark.downloads.Downloads``), each verified: at the commit and sha256s of ``pins`` (an earlier
    build's), else at the commit ``revision`` names now (default: the repo's main branch). Returns the folder
    and the pins: {"repo", "commit", "files": {path: {"size", "sha256"}}}."""
    from benchmark.datasets import hub_files

    if pins is not None:
        commit, files = pins["commit"], pins["files"]
        if pins.get("repo") != repo:
            raise CulturalFramesSourceError(f"the CulturalFrames pins are of {pins.get('repo')}, not {repo}")
    else:
        commit, files = hub_files.files_at(repo, revision or "main", ["README.md", ANNOTATIONS_FILE, IMAGE_FILES])
        if ANNOTATIONS_FILE not in files:
            raise CulturalFramesSourceError(f"{repo}@{commit[:7]} has no {ANNOTATIONS_FILE}: is this the "
                                            "CulturalFrames release?")
    folder, pinned = hub_files.download(repo, commit, files, downloads, what="culturalframes", progress=progress)
    return folder, {"repo": repo, "commit": commit, "files": pinned}


def _get(obj, path: tuple[str, ...]):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def spelled(paths: tuple[tuple[str, ...], ...]) -> str:
    """The paths of a mapping-table entry as the card and errors write them ('a.b or c.d')."""
    return " or ".join(".".join(path) for path in paths)


def _get_any(obj, paths: tuple[tuple[str, ...], ...], where: str, column: str):
    """The value at whichever of ``paths`` ``obj`` has (None if none); CulturalFramesSourceError if two disagree."""
    found = {".".join(path): value for path in paths if (value := _get(obj, path)) is not None}
    values = list(found.values())
    if any(value != values[0] for value in values[1:]):
        shown = ", ".join(f"{path} = {value!r}" for path, value in found.items())
        raise CulturalFramesSourceError(f"{where}: column {column!r} is given twice with different values ({shown})")
    return values[0] if values else None


def _score(value, allowed: tuple, where: str, column: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) not in allowed:
        shown = ", ".join(f"{a:g}" for a in allowed)
        raise CulturalFramesSourceError(f"{where}: column {column!r} = {value!r} is not one of {shown}")
    return float(value)


def _overall(value, where: str) -> float | None:
    """The overall score: any number in ``OVERALL_RANGE`` (fractional values kept as they are)."""
    if value is None:
        return None
    low, high = OVERALL_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= float(value) <= high:
        raise CulturalFramesSourceError(
            f"{where}: column 'overall' = {value!r} is outside [{low:g}, {high:g}] (the overall "
            "score is a number from 1 to 5)")
    return float(value)


def _flag(value, where: str, column: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise CulturalFramesSourceError(f"{where}: column {column!r} = {value!r} is not true/false")


def _text(value, where: str, column: str) -> str | None:
    if value is None or isinstance(value, str):
        return value.strip() if isinstance(value, str) and value.strip() else None
    if column == "rater_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise CulturalFramesSourceError(f"{where}: column {column!r} = {value!r} is not text")


def _words(value, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise CulturalFramesSourceError(f"{where}: column 'flagged_words' = {value!r} is not a list of words")
    return [w.strip() for w in value if w.strip()]


def check_rating(raw, where: str) -> dict:
    """One rater's annotation -> our columns, every value checked (``where`` names it in errors)."""
    if not isinstance(raw, dict):
        raise CulturalFramesSourceError(f"{where}: not a JSON object")
    row = {column: _get_any(raw, paths, where, column) for column, (paths, _) in RATING_FIELDS.items()}
    out = {column: _score(row[column], allowed, where, column) for column, allowed in SCORES.items()}
    out["overall"] = _overall(row["overall"], where)
    out |= {column: _flag(row[column], where, column) for column in FLAGS}
    out |= {column: _text(row[column], where, column) for column in TEXTS}
    out["flagged_words"] = _words(row["flagged_words"], where)
    out["present"] = {column for column, value in row.items() if value is not None}
    return out


@dataclass
class Release:
    """The release read and checked: one dict per image record and per rating, plus what was found missing:
    ``fields_never_found`` (columns no record has) and ``optional_missing`` (each unconfirmed column -> how many
    ratings, or records for a record column, lack it)."""

    prompts: list[dict]
    images: list[dict]
    ratings: list[dict]
    image_files: list[Path]
    fields_never_found: list[str]
    optional_missing: dict
    n_records: int
    notes: dict


def _prompt_key(record_id: str, model_name: str | None, country: str, prompt: str) -> tuple[str, bool]:
    """The upstream prompt identity: the image id without its '_<model_name>' suffix (else country + text)."""
    if model_name and record_id.endswith(f"_{model_name}"):
        return record_id[: -len(model_name) - 1], True
    return f"{country}|{prompt}", False


def prompt_id(key: str) -> str:
    """Our stable prompt id: 'cf-' + 12 hex digits of the upstream prompt key's sha256."""
    return "cf-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def _read_image_index(files: list[Path]) -> dict[str, dict]:
    """image id -> its metadata row of the release's Parquet files (image bytes are not read here)."""
    rows: dict[str, dict] = {}
    columns = [IMAGE_COLUMNS[c] for c in ("image_id", "prompt", "country", "model")]
    for path in files:
        try:
            table = pq.read_table(path, columns=columns)
        except Exception as error:
            raise CulturalFramesSourceError(
                f"{path}: not the release's image Parquet (columns {columns}): {error}") from None
        for row in table.to_pylist():
            image_id = row[IMAGE_COLUMNS["image_id"]]
            if image_id in rows:
                raise CulturalFramesSourceError(f"{path}: image id {image_id!r} appears twice in the image files")
            rows[image_id] = {c: row[IMAGE_COLUMNS[c]] for c in ("prompt", "country", "model")} | {"file": path}
    return rows


def read_release(folder: Path) -> Release:
    """Read and check the release in ``folder`` (the layout in the module docstring)."""
    folder = Path(folder)
    annotations = folder / ANNOTATIONS_FILE
    files = sorted(folder.glob(IMAGE_FILES))
    if not annotations.is_file():
        raise CulturalFramesSourceError(
            f"{folder}: no {ANNOTATIONS_FILE} (the release's ratings); is this the CulturalFrames "
            "release? Without it there is nothing to rate against.")
    if not files:
        raise CulturalFramesSourceError(f"{folder}: no image files {IMAGE_FILES}")
    try:
        records = json.loads(annotations.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CulturalFramesSourceError(f"{annotations}: not JSON ({error})") from None
    if not isinstance(records, list) or not records:
        raise CulturalFramesSourceError(f"{annotations}: expected a non-empty JSON list of image records")
    index = _read_image_index(files)

    present: Counter = Counter()
    prompts: dict[str, dict] = {}
    images, ratings, seen = [], [], set()
    notes = Counter()
    for number, record in enumerate(records):
        where = f"{ANNOTATIONS_FILE}, record {number}"
        if not isinstance(record, dict):
            raise CulturalFramesSourceError(f"{where}: not a JSON object")
        values = {column: _get_any(record, paths, where, column) for column, (paths, _) in RECORD_FIELDS.items()}
        for column, (paths, confirmed) in RECORD_FIELDS.items():
            if confirmed and values[column] is None:
                raise CulturalFramesSourceError(
                    f"{where}: no {spelled(paths)!r}; the release layout changed: edit RECORD_FIELDS "
                    "in benchmark/datasets/culturalframes.py")
        present.update(f"record:{column}" for column, value in values.items() if value is not None)
        image_id = str(values["image_id"])
        where = f"{where} (id {image_id!r})"
        if image_id in seen:
            raise CulturalFramesSourceError(f"{where}: the image id appears twice")
        seen.add(image_id)
        if not isinstance(values["ratings"], list):
            raise CulturalFramesSourceError(f"{where}: {spelled(RECORD_FIELDS['ratings'][0])!r} is not a list")
        country, text = str(values["country"]).strip(), " ".join(str(values["prompt"]).split())
        try:
            code = geo.country_code(country)
        except geo.UnknownCountry as error:
            raise CulturalFramesSourceError(f"{where}: {error}") from None
        domain = canonical_domain(values["domain"], where)
        meta = index.get(image_id)
        if meta is None:
            notes["records_without_image"] += 1
        elif " ".join(str(meta["prompt"]).split()) != text or str(meta["country"]).strip() != country:
            raise CulturalFramesSourceError(
                f"{where}: prompt or country differs from the image file's row for the same id "
                f"({meta['prompt']!r}, {meta['country']!r})")
        key, from_id = _prompt_key(image_id, str(values["model_name"]), country, text)
        notes["prompt_key_from_id" if from_id else "prompt_key_from_text"] += 1
        pid = prompt_id(key)
        entry = prompts.setdefault(pid, {
            "prompt_id": pid, "prompt": text, "country": country, "country_code": code,
            "continent": geo.continent(code), "domain": domain, "source_excerpt": values["source_excerpt"],
            "source_prompt_key": key, "models": [], "n_images": 0})
        if (entry["prompt"], entry["country"], entry["domain"]) != (text, country, domain):
            raise CulturalFramesSourceError(
                f"{where}: prompt key {key!r} already names a different prompt, country or domain")
        model = canonical_model(meta["model"] if meta else values["model_name"])
        if model in entry["models"]:
            raise CulturalFramesSourceError(f"{where}: prompt {key!r} has two images from {model}")
        if meta is not None:
            entry["models"].append(model)
            entry["n_images"] += 1
            images.append({"image_id": image_id, "prompt_id": pid, "model": model, "model_source": meta["model"],
                           "country": country, "domain": domain, "prompt": text,
                           "n_ratings": len(values["ratings"]), "file": meta["file"]})
        for slot, raw in enumerate(values["ratings"]):
            rating = check_rating(raw, f"{where}, rating {slot}")
            present.update(rating.pop("present"))
            ratings.append({"rating_id": f"{image_id}#{slot}", "image_id": image_id, "prompt_id": pid,
                            "model": model, "country": country, "domain": domain,
                            "rater_id": rating.pop("rater_id") or f"{image_id}#{slot}", "rater_slot": slot, **rating})
    notes["images_without_ratings"] = len(set(index) - seen)
    by_text = Counter((p["country"], p["prompt"]) for p in prompts.values())
    notes["duplicate_prompt_texts"] = sum(n - 1 for n in by_text.values() if n > 1)
    never = [c for c, (_, confirmed) in RATING_FIELDS.items() if not present[c]]
    broken = [c for c in never if RATING_FIELDS[c][1]]
    if broken:
        paths = ", ".join(spelled(RATING_FIELDS[c][0]) for c in broken)
        raise CulturalFramesSourceError(
            f"{annotations}: no rating has {paths}; the release layout changed: edit RATING_FIELDS in "
            "benchmark/datasets/culturalframes.py")
    optional = {c: len(ratings) - present[c] for c, (_, confirmed) in RATING_FIELDS.items() if not confirmed}
    optional |= {c: len(records) - present[f"record:{c}"] for c, (_, confirmed) in RECORD_FIELDS.items()
                 if not confirmed}
    never += [c for c, (_, confirmed) in RECORD_FIELDS.items() if not confirmed and not present[f"record:{c}"]]
    for prompt in prompts.values():
        prompt["models"].sort()
    return Release(list(prompts.values()), images, ratings, files, never, optional, len(records), dict(notes))


def _image_rows(files: list[str], images: dict[str, dict]):
    """The images config's rows, streamed from the release's Parquet files (bytes kept as they are)."""
    for path in files:
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=64, columns=[IMAGE_COLUMNS["image_id"], IMAGE_COLUMNS["image"]]):
            for row in batch.to_pylist():
                meta = images.get(row[IMAGE_COLUMNS["image_id"]])
                if meta is None:
                    continue
                data = row[IMAGE_COLUMNS["image"]]["bytes"]
                yield {**meta, "image": {"bytes": data, "path": None},
                       "image_sha256": hashlib.sha256(data).hexdigest()}


def features(config: str) -> datasets.Features:
    """The published schema of each config (see the card's Schema section)."""
    text, number, flag = datasets.Value("string"), datasets.Value("float64"), datasets.Value("bool")
    if config == "prompts":
        return datasets.Features({
            "prompt_id": text, "prompt": text, "country": text, "country_code": text, "continent": text,
            "domain": text, "source_excerpt": text, "source_prompt_key": text,
            "models": datasets.List(text), "n_images": datasets.Value("int32")})
    if config == "images":
        return datasets.Features({
            "image_id": text, "prompt_id": text, "model": text, "model_source": text, "country": text,
            "domain": text, "prompt": text, "n_ratings": datasets.Value("int32"), "image": datasets.Image(),
            "image_sha256": text})
    return datasets.Features({
        "rating_id": text, "image_id": text, "prompt_id": text, "model": text, "country": text, "domain": text,
        "rater_id": text, "rater_slot": datasets.Value("int32"), "alignment": number, "explicit_error": flag,
        "implicit_error": flag, "flagged_words": datasets.List(text), "justification": text, "stereotype": flag,
        "stereotype_comment": text, "quality": number, "quality_artifacts": flag, "quality_unnatural": flag,
        "overall": number})


LICENCE = hub_layout.Licence("other", "culturalframes-no-licence-declared",
                              f"https://huggingface.co/datasets/{SOURCE_REPO}")
"""The authors' release declares no licence: the card says so and links to it."""


def build(source: str | Path, out: Path | str, *, revision: str | None = None, repo: str = HUB_REPO,
          max_shard_bytes: int = hub_layout.MAX_SHARD_BYTES, shown_as: str | None = None) -> dict:
    """Build the CulturalFrames folder (``prompts``, ``images``, ``ratings``) from the release; return a summary.
    ``max_shard_bytes``: a Parquet shard's size at most (the rated images are most of it). ``shown_as``: what the
    card names as the source (a downloaded release's repo, not its local folder)."""
    from benchmark import __version__
    from benchmark.papers import CULTURALFRAMES, bibtex

    folder = resolve_source(source, revision=revision)
    release = read_release(folder)
    images = {row["image_id"]: {k: v for k, v in row.items() if k != "file"} for row in release.images}
    ratings = pd.DataFrame(release.ratings)
    present = {c: int(ratings[c].notna().sum()) for c in RATING_FIELDS if c != "rater_id"}
    present["rater_id"] = int((ratings["rater_id"] != ratings["rating_id"]).sum())
    per_image = Counter(Counter(r["image_id"] for r in release.ratings).values())
    models = Counter(row["model"] for row in release.images)
    countries = Counter(p["country"] for p in release.prompts)
    domains = Counter(p["domain"] for p in release.prompts)
    card = hub_layout.render_card(
        "culturalframes",
        hub_layout.card_data(
            pretty_name="CulturalFrames (CultureLens build)", licence=LICENCE,
            configs={c: [SPLIT] for c in CONFIGS}, default="prompts", task_categories=["text-to-image"],
            language=["en"], size_categories=[hub_layout.size_category(len(ratings))],
            source_datasets=[f"https://huggingface.co/datasets/{SOURCE_REPO}"],
            tags=["culture", "benchmark", "human-evaluation", "text-to-image-evaluation"]),
        version=__version__, repo=repo, split=SPLIT, source=shown_as or str(source), revision=revision,
        source_repo=SOURCE_REPO, n_prompts=len(release.prompts), n_images=len(images), n_ratings=len(ratings),
        models=dict(sorted(models.items())), countries=dict(sorted(countries.items())),
        domains=dict(sorted(domains.items())), ratings_per_image=dict(sorted(per_image.items())),
        present=present, record_fields={c: (spelled(p), k) for c, (p, k) in RECORD_FIELDS.items()},
        rating_fields={c: (spelled(p), k) for c, (p, k) in RATING_FIELDS.items()}, never=release.fields_never_found,
        optional_missing=release.optional_missing, n_records=release.n_records, notes=release.notes,
        annotations_file=ANNOTATIONS_FILE, licence=LICENCE, bibtex=bibtex(CULTURALFRAMES))
    cache = Path(tempfile.mkdtemp(prefix="culturalframes-build-"))
    try:
        image_table = datasets.Dataset.from_generator(
            _image_rows, features=features("images"), cache_dir=str(cache),
            gen_kwargs={"files": [str(p) for p in release.image_files], "images": images})
        hub_layout.write_folder(Path(out), {
            ("prompts", SPLIT): datasets.Dataset.from_list(release.prompts, features=features("prompts")),
            ("images", SPLIT): image_table,
            ("ratings", SPLIT): datasets.Dataset.from_pandas(ratings, features=features("ratings"),
                                                             preserve_index=False),
        }, card, max_shard_bytes=max_shard_bytes)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"prompts": len(release.prompts), "images": len(images), "ratings": len(ratings),
            "models": dict(models), "fields_never_found": release.fields_never_found,
            "optional_missing": release.optional_missing, "notes": release.notes,
            "out": str(out)}


def _local_files(folder: Path, config: str) -> list[Path]:
    """The Parquet shards of a config of a built folder."""
    files = hub_layout.parquet_files(Path(folder), config, SPLIT)
    if not files:
        raise CulturalFramesSourceError(f"{folder}: no {hub_layout.shards_pattern(config, SPLIT)}; build the folder "
                                        "with `culturelens data build culturalframes --out DIR` and pass DIR")
    return files


def load_config(source: str | Path, config: str, *, columns: list[str] | None = None,
                revision: str | None = None) -> pd.DataFrame:
    """A config of a built CulturalFrames folder (its Parquet file read directly, so a rebuilt folder is never
    served from a stale cache) or of its Hub repo (``datasets.load_dataset``), as a DataFrame; ``columns``:
    only those (leave out ``image`` to skip the image bytes of a local folder)."""
    if Path(source).is_dir():
        return pd.concat([pd.read_parquet(file, columns=columns) for file in _local_files(Path(source), config)],
                         ignore_index=True)
    try:
        table = datasets.load_dataset(str(source), config, split=SPLIT, revision=revision)
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as error:
        raise CulturalFramesSourceError(
            f"cannot load config {config!r} of {source}: {str(error).splitlines()[0][:200]}. "
            "Build it with `culturelens data build culturalframes --out DIR` and pass DIR.") from None
    return (table.select_columns(columns) if columns else table).to_pandas()


def images_of(folder: Path, model: str):
    """(image_id, prompt_id, image bytes) of one model's images in a built folder, streamed."""
    for file in _local_files(folder, "images"):
        for batch in pq.ParquetFile(file).iter_batches(batch_size=64,
                                                       columns=["image_id", "prompt_id", "model", "image"]):
            for row in batch.to_pylist():
                if row["model"] == model:
                    yield row["image_id"], row["prompt_id"], row["image"]["bytes"]

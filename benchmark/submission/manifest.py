"""The submission manifest, format v1: what was generated, by which model, for which dataset.

The schema is the pydantic model below; ``culturelens schema`` prints it as
JSON Schema and ``submissions/manifest.schema.json`` is the published copy
(a test checks the two agree).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

FORMAT_VERSION = 1
PROMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
PART_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")  # a suite part, e.g. "cube-1k": also a folder name


def is_repo_id(text: str) -> bool:
    """Whether ``text`` is a Hugging Face repo id, ORG/NAME, that cannot climb out of a folder (no "..")."""
    return bool(REPO_ID.fullmatch(text)) and ".." not in text


# Characters that show as nothing although they are letters or symbols, not format characters: the Hangul
# fillers, the Khmer inherent vowels, the combining grapheme joiner and the blank Braille pattern.
INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u17b4\u17b5\u034f\u2800")
TEXT_WHITESPACE = frozenset("\t\n\r")


def _refuse(value: str, bad: set[str], what: str) -> str:
    """``value``, or a ValueError naming ``what`` and the code points (U+XXXX) of the ``bad`` characters."""
    if bad:
        codes = sorted(f"U+{ord(ch):04X}" for ch in bad)
        raise ValueError(f"must not contain {what}: {', '.join(codes[:5])}")
    return value


def _text(value: str) -> str:
    """Free text (``notes``): lines and tabs, but no other control (Cc) or format (Cf) character: NUL, escape
    sequences, right-to-left overrides, zero-width characters."""
    bad = {ch for ch in value if unicodedata.category(ch) in ("Cc", "Cf") and ch not in TEXT_WHITESPACE}
    return _refuse(value, bad, "control characters (NUL, escape, ...) or invisible format characters "
                               "(right-to-left overrides, zero-width, ...)")


def _one_line(value: str) -> str:
    """One line of text: no control (Cc) or format (Cf) character (newlines, tabs, NUL, right-to-left
    overrides, zero-width, ...) and no line or paragraph separator (Zl, Zp)."""
    bad = {ch for ch in value if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")}
    return _refuse(value, bad, "control characters (newlines, tabs, NUL, ...), line separators or invisible "
                               "format characters (right-to-left overrides, zero-width, ...)")


def _one_line_if_text(value: object) -> object:
    """A setting's value: text follows the one-line rule, numbers, booleans and null pass."""
    return _one_line(value) if isinstance(value, str) else value


def _name(value: str) -> str:
    """A name shown on the leaderboard (model, licence, contact, ...): one line, and no character that
    shows as nothing (``INVISIBLE``), so that no two names look alike and no name looks empty."""
    _one_line(value)
    return _refuse(value, INVISIBLE & set(value), "invisible filler characters (Hangul filler, blank Braille "
                                                   "pattern, ...)")


def _repo_id(value: str) -> str:
    if not is_repo_id(value):
        raise ValueError("must be a Hugging Face dataset repo id, ORG/NAME (letters, digits, '-', '_', '.')")
    return value


def _prompt_id(value: str) -> str:
    if not PROMPT_ID.fullmatch(value) or ".." in value:
        raise ValueError("must be a dataset prompt id: letters, digits, '-', '_', '.', at most 128 characters")
    return value


# Length bounds sit before the validators: placed after one, pydantic checks them as a generic length and says
# "at most 100 items" of a text.
Line = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_name)]
ShortLine = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_name)]
Key = Annotated[str, Field(max_length=64), AfterValidator(_one_line)]
Detail = Annotated[str, Field(max_length=500), AfterValidator(_one_line)]
LongLine = Annotated[str, Field(max_length=2_000), AfterValidator(_one_line)]
Text = Annotated[str, Field(max_length=2_000), AfterValidator(_text)]
Setting = Annotated[str | int | float | bool | None, AfterValidator(_one_line_if_text)]  # one error, not one per type
PromptId = Annotated[str, AfterValidator(_prompt_id)]
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Model(_Strict):
    """The text-to-image model that made the images."""

    name: ShortLine = Field(description="Display name on the leaderboard, e.g. 'SDXL base 1.0'")
    id: Annotated[Line, Field(description="Hub id ('stabilityai/stable-diffusion-xl-base-1.0') or URL of the model")]
    revision: Line | None = Field(None, description="Commit sha, tag or version of the weights or API")
    type: Literal["open", "closed"] = Field(description="'open' if the weights are public, 'closed' for an API")
    parameters_billions: float | None = Field(None, gt=0, le=10_000, description="Size, if known")


class Dataset(_Strict):
    """The prompt set the submission answers."""

    repo: Annotated[str, AfterValidator(_repo_id), Field(description="Hub dataset repo, e.g. 'culturelens/cube-1k'")]
    config: Annotated[Line, Field(description="Dataset config, e.g. 'cube_1k'")]
    split: Line = "test"
    revision: Line | None = Field(None, description="Commit sha of the dataset repo the prompts came from")


class Generation(_Strict):
    """How the images were generated (recorded, shown, never trusted for scoring)."""

    pipeline: Line | None = Field(None, description="e.g. 'StableDiffusionXLPipeline'")
    scheduler: Line | None = None
    steps: int | None = Field(None, ge=1, le=10_000)
    guidance_scale: float | None = Field(None, ge=0, le=100)
    width: int | None = Field(None, ge=1, le=16_384)
    height: int | None = Field(None, ge=1, le=16_384)
    negative_prompt: LongLine | None = None
    dtype: Line | None = None
    extra: dict[Key, Setting] = Field(
        default_factory=dict, max_length=64, description="Any other setting, flat key -> value")


def _part_name(value: str) -> str:
    if not PART_NAME.fullmatch(value):
        raise ValueError("must be a suite part name: lower-case letters, digits and '-', e.g. 'cube-1k'")
    return value


class SuitePart(_Strict):
    """The part of a suite this submission answers: in a suite submission, each part's manifest names it."""

    repo: Annotated[str, AfterValidator(_repo_id), Field(description="The suite's Hub repo, e.g. 'culturelens/suite'")]
    version: int = Field(ge=1, le=10_000, description="The suite's version, e.g. 1")
    part: Annotated[str, AfterValidator(_part_name), Field(description="The part, e.g. 'cube-1k'; its folder in "
                                                                       "the submission is parts/<part>/")]


class MissingImage(_Strict):
    """An image the model did not produce: a refusal is a result, not a crash."""

    prompt_id: PromptId
    seed: Seed
    reason: Literal["refused", "safety_filter", "error"]
    detail: Detail | None = None


class Manifest(_Strict):
    """``manifest.json`` of a CultureLens submission, format v1."""

    format_version: Literal[1] = Field(description="Always 1 for this format")
    model: Model
    dataset: Dataset
    images_per_prompt: int = Field(ge=1, le=1_000)
    seeds: list[Seed] = Field(description="One seed per image of a prompt; image files are named <seed>.<ext>")
    generation: Generation = Field(default_factory=Generation)
    license: Annotated[Line, Field(description="Licence of the submitted images, e.g. 'CC-BY-4.0'")]
    contact: Annotated[Line, Field(description="E-mail or Hugging Face user name of the submitter")]
    missing: list[MissingImage] = Field(default_factory=list, description="Images not produced, with the reason")
    notes: Text | None = None
    suite: SuitePart | None = Field(
        None, description="In a suite submission (parts/<part>/manifest.json), the suite part these images answer")
    culture_labels: list[ShortLine] = Field(
        default_factory=list, max_length=20, json_schema_extra={"deprecated": True},
        description="Ignored (validation warns): relevance scores every image against each country of the prompt "
                    "set, the same labels for every submission. Accepted so that older manifests stay valid")

    @model_validator(mode="after")
    def _seeds_match_images_per_prompt(self) -> Manifest:
        if len(self.seeds) != self.images_per_prompt:
            raise ValueError(f"seeds lists {len(self.seeds)} seeds but images_per_prompt is {self.images_per_prompt}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds must be distinct")
        pairs = [(m.prompt_id, m.seed) for m in self.missing]
        if len(set(pairs)) != len(pairs):
            raise ValueError("missing lists the same (prompt_id, seed) twice")
        unknown = sorted({m.seed for m in self.missing} - set(self.seeds))
        if unknown:
            raise ValueError(f"missing names seeds {unknown} that are not in seeds")
        return self


def json_schema() -> str:
    """The manifest's JSON Schema, as published in ``submissions/manifest.schema.json``."""
    schema = Manifest.model_json_schema()
    schema["title"] = "CultureLens submission manifest, format v1"
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"

"""The suite: one versioned benchmark definition, ``culturelens/suite`` v1, that says for every track which prompts
a model answers and how many images per prompt, so that one submission scores a model on every track.

The definition is data: a few ``Part`` records (a dataset pinned by its content, the seeds, the tracks scored on
it), read by ``culturelens generate --suite`` (what to make), the validator (what a part must hold,
``benchmark.submission.suite``), the harness (which tracks score which part, ``benchmark.suite_scoring``) and the
builder of the suite's datasets and scoring assets (``benchmark.suite_build``). Its card (``data_cards/suite.md``)
is generated from it.

The papers' values where they exist:

- iconicity: the CRT references, 767 titles x 10 images (De Rosa Palmini & Cetinic, arXiv:2511.11435, Sec. 3-4);
- diversity: CUBE's under-specified rephrasings x seeds 0-79 (Kannen et al., arXiv:2407.06863, App. H.1): never the
  fully specified CUBE-1K prompts, where the cultures are named and diversity means nothing;
- expectations: the 983 CulturalFrames prompts x 1 image (Nayak et al., arXiv:2506.08835, Sec. 3);
- awareness, variability and relevance: the 992 CUBE-1K prompts x seeds 0-9 (``CUBE_1K_SEEDS`` says why 10).

Nothing here imports a data or model library: the leaderboard service reads it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchmark.datasets import names
from benchmark.errors import CultureLensError

SUITE_REPO = "culturelens/suite"
VERSION = 1
DEFINITION = "suite.json"
"""The definition inside a suite folder (``culturelens suite build``'s output) and the suite's Hub repo."""

# W1KP (Tang et al., arXiv:2406.08482) needs several seeds per prompt: its score is a U-statistic over the
# C(k, 2) pairs of a prompt's images (Sec. 2.2; its linguistic analyses used 20 images per prompt, Sec. 4.2) and
# its reusability curve W1KP_k exists for k = 2..k images. Ten seeds give 45 pairs a prompt and the curve up to
# k = 10, where W1KP finds Imagen's prompts used up (10-50 seeds, Sec. 4.1); SDXL's 50-200 are out of reach of
# any count affordable over 992 prompts (the paper's own curves took 300 seeds on 50 prompts). Ten is also CRT's
# n, so awareness and iconicity rest on as many images per prompt. Twenty would add 9,920 images, half the suite
# again (+7 GPU-hours for SDXL, +35 for FLUX.1-dev at the rates below), for a curve still far below SDXL's k.
CUBE_1K_SEEDS = tuple(range(10))


class SuiteError(CultureLensError, ValueError):
    """A suite definition that cannot be read, or a part it does not have; the message says which and why."""


@dataclass(frozen=True)
class DatasetPin:
    """The prompt set a part answers: repo, config and split as a submission's manifest names them, and the
    content pinned: ``digest`` (``PromptSet.digest``, the prompt rows wherever they are served from) and
    ``revision`` (the Hub commit, once the dataset is published). None: not pinned yet, and the card says so."""

    repo: str
    config: str
    split: str = "test"
    prompts: int | None = None
    digest: str | None = None
    revision: str | None = None

    def __str__(self) -> str:
        """``repo:config:split``, as results record a dataset."""
        return f"{self.repo}:{self.config}:{self.split}"


@dataclass(frozen=True)
class Part:
    """One part of the suite: every prompt of ``dataset``, one image per seed, scored by ``tracks``. ``why`` says
    where the prompt set and the seed count come from."""

    name: str
    dataset: DatasetPin
    seeds: tuple[int, ...]
    tracks: tuple[str, ...]
    why: str

    @property
    def images_per_prompt(self) -> int:
        return len(self.seeds)

    @property
    def images(self) -> int | None:
        """Images a complete answer holds (None while the prompt count is not pinned)."""
        return None if self.dataset.prompts is None else self.dataset.prompts * len(self.seeds)


@dataclass(frozen=True)
class GenerationCost:
    """Seconds one image takes to generate, with the preset's settings, on ``gpu``; ``measured`` is False for a
    figure taken from ``source`` rather than timed by us (the card then calls it an estimate)."""

    preset: str
    seconds_per_image: float
    gpu: str
    source: str
    measured: bool = False


# Per-image seconds at each preset's settings (benchmark/generation/presets.py), batch size 1, 1024 x 1024, no
# compilation or caching. Neither was timed by us: this project's machines have no GPU to spare.
COSTS = (
    GenerationCost("sdxl", 2.496, "H100",
                   "Stability AI's stabilityai/stable-diffusion-xl-1.0-tensorrt model card: SDXL base, 30 steps at "
                   "1024x1024, non-optimized PyTorch baseline 2,496 ms on an H100 (3,704 ms on an A100)"),
    GenerationCost("flux.1-dev", 12.7, "H100",
                   "github.com/varadrane1707/BenchmarkFlux (README, commit 35368df): FLUX.1-dev in diffusers, bf16, "
                   "28 steps at 1024x1024, 7.11 s on an H100 (15.65 s on an A100); x 50/28 for the preset's 50 "
                   "steps (text encoding and decoding scaled too: a slight overestimate)"),
)


UNPINNED = "unpinned"
"""A protocol's ``build`` field for rows scored against a build of the suite whose sources were not all the pinned
ones (a file given, a mirror's): never the protocol of the suite's pinned build, so never ranked with it."""


@dataclass(frozen=True)
class Suite:
    """A versioned suite: its Hub repo, version and parts. ``pinned``: whether the build served (a suite folder's
    ``suite.json``) read every source at its pin; the definition alone is pinned."""

    repo: str
    version: int
    parts: tuple[Part, ...]
    pinned: bool = True

    def __post_init__(self) -> None:
        seen = [p.name for p in self.parts]
        if len(set(seen)) != len(seen):
            raise SuiteError(f"suite {self.label}: a part name appears twice in {seen}")

    @property
    def label(self) -> str:
        return f"{self.repo} v{self.version}"

    @property
    def name(self) -> str:
        """What a page calls the suite's protocol: "CultureLens suite v1", and ", unpinned build" for a build from
        other sources than the pinned ones."""
        return f"CultureLens suite v{self.version}" + ("" if self.pinned else f", {UNPINNED} build")

    @property
    def build(self) -> str | None:
        """The protocol field ``build`` of rows scored against this build (None for the pinned one)."""
        return None if self.pinned else UNPINNED

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parts]

    def part(self, name: str) -> Part:
        for part in self.parts:
            if part.name == name:
                return part
        raise SuiteError(f"{self.label} has no part {name!r} (its parts: {', '.join(self.names)})")

    def part_of_track(self, track: str) -> Part | None:
        """The part a track is scored on (None if no part has it)."""
        return next((p for p in self.parts if track in p.tracks), None)

    def answered_by(self, track: str, protocol: dict) -> bool:
        """Whether a result of ``track`` scored under ``protocol`` (the fields of its protocol, as results record
        them) answers this suite's part for the track: its dataset, the prompt rows the part pins (when pinned)
        and the part's images per prompt, as the seeds declared with each image missing of them scored as a
        failure (``results.MISSING_AS_FAILURES``; results scored before that counted the fewest images present,
        so a submission that padded its seeds and refused some could pass for fewer seeds), and the same build, pinned
        or not (``build``). Such rows are the ones the overall ranking compares."""
        from benchmark.results import MISSING_AS_FAILURES  # pyarrow: only when a ranking reads rows

        part = self.part_of_track(track)
        if part is None:
            return False
        pin = part.dataset
        return (protocol.get("dataset") == str(pin) and protocol.get("images_per_prompt") == part.images_per_prompt
                and protocol.get("missing_images") == MISSING_AS_FAILURES and protocol.get("build") == self.build
                and (pin.digest is None or protocol.get("dataset_revision") == pin.digest))

    @property
    def images(self) -> int | None:
        """Images a complete suite submission holds (None while a part's prompt count is not pinned)."""
        counts = [p.images for p in self.parts]
        return None if None in counts else sum(counts)

    def gpu_hours(self, cost: GenerationCost) -> float | None:
        """Generation GPU-hours for the whole suite at ``cost``'s seconds per image."""
        return None if self.images is None else self.images * cost.seconds_per_image / 3600

    def with_built(self, part: str, *, prompts: int, digest: str) -> Suite:
        """The same suite with one part's dataset as it was built (``culturelens suite build``): the folder's
        definition then says what its own datasets hold."""
        return replace(self, parts=tuple(replace(p, dataset=replace(p.dataset, prompts=prompts, digest=digest))
                                         if p.name == part else p for p in self.parts))

    def to_dict(self) -> dict:
        return {"repo": self.repo, "version": self.version,
                "parts": [{**asdict(p), "seeds": list(p.seeds), "tracks": list(p.tracks)} for p in self.parts]}

    @classmethod
    def from_dict(cls, data: dict, where: str = "suite definition") -> Suite:
        try:
            parts = tuple(Part(p["name"], DatasetPin(**p["dataset"]), tuple(int(s) for s in p["seeds"]),
                               tuple(p["tracks"]), p.get("why", "")) for p in data["parts"])
            return cls(data["repo"], int(data["version"]), parts)
        except (KeyError, TypeError, ValueError) as error:
            raise SuiteError(f"{where}: not a suite definition ({type(error).__name__}: {error})") from None

    @classmethod
    def load(cls, folder: Path) -> Suite:
        """The definition a suite folder holds (``DEFINITION``)."""
        path = Path(folder) / DEFINITION
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SuiteError(f"{folder} holds no {DEFINITION}: build a suite folder with `culturelens suite build "
                             f"--out {folder}`") from None
        except ValueError as error:
            raise SuiteError(f"{path}: not JSON ({error})") from None
        return cls.from_dict(data.get("suite", data), str(path))


SUITE_V1 = Suite(SUITE_REPO, VERSION, (
    Part("cube-1k", DatasetPin(*names.CUBE_1K, prompts=992, digest="1389460b8c1434bf"), CUBE_1K_SEEDS,
         ("awareness", "variability", "relevance"),
         "CUBE-1K (Kannen et al., arXiv:2407.06863), every prompt; seeds 0-9: W1KP needs several images per "
         "prompt (45 pairs at 10, its curve up to k = 10), CRT's n is 10, and 20 would cost half the suite again; "
         "relevance scores these images against labels the prompts fix, never the submitter's"),
    Part("cube-diversity", DatasetPin(*names.CUBE_DIVERSITY, prompts=15, digest="a8976cfe4f394027"),
         names.CUBE_DIVERSITY_SEEDS, ("diversity",),
         "CUBE's under-specified rephrasings (3 concepts x 5) with seeds 0-79, ten batches of N = 8 (App. H.1); "
         "diversity runs on these prompts only, never on the fully specified CUBE-1K prompts"),
    Part("iconic-references", DatasetPin(*names.ICONIC_REFERENCES, prompts=767), tuple(range(10)), ("iconicity",),
         "the CRT references (arXiv:2511.11435, Sec. 3: 374 still, 393 moving), 10 images per title (Sec. 4); "
         "prompts pinned by the records file's Wikidata revisions, digest pinned at the first publication"),
    Part("culturalframes", DatasetPin(*names.CULTURALFRAMES, prompts=983), (0,), ("expectations",),
         "the CulturalFrames prompts (arXiv:2506.08835: 983 prompts, 10 countries, 5 domains), one image each as "
         "the paper's four models; digest pinned at the first publication"),
))
"""``culturelens/suite`` v1. A change to a part (prompts, seeds, tracks) is a new version, never an edit of this."""

SCORING_ASSETS = {"diversity": "artifact-index", "relevance": "relevance-kb", "variability": "w1kp-calibration"}
"""The scoring asset each track needs beside its part's dataset (``culturelens suite build`` makes them)."""


@dataclass(frozen=True)
class Source:
    """Where ``culturelens suite build`` takes an asset from: ``default`` (a public URL, a Hub repo, or the public
    services named), pinned by ``pin`` ("sha256:<hex>" or "git-blob:<sha1>" of the bytes read, or
    "prompt-rows:<digest>" of the dataset built from this package's code), or, where what is read changes with
    the day (Wikidata, Wikipedia, Commons, a Hub branch), by what ``recorded`` says the build records (the
    revisions, commits and sha256s in ``suite.json``: a later build at those pins reads the same). ``how`` says
    what to give instead, as a file; the licence is the source's. ``backbones``: the backbones whose weights the
    build embeds it with (downloaded on first use where the Hub answers; offline, a backbones file names local
    copies)."""

    asset: str
    what: str
    default: str
    pin: str | None
    licence: str
    how: str = ""
    recorded: str = ""
    backbones: tuple[str, ...] = ()

    @property
    def pinned_by(self) -> str:
        """What pins the asset, as ``suite build --help`` and the card say it."""
        return self.pin or (f"recorded at build: {self.recorded}" if self.recorded else "none")

    @property
    def address(self) -> str:
        """``default`` as this process reaches it: a GitHub file from ``CULTURELENS_GITHUB_RAW`` (a mirror's, or a
        test's stand-in, when set)."""
        from benchmark.settings import GITHUB_RAW

        if self.default.startswith(GITHUB_RAW.default + "/"):
            return GITHUB_RAW.resolve().rstrip("/") + self.default[len(GITHUB_RAW.default):]
        return self.default


CUBE_COMMIT = names.CUBE_COMMIT
W1KP_COMMIT = "0a33166633c6f9342ae41ae6d77626041a9bc995"  # github.com/castorini/w1kp, 14 Nov 2024

SOURCES = (
    Source("cube-1k", "the CUBE authors' cube_1k.json", names.CUBE_1K_SOURCE,
           "sha256:bdb5b477bb75f54112d44a540b064ae6cbb5600e3b719c47a645b459b140db76", "CC BY-NC-SA 4.0",
           how="--cube-source PATH_OR_URL"),
    Source("cube-diversity", "CUBE's diversity prompts, written in this package (benchmark/datasets/cube_diversity.py)",
           "this package", f"prompt-rows:{SUITE_V1.part('cube-diversity').dataset.digest}", "CC BY 4.0",
           how="nothing to give: built from the package"),
    Source("iconic-references", "the CRT references: Wikidata items of six modalities with more than 20 sitelinks "
           "(sparql/iconic_references.rq) and their Wikimedia Commons images",
           "Wikidata's SPARQL service and Wikimedia Commons", None, "per image (its row's image_licenses)",
           how="--iconic-records FILE --iconic-images DIR (a records file, JSON Lines, and its images)",
           recorded="each item's Wikidata revision, each image's Commons version and sha256",
           backbones=("clip-vit-b-32",)),
    Source("culturalframes", "the CulturalFrames authors' Hub dataset (prompts, rated images, ratings)",
           "mair-lab/CulturalFrames", None, "none declared by the authors (ask them before redistributing)",
           how="--culturalframes-source DIR (a local copy; --culturalframes-revision picks a Hub commit)",
           recorded="the Hub commit read (main's on the day, the release was read at 7a44117) and each file's "
                    "sha256"),
    Source("artifact-index", "the CUBE authors' CSpace file (cube_CSpace.json.tar.gz), embedded for the diversity "
           "tagger", f"https://raw.githubusercontent.com/google-deepmind/cube/{CUBE_COMMIT}/dataset/"
           "cube_CSpace.json.tar.gz", "git-blob:50fd09d50ebabf314480c1f8852e1bcd68a35f78", "CC BY-NC-SA 4.0",
           how="--cspace-source PATH_OR_URL", backbones=("clip-vit-b-32",)),
    Source("relevance-kb", "knowledge-base entities for the relevance prompts (every entity they name, and "
           "same-category entities of other cultures) from Wikidata (name, description), their English Wikipedia "
           "text and Wikimedia Commons images, embedded as `culturelens kb-index` does",
           "Wikidata, English Wikipedia and Wikimedia Commons", None,
           "CC BY-SA 4.0 (Wikipedia text), per image (Commons)",
           how="--kb-records FILE --kb-images DIR (the records `culturelens kb-index` reads)",
           recorded="each entity's Wikidata revision, its Wikipedia revision and text sha256, each image's Commons "
                    "version and sha256", backbones=("msiglip-so400m",)),
    Source("w1kp-calibration", "the W1KP authors' calibration of DreamSim-l2 distances, cdf-xy.pt",
           f"https://raw.githubusercontent.com/castorini/w1kp/{W1KP_COMMIT}/cdf-xy.pt",
           "sha256:57c1bf48ac99aa9a4de3f47151ca942bc027bd49fc550cef37048e02fca6608b", "MIT",
           how="--w1kp-source PATH_OR_URL"),
)
"""Every asset of the suite, in build order, with its pinned source."""


def source(asset: str) -> Source:
    for s in SOURCES:
        if s.asset == asset:
            return s
    raise SuiteError(f"no suite asset {asset!r} (the assets: {', '.join(s.asset for s in SOURCES)})")

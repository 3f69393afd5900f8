"""Settings declared once: a name, a default, a type, a help line and, for some, an environment variable.

A track declares the settings its metrics read (``benchmark.tracks.Track.settings``); the harness declares how it
runs (``RUNTIME``); the service declares what an operator sets (``leaderboard.operator_settings``). From these
declarations come the command line's flags (``add_options``), the environment fallbacks and the values run.json
records (``from_args``), so a setting is written in one place only.

The process environment is read (and written, for a child process) here and nowhere else: every variable the code
reads is a ``Setting`` with an ``env``, the library's in ``ENVIRONMENT`` below, the service's in
``leaderboard.operator_settings``, the tracks' in their settings; README.md's "Environment" table lists them all
(``tests/test_settings.py`` checks it against these declarations).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from benchmark.errors import CultureLensError


class SettingError(CultureLensError):
    """A setting that cannot be read; the message names the setting, where it was set and what it accepts."""


def _environment(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


@dataclass(frozen=True)
class Setting:
    """One choice a user makes: ``--name-with-dashes`` on the command line, ``env`` when the flag is not given,
    else ``default``. ``path``: the value may name a local file or folder, recorded as an absolute path so that a
    reproduction from another working directory reads the same one. ``metavar``: the flag's value in ``--help``.
    A setting only the environment gives (``SPACE_ID``, ``WORLD_SIZE``) is declared the same way and never
    added as a flag."""

    name: str
    default: object
    help: str
    type: Callable[[str], object] = str
    choices: tuple = ()
    env: str = ""
    path: bool = False
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def add_to(self, group: argparse._ActionsContainer, help: str | None = None, **options) -> None:
        """This setting as an option of ``group`` (``help``: a verb's own wording; ``options``: more of
        ``add_argument``'s, e.g. ``action="append"``). One with an environment variable defaults to None, so that
        ``resolve`` can tell a flag given from one left out (and then read the environment); its help names the
        variable, and the default unless the help does."""
        text = help or self.help
        if self.env:
            silent = self.default in (None, False, "") or "default" in text  # none to show, or the help says it
            text = f"{text} (env {self.env}{'' if silent else f'; default {_shown(self.default)}'})"
        group.add_argument(self.flag, dest=self.name, type=self.type, choices=self.choices or None,
                           default=None if self.env else self.default, metavar=self.metavar, help=text, **options)

    def given(self, flag: object = None, environ: Mapping[str, str] | None = None) -> tuple[object, str]:
        """(the value set, where: "its flag" or the environment variable) for a flag whose value is ``flag``
        (None: not given); (None, "") when neither sets it. The environment's value is the raw text."""
        environ = _environment(environ)
        if flag is not None:
            return flag, "its flag"
        if self.env and environ.get(self.env):
            return environ[self.env], self.env
        return None, ""

    def resolve(self, given: object = None, environ: Mapping[str, str] | None = None) -> object:
        """The value used: the flag's (``given``), else the environment's (read with ``type``), else the
        default. An environment value ``type`` refuses is a SettingError naming the variable."""
        value, where = self.given(given, environ)
        if value is None:
            return self.default
        if where != self.env:
            return value
        try:
            return self.type(value)
        except (ValueError, argparse.ArgumentTypeError) as error:
            raise SettingError(f"{self.env}: {value!r} cannot be read ({error})") from None

    def put(self, value: str | None, environ: MutableMapping[str, str] | None = None) -> None:
        """Set this setting's variable to ``value`` (None: remove it) in ``environ``, a child's environment
        (``child_environment``), or by default this process's (which its children inherit)."""
        environ = os.environ if environ is None else environ
        if value is None:
            environ.pop(self.env, None)
        else:
            environ[self.env] = value


def _shown(value: object) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def child_environment(changes: Mapping[Setting, str | None] | None = None) -> dict[str, str]:
    """A copy of this process's environment for a child process, each setting of ``changes`` set to its value
    (None: removed)."""
    environ = dict(os.environ)
    for setting, value in (changes or {}).items():
        setting.put(value, environ)
    return environ


class Settings(Mapping):
    """Values for a set of declared settings, read by attribute (``settings.tau_patch``) or as a mapping; an
    undeclared name is refused, and a value left out takes its declared default."""

    def __init__(self, declared: Iterable[Setting], values: Mapping[str, object] | None = None):
        self._declared = {s.name: s for s in declared}
        values = dict(values or {})
        unknown = sorted(set(values) - set(self._declared))
        if unknown:
            raise CultureLensError(f"unknown setting(s) {', '.join(unknown)}; the settings are "
                                   f"{', '.join(sorted(self._declared))}")
        self._values = {name: values.get(name, s.default) for name, s in self._declared.items()}

    def __getattr__(self, name: str) -> object:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"

    def record(self) -> dict:
        """The values as run.json records them: paths that exist made absolute (a word such as the diversity
        tagger's "index" stays a word, whatever the working directory holds)."""
        out = dict(self._values)
        for name, setting in self._declared.items():
            value = out[name]
            if setting.path and value != setting.default and isinstance(value, str) and Path(value).exists():
                out[name] = str(Path(value).resolve())
        return out


def add_options(parser: argparse.ArgumentParser, title: str, declared: Iterable[Setting]) -> None:
    """Every declared setting as an option, in one help group."""
    group = parser.add_argument_group(title)
    for setting in declared:
        setting.add_to(group)


def add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """The harness's options (``RUNTIME``), for every verb that loads backbones."""
    add_options(parser, "backbones", RUNTIME)


def from_args(declared: Iterable[Setting], args: argparse.Namespace,
              environ: Mapping[str, str] | None = None) -> Settings:
    """The settings a command line chose, with the environment's fallbacks resolved."""
    return from_values(declared, vars(args), environ)


def from_values(declared: Iterable[Setting], given: Mapping[str, object],
                environ: Mapping[str, str] | None = None) -> Settings:
    """The settings ``given`` by name (a command line's options, the Python API's keywords; None or absent: not
    given), each not given read from its environment variable, else its default."""
    declared = list(declared)
    return Settings(declared, {s.name: s.resolve(given.get(s.name), environ) for s in declared})


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


BACKBONES = Setting("backbones", None, "JSON file pointing backbone ids at local weights or adding ids",
                    env="CULTURELENS_BACKBONES", path=True)

# How the harness runs: the same options on every verb that loads backbones.
RUNTIME = (
    BACKBONES,
    Setting("device", None, "torch device (default: cuda if available, else cpu)"),
    Setting("batch_size", 32, "images per forward pass", type=positive_int),
    Setting("num_workers", None, "DataLoader processes decoding images (default: one per core on a GPU, one per 4 "
                                 "cores on a CPU, none on fewer)", type=int),
)

TRUE_VALUES = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true in HF_HUB_OFFLINE

# The variables only the environment gives (no flag), read by the library and the command line.
TRACK_PATH = Setting("track_path", "", "folders of more track modules, separated by " + repr(os.pathsep),
                     env="CULTURELENS_TRACK_PATH")
HUB_OFFLINE = Setting("hub_offline", False, "Hugging Face's offline mode: local files and the Hugging Face cache "
                      "only (set for a verb's process, and serve's worker, when the Hub cannot be reached)",
                      type=lambda text: text.strip().upper() in TRUE_VALUES, env="HF_HUB_OFFLINE")
HUB_ENDPOINT = Setting("hub_endpoint", "https://huggingface.co", "the Hugging Face Hub's address (a mirror's)",
                       env="HF_ENDPOINT")
WORLD_SIZE = Setting("world_size", None, "set by accelerate (torchrun) in each process of a multi-process run",
                     env="WORLD_SIZE")
LAUNCHED = Setting("launched", None, "set by `culturelens score --num-processes N` in the processes it starts",
                   env="CULTURELENS_LAUNCHED")

# The public services `culturelens suite build` reads (``benchmark.downloads``): each the public address by default,
# a mirror's (or a test's stand-in server's) when its variable is set. The package's pins are checked whatever the
# address; only the public address serving other bytes stops a build (a mirror's are recorded as not pinned).
WIKIDATA_API = Setting("wikidata_api", "https://www.wikidata.org/w/api.php",
                       "Wikidata's MediaWiki API (wbgetentities: labels, descriptions, images, revisions)",
                       env="CULTURELENS_WIKIDATA_API")
WIKIDATA_SPARQL = Setting("wikidata_sparql", "https://query.wikidata.org/sparql", "Wikidata's SPARQL query service",
                          env="CULTURELENS_WIKIDATA_SPARQL")
WIKIPEDIA_API = Setting("wikipedia_api", "https://en.wikipedia.org/w/api.php",
                        "English Wikipedia's MediaWiki API (page text at a revision)", env="CULTURELENS_WIKIPEDIA_API")
COMMONS_API = Setting("commons_api", "https://commons.wikimedia.org/w/api.php",
                      "Wikimedia Commons' MediaWiki API (imageinfo: file versions, licences, authors)",
                      env="CULTURELENS_COMMONS_API")
GITHUB_RAW = Setting("github_raw", "https://raw.githubusercontent.com",
                     "where the pinned GitHub files come from (CUBE-1K, the CSpace file, the W1KP calibration)",
                     env="CULTURELENS_GITHUB_RAW")
PUBLIC_SOURCES = (WIKIDATA_API, WIKIDATA_SPARQL, WIKIPEDIA_API, COMMONS_API, GITHUB_RAW, HUB_ENDPOINT)

ENVIRONMENT = (BACKBONES, TRACK_PATH, HUB_OFFLINE, HUB_ENDPOINT, WIKIDATA_API, WIKIDATA_SPARQL, WIKIPEDIA_API,
               COMMONS_API, GITHUB_RAW, WORLD_SIZE, LAUNCHED)
"""Every environment variable the library and the command line read, but the tracks' settings (theirs) and the
service's (``leaderboard.operator_settings``)."""

"""Settings declared once: a name, a default, a type, a help line and, for some, an environment variable.

A track declares the settings its metrics read (``benchmark.tracks.Track.settings``); the harness declares how it
runs (``RUNTIME``). From these declarations come the command line's flags (``add_options``), the environment
fallbacks and the values run.json records (``from_args``), so a setting is written in one place only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmark.encoders.spec import ENV_BACKBONES
from benchmark.errors import CultureLensError


@dataclass(frozen=True)
class Setting:
    """One choice a user makes: ``--name-with-dashes`` on the command line, ``env`` when the flag is not given,
    else ``default``. ``path``: the value may name a local file or folder, recorded as an absolute path so that a
    reproduction from another working directory reads the same one."""

    name: str
    default: object
    help: str
    type: Callable[[str], object] = str
    choices: tuple = ()
    env: str = ""
    path: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def add_to(self, group: argparse._ActionsContainer) -> None:
        """This setting as an option of ``group``. One with an environment variable defaults to None, so that
        ``from_args`` can tell a flag given from one left out (and then read the environment)."""
        group.add_argument(self.flag, dest=self.name, type=self.type, choices=self.choices or None,
                           default=None if self.env else self.default,
                           help=f"{self.help} (env {self.env})" if self.env else self.help)

    def resolve(self, given: object, environ: Mapping[str, str]) -> object:
        """The value used: the flag's, else the environment's, else the default."""
        if given is not None:
            return given
        if self.env and environ.get(self.env):
            return self.type(environ[self.env])
        return self.default


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
              environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings a command line chose, with the environment's fallbacks resolved."""
    declared = list(declared)
    return Settings(declared, {s.name: s.resolve(getattr(args, s.name, None), environ) for s in declared})


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


# How the harness runs: the same options on every verb that loads backbones.
RUNTIME = (
    Setting("backbones", None, "JSON file pointing backbone ids at local weights or adding ids",
            env=ENV_BACKBONES, path=True),
    Setting("device", None, "torch device (default: cuda if available, else cpu)"),
    Setting("batch_size", 32, "images per forward pass", type=positive_int),
    Setting("num_workers", None, "DataLoader processes decoding images (default: one per core on a GPU, one per 4 "
                                 "cores on a CPU, none on fewer)", type=int),
)

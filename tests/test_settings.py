"""Settings in one mechanism: every environment variable is a declared ``Setting`` record, read in the settings
modules only, listed in the manual (docs/operating/settings.md), and `culturelens serve` and app.py resolve the
service's records alike."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from benchmark.settings import Setting, SettingError, child_environment
from culturelens import cli
from leaderboard import operator_settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_MODULES = {"benchmark/settings.py", "leaderboard/operator_settings.py"}


def _readme_environment() -> dict[str, str]:
    """{variable: its flag, or "-"} from the table of the manual's "Environment" (docs/operating/settings.md)."""
    text = (ROOT / "docs" / "operating" / "settings.md").read_text(encoding="utf-8")
    section = text.split("## Environment", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `([A-Z0-9_]+)` \| `?(--[a-z0-9-]+|-)`? \|", section, flags=re.MULTILINE))


def test_every_environment_variable_is_declared_once_and_documented_in_the_readme():
    declared = operator_settings.environment()
    names = [s.env for s in declared]
    assert len(names) == len(set(names)), names  # one record per variable
    documented = _readme_environment()
    assert sorted(documented) == sorted(names)
    # A flag the table names is the record's own (the others are read from the environment only).
    assert all(documented[s.env] in ("-", s.flag) for s in declared), documented


def test_the_environment_is_read_in_the_settings_modules_only():
    """``os.environ``, ``os.getenv`` and ``from os import environ`` appear nowhere else in the three packages:
    everything else asks a ``Setting`` record."""
    readers = set()
    for path in sorted(p for package in ("benchmark", "leaderboard", "culturelens")
                       for p in (ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                    and node.attr in ("environ", "getenv", "putenv", "unsetenv")) or \
                    (isinstance(node, ast.ImportFrom) and node.module == "os"
                     and {a.name for a in node.names} & {"environ", "getenv"}):
                readers.add(path.relative_to(ROOT).as_posix())
    assert readers <= SETTINGS_MODULES, readers - SETTINGS_MODULES
    assert "os.environ" not in (ROOT / "app.py").read_text(encoding="utf-8")


def _serve(*flags: str):
    """``culturelens serve``'s parsed command line, as the verb receives it."""
    return cli.parser().parse_args(["serve", *flags])


SPACE = {"CULTURELENS_STORE": "/srv/store", "CULTURELENS_USER": "ada", "CULTURELENS_CUBE_SOURCE": "/srv/cube_1k.json",
         "CULTURELENS_HUB_REQUESTS": "org/requests", "CULTURELENS_HUB_RESULTS": "org/results",
         "CULTURELENS_QUEUE": "postgresql://ada@db.example/q", "CULTURELENS_QUOTA": "7",
         "CULTURELENS_LIMITS": "max_files=10"}


def test_serve_and_app_py_read_the_same_variables():
    """app.py has no command line: it resolves the records from the environment; `serve` without flags reads the
    very same values, the five variables only app.py used to read included."""
    from_app = operator_settings.service(public=True, environ=SPACE)
    assert operator_settings.service(_serve(), public=True, environ=SPACE) == from_app
    assert (from_app.store, from_app.user, from_app.cube_source) == (Path("/srv/store"), "ada", "/srv/cube_1k.json")
    assert from_app.hub_repos == {"requests": "org/requests", "results": "org/results"}
    assert from_app.queue == "postgresql://ada@db.example/q"
    assert from_app.quota["quota"] == 7 and from_app.limits.max_files == 10


def test_a_flag_of_serve_wins_over_its_variable_and_the_defaults_hold_without_either():
    chosen = operator_settings.service(_serve("--hub-requests", "org/flag", "--store", "here", "--user", "bo",
                                              "--quota", "2", "--limit", "min_side=32"), public=True, environ=SPACE)
    assert chosen.hub_repos["requests"] == "org/flag" and chosen.store == Path("here") and chosen.user == "bo"
    assert chosen.quota["quota"] == 2 and (chosen.limits.max_files, chosen.limits.min_side) == (10, 32)
    bare = operator_settings.service(_serve(), public=False, environ={"USER": "carol"})
    assert (bare.store, bare.user, bare.cube_source, bare.queue) == (Path(".culturelens"), "carol", None, None)
    assert bare.hub_repos == {"requests": None, "results": None} and bare.quota["quota"] is None
    assert operator_settings.service(public=False, environ={}).user == "local"


def test_a_variable_its_type_refuses_is_an_error_naming_it():
    hours = Setting("hours", 1.0, "hours", type=float, env="TOY_HOURS")
    assert hours.resolve(None, {"TOY_HOURS": "2.5"}) == 2.5 and hours.resolve("4", {"TOY_HOURS": "2.5"}) == "4"
    with pytest.raises(SettingError, match=r"^TOY_HOURS: 'soon' cannot be read \(could not convert"):
        hours.resolve(None, {"TOY_HOURS": "soon"})


def test_a_child_gets_a_copy_of_the_environment_with_the_changes_asked(monkeypatch):
    monkeypatch.setenv("CULTURELENS_QUEUE", "postgresql://stale@old/q")
    monkeypatch.setenv("CULTURELENS_STORE", "/srv/store")
    env = child_environment({operator_settings.QUEUE: None, operator_settings.USER: "ada"})
    assert "CULTURELENS_QUEUE" not in env and env["CULTURELENS_USER"] == "ada"
    assert env["CULTURELENS_STORE"] == "/srv/store"
    assert operator_settings.QUEUE.resolve() == "postgresql://stale@old/q"  # this process's own is untouched


def test_the_command_lines_help_lists_every_variable(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = " ".join(capsys.readouterr().out.split("environment (", 1)[1].split())
    assert all(s.env in listed for s in operator_settings.environment())



def test_serve_reads_the_hub_repos_from_their_variables(tmp_path):
    """`culturelens serve` itself, given no flag: CULTURELENS_HUB_REQUESTS (read by app.py only, before) names the
    repo it mirrors to, here one it refuses at start, naming it."""
    from tests.helpers import culturelens

    refused = culturelens("serve", "--store", str(tmp_path / "store"), "--no-worker",
                          env={"CULTURELENS_HUB_REQUESTS": "not a repo id", "HF_HUB_OFFLINE": "1"})
    assert refused.returncode == 2 and "not a repo id" in refused.stderr.splitlines()[-1], refused.stderr

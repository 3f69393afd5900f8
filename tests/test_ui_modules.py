"""The app's structure: one module per tab in ``leaderboard/ui/``, each reading through the store and the catalog (no
SQL, no path built inside the store), and ``leaderboard/app.py`` only putting the tabs together."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from leaderboard.ui import address

UI = Path(__file__).resolve().parents[1] / "leaderboard" / "ui"
APP = UI.parent / "app.py"
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE)\b[\s\S]*\b(FROM|INTO|SET|WHERE|TABLE)\b")
DATABASES = {"duckdb", "sqlite3", "psycopg"}
QUERY_CALLS = {"query", "execute", "sql", "read_parquet"}


def reads_past_the_store(source: str) -> list[str]:
    """What in ``source`` reads past the store and the catalog: SQL text, a database library, a query call, or a
    path joined onto a store folder (``store.results / id``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            found.append(f"SQL: {node.value[:60]!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            found += [f"imports {n}" for n in names if n and n.split(".")[0] in DATABASES]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in QUERY_CALLS:
            found.append(f"calls .{node.func.attr}()")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and "store" in ast.unparse(node.left):
            found.append(f"builds a store path: {ast.unparse(node)}")
    return found


def test_the_check_finds_each_way_of_reading_past_the_store():
    planted = '''
import duckdb
rows = catalog.query("SELECT model FROM aggregates WHERE track = ?", ["awareness"])
run = (self.store.results / job.id / "run.json").read_text()
'''
    assert reads_past_the_store(planted) == [
        "imports duckdb", "calls .query()", "SQL: 'SELECT model FROM aggregates WHERE track = ?'",
        "builds a store path: self.store.results / job.id / 'run.json'",
        "builds a store path: self.store.results / job.id"]
    assert reads_past_the_store("shown = tables.ranked(self.catalog, track, metric)\nnote = 'select a model'") == []


@pytest.mark.parametrize("module", sorted(p.name for p in UI.glob("*.py")))
def test_no_ui_module_holds_sql_or_builds_a_path_in_the_store(module):
    assert reads_past_the_store((UI / module).read_text(encoding="utf-8")) == []


def test_each_tab_is_a_module_of_its_own_that_builds_its_components():
    assert sorted(p.stem for p in UI.glob("*.py") if p.stem in address.TABS) == sorted(address.TABS)
    for tab in address.TABS:
        module = importlib.import_module(f"leaderboard.ui.{tab}")
        builders = [getattr(module, name) for name in dir(module)
                    if name.endswith("Tab") or name in ("DatasetBrowser", "build")]
        assert any(callable(getattr(b, "build", None)) or b.__name__ == "build" for b in builders), tab


def test_the_app_only_puts_the_tabs_together():
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert defined == {"launch_options", "build_app", "_filled_once"}  # the last: a tab's select event
    assert reads_past_the_store(APP.read_text(encoding="utf-8")) == []

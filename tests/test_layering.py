"""The packages import in one direction: `culturelens` (the command line) on top of `leaderboard` (the service),
on top of `benchmark` (the library); no two modules import each other, directly or round a cycle, and no two
subpackages do (inside `benchmark`: the datasets below the submission format, below the encoders, metrics and
harness, below the tracks; README.md, "Architecture"). Every import counts: at load time, inside a function, or
only for type checking (``if TYPE_CHECKING``), since each says which module needs which. Read from the source, so
a new module is checked too."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("benchmark", "leaderboard", "culturelens")


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str, packages: tuple[str, ...]) -> set[str]:
    """The modules of ``packages`` that ``module`` (the file ``path``) imports anywhere in it: at load time, in a
    function, or under ``if TYPE_CHECKING``; relative imports made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*above, *([base] if base else [])])
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in packages}


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, depth: int | None = None) -> dict:
    """{module: the modules it imports}, or with ``depth`` {unit: the units it imports}, a unit being a module
    name cut to ``depth`` parts (2: each subpackage taken whole, e.g. ``benchmark.datasets``)."""
    sources = {_module(p, root): p for package in packages for p in (root / package).rglob("*.py")}

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:depth]) if depth else name

    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        imported = {name if name in sources else name.rsplit(".", 1)[0] for name in _imports(path, module, packages)}
        graph.setdefault(unit(module), set()).update(unit(name) for name in imported & sources.keys())
    return {node: edges - {node} for node, edges in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of ``graph`` closes, as "a -> b -> a"."""
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for name in sorted(graph[node]):
            if state.get(name) == "open":
                found.append(" -> ".join([*trail[trail.index(name):], name]))
            elif name not in state:
                visit(name, [*trail, name])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_library_imports_neither_the_service_nor_the_command_line_and_the_service_not_the_command_line():
    below = {"benchmark": ("leaderboard", "culturelens"), "leaderboard": ("culturelens",), "culturelens": ()}
    wrong = sorted(f"{module} imports {name}" for module, names in import_graph().items() for name in names
                   if name.split(".")[0] in below[module.split(".")[0]])
    assert wrong == []



def test_tests_and_benchmarks_share_support_only_through_culturelens_testing():
    """`tests/` never imports `benchmarks/` and `benchmarks/` never imports `tests/`: what both need (tiny models,
    stand-in submissions, a PostgreSQL server, the crash soak) is in `culturelens.testing`, which no module of the
    product imports."""
    def importers(folder: str, packages: tuple[str, ...]) -> list[str]:
        return sorted(f"{path.relative_to(ROOT)} imports {name}" for path in (ROOT / folder).rglob("*.py")
                      for name in _imports(path, _module(path, ROOT), packages))

    assert importers("tests", ("benchmarks",)) == []
    assert importers("benchmarks", ("tests",)) == []
    support = "culturelens.testing"
    assert sorted(f"{module} imports {name}" for module, names in import_graph().items() for name in names
                  if name.startswith(support) and not module.startswith(support)) == []


def test_no_module_is_part_of_an_import_cycle():
    assert cycles(import_graph()) == []


def test_no_subpackage_imports_one_that_imports_it():
    """Subpackages are layers: `benchmark.submission` validates against a prompt set of `benchmark.datasets`, so no
    dataset module may build a submission (`benchmark.expectations.rated_images` does, above both)."""
    assert cycles(import_graph(depth=2)) == []


def test_the_checks_find_a_type_only_cycle_a_lazy_one_a_relative_one_and_one_between_subpackages(tmp_path):
    """Planted in a package of its own: each kind of cycle the repository must not have is found."""
    files = {
        "toy/__init__.py": "",
        # a needs b only for type checking; b imports a inside a function
        "toy/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.b import B\nclass A: ...\n",
        "toy/b.py": "class B:\n    def make(self):\n        from toy.a import A\n        return A()\n",
        # c imports d at load time, d imports c back relatively inside a function
        "toy/c.py": "import toy.d\n",
        "toy/d.py": "def f():\n    from . import c\n    return c\n",
        # no module cycle, but the two subpackages import each other
        "toy/low/__init__.py": "", "toy/low/x.py": "from toy.high import y\n", "toy/low/w.py": "",
        "toy/high/__init__.py": "", "toy/high/y.py": "", "toy/high/z.py": "def f():\n    import toy.low.w\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    assert cycles(import_graph(tmp_path, ("toy",))) == ["toy.a -> toy.b -> toy.a", "toy.c -> toy.d -> toy.c"]
    assert cycles(import_graph(tmp_path, ("toy",), depth=2)) == ["toy.a -> toy.b -> toy.a", "toy.c -> toy.d -> toy.c",
                                                                 "toy.high -> toy.low -> toy.high"]


def test_metric_modules_import_no_results_table_and_no_encoder():
    """A metric is a pure function behind a thin adapter (``benchmark.metrics.base``): no module of
    ``benchmark.metrics`` imports the results tables (``benchmark.results``) or an encoder (``benchmark.encoders``);
    the names both sides spell alike (a row's error mark, the on-device preparation's tag) live below them, in
    ``benchmark.metric_marks``."""
    graph = import_graph()
    metrics = sorted(module for module in graph if module.split(".")[:2] == ["benchmark", "metrics"])
    assert "benchmark.metrics.base" in metrics and "benchmark.metrics.iconicity" in metrics
    wrong = sorted(f"{module} imports {name}" for module in metrics for name in graph[module]
                   if name == "benchmark.results" or name.split(".")[:2] == ["benchmark", "encoders"])
    assert wrong == []


def test_the_ranking_rules_are_one_pure_module_that_reads_no_catalog_and_draws_no_page():
    """`benchmark.ranking` takes per-prompt values and returns ranked rows: it imports no module of the service
    (catalog, tables, UI) nor any that reads a store or draws a page (duckdb, gradio, pyarrow), and of this project
    only the statistics; every view ranks through it (``leaderboard.rankings`` is the one caller that reads the
    catalog for it)."""
    path = ROOT / "benchmark" / "ranking.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    assert found - {"__future__"} == {"collections.abc", "dataclasses", "numpy", "pandas", "scipy", "benchmark.stats"}
    callers = sorted(module for module, names in import_graph().items() if "benchmark.ranking" in names)
    # Only ``leaderboard.rankings`` ranks tables, and ``benchmark.arena.rating`` ranks the arena's ratings by the same
    # rule (its closure and rank range); the others read the rule's constants (its version, thresholds) to say them
    # (``leaderboard.stored_rankings``: to compute again what older rules stored).
    assert callers == ["benchmark.arena.rating", "leaderboard.display", "leaderboard.exports", "leaderboard.rankings",
                       "leaderboard.stored_rankings", "leaderboard.ui.about", "leaderboard.ui.notes",
                       "leaderboard.ui.widgets"]

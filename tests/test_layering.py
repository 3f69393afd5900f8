"""The packages import in one direction: `culturelens` (the command line) on top of `leaderboard` (the service),
on top of `benchmark` (the library); and no two modules import each other at load time, directly or round a
cycle. Read from the source, so a new module is checked too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("benchmark", "leaderboard", "culturelens")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, *, load_time_only: bool) -> set[str]:
    """Project modules ``path`` imports: all of them, or only those imported when it loads (not inside a
    function, nor under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if not load_time_only else _load_time(tree.body)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _load_time(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _load_time([child])


def _sources() -> dict[str, Path]:
    return {_module(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def test_the_library_imports_neither_the_service_nor_the_command_line_and_the_service_not_the_command_line():
    below = {"benchmark": ("leaderboard", "culturelens"), "leaderboard": ("culturelens",), "culturelens": ()}
    wrong = sorted(f"{module} imports {name}" for module, path in _sources().items()
                   for name in _imports(path, load_time_only=False)
                   if name.split(".")[0] in below[module.split(".")[0]])
    assert wrong == []


def test_no_module_is_part_of_an_import_cycle_at_load_time():
    sources = _sources()
    graph = {module: {name if name in sources else name.rsplit(".", 1)[0] for name in
                      _imports(path, load_time_only=True)} & sources.keys() - {module}
             for module, path in sources.items()}
    cycles, state = [], {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for name in sorted(graph[module]):
            if state.get(name) == "open":
                cycles.append(" -> ".join([*trail[trail.index(name):], name]))
            elif name not in state:
                visit(name, [*trail, name])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []

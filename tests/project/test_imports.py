"""The package's modules import each other without a loop, and the runtimes import nothing above
them: read from the source (every relative import, deferred and type-only ones included)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from ..conftest import REPO

PACKAGE = REPO / "jupyter_tool_terminal"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_within_the_package() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
            # "from . import metrics" imports the module metrics (its package is loaded already)
            named = [f"{target}.{alias.name}" for alias in node.names]
            graph[name] |= {module for module in named if module in paths} or (
                {target} if target in paths and target != name else set()
            )
    return graph


def test_no_module_imports_itself_back() -> None:
    graph = imports_within_the_package()
    assert len(graph) > 40  # (the whole package was read)
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the loop


def test_the_runtimes_import_nothing_above_them() -> None:
    # (errors.py and settings.py import nothing of the package: a file transfer's refusal
    # carries its status; a runtime's moved setting warns as every moved setting does)
    allowed = {
        "jupyter_tool_terminal.metrics",
        "jupyter_tool_terminal.tooltypes",
        "jupyter_tool_terminal.errors",
        "jupyter_tool_terminal.settings",
    }
    for name, imported in imports_within_the_package().items():
        if name.startswith("jupyter_tool_terminal.runtime"):
            above = {m for m in imported if not m.startswith("jupyter_tool_terminal.runtime")}
            assert above <= allowed, (name, above - allowed)

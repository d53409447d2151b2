"""The modules of ``compaction`` import each other one way: no circle, and nothing inside the
package goes through the ``compaction.summary`` re-export module."""

from __future__ import annotations

import ast
from pathlib import Path

import compaction

PACKAGE = Path(compaction.__file__).parent


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        name = "compaction" if path.stem == "__init__" else f"compaction.{path.stem}"
        found = set()
        # Every import counts, lazy ones and TYPE_CHECKING ones included.
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("compaction."):
                found.add(str(node.module))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("compaction."))
        graph[name] = found
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        for dep in sorted(graph.get(node, ())):
            if dep in path:
                return [*path[path.index(dep) :], dep]
            if dep not in done:
                found = visit(dep, [*path, dep])
                if found:
                    return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [start])
        if found:
            return found
    return None


def test_no_import_circle_in_compaction() -> None:
    assert _cycle(_imports()) is None


def test_the_cycle_finder_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]


def test_no_module_of_the_package_imports_the_reexport_module() -> None:
    users = [name for name, deps in _imports().items() if "compaction.summary" in deps]
    assert users == []

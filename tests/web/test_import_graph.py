"""No import cycles in hermes_web, counting imports inside functions too.

A function-level import hides a cycle from Python (the module is complete by the time the
function runs) but not from a reader: the layers still call back up. So the graph below is
built from every ``import`` statement in the package's source, read with ``ast``.
Also: every module imports on its own in a fresh interpreter (no order it silently relies on).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "hermes_web"


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest known module ``name`` is or lies in (``a.b.c`` names ``a.b`` when c is a name)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the hermes_web modules it imports (anywhere in its source)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module.
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                if target.split(".")[0] != PACKAGE:
                    continue
                found = _resolve(target, modules)
                # A package's own __init__ is not an edge from its submodules (Python runs it
                # first anyway), nor an edge to itself.
                if found and found != name and not name.startswith(found + "."):
                    edges.add(found)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_finds_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    # The checker must be able to fail: a lazy import back up the layers is a cycle.
    package = tmp_path / PACKAGE
    (package / "services").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "services" / "__init__.py").write_text("")
    (package / "services" / "work.py").write_text(
        "def queue():\n    from hermes_web.tasks import job\n    job()\n"
    )
    (package / "tasks.py").write_text("from hermes_web.services import work\n\ndef job(): ...\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph = import_graph(module_names())
    assert cycles(graph) == [["hermes_web.services.work", "hermes_web.tasks"]]


def test_hermes_web_has_no_import_cycle():
    graph = import_graph(module_names())
    assert len(graph) > 50  # the walk saw the package
    assert cycles(graph) == []


def test_the_jobs_seam_names_the_registered_tasks():
    from hermes_web import jobs, tasks

    # (the module's names are Celery's lazy proxies of the registered tasks)
    assert jobs.task(jobs.COMPACT_SESSION) is tasks.compact_session._get_current_object()
    assert jobs.task(jobs.RUN_AGENT_TURN) is tasks.run_agent_turn._get_current_object()


def test_every_module_imports_alone_in_a_fresh_interpreter():
    names = [n for n in module_names() if n not in {"hermes_web.wsgi", "hermes_web.asgi"}]
    script = (
        "import importlib, os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'hermes_web.settings')\n"
        "import django\n"
        "django.setup()\n"
        "bad = []\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as error:\n"
        "        bad.append(f'{name}: {error!r}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_chat_service_and_the_turn_loop_point_one_way():
    # Views call services.chat; the worker's task calls agent.loop, which stores through the
    # services. A service reaching down into the turn loop (or up into views and tasks) would
    # put the chat service and the worker back into one module's worth of knots.
    graph = import_graph(module_names())
    assert "hermes_web.agent.runner" not in graph
    services = {name for name in graph if name.startswith("hermes_web.services")}
    upward = {"hermes_web.agent.loop", "hermes_web.agent.overflow", "hermes_web.tasks"}
    for name in services:
        assert not graph[name] & upward, (name, graph[name] & upward)
        assert not {t for t in graph[name] if t.startswith("hermes_web.views")}, name
    assert "hermes_web.services.chat" in graph["hermes_web.views.chat"]
    assert "hermes_web.agent.loop" in graph["hermes_web.tasks"]
    assert "hermes_web.services.chat" not in graph["hermes_web.agent.overflow"]

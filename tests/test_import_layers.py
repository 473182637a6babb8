"""Import layering: no import cycle among lucidyolo modules, and the lower layers never reach up.

Every module is parsed with ``ast`` and *every* import statement counts,
including those inside functions: a function-local import hides a cycle from
the interpreter at import time, not from the design (it is still two modules
that each need the other). Importing ``a.b.c`` also runs the packages ``a.b``
(their ``__init__``), so those count as edges too, except packages that
enclose the importer itself (already being imported when it runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "lucidyolo"

# Layers below the task/engine layer: plain typed arguments in, no CLI, no runner, no Python API.
LOWER_LAYERS = ("models", "assign", "losses", "structures", "data", "metrics", "decode", "export", "predict")
UPPER_LAYERS = ("lucidyolo.cli", "lucidyolo.engine", "lucidyolo.api")


def module_files(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """``{dotted module name: (file, is_package)}`` for every ``.py`` under ``package_dir``."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


def _enclosing(name: str) -> set[str]:
    """Every proper ancestor package of a dotted name (``a.b.c`` -> ``a``, ``a.b``)."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imported_names(tree: ast.Module, package: str) -> set[str]:
    """Dotted names a module may load: every ``import`` / ``from`` target, at any depth."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: level 1 is the importer's own package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            # ``from pkg import sub`` loads the submodule ``pkg.sub`` when there is one
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """``{module: modules whose import it triggers}`` restricted to the package's own modules."""
    modules = module_files(package_dir)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        running = _enclosing(name) | ({name} if is_package else set())  # already importing
        edges: set[str] = set()
        for target in _imported_names(ast.parse(path.read_text(), str(path)), package):
            for loaded in _enclosing(target) | {target}:
                if loaded in modules and loaded not in running and loaded != name:
                    edges.add(loaded)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        state[root] = 1
        stack = [iter(sorted(graph[root]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module whose import ``start`` triggers, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE_DIR)


def test_no_import_cycle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("layer", LOWER_LAYERS)
def test_lower_layers_never_reach_the_cli_or_the_engine(graph, layer):
    prefix = f"lucidyolo.{layer}"
    mods = [m for m in graph if m == prefix or m.startswith(prefix + ".")]
    assert mods, f"no modules under {prefix}: the layer list is stale"
    # transitively: reaching the CLI through, say, the task layer is the same mistake
    bad = {
        m: sorted(t for t in reachable(graph, m) if any(t == u or t.startswith(u + ".") for u in UPPER_LAYERS))
        for m in mods
    }
    assert not {m: ts for m, ts in bad.items() if ts}


@pytest.mark.parametrize("layer", LOWER_LAYERS)
def test_lower_layers_never_reach_the_task_layer(graph, layer):
    """A module a built-in task's package (``tasks/<task>/``) imports is that task's; the shared rooms
    hold what several tasks use and never import a task, directly or through another module."""
    prefix = f"lucidyolo.{layer}"
    mods = [m for m in graph if m == prefix or m.startswith(prefix + ".")]
    bad = {m: sorted(t for t in reachable(graph, m) if t == "lucidyolo.tasks" or t.startswith("lucidyolo.tasks.")) for m in mods}
    assert mods and not {m: ts for m, ts in bad.items() if ts}


def test_graph_sees_function_local_relative_and_package_imports(tmp_path):
    """The checker itself: each way of hiding a cycle is found, and an acyclic package passes."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")  # package init loads c
    (pkg / "sub" / "b.py").write_text("X = 1\n")
    (pkg / "sub" / "c.py").write_text("def f():\n    from ..a import Y  # local and relative\n")
    g = import_graph(pkg)
    assert g["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert g["pkg.sub"] == {"pkg.sub.c"}
    assert g["pkg.sub.c"] == {"pkg.a"}
    cycle = find_cycle(g)
    assert cycle is not None and set(cycle) == {"pkg.a", "pkg.sub", "pkg.sub.c"}
    (pkg / "sub" / "c.py").write_text("def f():\n    from . import b\n")
    assert find_cycle(import_graph(pkg)) is None


def test_the_engine_never_imports_the_cli():
    """The engine returns results and only the CLI prints: no module under engine/ reaches lucidyolo.cli."""
    offenders = []
    for path in sorted((PACKAGE_DIR / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("lucidyolo.cli")]
    assert not offenders, offenders


@pytest.mark.parametrize("layer", LOWER_LAYERS)
def test_lower_layers_never_read_the_config(graph, layer):
    """Models, data, losses, ... take plain typed arguments: only config/, tasks/ and engine/ know the schema."""
    prefix = f"lucidyolo.{layer}"
    readers = {
        m: sorted(t for t in graph[m] if t == "lucidyolo.config" or t.startswith("lucidyolo.config."))
        for m in graph if m == prefix or m.startswith(prefix + ".")
    }
    assert not {m: ts for m, ts in readers.items() if ts}


def test_config_never_imports_the_task_layer_or_above(graph):
    """Tasks build on the schema (``TaskSpec.run_config``); resolution takes the spec as an argument; the
    engine, the CLI and the Python API read the config, never the other way round."""
    mods = [m for m in graph if m == "lucidyolo.config" or m.startswith("lucidyolo.config.")]
    above = ("lucidyolo.tasks", *UPPER_LAYERS)
    bad = {m: sorted(t for t in reachable(graph, m) if t.startswith(above)) for m in mods}
    assert mods and not {m: ts for m, ts in bad.items() if ts}

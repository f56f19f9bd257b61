"""aorta's import graph: no circles, and no import running up a layer.

Read from the source with `ast` (nothing is imported): every `import` counts, at module level,
inside functions (lazy imports) and under `TYPE_CHECKING`, since each is a dependency of the
design. The layers are documented in docs/architecture.md ("aorta: layers").
"""

from __future__ import annotations

import ast
from pathlib import Path

import aorta
import toolkit_core

SRC = Path(aorta.__file__).parent
# The shared foundations of the three tools (packages/toolkit-core): the lowest layer, outside
# aorta; its modules are in the graph so that an import of aorta from there is caught.
CORE_SRC = Path(toolkit_core.__file__).parent

# Lowest first; a module may import its own layer or any layer below, never one above.
# The first prefix that matches a module decides its layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("toolkit_core",),
    ("aorta.errors", "aorta.atomic", "aorta.strict_modes", "aorta.text_safety"),
    ("aorta.workloads.contract",),
    ("aorta.registry", "aorta.instrumentation"),
    ("aorta.workloads",),
    ("aorta.runner",),
    ("aorta.triage.errors", "aorta.triage.names", "aorta.triage.layout"),
    ("aorta.triage.analysis",),
    ("aorta.triage.recipe",),
    ("aorta.triage.report",),
    ("aorta.triage.run",),
    ("aorta.triage.slurm",),
    ("aorta.triage.lifecycle",),
    ("aorta.cli",),
)
# Package __init__ files that only describe their package.
_UNLAYERED = ("aorta", "aorta.triage")


def _modules() -> dict[str, Path]:
    found = {}
    for package, src in (("aorta", SRC), ("toolkit_core", CORE_SRC)):
        for path in sorted(src.rglob("*.py")):
            parts = (package, *path.relative_to(src).with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The aorta modules `path` imports (`from pkg import mod` counts as `pkg.mod`)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for imported in names:
            owner = imported
            while owner and owner not in modules:
                owner = owner.rpartition(".")[0]
            if owner:
                out.add(owner)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        # A module importing its own package's __init__ is not a dependency on a sibling.
        graph[name] = {
            dep for dep in _imports(path, modules) if dep != name and not name.startswith(dep + ".")
        }
    return graph


def _layer(module: str) -> int | None:
    if module in _UNLAYERED:
        return None
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module}: in no layer of LAYERS (add it, and to architecture.md)")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, root_deps in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(root_deps)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, deps = work[-1]
            step = next(deps, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles_in_aorta() -> None:
    assert _cycles(_graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    upward = []
    for module, deps in _graph().items():
        here = _layer(module)
        for dep in deps:
            there = _layer(dep)
            if here is not None and there is not None and there > here:
                upward.append(f"{module} -> {dep}")
    assert sorted(upward) == []


def test_the_checks_see_a_circle_and_an_upward_import() -> None:
    # The checkers themselves, on a made-up graph: they must be able to fail.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    layers = [_layer(m) for m in ("aorta.runner.trials", "aorta.triage.report.output")]
    assert layers[0] is not None and layers[1] is not None and layers[0] < layers[1]
    assert _layer("aorta.triage") is None
    assert _layer("toolkit_core.atomic") == 0 < (_layer("aorta.atomic") or 0)

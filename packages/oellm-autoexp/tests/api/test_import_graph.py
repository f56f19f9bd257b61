"""The import graph (issue 25 §1): no circles, no import running up a layer, small modules.

Every import counts, wherever it is written (module level, inside a function, under
``TYPE_CHECKING``): a lazy import is still a dependency. The layers, top to bottom, are the ones
docs/architecture.md draws; a module may import its own layer and the layers below it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import toolkit_core

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "oellm_autoexp"
# The shared foundations of the three tools: below every layer here, importing none of them.
CORE = "toolkit_core"
CORE_SRC = Path(toolkit_core.__file__).resolve().parents[1]
MAX_LINES = 600

# Top to bottom. The first part of a module's name after `oellm_autoexp.` picks its layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "testing"),  # entry points: argument parsing and printing; the pytest plugin
    (
        "api",
        "api_plan",
        "container",
    ),  # the library's facade (plan / submit / monitor / status / cancel)
    ("planning", "submit_options", "plan_cost", "provenance", "migrate"),  # one use case each
    ("monitor",),  # the monitor loop and its pure decisions
    ("persistence",),  # session files and their records
    ("config", "backends", "sweep", "slurm", "plan"),  # the domain: configs, jobs, scripts
    (
        "errors",
        "limits",
        "atomic",
        "safe_paths",
        "reporting",
        "json_encode",
    ),  # foundations (no upward arrow)
)


def _modules() -> dict[str, Path]:
    found = {}
    for src, package in ((SRC, PACKAGE), (CORE_SRC, CORE)):
        for path in (src / package).rglob("*.py"):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The package module `name` lives in (a name imported from a module is that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            # `from pkg import sub` depends on pkg.sub where that is a module, else on pkg.
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                yield target


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    if parts[0] == CORE:
        return len(LAYERS)  # toolkit_core: the lowest layer, outside the package
    if len(parts) == 1:
        return 0  # the package's own __init__ (lazy re-exports) sits on top
    for index, names in enumerate(LAYERS):
        if parts[1] in names:
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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


def test_no_import_circles() -> None:
    assert _circles(_graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) < _layer(module)
    ]
    assert upward == []


def test_no_module_over_600_lines() -> None:
    long = {
        name: count
        for name, path in _modules().items()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_checks_see_a_planted_circle_and_an_upward_import() -> None:
    """The graph checks themselves can fail: a two-module circle and a foundation importing up."""
    graph = {"a.x.m": {"a.y.n"}, "a.y.n": {"a.x.m"}, "a.z": set()}
    assert _circles(graph) == [["a.x.m", "a.y.n"]]
    assert _layer("oellm_autoexp.errors") > _layer("oellm_autoexp.monitor.controller")
    assert _layer("toolkit_core.atomic") > _layer("oellm_autoexp.atomic")

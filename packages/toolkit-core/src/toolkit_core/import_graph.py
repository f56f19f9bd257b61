"""The import graph of a package, read from its source with `ast`: for the layer tests.

Each of the three tools has a test that its modules form no import circle, import no layer
above their own and stay under a size limit (issue 25). The layers are each package's own;
reading the graph, finding circles, listing upward imports and long modules is this module's,
once, as pytest ships `pytester` for its plugins' tests. Nothing is imported: every `import`
counts, at module level, inside a function (a lazy import) or under ``TYPE_CHECKING``, since
each is a dependency of the design.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

__all__ = ["circles", "import_graph", "long_modules", "package_modules", "upward_imports"]


def package_modules(*packages: str) -> dict[str, Path]:
    """`{dotted module name: source file}` of every module of the (importable) `packages`."""
    found: dict[str, Path] = {}
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(package)
        src = Path(spec.origin).parent
        for path in sorted(src.rglob("*.py")):
            parts = (package, *path.relative_to(src).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _owner(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module `name` lives in (a name imported from a module is that module), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
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
            owner = _owner(name, modules)
            if owner is not None:
                yield owner


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """`{module: the modules of `modules` it imports}`.

    A module importing its own package (`pkg.sub` from `pkg`) adds nothing: Python runs a
    package's `__init__` before any of its modules anyway, so that is no dependency between
    siblings.
    """
    return {
        name: {
            dep
            for dep in _imported(name, path, modules)
            if dep != name and not name.startswith(dep + ".")
        }
        for name, path in modules.items()
    }


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module, each sorted
    (Tarjan's algorithm, iterative so a deep package cannot exhaust the recursion limit)."""
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def upward_imports(graph: Mapping[str, set[str]], height: Callable[[str], int | None]) -> list[str]:
    """`module -> target` for every import of a higher layer, sorted.

    `height(module)` is its layer, higher meaning nearer the top (a CLI above its library);
    None for a module that stands in no layer (a package `__init__` that only describes it).
    """
    upward = []
    for module, targets in sorted(graph.items()):
        here = height(module)
        for target in sorted(targets):
            there = height(target)
            if here is not None and there is not None and there > here:
                upward.append(f"{module} -> {target}")
    return upward


def long_modules(modules: Mapping[str, Path], max_lines: int, package: str) -> dict[str, int]:
    """The modules of `package` over `max_lines` lines, with their line counts."""
    return {
        name: count
        for name, path in modules.items()
        if name.split(".")[0] == package
        and (count := len(path.read_text(encoding="utf-8").splitlines())) > max_lines
    }

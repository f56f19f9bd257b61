"""triton_invariance's import graph (issue 25): no circles, no import up a layer, small modules.

Read from the source with `ast` (nothing is imported): every import counts, at module level,
inside a function (a lazy import) or under ``TYPE_CHECKING``, since each is a dependency of the
design. The layers are the ones docs/architecture.md draws for triton-invariance; a module may
import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import toolkit_core
import triton_invariance

PACKAGE = "triton_invariance"
SRC = Path(triton_invariance.__file__).parent
# The shared foundations of the three tools (packages/toolkit-core): the lowest layer, outside
# the package; its modules are in the graph so that an import of triton_invariance from there
# is caught.
CORE = "toolkit_core"
CORE_SRC = Path(toolkit_core.__file__).parent
MAX_LINES = 600

# Lowest first. The module's name after `triton_invariance.` picks its layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: the MLIR tokenizer, dot-layout text, compile options, memory effects by op name,
    # launch scalars (Triton imported only inside `on_launch`)
    ("mlir", "dotdiff", "options", "effects", "scalars"),
    ("opform", "generic", "dataflow"),  # IR forms: op normal forms, generic syntax, the DAG hash
    ("data",),  # InvarianceData: the record every other layer passes around
    ("errors", "cache", "verdict"),  # over records: errors, the in-memory cache, same-code notes
    ("fingerprint",),  # TTGIR -> InvarianceData
    ("storage", "trust"),  # baseline files, and who may have written them
    ("nearest", "compare", "rekey"),  # over baselines: nearest, COMPARE's verdict, re-keying
    ("api",),  # the spec's API
    ("hooks", "record", "compile_only"),  # stock-Triton integration
    ("startup", "pytest_plugin", "cli"),  # entry points
)


def _modules() -> dict[str, Path]:
    found = {}
    for package, src in ((PACKAGE, SRC), (CORE, CORE_SRC)):
        for path in sorted(src.rglob("*.py")):
            parts = [package, *path.relative_to(src).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
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
            target = _resolve(name, modules)
            if target is not None and target != module:
                yield target


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    if parts[0] == CORE:
        return -1  # below every layer of the package
    if len(parts) == 1:
        return len(LAYERS)  # the package's __init__ (the lazy `__version__`) sits on top
    for index, names in enumerate(LAYERS):
        if parts[1] in names:
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def _circle(graph: Mapping[str, set[str]]) -> list[str]:
    """One import circle of `graph` (its modules, the first repeated at the end), or []."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def _upward(graph: Mapping[str, set[str]]) -> list[str]:
    """`module -> target` for every import of a higher layer; every module must have a layer."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]


def _long(modules: Mapping[str, Path]) -> dict[str, int]:
    """The modules of the package over MAX_LINES lines, with their line counts."""
    return {
        name: count
        for name, path in modules.items()
        if name.split(".")[0] == PACKAGE
        and (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }


def test_no_import_circles() -> None:
    assert _circle(_graph()) == []


def test_every_module_has_a_layer_and_none_imports_up() -> None:
    graph = _graph()
    for module in graph:
        _layer(module)  # raises for a module no layer names
    assert _upward(graph) == []


def test_no_module_over_600_lines() -> None:
    assert _long(_modules()) == {}


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    # Both are dependencies: `errors` names InvarianceData only under TYPE_CHECKING, and
    # `storage` no longer reaches `nearest` lazily (that was the circle compare.py broke).
    graph = _graph()
    assert "triton_invariance.data" in graph["triton_invariance.errors"]
    assert "triton_invariance.fingerprint" in graph["triton_invariance.api"]  # lazy import
    assert "triton_invariance.errors" in graph["triton_invariance.storage"]
    assert "triton_invariance.nearest" not in graph["triton_invariance.storage"]
    assert "toolkit_core.atomic" in graph["triton_invariance.storage"]


def test_the_checks_see_a_planted_circle_an_upward_import_and_a_long_module(
    tmp_path: Path,
) -> None:
    """The checks themselves can fail: a two-module circle, storage importing the API, and a
    toolkit_core module importing triton_invariance; a module of 601 lines."""
    assert sorted(_circle({"a": {"b"}, "b": {"a"}, "c": set()})) == ["a", "a", "b"]
    planted = {
        "triton_invariance.storage": {"triton_invariance.api", "triton_invariance.data"},
        "toolkit_core.atomic": {"triton_invariance.errors"},
        "triton_invariance.api": {"triton_invariance.storage"},
    }
    assert _upward(planted) == [
        "toolkit_core.atomic -> triton_invariance.errors",
        "triton_invariance.storage -> triton_invariance.api",
    ]
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    short = tmp_path / "short.py"
    short.write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    modules = {"triton_invariance.long": long, "triton_invariance.short": short}
    assert _long(modules) == {"triton_invariance.long": MAX_LINES + 1}

"""triton_invariance's import graph (issue 25): no circles, no import up a layer, small modules.

Read from the source with `ast` (nothing is imported): every import counts, at module level,
inside a function (a lazy import) or under ``TYPE_CHECKING``, since each is a dependency of the
design. The layers are the ones docs/architecture.md draws for triton-invariance; a module may
import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

from pathlib import Path

from toolkit_core.import_graph import (
    circles,
    import_graph,
    long_modules,
    package_modules,
    upward_imports,
)

PACKAGE = "triton_invariance"
# The shared foundations of the three tools (packages/toolkit-core): the lowest layer, outside
# the package; its modules are in the graph so that an import of triton_invariance from there
# is caught.
CORE = "toolkit_core"
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


def _graph() -> dict[str, set[str]]:
    return import_graph(package_modules(PACKAGE, CORE))


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


def test_no_import_circles() -> None:
    assert circles(_graph()) == []


def test_every_module_has_a_layer_and_none_imports_up() -> None:
    graph = _graph()
    for module in graph:
        _layer(module)  # raises for a module no layer names
    assert upward_imports(graph, _layer) == []


def test_no_module_over_600_lines() -> None:
    assert long_modules(package_modules(PACKAGE, CORE), MAX_LINES, PACKAGE) == {}


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
    assert circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    planted = {
        "triton_invariance.storage": {"triton_invariance.api", "triton_invariance.data"},
        "toolkit_core.atomic": {"triton_invariance.errors"},
        "triton_invariance.api": {"triton_invariance.storage"},
    }
    assert upward_imports(planted, _layer) == [
        "toolkit_core.atomic -> triton_invariance.errors",
        "triton_invariance.storage -> triton_invariance.api",
    ]
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    short = tmp_path / "short.py"
    short.write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    modules = {"triton_invariance.long": long, "triton_invariance.short": short}
    assert long_modules(modules, MAX_LINES, PACKAGE) == {"triton_invariance.long": MAX_LINES + 1}

"""The import graph (issue 25 §1): no circles, no import running up a layer, small modules.

Every import counts, wherever it is written (module level, inside a function, under
``TYPE_CHECKING``): a lazy import is still a dependency. The layers, top to bottom, are the ones
docs/architecture.md draws; a module may import its own layer and the layers below it.
"""

from __future__ import annotations

from toolkit_core.import_graph import (
    circles,
    import_graph,
    long_modules,
    package_modules,
    upward_imports,
)

PACKAGE = "oellm_autoexp"
# The shared foundations of the three tools: below every layer here, importing none of them.
CORE = "toolkit_core"
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


def _graph() -> dict[str, set[str]]:
    return import_graph(package_modules(PACKAGE, CORE))


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


def test_no_import_circles() -> None:
    assert circles(_graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    # `_layer` counts from the top: a smaller index is a higher layer.
    assert upward_imports(_graph(), lambda module: -_layer(module)) == []


def test_no_module_over_600_lines() -> None:
    modules = package_modules(PACKAGE, CORE)
    long = long_modules(modules, MAX_LINES, PACKAGE) | long_modules(modules, MAX_LINES, CORE)
    assert long == {}


def test_the_checks_see_a_planted_circle_and_an_upward_import() -> None:
    """The graph checks themselves can fail: a two-module circle and a foundation importing up."""
    graph = {"a.x.m": {"a.y.n"}, "a.y.n": {"a.x.m"}, "a.z": set()}
    assert circles(graph) == [["a.x.m", "a.y.n"]]
    assert _layer("oellm_autoexp.errors") > _layer("oellm_autoexp.monitor.controller")
    assert _layer("toolkit_core.atomic") > _layer("oellm_autoexp.atomic")

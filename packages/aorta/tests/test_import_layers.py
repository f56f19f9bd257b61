"""aorta's import graph: no circles, and no import running up a layer.

Read from the source with `ast` (nothing is imported): every `import` counts, at module level,
inside functions (lazy imports) and under `TYPE_CHECKING`, since each is a dependency of the
design. The layers are documented in docs/architecture.md ("aorta: layers").
"""

from __future__ import annotations

from toolkit_core.import_graph import circles, import_graph, package_modules, upward_imports

# The shared foundations of the three tools (packages/toolkit-core) are the lowest layer, outside
# aorta; their modules are in the graph so that an import of aorta from there is caught.

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


def _graph() -> dict[str, set[str]]:
    return import_graph(package_modules("aorta", "toolkit_core"))


def _layer(module: str) -> int | None:
    if module in _UNLAYERED:
        return None
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module}: in no layer of LAYERS (add it, and to architecture.md)")


def test_no_import_circles_in_aorta() -> None:
    assert circles(_graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    assert upward_imports(_graph(), _layer) == []


def test_the_checks_see_a_circle_and_an_upward_import() -> None:
    # The checkers themselves, on a made-up graph: they must be able to fail.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]]
    layers = [_layer(m) for m in ("aorta.runner.trials", "aorta.triage.report.output")]
    assert layers[0] is not None and layers[1] is not None and layers[0] < layers[1]
    assert _layer("aorta.triage") is None
    assert _layer("toolkit_core.atomic") == 0 < (_layer("aorta.atomic") or 0)

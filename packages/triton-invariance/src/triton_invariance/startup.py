"""Activation without code changes: what `triton_invariance_startup.pth` runs at start-up.

The `.pth` line itself only reads two environment variables (no import) so an interpreter with
both unset pays nothing measurable. When either is set it calls `activate()`, which still does
not import Triton -- plenty of Python processes (pip, the `triton-invariance` CLI) never need
it. Instead a meta-path finder waits for the first `import triton` and installs the hooks right
after Triton's package has initialised. A bad value (or both variables set) then fails that
import with one clear `InvarianceConfigError` rather than silently skipping the check.
"""

from __future__ import annotations

import sys

# `typing`, `importlib.abc` and `importlib.util` cost ~30 ms to import; this module runs at
# start-up, so the names below are for the type checker only (annotations are never evaluated).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import importlib.machinery
    from collections.abc import Sequence
    from types import ModuleType

PTH_LINE = (
    "import os; (os.environ.get('TRITON_INVARIANCE_COMMIT') or "
    "os.environ.get('TRITON_INVARIANCE_COMPARE')) and "
    "__import__('triton_invariance.startup').startup.activate()"
)
"""The single line of the shipped `.pth` file (a test keeps the two in sync)."""


class _InstallAfterTritonImport:
    """A meta-path finder (duck-typed) that finds nothing itself; when `triton` is being
    imported, it arranges `install()` to run right after Triton's `__init__` has executed."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "triton":
            return None
        import importlib.util  # only now: Triton is being imported, start-up is over

        _remove_watcher()
        spec = importlib.util.find_spec("triton")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_install(module: ModuleType) -> None:
            exec_module(module)
            from triton_invariance.hooks import install

            install()

        loader.exec_module = exec_then_install  # type: ignore[method-assign]
        return spec


def _remove_watcher() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _InstallAfterTritonImport)]


def activate() -> None:
    """Install the hooks now if Triton is loaded, else as soon as it is imported."""
    if "triton" in sys.modules:
        from triton_invariance.hooks import install

        install()
        return
    if not any(isinstance(f, _InstallAfterTritonImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _InstallAfterTritonImport())

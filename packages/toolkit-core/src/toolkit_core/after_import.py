"""Run a callback right after a module's `__init__` has run, without importing it early.

aorta's locator must wrap torch, and triton-invariance's hooks must wrap Triton, inside a
user's process started through a `.pth` file: importing either at start-up would cost every
interpreter seconds, and waiting for a later point would miss the user's first use. A
meta-path finder that finds nothing itself sees the import begin, lets the normal finders
locate the module, and chains the callback after the loader's `exec_module`.
"""

from __future__ import annotations

import sys

# This module runs at interpreter start-up (from `.pth` files): the names below are for the
# type checker only (annotations are never evaluated), so nothing else is imported early.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["call_after_import"]


class _AfterImport:
    """A meta-path finder (duck-typed) for one module name and its callback."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        import importlib.util  # only now: the module is being imported, start-up is over

        # Out of the way first, so the find_spec below (and any later import) skips us.
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        callback = self.callback

        def exec_then_call(module: ModuleType) -> None:
            exec_module(module)
            callback()

        spec.loader.exec_module = exec_then_call  # type: ignore[method-assign]
        return spec


def call_after_import(name: str, callback: Callable[[], None]) -> None:
    """Call `callback()` now if top-level module `name` is loaded, else right after its
    `__init__` has run when something imports it. Asking twice for one name while it is not
    yet imported arranges one call."""
    if name in sys.modules:
        callback()
        return
    if not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))

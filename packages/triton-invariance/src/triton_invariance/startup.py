"""Activation without code changes: what `triton_invariance_startup.pth` runs at start-up.

The `.pth` line itself only reads two environment variables (no import) so an interpreter with
both unset pays nothing measurable. When either is set it calls `activate()`, which still does
not import Triton -- plenty of Python processes (pip, the `triton-invariance` CLI) never need
it. Instead a meta-path finder waits for the first `import triton` and installs the hooks right
after Triton's package has initialised. A bad value (or both variables set) then fails that
import with one clear `InvarianceConfigError` rather than silently skipping the check.
"""

from __future__ import annotations

from toolkit_core.after_import import call_after_import

# This module runs at interpreter start-up: it imports nothing beyond `sys` and the small
# `toolkit_core.after_import` (`importlib.util` waits until Triton is being imported).

PTH_LINE = (
    "import os; (os.environ.get('TRITON_INVARIANCE_COMMIT') or "
    "os.environ.get('TRITON_INVARIANCE_COMPARE')) and "
    "__import__('triton_invariance.startup').startup.activate()"
)
"""The single line of the shipped `.pth` file (a test keeps the two in sync)."""


def activate() -> None:
    """Install the hooks now if Triton is loaded, else as soon as it is imported."""
    call_after_import("triton", _install_hooks)


def _install_hooks() -> None:
    from triton_invariance.hooks import install

    install()

"""Instrumentation: what aorta records about the place a run or trial happens.

`collect_env` takes a fail-soft `EnvSnapshot` (host, interpreter, torch, GPUs, packages,
redacted environment variables). Importing this package does not import torch.

The two names are resolved on first use: importing a leaf such as
`aorta.instrumentation.redaction` (recipe loading, the dry-run listing) must not pay for the
environment probe's imports on every CLI start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aorta.instrumentation.environment import collect_env
    from aorta.instrumentation.models import EnvSnapshot

__all__ = ["EnvSnapshot", "collect_env"]


def __getattr__(name: str) -> Any:
    if name == "collect_env":
        from aorta.instrumentation.environment import collect_env

        return collect_env
    if name == "EnvSnapshot":
        from aorta.instrumentation.models import EnvSnapshot

        return EnvSnapshot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Monitoring: SLURM state, log/output activity and log signals -> modes -> restart policies.

The names below are resolved on first use: importing a submodule (`monitor.settings`,
`monitor.policies`) must not import the controller, which imports those submodules itself
(no import cycle through this package).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Action", "Mode", "MonitorController", "MonitorState", "PollReport"]

_LAZY = {
    "Action": "oellm_autoexp.reporting",
    "MonitorController": "oellm_autoexp.monitor.controller",
    "PollReport": "oellm_autoexp.monitor.core",
    "Mode": "oellm_autoexp.persistence.states",
    "MonitorState": "oellm_autoexp.persistence.states",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""oellm_autoexp: one YAML config to SLURM job arrays, monitored and restarted by policy.

Programmatic use: `oellm_autoexp.api` (plan, submit, monitor_once, monitor_until_done, status,
cancel); the lower-level `load_config` -> `build_plan` -> `write_plan` are re-exported below.
Everything is imported lazily so that `import oellm_autoexp` and `oellm-autoexp --help` stay
cheap: no Hydra, OmegaConf, Jinja2, torch or Megatron until a plan is made.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "api", "build_plan", "cli", "load_config", "main", "write_plan"]

_LAZY = {
    "load_config": "oellm_autoexp.config.loader",
    "build_plan": "oellm_autoexp.planning",
    "write_plan": "oellm_autoexp.planning",
    "cli": "oellm_autoexp.cli",
    "main": "oellm_autoexp.cli",
}


def __getattr__(name: str) -> Any:
    # importlib.metadata alone costs ~0.1 s at startup, so the version is looked up on demand.
    if name == "__version__":
        from toolkit_core.cli import distribution_version

        return distribution_version("oellm-autoexp")
    if name == "api":
        import importlib

        return importlib.import_module("oellm_autoexp.api")
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

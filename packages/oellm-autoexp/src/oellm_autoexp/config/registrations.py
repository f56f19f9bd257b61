"""Which modules register the backends, monitors and restart policies a config names.

Registration with compoconf is a side effect of importing the module that defines a class.
Importing every such module costs a config dry run ~40 ms it mostly does not need (the monitor
package with the session store, the Megatron backend), so a config whose every ``class_name``
is a built-in one imports only the modules of those names (`REGISTERED_IN`); anything else
(an unknown name, a missing ``class_name``) imports them all, so that the error lists every
name a config could have used. compoconf resolves ``Interface.cfgtype`` unions lazily, so a
module imported later still extends them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Iterator, Mapping
from typing import Any

# Modules whose import registers implementations with compoconf. Optional ones are skipped
# when absent; none of them may import torch/megatron at module level.
# (module, walk its submodules too)
REGISTRATION_MODULES = (
    ("oellm_autoexp.backends.command", False),
    ("oellm_autoexp.backends.megatron", False),
    ("oellm_autoexp.monitor", True),
)
# Built-in class_name -> the module whose import registers it (kept equal to what importing
# REGISTRATION_MODULES registers by tests/config/test_registrations.py).
REGISTERED_IN = {
    "CommandBackend": "oellm_autoexp.backends.command",
    "MegatronBackend": "oellm_autoexp.backends.megatron",
    "LogMonitor": "oellm_autoexp.monitor.settings",
    "NoRestartPolicy": "oellm_autoexp.monitor.policies",
    "AlwaysRestartPolicy": "oellm_autoexp.monitor.policies",
    "SelectiveRestartPolicy": "oellm_autoexp.monitor.policies",
    "TimeLimitRestartPolicy": "oellm_autoexp.monitor.policies",
    "CheckpointRestartPolicy": "oellm_autoexp.monitor.policies",
}


@functools.cache
def load_registrations() -> None:
    """Import every module that registers backends, monitors and restart policies (once)."""
    from compoconf import load

    for name, recurse in REGISTRATION_MODULES:
        parent = name.rpartition(".")[0]
        if importlib.util.find_spec(parent) is None or importlib.util.find_spec(name) is None:
            continue
        # monitor/ is walked so every submodule's @register runs, whatever its layout.
        load(name, recurse=recurse)


def load_registrations_for(data: Mapping[str, Any]) -> None:
    """Import what registers the classes `data` (a plain config mapping) names.

    Only the named modules when every ``class_name`` is a built-in one; else everything.
    """
    modules = set()
    for entry in _named_entries(data):
        name = entry.get("class_name") if isinstance(entry, Mapping) else None
        module = REGISTERED_IN.get(name) if isinstance(name, str) else None
        if module is None or importlib.util.find_spec(module) is None:
            load_registrations()
            return
        modules.add(module)
    for module in sorted(modules):
        importlib.import_module(module)


def _named_entries(data: Mapping[str, Any]) -> Iterator[Any]:
    """The config's sections that select a registered class (backend, monitor, policies)."""
    for key in ("backend", "monitoring"):
        if data.get(key) is not None:
            yield data[key]
    policies = data.get("restart_policies")
    if policies is not None:
        yield from policies if isinstance(policies, list) else [policies]

"""compoconf interfaces for the pluggable parts of the config besides backends.

The config tree references restart policies and monitors by interface type
(``RestartPolicyInterface.cfgtype``), so any implementation registered with
``@compoconf.register`` is accepted from YAML by its ``class_name``. Implementations live in
`oellm_autoexp.monitor`; the config layer only needs these contracts.
"""

from __future__ import annotations

from typing import Any

from compoconf import RegistrableConfigInterface, register_interface


@register_interface
class RestartPolicyInterface(RegistrableConfigInterface):
    """Decides what happens to a job after an error mode (stall, crash, timeout, success).

    Implementations take their config as the first constructor argument (compoconf
    convention) and expose the decision method the monitor calls.
    """

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        _ = args, kwargs  # RegistrableConfigInterface.__init__ ignores them too
        self.config = config


@register_interface
class MonitorInterface(RegistrableConfigInterface):
    """Observes running jobs (SLURM state, log activity, log signals)."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        _ = args, kwargs  # RegistrableConfigInterface.__init__ ignores them too
        self.config = config

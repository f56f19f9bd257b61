"""compoconf interfaces for the pluggable parts of the config besides backends.

The config tree references restart policies and monitors by interface type
(``RestartPolicyInterface.cfgtype``), so any implementation registered with
``@compoconf.register`` is accepted from YAML by its ``class_name``. Implementations live in
`oellm_autoexp.monitor`; the config layer only needs these contracts.
"""

# No `from __future__ import annotations`: compoconf resolves a config class's annotations
# (typing.get_type_hints) when it parses one, and each annotation kept as a string is
# compiled then; evaluated here, at import, they cost a config load nothing (issue 26).
from dataclasses import dataclass, field
from typing import Any

from compoconf import ConfigInterface, RegistrableConfigInterface, register_interface


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


@dataclass
class MonitorConfigBase(ConfigInterface):
    """Fields every monitor config shares; monitor configs should subclass it.

    Validation requires a termination criterion: `termination_str` (a line in the log that
    marks success) or `termination_cmd` (a command whose exit status 0 marks success).
    `output_paths` are templates resolved per job (``{output_dir}/train.log``) and tailed
    alongside the SLURM log for activity.
    """

    termination_str: str | None = None
    termination_cmd: str | None = None
    inactivity_threshold_seconds: float = 1800.0
    output_paths: list[str] = field(default_factory=list)

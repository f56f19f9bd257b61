"""The log monitor's config (registered under `MonitorInterface`) and its session form.

A session stores the dumped monitor config and restart policies, so `monitor --monitor-session`
rebuilds them without the original YAML (`load_settings`).
"""

# No `from __future__ import annotations`: compoconf resolves a config class's annotations
# (typing.get_type_hints) when it parses one, and each annotation kept as a string is
# compiled then; evaluated here, at import, they cost a config load nothing (issue 26).
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compoconf import dump_config, parse_config, register

from oellm_autoexp.config.interfaces import (
    MonitorConfigBase,
    MonitorInterface,
    RestartPolicyInterface,
)
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor.log_signals import DEFAULT_SIGNALS, LogSignal, SignalSet, parse_signals


@dataclass
class LogMonitorConfig(MonitorConfigBase):
    """SLURM state + log/output activity + log signals, polled every `poll_interval_seconds`."""

    poll_interval_seconds: float = 60.0
    log_signals: list[dict[str, Any]] = field(default_factory=list)
    default_signals: bool = True
    # Global cap on restarts of one job across all modes (each policy also has its own).
    max_restarts: int = 5
    restart_backoff_seconds: float = 30.0
    restart_backoff_factor: float = 2.0
    max_restart_backoff_seconds: float = 1800.0
    # Every lifecycle change (run_pending, run_running, run_stalled, run_completed, run_failed,
    # run_ended), the completion marker and every signal match becomes an action
    # (`drain_actions`); the standalone
    # `monitor MONITOR.yaml` turns this on.
    emit_events: bool = False
    # Flaky nodes (monitor.node_health): a node on which this many attempts of the session failed
    # with a node-level error (NODE_FAIL, NCCL, Xid/ECC) is passed to later submissions as
    # `sbatch --exclude`; 0 turns it off. At most `max_excluded_nodes` nodes are excluded.
    exclude_nodes_after: int = 2
    max_excluded_nodes: int = 8


@register
class LogMonitor(MonitorInterface):
    """The monitor implementation the controller drives (config only; logic in controller)."""

    config_class = LogMonitorConfig


@dataclass
class MonitorSettings:
    """Everything the controller needs for one session, validated."""

    config: LogMonitorConfig
    signals: list[LogSignal]
    policies: list[Any]
    signal_set: SignalSet = field(init=False)
    # The order classification prefers signals in: the user's (specific to this run) before
    # the pre-registered ones, each list in its own order.
    ranked: list[LogSignal] = field(init=False)

    def __post_init__(self) -> None:
        self.signal_set = SignalSet(self.signals)
        defaults = [s for s in self.signals if s in DEFAULT_SIGNALS]
        self.ranked = [s for s in self.signals if s not in DEFAULT_SIGNALS] + defaults
        if len(defaults) < len(self.signals):
            # The user's patterns: their union is compiled now (at plan time), not at the first
            # scan; the pre-registered signals alone always compile, so a plan without its own
            # signals does not load RE2.
            _ = self.signal_set.prefilter

    def backoff(self, restarts_so_far: int) -> float:
        """Seconds to wait before the next restart of a job that restarted `n` times."""
        cfg = self.config
        delay = cfg.restart_backoff_seconds * cfg.restart_backoff_factor**restarts_so_far
        return float(min(delay, cfg.max_restart_backoff_seconds))


def session_monitoring(monitor: Any | None, restart_policies: list[Any]) -> dict[str, Any]:
    """The JSON form stored in a session (``monitor: None`` = the default log monitor)."""
    return {
        "monitor": dump_config(monitor if monitor is not None else LogMonitorConfig()),
        "restart_policies": [dump_config(p) for p in restart_policies],
    }


# Lower bounds of the monitor's numbers: a zero poll interval is a busy loop of squeue calls.
MIN_POLL_INTERVAL_SECONDS = 0.1
_NON_NEGATIVE = (
    "max_restarts",
    "restart_backoff_seconds",
    "restart_backoff_factor",
    "max_restart_backoff_seconds",
)


def _check_numbers(config: LogMonitorConfig) -> None:
    interval = config.poll_interval_seconds
    if not interval >= MIN_POLL_INTERVAL_SECONDS:  # also refuses NaN
        raise ConfigError(
            f"must be at least {MIN_POLL_INTERVAL_SECONDS} seconds, got {interval!r}",
            key="monitoring.poll_interval_seconds",
        )
    for name in _NON_NEGATIVE:
        value = getattr(config, name)
        if not value >= 0:
            raise ConfigError(f"must be >= 0, got {value!r}", key=f"monitoring.{name}")


def load_settings(data: Mapping[str, Any]) -> MonitorSettings:
    """Rebuild the monitor config, signals and policy instances from a session's JSON."""
    raw_monitor = dict(data.get("monitor") or {"class_name": "LogMonitor"})
    try:
        config = parse_config(MonitorInterface.cfgtype, raw_monitor)
    except ConfigError:
        raise
    except Exception as exc:  # compoconf reports type errors with its own exception types
        raise ConfigError(" ".join(str(exc).split()), key="monitoring") from None
    if not isinstance(config, LogMonitorConfig):
        # Another registered monitor config: use its shared fields with the log monitor.
        base = {
            k: getattr(config, k)
            for k in MonitorConfigBase.__dataclass_fields__
            if k != "class_name"
        }
        config = LogMonitorConfig(**base)
    if config.inactivity_threshold_seconds <= 0:
        raise ConfigError("must be > 0", key="monitoring.inactivity_threshold_seconds")
    _check_numbers(config)
    for name in ("exclude_nodes_after", "max_excluded_nodes"):
        if getattr(config, name) < 0:
            raise ConfigError("must be >= 0", key=f"monitoring.{name}")
    signals = [
        *(DEFAULT_SIGNALS if config.default_signals else ()),
        *parse_signals(config.log_signals),
    ]
    policies = []
    if data.get("restart_policies"):  # registers the built-in policies (a plan may have none)
        from oellm_autoexp.monitor import policies as _registering  # noqa: F401
    for index, raw in enumerate(data.get("restart_policies") or []):
        try:
            policy_cfg = parse_config(RestartPolicyInterface.cfgtype, dict(raw))
        except ConfigError as exc:
            raise ConfigError(exc.detail, key=f"restart_policies[{index}]") from None
        except Exception as exc:
            raise ConfigError(
                " ".join(str(exc).split()), key=f"restart_policies[{index}]"
            ) from None
        policies.append(policy_cfg.instantiate(RestartPolicyInterface))
    return MonitorSettings(config, signals, policies)

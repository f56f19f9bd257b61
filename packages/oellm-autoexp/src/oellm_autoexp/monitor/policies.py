"""Restart policies, registered with compoconf under `RestartPolicyInterface`.

A policy is chosen per error mode (its config's `modes`) and answers `decide(context)` with a
`Decision`: restart (optionally with a longer time limit, or with environment variables that
point the run at its latest checkpoint) or stop. Every policy has a retry budget (`max_retries`
per mode and job); the controller adds a global cap and exponential backoff between restarts.
Decisions are functions of the context; only `CheckpointRestartPolicy` also looks at files.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compoconf import ConfigInterface, register

from oellm_autoexp.config.interfaces import RestartPolicyInterface
from oellm_autoexp.errors import ConfigError


@dataclass(frozen=True)
class RestartContext:
    """What a policy knows: the mode, its metadata and how often this job restarted."""

    mode: str
    metadata: dict[str, Any]
    attempt: int  # restarts of this job for this mode so far
    time_limit: str | None = None
    name: str = ""
    output_dir: str = ""


@dataclass(frozen=True)
class Decision:
    """`restart` or `stop`, why, and what changes on restart."""

    action: str
    reason: str
    time_limit: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def restart(self) -> bool:
        """Whether the job is submitted again."""
        return self.action == "restart"


@dataclass
class RestartPolicyConfig(ConfigInterface):
    """Fields every policy shares: the error modes it handles and its retry budget."""

    modes: list[str] = field(default_factory=lambda: ["stall", "crash", "timeout"])
    max_retries: int = 3

    def __post_init__(self) -> None:
        bad = sorted(set(self.modes) - {"stall", "crash", "timeout", "success"})
        if bad:
            raise ConfigError(
                f"unknown mode(s) {', '.join(bad)}; expected stall, crash, timeout or success",
                key="restart_policies.modes",
            )
        if self.max_retries < 0:
            raise ConfigError("must be >= 0", key="restart_policies.max_retries")


class _Policy(RestartPolicyInterface):
    config: RestartPolicyConfig

    def handles(self, mode: str) -> bool:
        """Whether this policy decides for `mode`."""
        return mode in self.config.modes

    def decide(self, context: RestartContext) -> Decision:
        """The decision for one finished attempt."""
        raise NotImplementedError

    def _budget(self, context: RestartContext) -> Decision | None:
        if context.attempt >= self.config.max_retries:
            return Decision(
                "stop", f"retry budget spent ({context.attempt}/{self.config.max_retries})"
            )
        return None


@dataclass
class NoRestartPolicyConfig(RestartPolicyConfig):
    """Never restart (mark the job failed)."""


@register
class NoRestartPolicy(_Policy):
    """Stop on every mode it handles."""

    config_class = NoRestartPolicyConfig

    def decide(self, context: RestartContext) -> Decision:
        return Decision("stop", f"{type(self).__name__}: no restart on {context.mode}")


@dataclass
class AlwaysRestartPolicyConfig(RestartPolicyConfig):
    """Restart on every handled mode until the budget is spent."""


@register
class AlwaysRestartPolicy(_Policy):
    """Restart with the same plan while retries remain."""

    config_class = AlwaysRestartPolicyConfig

    def decide(self, context: RestartContext) -> Decision:
        spent = self._budget(context)
        if spent is not None:
            return spent
        return Decision("restart", f"{context.mode}: restart with the same plan")


# Classified from exit codes 2, 126 and 127 (monitor.classify): never retried unless a policy
# lists them in `restart_on_error_types`.
PERMANENT_ERROR_TYPES = frozenset({"usage", "cannot_execute"})


@dataclass
class SelectiveRestartPolicyConfig(RestartPolicyConfig):
    """Restart depending on error_type and subsystem (exclusions win over inclusions).

    The permanent error types (`usage`, `cannot_execute`: exit 2, 126, 127) stop unless
    `restart_on_error_types` names them.
    """

    modes: list[str] = field(default_factory=lambda: ["crash", "stall"])
    restart_on_error_types: list[str] = field(default_factory=list)
    restart_on_subsystems: list[str] = field(default_factory=list)
    exclude_error_types: list[str] = field(default_factory=list)
    default_action: str = "stop"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.default_action not in {"restart", "stop"}:
            raise ConfigError(
                f"expected 'restart' or 'stop', got {self.default_action!r}",
                key="restart_policies.default_action",
            )


@register
class SelectiveRestartPolicy(_Policy):
    """The spec's selective policy: restart on CANCELLED/hang/nccl, never on OOM, etc."""

    config_class = SelectiveRestartPolicyConfig
    config: SelectiveRestartPolicyConfig

    def decide(self, context: RestartContext) -> Decision:
        cfg = self.config
        error_type = str(context.metadata.get("error_type") or "")
        subsystem = str(context.metadata.get("subsystem") or "")
        if error_type and error_type in cfg.exclude_error_types:
            return Decision("stop", f"error_type {error_type} is excluded from restarts")
        if error_type in PERMANENT_ERROR_TYPES and error_type not in cfg.restart_on_error_types:
            return Decision(
                "stop",
                f"error_type {error_type} (exit {context.metadata.get('exit_code')}) is "
                "permanent: the same command line fails again",
            )
        if error_type and error_type in cfg.restart_on_error_types:
            why = f"error_type {error_type} is restartable"
        elif subsystem and subsystem in cfg.restart_on_subsystems:
            why = f"subsystem {subsystem} is restartable"
        elif cfg.default_action == "restart":
            why = f"no rule for error_type {error_type or '-'}; default restart"
        else:
            return Decision("stop", f"no rule for error_type {error_type or '-'}; default stop")
        return self._budget(context) or Decision("restart", why)


_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+)(?::(\d+))?$")


def time_limit_seconds(text: str) -> int:
    """SLURM time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) in seconds."""
    match = _TIME.match(text.strip())
    if match is None:
        raise ConfigError(f"not a SLURM time limit: {text!r}", key="time_limit")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours = int(first) if first is not None else int(second)
        minutes = int(second) if first is not None else 0
        return int(days) * 86400 + hours * 3600 + minutes * 60 + int(third or 0)
    if first is None and third is None:
        return int(second) * 60  # MM
    if third is None:
        return int(first) * 60 + int(second)  # MM:SS
    return int(first) * 3600 + int(second) * 60 + int(third)  # HH:MM:SS


def format_time_limit(seconds: int) -> str:
    """Seconds as SLURM ``D-HH:MM:SS`` (or ``HH:MM:SS`` under a day)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    body = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{body}" if days else body


@dataclass
class TimeLimitRestartPolicyConfig(RestartPolicyConfig):
    """On timeout: restart with the time limit multiplied by `factor`, up to `max_time_limit`."""

    modes: list[str] = field(default_factory=lambda: ["timeout"])
    factor: float = 1.5
    max_time_limit: str | None = None
    default_time_limit: str = "01:00:00"


@register
class TimeLimitRestartPolicy(_Policy):
    """Grow the time limit on each timeout; stop when the cap or the budget is reached."""

    config_class = TimeLimitRestartPolicyConfig
    config: TimeLimitRestartPolicyConfig

    def decide(self, context: RestartContext) -> Decision:
        spent = self._budget(context)
        if spent is not None:
            return spent
        cfg = self.config
        current = time_limit_seconds(context.time_limit or cfg.default_time_limit)
        grown = max(current + 1, int(current * cfg.factor))
        if cfg.max_time_limit is not None:
            cap = time_limit_seconds(cfg.max_time_limit)
            if current >= cap:
                return Decision("stop", f"time limit already at the cap {cfg.max_time_limit}")
            grown = min(grown, cap)
        new = format_time_limit(grown)
        return Decision(
            "restart", f"timeout: time limit {format_time_limit(current)} -> {new}", time_limit=new
        )


@dataclass
class CheckpointRestartPolicyConfig(RestartPolicyConfig):
    """Restart from the newest checkpoint matching `checkpoint_glob`.

    The restarted job gets ``<env_var>=<path>`` in its environment (``sbatch --export``); the
    launch command reads it (e.g. ``--load "$AUTOEXP_RESUME_FROM"``). Without a checkpoint the
    job restarts from scratch unless `require_checkpoint`.
    """

    checkpoint_glob: str = "{output_dir}/checkpoints/*"
    env_var: str = "AUTOEXP_RESUME_FROM"
    require_checkpoint: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        from oellm_autoexp.backends.command import check_template

        # Formatted with str.format: plain {output_dir} / {name} only (no attribute access).
        check_template(self.checkpoint_glob, ["output_dir", "name"], key="checkpoint_glob")


@register
class CheckpointRestartPolicy(_Policy):
    """Point the restart at the latest checkpoint (newest by modification time)."""

    config_class = CheckpointRestartPolicyConfig
    config: CheckpointRestartPolicyConfig

    def decide(self, context: RestartContext) -> Decision:
        spent = self._budget(context)
        if spent is not None:
            return spent
        cfg = self.config
        pattern = cfg.checkpoint_glob.format(output_dir=context.output_dir, name=context.name)
        found = [p for p in glob.glob(pattern) if "," not in p]  # noqa: PTH207 (a user glob)
        if not found:
            if cfg.require_checkpoint:
                return Decision("stop", f"no checkpoint matches {pattern}")
            return Decision("restart", f"{context.mode}: no checkpoint yet; restart from scratch")
        latest = max(found, key=lambda p: (Path(p).stat().st_mtime, p))
        return Decision(
            "restart", f"{context.mode}: resume from {latest}", env={cfg.env_var: latest}
        )


def policy_for(policies: list[Any], mode: str) -> Any | None:
    """The first policy that handles `mode`, or None."""
    for policy in policies:
        if policy.handles(mode):
            return policy
    return None

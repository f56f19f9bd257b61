"""Plan-time checks: settings, param keys, monitoring, triage templates, paths.

Everything a plan would otherwise only discover after submission is refused here, as a
`ConfigError` naming the key. Pure apart from reading triage templates.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oellm_autoexp.backends.base import JOB_FIELDS
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.errors import ConfigError

SBATCH_PREFIX = "slurm.sbatch."
# Param prefixes that change the config per job; any other dotted prefix of a config section
# is a mistake (e.g. sweeping `project.name` cannot work).
_SECTIONS = (
    "project.",
    "sweep.",
    "slurm.",
    "monitoring.",
    "restart.",
    "restart_policies.",
    "scheduler.",
    "container.",
)


def check_slurm_settings(config: RootConfig) -> None:
    """Array size and throttle, `test_only`, the submit command and the container runtime."""
    slurm = config.slurm
    if slurm.max_array_size < 1:
        raise ConfigError(
            f"must be at least 1, got {slurm.max_array_size}", key="slurm.max_array_size"
        )
    if slurm.array_throttle is not None and slurm.array_throttle < 1:
        raise ConfigError(
            f"must be at least 1 (or null for no limit), got {slurm.array_throttle}",
            key="slurm.array_throttle",
        )
    if slurm.test_only not in ("auto", "always", "never"):
        raise ConfigError(
            f"expected one of auto, always, never, got {slurm.test_only!r}", key="slurm.test_only"
        )
    if not slurm.submit_cmd.strip():
        raise ConfigError("empty submit command", key="slurm.submit_cmd")
    if config.container is not None and config.container.runtime not in (
        "apptainer",
        "singularity",
    ):
        raise ConfigError(
            f"expected apptainer or singularity, got {config.container.runtime!r}",
            key="container.runtime",
        )


def check_job_count(points: int, stages: int) -> None:
    """Every point runs every stage: the product is the number of jobs (MAX_JOBS)."""
    from oellm_autoexp.limits import limit, limit_hint

    if points * stages > limit("MAX_JOBS"):
        raise ConfigError(
            f"{points:,} sweep point(s) x {stages:,} stage(s) = {points * stages:,} jobs, more "
            "than the " + limit_hint("MAX_JOBS"),
            key="stages",
        )


def check_param_keys(params: Mapping[str, Any], *, where: str) -> None:
    """A swept key may set `backend.*`, `slurm.sbatch.*` or a free param, no other section."""
    for key in params:
        if key.startswith(_SECTIONS) and not key.startswith(SBATCH_PREFIX):
            raise ConfigError(
                "a sweep can set backend.* and slurm.sbatch.* config keys, or free params "
                "(no section prefix); this key cannot change per job",
                key=f"{where} {key}",
            )


def check_monitoring(config: RootConfig) -> None:
    """The settings the monitor will load from the session, checked at plan time."""
    monitoring: Any = config.monitoring
    if monitoring is None:
        return
    # What the monitor will load from the session, checked now (intervals, RE2 signals, ...):
    # a mistake is a plan-time config error, not a crash after submission.
    from oellm_autoexp.config.loader import dump_config
    from oellm_autoexp.monitor.settings import load_settings

    load_settings(
        {
            "monitor": dump_config(monitoring),
            "restart_policies": [dump_config(p) for p in config.restart_policies],
        }
    )
    if not getattr(monitoring, "termination_str", None) and not getattr(
        monitoring, "termination_cmd", None
    ):
        raise ConfigError(
            "no termination criterion: set monitoring.termination_str (a log line that marks "
            "success) or monitoring.termination_cmd",
            key="monitoring",
        )
    from oellm_autoexp.backends.command import check_template

    termination_cmd = getattr(monitoring, "termination_cmd", None)
    if termination_cmd:
        from oellm_autoexp.monitor.shell_fields import TERMINATION_FIELDS, check_command_template

        check_command_template(
            termination_cmd, TERMINATION_FIELDS, key="monitoring.termination_cmd"
        )
    known = list(JOB_FIELDS)
    for i, template in enumerate(getattr(monitoring, "output_paths", None) or []):
        check_template(str(template), known, key=f"monitoring.output_paths[{i}]")


def with_triage_templates(dumped: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """`dumped` with every `monitoring.log_signals[*].triage` template checked and absolute.

    The monitor may run elsewhere than the plan, so the session keeps the absolute path; a
    missing, unreadable or malformed template, or one aorta refuses, is a plan-time
    `ConfigError` naming the key.
    Entries that are not well-formed signals are left to `_check_monitoring`'s errors.
    """
    monitoring = dumped.get("monitoring")
    signals = monitoring.get("log_signals") if isinstance(monitoring, dict) else None
    if not isinstance(signals, list) or not any(_triage_of(signal) for signal in signals):
        return dumped  # nothing to check: the triage modules (and aorta) stay unloaded
    from oellm_autoexp.monitor.triage_launch import check_with_aorta, load_template
    from oellm_autoexp.monitor.triage_recipe import resolve_template_path

    checked = []
    for index, signal in enumerate(signals):
        value = _triage_of(signal)
        if value:
            path = resolve_template_path(value, cwd)
            key = f"monitoring.log_signals[{index}].triage"
            check_with_aorta(load_template(path, key=key), path=path, key=key)
            checked.append({**signal, "triage": str(path)})
        else:
            checked.append(signal)
    assert isinstance(monitoring, dict)  # for mypy: `signals` came from it
    return {**dumped, "monitoring": {**monitoring, "log_signals": checked}}


def _triage_of(signal: Any) -> str | None:
    """A log signal's `triage` template path, when it names one."""
    value = signal.get("triage") if isinstance(signal, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def check_inside(path: Path, root: Path) -> None:
    """Defence in depth: names are validated, but no planned path may leave the output root."""
    normal = os.path.normpath(path)
    if os.path.commonpath([normal, str(root)]) != str(root):
        raise ConfigError(f"planned path {path} is outside the output root {root}", key="project")

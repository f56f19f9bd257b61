"""Pure classification of a finished (or vanished) job into an error mode with metadata.

SLURM decides the broad outcome; log signals seen during the attempt refine it. CANCELLED,
TIMEOUT, NODE_FAIL and PREEMPTED are facts about the job's treatment by SLURM, so their
metadata stays SLURM's; FAILED (non-zero exit) takes the most specific error signal the log
showed (oom before nccl before exception), else ``slurm_failure``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oellm_autoexp.monitor.log_signals import LogSignal
from oellm_autoexp.monitor.states import Mode
from oellm_autoexp.slurm.client import JobInfo

# SLURM end states that are the scheduler's doing -> (error_type, subsystem).
_SLURM_CAUSED = {
    "CANCELLED": ("cancelled", "slurm"),
    "NODE_FAIL": ("node_failure", "slurm"),
    "PREEMPTED": ("preempted", "slurm"),
    "BOOT_FAIL": ("node_failure", "slurm"),
    "DEADLINE": ("deadline", "slurm"),
    "REVOKED": ("revoked", "slurm"),
}


@dataclass(frozen=True)
class Classification:
    """An error mode and the metadata restart policies decide on."""

    mode: Mode
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def error_type(self) -> str | None:
        """Shortcut for ``metadata["error_type"]``."""
        value = self.metadata.get("error_type")
        return None if value is None else str(value)


def _first_error(signals: Sequence[LogSignal]) -> LogSignal | None:
    errors = [s for s in signals if s.mode == Mode.CRASH and s.error_type]
    return errors[0] if errors else None


def classify_end(  # noqa: PLR0911 (a decision table: one return per outcome)
    info: JobInfo | None,
    signals: Sequence[LogSignal],
    *,
    completed_marker: bool,
    marker_required: bool,
) -> Classification:
    """Mode of a job SLURM no longer runs. `info` None: SLURM forgot the job (no sacct).

    `signals` are those seen in this attempt's logs, most specific error first (the order of
    the configured signal list). `completed_marker`: the termination string was seen;
    `marker_required`: a termination criterion is configured, so exit 0 alone is not success.
    """
    if info is None:
        if completed_marker:
            return Classification(Mode.SUCCESS, {"reason": "completion marker; job left squeue"})
        return Classification(
            Mode.CRASH,
            {"error_type": "lost", "subsystem": "slurm", "reason": "job vanished from squeue"},
        )
    base: dict[str, Any] = {
        "slurm_state": info.state,
        "reason": info.reason,
        "exit_code": info.exit_code,
    }
    if info.state == "TIMEOUT":
        return Classification(
            Mode.TIMEOUT,
            {
                **base,
                "error_type": "timeout",
                "subsystem": "slurm",
                "reason": info.reason or "TimeLimit",
            },
        )
    if completed_marker and info.state in {"COMPLETED", "CANCELLED"}:
        # The run reported success; a cancel after that (e.g. by the user) loses nothing.
        return Classification(Mode.SUCCESS, base)
    if info.state == "COMPLETED" and (info.exit_code in (0, None)):
        if marker_required:
            return Classification(
                Mode.CRASH,
                {
                    **base,
                    "error_type": "incomplete",
                    "subsystem": "job",
                    "reason": "exit 0 without the termination marker",
                },
            )
        return Classification(Mode.SUCCESS, base)
    if info.state in _SLURM_CAUSED:
        error_type, subsystem = _SLURM_CAUSED[info.state]
        return Classification(
            Mode.CRASH, {**base, "error_type": error_type, "subsystem": subsystem}
        )
    signal = _first_error(signals)
    if signal is not None:
        return Classification(
            Mode.CRASH,
            {
                **base,
                "error_type": signal.error_type,
                "subsystem": signal.subsystem or "job",
                "signal_name": signal.name,
            },
        )
    if info.state == "OUT_OF_MEMORY":
        return Classification(Mode.CRASH, {**base, "error_type": "oom", "subsystem": "slurm"})
    return Classification(Mode.CRASH, {**base, "error_type": "slurm_failure", "subsystem": "slurm"})


def classify_stall(idle_s: float, threshold_s: float) -> Classification:
    """The mode of a RUNNING job whose log and outputs did not change for `idle_s`."""
    return Classification(
        Mode.STALL,
        {
            "error_type": "hang",
            "subsystem": "job",
            "reason": f"no log or output change for {idle_s:.0f} s (threshold {threshold_s:g} s)",
        },
    )

"""Job states and error modes (the spec's vocabulary), and the SLURM states they come from.

Persisted in every session file, so they live with the session records; the monitor decides
them.
"""

from __future__ import annotations

from enum import StrEnum


class MonitorState(StrEnum):
    """What the monitor says about a job."""

    PENDING = "pending"
    RUNNING = "running"
    STALLED = "stalled"
    FAILED = "failed"
    COMPLETED = "completed"


class Mode(StrEnum):
    """Error modes restart policies are keyed by."""

    STALL = "stall"
    CRASH = "crash"
    TIMEOUT = "timeout"
    SUCCESS = "success"


def monitor_state_of(slurm_state: str) -> MonitorState:
    """The monitor state of a job SLURM reports as `slurm_state` (before classification)."""
    if slurm_state in {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"}:
        return MonitorState.PENDING
    if slurm_state == "COMPLETED":
        return MonitorState.COMPLETED
    if slurm_state in {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}:
        return MonitorState.RUNNING
    return MonitorState.FAILED

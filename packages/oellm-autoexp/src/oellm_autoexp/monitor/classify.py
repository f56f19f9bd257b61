"""Pure classification of a finished (or vanished) job into an error mode with metadata.

SLURM decides the broad outcome; log signals seen during the attempt refine it. CANCELLED,
TIMEOUT, NODE_FAIL and PREEMPTED are facts about the job's treatment by SLURM, so their
metadata stays SLURM's. Otherwise a signal with a `mode` classifies the attempt as that mode,
whatever the exit code: a `success` signal counts as the completion marker; a `crash`,
`timeout` or `stall` signal (the user's signals before the pre-registered ones, each list in
its configured order: oom before nccl before exception) wins over exit 0 and over a generic
non-zero exit. Without one, a non-zero exit is ``slurm_failure``, except the shell's own exit
codes for a command line it could not run: 2 (``usage``) and 126/127 (``cannot_execute``), which
no retry fixes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oellm_autoexp.monitor.log_signals import LogSignal
from oellm_autoexp.persistence.states import Mode
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


# Exit codes that mean "the command line is wrong", not "the run failed": bash and most CLIs
# exit 2 on a usage error, 126 when the program cannot execute, 127 when it is not found.
PERMANENT_EXIT_CODES = {2: "usage", 126: "cannot_execute", 127: "cannot_execute"}
# error_type of a signal that sets a mode but no error_type.
_DEFAULT_ERROR_TYPE = {Mode.TIMEOUT: "timeout", Mode.STALL: "hang"}


def succeeded(signals: Sequence[LogSignal]) -> bool:
    """Whether one of the attempt's signals reports success (`mode: success`)."""
    return any(s.mode == Mode.SUCCESS for s in signals)


def _first_failure(signals: Sequence[LogSignal]) -> LogSignal | None:
    """The signal that classifies a failed attempt: the first with a non-success mode."""
    return next((s for s in signals if s.mode and s.mode != Mode.SUCCESS), None)


def signal_classification(signal: LogSignal, base: Mapping[str, Any]) -> Classification:
    """The attempt classified as `signal` says (its mode, default crash, and metadata)."""
    mode = Mode(signal.mode or Mode.CRASH)
    error_type = signal.error_type or _DEFAULT_ERROR_TYPE.get(mode) or signal.name
    return Classification(
        mode,
        {
            **base,
            "error_type": error_type,
            "subsystem": signal.subsystem or "job",
            "signal_name": signal.name,
        },
    )


def classify_end(  # noqa: PLR0911 (a decision table: one return per outcome)
    info: JobInfo | None,
    signals: Sequence[LogSignal],
    *,
    completed_marker: bool,
    marker_required: bool,
) -> Classification:
    """Mode of a job SLURM no longer runs. `info` None: SLURM forgot the job (no sacct).

    `signals` are those seen in this attempt's logs, in the order they are preferred (see the
    module doc). `completed_marker`: the termination string was seen; `marker_required`: a
    termination criterion is configured, so exit 0 alone is not success.
    """
    done = completed_marker or succeeded(signals)
    failure = _first_failure(signals)
    if info is None:
        if done:
            return Classification(Mode.SUCCESS, {"reason": "completion marker; job left squeue"})
        if failure is not None:
            return signal_classification(failure, {"reason": "job vanished from squeue"})
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
    if done and info.state in {"COMPLETED", "CANCELLED"}:
        # The run reported success; a cancel after that (e.g. by the user) loses nothing.
        return Classification(Mode.SUCCESS, base)
    if info.state in _SLURM_CAUSED:
        error_type, subsystem = _SLURM_CAUSED[info.state]
        return Classification(
            Mode.CRASH, {**base, "error_type": error_type, "subsystem": subsystem}
        )
    if failure is not None:
        return signal_classification(failure, base)
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
    if info.state == "OUT_OF_MEMORY":
        return Classification(Mode.CRASH, {**base, "error_type": "oom", "subsystem": "slurm"})
    permanent = PERMANENT_EXIT_CODES.get(info.exit_code or 0)
    if permanent is not None and info.signal is None:
        return Classification(
            Mode.CRASH,
            {
                **base,
                "error_type": permanent,
                "subsystem": "job",
                "reason": f"exit {info.exit_code}: the command line cannot run as written",
            },
        )
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

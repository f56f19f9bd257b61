"""The contract between a workload and `aorta.runner.run_trials`.

A workload is a callable `entry(ctx: TrialContext) -> WorkloadOutcome`. The runner owns
everything around it (env vars, seeds, timing of the whole trial, the trial JSON); the workload
owns the training loop and says how the trial went.

Outcomes (`aorta.runner.models.Outcome`): a trial `passed`, `failed` (the failure under study
fired) or was an `error` (it could not measure). A workload declares them as follows:

- return a `WorkloadOutcome` with `failure` set: failed; with `error` set: error;
- raise `TrialFailure(reason)`: failed; raise `TrialError(reason)`: error;
- any other exception is classified by the runner: `ImportError` (a missing extra such as
  torch), `MemoryError` and out-of-memory errors are errors; an exception before the first
  completed step (the workload reports steps through `TrialContext.on_step`) is an error,
  after it a failure. The traceback is recorded either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class StepCallback(Protocol):
    """Called by a workload after every training step (progress display, heartbeats)."""

    def __call__(self, step: int, loss: float | None, step_time_ms: float) -> None: ...


def ignore_step(step: int, loss: float | None, step_time_ms: float) -> None:
    """Default step callback: progress is optional."""


@dataclass(frozen=True)
class TrialContext:
    """What a workload gets for one trial."""

    trial_id: int
    seed: int
    steps: int
    # The process environment as the trial sees it: mitigation and extra env vars applied.
    environ: Mapping[str, str]
    output_dir: Path
    rank: int = 0
    world_size: int = 1
    on_step: StepCallback = ignore_step


@dataclass
class WorkloadOutcome:
    """How one trial went, from the workload's point of view."""

    # Per-step wall times in milliseconds AFTER warm-up (device-synchronised on GPU).
    step_times_ms: list[float]
    warmup_steps: int
    # One loss per completed step (warm-up included); None where the loss was not finite.
    losses: list[float | None]
    failure: str | None = None
    failed_at_step: int | None = None
    # Set when the trial could not measure (setup failed, ...): the trial is an `error`.
    error: str | None = None
    # Settings observed inside the trial (e.g. torch's TF32 flags), proving a mitigation acted.
    observed: dict[str, object] = field(default_factory=dict)
    # What `step_times_ms` measure, e.g. "wall" (elapsed time) or "cpu" (process CPU time):
    # recorded per trial; the triage matrix warns when cells compared different clocks.
    step_clock: str | None = None


class TrialFailure(Exception):  # noqa: N818  # names the outcome, as the contract does
    """Raised by a workload: the failure under study fired (outcome `failed`)."""


class TrialError(Exception):
    """Raised by a workload: this trial could not measure anything (outcome `error`)."""


WorkloadEntry = Callable[[TrialContext], WorkloadOutcome]
# Optional up-front check of a workload's parameters; raises `WorkloadConfigError`.
WorkloadValidator = Callable[[Mapping[str, str]], None]

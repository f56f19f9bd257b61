"""How `run_trials` tells its caller about progress (the library itself never prints)."""

from __future__ import annotations

from typing import Protocol

from aorta.runner.models import RunRequest, TrialResult
from aorta.workloads.contract import StepCallback


class TrialReporter(Protocol):
    """Receives progress events from `run_trials`; every method must be cheap."""

    def trial_started(self, request: RunRequest, trial_id: int, seed: int) -> None:
        """A trial is about to run."""

    def step(self, trial_id: int, step: int, loss: float | None, step_time_ms: float) -> None:
        """The workload finished a step (not reported for trials run in a child process)."""

    def trial_finished(self, result: TrialResult) -> None:
        """A trial ended (passed or failed) and its JSON was written."""


class NullReporter:
    """A reporter that ignores everything."""

    def trial_started(self, request: RunRequest, trial_id: int, seed: int) -> None:
        """Ignore."""

    def step(self, trial_id: int, step: int, loss: float | None, step_time_ms: float) -> None:
        """Ignore."""

    def trial_finished(self, result: TrialResult) -> None:
        """Ignore."""


def step_hook(report: TrialReporter, trial_id: int) -> StepCallback:
    """A step callback that forwards to `report.step` for trial `trial_id`."""

    def on_step(step: int, loss: float | None, step_time_ms: float) -> None:
        report.step(trial_id, step, loss, step_time_ms)

    return on_step

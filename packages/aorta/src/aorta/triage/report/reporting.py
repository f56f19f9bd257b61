"""How `run_recipe` tells its caller about the matrix's progress (the library never prints).

A `MatrixReporter` is a `TrialReporter` (per-trial and per-step events from `run_trials`) that
also hears about the matrix as a whole: the plan before the first cell, and each cell's start
and end. The CLI turns these events into a live display or plain log lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aorta.runner.reporting import NullReporter, TrialReporter
from aorta.triage.analysis.cells import CellStats


@dataclass(frozen=True)
class CellPlan:
    """What one cell of the matrix will do in this invocation.

    `to_run` are the trial ids that will run now; the others of `0..trials-1` are already on
    disk (a resumed run) and count as done from the start.
    """

    name: str
    trials: int
    steps: int
    to_run: tuple[int, ...]

    @property
    def already_done(self) -> int:
        """Trials of this cell finished by an earlier invocation."""
        return self.trials - len(self.to_run)


class MatrixReporter(TrialReporter, Protocol):
    """Receives the matrix-level events of `run_recipe` on top of the per-trial ones."""

    def matrix_started(self, plan: Sequence[CellPlan]) -> None:
        """The cells about to run, in order (before the first environment probe)."""

    def cell_started(self, index: int) -> None:
        """Cell `plan[index]` is about to run its trials."""

    def cell_finished(self, index: int, stats: CellStats) -> None:
        """Cell `plan[index]` ended: aggregated, or errored as a whole (`stats.error`)."""


class NullMatrixReporter(NullReporter):
    """A matrix reporter that ignores everything."""

    def matrix_started(self, plan: Sequence[CellPlan]) -> None:
        """Ignore."""

    def cell_started(self, index: int) -> None:
        """Ignore."""

    def cell_finished(self, index: int, stats: CellStats) -> None:
        """Ignore."""

"""The adaptive rule over a run's trials: the looks replayed from the trials on disk.

A run with `adaptive` looks after every round: round `k` runs trial id `k` of every cell
still open (and of the baseline while any is), and look `k` judges each cell on its trials
with ids `0..k` (`aorta.triage.analysis.adaptive.decide`; a verdict, once reached, stands).
Because a trial's round is its id, the same looks can be replayed from the trial records
alone: the scheduler does so before each round (which cells still need trials, also on a
resume, where the earlier attempts' trials are read back from disk), and the report does so
for each cell's verdict and why it stopped. Errored trials count as no trial (they measured
nothing), so a cell with errors may end with fewer than `max_trials` counted trials.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from aorta.triage.analysis.adaptive import (
    CURED,
    DEFAULT_ADAPTIVE_RULE,
    NOT_CURED,
    OPEN,
    Counts,
    Decision,
    cells_needing_trials,
    decide,
)

__all__ = ["AdaptiveRule", "CellStop", "Outcomes", "stop_of"]

# A cell's counted trials: trial id -> failed (errored trials left out).
Outcomes = Mapping[int, bool]
StopKind = Literal["decided cured", "decided not cured", "reached max trials", "open"]
DECIDED_CURED: Final = "decided cured"
DECIDED_NOT_CURED: Final = "decided not cured"
REACHED_MAX: Final = "reached max trials"
STILL_OPEN: Final = "open"


def _counts(outcomes: Outcomes, look: int) -> Counts:
    """The counts a look sees: the trials with id <= `look`."""
    seen = [failed for trial_id, failed in outcomes.items() if trial_id <= look]
    return Counts(sum(seen), len(seen))


@dataclass
class AdaptiveRule:
    """The adaptive rule's state after `looks` looks (advance it with `advance`); `rule` is
    the recipe's `adaptive.rule` (`aorta.triage.analysis.adaptive.RULES`)."""

    max_trials: int
    alpha: float
    rule: str = DEFAULT_ADAPTIVE_RULE
    looks: int = 0
    decisions: dict[str, Decision] = field(default_factory=dict)

    def advance(self, baseline: Outcomes, cells: Mapping[str, Outcomes], looks: int) -> None:
        """Replay the looks `self.looks .. looks - 1` on the trials given."""
        for look in range(self.looks, looks):
            stands = {n: d for n, d in self.decisions.items() if d.verdict != OPEN}
            self.decisions = decide(
                _counts(baseline, look),
                {name: _counts(outcomes, look) for name, outcomes in cells.items()},
                stands,
                max_trials=self.max_trials,
                alpha=self.alpha,
                rule=self.rule,
            )
        self.looks = max(self.looks, looks)

    def needing(self, cells: Mapping[str, Outcomes]) -> list[str]:
        """The non-baseline cells that still need trials after the looks so far (before the
        first look: every cell)."""
        if self.looks == 0:
            return list(cells)
        counts = {name: Counts(0, len(outcomes)) for name, outcomes in cells.items()}
        return cells_needing_trials(self.decisions, counts, self.max_trials)


@dataclass(frozen=True)
class CellStop:
    """How a cell's adaptive trials ended: for matrix.md and matrix.json."""

    trials: int  # trials run (errored ones included)
    stop: StopKind
    reason: str  # the rule's words, e.g. "cured after 6 trials"
    p_value: float | None


def stop_of(decision: Decision | None, trials_run: int, max_trials: int) -> CellStop:
    """A cell's stop from its last decision (None: never looked at) and its trial count."""
    if decision is None:
        return CellStop(trials_run, STILL_OPEN, "no look yet", None)
    if decision.verdict == CURED:
        kind: StopKind = DECIDED_CURED
    elif decision.verdict == NOT_CURED:
        kind = DECIDED_NOT_CURED
    else:
        kind = REACHED_MAX if trials_run >= max_trials else STILL_OPEN
    return CellStop(trials_run, kind, decision.reason, decision.p_value)

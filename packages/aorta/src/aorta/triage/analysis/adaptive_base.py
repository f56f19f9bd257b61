"""What both adaptive rules share (pure logic): a cell's counts, a look's decision, and the
Holm step-down bookkeeping within a look.

An adaptive rule (`aorta.triage.analysis.adaptive` picks one) judges one open cell against
the baseline at a time, given two levels that the other cells' verdicts set, as Holm's
procedure does: with `m` cells and `r` of the others rejected, a p-value below
`alpha / (m - r)` is rejected whatever the rest do (the rejection level); with `k` others
kept, one at or above `alpha / (1 + k)` is kept (the keep level). `step_down` owns that
bookkeeping; a rule's `Judge` only says what its evidence supports at those levels.

A leaf (stats only): the recipe reads the rules' names and the default from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from aorta.triage.analysis.stats import fisher_p_value, holm_adjust

__all__ = [
    "ADAPTIVE_RULES",
    "CURED",
    "DEFAULT_ADAPTIVE_RULE",
    "NOT_CURED",
    "OPEN",
    "Counts",
    "Decision",
    "Judge",
    "cells_needing_trials",
    "fixed_verdicts",
    "step_down",
]

Verdict = Literal["cured", "not cured", "open"]
Holm = Literal["rejected", "kept", "unknown"]
CURED: Final = "cured"
NOT_CURED: Final = "not cured"
OPEN: Final = "open"
# The recipe's `adaptive.rule` values (`aorta.triage.analysis.adaptive.RULES` implements them).
ADAPTIVE_RULES: Final = ("curtailment", "alpha-spending")
DEFAULT_ADAPTIVE_RULE: Final = "curtailment"


@dataclass(frozen=True)
class Counts:
    """A cell's failed trials out of its counted trials (errors are not counted)."""

    failures: int
    trials: int

    def __post_init__(self) -> None:
        if not 0 <= self.failures <= self.trials:
            raise ValueError(f"failures must be within 0..{self.trials}, got {self.failures}")


@dataclass(frozen=True)
class Decision:
    """A cell's verdict and why, in words for matrix.md.

    `holm`: what the cell's hypothesis "no difference" counts as for the other cells' levels:
    `rejected` (passes its share of alpha on), `kept` (its p-value beats no level Holm could
    give it), or `unknown`.
    """

    verdict: Verdict
    reason: str
    p_value: float | None = None
    holm: Holm = "unknown"


class Judge(Protocol):
    """A rule's verdict on one open cell (with at least one trial, as has the baseline).

    `reject_level` and `keep_level` are the Holm levels `step_down` computed; `alpha` is the
    family-wise level itself.
    """

    def __call__(
        self,
        cell: Counts,
        baseline: Counts,
        *,
        max_trials: int,
        alpha: float,
        reject_level: float,
        keep_level: float,
    ) -> Decision: ...


def step_down(
    baseline: Counts,
    cells: Mapping[str, Counts],
    decided: Mapping[str, Decision],
    *,
    max_trials: int,
    alpha: float,
    judge: Judge,
) -> dict[str, Decision]:
    """Judge every cell not in `decided` (the verdicts of earlier looks, which stand).

    Step-down within the look, as Holm's procedure: each new verdict can move the others'
    levels, so after one the open cells are judged again, in the order given.
    """
    if max_trials < 1:
        raise ValueError(f"max_trials must be >= 1, got {max_trials}")
    result = {name: decision for name, decision in decided.items() if name in cells}
    m = len(cells)
    while True:
        changed = False
        for name, cell in cells.items():
            if name in result and result[name].verdict != OPEN:
                continue
            if cell.trials == 0 or baseline.trials == 0:
                result[name] = Decision(OPEN, "no trials yet")
                continue
            others = [d.holm for o, d in result.items() if o != name and d.verdict != OPEN]
            result[name] = judge(
                cell,
                baseline,
                max_trials=max_trials,
                alpha=alpha,
                reject_level=alpha / (m - others.count("rejected")),
                keep_level=alpha / (1 + others.count("kept")),
            )
            if result[name].verdict != OPEN:
                changed = True
                break
        if not changed:
            return result


def cells_needing_trials(
    decisions: Mapping[str, Decision], counts: Mapping[str, Counts], max_trials: int
) -> list[str]:
    """The open cells that may still run trials (fewer than `max_trials` counted)."""
    return [
        name
        for name, decision in decisions.items()
        if decision.verdict == OPEN and counts[name].trials < max_trials
    ]


def fixed_verdicts(
    baseline: Counts, cells: Mapping[str, Counts], alpha: float
) -> dict[str, Verdict]:
    """The fixed design's verdicts: cured when Holm-adjusted p < alpha and the rate dropped,
    `not cured` otherwise (the matrix's `—` label against everything else)."""
    names = list(cells)
    raw: list[float | None] = [
        fisher_p_value(cells[n].failures, cells[n].trials, baseline.failures, baseline.trials)
        for n in names
    ]
    adjusted = holm_adjust(raw)
    verdicts: dict[str, Verdict] = {}
    for name, p in zip(names, adjusted, strict=True):
        cell = cells[name]
        dropped = cell.failures * baseline.trials < baseline.failures * cell.trials
        verdicts[name] = CURED if p is not None and p < alpha and dropped else NOT_CURED
    return verdicts

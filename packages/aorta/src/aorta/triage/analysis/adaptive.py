"""Adaptive trials: decide each cell as soon as its evidence allows (pure logic).

After every round (one more trial for each open cell, and for the baseline while any cell is
open) `decide` judges the open cells; a decided cell gets no more trials. Verdicts:

- `cured`: the failure rate dropped and the cell's Fisher p-value against the baseline beats
  its group-sequential level (`aorta.triage.analysis.sequential`) at the cell's Holm share of alpha;
- `not cured`: it failed significantly *more* at that level, or a cure is out of reach: even
  if the cell passed every remaining trial up to `max_trials` and the baseline failed at the
  upper end of its 95 % Wilson interval, the final Fisher p-value would not beat alpha;
- `open`: neither yet; at `max_trials` an open cell stops with `max trials reached`.

Family-wise level (why repeated looks do not inflate false cures). Each non-baseline cell is
one hypothesis "no drop". The rule is the group-sequential Holm procedure of Maurer & Bretz
(2013, "Multiple testing in group sequential trials using graphical approaches", Statistics in
Biopharmaceutical Research 5(4):311-320): every hypothesis not yet rejected is tested with a
group-sequential boundary at level `alpha / m`, `m` the number of cells not yet *cured*; a cure
passes its level on to the rest (so `m` shrinks, step-down, also within one look). The
boundaries spend each cell's level over its looks (Lan-DeMets; O'Brien-Fleming-type by
default), so the chance that any cell of the matrix is falsely called cured, at any look,
stays at most `alpha`. Stopping a cell as `not cured` never rejects anything: it only costs
power, so it needs no share of alpha (futility stops are non-binding).

The fixed design's verdict for comparison (`fixed_verdicts`) is the matrix's own rule: Holm-
adjusted Fisher p < alpha and a lower failure rate means cured (the label `—`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from aorta.triage.analysis.sequential import nominal_levels
from aorta.triage.analysis.stats import fisher_p_value, holm_adjust, wilson_interval

__all__ = [
    "CURED",
    "NOT_CURED",
    "OPEN",
    "Counts",
    "Decision",
    "cells_needing_trials",
    "decide",
    "fixed_verdicts",
]

Verdict = Literal["cured", "not cured", "open"]
CURED: Final = "cured"
NOT_CURED: Final = "not cured"
OPEN: Final = "open"
DEFAULT_SPENDING: Final = "obrien-fleming"


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
    """A cell's verdict and why, in words for matrix.md."""

    verdict: Verdict
    reason: str
    p_value: float | None = None


def _best_case_p(cell: Counts, baseline: Counts, max_trials: int) -> float:
    """The final p-value if the cell passed every remaining trial and the baseline failed at
    the upper end of its 95 % Wilson interval over its remaining trials."""
    remaining = max_trials - baseline.trials
    upper = wilson_interval(baseline.failures, baseline.trials)[1] if baseline.trials else 1.0
    base_failures = baseline.failures + round(upper * remaining)
    return fisher_p_value(cell.failures, max_trials, base_failures, max_trials)


def _judge(
    cell: Counts,
    baseline: Counts,
    level: float,
    alpha: float,
    max_trials: int,
) -> Decision:
    """One open cell against the baseline at its current level."""
    if cell.trials == 0 or baseline.trials == 0:
        return Decision(OPEN, "no trials yet")
    p = fisher_p_value(cell.failures, cell.trials, baseline.failures, baseline.trials)
    rate, base = cell.failures / cell.trials, baseline.failures / baseline.trials
    if p <= level and rate < base:
        return Decision(CURED, f"cured after {cell.trials} trials", p)
    if p <= level and rate > base:
        return Decision(NOT_CURED, f"fails more after {cell.trials} trials", p)
    if _best_case_p(cell, baseline, max_trials) > alpha:
        return Decision(NOT_CURED, f"a cure out of reach after {cell.trials} trials", p)
    if cell.trials >= max_trials:
        return Decision(OPEN, f"max trials reached ({max_trials})", p)
    return Decision(OPEN, f"open after {cell.trials} trials", p)


def decide(
    baseline: Counts,
    cells: Mapping[str, Counts],
    decided: Mapping[str, Decision],
    *,
    max_trials: int,
    alpha: float,
    spending: str = DEFAULT_SPENDING,
) -> dict[str, Decision]:
    """Judge every cell not in `decided` (the verdicts of earlier looks, which stand).

    Step-down within the look: the cells are tested at `alpha / m` (`m` = cells not cured),
    and each new cure raises the level of the others, which are then judged again.
    """
    if max_trials < 1:
        raise ValueError(f"max_trials must be >= 1, got {max_trials}")
    result = {name: decision for name, decision in decided.items() if name in cells}
    while True:
        not_cured = [n for n in cells if result.get(n, Decision(OPEN, "")).verdict != CURED]
        share = alpha / max(1, len(not_cured))
        levels = nominal_levels(share, max_trials, spending)
        changed = False
        for name in not_cured:
            if name in result and result[name].verdict != OPEN:
                continue
            cell = cells[name]
            level = levels[min(cell.trials, max_trials) - 1] if cell.trials else 0.0
            judged = _judge(cell, baseline, level, alpha, max_trials)
            if judged.verdict == CURED:
                changed = True
            result[name] = judged
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

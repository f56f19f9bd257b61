"""Adaptive trials: decide each cell as soon as its evidence allows (pure logic).

After every round (one more trial for each open cell, and for the baseline while any cell is
open) `decide` judges the open cells; a decided cell gets no more trials. Verdicts:

- `cured`: the failure rate dropped and the cell's Fisher p-value against the baseline beats
  its group-sequential level (`aorta.triage.analysis.sequential`) at the cell's Holm share of alpha;
- `not cured`: it failed significantly *more* at that level, or a cure is out of reach: even
  if the cell passed every remaining trial up to `max_trials` and the baseline failed at the
  upper end of its 95 % Wilson interval, the final Fisher p-value would not beat alpha; or,
  from half of `max_trials` on, the cell is futile: its conditional power under the current
  trend (`conditional_power`, Lan & Wittes 1988; stochastic curtailment as in Jennison &
  Turnbull 2000, ch. 10) is below 10 %;
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

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
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
    "conditional_power",
    "decide",
    "fixed_verdicts",
]

Verdict = Literal["cured", "not cured", "open"]
CURED: Final = "cured"
NOT_CURED: Final = "not cured"
OPEN: Final = "open"
DEFAULT_SPENDING: Final = "obrien-fleming"
_NORMAL: Final = NormalDist()
# Futility by stochastic curtailment: a cell whose conditional power under its current trend
# is below 10 % stops as `not cured`, once it has half of its trials
# (before that the trend is mostly noise). Tuned on benchmarks/adaptive_trials.py.
FUTILITY_POWER: Final = 0.10
FUTILITY_MIN_FRACTION: Final = 0.5


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


def conditional_power(cell: Counts, baseline: Counts, max_trials: int, share: float) -> float:
    """The chance that the cell ends cured at `max_trials` if the current trend continues.

    The B-value formulation of Lan & Wittes (1988, "The B-value: a tool for monitoring data",
    Biometrics 44(2):579-585): with `Z` the pooled two-proportion z statistic of a drop (cell
    below baseline) at information fraction `t`, the current trend's drift is `Z / sqrt(t)`
    and `CP = 1 - Phi((c - Z sqrt(t) - drift (1 - t)) / sqrt(1 - t))`, `c` the fixed design's
    final two-sided critical value at the cell's Holm `share` of alpha.
    """
    n_c, n_b = cell.trials, baseline.trials
    t = min(n_c, n_b) / max_trials
    if t >= 1.0:
        return 0.0
    pooled = (cell.failures + baseline.failures) / (n_c + n_b)
    drop = baseline.failures / n_b - cell.failures / n_c
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n_c + 1.0 / n_b))
    # No spread (every trial failed, or none did): no trend to extrapolate.
    z = 0.0 if se == 0.0 else drop / se
    critical = _NORMAL.inv_cdf(1.0 - share / 2.0)
    b_value, drift = z * math.sqrt(t), z / math.sqrt(t)
    return 1.0 - _NORMAL.cdf((critical - b_value - drift * (1.0 - t)) / math.sqrt(1.0 - t))


def _futility(
    cell: Counts, baseline: Counts, alpha: float, max_trials: int, share: float
) -> str | None:
    """Why the cell cannot end cured (the reason for matrix.md), or None."""
    if _best_case_p(cell, baseline, max_trials) > alpha:
        return f"a cure out of reach after {cell.trials} trials"
    if (
        FUTILITY_MIN_FRACTION * max_trials <= cell.trials < max_trials
        and conditional_power(cell, baseline, max_trials, share) < FUTILITY_POWER
    ):
        return f"futile after {cell.trials} trials"
    return None


def _judge(
    cell: Counts,
    baseline: Counts,
    level: float,
    alpha: float,
    max_trials: int,
    share: float = 0.0,
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
    futile = _futility(cell, baseline, alpha, max_trials, share)
    if futile is not None:
        return Decision(NOT_CURED, futile, p)
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
            judged = _judge(cell, baseline, level, alpha, max_trials, share)
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

"""Adaptive trials: stop a cell once the fixed design's verdict is settled (pure logic).

After every round (one more trial for each open cell, and for the baseline while any cell is
open) `decide` judges the open cells; a decided cell gets no more trials. The rule predicts the
verdict the fixed design with `max_trials` trials per cell would reach (Holm-adjusted two-sided
Fisher p < alpha and a lower failure rate: the matrix's `—`), from the chance of every way the
remaining trials can go (`aorta.triage.analysis.curtailment`: the predictive probability,
Spiegelhalter, Freedman & Blackburn 1986; stochastic curtailment, Lan, Simon & Halperin 1982):

- `cured`: the chance that the cell's final p-value beats `alpha / (m - r)` with a drop is at
  least `1 - CURE_DOUBT` (at N = 20; `_per_look` scales it), from `CURE_MIN_TRIALS` trials on
  (`m` cells, `r` of the others rejected already: a final p below that level is rejected by
  Holm whatever the rest do, as long as those `r` rejections hold), or certain (deterministic
  curtailment: `verdict fixed`);
- `not cured`: it fails more (the same test with a rise), or the chance of a final cure
  below `alpha / (1 + k)` is at most `FUTILITY_CHANCE` (scaled alike; from
  `FUTILITY_MIN_FRACTION` of `max_trials` on, once the cell has failed at least once) or zero
  (a cure out of reach); `k` counts the others kept (no rejection likely either way): Holm
  tests a cell at `alpha / (m - r)` at best, and `r <= m - 1 - k`;
- `open`: neither yet; at `max_trials` a cell still open stops with `max trials reached`
  (its p-value lies between its two levels, and Holm rejects none of the cells left so).

With every trial run, each verdict is the fixed design's.

Why the guards: a cell that never failed looks futile only because the baseline has not
failed much yet either, and before a few trials a prediction rests on the prior more than on
the trials. The thresholds were chosen on `benchmarks/adaptive_trials.py`.

Family-wise level. A cell is called cured when the fixed design is predicted to cure it, so a
false cure needs either a false cure of the fixed design (Holm: at most alpha) or a wrong
prediction; the latter has no bound of its own and is measured: the benchmark states the
family-wise false `—` rate of both designs. Stopping a cell as `not cured` never claims a cure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from aorta.triage.analysis.curtailment import Forecast, forecast
from aorta.triage.analysis.stats import fisher_p_value, holm_adjust

__all__ = [
    "CURED",
    "NOT_CURED",
    "OPEN",
    "RULE",
    "Counts",
    "Decision",
    "cells_needing_trials",
    "decide",
    "fixed_verdicts",
]

Verdict = Literal["cured", "not cured", "open"]
Holm = Literal["rejected", "kept", "unknown"]
CURED: Final = "cured"
NOT_CURED: Final = "not cured"
OPEN: Final = "open"
RULE: Final = "predictive curtailment"  # matrix.json's `adaptive.rule`
# Chosen on benchmarks/adaptive_trials.py (N = 20, alpha = 0.05): the most trials saved while
# the verdicts still agree with the fixed design's in >= 95 % of the simulated matrices. The
# two chances of a wrong stop are for N = REFERENCE_TRIALS looks; with N looks each allows
# REFERENCE_TRIALS / N of it, so the chances summed over the looks stay about the same (without
# that, at N = 40 false cures doubled and agreement fell to 93 %).
REFERENCE_TRIALS: Final = 20
CURE_DOUBT: Final = 0.05  # a cure is claimed once at least 95 % likely
FUTILITY_CHANCE: Final = 0.06  # a cell stops as futile once a cure is at most 6 % likely
CURE_MIN_TRIALS: Final = 5
FUTILITY_MIN_FRACTION: Final = 0.15


def _per_look(chance: float, max_trials: int) -> float:
    """`chance` (a wrong stop's, at `REFERENCE_TRIALS` looks) for `max_trials` looks."""
    return min(0.5, chance * REFERENCE_TRIALS / max_trials)


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

    `holm`: what the rule expects the fixed design's Holm procedure to do with the cell's
    hypothesis "no difference": `rejected` (cured, or fails more), `kept` (its final p-value
    beats no level Holm could give it), or `unknown`; it sets the other cells' levels.
    """

    verdict: Verdict
    reason: str
    p_value: float | None = None
    holm: Holm = "unknown"


def _chance(outlook: Forecast, what: str, max_trials: int) -> str:
    """'a cure at 20 trials 97 % likely' (whole percent, never a rounded 0 or 100), or
    'verdict fixed' when no remaining outcome could change it."""
    if outlook.certain:
        return "verdict fixed"
    percent = min(99, max(1, round(100 * outlook.probability)))
    return f"{what} at {max_trials} trials {percent} % likely".lstrip()


def _likely(outlook: Forecast, trials: int, max_trials: int) -> bool:
    """Whether a claim (a rejection, which moves the family's levels) may be made now."""
    if outlook.certain:
        return outlook.probability > 0.5
    doubt = _per_look(CURE_DOUBT, max_trials)
    return trials >= min(CURE_MIN_TRIALS, max_trials) and outlook.probability >= 1.0 - doubt


Now = tuple[tuple[int, int], tuple[int, int]]  # (failures, trials) of the cell, the baseline


def _rejection(now: Now, max_trials: int, level: float, p: float) -> Decision | None:
    """`cured` or `fails more` when the final test is likely to reject at `level`."""
    trials = now[0][1]
    cure = forecast(*now, max_trials, level, "drop")
    if _likely(cure, trials, max_trials):
        reason = f"cured after {trials} trials ({_chance(cure, 'a cure', max_trials)})"
        return Decision(CURED, reason, p, "rejected")
    worse = forecast(*now, max_trials, level, "rise")
    if _likely(worse, trials, max_trials):
        reason = f"fails more after {trials} trials ({_chance(worse, '', max_trials)})"
        return Decision(NOT_CURED, reason, p, "rejected")
    return None


def _futility(now: Now, max_trials: int, level: float, p: float) -> Decision | None:
    """`not cured` when a final cure at `level` is out of reach or unlikely."""
    (failures, trials), _ = now
    chance = forecast(*now, max_trials, level, "drop")
    # Kept by Holm when neither side is likely to reject: a cell that may still fail
    # significantly more is not cured, but that rejection would raise the others' levels.
    rise = forecast(*now, max_trials, level, "rise")
    futile = _per_look(FUTILITY_CHANCE, max_trials)
    holm: Holm = "kept" if rise.probability <= futile else "unknown"
    if chance.certain and chance.probability < 0.5:
        return Decision(NOT_CURED, f"a cure out of reach after {trials} trials", p, holm)
    if (
        trials >= FUTILITY_MIN_FRACTION * max_trials
        and failures > 0
        and chance.probability <= futile
    ):
        reason = f"futile after {trials} trials ({_chance(chance, 'a cure', max_trials)})"
        return Decision(NOT_CURED, reason, p, holm)
    return None


def _judge(
    cell: Counts, baseline: Counts, max_trials: int, reject_level: float, keep_level: float
) -> Decision:
    """One open cell against the baseline: a final p-value below `reject_level` is rejected by
    Holm whatever the other cells do; one at or above `keep_level` is kept."""
    if cell.trials == 0 or baseline.trials == 0:
        return Decision(OPEN, "no trials yet")
    p = fisher_p_value(cell.failures, cell.trials, baseline.failures, baseline.trials)
    now = (cell.failures, cell.trials), (baseline.failures, baseline.trials)
    decision = _rejection(now, max_trials, reject_level, p) or _futility(
        now, max_trials, keep_level, p
    )
    if decision is not None:
        return decision
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
) -> dict[str, Decision]:
    """Judge every cell not in `decided` (the verdicts of earlier looks, which stand).

    Step-down within the look, as Holm's procedure: with `r` other cells rejected a final
    p-value below `alpha / (m - r)` is rejected whatever the rest do, and with `k` others kept
    one at or above `alpha / (1 + k)` is kept. Each new verdict can move the others' levels,
    so after one the open cells are judged again, in the order given.
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
            others = [d.holm for o, d in result.items() if o != name and d.verdict != OPEN]
            reject_level = alpha / (m - others.count("rejected"))
            keep_level = alpha / (1 + others.count("kept"))
            result[name] = _judge(cell, baseline, max_trials, reject_level, keep_level)
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

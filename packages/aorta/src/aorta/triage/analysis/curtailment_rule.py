"""The predictive-curtailment rule: stop a cell once the fixed design's verdict is settled.

The default adaptive rule (`adaptive: {rule: curtailment}`). It predicts the verdict the fixed
design with `max_trials` trials per cell would reach (Holm-adjusted two-sided Fisher
p < alpha and a lower failure rate: the matrix's `—`), from the chance of every way the
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

Family-wise level: measured, not guaranteed. A cell is called cured when the fixed design is
predicted to cure it, so a false cure needs either a false cure of the fixed design (Holm: at
most alpha) or a wrong prediction; the latter has no bound of its own and is measured: the
benchmark states the family-wise false `—` rate of both designs. Stopping a cell as
`not cured` never claims a cure. (`aorta.triage.analysis.spending_rule` is the rule with a
guaranteed bound.)
"""

from __future__ import annotations

from typing import Final

from aorta.triage.analysis.adaptive_base import CURED, NOT_CURED, OPEN, Counts, Decision, Holm
from aorta.triage.analysis.curtailment import Forecast, forecast
from aorta.triage.analysis.stats import fisher_p_value

__all__ = ["NAME", "judge"]

NAME: Final = "predictive curtailment"  # matrix.json's `adaptive.rule`
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


def judge(
    cell: Counts,
    baseline: Counts,
    *,
    max_trials: int,
    alpha: float,
    reject_level: float,
    keep_level: float,
) -> Decision:
    """One open cell against the baseline (`aorta.triage.analysis.adaptive_base.Judge`): a
    final p-value below `reject_level` is rejected by Holm whatever the other cells do; one at
    or above `keep_level` is kept. `alpha` enters through the two levels only."""
    del alpha  # the Holm levels carry it
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

"""The alpha-spending rule: decide each cell as soon as its evidence allows, with a guaranteed
family-wise bound on false cures over all the looks (`adaptive: {rule: alpha-spending}`).

Verdicts of one open cell at a look (`judge`):

- `cured`: the failure rate dropped and the cell's Fisher p-value against the baseline beats
  its group-sequential level (`aorta.triage.analysis.sequential`, Lan-DeMets spending,
  O'Brien-Fleming-type) at the cell's Holm share of alpha;
- `not cured`: it failed significantly *more* at that level, or a cure is out of reach: even
  if the cell passed every remaining trial up to `max_trials` and the baseline failed at the
  upper end of its 95 % Wilson interval, the final Fisher p-value would not beat alpha; or,
  from half of `max_trials` on, the cell is futile: its conditional power under the current
  trend (`conditional_power`, Lan & Wittes 1988; stochastic curtailment as in Jennison &
  Turnbull 2000, ch. 10) is below 10 %;
- `open`: neither yet; at `max_trials` an open cell stops with `max trials reached`.

Family-wise level: guaranteed (why repeated looks do not inflate false cures). Each
non-baseline cell is one hypothesis "no drop". The rule is the group-sequential Holm procedure
of Maurer & Bretz (2013, "Multiple testing in group sequential trials using graphical
approaches", Statistics in Biopharmaceutical Research 5(4):311-320): every hypothesis not yet
rejected is tested with a group-sequential boundary at level `alpha / m`, `m` the number of
cells not yet *cured*; a cure passes its level on to the rest (so `m` shrinks, step-down, also
within one look: `aorta.triage.analysis.adaptive_base.step_down`). The boundaries spend each
cell's level over its looks, so the chance that any cell of the matrix is falsely called
cured, at any look, stays at most `alpha` (under the normal approximation the boundaries are
computed with; the exact Fisher test is conservative beside it). Stopping a cell as
`not cured` never rejects anything: it only costs power, so it needs no share of alpha
(futility stops are non-binding), and a cell that fails more passes nothing on.

The price: the early looks' levels are strict, so clear cases stop later than under predictive
curtailment, and a p-value just under alpha at `max_trials` may miss the last look's level
(the fixed design would call it cured; this rule leaves it open).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Final

from aorta.triage.analysis.adaptive_base import CURED, NOT_CURED, OPEN, Counts, Decision
from aorta.triage.analysis.sequential import nominal_levels
from aorta.triage.analysis.stats import fisher_p_value, wilson_interval

__all__ = ["NAME", "SPENDING", "conditional_power", "judge"]

SPENDING: Final = "obrien-fleming"
NAME: Final = "alpha spending (O'Brien-Fleming-type)"  # matrix.json's `adaptive.rule`
_NORMAL: Final = NormalDist()
# Futility by stochastic curtailment: a cell whose conditional power under its current trend
# is below 10 % stops as `not cured`, once it has half of its trials
# (before that the trend is mostly noise). Tuned on benchmarks/adaptive_trials.py.
FUTILITY_POWER: Final = 0.10
FUTILITY_MIN_FRACTION: Final = 0.5


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


def judge(
    cell: Counts,
    baseline: Counts,
    *,
    max_trials: int,
    alpha: float,
    reject_level: float,
    keep_level: float,
) -> Decision:
    """One open cell against the baseline (`aorta.triage.analysis.adaptive_base.Judge`).

    `reject_level` is the cell's Holm share of alpha (alpha over the cells not yet cured),
    spent over the looks; `keep_level` plays no part (no futility stop passes anything on).
    """
    del keep_level  # futility is non-binding here: it moves no other cell's level
    p = fisher_p_value(cell.failures, cell.trials, baseline.failures, baseline.trials)
    level = nominal_levels(reject_level, max_trials, SPENDING)[min(cell.trials, max_trials) - 1]
    rate, base = cell.failures / cell.trials, baseline.failures / baseline.trials
    if p <= level and rate < base:
        return Decision(CURED, f"cured after {cell.trials} trials", p, "rejected")
    if p <= level and rate > base:
        return Decision(NOT_CURED, f"fails more after {cell.trials} trials", p)
    futile = _futility(cell, baseline, alpha, max_trials, reject_level)
    if futile is not None:
        return Decision(NOT_CURED, futile, p)
    if cell.trials >= max_trials:
        return Decision(OPEN, f"max trials reached ({max_trials})", p)
    return Decision(OPEN, f"open after {cell.trials} trials", p)

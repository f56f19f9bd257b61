"""The Confound column of the triage matrix: labels that say only what the evidence supports.

A mitigation that removes a numeric failure often also slows execution, and a slower run may
merely avoid the race or timing window that caused the failure. So each cell's step time is
compared with the baseline cell's, and its failure count with the baseline's, and the label says
what each comparison shows (issue 12: a `0/4 vs 2/4` cell must not read "trust this cell"; issue
22: a matrix is many tests, a baseline that never failed cannot show a cure, and a label shows
every open question, not only the first).

Rules, first matching rule wins; one early return each in `classify`:

- `error`: the whole cell failed (its row is kept so the matrix is complete);
- `not independent: <why>`: the cell's trials, or the baseline's, are copies of one run
  (`aorta.triage.analysis.independence`), e.g. `not independent: fails identically in every trial
  (deterministic)`; no failure-rate verdict can be drawn from copies;
- `(baseline)`: the baseline cell;
- `n/a`: nothing to judge by (no failure-rate comparison: e.g. the baseline errored);
- otherwise a label of up to two parts, `<speed>; <failures>`.

The speed part, from the step-time ratio to the baseline and its bootstrap interval, is left out
when the step times raise no question:

- `speed (+N%)`: the interval lies entirely above the threshold;
- `speed? (+N%, 95% CI a-b)`: the interval straddles the threshold (a slowdown past it is
  possible, not shown) and it matters: the point is past it or the failure rate changed;
  `speed? (+N%, no CI)` when the point is past it and there is no interval;
- `faster (-N%)`: the interval lies entirely below 1 / threshold;
- `speed n/a`: no step-time ratio (a side recorded no step times).

The failures part compares failure counts by a two-sided Fisher exact test whose p-value is
Holm-adjusted across the matrix's non-baseline cells (`stats.holm_adjust`), so `alpha` is the
family-wise level: it bounds the chance that *any* cell of a matrix falsely claims a significant
drop (`—`, `drop significant`) or rise (`fails more`):

- `—` (alone) / `drop significant (p=...)` (after a speed part): the failure rate dropped and
  the adjusted p < alpha; alone it means "trust this cell";
- `fails more (p=...)`: the failure rate rose and the adjusted p < alpha;
- `no failure to cure`: the baseline had no failure, so no cell can show a cure;
- `no effect`: the data rule out a cure: the upper end of the interval (at the matrix's
  confidence) of the drop in failure rate, baseline minus cell (`stats.rate_difference_interval`),
  is below `smallest_cure` (default half) of the baseline's failure rate;
- `inconclusive (p=..., ~N trials per cell needed)` (alone) / `drop inconclusive (...)` (after a
  speed part): neither shown nor ruled out; N trials per cell would detect, at 80 % power and
  the Bonferroni level alpha / cells, a drop of the observed size or of `smallest_cure`, whichever
  is larger (`matrix`).

The ratio and its interval are computed from the same quantity, the trials' mean step times
(`matrix`): a point ratio from pooled steps could disagree with an interval from trial means.
Without an interval (fewer than 2 timed trials on a side) the point ratio decides alone and a
speed label carries `no CI`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "BASELINE",
    "DEFAULT_ALPHA",
    "DEFAULT_CONFOUND_THRESHOLD",
    "DEFAULT_SMALLEST_CURE",
    "ERROR",
    "NOT_AVAILABLE",
    "NOT_INDEPENDENT",
    "NO_EFFECT",
    "NO_FAILURE_TO_CURE",
    "TRUSTED",
    "Evidence",
    "alpha_problem",
    "classify",
    "speed_label",
    "threshold_problem",
]

BASELINE = "(baseline)"
TRUSTED = "\u2014"  # em dash: the failure rate dropped significantly, without a speed cost
NO_EFFECT = "no effect"
NO_FAILURE_TO_CURE = "no failure to cure"  # the baseline never failed
ERROR = "error"
NOT_AVAILABLE = "n/a"  # no failure-rate comparison to judge by
NOT_INDEPENDENT = "not independent"  # the trials are copies of one run: no rate to judge by

# The one home of the defaults; the recipe, flag mode, the CLI and re-analysis read them here.
DEFAULT_CONFOUND_THRESHOLD = 1.15
DEFAULT_ALPHA = 0.05
# The smallest cure worth finding, as a fraction of the baseline's failure rate: `no effect`
# needs the data to rule out a mitigation that removes half the baseline's failures.
DEFAULT_SMALLEST_CURE = 0.5


def threshold_problem(value: object) -> str | None:
    """Why `value` cannot be a confound threshold, or None if it can.

    A finite number >= 1.0 (ints accepted, booleans not): below 1.0 a cell *faster* than the
    baseline would be flagged as a speed confound, which is meaningless. Every place that takes
    a threshold (recipe, flags, `aorta triage matrix --confound-threshold`) checks it here.
    """
    problem = "expected a finite number >= 1.0 (step-time ratio)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return problem
    try:  # a 400-digit integer is beyond any float: OverflowError, not a crash
        as_float = float(value)
    except OverflowError:
        return problem
    if not math.isfinite(as_float) or as_float < 1.0:
        return problem
    return None


def alpha_problem(value: object) -> str | None:
    """Why `value` cannot be a significance level, or None if it can (0 < alpha < 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        return "expected a significance level strictly between 0 and 1 (e.g. 0.05)"
    return None


def _percent(ratio: float) -> int:
    # Half away from zero rather than banker's rounding: a 12.5 % slowdown reads +13 %.
    pct = (ratio - 1.0) * 100.0
    return int(math.copysign(math.floor(abs(pct) + 0.5), pct))


def speed_label(ratio: float) -> str:
    """`speed (+N%)` with N = (ratio - 1) * 100 rounded half away from zero."""
    return f"speed ({_percent(ratio):+d}%)"


def _p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.2g}" if p < 0.01 else f"p={p:.2f}"


@dataclass(frozen=True)
class Evidence:
    """What one non-baseline cell's label is judged from."""

    ratio: float | None  # mean of trial means, cell over baseline
    ratio_ci: tuple[float, float] | None  # bootstrap interval of the same ratio
    confidence: float
    nan_rate: float | None
    baseline_nan_rate: float | None
    p_adjusted: float | None  # Fisher exact p, Holm-adjusted across the matrix's cells
    drop_upper: float | None  # upper end of the interval of baseline rate minus cell rate
    trials_needed: int | None  # per cell, to detect a cure worth finding (see module docstring)
    # Why the cell's trials (or the baseline's) are not independent samples (copies of one
    # run, `aorta.triage.analysis.independence`); None: they are.
    not_independent: str | None = None


def _speed(evidence: Evidence, threshold: float) -> str | None:
    ratio, ci = evidence.ratio, evidence.ratio_ci
    if ratio is None or not math.isfinite(ratio):
        return "speed n/a"
    if ci is None:
        return f"speed? ({_percent(ratio):+d}%, no CI)" if ratio > threshold else None
    low, high = ci
    if low > threshold:
        return speed_label(ratio)
    if high > threshold and (ratio > threshold or evidence.nan_rate != evidence.baseline_nan_rate):
        # A slowdown past the threshold cannot be ruled out, and it matters: the point is past
        # it, or the failure rate changed (it might be a slower iteration's doing).
        return f"speed? ({_percent(ratio):+d}%, {evidence.confidence:.0%} CI {low:.2f}-{high:.2f})"
    if high < 1.0 / threshold:
        return f"faster ({_percent(ratio):+d}%)"
    return None


@dataclass(frozen=True)
class _Failures:
    """What the failure counts say, worded alone and after a speed part."""

    alone: str
    after_speed: str


def _failures(evidence: Evidence, alpha: float, smallest_cure: float) -> _Failures | None:
    rate, base, p = evidence.nan_rate, evidence.baseline_nan_rate, evidence.p_adjusted
    if rate is None or base is None or p is None:
        return None
    if rate < base and p < alpha:
        # Alone, the em dash means "trust it"; beside a speed question it cannot.
        return _Failures(TRUSTED, f"drop significant ({_p(p)})")
    if rate > base and p < alpha:
        return _Failures(f"fails more ({_p(p)})", f"fails more ({_p(p)})")
    if base == 0.0:
        return _Failures(NO_FAILURE_TO_CURE, NO_FAILURE_TO_CURE)
    if evidence.drop_upper is not None and evidence.drop_upper < smallest_cure * base:
        return _Failures(NO_EFFECT, NO_EFFECT)
    needed = f", ~{evidence.trials_needed} trials per cell needed" if evidence.trials_needed else ""
    return _Failures(f"inconclusive ({_p(p)}{needed})", f"drop inconclusive ({_p(p)}{needed})")


def classify(
    *,
    is_baseline: bool,
    error: str | None,
    evidence: Evidence,
    threshold: float,
    alpha: float,
    smallest_cure: float = DEFAULT_SMALLEST_CURE,
) -> str:
    """The Confound label of one cell (the rules in the module docstring, in their order)."""
    if error is not None:
        return ERROR
    if evidence.not_independent is not None:
        return f"{NOT_INDEPENDENT}: {evidence.not_independent}"
    if is_baseline:
        return BASELINE
    failures = _failures(evidence, alpha, smallest_cure)
    if failures is None:
        return NOT_AVAILABLE
    speed = _speed(evidence, threshold)
    if speed is None:
        return failures.alone
    return f"{speed}; {failures.after_speed}"

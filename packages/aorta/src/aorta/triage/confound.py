"""The Confound column of the triage matrix: labels that say only what the evidence supports.

A mitigation that removes a numeric failure often also slows execution, and a slower run may
merely avoid the race or timing window that caused the failure. So each cell's step time is
compared with the baseline cell's, and its failure count with the baseline's. The spec's labels
are kept, but each one now needs evidence (issue 12: a `0/4 vs 2/4` cell must not read "trust
this cell"):

Labels, first matching rule wins:

- `error`: the whole cell failed (its row is kept so the matrix is complete);
- `not independent: <why>`: the cell's trials, or the baseline's, are copies of one run
  (`aorta.triage.independence`), e.g. `not independent: fails identically in every trial
  (deterministic)`; no failure-rate verdict can be drawn from copies;
- `(baseline)`: the baseline cell;
- `n/a`: no step-time ratio to judge by (baseline or cell without step times);
- `speed (+N%)`: the ratio's bootstrap interval lies entirely above the threshold;
- `speed? (+N%, 95% CI a-b)`: the interval straddles the threshold (a slowdown past it is
  possible, not shown) and it matters: the point is past it or the failure rate changed;
  `speed? (+N%, no CI)` when the point is past it and there is no interval;
- `faster (-N%)`: the interval lies entirely below 1 / threshold;
- `—`: speed within the threshold, failure rate dropped significantly (Fisher p < alpha);
- `inconclusive (p=..., ~N trials per cell needed)`: it dropped, not significantly;
- `fails more (p=...)`: the failure rate rose significantly;
- `no effect`: speed within the threshold and the failure rate did not drop.

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
    "ERROR",
    "NOT_AVAILABLE",
    "NOT_INDEPENDENT",
    "NO_EFFECT",
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
ERROR = "error"
NOT_AVAILABLE = "n/a"  # no ratio to judge by
NOT_INDEPENDENT = "not independent"  # the trials are copies of one run: no rate to judge by

# The one home of the defaults; the recipe, flag mode, the CLI and re-analysis read them here.
DEFAULT_CONFOUND_THRESHOLD = 1.15
DEFAULT_ALPHA = 0.05


def threshold_problem(value: object) -> str | None:
    """Why `value` cannot be a confound threshold, or None if it can.

    A finite number >= 1.0 (ints accepted, booleans not): below 1.0 a cell *faster* than the
    baseline would be flagged as a speed confound, which is meaningless. Every place that takes
    a threshold (recipe, flags, `aorta triage matrix --confound-threshold`) checks it here.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 1.0
    ):
        return "expected a finite number >= 1.0 (step-time ratio)"
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
    fisher_p: float | None
    trials_needed: int | None  # per cell, to detect the observed rate difference at alpha
    # Why the cell's trials (or the baseline's) are not independent samples (copies of one
    # run, `aorta.triage.independence`); None: they are.
    not_independent: str | None = None


def _speed(evidence: Evidence, threshold: float) -> str | None:
    ratio, ci = evidence.ratio, evidence.ratio_ci
    assert ratio is not None  # checked by the caller
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


def classify(  # noqa: PLR0911 - one return per row of the rule table reads best
    *,
    is_baseline: bool,
    error: str | None,
    evidence: Evidence,
    threshold: float,
    alpha: float,
) -> str:
    """The Confound label of one cell (the rule table in the module docstring)."""
    if error is not None:
        return ERROR
    if evidence.not_independent is not None:
        return f"{NOT_INDEPENDENT}: {evidence.not_independent}"
    if is_baseline:
        return BASELINE
    if evidence.ratio is None or not math.isfinite(evidence.ratio):
        return NOT_AVAILABLE
    speed = _speed(evidence, threshold)
    if speed is not None:
        return speed
    rate, base, p = evidence.nan_rate, evidence.baseline_nan_rate, evidence.fisher_p
    if rate is None or base is None or p is None:
        return NOT_AVAILABLE
    if rate < base:
        if p < alpha:
            return TRUSTED
        needed = (
            f", ~{evidence.trials_needed} trials per cell needed" if evidence.trials_needed else ""
        )
        return f"inconclusive ({_p(p)}{needed})"
    if rate > base and p < alpha:
        return f"fails more ({_p(p)})"
    return NO_EFFECT

"""Speed-confound detection: the one Confound column of the triage matrix.

A mitigation that removes a numeric failure often also slows execution, and a slower run may
merely avoid the race or timing window that caused the failure. So each cell's step time is
compared with the baseline cell's and the cell is labelled, exactly per the spec's table:

| label          | when                                                                  |
|----------------|-----------------------------------------------------------------------|
| `error`        | the whole cell failed (its row is kept so the matrix is complete)      |
| `(baseline)`   | the baseline cell                                                     |
| `speed (+N%)`  | `ratio > threshold` (may suppress the failure via slower iteration)    |
| `no effect`    | `ratio <= threshold` and `nan_rate >= baseline_nan_rate`              |
| `—`            | `ratio <= threshold` and `nan_rate < baseline_nan_rate` (trust it)    |

The spec's table does not cover a missing ratio (baseline cell errored or recorded no step times,
or this cell recorded none): every non-error, non-baseline rule needs the ratio, so such a cell is
labelled `n/a` rather than guessed into one of the rules. Likewise `n/a` when the ratio is within
the threshold but a failure rate is unknown.
"""

from __future__ import annotations

import math

__all__ = [
    "BASELINE",
    "DEFAULT_CONFOUND_THRESHOLD",
    "ERROR",
    "NOT_AVAILABLE",
    "NO_EFFECT",
    "TRUSTED",
    "classify",
    "speed_label",
    "threshold_problem",
]

BASELINE = "(baseline)"
TRUSTED = "\u2014"  # em dash: works without a speed cost
NO_EFFECT = "no effect"
ERROR = "error"
NOT_AVAILABLE = "n/a"  # not in the spec's table: no ratio to judge by (documented above)

# The one home of the threshold's default; the recipe, flag mode, the CLI and re-analysis
# all read it from here.
DEFAULT_CONFOUND_THRESHOLD = 1.15


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


def speed_label(ratio: float) -> str:
    """`speed (+N%)` with N = (ratio - 1) * 100 rounded half away from zero.

    Half-up rather than Python's banker's `round`, so that e.g. a 12.5 % slowdown reads +13 %,
    as a reader would round it.
    """
    pct = (ratio - 1.0) * 100.0
    n = int(math.copysign(math.floor(abs(pct) + 0.5), pct))
    return f"speed ({n:+d}%)"


def classify(  # noqa: PLR0911 - one return per row of the spec's rule table reads best
    *,
    is_baseline: bool,
    error: str | None,
    ratio: float | None,
    nan_rate: float | None,
    baseline_nan_rate: float | None,
    threshold: float,
) -> str:
    """The Confound label of one cell (see the module docstring for the rules).

    `ratio` is `cell mean step time / baseline mean step time`; `nan_rate` and
    `baseline_nan_rate` are failure fractions. Precedence: `error` first (an errored baseline is
    still `error`), then `(baseline)`, then the speed rule (which needs only the ratio), then the
    failure-rate rules. A ratio exactly at the threshold is not a speed confound (`>` is strict).
    """
    if error is not None:
        return ERROR
    if is_baseline:
        return BASELINE
    if ratio is None or not math.isfinite(ratio):
        return NOT_AVAILABLE
    if ratio > threshold:
        return speed_label(ratio)
    if nan_rate is None or baseline_nan_rate is None:
        return NOT_AVAILABLE
    if nan_rate >= baseline_nan_rate:
        return NO_EFFECT
    return TRUSTED

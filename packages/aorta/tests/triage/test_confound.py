"""`analysis.confound.classify`: labels that follow the evidence, boundaries included."""

from __future__ import annotations

import pytest

from aorta.triage.analysis.confound import (
    Evidence,
    alpha_problem,
    classify,
    speed_label,
    threshold_problem,
)


def _classify(
    ratio: float | None,
    ci: tuple[float, float] | None = None,
    *,
    nan_rate: float | None = 0.0,
    baseline_nan_rate: float | None = 0.5,
    p: float | None = 0.001,
    drop_upper: float | None = 0.9,
    needed: int | None = None,
    is_baseline: bool = False,
    error: str | None = None,
    threshold: float = 1.15,
    alpha: float = 0.05,
    smallest_cure: float = 0.5,
) -> str:
    # By default the interval is a tight one around the point, and the interval of the drop
    # is wide (it rules nothing out).
    interval = ci if ci is not None or ratio is None else (ratio * 0.99, ratio * 1.01)
    return classify(
        is_baseline=is_baseline,
        error=error,
        evidence=Evidence(
            ratio=ratio,
            ratio_ci=interval,
            confidence=0.95,
            nan_rate=nan_rate,
            baseline_nan_rate=baseline_nan_rate,
            p_adjusted=p,
            drop_upper=drop_upper,
            trials_needed=needed,
        ),
        threshold=threshold,
        alpha=alpha,
        smallest_cure=smallest_cure,
    )


def test_a_slower_cell_says_so_and_what_its_failures_show() -> None:
    assert _classify(1.25, (1.2, 1.3)) == "speed (+25%); drop significant (p=0.001)"
    assert _classify(1.25, (1.2, 1.3), nan_rate=0.5, p=1.0, drop_upper=0.1) == (
        "speed (+25%); no effect"
    )


def test_an_interval_straddling_the_threshold_says_so_and_keeps_the_failure_verdict() -> None:
    assert _classify(1.17, (0.98, 1.36)) == (
        "speed? (+17%, 95% CI 0.98-1.36); drop significant (p=0.001)"
    )
    # The example: a wide speed interval no longer hides an open failure verdict.
    assert _classify(1.28, (0.98, 1.78), p=0.33, needed=15) == (
        "speed? (+28%, 95% CI 0.98-1.78); drop inconclusive (p=0.33, ~15 trials per cell needed)"
    )
    # Within the threshold at the point, but the rate dropped: a slowdown cannot be ruled out.
    assert _classify(1.05, (0.98, 1.36), p=0.2, needed=9) == (
        "speed? (+5%, 95% CI 0.98-1.36); drop inconclusive (p=0.20, ~9 trials per cell needed)"
    )
    # Within the threshold and no change in the failure rate: only the failure verdict.
    assert _classify(1.05, (0.98, 1.36), nan_rate=0.5, p=1.0, drop_upper=0.2) == "no effect"
    # No interval (too few timed trials): only the point, and the label says there is no CI.
    assert (
        classify(
            is_baseline=False,
            error=None,
            evidence=Evidence(1.3, None, 0.95, 0.0, 0.5, 0.001, 0.9, None),
            threshold=1.15,
            alpha=0.05,
        )
        == "speed? (+30%, no CI); drop significant (p=0.001)"
    )


def test_a_significant_drop_without_speed_cost_is_trusted() -> None:
    assert _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.5, p=0.01) == "\u2014"


def test_the_label_judges_by_the_adjusted_p_against_the_family_wise_alpha() -> None:
    # The matrix passes Holm-adjusted p-values; at or above alpha nothing is shown.
    assert _classify(1.0, p=0.049) == "\u2014"
    assert _classify(1.0, p=0.05, needed=9).startswith("inconclusive (p=0.05,")
    assert _classify(1.0, nan_rate=0.9, baseline_nan_rate=0.1, p=0.05, needed=9).startswith(
        "inconclusive (p=0.05,"
    )


def test_a_drop_that_is_not_significant_is_inconclusive_with_the_trials_needed() -> None:
    # The example: 0/4 vs 2/4, Fisher p = 0.43.
    label = _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.5, p=0.4286, needed=15)
    assert label == "inconclusive (p=0.43, ~15 trials per cell needed)"
    assert _classify(1.0, p=0.004, alpha=0.001, needed=9) == (
        "inconclusive (p=0.004, ~9 trials per cell needed)"
    )
    assert _classify(1.0, p=0.5, needed=None) == "inconclusive (p=0.50)"


def test_no_effect_only_where_the_interval_of_the_drop_rules_out_a_cure() -> None:
    # Baseline 50 %: a cure worth finding removes half of it, 25 points.
    same = {"nan_rate": 0.5, "baseline_nan_rate": 0.5, "p": 1.0, "needed": 31}
    assert _classify(1.0, drop_upper=0.24, **same) == "no effect"
    assert _classify(1.0, drop_upper=0.25, **same) == (
        "inconclusive (p=1.00, ~31 trials per cell needed)"
    )
    assert _classify(1.0, drop_upper=None, **same).startswith("inconclusive (")
    # The size of the cure that matters is a parameter.
    assert _classify(1.0, drop_upper=0.24, smallest_cure=0.4, **same).startswith("inconclusive")
    # A rate that rose, not significantly, still reads `no effect` once a cure is ruled out.
    assert _classify(1.0, nan_rate=0.75, baseline_nan_rate=0.5, p=0.6, drop_upper=0.1) == (
        "no effect"
    )


def test_failing_more_significantly_says_so() -> None:
    assert _classify(1.0, nan_rate=0.9, baseline_nan_rate=0.1, p=0.0004) == "fails more (p<0.001)"
    assert _classify(1.3, (1.2, 1.4), nan_rate=0.9, baseline_nan_rate=0.1, p=0.0004) == (
        "speed (+30%); fails more (p<0.001)"
    )


def test_a_baseline_that_never_failed_leaves_no_failure_to_cure() -> None:
    never = {"baseline_nan_rate": 0.0, "p": 1.0, "drop_upper": 0.0}
    assert _classify(1.0, nan_rate=0.0, **never) == "no failure to cure"
    assert _classify(1.0, nan_rate=0.25, baseline_nan_rate=0.0, p=0.47) == "no failure to cure"
    # Speed labels still apply, and the failure verdict follows them.
    assert _classify(1.3, (1.2, 1.4), nan_rate=0.0, **never) == "speed (+30%); no failure to cure"
    assert _classify(0.7, (0.65, 0.75), nan_rate=0.0, **never) == (
        "faster (-30%); no failure to cure"
    )
    # A cell that fails significantly more than a baseline that never failed says that.
    assert _classify(1.0, nan_rate=0.9, baseline_nan_rate=0.0, p=0.001) == "fails more (p=0.001)"


def test_a_cell_faster_beyond_the_threshold_says_faster_and_what_its_failures_show() -> None:
    assert _classify(0.7, (0.65, 0.75)) == "faster (-30%); drop significant (p=0.001)"
    # Not beyond 1 / threshold for the whole interval: judged on failures alone.
    assert _classify(0.9, (0.8, 0.95), p=0.01) == "\u2014"


def test_ratio_exactly_at_threshold_is_not_a_speed_confound() -> None:
    assert _classify(1.15, (1.15, 1.15), p=0.01) == "\u2014"
    assert _classify(1.1501, (1.1501, 1.1501)).startswith("speed (+15%); ")


def test_threshold_is_configurable() -> None:
    assert _classify(1.10, (1.08, 1.12), threshold=1.05).startswith("speed (+10%); ")
    assert _classify(1.10, (1.08, 1.12), threshold=1.20) == "\u2014"


def test_baseline_error_and_missing_values() -> None:
    assert _classify(1.0, is_baseline=True) == "(baseline)"
    assert _classify(None, error="boom", is_baseline=True) == "error"
    assert _classify(1.5, error="boom") == "error"
    # No step-time ratio: the failure verdict still shows, and says speed is unknown.
    assert _classify(None) == "speed n/a; drop significant (p=0.001)"
    assert _classify(float("nan"), nan_rate=0.5, p=1.0, drop_upper=0.1) == "speed n/a; no effect"
    # No failure-rate comparison: nothing to judge by.
    assert _classify(1.0, nan_rate=None) == "n/a"
    assert _classify(1.0, p=None) == "n/a"
    assert _classify(None, p=None) == "n/a"


@pytest.mark.parametrize(
    ("ratio", "label"),
    [
        (1.25, "speed (+25%)"),
        (1.26, "speed (+26%)"),
        (1.125, "speed (+13%)"),  # half rounds up, not to even
        (2.0, "speed (+100%)"),
        (1.001, "speed (+0%)"),
    ],
)
def test_speed_label_rounding(ratio: float, label: str) -> None:
    assert speed_label(ratio) == label


def test_threshold_and_alpha_checks() -> None:
    assert threshold_problem(1.0) is None and threshold_problem(2) is None
    for bad in (0.99, -1, float("inf"), float("nan"), True, "1.2"):
        assert threshold_problem(bad) == "expected a finite number >= 1.0 (step-time ratio)"
    assert alpha_problem(0.05) is None
    for bad in (0, 1, 1.5, -0.1, True, float("nan")):
        assert alpha_problem(bad) is not None

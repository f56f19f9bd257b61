"""`aorta.triage.confound.classify`: labels that follow the evidence, boundaries included."""

from __future__ import annotations

import pytest

from aorta.triage.confound import Evidence, alpha_problem, classify, speed_label, threshold_problem


def _classify(
    ratio: float | None,
    ci: tuple[float, float] | None = None,
    *,
    nan_rate: float | None = 0.0,
    baseline_nan_rate: float | None = 0.5,
    p: float | None = 0.001,
    needed: int | None = None,
    is_baseline: bool = False,
    error: str | None = None,
    threshold: float = 1.15,
    alpha: float = 0.05,
) -> str:
    # By default the interval is a tight one around the point.
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
            fisher_p=p,
            trials_needed=needed,
        ),
        threshold=threshold,
        alpha=alpha,
    )


def test_a_cell_at_1_25x_with_the_interval_above_the_threshold_shows_speed() -> None:
    assert _classify(1.25, (1.2, 1.3)) == "speed (+25%)"


def test_an_interval_straddling_the_threshold_says_so() -> None:
    assert _classify(1.17, (0.98, 1.36)) == "speed? (+17%, 95% CI 0.98-1.36)"
    # Within the threshold at the point, but the rate dropped: a slowdown cannot be ruled out.
    assert _classify(1.05, (0.98, 1.36)) == "speed? (+5%, 95% CI 0.98-1.36)"
    # Within the threshold and no change in the failure rate: nothing to explain away.
    assert _classify(1.05, (0.98, 1.36), nan_rate=0.5) == "no effect"
    # No interval (too few timed trials): only the point, and the label says there is no CI.
    assert (
        classify(
            is_baseline=False,
            error=None,
            evidence=Evidence(1.3, None, 0.95, 0.0, 0.5, 0.001, None),
            threshold=1.15,
            alpha=0.05,
        )
        == "speed? (+30%, no CI)"
    )


def test_a_significant_drop_without_speed_cost_is_trusted() -> None:
    assert _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.5, p=0.01) == "\u2014"


def test_a_drop_that_is_not_significant_is_inconclusive_with_the_trials_needed() -> None:
    # The example: 0/4 vs 2/4, Fisher p = 0.43.
    label = _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.5, p=0.4286, needed=15)
    assert label == "inconclusive (p=0.43, ~15 trials per cell needed)"
    assert _classify(1.0, p=0.05, alpha=0.05, needed=9).startswith("inconclusive (p=0.05,")
    assert _classify(1.0, p=0.004, alpha=0.001, needed=9) == (
        "inconclusive (p=0.004, ~9 trials per cell needed)"
    )


def test_failing_more_significantly_says_so_and_otherwise_no_effect() -> None:
    assert _classify(1.0, nan_rate=0.9, baseline_nan_rate=0.1, p=0.0004) == "fails more (p<0.001)"
    assert _classify(1.0, nan_rate=0.75, baseline_nan_rate=0.5, p=0.6) == "no effect"
    assert _classify(1.0, nan_rate=0.5, baseline_nan_rate=0.5, p=1.0) == "no effect"
    assert _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.0, p=1.0) == "no effect"


def test_a_cell_faster_beyond_the_threshold_says_faster() -> None:
    assert _classify(0.7, (0.65, 0.75)) == "faster (-30%)"
    # Not beyond 1 / threshold for the whole interval: judged on failures instead.
    assert _classify(0.9, (0.8, 0.95), p=0.01) == "\u2014"


def test_ratio_exactly_at_threshold_is_not_a_speed_confound() -> None:
    assert _classify(1.15, (1.15, 1.15), p=0.01) == "\u2014"
    assert _classify(1.1501, (1.1501, 1.1501)) == "speed (+15%)"


def test_threshold_is_configurable() -> None:
    assert _classify(1.10, (1.08, 1.12), threshold=1.05) == "speed (+10%)"
    assert _classify(1.10, (1.08, 1.12), threshold=1.20) == "\u2014"


def test_baseline_error_and_missing_values() -> None:
    assert _classify(1.0, is_baseline=True) == "(baseline)"
    assert _classify(None, error="boom", is_baseline=True) == "error"
    assert _classify(1.5, error="boom") == "error"
    assert _classify(None) == "n/a"
    assert _classify(float("nan")) == "n/a"
    assert _classify(1.0, nan_rate=None) == "n/a"
    assert _classify(1.0, p=None) == "n/a"


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

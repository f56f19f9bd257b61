"""`aorta.triage.confound.classify`: the spec's Confound rules, boundaries included."""

from __future__ import annotations

import pytest

from aorta.triage.confound import classify, speed_label


def _classify(
    ratio: float | None,
    nan_rate: float | None = 0.0,
    baseline_nan_rate: float | None = 0.5,
    *,
    is_baseline: bool = False,
    error: str | None = None,
    threshold: float = 1.15,
) -> str:
    return classify(
        is_baseline=is_baseline,
        error=error,
        ratio=ratio,
        nan_rate=nan_rate,
        baseline_nan_rate=baseline_nan_rate,
        threshold=threshold,
    )


def test_a_cell_at_1_25x_shows_speed_plus_25_percent() -> None:
    assert _classify(1.25) == "speed (+25%)"


def test_ratio_1_and_fewer_failures_than_baseline_is_trusted() -> None:
    assert _classify(1.0, nan_rate=0.0, baseline_nan_rate=0.5) == "\u2014"


@pytest.mark.parametrize(("nan_rate", "baseline_nan_rate"), [(0.5, 0.5), (0.75, 0.5), (0.0, 0.0)])
def test_no_fewer_failures_within_threshold_is_no_effect(
    nan_rate: float, baseline_nan_rate: float
) -> None:
    assert _classify(1.0, nan_rate, baseline_nan_rate) == "no effect"
    assert _classify(1.15, nan_rate, baseline_nan_rate) == "no effect"


def test_ratio_exactly_at_threshold_is_not_a_speed_confound() -> None:
    assert _classify(1.15) == "\u2014"


def test_just_above_threshold_is_a_speed_confound() -> None:
    assert _classify(1.151, threshold=1.15) == "speed (+15%)"


def test_speed_wins_regardless_of_failure_rates() -> None:
    # `speed` depends on the ratio alone: a slower cell is suspect whatever its failure rate.
    assert _classify(1.5, nan_rate=0.9, baseline_nan_rate=0.1) == "speed (+50%)"
    assert _classify(1.5, nan_rate=None, baseline_nan_rate=None) == "speed (+50%)"


def test_threshold_is_configurable() -> None:
    assert _classify(1.10, threshold=1.05) == "speed (+10%)"
    assert _classify(1.10, threshold=1.20) == "\u2014"


def test_baseline_cell_is_labelled_baseline() -> None:
    assert _classify(1.0, 0.5, 0.5, is_baseline=True) == "(baseline)"


def test_error_takes_precedence_even_for_the_baseline() -> None:
    assert _classify(None, None, None, error="docker pull failed") == "error"
    assert _classify(None, None, None, is_baseline=True, error="boom") == "error"
    assert _classify(1.5, error="boom") == "error"


def test_missing_ratio_is_not_available_rather_than_guessed() -> None:
    assert _classify(None, nan_rate=0.0, baseline_nan_rate=0.5) == "n/a"
    assert _classify(float("nan")) == "n/a"


def test_missing_failure_rate_within_threshold_is_not_available() -> None:
    assert _classify(1.0, nan_rate=None) == "n/a"
    assert _classify(1.0, baseline_nan_rate=None) == "n/a"


@pytest.mark.parametrize(
    ("ratio", "label"),
    [
        (1.25, "speed (+25%)"),
        (1.26, "speed (+26%)"),
        (1.125, "speed (+13%)"),  # half rounds up, not to even
        (2.0, "speed (+100%)"),
        (1.001, "speed (+0%)"),
        (0.9, "speed (-10%)"),  # only reachable with a threshold below 1
    ],
)
def test_speed_label_rounding(ratio: float, label: str) -> None:
    assert speed_label(ratio) == label

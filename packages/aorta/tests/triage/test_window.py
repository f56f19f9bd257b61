"""`aorta.triage.analysis.window`: step times are compared over the steps both cells reached."""

from __future__ import annotations

import math

import pytest
from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.matrix import build_matrix
from aorta.triage.analysis.stats import bootstrap_ratio_interval
from aorta.triage.analysis.window import TimedTrial, common_window, paired_means, window_ratio

# Steps speed up as the run goes on (a warm cache, a schedule): 10 ms early, 5 ms late.
RAMP = [10.0, 10.0, 10.0, 5.0, 5.0, 5.0, 5.0, 5.0]


def test_the_window_ends_at_the_shortest_timed_trial_of_either_side() -> None:
    cell = [TimedTrial(0, 2, RAMP), TimedTrial(1, 2, RAMP[:6])]
    base = [TimedTrial(0, 2, RAMP[:3]), TimedTrial(1, 2, RAMP), TimedTrial(2, 2, [])]
    window = common_window(cell, base)
    assert window is not None
    # Trial 2 of the baseline timed nothing (it failed in warm-up): it does not shorten it.
    assert (window.length, window.first, window.last) == (3, 3, 5)
    assert dict(window.cell_means) == {0: 10.0, 1: 10.0}
    assert dict(window.base_means) == {0: 10.0, 1: 10.0}
    assert window_ratio(window) == 1.0


def test_same_work_reads_no_speed_change_where_all_steps_would_read_one() -> None:
    # The baseline fails after 3 timed steps; the cell runs all 8 at the very same speed.
    base = [TimedTrial(i, 0, RAMP[:3]) for i in range(3)]
    cell = [TimedTrial(i, 0, RAMP) for i in range(3)]
    window = common_window(cell, base)
    assert window_ratio(window) == pytest.approx(1.0)
    whole = (math.fsum(RAMP) / len(RAMP)) / 10.0
    assert whole == pytest.approx(0.6875)  # what comparing every step would have claimed


def test_non_finite_times_are_left_out_of_a_window_mean() -> None:
    window = common_window(
        [TimedTrial(0, 0, [math.nan, 4.0, 6.0])], [TimedTrial(0, 0, [5.0, 5.0, 5.0])]
    )
    assert window is not None and window.cell_means[0] == 5.0
    only_nan = common_window([TimedTrial(0, 0, [math.nan])], [TimedTrial(0, 0, [5.0])])
    assert only_nan is None


def test_no_window_without_timed_steps_on_a_side() -> None:
    assert common_window([TimedTrial(0, 0, [])], [TimedTrial(0, 0, [1.0])]) is None
    assert common_window([TimedTrial(0, 0, [1.0])], []) is None
    assert window_ratio(None) is None


def test_paired_means_follow_the_rounds_both_sides_ran() -> None:
    cell = [TimedTrial(0, 0, [2.0, 2.0]), TimedTrial(2, 0, [4.0, 4.0])]
    base = [
        TimedTrial(0, 0, [1.0, 1.0]),
        TimedTrial(1, 0, [9.0, 9.0]),
        TimedTrial(2, 0, [2.0, 2.0]),
    ]
    window = common_window(cell, base)
    assert window is not None
    assert paired_means(window) == ([2.0, 4.0], [1.0, 2.0])


# --- in the matrix -----------------------------------------------------------------------


def _trial(trial_id: int, times: list[float], *, passed: bool = True) -> TrialResult:
    return make_trial(trial_id, passed=passed, step_times_ms=times, warmup_steps=2)


def test_the_matrix_ratio_and_interval_compare_the_window() -> None:
    base = aggregate_cell(
        "baseline", [_trial(i, RAMP[:3], passed=False) for i in range(4)], trials_requested=4
    )
    # The cell is 20 % slower on the same steps, and runs into the fast late steps as well.
    slow = [[t * 1.2 for t in RAMP] for _ in range(4)]
    slow[1] = [t * 1.3 for t in RAMP]
    cell = aggregate_cell("fix", [_trial(i, t) for i, t in enumerate(slow)], trials_requested=4)
    matrix = build_matrix([base, cell], baseline="baseline", bootstrap_resamples=500)
    row = matrix.row("fix")
    assert row.step_window == (3, 5)  # warm-up 2, then 3 timed steps
    assert row.step_time_ratio == pytest.approx((12.0 * 3 + 13.0) / 4 / 10.0)
    assert row.step_time_ratio_ci == bootstrap_ratio_interval(
        [12.0, 13.0, 12.0, 12.0], [10.0] * 4, resamples=500, seed=0
    )
    assert row.to_dict(matrix.alpha)["step_window"] == [3, 5]
    assert matrix.row("baseline").step_window == (3, 5)
    # The Mean step column still averages every timed step of the cell.
    assert cell.mean_step_time_ms == pytest.approx(math.fsum(RAMP) / len(RAMP) * 1.225)


def test_paired_matrix_ratio_uses_the_window_round_by_round() -> None:
    base = aggregate_cell("baseline", [_trial(i, [10.0] * 3) for i in range(3)], trials_requested=3)
    cell = aggregate_cell(
        "fix", [_trial(i, [11.0] * 3 + [1.0] * 5) for i in range(3)], trials_requested=3
    )
    matrix = build_matrix([base, cell], baseline="baseline", paired=True)
    assert matrix.row("fix").step_time_ratio == pytest.approx(1.1)

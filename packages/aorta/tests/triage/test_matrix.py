"""`analysis.matrix`: aggregation, ratios, confound labels, evidence and strict JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell, error_cell
from aorta.triage.analysis.matrix import Matrix, build_matrix
from aorta.triage.analysis.stats import (
    bootstrap_ratio_interval,
    fisher_p_value,
    holm_adjust,
    rate_difference_interval,
    wilson_interval,
)


def _trial(
    trial_id: int,
    step_times_ms: Sequence[float],
    *,
    passed: bool = True,
    wall_clock_sec: float = 1.0,
) -> TrialResult:
    return make_trial(
        trial_id,
        passed=passed,
        step_times_ms=step_times_ms,
        failure="NaN loss",
        workload="toy",
        seed=100 + trial_id,
        steps=len(step_times_ms),
        losses=[1.0 + trial_id / 1000.0] * len(step_times_ms),
        wall_clock_sec=wall_clock_sec,
        started_at="2026-04-28T14:12:03Z",
        env_applied={"TF32": "0"},
        failed_at_step=None if passed else len(step_times_ms),
    )


def _cell(
    name: str, mean_ms: float, failures: int, trials: int = 8, *, jitter: float = 2.0
) -> CellStats:
    """A cell of `trials` trials around `mean_ms`, the first `failures` of them failing."""
    results = [
        _trial(
            i,
            [mean_ms + jitter * ((i + s) % 3 - 1) for s in range(5)],
            passed=i >= failures,
        )
        for i in range(trials)
    ]
    return aggregate_cell(name, results, trials_requested=trials)


# --- aggregation -------------------------------------------------------------------------


def test_one_failing_trial_of_eight_counts_as_seven_passed() -> None:
    results = [_trial(i, [10.0, 11.0], passed=i != 3) for i in range(8)]
    cell = aggregate_cell("c", results, trials_requested=8)
    assert (cell.passed_count, cell.failed_count, cell.trials_run) == (7, 1, 8)
    assert cell.nan_rate == pytest.approx(1 / 8)
    assert cell.error is None
    assert cell.failures == ("trial 3: NaN loss",)


def test_step_time_statistics_pool_every_trial_and_match_numpy() -> None:
    per_trial = [[10.0, 12.0, 11.0], [20.0, 21.0], [15.0, 14.0, 16.0, 100.0]]
    results = [
        _trial(i, times, passed=i != 1, wall_clock_sec=2.0 + i) for i, times in enumerate(per_trial)
    ]
    cell = aggregate_cell("c", results, trials_requested=3)
    pooled = np.array([t for times in per_trial for t in times])
    # The mean is the mean of the trials' means (what the ratio and its interval use)...
    assert cell.mean_step_time_ms == pytest.approx(np.mean([np.mean(t) for t in per_trial]))
    assert cell.mean_step_time_ms != pytest.approx(pooled.mean())
    # ...the spread statistics pool every step.
    assert cell.std_step_time_ms == pytest.approx(pooled.std(ddof=1))
    assert cell.p50_step_time_ms == pytest.approx(np.percentile(pooled, 50))
    assert cell.p99_step_time_ms == pytest.approx(np.percentile(pooled, 99))
    assert cell.mean_wall_clock_sec == pytest.approx(3.0)
    assert cell.step_times_ms == tuple(pooled)
    assert cell.per_trial_mean_step_time_ms == pytest.approx([11.0, 20.5, 36.25])


def test_aggregation_orders_trials_by_id_and_keeps_their_identity() -> None:
    results = [_trial(2, [3.0]), _trial(0, [1.0]), _trial(1, [2.0])]
    cell = aggregate_cell("c", results, trials_requested=3)
    assert [t.trial_id for t in cell.trials] == [0, 1, 2]
    assert [t.seed for t in cell.trials] == [100, 101, 102]
    assert cell.step_times_ms == (1.0, 2.0, 3.0)
    assert dict(cell.trials[0].env_applied) == {"TF32": "0"}


def test_single_step_time_has_no_std() -> None:
    cell = aggregate_cell("c", [_trial(0, [5.0])], trials_requested=1)
    assert cell.mean_step_time_ms == 5.0
    assert cell.std_step_time_ms is None
    assert cell.p50_step_time_ms == cell.p99_step_time_ms == 5.0


def test_non_finite_step_times_are_kept_raw_but_not_averaged() -> None:
    cell = aggregate_cell("c", [_trial(0, [4.0, float("nan"), 6.0])], trials_requested=1)
    assert cell.mean_step_time_ms == pytest.approx(5.0)
    assert len(cell.step_times_ms) == 3


def test_trials_without_step_times_leave_timing_empty() -> None:
    results = [_trial(0, [], passed=False), _trial(1, [], passed=False)]
    cell = aggregate_cell("c", results, trials_requested=2)
    assert cell.nan_rate == 1.0
    assert cell.mean_step_time_ms is None
    assert cell.p50_step_time_ms is None
    assert cell.per_trial_mean_step_time_ms == ()


def test_no_results_at_all_is_an_errored_cell() -> None:
    cell = aggregate_cell("c", [], trials_requested=4)
    assert cell.error is not None
    assert "no trial results" in cell.error
    assert cell.nan_rate is None
    assert cell.trials_run == 0


def test_error_cell_has_no_counts_or_timings() -> None:
    cell = error_cell("c", "docker pull failed", trials_requested=8)
    assert cell.error == "docker pull failed"
    assert (cell.trials_run, cell.passed_count, cell.failed_count) == (0, 0, 0)
    assert cell.nan_rate is None
    assert cell.mean_step_time_ms is None
    assert cell.trials_requested == 8


# --- matrix ------------------------------------------------------------------------------


def _spec_matrix(trials: int = 8) -> Matrix:
    """The spec's example: baseline half failing at 412 ms, mitigations never failing."""
    half = trials // 2
    return build_matrix(
        [
            _cell("baseline-local", 412.0, failures=half, trials=trials),
            _cell("tf32_off-local", 515.0, failures=0, trials=trials),
            _cell("xnack-local", 414.0, failures=0, trials=trials),
            _cell("noop-local", 410.0, failures=half, trials=trials),
        ],
        baseline="baseline-local",
        threshold=1.15,
    )


def test_ratios_and_confound_labels_follow_the_spec_example() -> None:
    # 16 trials per cell: 0/16 against 8/16 is significant (Fisher p = 0.0024, x3 by Holm
    # for the three cells compared: 0.0073).
    matrix = _spec_matrix(trials=16)
    base = matrix.row("baseline-local")
    assert base.is_baseline
    assert base.confound == "(baseline)"
    assert base.step_time_ratio == pytest.approx(1.0)
    tf32 = matrix.row("tf32_off-local")
    assert tf32.step_time_ratio == pytest.approx(515.0 / 412.0, rel=1e-4)
    assert tf32.confound == "speed (+25%); drop significant (p=0.0073)"
    assert matrix.row("xnack-local").confound == "\u2014"
    # 8/16 against 8/16 does not rule out a cure of half the baseline's 50 % (the interval of
    # the drop reaches 31 points): 85 trials per cell would (50 % -> 25 %, alpha 0.05 / 3).
    assert matrix.row("noop-local").confound == (
        "inconclusive (p=1.00, ~85 trials per cell needed)"
    )
    # With 8 trials per cell the same drop is not significant (p = 0.077, 0.23 adjusted).
    small = _spec_matrix(trials=8)
    assert small.row("xnack-local").confound == (
        "inconclusive (p=0.23, ~19 trials per cell needed)"
    )
    assert small.row("tf32_off-local").confound == (
        "speed (+25%); drop inconclusive (p=0.23, ~19 trials per cell needed)"
    )
    assert [r.name for r in matrix.rows] == [
        "baseline-local",
        "tf32_off-local",
        "xnack-local",
        "noop-local",
    ]
    assert matrix.warnings == ()


def test_every_cell_carries_its_evidence() -> None:
    matrix = _spec_matrix()
    base = matrix.row("baseline-local")
    assert base.nan_rate_ci == pytest.approx(wilson_interval(4, 8))
    assert base.fisher_p is None  # the baseline is not compared with itself
    assert base.step_time_ratio_ci is None
    xnack = matrix.row("xnack-local")
    assert xnack.nan_rate_ci == pytest.approx(wilson_interval(0, 8))
    assert xnack.fisher_p == pytest.approx(fisher_p_value(0, 8, 4, 8))
    assert xnack.fisher_p == pytest.approx(0.0769, abs=1e-4)
    # Holm across the three compared cells (0.077, 0.077, 1.0): the smallest p times 3.
    assert xnack.p_adjusted == pytest.approx(3 * xnack.fisher_p)
    assert [r.p_adjusted for r in matrix.rows] == holm_adjust([r.fisher_p for r in matrix.rows])
    assert base.p_adjusted is None and base.failure_drop_ci is None
    assert xnack.failure_drop_ci == pytest.approx(rate_difference_interval(4, 8, 0, 8))
    tf32 = matrix.row("tf32_off-local")
    assert tf32.step_time_ratio_ci is not None
    low, high = tf32.step_time_ratio_ci
    assert tf32.step_time_ratio is not None
    assert low <= tf32.step_time_ratio <= high
    # Resampled unit: per-trial means, with the matrix's seed.
    assert tf32.step_time_ratio_ci == bootstrap_ratio_interval(
        matrix.row("tf32_off-local").stats.per_trial_mean_step_time_ms,
        base.stats.per_trial_mean_step_time_ms,
        seed=0,
    )


def test_issue_examples_read_inconclusive_and_fails_more() -> None:
    # 0/4 vs 2/4 (p = 0.43) and 0/2 vs 1/2 used to read "trust this cell".
    for trials in (4, 2):
        matrix = build_matrix(
            [_cell("base", 100.0, failures=trials // 2, trials=trials),
             _cell("fix", 100.0, failures=0, trials=trials)],
            baseline="base",
        )  # fmt: skip
        assert matrix.row("fix").confound.startswith("inconclusive (p=")
    worse = build_matrix(
        [_cell("base", 100.0, failures=0, trials=12), _cell("bad", 100.0, failures=10, trials=12)],
        baseline="base",
    )
    assert worse.row("bad").confound == "fails more (p<0.001)"
    alpha = build_matrix(
        [_cell("base", 100.0, failures=4, trials=8), _cell("fix", 100.0, failures=0, trials=8)],
        baseline="base",
        alpha=0.1,
    )
    assert alpha.row("fix").confound == "\u2014"  # p = 0.077 < 0.1


def test_point_and_interval_of_the_ratio_use_the_same_trial_means() -> None:
    # One long slow trial and three short fast ones: pooled steps would say ~1.9x, the trial
    # means say 1.25x, and the interval is built from trial means too.
    base = aggregate_cell("base", [_trial(i, [10.0, 10.0]) for i in range(4)], trials_requested=4)
    slow = aggregate_cell(
        "slow",
        [_trial(0, [20.0] * 20), *(_trial(i, [10.0, 10.0]) for i in range(1, 4))],
        trials_requested=4,
    )
    row = build_matrix([base, slow], baseline="base").row("slow")
    assert row.step_time_ratio == pytest.approx(1.25)
    assert row.step_time_ratio_ci is not None
    low, high = row.step_time_ratio_ci
    assert low <= 1.25 <= high and high <= 2.0
    # Nothing failed anywhere: the speed question stays, with the failure verdict after it.
    assert row.confound == f"speed? (+25%, 95% CI {low:.2f}-{high:.2f}); no failure to cure"


def test_a_faster_cell_is_labelled_faster() -> None:
    matrix = build_matrix(
        [_cell("base", 100.0, failures=0), _cell("quick", 60.0, failures=0)], baseline="base"
    )
    assert matrix.row("quick").confound == "faster (-40%); no failure to cure"


def test_build_matrix_is_deterministic() -> None:
    assert _spec_matrix().to_dict() == _spec_matrix().to_dict()


def test_note_sizes_more_trials_when_no_cell_differs_significantly() -> None:
    # 4/8 vs 0/8 gives p ~ 0.077: suggestive, not significant.
    matrix = _spec_matrix()
    assert not any(r.significant(matrix.alpha) for r in matrix.rows)
    assert len(matrix.notes) == 2
    note = matrix.notes[0]
    # Sized at the Bonferroni level alpha / 3 for the three compared cells.
    assert note.startswith("more trials needed: 19 trials per cell would detect a change from 50%")
    assert "to 0%" in note and "two-sided alpha 0.0167" in note
    assert matrix.notes[1].startswith("p-values are Holm-Bonferroni adjusted over the 3 cells")


def test_no_note_when_a_cell_differs_significantly() -> None:
    matrix = build_matrix(
        [_cell("base", 100.0, failures=8), _cell("fix", 100.0, failures=0)], baseline="base"
    )
    fisher_p = matrix.row("fix").fisher_p
    assert fisher_p is not None
    assert fisher_p < 0.001
    assert matrix.row("fix").significant(0.05)
    assert matrix.notes == ()


def test_note_when_no_failure_rate_differs_at_all() -> None:
    matrix = build_matrix(
        [_cell("base", 100.0, failures=4), _cell("other", 100.0, failures=4)], baseline="base"
    )
    assert len(matrix.notes) == 1
    assert "no cell's failure rate differs" in matrix.notes[0]


def test_a_baseline_that_never_failed_is_a_banner_and_no_cell_can_show_a_cure() -> None:
    matrix = build_matrix(
        [
            _cell("base", 100.0, failures=0),
            _cell("same", 100.0, failures=0),
            _cell("some", 100.0, failures=2),
            _cell("slow", 150.0, failures=0),
            _cell("broken", 100.0, failures=8),
        ],
        baseline="base",
    )
    assert matrix.warnings[0] == (
        "Baseline did not reproduce the failure (0 of 8 trials failed): no cell can show a cure."
    )
    assert matrix.row("same").confound == "no failure to cure"  # not `no effect`, not `—`
    assert matrix.row("some").confound == "no failure to cure"  # 2/8 vs 0/8: not significant
    assert matrix.row("slow").confound == "speed (+50%); no failure to cure"
    # Failing significantly more than a baseline that never failed is a finding of its own.
    assert matrix.row("broken").confound.startswith("fails more (p")
    assert matrix.notes[0].startswith("p-values are Holm-Bonferroni")  # no "more trials" sizing


def test_a_baseline_that_failed_once_gets_no_banner() -> None:
    matrix = build_matrix(
        [_cell("base", 100.0, failures=1), _cell("fix", 100.0, failures=0)], baseline="base"
    )
    assert not any("did not reproduce" in w for w in matrix.warnings)
    # 1/8: halving a 12.5 % rate is far from ruled out.
    assert matrix.row("fix").confound.startswith("inconclusive (p=1.00, ~")


def test_holm_turns_a_lone_significant_drop_into_an_inconclusive_pair() -> None:
    # 0/8 vs 5/8: Fisher p = 0.026. Alone it is shown; beside an identical second cell the
    # family of two needs p < 0.025 for the smaller one, and 0.051 is not.
    lone = build_matrix(
        [_cell("base", 100.0, failures=5), _cell("fix", 100.0, failures=0)], baseline="base"
    )
    assert lone.row("fix").fisher_p == pytest.approx(fisher_p_value(0, 8, 5, 8))
    assert lone.row("fix").p_adjusted == lone.row("fix").fisher_p
    assert lone.row("fix").confound == "\u2014"
    pair = build_matrix(
        [
            _cell("base", 100.0, failures=5),
            _cell("fix", 100.0, failures=0),
            _cell("fix2", 100.0, failures=0),
            error_cell("gone", "docker unavailable"),  # untested: not part of the family
        ],
        baseline="base",
    )
    fix = pair.row("fix")
    assert fix.fisher_p == lone.row("fix").fisher_p
    assert fix.p_adjusted == pytest.approx(2 * fix.fisher_p)
    assert not fix.significant(0.05) and lone.row("fix").significant(0.05)
    assert fix.confound.startswith("inconclusive (p=0.05")
    assert pair.row("gone").p_adjusted is None


def test_no_effect_only_where_a_cure_is_ruled_out() -> None:
    # A deterministic failure that the cell leaves untouched: 8/8 vs 8/8. The drop is at most
    # 32 points, below half of 100 %: ruled out.
    always = build_matrix(
        [_cell("base", 100.0, failures=8), _cell("noop", 100.0, failures=8)], baseline="base"
    )
    noop = always.row("noop")
    assert noop.failure_drop_ci is not None and noop.failure_drop_ci[1] < 0.5
    assert noop.confound == "no effect"
    # 3/3 vs 3/3 is too few: the drop could still be 56 points.
    few = build_matrix(
        [_cell("base", 100.0, failures=3, trials=3), _cell("noop", 100.0, failures=3, trials=3)],
        baseline="base",
    )
    assert few.row("noop").confound.startswith("inconclusive (p=1.00, ~")
    # A smaller cure that matters needs more evidence to rule out.
    strict = build_matrix(
        [_cell("base", 100.0, failures=8), _cell("noop", 100.0, failures=8)],
        baseline="base",
        smallest_cure=0.25,
    )
    assert strict.row("noop").confound.startswith("inconclusive (p=1.00, ~")


def test_an_errored_cell_keeps_its_row_and_others_still_classify() -> None:
    matrix = build_matrix(
        [
            _cell("baseline-local", 100.0, failures=4),
            error_cell("nightly", "docker unavailable", trials_requested=8),
            _cell("fix", 100.0, failures=0),
        ],
        baseline="baseline-local",
    )
    errored = matrix.row("nightly")
    assert errored.confound == "error"
    assert errored.step_time_ratio is None
    assert errored.nan_rate_ci is None
    assert errored.fisher_p is None
    # 0/8 against 4/8 is not significant (p = 0.077): no "trust this cell" on that evidence.
    assert matrix.row("fix").confound == "inconclusive (p=0.08, ~15 trials per cell needed)"
    assert matrix.row("fix").p_adjusted == matrix.row("fix").fisher_p  # the only one tested
    assert matrix.row("baseline-local").confound == "(baseline)"
    assert any("nightly" in w and "docker unavailable" in w for w in matrix.warnings)


def test_an_errored_baseline_gives_na_ratios_and_a_warning() -> None:
    matrix = build_matrix(
        [
            error_cell("baseline-local", "docker pull failed", trials_requested=8),
            _cell("tf32_off-local", 515.0, failures=0),
            error_cell("other", "boom"),
        ],
        baseline="baseline-local",
    )
    assert matrix.warnings[0].startswith("baseline cell baseline-local failed: ratios are n/a")
    assert all(r.step_time_ratio is None for r in matrix.rows)
    assert matrix.row("baseline-local").confound == "error"
    # Without a ratio no rule applies: documented as `n/a`, not guessed.
    assert matrix.row("tf32_off-local").confound == "n/a"
    assert matrix.row("tf32_off-local").fisher_p is None
    assert matrix.row("tf32_off-local").nan_rate_ci == pytest.approx(wilson_interval(0, 8))
    assert matrix.row("other").confound == "error"
    assert matrix.notes == ()
    json.dumps(matrix.to_dict(), allow_nan=False)


def test_a_baseline_without_step_times_gives_na_ratios_and_a_warning() -> None:
    base = aggregate_cell("base", [_trial(0, [], passed=False)], trials_requested=1)
    matrix = build_matrix([base, _cell("fix", 100.0, failures=0)], baseline="base")
    assert any("recorded no step times: ratios are n/a" in w for w in matrix.warnings)
    assert matrix.row("base").step_time_ratio is None
    assert matrix.row("base").confound == "(baseline)"
    # Failure counts are still comparable, so their verdict shows; speed is unknown.
    assert matrix.row("fix").fisher_p is not None
    assert matrix.row("fix").confound.startswith("speed n/a; drop inconclusive (p=0.11, ~")


def test_fewer_trials_than_requested_is_warned() -> None:
    partial = aggregate_cell("short", [_trial(0, [1.0]), _trial(1, [1.0])], trials_requested=8)
    matrix = build_matrix([_cell("base", 1.0, failures=0), partial], baseline="base")
    assert "cell short ran 2 of 8 requested trials" in matrix.warnings


def test_threshold_boundary_in_the_matrix() -> None:
    base = aggregate_cell("base", [_trial(0, [100.0]), _trial(1, [100.0])], trials_requested=2)
    at = aggregate_cell("at", [_trial(0, [115.0]), _trial(1, [115.0])], trials_requested=2)
    above = aggregate_cell("above", [_trial(0, [115.1]), _trial(1, [115.1])], trials_requested=2)
    matrix = build_matrix([base, at, above], baseline="base", threshold=1.15)
    assert matrix.row("at").confound == "no failure to cure"  # exactly 1.15 is not `speed`
    assert matrix.row("above").confound == "speed (+15%); no failure to cure"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"baseline": "missing"}, "not among the cells"),
        ({"baseline": "a", "threshold": 0.0}, "threshold"),
        ({"baseline": "a", "threshold": float("nan")}, "threshold"),
        ({"baseline": "a", "alpha": 1.0}, "alpha"),
        ({"baseline": "a", "smallest_cure": 0.0}, "smallest_cure"),
        ({"baseline": "a", "smallest_cure": 1.5}, "smallest_cure"),
    ],
)
def test_build_matrix_rejects_caller_bugs(kwargs: dict[str, object], message: str) -> None:
    cells = [_cell("a", 1.0, failures=0), _cell("b", 1.0, failures=0)]
    with pytest.raises(ValueError, match=message):
        build_matrix(cells, **kwargs)  # type: ignore[arg-type]


def test_duplicate_cell_names_are_rejected() -> None:
    cells = [_cell("a", 1.0, failures=0), _cell("a", 1.0, failures=0)]
    with pytest.raises(ValueError, match="duplicate"):
        build_matrix(cells, baseline="a")


def test_to_dict_is_strict_json_with_full_per_cell_data() -> None:
    nan_cell = aggregate_cell(
        "nan-times", [_trial(0, [float("nan"), float("inf")])], trials_requested=1
    )
    matrix = build_matrix(
        [
            _cell("baseline-local", 412.0, failures=4),
            _cell("tf32_off-local", 515.0, failures=0),
            error_cell("broken", "docker unavailable"),
            nan_cell,
        ],
        baseline="baseline-local",
    )
    data = json.loads(json.dumps(matrix.to_dict(), allow_nan=False))
    assert data["baseline"] == "baseline-local"
    assert data["baseline_mean_step_time_ms"] == pytest.approx(412.0)
    assert data["threshold"] == 1.15
    cells = {c["name"]: c for c in data["cells"]}
    tf32 = cells["tf32_off-local"]
    assert tf32["confound"].startswith("speed (+25%); drop inconclusive (p=")
    assert tf32["passed_count"] == 8
    assert len(tf32["trials"]) == 8
    assert tf32["trials"][0]["step_times_ms"] == [513.0, 515.0, 517.0, 513.0, 515.0]
    assert tf32["nan_rate_ci"][0] == 0.0
    assert tf32["p_value"] == pytest.approx(fisher_p_value(0, 8, 4, 8))
    # Two cells tested: tf32 and the timing-less one (0/1 vs 4/8); the errored one is not.
    assert tf32["p_adjusted"] == pytest.approx(2 * tf32["p_value"])
    assert tf32["failure_drop_ci"] == pytest.approx(list(rate_difference_interval(4, 8, 0, 8)))
    assert data["smallest_cure"] == 0.5
    assert len(tf32["step_time_ratio_ci"]) == 2
    for key in ("mean_step_time_ms", "std_step_time_ms", "p50_step_time_ms", "p99_step_time_ms"):
        assert isinstance(tf32[key], float)
    assert cells["broken"]["error"] == "docker unavailable"
    assert cells["broken"]["nan_rate"] is None
    assert cells["broken"]["step_time_ratio"] is None
    assert cells["nan-times"]["trials"][0]["step_times_ms"] == [None, None]
    assert cells["nan-times"]["mean_step_time_ms"] is None
    assert isinstance(data["warnings"], list)
    assert isinstance(data["notes"], list)

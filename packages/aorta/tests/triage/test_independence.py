"""`analysis.independence` and its hook in the matrix: copies are not independent trials."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.triage.analysis import independence
from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.matrix import build_matrix
from aorta.triage.analysis.stats import fisher_p_value, wilson_interval

COPY = [2.5, 2.1, 1.9]  # one run's loss trace, printed identically by every copy of it
DETERMINISTIC = "not independent: fails identically in every trial (deterministic)"


def _trial(
    trial_id: int,
    losses: Sequence[float | None],
    *,
    outcome: str = "passed",
    digest: str | None = None,
) -> TrialResult:
    fields: dict[str, Any] = {"losses": list(losses), "outcome": outcome}
    if digest is not None:
        fields["command"] = {"log_digest": digest}
    return make_trial(
        trial_id, passed=outcome == "passed", step_times_ms=[10.0, 10.0, 10.0], **fields
    )


def _own(trial_id: int, *, outcome: str = "passed") -> TrialResult:
    """A trial of a seeded run: its trace is its own."""
    return _trial(trial_id, [2.5 + trial_id / 100, 2.0], outcome=outcome)


# --- judge -------------------------------------------------------------------------------


def test_identical_loss_traces_are_copies_of_one_run() -> None:
    judged = independence.judge([_trial(i, COPY) for i in range(4)])
    assert judged.all_copies and (judged.trials, judged.distinct) == (4, 1)
    assert judged.groups == ((0, 1, 2, 3),)
    assert judged.basis == (independence.LOSS_TRACES,)
    assert not judged.deterministic_failure  # they passed


def test_copies_that_failed_are_a_deterministic_failure() -> None:
    # The trace ends at the non-finite loss (recorded as None, or as NaN by an in-tree workload).
    for last in (None, math.nan):
        judged = independence.judge([_trial(i, [*COPY, last], outcome="failed") for i in range(3)])
        assert judged.all_copies and judged.deterministic_failure
        assert judged.distinct_failed == 1


def test_seeded_trials_are_independent() -> None:
    judged = independence.judge([_own(i) for i in range(4)])
    assert not judged.all_copies and judged.groups == ()
    assert (judged.distinct, judged.distinct_failed) == (4, 0)


def test_same_trace_with_another_outcome_is_not_a_copy() -> None:
    # Something differed between the runs (e.g. an exit code listed as a failure).
    judged = independence.judge([_trial(0, COPY), _trial(1, COPY, outcome="failed")])
    assert judged.groups == () and judged.distinct == 2


def test_errored_trials_are_not_judged() -> None:
    judged = independence.judge(
        [_trial(0, COPY), _trial(1, COPY), _trial(2, COPY, outcome="error")]
    )
    assert judged.trials == 2 and judged.all_copies


def test_without_a_loss_the_logs_are_compared() -> None:
    # No readable loss (none printed, or only non-finite ones): the log digest decides.
    same = [_trial(i, [], digest="a" * 32) for i in range(3)]
    assert independence.judge(same).all_copies
    assert independence.judge(same).basis == (independence.LOGS,)
    unreadable = [_trial(i, [None], digest="b" * 32, outcome="failed") for i in range(2)]
    assert independence.judge(unreadable).deterministic_failure
    differ = [_trial(i, [], digest=f"{i}" * 32) for i in range(3)]
    assert independence.judge(differ).distinct == 3


def test_a_trial_with_nothing_to_compare_counts_as_its_own_run() -> None:
    # An in-process trial that recorded no loss and has no log: assumed independent.
    judged = independence.judge([_trial(0, []), _trial(1, [])])
    assert judged.distinct == 2 and not judged.all_copies


def test_partial_copies_count_each_set_once() -> None:
    results = [
        _trial(0, COPY, outcome="failed"),
        _trial(1, COPY, outcome="failed"),
        _trial(2, COPY, outcome="failed"),
        _own(3),
        _own(4, outcome="failed"),
    ]
    judged = independence.judge(results)
    assert judged.groups == ((0, 1, 2),) and not judged.all_copies
    assert (judged.distinct, judged.distinct_failed) == (3, 2)
    assert independence.evidence_counts(judged, 4, 5) == (2, 3)
    assert independence.evidence_counts(independence.judge([_own(0), _own(1)]), 1, 2) == (1, 2)


def test_reasons_name_the_cell_or_the_baseline() -> None:
    copies = independence.judge([_trial(i, COPY) for i in range(3)])
    fine = independence.judge([_own(i) for i in range(3)])
    assert independence.not_independent_reason(copies, fine, is_baseline=False) == (
        "its 3 trials are copies (identical loss traces)"
    )
    assert independence.not_independent_reason(fine, copies, is_baseline=False) == (
        "the baseline's trials are copies"
    )
    assert independence.not_independent_reason(fine, copies, is_baseline=True) is None
    assert independence.not_independent_reason(fine, fine, is_baseline=False) is None


# --- in the matrix -----------------------------------------------------------------------


def _cell(name: str, results: Sequence[TrialResult]) -> Any:
    return aggregate_cell(name, results, trials_requested=len(results))


def test_a_copied_cell_gets_no_interval_no_p_value_and_a_banner() -> None:
    base = _cell("baseline", [_own(i, outcome="failed") for i in range(4)])
    copies = _cell("nanogpt", [_trial(i, [*COPY, None], outcome="failed") for i in range(4)])
    matrix = build_matrix([base, copies], baseline="baseline")
    row = matrix.row("nanogpt")
    assert row.confound == DETERMINISTIC
    assert (row.nan_rate_ci, row.fisher_p, row.independent) == (None, None, False)
    data = row.to_dict(matrix.alpha)
    assert data["independent"] is False and data["independence"]["all_copies"] is True
    assert data["nan_rate"] == 1.0  # the observed proportion stays on record
    (banner,) = [w for w in matrix.warnings if "copies" in w]
    assert banner.startswith("cell nanogpt: its 4 trials are copies (identical loss traces)")
    assert "It fails identically in every trial (deterministic)." in banner
    assert "AORTA_SEED" in banner
    assert matrix.row("baseline").independent  # the baseline's own trials are distinct


def test_a_copied_baseline_makes_every_comparison_not_independent() -> None:
    base = _cell("baseline", [_trial(i, COPY, outcome="failed") for i in range(4)])
    cure = _cell("fix", [_own(i) for i in range(4)])
    matrix = build_matrix([base, cure], baseline="baseline")
    assert matrix.row("baseline").confound == DETERMINISTIC
    fix = matrix.row("fix")
    assert fix.confound == "not independent: the baseline's trials are copies"
    assert fix.fisher_p is None and not fix.independent
    assert fix.nan_rate_ci is not None  # its own trials are a sample of its own rate
    assert any("Every comparison with the baseline" in w for w in matrix.warnings)
    # No copy is left scored as independent: the count false_verdicts.py checks.
    scored = [
        r
        for r in matrix.rows
        if r.stats.independence is not None
        and r.stats.independence.all_copies
        and (r.fisher_p is not None or not r.confound.startswith("not independent"))
    ]
    assert scored == []


def test_partial_copies_are_counted_once_in_the_interval_and_the_test() -> None:
    base = _cell("baseline", [_own(i, outcome="failed") for i in range(6)])
    results = [_trial(i, COPY) for i in range(4)] + [_own(4), _own(5)]
    cell = _cell("fix", results)
    matrix = build_matrix([base, cell], baseline="baseline")
    row = matrix.row("fix")
    assert row.independent and not row.confound.startswith("not independent")
    # 3 distinct runs (the 4 copies once), all passed, against 6 distinct failures.
    assert row.fisher_p == pytest.approx(fisher_p_value(0, 3, 6, 6))
    assert row.nan_rate_ci == pytest.approx(wilson_interval(0, 3))
    (banner,) = [w for w in matrix.warnings if "distinct runs" in w]
    assert banner.startswith(
        "cell fix: only 3 of its 6 trials are distinct runs (identical loss traces: "
        "trials 0, 1, 2, 3)"
    )


def test_independent_cells_keep_their_evidence_and_no_banner() -> None:
    base = _cell("baseline", [_own(i, outcome="failed") for i in range(4)])
    cure = _cell("fix", [_own(i) for i in range(4)])
    matrix = build_matrix([base, cure], baseline="baseline")
    fix = matrix.row("fix")
    assert fix.fisher_p == pytest.approx(fisher_p_value(0, 4, 4, 4))
    assert fix.independent and not fix.confound.startswith("not independent")
    assert not [w for w in matrix.warnings if "copies" in w or "distinct runs" in w]


def test_not_independent_is_an_early_rule_of_the_label() -> None:
    from aorta.triage.analysis import confound

    evidence = confound.Evidence(
        ratio=1.0,
        ratio_ci=(0.9, 1.1),
        confidence=0.95,
        nan_rate=0.0,
        baseline_nan_rate=1.0,
        p_adjusted=0.001,  # would read "—" (trust it) if the trials were independent
        drop_upper=1.0,
        trials_needed=None,
        not_independent="its 4 trials are copies (identical loss traces)",
    )
    judge = {"threshold": 1.15, "alpha": 0.05}
    for is_baseline in (False, True):
        label = confound.classify(is_baseline=is_baseline, error=None, evidence=evidence, **judge)
        assert label == "not independent: its 4 trials are copies (identical loss traces)"
    assert confound.classify(is_baseline=False, error="x", evidence=evidence, **judge) == "error"


def test_values_that_are_not_numbers_read_as_no_value() -> None:
    # A trial file from a shared run directory is read, not trusted.
    odd = [_trial(i, ["2.5", True], digest=None) for i in range(2)]  # type: ignore[list-item]
    assert independence.judge(odd).distinct == 2
    listed = make_trial(0, passed=True, step_times_ms=[1.0], losses=[], command=["log_digest"])
    assert independence.judge([listed, listed]).distinct == 2

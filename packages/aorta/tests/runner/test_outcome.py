"""Trial outcomes: passed / failed / error, decided by `aorta.runner.outcome` (pure)."""

from __future__ import annotations

import pytest
from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.runner.outcome import classify_exception, classify_outcome
from aorta.workloads.contract import TrialError, TrialFailure, WorkloadOutcome


def test_missing_torch_is_an_error_naming_the_extra_to_install() -> None:
    exc = ModuleNotFoundError("No module named 'torch'", name="torch")
    outcome, reason = classify_exception(exc, steps_completed=0)
    assert outcome == "error"
    assert reason == (
        "workload import error: ModuleNotFoundError: No module named 'torch'; "
        "install it with: pip install 'aorta[torch]'"
    )
    # A submodule of a missing extra gives the same hint.
    sub = ModuleNotFoundError("No module named 'torch.distributed'", name="torch.distributed")
    assert classify_exception(sub, 0)[1].endswith("pip install 'aorta[torch]'")


def test_out_of_memory_is_an_error_even_after_steps() -> None:
    class OutOfMemoryError(RuntimeError):  # the name torch.cuda uses
        pass

    assert classify_exception(OutOfMemoryError("CUDA out of memory"), 5)[0] == "error"
    assert classify_exception(MemoryError(), 5) == ("error", "out of memory: MemoryError")


def test_other_exceptions_depend_on_whether_a_step_completed() -> None:
    exc = RuntimeError("boom\nsecond line")
    assert classify_exception(exc, 0) == (
        "error",
        "error before the first completed step: RuntimeError: boom second line",
    )
    assert classify_exception(exc, 3) == (
        "failed",
        "RuntimeError: boom second line (after 3 completed step(s))",
    )


def test_declared_outcomes_win_over_the_step_count() -> None:
    assert classify_exception(TrialFailure("diverged"), 0) == ("failed", "TrialFailure: diverged")
    assert classify_exception(TrialError("no gpu"), 9) == ("error", "TrialError: no gpu")
    base = {"step_times_ms": [], "warmup_steps": 0, "losses": []}
    assert classify_outcome(WorkloadOutcome(**base)) == ("passed", None)
    assert classify_outcome(WorkloadOutcome(**base, failure="nan")) == ("failed", "nan")
    assert classify_outcome(WorkloadOutcome(**base, failure="x", error="setup")) == (
        "error",
        "setup",
    )


def test_trial_record_outcome_and_passed_agree() -> None:
    error = make_trial(0, passed=False, step_times_ms=[], outcome="error", failure="setup")
    assert error.errored and error.to_dict()["outcome"] == "error"
    assert TrialResult.from_dict(error.to_dict()) == error
    # A record written before `outcome` existed reads as passed / failed from `passed`.
    legacy = make_trial(1, passed=False, step_times_ms=[1.0]).to_dict()
    del legacy["outcome"]
    assert TrialResult.from_dict(legacy).outcome == "failed"
    with pytest.raises(ValueError, match="a passed trial cannot have outcome 'error'"):
        make_trial(2, passed=True, step_times_ms=[1.0], outcome="error")
    with pytest.raises(ValueError, match="outcome must be one of"):
        make_trial(3, passed=False, step_times_ms=[1.0], outcome="crashed")

"""Log signals acting while the job runs (`on_match`) and their modes, on the fake SLURM."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.monitor.triage_launch import TriageRequest
from oellm_autoexp.persistence.session import TriageEvent
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

NAN_AT_S = 12.0  # seconds after the start the job logs its NaN; it then runs on (no end)
STEP_S = 5.0  # the fake monitor's poll interval
SELECTIVE = {
    "class_name": "SelectiveRestartPolicy",
    "modes": ["crash", "stall"],
    "restart_on_error_types": ["cancelled", "hang"],
    "default_action": "stop",
}


def _nan_signal(on_match: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "nan",
        "pattern": "loss: nan",
        "error_type": "nan",
        "on_match": on_match,
        **extra,
    }


def _cluster(clock: FakeClock, session: Any, **timeline: Any) -> FakeSlurmClient:
    job = next(iter(session.jobs.values()))

    def make(_request: SubmitRequest, slurm_id: str, _attempt: int) -> Timeline:
        log = resolve_log_path(job.log_path, slurm_id, job.slurm_name)
        return Timeline(log_path=log, **{"run_s": None, **timeline})

    return FakeSlurmClient(clock, make)


def _polls_until(
    controller: MonitorController, clock: FakeClock, done: Any, limit: int = 40
) -> int:
    for polls in range(1, limit + 1):
        controller.poll_once()
        if done():
            return polls
        clock.advance(STEP_S)
    raise AssertionError("condition never held")


def test_cancel_ends_the_running_job_at_the_poll_that_reads_the_line(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={"log_signals": [_nan_signal("cancel")]},
        policies=[SELECTIVE],
    )
    clock = FakeClock()
    fake = _cluster(clock, session, log_lines=[(NAN_AT_S, "step 7 loss: nan")])
    controller = MonitorController(fake, store, [session], clock=clock)
    start = clock()
    _polls_until(controller, clock, lambda: store.load(session.session_id).jobs["k0"].finished)
    (slurm_job,) = fake.jobs.values()
    # Cancelled at the first poll at or after the line (t=15 for a line at t=12).
    assert slurm_job.cancelled_at == start + 15.0
    assert slurm_job.info(clock()).state == "CANCELLED"
    job = store.load(session.session_id).jobs["k0"]
    (attempt,) = job.attempts
    assert (attempt.mode, attempt.metadata["error_type"], attempt.metadata["signal_name"]) == (
        "crash",
        "nan",
        "nan",
    )
    assert attempt.metadata["line"] == "step 7 loss: nan"
    assert "on_match cancel" in attempt.metadata["reason"]
    # The selective policy decided (nan is not restartable): failed, not restarted.
    assert job.state == "failed" and job.outcome is not None
    assert job.outcome.decision == "no rule for error_type nan; default stop"
    assert (fake.calls["sbatch"], fake.calls["scancel"]) == (1, 1)


def test_cancel_with_a_restartable_mode_lets_the_policy_restart(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={
            "log_signals": [_nan_signal("cancel", mode="stall", error_type="hang")],
            "restart_backoff_seconds": 10.0,
        },
        policies=[{**SELECTIVE, "max_retries": 1}],
    )
    clock = FakeClock()
    fake = _cluster(clock, session, log_lines=[(NAN_AT_S, "loss: nan")])
    controller = MonitorController(fake, store, [session], clock=clock)
    _polls_until(controller, clock, lambda: store.load(session.session_id).jobs["k0"].finished)
    job = store.load(session.session_id).jobs["k0"]
    assert [a.mode for a in job.attempts] == ["stall", "stall"]
    assert job.restarts == {"stall": 1}
    # The policy's backoff applies: the restart came at least 10 s after the cancel.
    first, second = (fake.jobs[a.job_id] for a in job.attempts)
    assert second.submitted_at - (first.cancelled_at or 0) >= 10.0


def test_restart_cancels_and_resubmits_in_the_same_poll_within_max_restarts(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={"log_signals": [_nan_signal("restart")], "max_restarts": 2},
        policies=[],  # no policy: on_match restart needs none
    )
    clock = FakeClock()
    fake = _cluster(clock, session, log_lines=[(NAN_AT_S, "loss: nan")])
    controller = MonitorController(fake, store, [session], clock=clock)
    _polls_until(controller, clock, lambda: store.load(session.session_id).jobs["k0"].finished)
    job = store.load(session.session_id).jobs["k0"]
    assert [a.metadata["error_type"] for a in job.attempts] == ["nan"] * 3
    assert job.restarts == {"crash": 2}
    jobs = [fake.jobs[a.job_id] for a in job.attempts]
    for before, after in itertools.pairwise(jobs):
        assert after.submitted_at == before.cancelled_at  # resubmitted at once
    assert job.outcome is not None
    assert job.outcome.decision == "global restart cap reached (2/2)"
    assert fake.calls["sbatch"] == 3


def test_the_triage_of_the_same_signal_still_starts_before_the_cancel(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={"log_signals": [_nan_signal("cancel", triage="/t/nan.yaml")]},
        policies=[SELECTIVE],
    )
    session.config, session.plan = {}, None
    store.save(session)
    started: list[TriageRequest] = []

    def record(request: TriageRequest) -> TriageEvent:
        started.append(request)
        return TriageEvent(request.attempt, request.signal, request.line, request.at, "t", pid=7)

    clock = FakeClock()
    fake = _cluster(clock, session, log_lines=[(NAN_AT_S, "loss: nan")])
    controller = MonitorController(fake, store, [session], clock=clock, start_triage=record)
    _polls_until(controller, clock, lambda: store.load(session.session_id).jobs["k0"].finished)
    (request,) = started
    job = store.load(session.session_id).jobs["k0"]
    assert request.attempt == job.attempts[0].job_id
    assert [t.attempt for t in job.triages] == [request.attempt]
    assert fake.jobs[request.attempt].info(clock()).state == "CANCELLED"


def test_a_success_signal_completes_and_a_timeout_signal_grows_the_time_limit(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        time_limit="00:10:00",
        monitor={
            "termination_str": "TRAINING DONE",
            "restart_backoff_seconds": 1.0,
            "log_signals": [
                {"name": "eval_done", "pattern": "EVAL DONE", "mode": "success"},
                {"name": "budget", "pattern": "time budget spent", "mode": "timeout"},
            ],
        },
        policies=[{"class_name": "TimeLimitRestartPolicy", "factor": 2}],
    )
    clock = FakeClock()
    job = next(iter(session.jobs.values()))

    def make(_request: SubmitRequest, slurm_id: str, attempt: int) -> Timeline:
        log = resolve_log_path(job.log_path, slurm_id, job.slurm_name)
        if attempt == 0:  # stops at its time budget with exit 1
            return Timeline(
                run_s=10,
                end_state="FAILED",
                exit_code=1,
                log_path=log,
                log_lines=[(8, "time budget spent, saving")],
            )
        # prints its success signal, not the termination string, and exits 0
        return Timeline(run_s=10, log_path=log, log_lines=[(8, "EVAL DONE")])

    fake = FakeSlurmClient(clock, make)
    controller = MonitorController(fake, store, [session], clock=clock)
    _polls_until(controller, clock, lambda: store.load(session.session_id).jobs["k0"].finished)
    saved = store.load(session.session_id).jobs["k0"]
    assert [(a.mode, a.metadata.get("error_type")) for a in saved.attempts] == [
        ("timeout", "timeout"),
        ("success", None),
    ]
    assert saved.state == "completed"
    assert [req.extra_args[0] for _, req in fake.submissions] == [
        "--time=00:10:00",
        "--time=00:20:00",
    ]

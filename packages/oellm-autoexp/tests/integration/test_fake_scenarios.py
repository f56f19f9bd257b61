"""The spec's seven monitoring scenarios against the scripted fake SLURM, with event logging."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

SELECTIVE = {
    "class_name": "SelectiveRestartPolicy",
    "modes": ["crash", "stall"],
    "restart_on_error_types": ["cancelled", "hang", "nccl"],
    "exclude_error_types": ["oom", "exception"],
    "default_action": "stop",
    "max_retries": 2,
}
FAST = {"restart_backoff_seconds": 2.0, "inactivity_threshold_seconds": 30.0}


def _log_of(session: Any, job_id: str) -> Path:
    job = next(iter(session.jobs.values()))
    return resolve_log_path(job.log_path, job_id, job.slurm_name)


def _drive(
    controller: MonitorController, clock: FakeClock, *, step: float = 5, polls: int = 200
) -> int:
    return controller.run(sleep=lambda _s: clock.advance(step), max_polls=polls)


def _messages(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "oellm_autoexp.monitor")


def test_1_happy_path_one_array_sbatch_and_one_squeue_per_poll(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session, store = make_session(tmp_path, jobs=4, monitor=FAST)
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(pending_s=3, run_s=20, log_path=_log_of(session, jid))
    )
    controller = MonitorController(fake, store, [session], clock=clock)
    polls = _drive(controller, clock)
    assert [req.array for _, req in fake.submissions] == ["0-3"]
    assert fake.calls["sbatch"] == 1
    # Every poll issued exactly one squeue, whatever the number of jobs.
    assert fake.calls["squeue"] == polls
    saved = store.load(session.session_id)
    assert {job.state for job in saved.jobs.values()} == {"completed"}
    assert saved.status == "finished"
    assert [job.job_id for job in saved.jobs.values()] == [None] * 4
    assert [job.attempts[0].job_id for job in saved.jobs.values()] == [
        f"1000_{i}" for i in range(4)
    ]
    text = _messages(caplog)
    assert "job job2 (1000_2): SLURM state SUBMITTED -> PENDING" in text
    assert "job job2 (1000_2): SLURM state PENDING -> RUNNING" in text
    assert "job job2 (1000_2): SLURM state RUNNING -> COMPLETED" in text


def test_2_stall_is_detected_restarted_once_and_then_completes(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=FAST, policies=[SELECTIVE])
    clock = FakeClock()

    def timeline(_r: SubmitRequest, jid: str, attempt: int) -> Timeline:
        log = _log_of(session, jid)
        if attempt == 0:  # hangs after 10 s: RUNNING, log silent
            return Timeline(run_s=None, stall_after_s=10, log_path=log)
        return Timeline(run_s=20, log_path=log)

    fake = FakeSlurmClient(clock, timeline)
    controller = MonitorController(fake, store, [session], clock=clock)
    _drive(controller, clock)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "completed"
    assert [a.mode for a in job.attempts] == ["stall", "success"]
    assert job.attempts[0].metadata["error_type"] == "hang"
    assert job.restarts == {"stall": 1}
    assert fake.calls["sbatch"] == 2
    assert fake.calls["scancel"] == 1
    first, second = job.attempts[0].job_id, job.attempts[1].job_id
    # The stalled job was cancelled in SLURM; the restart writes a new log file.
    assert fake.jobs[first].info(clock()).state == "CANCELLED"
    assert _log_of(session, second).exists() and _log_of(session, second) != _log_of(session, first)
    assert [t["to"] for t in job.transitions][:4] == ["running", "stalled", "pending", "running"]
    text = _messages(caplog)
    assert f"job job0: restarted {first} -> {second}" in text
    assert (
        "policy SelectiveRestartPolicy decided restart "
        "(reason: error_type hang is restartable; attempt 1 for stall" in text
    )


def test_3_crash_without_a_restart_policy_is_failed_and_not_rerun(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=FAST)
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock,
        lambda _r, jid, _n: Timeline(
            run_s=8,
            end_state="FAILED",
            exit_code=3,
            reason="NonZeroExitCode",
            log_path=_log_of(session, jid),
        ),
    )
    controller = MonitorController(fake, store, [session], clock=clock)
    _drive(controller, clock)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "failed"
    assert fake.calls["sbatch"] == 1
    assert job.outcome is not None
    assert job.outcome.error_type == "slurm_failure"
    assert job.outcome.details["exit_code"] == 3
    assert "policy none decided stop (reason: no restart policy for mode crash" in _messages(caplog)


@pytest.mark.parametrize(
    ("max_retries", "sbatch_calls", "final"), [(3, 3, "completed"), (1, 2, "failed")]
)
def test_4_timeout_restarts_with_a_longer_limit_or_stops_at_the_budget(
    tmp_path: Path, make_session: Any, max_retries: int, sbatch_calls: int, final: str
) -> None:
    policy = {"class_name": "TimeLimitRestartPolicy", "factor": 2.0, "max_retries": max_retries}
    session, store = make_session(
        tmp_path, jobs=1, array=False, monitor=FAST, policies=[policy], time_limit="00:10:00"
    )
    clock = FakeClock()

    def timeline(req: SubmitRequest, jid: str, _attempt: int) -> Timeline:
        # The job needs 35 min; SLURM kills it at its --time limit.
        limit = next(a for a in req.extra_args if a.startswith("--time=")).split("=", 1)[1]
        h, m, s = (int(x) for x in limit.split(":"))
        limit_s = h * 3600 + m * 60 + s
        log = _log_of(session, jid)
        if limit_s < 35 * 60:
            return Timeline(run_s=limit_s, end_state="TIMEOUT", reason="TimeLimit", log_path=log)
        return Timeline(run_s=35 * 60, log_path=log)

    fake = FakeSlurmClient(clock, timeline)
    controller = MonitorController(fake, store, [session], clock=clock)
    _drive(controller, clock, step=60, polls=500)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == final
    assert fake.calls["sbatch"] == sbatch_calls
    limits = [next(a for a in r.extra_args if a.startswith("--time=")) for _, r in fake.submissions]
    assert limits[:3] == ["--time=00:10:00", "--time=00:20:00", "--time=00:40:00"][:sbatch_calls]
    assert job.attempts[0].mode == "timeout"
    assert job.attempts[0].metadata["error_type"] == "timeout"
    assert job.attempts[0].metadata["reason"] == "TimeLimit"
    if final == "failed":
        assert job.outcome is not None
        assert job.outcome.decision == "retry budget spent (1/1)"


def test_5_manual_scancel_is_a_cancelled_crash_and_is_restarted_with_logging(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session, store = make_session(tmp_path, jobs=2, monitor=FAST, policies=[SELECTIVE])
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(run_s=60, log_path=_log_of(session, jid))
    )
    controller = MonitorController(fake, store, [session], clock=clock)
    controller.poll_once()
    clock.advance(10)
    controller.poll_once()
    fake.user_scancel("1000_1")
    _drive(controller, clock)
    saved = store.load(session.session_id)
    job = saved.jobs["k1"]
    assert job.state == "completed"
    assert job.attempts[0].mode == "crash"
    assert job.attempts[0].metadata["error_type"] == "cancelled"
    assert job.attempts[0].metadata["subsystem"] == "slurm"
    # The restart resubmits only task 1 of the array script.
    assert [r.array for _, r in fake.submissions] == ["0-1", "1"]
    assert saved.jobs["k0"].restarts == {}
    text = _messages(caplog)
    assert "job job1 (1000_1): SLURM state RUNNING -> CANCELLED" in text
    assert "error_type cancelled is restartable" in text
    assert "job job1: restarted 1000_1 -> 1001_1" in text


def test_6_cuda_oom_in_the_log_is_an_excluded_crash_and_is_not_restarted(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=FAST, policies=[SELECTIVE])
    clock = FakeClock()
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    fake = FakeSlurmClient(
        clock,
        lambda _r, jid, _n: Timeline(
            run_s=12,
            end_state="FAILED",
            exit_code=1,
            log_lines=[(10, oom)],
            log_path=_log_of(session, jid),
        ),
    )
    controller = MonitorController(fake, store, [session], clock=clock)
    _drive(controller, clock)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "failed"
    assert job.outcome is not None
    assert (job.outcome.mode, job.outcome.error_type, job.outcome.details["subsystem"]) == (
        "crash",
        "oom",
        "cuda",
    )
    assert fake.calls["sbatch"] == 1
    text = _messages(caplog)
    assert "signal oom (mode=crash, action=None)" in text
    assert "1 signals, 0 submitted" in text  # the poll summary counts the match
    assert "decided stop (reason: error_type oom is excluded from restarts" in text


def test_7_a_new_monitor_resumes_from_the_session_file_with_the_same_job_ids(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=3, monitor=FAST, policies=[SELECTIVE])
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(run_s=40, log_path=_log_of(session, jid))
    )
    first = MonitorController(fake, store, [session], clock=clock)
    first.poll_once()
    clock.advance(10)
    first.poll_once()
    del first  # the monitor process is gone; only the session file remains
    resumed_session = store.load(session.session_id)
    assert [j.job_id for j in resumed_session.jobs.values()] == ["1000_0", "1000_1", "1000_2"]
    resumed = MonitorController(fake, store, [resumed_session], clock=clock)
    _drive(resumed, clock)
    saved = store.load(session.session_id)
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    assert fake.calls["sbatch"] == 1


def test_7b_a_crash_between_intent_and_sbatch_is_reconciled_without_duplicates(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=2, monitor=FAST)
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(run_s=20, log_path=_log_of(session, jid))
    )

    class Killed(BaseException):
        pass

    real_submit = fake.submit

    def submit_then_die(request: SubmitRequest) -> str:
        real_submit(request)  # sbatch went through ...
        raise Killed  # ... and the monitor died before recording the id

    fake.submit = submit_then_die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        MonitorController(fake, store, [session], clock=clock).poll_once()
    on_disk = store.load(session.session_id)
    assert all(j.submit_token and j.job_id is None for j in on_disk.jobs.values())
    fake.submit = real_submit  # type: ignore[method-assign]
    resumed = MonitorController(fake, store, [on_disk], clock=clock)
    _drive(resumed, clock)
    saved = store.load(session.session_id)
    assert fake.calls["sbatch"] == 1
    assert [j.attempts[0].job_id for j in saved.jobs.values()] == ["1000_0", "1000_1"]
    assert {j.state for j in saved.jobs.values()} == {"completed"}


def test_7c_an_intent_whose_sbatch_never_ran_is_submitted_on_resume(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=2, monitor=FAST)
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(run_s=20, log_path=_log_of(session, jid))
    )
    for job in session.jobs.values():
        job.submit_token = "autoexp-dead-beef"  # written, then the monitor died before sbatch
    store.save(session)
    _drive(MonitorController(fake, store, [store.load(session.session_id)], clock=clock), clock)
    assert fake.calls["sbatch"] == 1
    assert {j.state for j in store.load(session.session_id).jobs.values()} == {"completed"}


def test_transient_squeue_failures_never_fail_a_job_and_actions_are_collected(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=FAST)
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock,
        lambda _r, jid, _n: Timeline(
            run_s=20,
            log_path=_log_of(session, jid),
            log_lines=[(5, "iteration 100: saved checkpoint to /ckpt/100")],
        ),
    )
    controller = MonitorController(fake, store, [session], clock=clock)
    controller.poll_once()
    fake.fail_next["squeue"] = 3
    reports = []
    for _ in range(3):
        clock.advance(100)  # long silences while squeue fails are not stalls or failures
        reports.append(controller.poll_once())
    assert all(r.slurm_error for r in reports)
    assert store.load(session.session_id).jobs["k0"].state == "running"
    _drive(controller, clock)
    assert store.load(session.session_id).jobs["k0"].state == "completed"
    actions = controller.drain_actions()
    assert [(a.action, a.signal, a.job) for a in actions] == [
        ("checkpoint_saved", "checkpoint_saved", "job0")
    ]
    assert controller.drain_actions() == []


@pytest.mark.parametrize(("ckpt", "final"), [(True, "completed"), (False, "failed")])
def test_termination_cmd_decides_whether_a_clean_exit_is_a_completed_run(
    tmp_path: Path, make_session: Any, ckpt: bool, final: str
) -> None:
    monitor = {**FAST, "termination_cmd": "test -e {output_dir}/final.ckpt"}
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=monitor)
    if ckpt:
        (Path(session.jobs["k0"].output_dir) / "final.ckpt").write_text("x")
    clock = FakeClock()
    fake = FakeSlurmClient(
        clock, lambda _r, jid, _n: Timeline(run_s=5, log_path=_log_of(session, jid))
    )
    _drive(MonitorController(fake, store, [session], clock=clock), clock)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == final
    if not ckpt:
        assert job.outcome is not None
        assert job.outcome.error_type == "incomplete"


def test_a_restart_resumes_from_the_latest_checkpoint(tmp_path: Path, make_session: Any) -> None:
    policy = {"class_name": "CheckpointRestartPolicy", "modes": ["crash"], "max_retries": 2}
    session, store = make_session(tmp_path, jobs=2, monitor=FAST, policies=[policy])
    ckpts = Path(session.jobs["k1"].output_dir) / "checkpoints"
    ckpts.mkdir()
    clock = FakeClock()

    def timeline(_r: SubmitRequest, jid: str, attempt: int) -> Timeline:
        log = _log_of(session, jid)
        if jid.endswith("_1") and attempt == 0:
            for step in (100, 200):
                (ckpts / f"iter_{step:07d}").mkdir()
            return Timeline(run_s=10, end_state="NODE_FAIL", log_path=log)
        return Timeline(run_s=10, log_path=log)

    fake = FakeSlurmClient(clock, timeline)
    _drive(MonitorController(fake, store, [session], clock=clock), clock)
    saved = store.load(session.session_id)
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    restart = fake.submissions[1][1]
    assert restart.array == "1"
    latest = str(ckpts / "iter_0000200")
    assert f"--export=ALL,AUTOEXP_RESUME_FROM={latest}" in restart.extra_args
    assert saved.jobs["k1"].env == {"AUTOEXP_RESUME_FROM": latest}
    assert saved.jobs["k1"].attempts[0].metadata["error_type"] == "node_failure"


def test_a_silent_log_with_a_changing_output_file_is_not_a_stall_until_both_stop(
    tmp_path: Path, make_session: Any
) -> None:
    # The SLURM log goes quiet after 10 s, but the run keeps writing its output file (the
    # session's output_paths) until t=100 s: the stall clock starts only when both are silent.
    session, store = make_session(tmp_path, jobs=1, array=False, monitor=FAST)
    clock = FakeClock()
    start = clock()
    fake = FakeSlurmClient(
        clock,
        lambda _r, jid, _n: Timeline(run_s=None, stall_after_s=10, log_path=_log_of(session, jid)),
    )
    output = Path(next(iter(session.jobs.values())).output_paths[0])
    controller = MonitorController(fake, store, [session], clock=clock)

    def sleep(_s: float) -> None:
        clock.advance(5)
        if clock() - start <= 100:
            with output.open("a") as handle:
                handle.write(f"metrics at {clock()}\n")

    controller.run(sleep=sleep, max_polls=60)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "failed"  # no restart policy: the stall ends the job
    stalled = next(t for t in job.transitions if t["to"] == "stalled")
    # Silent since t=100 s (last output write); threshold 30 s; polls every 5 s.
    assert 130 < stalled["at"] - start <= 140
    assert job.attempts[0].mode == "stall"

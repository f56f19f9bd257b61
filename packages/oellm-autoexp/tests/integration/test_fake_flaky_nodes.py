"""Flaky nodes on the scripted fake SLURM: a bad node is excluded from the restarts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.cli import main
from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.node_exclusions import load_project_exclusions
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.persistence.store import SessionStore
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

RESTART_NODE_ERRORS = {
    "class_name": "SelectiveRestartPolicy",
    "modes": ["crash"],
    "restart_on_error_types": ["nccl", "node_failure", "gpu_hardware"],
    "default_action": "stop",
    "max_retries": 5,
}
FAST = {"restart_backoff_seconds": 2.0, "inactivity_threshold_seconds": 60.0}


def _scripted_bad_node(session: Any) -> Any:
    """Jobs land on bad01 unless sbatch excludes it; there they fail with node-level errors."""

    def timeline(request: SubmitRequest, jid: str, attempt: int) -> Timeline:
        job = next(j for j in session.jobs.values() if j.slurm_name == request.job_name)
        log = resolve_log_path(job.log_path, jid, job.slurm_name)
        excluded = any(a.startswith("--exclude=") and "bad01" in a for a in request.extra_args)
        if excluded:
            return Timeline(run_s=10, nodes="good01", log_path=log, log_lines=[(5, "DONE")])
        if attempt % 2 == 0:  # the node dies under the job
            return Timeline(
                run_s=5, end_state="NODE_FAIL", exit_code=1, nodes="bad01", log_path=log
            )
        return Timeline(
            run_s=5,
            end_state="FAILED",
            exit_code=1,
            nodes="bad01",
            log_path=log,
            log_lines=[(2, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus")],
        )

    return timeline


def _run_on_bad_node(
    root: Path, make_session: Any, *, jobs: int, monitor: dict[str, Any], policy: dict[str, Any]
) -> tuple[Any, Any, FakeSlurmClient]:
    """Drive `jobs` single-job scripts to their end on the scripted cluster with bad01."""
    session, store = make_session(root, jobs=jobs, array=False, monitor=monitor, policies=[policy])
    clock = FakeClock()
    fake = FakeSlurmClient(clock, _scripted_bad_node(session))
    MonitorController(fake, store, [session], clock=clock).run(
        sleep=lambda _s: clock.advance(3), max_polls=200
    )
    return session, store, fake


def test_a_bad_node_is_excluded_after_two_node_level_failures_and_status_reports_it(
    tmp_path: Path,
    make_session: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO)
    monitor = {**FAST, "termination_str": "DONE", "exclude_nodes_after": 2}
    session, store, fake = _run_on_bad_node(
        tmp_path, make_session, jobs=2, monitor=monitor, policy=RESTART_NODE_ERRORS
    )

    saved = store.load(session.session_id)
    assert saved.excluded_nodes == ["bad01"]
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    excludes = [[a for a in r.extra_args if a.startswith("--exclude")] for _, r in fake.submissions]
    # Two first submissions land on bad01 and die (NODE_FAIL): two node-level failures on bad01,
    # so both restarts avoid it and finish on good01.
    assert excludes == [[], [], ["--exclude=bad01"], ["--exclude=bad01"]]
    metas = [a.metadata for j in saved.jobs.values() for a in j.attempts]
    assert [(m.get("error_type"), m.get("nodes")) for m in metas] == [
        ("node_failure", "bad01"),
        (None, "good01"),
        ("node_failure", "bad01"),
        (None, "good01"),
    ]
    assert "excluding node(s) bad01 from later submissions" in caplog.text

    capsys.readouterr()
    assert main(["status", "--state-dir", str(store.state_dir)]) == 0
    assert f"session {saved.session_id}: excluded nodes bad01" in capsys.readouterr().out


def test_one_job_failing_twice_on_one_node_excludes_it_the_xid_log_line_counts(
    tmp_path: Path, make_session: Any
) -> None:
    monitor = {**FAST, "termination_str": "DONE", "exclude_nodes_after": 2}
    session, store, _fake = _run_on_bad_node(
        tmp_path, make_session, jobs=1, monitor=monitor, policy=RESTART_NODE_ERRORS
    )

    job = next(iter(store.load(session.session_id).jobs.values()))
    # NODE_FAIL, then a GPU Xid in the log (exit 1): both blame bad01; the third attempt avoids it.
    assert [a.metadata.get("error_type") for a in job.attempts] == [
        "node_failure",
        "gpu_hardware",
        None,
    ]
    assert [a.metadata.get("nodes") for a in job.attempts] == ["bad01", "bad01", "good01"]
    assert job.state == "completed"


@pytest.mark.parametrize(("after", "limit"), [(0, 8), (1, 0)])
def test_exclusion_is_off_with_zero_and_the_list_never_grows_past_the_limit(
    tmp_path: Path, make_session: Any, after: int, limit: int
) -> None:
    monitor = {**FAST, "exclude_nodes_after": after, "max_excluded_nodes": limit}
    policy = {**RESTART_NODE_ERRORS, "max_retries": 2}
    session, store, fake = _run_on_bad_node(
        tmp_path, make_session, jobs=1, monitor=monitor, policy=policy
    )
    assert store.load(session.session_id).excluded_nodes == []
    assert all(not any("--exclude" in a for a in r.extra_args) for _, r in fake.submissions)
    assert len(fake.submissions) == 3  # the first attempt and both restarts, all on bad01


def test_exclusions_are_kept_for_the_project_and_a_later_session_avoids_them_at_once(
    tmp_path: Path, make_session: Any
) -> None:
    monitor = {**FAST, "termination_str": "DONE", "exclude_nodes_after": 2}
    _run_on_bad_node(tmp_path, make_session, jobs=2, monitor=monitor, policy=RESTART_NODE_ERRORS)
    state_dir = SessionStore.for_output_dir(tmp_path).state_dir
    assert load_project_exclusions(state_dir) == ["bad01"]

    # A new session of the same project (same monitoring_state): its FIRST submission already
    # excludes bad01, so its one job runs once, on good01.
    later, store, fake = _run_on_bad_node(
        tmp_path, make_session, jobs=1, monitor=monitor, policy=RESTART_NODE_ERRORS
    )
    first_submission = fake.submissions[0][1]
    assert "--exclude=bad01" in first_submission.extra_args
    job = next(iter(store.load(later.session_id).jobs.values()))
    assert [a.metadata.get("nodes") for a in job.attempts] == ["good01"]
    assert job.state == "completed"


def test_a_new_exclusion_is_pushed_into_jobs_still_queued_with_scontrol_update(
    tmp_path: Path, make_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    monitor = {**FAST, "termination_str": "DONE", "exclude_nodes_after": 1}
    session, store = make_session(
        tmp_path, jobs=2, array=False, monitor=monitor, policies=[RESTART_NODE_ERRORS]
    )
    first, second = (j.slurm_name for j in session.jobs.values())

    def timeline(request: SubmitRequest, jid: str, attempt: int) -> Timeline:
        job = next(j for j in session.jobs.values() if j.slurm_name == request.job_name)
        log = resolve_log_path(job.log_path, jid, job.slurm_name)
        if request.job_name == first and attempt == 0:  # dies with its node at once
            return Timeline(
                run_s=5, end_state="NODE_FAIL", exit_code=1, nodes="bad01", log_path=log
            )
        # the second job waits in the queue long enough to be updated while it waits
        pending = 60.0 if request.job_name == second else 0.0
        return Timeline(
            pending_s=pending, run_s=5, nodes="good01", log_path=log, log_lines=[(2, "DONE")]
        )

    clock = FakeClock()
    fake = FakeSlurmClient(clock, timeline)
    MonitorController(fake, store, [session], clock=clock).run(
        sleep=lambda _s: clock.advance(3), max_polls=200
    )
    queued_id = next(jid for jid, r in fake.submissions if r.job_name == second)
    # submitted before bad01 was known: no --exclude on the command line, yet SLURM has it now
    assert not any(a.startswith("--exclude") for a in fake.jobs[queued_id].request.extra_args)
    assert fake.show(queued_id)["ExcNodeList"] == "bad01"
    assert f"queued job(s) {queued_id} now exclude bad01 (scontrol update)" in caplog.text
    assert {j.state for j in store.load(session.session_id).jobs.values()} == {"completed"}

"""The Python API as another package uses it: its own SLURM client, its own reporter.

plan -> submit -> monitor until done -> status -> cancel, through `oellm_autoexp.api` only, with
the scripted SLURM (`FakeSlurmClient`, the boundary) and a reporter that records what it is told.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp import api
from oellm_autoexp.errors import AutoexpUsageError
from oellm_autoexp.planning import PlanResult
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"


class Recorder:
    """A reporter that keeps everything (the library must print nothing itself)."""

    def __init__(self) -> None:
        self.infos: list[str] = []
        self.warnings: list[str] = []
        self.actions: list[tuple[str, str]] = []

    def info(self, message: str) -> None:
        self.infos.append(message)

    def warning(self, message: str) -> None:
        self.warnings.append(message)

    def action(self, action: Any) -> None:
        self.actions.append((action.action, action.job))


def _fake(result: PlanResult, clock: FakeClock, *, run_s: float | None) -> FakeSlurmClient:
    """Each task writes a checkpoint line, then the completion marker, to its planned log."""
    jobs = {(str(j.script), j.array.task_index if j.array else 0): j for j in result.plan.jobs}

    def timeline(request: SubmitRequest, display_id: str, _attempt: int) -> Timeline:
        task = int(display_id.partition("_")[2] or 0)
        job = jobs[(str(request.script), task)]
        lines = [(2.0, "Saved checkpoint to /ck/iter_10")]
        if run_s is not None:
            lines.append((run_s - 1, f"oellm-autoexp: completed {job.name}"))
        return Timeline(run_s=run_s, log_path=job.resolved_log_path(display_id), log_lines=lines)

    return FakeSlurmClient(clock, timeline)


def test_plan_submit_monitor_until_done_and_status_through_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reporter = Recorder()
    result = api.plan(
        EXAMPLE, [f"project.base_output_dir={tmp_path}"], test_only="never", reporter=reporter
    )
    assert len(result.plan.jobs) == 4 and (result.plan.plan_dir / "plan.json").is_file()
    clock = FakeClock()
    client = _fake(result, clock, run_s=10)

    submitted = api.submit(result, client, reporter=reporter)
    assert submitted.complete and submitted.confirmed == 4
    session_id = submitted.session.session_id
    assert reporter.infos[-1] == f"session {session_id}: 4 job(s) submitted"

    done = api.monitor_until_done(
        submitted.store, client, reporter=reporter, sleep=clock.advance, clock=clock
    )
    assert [s.session_id for s in done.sessions] == [session_id]
    assert not done.failed and api.exit_code(done) == 0
    names = sorted(j.name for j in result.plan.jobs)
    assert sorted(job for event, job in reporter.actions if event == "checkpoint_saved") == names

    rows = api.status(submitted.store)
    assert sorted(r.name for r in rows) == names
    assert {(r.session_id, r.state, r.slurm_state, r.outcome_mode) for r in rows} == {
        (session_id, "completed", "COMPLETED", "success")
    }
    assert all(r.slurm_id and r.slurm_id.startswith(f"{client.submissions[0][0]}_") for r in rows)
    assert reporter.warnings == []
    assert capsys.readouterr() == ("", "")  # the library printed nothing


def test_monitor_once_then_cancel_marks_live_jobs_cancelled(tmp_path: Path) -> None:
    result = api.plan(EXAMPLE, [f"project.base_output_dir={tmp_path}"], test_only="never")
    clock = FakeClock()
    client = _fake(result, clock, run_s=None)  # runs until cancelled
    submitted = api.submit(result, client)
    clock.advance(5)
    polled = api.monitor_once(submitted.store, client, clock=clock)
    assert {j.state for s in polled.sessions for j in s.jobs.values()} == {"running"}

    reporter = Recorder()
    cancelled = api.cancel(submitted.store, client, reporter=reporter)
    assert len(cancelled) == 4
    assert all(client.jobs[job_id].cancelled_at == clock() for job_id in cancelled)
    rows = api.status(submitted.store)
    assert {(r.state, r.outcome_mode, r.outcome_error_type) for r in rows} == {
        ("failed", "crash", "cancelled")
    }
    assert reporter.infos == [
        f"session {submitted.session.session_id}: cancelled {', '.join(cancelled)}"
    ]
    assert api.monitor_once(submitted.store, client).sessions == []  # nothing active is left


def test_monitor_for_an_unknown_job_is_a_usage_error(tmp_path: Path) -> None:
    result = api.plan(EXAMPLE, [f"project.base_output_dir={tmp_path}"], test_only="never")
    client = FakeSlurmClient(FakeClock())
    submitted = api.submit(result, client)
    with pytest.raises(AutoexpUsageError, match="no job named 'nope'"):
        api.monitor_until_done(submitted.store, client, job="nope")

"""FakeSlurmClient follows its timelines, writes logs, injects failures, forgets old jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from oellm_autoexp.slurm.client import SlurmCommandError, SubmissionError, SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline


def test_array_tasks_follow_their_own_timelines_and_write_logs(tmp_path: Path) -> None:
    clock = FakeClock()

    def timelines(req: SubmitRequest, job_id: str, attempt: int) -> Timeline:
        assert attempt == 0
        task = int(job_id.partition("_")[2])
        end = "FAILED" if task == 1 else "COMPLETED"
        return Timeline(
            pending_s=5,
            run_s=10,
            end_state=end,
            exit_code=int(task == 1),
            log_path=tmp_path / f"t{task}.log",
            log_lines=[(2, "loss 1.0")],
        )

    fake = FakeSlurmClient(clock, timelines)
    array = fake.submit(SubmitRequest(tmp_path / "a.sbatch", job_name="a", array="0-1"))
    ids = [f"{array}_0", f"{array}_1"]
    assert {j.state for j in fake.query(ids).jobs.values()} == {"PENDING"}
    clock.advance(8)
    assert {j.state for j in fake.query(ids).jobs.values()} == {"RUNNING"}
    assert (tmp_path / "t0.log").read_text() == "step ok\nloss 1.0\n"
    clock.advance(10)
    done = fake.query(ids).jobs
    assert (done[ids[0]].state, done[ids[1]].state) == ("COMPLETED", "FAILED")
    assert done[ids[1]].exit_code == 1
    assert fake.calls["squeue"] == 3


def test_a_stalled_job_keeps_running_but_stops_writing(tmp_path: Path) -> None:
    clock = FakeClock()
    log = tmp_path / "s.log"
    fake = FakeSlurmClient(clock, lambda *_: Timeline(run_s=None, stall_after_s=3, log_path=log))
    job = fake.submit(SubmitRequest(tmp_path / "s.sbatch", job_name="s"))
    for _ in range(3):
        clock.advance(2)
        fake.query([job])
    size = log.stat().st_size
    clock.advance(100)
    assert fake.query([job]).jobs[job].state == "RUNNING"
    assert log.stat().st_size == size
    fake.cancel([job])
    assert fake.query([job]).jobs[job].state == "CANCELLED"


def test_injected_failures_and_forgotten_jobs(tmp_path: Path) -> None:
    clock = FakeClock()
    fake = FakeSlurmClient(clock, lambda *_: Timeline(run_s=1), forget_after_s=60)
    job = fake.submit(SubmitRequest(tmp_path / "f.sbatch", job_name="f", comment="tok"))
    fake.fail_next["squeue"] = 1
    with pytest.raises(SlurmCommandError):
        fake.query([job])
    assert fake.find_by_comment(["tok"])["tok"][0].job_id == job
    clock.advance(30)
    assert fake.query([job]).jobs[job].state == "COMPLETED"
    clock.advance(60)
    assert fake.query([job]).unknown == {job}
    fake.reject_submit = "Invalid account"
    with pytest.raises(SubmissionError, match="Invalid account"):
        fake.submit(SubmitRequest(tmp_path / "g.sbatch", job_name="g"))

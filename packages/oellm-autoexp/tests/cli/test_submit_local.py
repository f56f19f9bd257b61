"""`submit --local`: the plan's scripts as real local processes, monitored as on SLURM."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from oellm_autoexp.cli import main
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.local import LocalClient

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"


@pytest.mark.slow
def test_local_submit_runs_every_job_to_its_completion_marker_in_its_planned_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["submit", str(EXAMPLE), f"project.base_output_dir={tmp_path}", "--test-only=never"]
    assert main([*args, "--local", "--array-subset", "0,3"]) == 0
    out = capsys.readouterr().out
    state = tmp_path / "monitoring_state"
    (session_file,) = [p for p in state.glob("*.json") if p.stem != "events"]
    session = json.loads(session_file.read_text())
    jobs = session["jobs"]
    assert len(jobs) == 2 and {j["state"] for j in jobs} == {"completed"}
    assert f"session {session['session_id']}: 2 job(s) submitted" in out
    for job in jobs:
        attempt = job["attempts"][0]
        log = Path(
            job["log_path"]
            .replace("%A", attempt["job_id"].split("_")[0])
            .replace("%a", str(job["array_index"]))
        )
        text = log.read_text()
        assert f"oellm-autoexp: completed {job['name']}" in text
        assert "lr " in text and " on " in text  # the command's own output
        assert attempt["metadata"]["slurm_state"] == "COMPLETED"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-monitor"], "--local runs the jobs inside this command: it cannot return"),
        (["slurm.use_srun=true"], "--local runs the scripts without SLURM, but they call srun"),
        (["--dry-run"], "--local and --dry-run exclude each other"),
    ],
)
def test_local_refuses_what_it_cannot_do_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    args = ["submit", str(EXAMPLE), f"project.base_output_dir={tmp_path}", "--test-only=never"]
    assert main([*args, "--local", *extra]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"oellm-autoexp: error: {message}")


def test_local_client_runs_in_order_and_cancel_kills_the_job(tmp_path: Path) -> None:
    script = tmp_path / "job.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --output={tmp_path}/log_%A_%a.out\n"
        'echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID X=$X"; sleep 30\n'
    )
    client = LocalClient(first_job_id=500)
    base = client.submit(
        SubmitRequest(script, "j", array="0-1", comment="tok", extra_args=("--export=ALL,X=7",))
    )
    assert base == "500"
    states = client.query(["500_0", "500_1"]).jobs
    assert (states["500_0"].state, states["500_1"].state) == ("RUNNING", "PENDING")
    assert client.find_by_comment(["tok"])["tok"][0].job_id == "500_0"
    deadline = time.monotonic() + 10
    log = tmp_path / "log_500_0.out"
    while "task 0 of 500 X=7" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.cancel(["500_0"])
    states = client.query(["500_0", "500_1", "999"]).jobs
    assert states["500_0"].state == "CANCELLED"
    assert states["500_1"].state == "RUNNING"  # the next one started in the freed slot
    client.close()
    assert client.query(["500_1"]).jobs["500_1"].state == "CANCELLED"

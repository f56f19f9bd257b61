"""RealSlurmClient: parsing of both squeue JSON layouts, and the real commands on a local SLURM."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.slurm.client import (
    SlurmCommandError,
    SlurmNotInstalledError,
    SubmissionError,
    SubmitRequest,
    expand_array_spec,
)
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient, parse_sacct, parse_squeue_json

# Trimmed from the real output of squeue --json on SLURM 22.05 (this repo's test cluster).
SQUEUE_2205 = {
    "jobs": [
        {
            "job_id": 7,
            "array_job_id": 7,
            "array_task_id": None,
            "array_task_string": "2-3",
            "name": "sweep",
            "job_state": "PENDING",
            "state_reason": "Resources",
            "exit_code": 0,
            "time_limit": 10,
            "comment": "tok-a",
            "start_time": 0,
            "end_time": 0,
        },
        {
            "job_id": 8,
            "array_job_id": 7,
            "array_task_id": 0,
            "array_task_string": "",
            "name": "sweep",
            "job_state": "RUNNING",
            "state_reason": "None",
            "exit_code": 0,
            "time_limit": 10,
            "comment": "tok-a",
            "start_time": 1700000000,
            "end_time": 1700000600,
        },
        {
            "job_id": 9,
            "array_job_id": 7,
            "array_task_id": 1,
            "array_task_string": "",
            "name": "sweep",
            "job_state": "TIMEOUT",
            "state_reason": "TimeLimit",
            "exit_code": 0,
            "time_limit": 10,
            "comment": "tok-a",
            "start_time": 1700000000,
            "end_time": 1700000600,
        },
        {
            "job_id": 12,
            "array_job_id": 0,
            "array_task_id": None,
            "array_task_string": "",
            "name": "single",
            "job_state": "FAILED",
            "state_reason": "NonZeroExitCode",
            "exit_code": 256,
            "time_limit": None,
            "comment": "",
            "start_time": 5,
            "end_time": 6,
        },
    ]
}
# The same kind of records in the 23.02+ layout (numbers wrapped, states in lists).
SQUEUE_2302 = {
    "jobs": [
        {
            "job_id": 40,
            "array_job_id": {"set": True, "infinite": False, "number": 0},
            "array_task_id": {"set": False, "infinite": False, "number": 0},
            "name": "one",
            "job_state": ["CANCELLED"],
            "state_reason": "None",
            "comment": "",
            "exit_code": {
                "status": ["SIGNALED"],
                "return_code": {"set": True, "number": 0},
                "signal": {"id": {"set": True, "number": 15}, "name": "TERM"},
            },
            "time_limit": {"set": True, "infinite": False, "number": 5},
            "start_time": {"set": True, "number": 10},
            "end_time": {"set": True, "number": 20},
        },
    ]
}


def test_squeue_22_05_json_is_read_per_array_task_including_collapsed_pending_ones() -> None:
    jobs = parse_squeue_json(json.dumps(SQUEUE_2205))
    assert sorted(jobs) == ["12", "7_0", "7_1", "7_2", "7_3"]
    assert jobs["7_2"].state == jobs["7_3"].state == "PENDING"
    assert jobs["7_3"].array_task_id == 3
    assert jobs["7_1"].state == "TIMEOUT"
    assert jobs["7_1"].reason == "TimeLimit"
    assert jobs["7_1"].time_limit_s == 600
    assert jobs["7_0"].comment == "tok-a"
    assert jobs["12"].exit_code == 1
    assert jobs["12"].array_job_id is None
    assert jobs["12"].time_limit_s is None


def test_squeue_23_02_json_layout_is_read_too() -> None:
    job = parse_squeue_json(json.dumps(SQUEUE_2302))["40"]
    assert (job.state, job.exit_code, job.signal, job.time_limit_s) == ("CANCELLED", 0, 15, 300)
    assert job.terminal


def test_sacct_rows_and_array_specs() -> None:
    rows = parse_sacct("5_1|CANCELLED by 0|0:15|00:10:00|tok\n6|COMPLETED|0:0|00:01:00|\n")
    assert rows["5_1"].state == "CANCELLED"
    assert rows["5_1"].signal == 15
    assert rows["5_1"].comment == "tok"
    assert rows["6"].exit_code == 0
    assert expand_array_spec("0-3") == [0, 1, 2, 3]
    assert expand_array_spec("1,4,7-11:2%3") == [1, 4, 7, 9, 11]


def test_without_slurm_every_command_is_a_usage_error(tmp_path: Path) -> None:
    client = RealSlurmClient(env={"PATH": str(tmp_path)})
    with pytest.raises(SlurmNotInstalledError) as info:
        client.query(["1"])
    assert info.value.exit_code == 2
    with pytest.raises(SlurmNotInstalledError):
        client.submit(SubmitRequest(tmp_path / "x.sbatch", job_name="x"))


def _script(tmp_path: Path, name: str, body: str, *directives: str) -> Path:
    path = tmp_path / f"{name}.sbatch"
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), body]
    path.write_text("\n".join(lines) + "\n")
    return path


def _until(client: RealSlurmClient, ids: list[str], done: Any, timeout: float = 40) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = client.query(ids)
        if done(result):
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out; last answer {result}")


@pytest.mark.slurm
def test_real_array_submit_query_per_task_with_one_squeue_per_poll(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=2, timeout_s=20))
    script = _script(
        tmp_path,
        "arr",
        'echo "task $SLURM_ARRAY_TASK_ID"; sleep 1; exit $SLURM_ARRAY_TASK_ID',
        f"--output={tmp_path}/arr_%A_%a.out",
    )
    array_id = client.submit(SubmitRequest(script, job_name="arr", array="0-3", comment="tok-rc"))
    ids = [f"{array_id}_{t}" for t in range(4)]
    before = client.calls["squeue"]
    result = _until(
        client, ids, lambda r: all(j.terminal for j in r.jobs.values()) and len(r.jobs) == 4
    )
    polls = client.calls["squeue"] - before
    assert polls >= 1
    states = {k: (v.state, v.exit_code) for k, v in result.jobs.items()}
    assert states[ids[0]] == ("COMPLETED", 0)
    assert all(states[i][0] == "FAILED" for i in ids[1:])
    assert [states[i][1] for i in ids[1:]] == [1, 2, 3]
    assert (tmp_path / f"arr_{array_id}_2.out").read_text().strip() == "task 2"
    assert client.find_by_comment(["tok-rc"])["tok-rc"][0].array_job_id == array_id
    assert client.show(ids[0])["JobState"] == "COMPLETED"


@pytest.mark.slurm
def test_real_cancel_and_rejected_sbatch_stderr(slurm_cluster: Any, tmp_path: Path) -> None:
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=2, timeout_s=20))
    script = _script(tmp_path, "long", "sleep 300", f"--output={tmp_path}/long.out")
    job_id = client.submit(SubmitRequest(script, job_name="long"))
    _until(client, [job_id], lambda r: r.jobs[job_id].state == "RUNNING")
    client.cancel([job_id])
    result = _until(client, [job_id], lambda r: r.jobs[job_id].terminal)
    assert result.jobs[job_id].state == "CANCELLED"
    bad = _script(tmp_path, "bad", "true", "--partition=no_such_partition")
    with pytest.raises(SubmissionError, match=r"sbatch rejected .*bad\.sbatch: .*[Pp]artition"):
        client.submit(SubmitRequest(bad, job_name="bad"))
    assert os.environ.get("SLURM_CONF") != slurm_cluster.env["SLURM_CONF"]


def test_a_failing_squeue_is_retried_and_never_reports_jobs_as_gone(tmp_path: Path) -> None:
    # A stand-in squeue (the SLURM command boundary) that fails twice, then answers.
    counter = tmp_path / "n"
    squeue = tmp_path / "squeue"
    squeue.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n"
        'if [ "$n" -lt 2 ]; then echo "slurm_load_jobs error: Unexpected message" >&2; exit 1; fi\n'
        f"cat <<'J'\n{json.dumps(SQUEUE_2205)}\nJ\n"
    )
    squeue.chmod(0o755)
    sleeps: list[float] = []
    client = RealSlurmClient(
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        retry=RetryPolicy(attempts=3, timeout_s=10, backoff_s=0.25),
        use_sacct=False,
        sleep=sleeps.append,
    )
    result = client.query(["12", "7_1"])
    assert result.jobs["12"].state == "FAILED"
    assert result.unknown == set()
    assert sleeps == [0.25, 0.5]
    counter.write_text("0")
    client.retry = RetryPolicy(attempts=2, timeout_s=10, backoff_s=0)
    with pytest.raises(SlurmCommandError, match="squeue --json failed 2 times"):
        client.query(["12"])


def test_an_sbatch_that_times_out_after_queuing_is_adopted_not_resubmitted(tmp_path: Path) -> None:
    # Stand-ins at the command boundary: sbatch queues job 77 (squeue then shows it with the
    # comment token) but hangs before printing the id, as on an overloaded controller.
    queued = tmp_path / "queued.json"
    record = {
        "jobs": [
            {
                "job_id": 77,
                "array_job_id": 0,
                "array_task_id": None,
                "name": "t",
                "job_state": "PENDING",
                "state_reason": "Priority",
                "exit_code": 0,
                "comment": "tok-timeout",
            }
        ]
    }
    sbatch = tmp_path / "sbatch"
    sbatch.write_text(
        "#!/bin/sh\n"
        f"echo x >> {tmp_path}/sbatch_calls\n"
        f"cat > {queued} <<'J'\n{json.dumps(record)}\nJ\n"
        "sleep 5\n"
    )
    squeue = tmp_path / "squeue"
    squeue.write_text(
        f"#!/bin/sh\nif [ -e {queued} ]; then cat {queued}; else echo '{{\"jobs\": []}}'; fi\n"
    )
    for stub in (sbatch, squeue):
        stub.chmod(0o755)
    client = RealSlurmClient(
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        retry=RetryPolicy(attempts=3, timeout_s=0.5, backoff_s=0),
        sleep=lambda _s: None,
    )
    job_id = client.submit(
        SubmitRequest(tmp_path / "t.sbatch", job_name="t", comment="tok-timeout")
    )
    assert job_id == "77"
    assert (tmp_path / "sbatch_calls").read_text().count("x") == 1

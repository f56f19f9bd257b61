"""`monitor MONITOR.yaml` and `monitor CONFIG --job` / `status --config` on the local SLURM."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slurm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"
JOB = """#!/bin/bash
echo "step 1"
sleep 1
echo "Saved checkpoint to /ck/iter_${SLURM_ARRAY_TASK_ID:-0}"
sleep 1
echo "TRAINING DONE"
"""


def _cli(cluster: Any, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return cluster.cli(*args, cwd=cwd)


def _actions(stdout: str) -> list[tuple[str, str]]:
    found = re.findall(r"^action (\w+): job (\S+) ", stdout, re.MULTILINE)
    return [(event, job) for event, job in found]


def test_a_monitor_file_watches_slurm_jobs_it_did_not_submit(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    script = tmp_path / "job.sbatch"
    script.write_text(JOB)
    logs = tmp_path / "logs"
    logs.mkdir()
    single = slurm_cluster.run(
        "sbatch", "--parsable", "--job-name=watched", f"--output={logs}/one_%j.out", str(script)
    ).strip()
    array = slurm_cluster.run(
        "sbatch",
        "--parsable",
        "--job-name=watched",
        "--array=0-1",
        f"--output={logs}/arr_%A_%a.out",
        str(script),
    ).strip()
    events = tmp_path / "ended.txt"
    path = tmp_path / "watch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "monitoring": {"termination_str": "TRAINING DONE", "poll_interval_seconds": 0.5},
                "watch": [
                    {"name": "one", "job_id": single, "log": f"{logs}/one_%j.out"},
                    {"name": "task1", "job_id": f"{array}_1", "log": f"{logs}/arr_%A_%a.out"},
                ],
                "actions": {"run_ended": f"echo {{job}} {{job_id}} {{line}} >> {events}"},
            }
        )
    )
    done = _cli(slurm_cluster, "monitor", str(path), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    for job in ("one", "task1"):
        mine = [event for event, name in _actions(done.stdout) if name == job]
        assert "checkpoint_saved" in mine, done.stdout
        assert "completion_marker" in mine
        assert mine[-2:] == ["run_completed", "run_ended"] or mine[-2:] == [
            "run_ended",
            "run_completed",
        ]
    ended = sorted(events.read_text().splitlines())
    assert ended == sorted(
        [
            f"one {single} mode=success error_type=- slurm_state=COMPLETED",
            f"task1 {array}_1 mode=success error_type=- slurm_state=COMPLETED",
        ]
    )
    # No second sbatch: the standalone monitor never submits.
    queue = slurm_cluster.run("squeue", "-h", "-t", "all", "-n", "watched", "-o", "%i")
    assert sorted(queue.split()) == sorted([single, f"{array}_0", f"{array}_1"])


def test_monitor_config_job_waits_for_that_job_and_status_config_lists_all(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    submitted = _cli(slurm_cluster, "submit", str(EXAMPLE), "--no-monitor", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    name = "hello_lr0.0003_h512"
    one = _cli(slurm_cluster, "monitor", str(EXAMPLE), "--job", name, "--quiet", cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    rows = [line for line in one.stdout.splitlines() if "│" in line]
    assert len(rows) == 1 and name in rows[0] and "completed" in rows[0]
    assert _cli(slurm_cluster, "monitor", str(EXAMPLE), cwd=tmp_path).returncode == 0
    status = _cli(slurm_cluster, "status", "--config", str(EXAMPLE), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    rows = [line for line in status.stdout.splitlines() if "│" in line]
    assert len(rows) == 4 and all("completed" in row for row in rows)
    unknown = _cli(slurm_cluster, "monitor", str(EXAMPLE), "--job", "nope", cwd=tmp_path)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().startswith("oellm-autoexp: error: no job named 'nope'")

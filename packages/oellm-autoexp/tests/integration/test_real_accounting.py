"""`sacct` against a real slurmdbd: jobs that ended while no monitor ran keep their true outcome.

The cluster (`slurm_accounting_cluster`) runs MariaDB + slurmdbd and purges finished jobs from
slurmctld after 2 s. The CLI submits without monitoring, the jobs finish and leave squeue, and
only then does a monitor start: every state and exit code it records can have come from sacct
alone (the real client's sacct path), and no job may end up as `lost`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _config(tmp_path: Path) -> Path:
    """Two jobs: exit code 0 (success) and exit code 3 (a failed run)."""
    path = tmp_path / "exits.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": {"name": "exits", "base_output_dir": str(tmp_path / "runs")},
                "backend": {
                    "class_name": "CommandBackend",
                    "argv": ["python3", "-c", "import sys; sys.exit(int(sys.argv[1]))", "{code}"],
                },
                "sweep": {"axes": {"code": [0, 3]}, "name_template": "exit{code}"},
                "slurm": {"sbatch": {"time": "00:05:00"}, "use_srun": False},
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "oellm-autoexp: completed",
                    "poll_interval_seconds": 0.5,
                },
            }
        )
    )
    return path


def _wait_until_purged(cluster: Any, job_ids: list[str], timeout: float = 90) -> None:
    """Until slurmctld no longer knows any of `job_ids` (squeue -t all shows none)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = json.loads(cluster.run("squeue", "--json", "--states=all"))
        known = {str(job["job_id"]) for job in listing["jobs"]}
        if not known & set(job_ids):
            return
        time.sleep(1)
    raise AssertionError(f"jobs {job_ids} still in squeue after {timeout:.0f} s")


def test_jobs_that_ended_unwatched_get_their_final_state_from_sacct(
    slurm_accounting_cluster: Any, tmp_path: Path
) -> None:
    cluster = slurm_accounting_cluster
    config = _config(tmp_path)
    submitted = cluster.cli("submit", str(config), "--no-monitor", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    state_dir = tmp_path / "runs" / "monitoring_state"
    (session_file,) = state_dir.glob("*.json")
    jobs = json.loads(session_file.read_text())["jobs"]
    array_id = {job["job_id"].split("_")[0] for job in jobs}
    assert len(array_id) == 1
    task_ids = sorted(job["job_id"] for job in jobs)
    # SLURM's own ids: the array's tasks (squeue --json lists tasks under their own job_id).
    listing = json.loads(cluster.run("squeue", "--json", "--states=all"))
    slurm_ids = [
        str(j["job_id"]) for j in listing["jobs"] if str(j.get("array_job_id")) in array_id
    ]
    assert slurm_ids, listing

    _wait_until_purged(cluster, slurm_ids)
    accounted = cluster.run(
        "sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(task_ids)
    )
    assert sorted(accounted.split()) == sorted(
        [f"{task_ids[0]}|COMPLETED|0:0", f"{task_ids[1]}|FAILED|3:0"]
    ), accounted

    monitored = cluster.cli("monitor", str(config), "--quiet", cwd=tmp_path)
    assert monitored.returncode == 1, monitored.stdout + monitored.stderr  # exit3 failed
    saved = {job["name"]: job for job in json.loads(session_file.read_text())["jobs"]}
    ok, failed = saved["exit0"], saved["exit3"]
    assert ok["state"] == "completed"
    assert ok["attempts"][-1]["slurm_state"] == "COMPLETED"
    assert failed["state"] == "failed"
    last = failed["attempts"][-1]
    assert last["slurm_state"] == "FAILED"
    assert last["metadata"]["exit_code"] == 3
    assert last["metadata"]["error_type"] != "lost"
    assert "lost" not in session_file.read_text()
    status = cluster.cli("status", "--config", str(config), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "lost" not in status.stdout
    # Provenance: status points at the plan's record, which names this SLURM.
    (record_path,) = (tmp_path / "runs").glob("plans/*/provenance.json")
    assert f"provenance {record_path}" in status.stdout
    record = json.loads(record_path.read_text())
    assert record["slurm"] == {"version": cluster.run("sbatch", "--version").strip()}

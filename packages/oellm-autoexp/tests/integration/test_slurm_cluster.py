"""The local SLURM fixture really schedules jobs, and stops exactly the daemons it started."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.testing import slurm_cluster as slurm_cluster_module

pytestmark = pytest.mark.slurm


def _wait_state(cluster: Any, job_id: str, states: set[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        out = cluster.run("scontrol", "show", "job", job_id, "-o", check=False)
        for field in out.split():
            if field.startswith("JobState="):
                state = field.split("=", 1)[1]
        if state in states:
            return state
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} stayed {state or 'unknown'}, wanted one of {states}")


def test_a_batch_job_runs_on_the_local_node_and_writes_its_log(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    out = tmp_path / "hello.out"
    job_id = slurm_cluster.run(
        "sbatch", "--parsable", f"--output={out}", "--wrap", "echo hello-from-$SLURM_JOB_ID"
    ).strip()
    assert job_id.isdigit()
    assert _wait_state(slurm_cluster, job_id, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert out.read_text().strip() == f"hello-from-{job_id}"
    listing = json.loads(slurm_cluster.run("squeue", "--json", "--states=all"))
    assert any(str(job["job_id"]) == job_id for job in listing["jobs"])


def test_stop_terminates_only_the_daemons_of_its_own_cluster(tmp_path_factory: Any) -> None:
    module = slurm_cluster_module
    if module.missing_binaries():
        pytest.skip("SLURM is not installed")
    cluster = module.start_cluster(tmp_path_factory.mktemp("slurm-stop"))
    procs = dict(cluster.processes)
    assert set(procs) == {"munged", "slurmctld", "slurmd"}
    cluster.stop()
    assert all(proc.poll() is not None for proc in procs.values())


def _listening(pids: set[int]) -> list[str]:
    """Local addresses of the TCP/UDP sockets the processes `pids` listen on (`ss`)."""
    out = subprocess.run(
        ["ss", "-H", "-ltunp"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    found = []
    for line in out.splitlines():
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            found.append(line.split()[4])  # Netid State Recv-Q Send-Q Local:Port Peer ...
    return found


def test_the_fixture_daemons_listen_on_loopback_only(tmp_path_factory: Any) -> None:
    # Our rule: servers listen on 127.0.0.1 only (CommunicationParameters=NoInAddrAny, DbdAddr).
    module = slurm_cluster_module
    if module.missing_binaries(accounting=True) or shutil.which("ss") is None:
        pytest.skip("SLURM with accounting, or ss, is not installed")
    cluster = module.start_cluster(tmp_path_factory.mktemp("slurm-listen"), accounting=True)
    try:
        daemons = {"slurmctld", "slurmd", "slurmdbd"}
        assert daemons <= set(cluster.processes)
        slurm = _listening({cluster.processes[name].pid for name in daemons})
        assert len(slurm) == 3, slurm  # each SLURM daemon listens on one TCP port
        # ... and no process of the fixture (munged, MariaDB too) listens beyond loopback
        addresses = _listening({p.pid for p in cluster.processes.values()})
        exposed = [a for a in addresses if not a.startswith(("127.0.0.1:", "[::1]:"))]
        assert exposed == [], f"listening beyond loopback: {exposed}"
    finally:
        cluster.stop()

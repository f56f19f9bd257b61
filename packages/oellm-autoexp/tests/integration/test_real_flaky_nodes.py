"""Flaky nodes on a real SLURM: the restart's `--exclude` reaches sbatch and slurmctld."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient

pytestmark = pytest.mark.slurm

RESTART_NCCL = {
    "class_name": "SelectiveRestartPolicy",
    "modes": ["crash"],
    "restart_on_error_types": ["nccl"],
    "default_action": "stop",
    "max_retries": 1,
}


def test_an_nccl_failure_on_the_node_makes_the_restart_exclude_it_in_slurm(
    slurm_spare_node_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    cluster = slurm_spare_node_cluster
    monitor = {
        "poll_interval_seconds": 0.5,
        "restart_backoff_seconds": 0.5,
        "exclude_nodes_after": 1,
    }
    body = 'echo "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"; exit 1'
    session, store = make_session(
        tmp_path, jobs=1, array=False, monitor=monitor, policies=[RESTART_NCCL], script_body=body
    )
    client = RealSlurmClient(env=cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    controller = MonitorController(client, store, [session])
    deadline = time.monotonic() + 60
    job = store.load(session.session_id).jobs["k0"]
    while not (job.attempts and job.job_id):  # until the restart is queued
        assert time.monotonic() < deadline, f"the restart was never submitted: {job.outcome}"
        controller.poll_once()
        job = controller.sessions[0].jobs["k0"]
        time.sleep(0.5)
    restart_id = job.job_id
    try:
        first = job.attempts[0]
        assert first.metadata["error_type"] == "nccl"
        assert first.metadata["nodes"] == cluster.node  # squeue's `nodes` of the attempt
        assert store.load(session.session_id).excluded_nodes == [cluster.node]
        # slurmctld recorded the exclusion, and the only node being excluded, the job waits.
        shown = client.show(restart_id)
        assert shown["ExcNodeList"] == cluster.node
        assert shown["JobState"] == "PENDING"
    finally:
        client.cancel([restart_id])


def test_the_spare_node_stays_down_after_slurmctld_tried_to_reach_it(
    slurm_spare_node_cluster: Any,
) -> None:
    """The tests above need a job that excludes the real node to wait. The spare node once
    shared the real node's address and port: the real slurmd answered slurmctld's first ping
    to it (~4 s after start) and ReturnToService=2 made it idle, so such a job ran."""
    cluster = slurm_spare_node_cluster
    spare = f"{cluster.node}-spare"
    deadline = time.monotonic() + 40  # slurmctld pings a down node within ~15 s of start
    while True:
        state = cluster.run("sinfo", "-h", "-N", "-n", spare, "-o", "%T").strip()
        assert state.startswith("down"), f"{spare} came up: {state}"
        if state.endswith("*"):  # pinged, and nothing answered
            break
        assert time.monotonic() < deadline, f"slurmctld never tried to reach {spare}"
        time.sleep(0.5)


def test_scontrol_update_sets_the_excluded_nodes_of_a_queued_job(
    slurm_spare_node_cluster: Any, tmp_path: Path
) -> None:
    cluster = slurm_spare_node_cluster
    client = RealSlurmClient(env=cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    script = tmp_path / "held.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 1\n")
    held = client.submit(SubmitRequest(script=script, job_name="held", extra_args=("--hold",)))
    try:
        assert client.show(held)["JobState"] == "PENDING"
        assert client.exclude_nodes([held], cluster.node) == [held]
        assert client.show(held)["ExcNodeList"] == cluster.node
    finally:
        client.cancel([held])
    # a job that is no longer queued is not updated, and that is not an error
    assert client.exclude_nodes([held], cluster.node) == []


def test_a_new_exclusion_reaches_a_job_already_queued_in_slurm(
    slurm_spare_node_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    cluster = slurm_spare_node_cluster
    monitor = {
        "poll_interval_seconds": 0.5,
        "restart_backoff_seconds": 0.5,
        "exclude_nodes_after": 1,
    }
    body = (
        'if [ "$SLURM_JOB_NAME" = job0 ]; then '
        'echo "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"; exit 1; fi; echo ok'
    )
    session, store = make_session(
        tmp_path, jobs=2, array=False, monitor=monitor, policies=[RESTART_NCCL], script_body=body
    )
    client = RealSlurmClient(env=cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    # job1 waits behind a held job, so it is still queued when job0's node is found bad
    gate_script = tmp_path / "gate.sbatch"
    gate_script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\ntrue\n")
    gate = client.submit(SubmitRequest(script=gate_script, job_name="gate", extra_args=("--hold",)))
    session.jobs["k1"].depends_on = gate
    controller = MonitorController(client, store, [session])
    deadline = time.monotonic() + 60
    try:
        controller.poll_once()  # submits both jobs; nothing is excluded yet
        submitted = controller.sessions[0].jobs["k1"].job_id
        assert submitted and controller.sessions[0].excluded_nodes == []
        while controller.sessions[0].excluded_nodes != [cluster.node]:
            assert time.monotonic() < deadline, "job0's node was never excluded"
            controller.poll_once()
            time.sleep(0.5)
        queued = controller.sessions[0].jobs["k1"]
        assert queued.job_id == submitted and not queued.attempts
        shown = client.show(queued.job_id)
        assert shown["JobState"] == "PENDING"
        # submitted before the node was known bad, and now excluded by scontrol update
        assert shown["ExcNodeList"] == cluster.node
    finally:
        ids = [gate, *(j.job_id for j in controller.sessions[0].jobs.values() if j.job_id)]
        client.cancel(ids)

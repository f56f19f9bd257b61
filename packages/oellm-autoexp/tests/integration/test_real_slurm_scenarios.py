"""Monitor scenarios on a real single-node SLURM (munge + slurmctld + slurmd, see conftest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.persistence.session import Outcome
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient

pytestmark = pytest.mark.slurm

EXE = Path(sys.executable).with_name("oellm-autoexp")
MONITOR = {
    "poll_interval_seconds": 0.5,
    "termination_str": "TRAINING DONE",
    "restart_backoff_seconds": 0.5,
}
RESTART_CANCELLED_AND_HANGS = {
    "class_name": "SelectiveRestartPolicy",
    "modes": ["crash", "stall"],
    "restart_on_error_types": ["cancelled", "hang"],
    "exclude_error_types": ["oom"],
    "max_retries": 2,
}
# Task i of the array: attempt 1 behaves as $FIRST says, later attempts run 2 s and finish.
BODY = """
out={root}/jobs/job${{SLURM_ARRAY_TASK_ID:-0}}
mkdir -p "$out"
if [ ! -e "$out/attempted" ] && [ "{first}" != "normal" ]; then
    touch "$out/attempted"
    echo "step 1"
    case "{first}" in
        long) for i in $(seq 1 120); do echo "step $i"; sleep 0.5; done ;;
        hang) sleep 300 ;;
    esac
fi
for i in 1 2 3 4; do echo "step $i"; sleep 0.5; done
echo "TRAINING DONE"
"""


def _client(cluster: Any) -> RealSlurmClient:
    return RealSlurmClient(env=cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))


def _run(controller: MonitorController, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while controller.active:
        assert time.monotonic() < deadline, "monitor did not finish in time"
        controller.poll_once()
        time.sleep(0.5)


def _wait_running(cluster: Any, job_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cluster.run("scontrol", "show", "job", "-o", job_id, check=False)
        if "JobState=RUNNING" in out:
            return
        time.sleep(0.3)
    raise AssertionError(f"{job_id} never ran")


def test_a_four_task_array_runs_to_completion_with_one_squeue_per_poll(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path, jobs=4, monitor=MONITOR, script_body=BODY.format(root=tmp_path, first="normal")
    )
    client = _client(slurm_cluster)
    controller = MonitorController(client, store, [session])
    polls = 0
    deadline = time.monotonic() + 90
    while controller.active:
        assert time.monotonic() < deadline
        before = client.calls["squeue"]
        controller.poll_once()
        polls += 1
        assert client.calls["squeue"] - before <= 1
        time.sleep(0.5)
    saved = store.load(session.session_id)
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    assert client.calls["sbatch"] == 1
    array_id = saved.jobs["k0"].attempts[0].job_id.split("_")[0]
    assert [j.attempts[0].job_id for j in saved.jobs.values()] == [
        f"{array_id}_{i}" for i in range(4)
    ]
    assert all("completed" in j.attempts[0].signals for j in saved.jobs.values())
    log = tmp_path / "logs" / f"sweep_{array_id}_3.out"
    assert log.read_text().strip().endswith("TRAINING DONE")


def test_a_job_killed_with_scancel_is_restarted_by_policy(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor=MONITOR,
        policies=[RESTART_CANCELLED_AND_HANGS],
        script_body=BODY.format(root=tmp_path, first="long"),
    )
    client = _client(slurm_cluster)
    controller = MonitorController(client, store, [session])
    controller.poll_once()
    job_id = store.load(session.session_id).jobs["k0"].job_id
    assert job_id is not None
    _wait_running(slurm_cluster, job_id)
    slurm_cluster.run("scancel", job_id)
    _run(controller, 90)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "completed"
    assert job.attempts[0].job_id == job_id
    assert job.attempts[0].slurm_state == "CANCELLED"
    assert job.attempts[0].metadata["error_type"] == "cancelled"
    assert job.restarts == {"crash": 1}
    assert job.attempts[1].job_id != job_id


def test_a_job_that_stops_writing_is_stalled_cancelled_and_restarted(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={**MONITOR, "inactivity_threshold_seconds": 4.0},
        policies=[RESTART_CANCELLED_AND_HANGS],
        script_body=BODY.format(root=tmp_path, first="hang"),
    )
    client = _client(slurm_cluster)
    controller = MonitorController(client, store, [session])
    _run(controller, 90)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "completed"
    assert [a.mode for a in job.attempts] == ["stall", "success"]
    assert job.attempts[0].metadata["error_type"] == "hang"
    hung = job.attempts[0].job_id
    out = slurm_cluster.run("scontrol", "show", "job", "-o", hung)
    assert "JobState=CANCELLED" in out
    assert client.calls["scancel"] == 1


@pytest.mark.slow
def test_a_timeout_is_classified_and_restarted_with_the_longer_time_limit(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    # Attempt 1 outlives its 1-minute limit (SLURM's smallest; the cluster runs with
    # OverTimeLimit=0); the policy doubles it; attempt 2 finishes at once. One test for both the
    # timeout classification and the restart: each minute of SLURM time is CI time.
    policy = {"class_name": "TimeLimitRestartPolicy", "factor": 2.0, "max_retries": 1}
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={**MONITOR, "poll_interval_seconds": 2.0},
        policies=[policy],
        time_limit="00:01:00",
        script_body=BODY.format(root=tmp_path, first="long").replace("seq 1 120", "seq 1 400"),
    )
    controller = MonitorController(_client(slurm_cluster), store, [session])
    _run(controller, 240)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "completed"
    assert [a.mode for a in job.attempts] == ["timeout", "success"]
    timed_out = job.attempts[0]
    assert timed_out.slurm_state == "TIMEOUT"
    assert (timed_out.metadata["error_type"], timed_out.metadata["reason"]) == (
        "timeout",
        "TimeLimit",
    )
    assert job.restarts == {"timeout": 1}
    assert job.time_limit == "00:02:00"
    first = slurm_cluster.run("scontrol", "show", "job", "-o", job.attempts[0].job_id)
    second = slurm_cluster.run("scontrol", "show", "job", "-o", job.attempts[1].job_id)
    assert "TimeLimit=00:01:00" in first
    assert "TimeLimit=00:02:00" in second  # SLURM's own record of the resubmitted job


def _cli(slurm_cluster: Any, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`oellm-autoexp *args` against the test cluster, output captured."""
    return subprocess.run(
        [str(EXE), *args],
        env={**os.environ, **slurm_cluster.env},
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _monitor_process(
    store_dir: Path, session_id: str, env: dict[str, str]
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EXE), "monitor", "--monitor-session", session_id, "--state-dir", str(store_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_sigkilled_monitor_is_resumed_without_duplicate_submissions(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=4,
        monitor=MONITOR,
        policies=[RESTART_CANCELLED_AND_HANGS],
        script_body=BODY.format(root=tmp_path, first="normal").replace("sleep 0.5", "sleep 1.5"),
    )
    env = {**os.environ, **slurm_cluster.env}
    first = _monitor_process(store.state_dir, session.session_id, env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            jobs = json.loads(store.path(session.session_id).read_text())["jobs"]
            if all(j["job_id"] for j in jobs) and any(j["state"] == "running" for j in jobs):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the first monitor never submitted")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    second = _monitor_process(store.state_dir, session.session_id, env)
    output, _ = second.communicate(timeout=120)
    assert second.returncode == 0, output
    saved = store.load(session.session_id)
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    # SLURM itself knows exactly one submission (4 tasks) carrying this session's token.
    listing = json.loads(slurm_cluster.run("squeue", "--json", "--states=all"))
    mine = [
        j
        for j in listing["jobs"]
        if str(j.get("comment", "")).startswith(f"autoexp-{session.session_id}")
    ]
    assert len({j["array_job_id"] for j in mine}) == 1
    assert len(mine) == 4
    assert "restarted" not in output


HOLD_LOCK = """
import sys, time
from pathlib import Path
from oellm_autoexp.persistence import SessionStore
with SessionStore(Path(sys.argv[1])).lock(sys.argv[2]):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_monitor_all_drives_every_free_session_with_one_squeue_and_skips_locked_ones(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    body = BODY.format(root=tmp_path, first="normal")
    first, store = make_session(tmp_path, jobs=2, monitor=MONITOR, script_body=body)
    second, _ = make_session(tmp_path, jobs=1, array=False, monitor=MONITOR, script_body=body)
    third, _ = make_session(tmp_path, jobs=1, array=False, monitor=MONITOR, script_body=body)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store.state_dir), third.session_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = _cli(
            slurm_cluster,
            "monitor",
            "--monitor-all",
            "--state-dir",
            str(store.state_dir),
            timeout=120,
        )
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert f"skipping: session {third.session_id} is being monitored by another process" in (
        done.stderr
    )
    for session in (first, second):
        assert {j.state for j in store.load(session.session_id).jobs.values()} == {"completed"}
    assert {j.state for j in store.load(third.session_id).jobs.values()} == {"pending"}
    # First poll: one sbatch per free session's script (an array and a single job) + one
    # squeue; every later poll: one squeue for the jobs of both sessions together.
    polls = [line for line in done.stderr.splitlines() if " poll: " in line]
    assert polls[0].endswith("3 SLURM calls")
    assert len(polls) > 2
    assert all(line.endswith(" 1 SLURM calls") for line in polls[1:])


def test_a_restart_gets_the_latest_checkpoint_through_sbatch_export(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    body = f"""
out={tmp_path}/jobs/job0
if [ -z "$AUTOEXP_RESUME_FROM" ]; then
    mkdir -p "$out/checkpoints/iter_0000010"
    for i in $(seq 1 120); do echo "step $i"; sleep 0.5; done
fi
echo "resumed from $AUTOEXP_RESUME_FROM"
echo "TRAINING DONE"
"""
    policy = {"class_name": "CheckpointRestartPolicy", "modes": ["crash"], "max_retries": 1}
    session, store = make_session(
        tmp_path, jobs=1, array=False, monitor=MONITOR, policies=[policy], script_body=body
    )
    controller = MonitorController(_client(slurm_cluster), store, [session])
    controller.poll_once()
    job_id = store.load(session.session_id).jobs["k0"].job_id
    assert job_id is not None
    _wait_running(slurm_cluster, job_id)
    time.sleep(1)
    slurm_cluster.run("scancel", job_id)
    _run(controller, 90)
    job = store.load(session.session_id).jobs["k0"]
    assert job.state == "completed"
    second = tmp_path / "logs" / f"job0_{job.attempts[1].job_id}.out"
    checkpoint = tmp_path / "jobs" / "job0" / "checkpoints" / "iter_0000010"
    assert f"resumed from {checkpoint}" in second.read_text()


def test_status_job_asks_slurm_through_scontrol(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor=MONITOR,
        script_body=BODY.format(root=tmp_path, first="normal"),
    )
    controller = MonitorController(_client(slurm_cluster), store, [session])
    _run(controller, 60)
    done = _cli(slurm_cluster, "status", "--state-dir", str(store.state_dir), "--job", "job0")
    assert done.returncode == 0, done.stderr
    job_id = store.load(session.session_id).jobs["k0"].attempts[0].job_id
    assert f"JobId: {job_id}" in done.stdout
    assert "JobState: COMPLETED" in done.stdout
    assert "ExitCode: 0:0" in done.stdout
    unknown = _cli(slurm_cluster, "status", "--state-dir", str(store.state_dir), "--job", "nope")
    assert unknown.returncode == 2
    assert "no job named 'nope'" in unknown.stderr


def test_cleanup_yes_cancels_the_live_job_in_slurm_and_archives_its_log(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor=MONITOR,
        script_body=BODY.format(root=tmp_path, first="hang"),
    )
    controller = MonitorController(_client(slurm_cluster), store, [session])
    controller.poll_once()
    job_id = store.load(session.session_id).jobs["k0"].job_id
    assert job_id is not None
    _wait_running(slurm_cluster, job_id)
    done = _cli(slurm_cluster, "cleanup", "--state-dir", str(store.state_dir), "--yes")
    assert done.returncode == 0, done.stderr
    assert f"session {session.session_id}: cancelled {job_id}" in done.stdout
    deadline = time.monotonic() + 30
    while "JobState=CANCELLED" not in slurm_cluster.run("scontrol", "show", "job", "-o", job_id):
        assert time.monotonic() < deadline, "scancel did not reach SLURM"
        time.sleep(0.3)
    saved = store.load(session.session_id)
    assert saved.status == "finished"
    job = saved.jobs["k0"]
    assert (job.state, job.job_id) == ("failed", None)
    assert job.outcome == Outcome("crash", "cancelled", "cancelled by cleanup")
    assert len(list((tmp_path / "archive").glob(f"{session.session_id}-*.tar.gz"))) == 1

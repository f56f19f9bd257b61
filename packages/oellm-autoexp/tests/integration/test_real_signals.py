"""`on_match: cancel` on a real single-node SLURM: a job that keeps running after its NaN line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp import api
from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient

pytestmark = pytest.mark.slurm

POLL_S = 1.0
# Logs NaN after a few healthy steps, then keeps "training" for minutes; records when it
# printed the line and when SLURM's SIGTERM (scancel) reached it.
BODY = """
out={root}/jobs/job0
mkdir -p "$out"
trap 'date +%s.%N > "$out/terminated"; exit 143' TERM
for i in 1 2 3; do echo "step $i loss: 2.3"; sleep 0.3; done
date +%s.%N > "$out/nan_at"
echo "step 4 loss: nan"
for i in $(seq 1 1200); do sleep 0.2; done
echo "not cancelled" > "$out/ran_out"
"""


def test_a_job_running_on_after_its_nan_line_is_cancelled_within_two_polls(
    slurm_cluster: Any, tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={
            "poll_interval_seconds": POLL_S,
            "log_signals": [
                {
                    "name": "nan",
                    "pattern": r"loss: nan",
                    "error_type": "nan",
                    "on_match": "cancel",
                }
            ],
        },
        script_body=BODY.format(root=tmp_path),
    )
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    controller = MonitorController(client, store, [session])
    out = tmp_path / "jobs" / "job0"
    polls_after_line = 0
    deadline = time.monotonic() + 120
    while controller.active:
        assert time.monotonic() < deadline, slurm_cluster.log_tail()
        started = time.time()
        controller.poll_once()
        nan_at = out / "nan_at"
        if nan_at.exists() and float(nan_at.read_text()) < started:
            polls_after_line += 1
        time.sleep(POLL_S)
    job = store.load(session.session_id).jobs["k0"]
    (attempt,) = job.attempts
    assert (attempt.mode, attempt.metadata["error_type"]) == ("crash", "nan")
    assert job.state == "failed"
    assert 1 <= polls_after_line <= 2
    # SLURM delivered the cancel: the job's TERM trap ran, and it never ran out its loop.
    deadline = time.monotonic() + 30
    while not (out / "terminated").exists():
        assert time.monotonic() < deadline, "the job never got SIGTERM"
        time.sleep(0.2)
    assert not (out / "ran_out").exists()
    latency = float((out / "terminated").read_text()) - float((out / "nan_at").read_text())
    # One poll interval plus squeue/scancel round trips; two polls at most.
    assert 0 < latency < 2 * POLL_S + 2.0
    # The record says what the monitor last saw (RUNNING); `status` asks SLURM.
    assert job.slurm_state == "RUNNING"
    (row,) = api.status(store, client=client)
    assert (row.slurm_id, row.slurm_state, row.slurm_state_source) == (
        attempt.job_id,
        "CANCELLED",
        "slurm",
    )
    print(f"cancel latency: {latency:.2f} s, {polls_after_line} poll(s) (poll interval {POLL_S} s)")

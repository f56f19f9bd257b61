"""Plan -> session -> real sbatch -> monitor: the planner's 6-job array on the local SLURM."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.monitor.session_builder import submit_plan
from oellm_autoexp.persistence import SessionStore
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient

pytestmark = pytest.mark.slurm


def test_a_planned_sweep_is_submitted_as_one_array_and_monitored_to_completion(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    from oellm_autoexp.config.loader import load_config
    from oellm_autoexp.planning import build_plan, write_plan

    loaded = load_config(
        "autoexp", ["sweep=lr_grid", "slurm=local", f"project.base_output_dir={tmp_path}"]
    )
    result = build_plan(loaded.root)
    write_plan(result, test_only="never")
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    session = submit_plan(result.plan, result.config, client, monitor=False)
    assert client.calls["sbatch"] == 1
    store = SessionStore(tmp_path / "monitoring_state")
    assert store.ids() == [session.session_id]
    controller = MonitorController(client, store, [store.load(session.session_id)])
    deadline = time.monotonic() + 90
    while controller.active:
        assert time.monotonic() < deadline, "jobs did not finish"
        controller.poll_once()
        time.sleep(0.5)
    saved = store.load(session.session_id)
    assert len(saved.jobs) == 6
    assert {j.state for j in saved.jobs.values()} == {"completed"}
    for job in saved.jobs.values():
        log = resolve_log_path(job.log_path, job.attempts[0].job_id, job.slurm_name)
        assert f"hello from {job.name}" in log.read_text()
    assert saved.plan == result.plan  # the typed plan, read back from the session file
    assert saved.config["project"]["base_output_dir"] == str(tmp_path)

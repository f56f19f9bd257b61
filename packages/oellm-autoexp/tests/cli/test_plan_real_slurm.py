"""Scripts written by `oellm-autoexp plan` against a real single-node SLURM (marked slurm)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

EXE = Path(sys.executable).with_name("oellm-autoexp")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"

EXAMPLES = {
    "hello_sweep": [str(EXAMPLE)],
    "autoexp_default": ["autoexp"],
    "autoexp_lr_grid_local": ["autoexp", "sweep=lr_grid", "slurm=local"],
    "autoexp_monitored": ["autoexp", "monitoring=log", "restart=selective", "slurm=local"],
    "autoexp_per_job_scripts": ["autoexp", "sweep=lr_grid", "slurm=local", "slurm.array=false"],
}


def plan(cluster: Any, args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "plan", *args, f"project.base_output_dir={out}", "--test-only", "always"],
        capture_output=True,
        text=True,
        env=cluster.env,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_scripts_pass_sbatch_test_only(
    slurm_cluster: Any, tmp_path: Path, example: str
) -> None:
    done = plan(slurm_cluster, EXAMPLES[example], tmp_path)
    assert done.returncode == 0, done.stderr
    scripts = sorted(tmp_path.glob("plans/*/scripts/*.sbatch"))
    assert scripts
    assert f"sbatch --test-only accepted {min(len(scripts), 8)} of {len(scripts)}" in done.stdout


def test_sbatch_test_only_really_checks_the_cluster(slurm_cluster: Any, tmp_path: Path) -> None:
    # The booster profile asks for a partition this cluster does not have.
    booster = [
        "autoexp",
        "slurm=juwels_booster",
        "slurm.sbatch.account=my_budget",
        "slurm.sbatch.partition=booster",
        "backend.argv=[torchrun,train.py]",  # mode torchrun needs a torchrun command
    ]
    done = plan(slurm_cluster, booster, tmp_path)
    assert done.returncode == 1
    assert "sbatch --test-only rejected the script" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_planned_array_runs_on_slurm_and_each_task_runs_its_own_job(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    done = plan(slurm_cluster, [str(EXAMPLE)], tmp_path)
    assert done.returncode == 0, done.stderr
    plan_json = json.loads(next(tmp_path.glob("plans/*/plan.json")).read_text())
    (script,) = plan_json["scripts"]
    array_id = slurm_cluster.run("sbatch", "--parsable", script["path"]).strip().split(";")[0]
    jobs = plan_json["jobs"]
    deadline = time.monotonic() + 90
    for job in jobs:
        task = job["array"]["task_index"]
        log = Path(job["log_path"].replace("%A", array_id).replace("%a", str(task)))
        expected = f"lr {job['params']['lr']} on {job['name']}"
        while time.monotonic() < deadline and expected not in _read(log):
            time.sleep(0.3)
        text = _read(log)
        assert f"starting {job['name']} ({job['job_id']})" in text, slurm_cluster.log_tail()
        assert expected in text, text
        assert f"oellm-autoexp: completed {job['name']}" in _read(log) or _wait_for(
            log, f"oellm-autoexp: completed {job['name']}", deadline
        )
        assert Path(job["output_dir"]).is_dir()


def _wait_for(path: Path, text: str, deadline: float) -> bool:
    while time.monotonic() < deadline and text not in _read(path):
        time.sleep(0.3)
    return text in _read(path)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_submit_no_monitor_submits_the_planned_array_and_records_a_session(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    done = subprocess.run(
        [EXE, "submit", str(EXAMPLE), f"project.base_output_dir={tmp_path}", "--no-monitor"],
        capture_output=True,
        text=True,
        env=slurm_cluster.env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "4 job(s) submitted" in done.stdout
    sessions = list((tmp_path / "monitoring_state").glob("*.json"))
    assert len(sessions) == 1
    plan_json = json.loads(next(tmp_path.glob("plans/*/plan.json")).read_text())
    deadline = time.monotonic() + 90
    for job in plan_json["jobs"]:
        logs = tmp_path / "logs"
        marker = f"oellm-autoexp: completed {job['name']}"
        while time.monotonic() < deadline and not any(
            marker in _read(p) for p in logs.glob("*.out")
        ):
            time.sleep(0.3)
        assert any(marker in _read(p) for p in logs.glob("*.out")), slurm_cluster.log_tail()

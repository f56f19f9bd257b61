"""`aorta triage run --executor slurm` on a real single-node SLURM (see conftest).

Every test drives the real `aorta` CLI against the local slurmctld/slurmd: the trials are
SLURM array tasks submitted and monitored through oellm-autoexp's library, and the matrix is
compared with what the local executor writes for the same recipe.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from aorta_testing import adaptive_recipe

from oellm_autoexp import api
from oellm_autoexp.persistence import SessionStore

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

AORTA = str(Path(sys.executable).with_name("aorta"))
BEHAVE = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "behave.py")
TINY_FSDP = {
    "AORTA_FSDP_D_MODEL": "16",
    "AORTA_FSDP_N_LAYERS": "1",
    "AORTA_FSDP_N_HEADS": "2",
    "AORTA_FSDP_SEQ_LEN": "8",
    "AORTA_FSDP_BATCH_SIZE": "2",
    "AORTA_FSDP_VOCAB_SIZE": "32",
}
FAST = {"poll_seconds": 0.3, "time": "00:05:00"}


def _env(cluster: Any) -> dict[str, str]:
    return {**os.environ, **cluster.env, "OMP_NUM_THREADS": "1", "CI": "true"}


def aorta(cluster: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AORTA, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(cluster),
        check=False,
    )


def _recipe(tmp_path: Path, name: str, workload: object, cells: list[Any], **top: Any) -> Path:
    data = {"schema_version": 1, "workload": workload, "trials": 4, "steps": 3, "cells": cells}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**data, **top}))
    return path


def _command_recipe(tmp_path: Path, *, trials: int, interval: float, **slurm: Any) -> Path:
    workload = {
        "command": [sys.executable, BEHAVE, "steps", "{steps}", "--interval", str(interval)],
        "step_time": "jsonl",
    }
    cells = [
        {"name": "baseline", "mitigations": ["none"], "environment": "local"},
        {
            "name": "nan",
            "mitigations": ["none"],
            "environment": "local",
            "command_args": ["--then", "nan"],
        },
        {"name": "again", "mitigations": ["none"], "environment": "local"},
    ]
    executor = {"slurm": {**FAST, **slurm}}
    return _recipe(tmp_path, "command", workload, cells, trials=trials, executor=executor)


def _start_driver(cluster: Any, recipe: Path, out: Path) -> subprocess.Popen[str]:
    """`aorta triage run` in the background (its output piped, read at the end)."""
    return subprocess.Popen(
        [AORTA, "triage", "run", "--recipe", str(recipe), "--output-dir", str(out),
         "--progress", "plain"],
        env=_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _first_started(out: Path, timeout: float = 60) -> dict[str, Any]:
    """The ledger line of the first trial task that started running under `out`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ledger = list(out.rglob("attempts.jsonl"))
        rows = [json.loads(x) for x in ledger[0].read_text().splitlines()] if ledger else []
        started = next((r for r in rows if r["ran"]), None)
        if started is not None:
            return started
        time.sleep(0.1)
    pytest.fail("no trial task started")


def _run_dir(root: Path) -> Path:
    (found,) = [p.parent for p in root.rglob("recipe.resolved.yaml")]
    return found


def _structure(run_dir: Path) -> dict[str, Any]:
    """What must not depend on the executor: rows, trial files, counts (labels separately)."""
    matrix = json.loads((run_dir / "matrix.json").read_text())
    return {
        cell["name"]: {
            "trial_files": sorted(cell["trial_paths"]),
            "failed": cell["failed_count"],
            "measured": cell["passed_count"] + cell["failed_count"],
            "errors": cell["error_count"],
        }
        for cell in matrix["cells"]
    }


def _labels(run_dir: Path) -> dict[str, str]:
    matrix = json.loads((run_dir / "matrix.json").read_text())
    return {cell["name"]: cell["confound"] for cell in matrix["cells"]}


def _ledger(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "slurm" / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _runs_per_trial(run_dir: Path) -> Counter[tuple[str, int]]:
    return Counter((row["cell"], row["trial"]) for row in _ledger(run_dir) if row["ran"])


def test_a_command_matrix_on_slurm_equals_the_local_one(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _command_recipe(tmp_path, trials=4, interval=0.0)
    slurm = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe), "--output-dir",
                  str(tmp_path / "slurm"), "--progress", "plain")  # fmt: skip
    assert slurm.returncode == 0, slurm.stderr
    local = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe),
                  "--executor", "local", "--output-dir", str(tmp_path / "local"),
                  "--progress", "plain")  # fmt: skip
    assert local.returncode == 0, local.stderr
    on_slurm, here = _run_dir(tmp_path / "slurm"), _run_dir(tmp_path / "local")
    assert _structure(on_slurm) == _structure(here)
    assert _structure(on_slurm)["nan"]["failed"] == 4
    # Deterministic step times (the script prints them): the labels agree too.
    assert _labels(on_slurm) == _labels(here)
    # Every trial ran once, each as its own SLURM array task.
    runs = _runs_per_trial(on_slurm)
    assert len(runs) == 12 and set(runs.values()) == {1}
    arrays = {row["array"] for row in _ledger(on_slurm)}
    assert len(arrays) == 12 and len({a.split("_")[0] for a in arrays}) == 1
    assert "aorta triage: slurm: baseline 0 pending/0 running/4 done" in slurm.stderr
    status = aorta(aorta_slurm_cluster, "triage", "status", str(on_slurm))
    assert status.returncode == 0 and "SLURM executor, finished" in status.stdout


def test_a_fsdp_matrix_on_slurm_has_the_local_structure(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    cells = [
        {"name": "baseline", "mitigations": ["none"], "environment": "local",
         "extra_env": TINY_FSDP},
        {"name": "clip", "mitigations": ["fsdp_grad_clip"], "environment": "local",
         "extra_env": TINY_FSDP},
        {"name": "nan", "mitigations": ["none"], "environment": "local",
         "extra_env": {**TINY_FSDP, "AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "1"}},
    ]  # fmt: skip
    recipe = _recipe(
        tmp_path, "fsdp", "fsdp", cells, executor={"slurm": {**FAST, "max_concurrent": 2}}
    )
    slurm = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe), "--output-dir",
                  str(tmp_path / "slurm"), "--progress", "plain", timeout=240)  # fmt: skip
    assert slurm.returncode == 0, slurm.stderr
    local = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe),
                  "--executor", "local", "--output-dir", str(tmp_path / "local"),
                  "--progress", "plain")  # fmt: skip
    assert local.returncode == 0, local.stderr
    on_slurm = _run_dir(tmp_path / "slurm")
    structure = _structure(on_slurm)
    assert structure == _structure(_run_dir(tmp_path / "local"))
    assert structure["nan"]["failed"] == 4 and structure["baseline"]["failed"] == 0
    trial = json.loads((on_slurm / "cells" / "clip" / "trial_2.json").read_text())
    # In the task's own interpreter, as locally in the run's (one start-up per task, issue 26).
    local_trial = _run_dir(tmp_path / "local") / "cells" / "clip" / "trial_2.json"
    assert trial["execution"] == json.loads(local_trial.read_text())["execution"] == "in_process"
    assert trial["seed"] == 2
    assert trial["env_applied"]["AORTA_FSDP_GRAD_CLIP"] == "1.0"
    assert set(_runs_per_trial(on_slurm).values()) == {1}


def test_a_driver_killed_mid_run_resumes_without_losing_or_repeating_a_trial(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _command_recipe(tmp_path, trials=2, interval=0.4, max_concurrent=2)
    out = tmp_path / "out"
    driver = _start_driver(aorta_slurm_cluster, recipe, out)
    try:
        _first_started(out)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.communicate(timeout=10)
    run_dir = _run_dir(out)
    assert not (run_dir / "matrix.json").exists()  # killed before the end
    matrix = aorta(aorta_slurm_cluster, "triage", "matrix", str(run_dir))
    assert matrix.returncode == 0, matrix.stderr
    assert "**Unfinished**" in (run_dir / "matrix.md").read_text()
    resumed = aorta(aorta_slurm_cluster, "triage", "run", "--resume", str(run_dir),
                    "--trust-environments", "--progress", "plain")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    runs = _runs_per_trial(run_dir)
    assert len(runs) == 6 and set(runs.values()) == {1}, runs
    structure = _structure(run_dir)
    assert all(len(cell["trial_files"]) == 2 for cell in structure.values())
    state = json.loads((run_dir / "slurm" / "state.json").read_text())
    assert state["finished"] and len(state["submissions"]) == 1  # nothing was lost
    assert "**Unfinished**" not in (run_dir / "matrix.md").read_text()


def test_a_cancelled_task_is_an_error_resubmitted_once_and_the_matrix_completes(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _command_recipe(tmp_path, trials=1, interval=1.0, max_concurrent=1)
    out = tmp_path / "out"
    driver = _start_driver(aorta_slurm_cluster, recipe, out)
    victim = _first_started(out)
    # The array task's own name (<array job>_<index>): what a user sees in squeue.
    aorta_slurm_cluster.run("scancel", victim["array"])
    _, stderr = driver.communicate(timeout=120)
    assert driver.returncode == 0, stderr
    trial = f"cell {victim['cell']} trial 1: SLURM lost its task; resubmitted (1 of 2)"
    assert trial in stderr
    run_dir = _run_dir(out)
    runs = _runs_per_trial(run_dir)
    assert runs[(victim["cell"], victim["trial"])] == 2  # cancelled once, resubmitted once
    assert all(count == 1 for key, count in runs.items() if key != (victim["cell"], 0))
    structure = _structure(run_dir)
    assert all(len(cell["trial_files"]) == 1 and not cell["errors"] for cell in structure.values())
    assert structure["nan"]["failed"] == 1  # the failure under study: recorded, not restarted
    rows = api.status(SessionStore(run_dir / "slurm" / "sessions"))
    restarted = [row for row in rows if row.restarts]
    assert [row.restarts for row in restarted] == [{"crash": 1}]
    assert restarted[0].slurm_id != victim["array"] and restarted[0].state == "completed"
    (session,) = [
        json.loads(p.read_text()) for p in (run_dir / "slurm" / "sessions").glob("*.json")
    ]
    (job,) = [j for j in session["jobs"] if j["restarts"]]
    assert job["attempts"][0]["metadata"]["error_type"] == "cancelled"


def test_bad_executor_settings_are_one_line_and_submit_nothing(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _command_recipe(tmp_path, trials=1, interval=0.0, partition="no_such_partition")
    out = tmp_path / "out"
    refused = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe),
                    "--output-dir", str(out))  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()[-1:]
    assert "SLURM refused the trial array (3 task(s)); nothing was submitted" in line
    assert "invalid partition" in line.lower()
    run_dir = _run_dir(out)
    assert not list((run_dir / "cells").rglob("trial_*.json"))
    state = json.loads((run_dir / "slurm" / "state.json").read_text())
    assert len(state["submissions"]) == 1  # what was attempted is recorded
    squeue = aorta_slurm_cluster.run("squeue", "--noheader", "--me", check=False)
    assert "aorta-triage" not in squeue


def test_detach_returns_after_submission_and_resume_writes_the_matrix(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _command_recipe(tmp_path, trials=1, interval=0.5)
    out = tmp_path / "out"
    detached = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe),
                     "--output-dir", str(out), "--detach")  # fmt: skip
    assert detached.returncode == 0, detached.stderr
    run_dir = _run_dir(out)
    assert f"aorta triage status {run_dir}" in detached.stdout
    assert not (run_dir / "matrix.json").exists()
    status = aorta(aorta_slurm_cluster, "triage", "status", str(run_dir))
    assert status.returncode == 0 and "SLURM executor, not finished" in status.stdout
    # As the detached run's last monitor pass saw it: its one trial queued or already started
    # (which one depends on how fast slurmd picked it up), not yet done.
    seen = re.search(r"baseline  pending (\d+)  running (\d+)  done 0", status.stdout)
    assert seen is not None and int(seen[1]) + int(seen[2]) == 1, status.stdout
    # The printed next step, verbatim: the user's own command run needs no trust flag.
    (printed,) = [line for line in detached.stdout.splitlines() if "write the matrix: " in line]
    command = printed.split("write the matrix: ", 1)[1]
    assert command == f"aorta triage run --resume {run_dir}"
    resumed = aorta(aorta_slurm_cluster, *shlex.split(command)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert all(len(c["trial_files"]) == 1 for c in _structure(run_dir).values())
    assert set(_runs_per_trial(run_dir).values()) == {1}
    status = aorta(aorta_slurm_cluster, "triage", "status", str(run_dir))
    assert "SLURM executor, finished" in status.stdout and "nan       pending 0" in status.stdout


# Adaptive trials (`adaptive: {max_trials: 8}`), one array per round. `same` fails as the
# baseline does: a cure is out of reach after 4 rounds; `fix` never fails: cured (and the
# baseline stopped) after 6. The local executor on the same recipe is the oracle.
ADAPTIVE = {"baseline": "1" * 8, "fix": "0" * 8, "same": "1" * 8}


def _adaptive(tmp_path: Path, name: str, pause: float) -> Path:
    return adaptive_recipe(tmp_path / f"{name}.yaml", ADAPTIVE, 8, pause,
                           executor={"slurm": FAST})  # fmt: skip


def _local_oracle(cluster: Any, tmp_path: Path) -> Path:
    """The same recipe (no pause: the outcomes depend only on the seed) run locally."""
    recipe = _adaptive(tmp_path, "local", 0.0)
    out = tmp_path / "local"
    done = aorta(cluster, "triage", "run", "--recipe", str(recipe), "--executor", "local",
                 "--output-dir", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return _run_dir(out)


def _trial_ids(run_dir: Path) -> dict[str, list[int]]:
    return {name: sorted(int(Path(p).stem.split("_")[1]) for p in cell["trial_files"])
            for name, cell in _structure(run_dir).items()}  # fmt: skip


def _arrays(run_dir: Path) -> list[list[tuple[str, int]]]:
    state = json.loads((run_dir / "slurm" / "state.json").read_text())
    tables = [run_dir / "slurm" / f"tasks-{s['number']}.json" for s in state["submissions"]]
    return [[(cell, trial) for cell, trial in json.loads(t.read_text())] for t in tables]


def _adaptive_section(run_dir: Path) -> list[str]:
    text = (run_dir / "matrix.md").read_text()
    return text.split("## Adaptive trials", 1)[1].split("\n## ", 1)[0].splitlines()


def test_an_adaptive_matrix_on_slurm_stops_early_with_the_local_trials(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _adaptive(tmp_path, "slurm", 0.0)
    slurm = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe), "--output-dir",
                  str(tmp_path / "slurm"), "--progress", "plain", timeout=240)  # fmt: skip
    assert slurm.returncode == 0, slurm.stderr
    on_slurm, here = _run_dir(tmp_path / "slurm"), _local_oracle(aorta_slurm_cluster, tmp_path)
    ids = _trial_ids(on_slurm)
    assert ids == _trial_ids(here)
    assert all(len(trials) < 8 for trials in ids.values())  # decided before max_trials
    # One array per round, over the cells still open; every trial ran once.
    assert _arrays(on_slurm) == [
        [(name, k) for name in ADAPTIVE if k < len(ids[name])] for k in range(len(ids["baseline"]))
    ]
    assert set(_runs_per_trial(on_slurm).values()) == {1}
    matrix = json.loads((on_slurm / "matrix.json").read_text())
    assert matrix["adaptive"] == json.loads((here / "matrix.json").read_text())["adaptive"]
    assert matrix["adaptive"]["cells"]["fix"]["stopped"] == "decided cured"
    assert _adaptive_section(on_slurm) == _adaptive_section(here)
    assert json.loads((on_slurm / "slurm" / "state.json").read_text())["finished"] is True
    # The trials a decided cell never ran are not counted as done.
    status = aorta(aorta_slurm_cluster, "triage", "status", str(on_slurm))
    assert f"same      pending 0  running 0  done {len(ids['same'])}  " in status.stdout


def test_a_detached_adaptive_run_resumes_the_same_rule_and_waits_for_its_round(
    aorta_slurm_cluster: Any, tmp_path: Path
) -> None:
    recipe = _adaptive(tmp_path, "slurm", 3.0)  # each trial takes 3 s: a round stays in flight
    out = tmp_path / "out"
    detached = aorta(aorta_slurm_cluster, "triage", "run", "--recipe", str(recipe),
                     "--output-dir", str(out), "--detach")  # fmt: skip
    assert detached.returncode == 0, detached.stderr
    run_dir = _run_dir(out)
    assert _arrays(run_dir) == [[(name, 0) for name in ADAPTIVE]]  # round 0 only
    assert "adaptive: only the round now due was submitted" in detached.stdout
    deadline = time.monotonic() + 60
    while len(list((run_dir / "cells").rglob("trial_0.json"))) < len(ADAPTIVE):
        assert time.monotonic() < deadline, "round 0 did not finish"
        time.sleep(0.2)
    resume = ("triage", "run", "--resume", str(run_dir))
    step = aorta(aorta_slurm_cluster, *resume, "--detach")
    assert step.returncode == 0, step.stderr
    assert _arrays(run_dir)[1:] == [[(name, 1) for name in ADAPTIVE]]  # the rule's next round
    again = aorta(aorta_slurm_cluster, *resume, "--detach")  # round 1 still in flight
    assert again.returncode == 0, again.stderr
    assert len(_arrays(run_dir)) == 2  # waited for, not resubmitted
    finished = aorta(aorta_slurm_cluster, *resume, "--progress", "plain", timeout=240)
    assert finished.returncode == 0, finished.stderr
    here = _local_oracle(aorta_slurm_cluster, tmp_path)
    assert _trial_ids(run_dir) == _trial_ids(here)
    assert set(_runs_per_trial(run_dir).values()) == {1}
    assert _adaptive_section(run_dir) == _adaptive_section(here)

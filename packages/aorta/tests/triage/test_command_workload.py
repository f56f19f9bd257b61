"""Command workloads in the triage matrix: recipe and flag mode, resume, bad input."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aorta.triage.recipe import load_recipe, recipe_from_resolved, resolved_recipe_dict

AORTA = str(Path(sys.executable).with_name("aorta"))
SCRIPTS = Path(__file__).parents[1] / "runner" / "command" / "scripts"
DIVERGE = str(SCRIPTS / "diverge.py")
BEHAVE = str(SCRIPTS / "behave.py")


def write_recipe(tmp_path: Path, workload: object, cells: list[dict[str, object]]) -> Path:
    path = tmp_path / "recipe.yaml"
    recipe = {"schema_version": 1, "workload": workload, "trials": 2, "steps": 10, "cells": cells}
    path.write_text(yaml.safe_dump(recipe))
    return path


def aorta(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AORTA, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        check=False,
    )


def only_run_dir(root: Path) -> Path:
    (run_dir,) = [p.parent for p in root.rglob("recipe.resolved.yaml")]
    return run_dir


def cells_of(run_dir: Path) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}


def test_recipe_command_workload_loads_and_round_trips(tmp_path: Path) -> None:
    workload = {
        "command": [sys.executable, BEHAVE, "steps", "{steps}"],
        "step_time": "jsonl",
        "hang_after": 30,
    }
    cells = [
        {"name": "baseline", "mitigations": ["none"], "environment": "local"},
        {
            "name": "nan",
            "mitigations": ["none"],
            "environment": "local",
            "command_args": ["--then", "nan"],
        },
    ]
    recipe = load_recipe(write_recipe(tmp_path, workload, cells))
    assert recipe.workload == "command" and recipe.command is not None
    assert recipe.command.hang_after == 30
    assert recipe.cell("nan").command_args == ("--then", "nan")
    again = recipe_from_resolved(yaml.safe_load(yaml.safe_dump(resolved_recipe_dict(recipe))))
    assert again.command == recipe.command
    assert again.cell("nan").command_args == ("--then", "nan")


@pytest.mark.parametrize(
    ("workload", "cell_extra", "message"),
    [
        ({"command": "python train.py"}, {}, "workload.command: expected a list of strings"),
        ({"command": ["python3", "{sed}"]}, {}, "workload.command[1]: unknown placeholder {sed}"),
        ({"command": ["no-such-aorta-program"]}, {}, "executable 'no-such-aorta-program' not"),
        ({"command": ["python3"], "failure_patterns": ["("]}, {}, "failure_patterns[0]: invalid"),
        (
            {"command": ["python3"], "step_time": {"regex": "x (?P<ms>\\d+)"}},
            {},
            "workload.step_time.regex: expected a named group (?P<time>...)",
        ),
        ({"command": ["python3"]}, {"command_args": ["{trial}"]}, "unknown placeholder {trial}"),
        ("fsdp", {"command_args": ["-x"]}, "cells[0].command_args: expected no command_args"),
        (
            {"command": ["python3"]},
            {"environment": {"docker": "rocm/pytorch:latest"}},
            "cells[0].environment: expected a local environment",
        ),
    ],
)
def test_bad_command_recipe_is_one_line_exit_2_before_any_trial(
    tmp_path: Path, workload: object, cell_extra: dict[str, object], message: str
) -> None:
    cell = {"name": "baseline", "mitigations": ["none"], "environment": "local", **cell_extra}
    path = write_recipe(tmp_path, workload, [cell])
    done = aorta("triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0]
    assert not (tmp_path / "out").exists()


def test_flag_mode_bad_command_is_exit_2(tmp_path: Path) -> None:
    done = aorta(
        "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
        "--environment-axis", "local", "--trials", "1", "--output-dir", str(tmp_path),
        "--", "no-such-aorta-program", "--seed", "{seed}",
    )  # fmt: skip
    assert done.returncode == 2
    assert "command[0]: executable 'no-such-aorta-program' not found on PATH" in done.stderr
    done = aorta("run", "--hang-after", "5", "--output-dir", str(tmp_path), "--workload", "fsdp")
    assert done.returncode == 2 and "--hang-after: only for a command workload" in done.stderr


def test_flag_mode_matrix_of_a_command_with_resume(tmp_path: Path) -> None:
    done = aorta(
        "triage", "run", "--mode", "matrix", "--mitigation-axis", "none,tf32_off",
        "--environment-axis", "local", "--trials", "2", "--steps", "10",
        "--step-time", "jsonl", "--hang-after", "20", "--progress", "plain",
        "--output-dir", str(tmp_path), "--", sys.executable, BEHAVE, "steps", "{steps}",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(tmp_path)
    assert run_dir.parent.name == "command"
    cells = cells_of(run_dir)
    assert set(cells) == {"none-local", "tf32_off-local"}
    trial = json.loads((run_dir / "cells" / "tf32_off-local" / "trial_1.json").read_text())
    assert trial["outcome"] == "passed" and trial["seed"] == 1
    assert trial["command"]["argv"][-1] == "10" and trial["command"]["clock"] == "log"
    assert trial["env_applied"]["NVIDIA_TF32_OVERRIDE"] == "0"  # the mitigation reached it
    assert trial["step_times_ms"] == [13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0]
    assert trial["host"]["node"] == socket.gethostname()  # a command trial records it too
    # Resume: a lost trial file is run again with its own seed, from recipe.resolved.yaml.
    (run_dir / "cells" / "none-local" / "trial_1.json").unlink()
    # A run directory may come from anyone: for another user (another signing key) the
    # command in it runs only when trusted.
    other_user = {"XDG_STATE_HOME": str(tmp_path / "other-user")}
    done = aorta("triage", "run", "--resume", str(run_dir), "--progress", "plain", env=other_user)
    assert done.returncode == 2 and "workload runs the command" in done.stderr
    assert not (run_dir / "cells" / "none-local" / "trial_1.json").exists()
    # The user who started it resumes it as it is, no flag needed.
    done = aorta("triage", "run", "--resume", str(run_dir), "--progress", "plain")
    assert done.returncode == 0, done.stdout + done.stderr
    again = json.loads((run_dir / "cells" / "none-local" / "trial_1.json").read_text())
    assert again["seed"] == 1 and again["outcome"] == "passed"


def test_aorta_run_command_reports_failed_and_errored_trials(tmp_path: Path) -> None:
    done = aorta(
        "run", "-n", "1", "--steps", "10", "--step-time", "jsonl", "--hang-after", "0.5",
        "--output-dir", str(tmp_path), "--", sys.executable, BEHAVE, "steps", "3",
        "--then", "hang",
    )  # fmt: skip
    assert done.returncode == 1
    assert "ERROR: hang: no output for 0.5 s after step 3" in done.stdout
    (run_dir,) = list((tmp_path / "command").iterdir())
    trial = json.loads((run_dir / "trial_0.json").read_text())
    assert trial["outcome"] == "error" and trial["command"]["stopped"] == "hang"
    assert (run_dir / "trial_0.log").exists()  # kept: the trial did not pass


@pytest.mark.slow
def test_three_cell_matrix_of_a_real_diverging_training_script(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    workload = {
        "command": [
            sys.executable, DIVERGE, "--seed", "{seed}", "--steps", "{steps}", "--lr", "0.85",
            "--rows", "4096", "--clock", "cpu", "--out", "{output_dir}",
        ],
        "step_time": "jsonl",
        "hang_after": 120,
        "collect": ["final.txt"],
    }  # fmt: skip
    cells = [
        {"name": "baseline", "mitigations": ["none"], "environment": "local"},
        {
            "name": "clip",
            "mitigations": ["none"],
            "environment": "local",
            "extra_env": {"DIVERGE_CLIP": "0.5"},
        },
        {
            "name": "substeps",
            "mitigations": ["none"],
            "environment": "local",
            "extra_env": {"DIVERGE_SUBSTEPS": "2"},
        },
    ]
    path = tmp_path / "recipe.yaml"
    recipe = {
        "schema_version": 1,
        "workload": workload,
        "trials": 5,
        "steps": 40,
        "confound": {"baseline_cell": "baseline"},
        "cells": cells,
    }
    path.write_text(yaml.safe_dump(recipe))
    done = aorta("triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    cells_json = cells_of(run_dir)
    base, clip, sub = cells_json["baseline"], cells_json["clip"], cells_json["substeps"]
    # At lr 0.85 on 4096 rows seeds 0..4 all diverge (steps 16..21); both cures train all five.
    assert base["failed_count"] == 5 and clip["failed_count"] == 0 and sub["failed_count"] == 0
    assert clip["significant"] and sub["significant"]
    # Two updates per step (about twice the work): flagged as a speed confound. Clipping costs
    # far less; its own label depends on this machine's timing noise over 5 trials (measured
    # here: "—" and "speed? (-1%, 95% CI 0.85-1.17)"), so only the order is asserted.
    assert str(sub["confound"]).startswith("speed")
    assert sub["step_time_ratio"] > 1.5 and clip["step_time_ratio"] < sub["step_time_ratio"]
    trial = json.loads((run_dir / "cells" / "baseline" / "trial_0.json").read_text())
    assert trial["outcome"] == "failed" and "non-finite loss" in trial["failure"]
    assert trial["failed_at_step"] is not None and len(trial["step_times_ms"]) > 10
    assert (run_dir / "cells" / "baseline" / "trial_0.log").exists()
    assert not (run_dir / "cells" / "clip" / "trial_0.log").exists()  # keep_logs: failed
    assert (run_dir / "cells" / "clip" / "trial_0" / "final.txt").exists()
    shutil.rmtree(tmp_path / "out")


CRASH = (
    "import os\n"
    "print('step 1 loss 2.5')\n"
    "print('connecting to the tracker with --api-key ' + os.environ['TRACKER_SETTING'])\n"
    "def train():\n"
    "    raise RuntimeError('CUDA error: an illegal memory access was encountered')\n"
    "train()\n"
)


def test_a_crashing_commands_last_lines_reach_error_txt_the_console_and_matrix_md(
    tmp_path: Path,
) -> None:
    done = aorta(
        "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
        "--environment-axis", "local", "--trials", "2", "--steps", "3", "--progress", "plain",
        "--output-dir", str(tmp_path), "--", sys.executable, "-c", CRASH,
        env={"TRACKER_SETTING": "hunter2"},
    )  # fmt: skip
    assert done.returncode == 1  # every trial errored: nothing was measured
    crash = "RuntimeError: CUDA error: an illegal memory access was encountered"
    # One line on the console per trial, the exception in it.
    trial_lines = [line for line in done.stdout.splitlines() if "seed=" in line]
    assert len(trial_lines) == 2 and all(f"last output: {crash}" in t for t in trial_lines)
    run_dir = only_run_dir(tmp_path)
    assert f"last output: {crash}" in (run_dir / "matrix.md").read_text()
    error_txt = (run_dir / "cells" / "none-local" / "error.txt").read_text()
    tail = error_txt.split("log tail of the first errored trial:\n", 1)[1]
    assert tail.splitlines()[0] == "step 1 loss 2.5"
    assert "Traceback (most recent call last):" in tail and "line 5, in train" in tail
    assert tail.rstrip().endswith(crash)
    # Not widened: the secret the command printed is in its own log only, not in the records.
    assert "--api-key <redacted>" in tail and "hunter2" not in error_txt
    trial = json.loads((run_dir / "cells" / "none-local" / "trial_0.json").read_text())
    assert "hunter2" not in json.dumps(trial) and trial["traceback"].endswith(crash)
    assert "hunter2" in (run_dir / "cells" / "none-local" / "trial_0.log").read_text()


def test_a_bad_command_workload_is_reported_once_not_again_in_every_cell(tmp_path: Path) -> None:
    workload = {"command": [sys.executable], "step_time": {"regex": r"step (?P<ms>\d+)"}}
    cells = [
        {"name": "baseline", "mitigations": ["none"], "environment": "local",
         "command_args": ["--a"]},
        {"name": "b", "mitigations": ["none"], "environment": "local", "command_args": ["--b"],
         "extra_env": {"X": "1"}},
    ]  # fmt: skip
    path = write_recipe(tmp_path, workload, cells)
    done = aorta("triage", "run", "--recipe", str(path), "--dry-run")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()  # the root cause only
    assert "workload.step_time.regex: expected a named group (?P<time>...)" in line

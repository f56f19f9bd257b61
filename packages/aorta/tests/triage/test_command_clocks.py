"""`clock:` of a command workload through `aorta triage run`: recorded, resolved, reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

AORTA = str(Path(sys.executable).with_name("aorta"))
WORK = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "work.py")
STEP_TIME = {"regex": r"^step (?P<step>\d+) printed (?P<time>[0-9.]+) ms", "unit": "ms"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def triage(tmp_path: Path, workload: dict[str, object]) -> subprocess.CompletedProcess[str]:
    recipe = {
        "schema_version": 1,
        "workload": workload,
        "trials": 2,
        "steps": 4,
        "cells": [
            {"name": "busy", "mitigations": ["none"], "environment": "local"},
            {"name": "sleep", "mitigations": ["none"], "environment": "local"},
        ],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return subprocess.run(
        [AORTA, "triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_cpu_clock_runs_end_to_end_and_is_reported(tmp_path: Path) -> None:
    # The cell's name is work.py's mode: each step spins 0.1 s of CPU, or sleeps 0.1 s.
    workload = {
        "command": [sys.executable, WORK, "{cell}", "{steps}", "0.1"],
        "step_time": STEP_TIME,
        "clock": "cpu",
        "warmup_steps": 1,
    }
    done = triage(tmp_path, workload)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = [p.parent for p in (tmp_path / "out").rglob("recipe.resolved.yaml")]
    resolved = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text())
    assert resolved["workload"]["command"]["clock"] == "cpu"
    trial = json.loads((run_dir / "cells" / "busy" / "trial_0.json").read_text())
    assert trial["step_clock"] == "cpu" and trial["command"]["clock"] == "cpu"
    assert trial["host_load"]["samples"] >= 2
    busy = trial["step_times_ms"]
    idle = json.loads((run_dir / "cells" / "sleep" / "trial_0.json").read_text())["step_times_ms"]
    assert len(busy) == 3 and all(70.0 < t < 160.0 for t in busy)  # 100 ms of CPU per step
    assert len(idle) == 3 and all(t < 30.0 for t in idle)  # sleeping costs no CPU
    md = (run_dir / "matrix.md").read_text()
    assert "**Step times from**: cpu (every cell)" in md.splitlines()
    assert "**Host load during the run**" not in md  # no wall clock timed any step
    cells = {c["name"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}
    assert cells["sleep"]["time_sources"] == ["cpu"]

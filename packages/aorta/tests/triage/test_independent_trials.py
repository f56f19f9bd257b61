"""Real command workloads: a script that ignores its seed gives copies, and the matrix says so.

Each trial is a real process running `scripts/seeded.py`, which either hard-codes its seed
(as nanoGPT's train.py does) or reads `AORTA_SEED`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

AORTA = str(Path(sys.executable).with_name("aorta"))
SEEDED = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "seeded.py")


DETERMINISTIC = "not independent: fails identically in every trial (deterministic)"


def _run_recipe(tmp_path: Path, how: str, cells: list[dict[str, Any]]) -> Path:
    recipe = {
        "schema_version": 1,
        "workload": {
            "command": [sys.executable, SEEDED, "{steps}", how],
            "step_time": "jsonl",
            "warmup_steps": 0,
            "hang_after": 60,
        },
        "trials": 3,
        "steps": 6,
        "cells": [{"mitigations": ["none"], "environment": "local", **c} for c in cells],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    done = subprocess.run(
        [AORTA, "triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        # Values in aorta's own environment do not reach the trials: each gets its own seed.
        env={**os.environ, "OMP_NUM_THREADS": "1", "AORTA_SEED": "999", "PYTHONHASHSEED": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = [p.parent for p in (tmp_path / "out").rglob("matrix.json")]
    return run_dir


def _cells(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}


def _p(row: dict[str, Any]) -> float | None:
    """The row's raw Fisher p (`fisher_p`; `p_value` once p-values are Holm-adjusted too)."""
    value = row["p_value"] if "p_value" in row else row["fisher_p"]
    assert value is None or isinstance(value, float)
    return value


def _banner(run_dir: Path) -> list[str]:
    md = (run_dir / "matrix.md").read_text()
    return [line.rstrip() for line in md.splitlines() if line.startswith("> ")]


def test_a_script_that_ignores_its_seed_gives_copies_that_are_not_scored(tmp_path: Path) -> None:
    run_dir = _run_recipe(
        tmp_path,
        "--hard-coded",
        [
            {"name": "baseline", "command_args": ["--diverge-at", "4"]},
            {"name": "fix"},
            {"name": "quiet", "command_args": ["--no-loss"]},
            {"name": "quiet-nan", "command_args": ["--no-loss", "--diverge-at", "3"]},
        ],
    )
    cells = _cells(run_dir)
    base, fix, quiet = cells["baseline"], cells["fix"], cells["quiet"]
    assert (base["failed_count"], fix["passed_count"], quiet["passed_count"]) == (3, 3, 3)
    # The baseline fails identically every time: a finding, not three independent failures.
    assert base["confound"] == DETERMINISTIC
    assert base["independent"] is False and base["nan_rate_ci"] is None
    assert base["independence"]["deterministic_failure"] is True
    assert base["independence"]["copies"] == [[0, 1, 2]]
    # Copies that pass are no evidence of a cure either, and a copied baseline compares nothing.
    assert fix["confound"] == "not independent: its 3 trials are copies (identical loss traces)"
    assert _p(fix) is None and fix["independent"] is False
    # No loss printed: the logs are compared instead.
    assert quiet["confound"] == "not independent: its 3 trials are copies (identical logs)"
    assert _p(quiet) is None
    # The logs of a failure are compared up to the failure line: each trial printed a different
    # tail (the time) before aorta stopped it.
    quiet_nan = cells["quiet-nan"]
    assert quiet_nan["failed_count"] == 3
    assert quiet_nan["confound"] == DETERMINISTIC
    assert quiet_nan["independence"]["basis"] == ["logs"]
    tails = {
        (run_dir / "cells" / "quiet-nan" / f"trial_{i}.log").read_text().split("backward pass")[1]
        for i in range(3)
    }
    assert len(tails) > 1  # the logs differ, after the failure line
    banner = _banner(run_dir)
    expected = (
        "> **Warning**: cell baseline: its 3 trials are copies (identical loss traces): their "
        "different seeds did not change the run, so they are not counted as independent trials "
        "(no failure-rate interval, no p-value); make the script take its seed from the "
        'environment (`seed = int(os.environ.get("AORTA_SEED", "1337"))`) or pass `{seed}` in its '
        "arguments. It fails identically in every trial (deterministic). Every comparison with "
        "the baseline is therefore not independent either."
    )
    assert expected in banner
    quiet_banner = "> **Warning**: cell quiet: its 3 trials are copies (identical logs)"
    assert any(line.startswith(quiet_banner) for line in banner)
    # Each trial had its own seed in its environment, recorded, and the script saw it.
    for trial_id in range(3):
        trial = json.loads((run_dir / "cells" / "baseline" / f"trial_{trial_id}.json").read_text())
        seed = str(trial["seed"])
        assert trial["env_applied"]["AORTA_SEED"] == seed
        assert trial["env_applied"]["PYTHONHASHSEED"] == seed
        assert len(trial["command"]["log_digest"]) == 32
        log = (run_dir / "cells" / "baseline" / f"trial_{trial_id}.log").read_text()
        assert f'{{"AORTA_SEED": "{seed}", "PYTHONHASHSEED": "{seed}"}}' in log


def test_a_script_that_reads_aorta_seed_gives_independent_trials(tmp_path: Path) -> None:
    run_dir = _run_recipe(
        tmp_path,
        "--from-env",
        [
            {"name": "baseline", "command_args": ["--diverge-at", "4"]},
            {"name": "fix"},
            # The cell's own setting wins: one seed for every trial, so they are copies again.
            {"name": "pinned", "extra_env": {"AORTA_SEED": "7"}},
        ],
    )
    cells = _cells(run_dir)
    base, fix, pinned = cells["baseline"], cells["fix"], cells["pinned"]
    assert base["failed_count"] == 3 and fix["passed_count"] == 3
    for row in (base, fix):
        assert row["independent"] is True
        assert row["independence"]["distinct"] == 3 and row["independence"]["copies"] == []
        assert not row["confound"].startswith("not independent")
    assert base["nan_rate_ci"] is not None
    p_fix = _p(fix)
    assert p_fix is not None and p_fix < 0.2  # 0/3 vs 3/3: p = 0.1
    assert pinned["confound"] == "not independent: its 3 trials are copies (identical loss traces)"
    assert _p(pinned) is None
    banner = _banner(run_dir)
    assert [line for line in banner if "copies" in line] == [
        line for line in banner if line.startswith("> **Warning**: cell pinned: its 3 trials")
    ]
    assert len([line for line in banner if "copies" in line]) == 1
    trial = json.loads((run_dir / "cells" / "pinned" / "trial_2.json").read_text())
    assert trial["seed"] == 2
    assert trial["env_applied"]["AORTA_SEED"] == "7"
    assert trial["env_applied"]["PYTHONHASHSEED"] == "2"

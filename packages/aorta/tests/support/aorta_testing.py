"""Test-data builders shared by aorta's test modules (on pytest's `pythonpath`)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.runner.models import TrialResult


def make_trial(
    trial_id: int,
    *,
    passed: bool,
    step_times_ms: Sequence[float],
    failure: str = "non-finite loss",
    **fields: Any,
) -> TrialResult:
    """A finished trial record; `failure` is used only when the trial failed.

    Every other `TrialResult` field has a plain default (fsdp, `none`, local, seed = trial id,
    one loss that depends on the seed) that `fields` overrides.
    """
    values: dict[str, Any] = {
        "workload": "fsdp",
        "mitigations": ("none",),
        "environment": "local",
        "seed": trial_id,
        "steps": 4,
        "warmup_steps": 0,
        # A seeded run: its loss depends on the seed, so trials are not copies of one another
        # (`aorta.triage.analysis.independence`) unless a test says so.
        "losses": [1.0 + fields.get("seed", trial_id) / 1000.0],
        "wall_clock_sec": 0.1,
        "started_at": "2026-01-01T00:00:00Z",
        "env_applied": {},
        "env_snapshot": {},
        "observed": {},
        **fields,
    }
    return TrialResult(
        trial_id=trial_id,
        passed=passed,
        failure=None if passed else failure,
        step_times_ms=list(step_times_ms),
        **values,
    )


# A command workload whose outcome is set per trial: it fails (a non-finite loss, which the
# default patterns know) when `pattern[seed]` is "1". Trial k has seed k, so which trials fail
# is known in advance (adaptive trials, executors compared on the same outcomes).
SEEDED_OUTCOME_SCRIPT = (
    "import sys, time\n"
    "seed, pattern, pause = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])\n"
    "time.sleep(pause)\n"
    "print('loss: nan' if pattern[seed] == '1' else 'loss: 1.0')\n"
)


def adaptive_recipe(
    path: Path, patterns: Mapping[str, str], n: int, pause: float = 0.0, **top: Any
) -> Path:
    """Write an adaptive recipe (`max_trials` `n`) to `path`: one cell per pattern of
    `SEEDED_OUTCOME_SCRIPT`, the first the baseline; `top` adds or replaces top-level keys."""
    cells = [
        {
            "name": name,
            "mitigations": ["none"],
            "environment": "local",
            "command_args": [pattern, str(pause)],
        }
        for name, pattern in patterns.items()
    ]
    recipe = {
        "schema_version": 1,
        "workload": {"command": [sys.executable, "-c", SEEDED_OUTCOME_SCRIPT, "{seed}"]},
        "steps": 1,
        "adaptive": {"max_trials": n},
        "confound": {"baseline_cell": next(iter(patterns))},
        "cells": cells,
    }
    path.write_text(yaml.safe_dump({**recipe, **top}))
    return path


def ctrl_c_once(
    proc: subprocess.Popen[str], root: Path, pattern: str, *, timeout_s: float = 60
) -> tuple[int, str]:
    """Send `proc` a Ctrl-C (SIGINT) once a file matching `pattern` exists under `root`; its
    exit status and stderr. Fails the test when no such file appears within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not list(root.glob(pattern)):
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no trial finished in time")
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err

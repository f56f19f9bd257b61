"""Test-data builders shared by aorta's test modules (on pytest's `pythonpath`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

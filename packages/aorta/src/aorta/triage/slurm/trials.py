"""Standing each trial of a SLURM matrix stands, and the error record of a trial SLURM lost.

`trial_states` is a pure function of the trial files on disk and the oellm-autoexp job rows
(`api.status`), so the driver, `aorta triage status` and the tests share one reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from aorta.atomic import write_json_atomic
from aorta.instrumentation.redaction import redact_environ
from aorta.runner.models import TrialResult
from aorta.triage.recipe import Cell, Recipe
from toolkit_core.timestamps import iso_stamp


class Standing(StrEnum):
    """A trial's place in the SLURM executor's life cycle."""

    UNSUBMITTED = "unsubmitted"  # due, in no submission (or its session is gone): to submit
    LATER = "later"  # an adaptive run's later round: not due until the rule has looked again
    PENDING = "pending"  # queued, or waiting for a resubmission
    RUNNING = "running"
    DONE = "done"  # its trial JSON is on disk: final, whatever SLURM says
    SKIPPED = "skipped"  # the cell's stop rule was met before it ran
    LOST = "lost"  # SLURM lost it and the resubmission cap is spent: becomes an error trial


@dataclass(frozen=True)
class JobRow:
    """What the driver needs of one oellm-autoexp job (an `api.JobStatus`)."""

    state: str  # pending, running, stalled, failed (for good), completed
    slurm_id: str | None
    restarts: int
    reason: str


@dataclass(frozen=True)
class TrialState:
    """One trial: where it stands and, for a lost one, why."""

    cell: str
    trial: int
    standing: Standing
    reason: str = ""
    resubmitted: int = 0  # times oellm-autoexp resubmitted its task so far


def trial_states(
    recipe: Recipe,
    done: Mapping[str, set[int]],
    stopped: set[str],
    jobs: Mapping[tuple[str, int], JobRow],
    *,
    due_until: int | None = None,
) -> list[TrialState]:
    """Every trial of `recipe`: `done` = trial ids on disk per cell, `stopped` = cells that
    get no more trials (stop rule met, or decided by the adaptive rule), `jobs` = the latest
    job row of each (cell, trial), `due_until` = an adaptive run's round now due (trials
    after it, in no job, are `LATER`; None: every trial is due)."""
    states = []
    for cell in recipe.cells:
        for trial in range(cell.trials):
            state = _state(cell, trial, done.get(cell.name, set()), stopped, jobs)
            later = due_until is not None and trial > due_until
            if later and state.standing is Standing.UNSUBMITTED:
                state = TrialState(cell.name, trial, Standing.LATER)
            states.append(state)
    return states


def _state(  # noqa: PLR0911 (a decision table: one return per outcome)
    cell: Cell,
    trial: int,
    done: set[int],
    stopped: set[str],
    jobs: Mapping[tuple[str, int], JobRow],
) -> TrialState:
    name = cell.name
    if trial in done:
        return TrialState(name, trial, Standing.DONE)
    job = jobs.get((name, trial))
    if job is None:
        if name in stopped:
            return TrialState(name, trial, Standing.SKIPPED)
        return TrialState(name, trial, Standing.UNSUBMITTED)
    if job.state == "completed":
        # The task printed its marker: the trial was on disk, or skipped by the stop rule.
        if name in stopped:
            return TrialState(name, trial, Standing.SKIPPED)
        reason = f"vanished: task {job.slurm_id} reported the trial recorded, but it is not"
        return TrialState(name, trial, Standing.LOST, reason)
    if job.state == "failed":
        if name in stopped:
            return TrialState(name, trial, Standing.SKIPPED)
        return TrialState(name, trial, Standing.LOST, job.reason)
    if job.state in ("running", "stalled"):
        return TrialState(name, trial, Standing.RUNNING, resubmitted=job.restarts)
    return TrialState(name, trial, Standing.PENDING, resubmitted=job.restarts)


def round_robin_tasks(recipe: Recipe, wanted: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """`wanted` trials in round order: trial k of every cell before trial k+1.

    Array tasks start in index order, so round order spreads every cell over the whole run
    (machine drift and queue waits hit all cells alike), as the local interleaved order does.
    """
    position = {cell.name: i for i, cell in enumerate(recipe.cells)}
    return sorted(set(wanted), key=lambda t: (t[1], position[t[0]]))


def write_lost_trial(recipe: Recipe, run_dir: Path, cell: Cell, trial: int, reason: str) -> None:
    """Write `trial_<id>.json` as an `error` trial: it measured nothing (never overwrites)."""
    from aorta.triage.run.local import cell_request

    request = cell_request(recipe, run_dir, cell, [trial], fresh_process=True)
    result = TrialResult(
        trial_id=trial,
        workload=request.workload,
        mitigations=request.mitigations,
        environment=request.environment_name,
        seed=request.trial_seed(trial),
        steps=request.steps,
        passed=False,
        outcome="error",
        failure=reason,
        step_times_ms=[],
        warmup_steps=0,
        losses=[],
        wall_clock_sec=0.0,
        started_at=iso_stamp(datetime.now(UTC)),
        env_applied=redact_environ(cell.env),
        env_snapshot={},
        observed={},
        execution="child_process",
    )
    request.output_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(request.trial_path(trial), result.to_dict())


def counts(states: Sequence[TrialState], cell: str) -> dict[Standing, int]:
    """How many of `cell`'s trials stand where."""
    tally = dict.fromkeys(Standing, 0)
    for state in states:
        if state.cell == cell:
            tally[state.standing] += 1
    return tally

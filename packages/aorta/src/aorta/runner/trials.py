"""B1: `run_trials(request) -> list[TrialResult]`."""

from __future__ import annotations

import os

from aorta.atomic import write_json_atomic
from aorta.errors import EnvironmentUnavailableError, OutputExistsError
from aorta.runner.child import run_trial_in_child
from aorta.runner.environ import applied_environ
from aorta.runner.in_process import run_trial_in_process
from aorta.runner.launchers import launcher_for
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.reporting import NullReporter, TrialReporter
from aorta.runner.resolve import ResolvedRequest, resolve_request
from aorta.workloads.contract import StepCallback


def distributed_rank() -> tuple[int, int]:
    """(rank, world_size) from the launcher's variables (torchrun sets RANK/WORLD_SIZE)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _check_outputs_free(request: RunRequest) -> None:
    taken = [p for p in map(request.trial_path, request.selected_trials()) if p.exists()]
    if taken:
        raise OutputExistsError(
            f"{request.output_dir} already holds {len(taken)} trial file(s) "
            f"(e.g. {taken[0].name}); results are never overwritten: choose a new output directory"
        )


def _validate_workload(resolved: ResolvedRequest) -> None:
    """Reject bad workload parameters before the first trial, as a usage error."""
    if resolved.workload.validate is None:
        return
    with applied_environ(resolved.env):
        resolved.workload.validate(dict(os.environ))


def _step_hook(report: TrialReporter, trial_id: int) -> StepCallback:
    def on_step(step: int, loss: float | None, step_time_ms: float) -> None:
        report.step(trial_id, step, loss, step_time_ms)

    return on_step


def run_trials(request: RunRequest, reporter: TrialReporter | None = None) -> list[TrialResult]:
    """Run the request's trials (`request.selected_trials()`) and write `trial_<id>.json` each.

    Raises before any trial runs for a bad request (unknown names -> `Unknown*Error`,
    conflicting mitigations, bad workload parameters, existing trial files) and
    `EnvironmentUnavailableError` when the environment cannot run trials at all (no docker
    engine, missing venv interpreter). A failing
    trial (non-finite loss, exception in the workload) never raises: it is a `TrialResult`
    with `passed=False`, its reason and traceback. KeyboardInterrupt propagates; every trial
    finished before it keeps its file.

    Trials of the `local` environment run in this interpreter, except when a mitigation is
    process-scoped or the request records kernel fingerprints: then each trial runs in a fresh
    child process with the same result contract. `venv` environments run each trial with
    their interpreter, `docker` environments in a `docker run` of their image (see
    `aorta.runner.launchers`). Under torchrun every rank runs every trial in-process and only
    rank 0 writes files.
    """
    report = reporter or NullReporter()
    resolved = resolve_request(request)
    environment = resolved.environment
    rank, world_size = distributed_rank()
    if environment.kind != "local" and world_size > 1:
        raise EnvironmentUnavailableError(
            f"environment {environment.name!r} (kind {environment.kind!r}) cannot run trials "
            "under torchrun: only 'local' joins the job"
        )
    launcher = launcher_for(environment)  # raises when the environment cannot run at all
    writer = rank == 0
    if writer:
        _check_outputs_free(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
    _validate_workload(resolved)
    # A fresh process cannot join a running torchrun job: under torchrun, process-scoped
    # variables must be set by the launcher (the trial records what it saw in `observed`).
    # Other environments (venv, docker) always run their trials in their own process.
    fresh = resolved.needs_fresh_process and world_size == 1
    in_child = environment.kind != "local" or fresh

    results: list[TrialResult] = []
    for trial_id in request.selected_trials():
        report.trial_started(request, trial_id, request.trial_seed(trial_id))
        if in_child:
            result = run_trial_in_child(resolved, trial_id, launcher)
        else:
            result = run_trial_in_process(
                resolved,
                trial_id,
                rank=rank,
                world_size=world_size,
                on_step=_step_hook(report, trial_id),
            )
            if writer:
                write_json_atomic(request.trial_path(trial_id), result.to_dict())
        report.trial_finished(result)
        results.append(result)
    return results

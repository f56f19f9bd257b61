"""B1: `run_trials(request) -> list[TrialResult]`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from aorta.atomic import write_json_atomic
from aorta.errors import EnvironmentUnavailableError, OutputExistsError
from aorta.runner.child import run_trial_in_child
from aorta.runner.environ import applied_environ
from aorta.runner.in_process import run_trial_in_process
from aorta.runner.launchers import Launcher, launcher_for
from aorta.runner.models import Execution, RunRequest, TrialResult
from aorta.runner.ownership import owning_trial
from aorta.runner.reporting import NullReporter, TrialReporter, step_hook
from aorta.runner.resolve import ResolvedRequest, resolve_request


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


def launcher_held_env(resolved: ResolvedRequest, environ: Mapping[str, str]) -> dict[str, str]:
    """Under torchrun: the process-scoped variables, which the launcher must already hold.

    A trial under torchrun cannot get a fresh process (it would not join the job), so a
    variable read at runtime start-up only acts when the launcher's environment held it from
    the start. Returns those variables (recorded in each trial as `launcher_env`); raises
    `EnvironmentUnavailableError` (the cell errors) when one is missing or has another value.
    """
    held: dict[str, str] = {}
    for mitigation in resolved.mitigations:
        if not mitigation.process_scoped:
            continue
        wanted = {key: resolved.env[key] for key in mitigation.env}
        missing = [f"{k}={v}" for k, v in wanted.items() if environ.get(k) != v]
        if missing:
            raise EnvironmentUnavailableError(
                f"process-scoped mitigation {mitigation.name} must be set by the launcher "
                f"under torchrun ({', '.join(missing)} not in the launcher's environment)"
            )
        held.update(wanted)
    return held


class TrialSessionLike(Protocol):
    """What a caller needs of an opened request: how its trials run, and one trial at a time."""

    @property
    def execution(self) -> Execution:
        """How this session's trials run."""
        ...

    def run(self, trial_id: int) -> TrialResult:
        """Run trial `trial_id` (one of the request's selected trials) and write its JSON."""
        ...


@dataclass
class TrialSession:
    """One request, checked and resolved once, whose trials run one call at a time.

    `open_trials` does everything `run_trials` does before its first trial; `run` then runs
    any of the request's selected trials, in any order. The triage runner's interleaved order
    runs round k of every cell before round k+1 through one session per cell.
    """

    request: RunRequest
    resolved: ResolvedRequest
    launcher: Launcher
    reporter: TrialReporter
    in_child: bool
    rank: int
    world_size: int
    held: dict[str, str]  # process-scoped variables the torchrun launcher already held

    @property
    def execution(self) -> Execution:
        """How this session's trials run."""
        return "child_process" if self.in_child else "in_process"

    def run(self, trial_id: int) -> TrialResult:
        """Run trial `trial_id` (one of the request's selected trials) and write its JSON."""
        request, report = self.request, self.reporter
        report.trial_started(request, trial_id, request.trial_seed(trial_id))
        if self.in_child:
            with owning_trial(request.output_dir, trial_id) as owner:
                result = run_trial_in_child(self.resolved, trial_id, self.launcher, owner=owner)
        else:
            # Only rank 0 writes into the run directory, the owner record included.
            owning = owning_trial(request.output_dir, trial_id) if self.rank == 0 else None
            with owning or contextlib.nullcontext():
                result = run_trial_in_process(
                    self.resolved,
                    trial_id,
                    rank=self.rank,
                    world_size=self.world_size,
                    on_step=step_hook(report, trial_id),
                )
                if self.held:
                    result = dataclasses.replace(result, launcher_env=self.held)
                if self.rank == 0:
                    write_json_atomic(request.trial_path(trial_id), result.to_dict())
        report.trial_finished(result)
        return result


def open_trials(request: RunRequest, reporter: TrialReporter | None = None) -> TrialSessionLike:
    """Check and resolve `request` once; raise what `run_trials` raises before any trial."""
    report = reporter or NullReporter()
    if request.command is not None:
        _check_outputs_free(request)
        from aorta.runner.command.runner import open_command_trials

        return open_command_trials(request, report)
    resolved = resolve_request(request)
    environment = resolved.environment
    rank, world_size = distributed_rank()
    if environment.kind != "local" and world_size > 1:
        raise EnvironmentUnavailableError(
            f"environment {environment.name!r} (kind {environment.kind!r}) cannot run trials "
            "under torchrun: only 'local' joins the job"
        )
    launcher = launcher_for(environment)  # raises when the environment cannot run at all
    if rank == 0:
        _check_outputs_free(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
    _validate_workload(resolved)
    # A fresh process cannot join a running torchrun job: under torchrun, process-scoped
    # variables must already be in the launcher's environment (else the cell errors), and
    # `fresh_process` cannot be honoured either. Other environments (venv, docker) always run
    # their trials in their own process.
    held = launcher_held_env(resolved, os.environ) if world_size > 1 else {}
    fresh = (resolved.needs_fresh_process or request.fresh_process) and world_size == 1
    return TrialSession(
        request=request,
        resolved=resolved,
        launcher=launcher,
        reporter=report,
        in_child=environment.kind != "local" or fresh,
        rank=rank,
        world_size=world_size,
        held=held,
    )


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
    process-scoped, the request records kernel fingerprints or asks for `fresh_process`: then
    each trial runs in a fresh
    child process with the same result contract. `venv` environments run each trial with
    their interpreter, `docker` environments in a `docker run` of their image (see
    `aorta.runner.launchers`). Under torchrun every rank runs every trial in-process and only
    rank 0 writes files; a process-scoped mitigation then needs its variables in the
    launcher's environment (`launcher_held_env`), else `EnvironmentUnavailableError`.

    A request with a `command` (a command workload) runs each trial as that command in a
    fresh process group instead (`aorta.runner.command.runner`), local environment only.
    """
    session = open_trials(request, reporter)
    return [session.run(trial_id) for trial_id in request.selected_trials()]

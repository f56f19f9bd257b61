"""Run one trial in this interpreter: env applied, workload called, outcome recorded."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.locate_record import trial_record
from aorta.instrumentation.redaction import redact_environ
from aorta.runner.environ import applied_environ
from aorta.runner.host import collect_host
from aorta.runner.host_load import HostLoad, LoadSampler
from aorta.runner.models import Execution, Outcome, TrialResult
from aorta.runner.outcome import classify_exception, classify_outcome
from aorta.runner.resolve import ResolvedRequest
from aorta.workloads.contract import StepCallback, TrialContext, WorkloadOutcome, ignore_step

if TYPE_CHECKING:  # torch is imported only when a trial asks for locating
    from aorta.instrumentation.locate import Locator


def utc_timestamp() -> str:
    """Now, as ISO 8601 UTC with a trailing Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextlib.contextmanager
def _kernel_recording(enabled: bool) -> Iterator[dict[str, str] | None]:
    """`{kernel: fingerprint}` of the Triton kernels compiled inside the block, when enabled.

    Imported here, not at module level: triton-invariance (and Triton) are an optional extra
    that only a trial asking for fingerprints needs.
    """
    if not enabled:
        yield None
        return
    from triton_invariance.record import record_fingerprints

    with record_fingerprints() as seen:
        yield seen


@contextlib.contextmanager
def _locating(enabled: bool) -> Iterator[Locator | None]:
    """A locator installed while the block runs, when enabled and torch is importable.

    Imported here: the locator imports torch, which only a locating trial needs.
    """
    if not enabled:
        yield None
        return
    try:
        from aorta.instrumentation.locate import Locator
    except ImportError:  # no torch in this interpreter: there is nothing to locate
        yield None
        return
    locator = Locator()
    locator.install()
    try:
        yield locator
    finally:
        locator.remove()


def run_trial_in_process(
    resolved: ResolvedRequest,
    trial_id: int,
    *,
    rank: int = 0,
    world_size: int = 1,
    on_step: StepCallback = ignore_step,
    execution: Execution = "in_process",
) -> TrialResult:
    """Run trial `trial_id` here and return its record (never raises for a failed trial).

    The trial's variables are in `os.environ` only while the workload runs and are restored
    afterwards, also when the workload raises. An exception from the workload becomes a failed
    or errored trial (`aorta.runner.outcome.classify_exception`) carrying the exception text
    and traceback.
    """
    request = resolved.request
    started_at = utc_timestamp()
    start = time.perf_counter()
    outcome: WorkloadOutcome | None = None
    failure: str | None = None
    verdict: Outcome = "passed"
    trace: str | None = None
    steps_completed = 0
    fingerprints: dict[str, str] | None = None
    load = LoadSampler()
    load.sample(time.monotonic(), force=True)

    def counting_step(step: int, loss: float | None, step_time_ms: float) -> None:
        # The default classification of an exception needs to know whether a step completed.
        nonlocal steps_completed
        steps_completed += 1
        if locator is not None:
            locator.end_step(step)  # later checks belong to the next step
        load.sample(time.monotonic())  # at most one read per interval
        on_step(step, loss, step_time_ms)

    with _locating(request.locate) as locator, applied_environ(resolved.trial_env(trial_id)):
        ctx = TrialContext(
            trial_id=trial_id,
            seed=request.trial_seed(trial_id),
            steps=request.steps,
            environ=dict(os.environ),
            output_dir=request.output_dir,
            rank=rank,
            world_size=world_size,
            on_step=counting_step,
        )
        try:
            with _kernel_recording(request.fingerprint_kernels) as seen:
                fingerprints = seen  # filled while the workload compiles, also if it raises
                outcome = resolved.workload.entry(ctx)
            verdict, failure = classify_outcome(outcome)
        except Exception as exc:  # a failing trial is data, not a crash of the runner
            verdict, failure = classify_exception(exc, steps_completed)
            trace = traceback.format_exc()
        # Taken after the workload ran, still inside the trial's environment: by then the
        # workload has imported its libraries, so their effective settings can be read.
        snapshot = collect_env(scope="trial")
    first_nonfinite = trial_record(locator) if request.locate else None
    load.sample(time.monotonic(), force=True)
    return build_trial_result(
        resolved,
        trial_id,
        outcome=outcome,
        verdict=verdict,
        failure=failure,
        traceback_text=trace,
        started_at=started_at,
        wall_clock_sec=time.perf_counter() - start,
        env_snapshot=snapshot.to_dict(),
        execution=execution,
        rank=rank,
        world_size=world_size,
        kernel_fingerprints=None if fingerprints is None else dict(fingerprints),
        host_load=load.record(),
        first_nonfinite=first_nonfinite,
    )


def build_trial_result(
    resolved: ResolvedRequest,
    trial_id: int,
    *,
    outcome: WorkloadOutcome | None,
    verdict: Outcome,
    failure: str | None,
    traceback_text: str | None,
    started_at: str,
    wall_clock_sec: float,
    env_snapshot: dict[str, Any],
    execution: Execution,
    rank: int = 0,
    world_size: int = 1,
    kernel_fingerprints: dict[str, str] | None = None,
    host_load: HostLoad | None = None,
    first_nonfinite: dict[str, Any] | None = None,
) -> TrialResult:
    """The trial record; `outcome` is None when the workload produced none (it raised, died).

    `verdict` is the trial's outcome (passed / failed / error), `failure` its reason.
    """
    request = resolved.request
    return TrialResult(
        trial_id=trial_id,
        workload=request.workload,
        mitigations=request.mitigations,
        environment=request.environment_name,
        seed=request.trial_seed(trial_id),
        steps=request.steps,
        passed=verdict == "passed",
        outcome=verdict,
        failure=failure,
        step_times_ms=list(outcome.step_times_ms) if outcome else [],
        warmup_steps=outcome.warmup_steps if outcome else 0,
        losses=list(outcome.losses) if outcome else [],
        wall_clock_sec=wall_clock_sec,
        started_at=started_at,
        # Recorded, never re-applied: a recipe's extra_env may carry a secret.
        env_applied=redact_environ(resolved.trial_env(trial_id)),
        env_snapshot=env_snapshot,
        observed=dict(outcome.observed) if outcome else {},
        step_clock=outcome.step_clock if outcome else None,
        execution=execution,
        failed_at_step=outcome.failed_at_step if outcome else None,
        traceback=traceback_text,
        rank=rank,
        world_size=world_size,
        kernel_fingerprints=kernel_fingerprints,
        host=collect_host(),
        host_load=host_load,
        first_nonfinite=first_nonfinite,
    )

"""Entry points for aorta's registry and runner tests.

`toy` is a pure-Python stand-in for a training loop whose behaviour is steered by
environment variables, so the runner's contract (env applied and restored, failures as
results, child processes) can be tested fast and exactly. The real fsdp workload has its own
end-to-end tests.
"""

from __future__ import annotations

import math
import os
import time

from aorta.registry import Environment, Mitigation, Workload
from aorta.workloads.contract import TrialContext, TrialError, TrialFailure, WorkloadOutcome

FIX = Mitigation(
    name="plugin_fix",
    env={"AORTA_TOY_FIX": "1"},
    description="toy workload: never diverge.",
)
PROCESS_SCOPED = Mitigation(
    name="plugin_process",
    env={"AORTA_TOY_PROCESS_FLAG": "on"},
    description="toy: a variable read at process start.",
    process_scoped=True,
)
SHADOW_NONE = Mitigation(name="none", env={"AORTA_TOY_SHADOW": "1"}, description="clashes")
NOT_A_MITIGATION = {"name": "plugin_wrong_type"}


def make_factory_mitigation() -> Mitigation:
    """Entry points may name a zero-argument factory instead of the object itself."""
    return Mitigation(
        name="plugin_factory", env={"AORTA_TOY_FACTORY": "1"}, description="from a factory"
    )


DOCKER_ENV = Environment(
    name="plugin_docker", kind="docker", image="busybox:latest", description="test image"
)

_WATCHED = ("AORTA_TOY_FIX", "AORTA_TOY_PROCESS_FLAG", "AORTA_TOY_EXTRA", "AORTA_TOY_FACTORY")


def _toy(ctx: TrialContext) -> WorkloadOutcome:
    """Loss = (1 + seed/1000)/(step+1); NaN at AORTA_TOY_FAIL_AT for odd seeds unless fixed.

    Outcome knobs: AORTA_TOY_RAISE (RuntimeError before any step), AORTA_TOY_RAISE_AT=<step>
    (RuntimeError after that step completed), AORTA_TOY_IMPORT=<module> (imports it first),
    AORTA_TOY_DECLARE=error|failure (raises TrialError / TrialFailure), AORTA_TOY_ERROR_SEEDS
    (comma-separated seeds whose trial returns an outcome with `error` set).
    """
    env = os.environ
    if env.get("AORTA_TOY_RAISE"):
        raise RuntimeError("toy workload asked to raise")
    if env.get("AORTA_TOY_IMPORT"):
        __import__(env["AORTA_TOY_IMPORT"])
    declared = env.get("AORTA_TOY_DECLARE")
    if declared == "error":
        raise TrialError("toy: no device to measure on")
    if declared == "failure":
        raise TrialFailure("toy: the checked invariant broke")
    if str(ctx.seed) in env.get("AORTA_TOY_ERROR_SEEDS", "").split(","):
        return WorkloadOutcome(step_times_ms=[], warmup_steps=0, losses=[], error="toy: setup")
    raise_at = int(env.get("AORTA_TOY_RAISE_AT", "-1"))
    if env.get("AORTA_TOY_INTERRUPT_AT_TRIAL") == str(ctx.trial_id):
        raise KeyboardInterrupt
    fail_at = int(env.get("AORTA_TOY_FAIL_AT", "-1"))
    sleep_s = float(env.get("AORTA_TOY_SLEEP_S", "0"))
    diverges = ctx.seed % 2 == 1 and not env.get("AORTA_TOY_FIX")
    losses: list[float | None] = []
    times: list[float] = []
    failure = None
    failed_at = None
    for step in range(ctx.steps):
        start = time.perf_counter()
        time.sleep(sleep_s)
        # The seed moves the loss, as in a real run: trials are not copies of one another.
        loss = math.nan if diverges and step == fail_at else (1.0 + ctx.seed / 1000) / (step + 1)
        elapsed = (time.perf_counter() - start) * 1000.0
        ctx.on_step(step, None if math.isnan(loss) else loss, elapsed)
        if step == raise_at:
            raise RuntimeError(f"toy workload raised after step {step}")
        if math.isnan(loss):
            losses.append(None)
            failure, failed_at = f"non-finite loss at step {step}", step
            break
        losses.append(loss)
        times.append(elapsed)
    observed: dict[str, object] = {key: env.get(key) for key in _WATCHED}
    observed["pid"] = os.getpid()
    return WorkloadOutcome(
        step_times_ms=times,
        warmup_steps=0,
        losses=losses,
        failure=failure,
        failed_at_step=failed_at,
        observed=observed,
    )


def _crash(ctx: TrialContext) -> WorkloadOutcome:
    """Die like a segfaulting kernel would: no exception, no result."""
    print("crash workload: exiting hard", flush=True)
    os._exit(3)


TOY = Workload(name="toy", entry=_toy, description="pure-Python stand-in workload")
CRASH = Workload(name="crash", entry=_crash, description="kills its own process")

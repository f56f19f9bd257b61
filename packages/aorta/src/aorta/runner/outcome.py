"""How a trial's outcome is decided: passed, failed (the failure under study) or error.

Pure functions: the in-process runner hands them what the workload returned or raised, and
how many steps it completed before that. The workload contract
(`aorta.workloads.contract`) documents the rules for workload authors; the reasons written
here end up in trial JSONs, `matrix.json` and `matrix.md`.
"""

from __future__ import annotations

from aorta.runner.models import Outcome
from aorta.workloads.contract import TrialError, TrialFailure, WorkloadOutcome

__all__ = ["INSTALL_HINTS", "classify_exception", "classify_outcome"]

# Modules a workload may need that an aorta extra installs: a missing one is a setup error
# whose reason says the command that fixes it.
INSTALL_HINTS = {
    "torch": "pip install 'aorta[torch]'",
    "numpy": "pip install 'aorta[torch]'",
    "matplotlib": "pip install 'aorta[plot]'",
    "triton": "pip install 'aorta[invariance]'",
}


def _is_out_of_memory(exc: BaseException) -> bool:
    # torch.cuda.OutOfMemoryError / torch.OutOfMemoryError are matched by name: importing
    # torch here to isinstance-check would load it for workloads that never use it.
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"


def classify_exception(exc: BaseException, steps_completed: int) -> tuple[Outcome, str]:
    """The outcome and one-line reason of a trial whose workload raised `exc`.

    `TrialFailure` -> failed and `TrialError` -> error (the workload decided). A missing module
    (`ImportError`) and out-of-memory are errors whatever the step. Any other exception is an
    error before the first completed step (the trial never measured) and a failure after it.
    """
    message = str(exc)
    text = " ".join(f"{type(exc).__name__}{': ' + message if message else ''}".split())
    if isinstance(exc, TrialFailure):
        return "failed", text
    if isinstance(exc, TrialError):
        return "error", text
    if isinstance(exc, ImportError):
        module = (exc.name or "").split(".")[0]
        hint = INSTALL_HINTS.get(module)
        fix = f"; install it with: {hint}" if hint else ""
        return "error", f"workload import error: {text}{fix}"
    if _is_out_of_memory(exc):
        return "error", f"out of memory: {text}"
    if steps_completed == 0:
        return "error", f"error before the first completed step: {text}"
    return "failed", f"{text} (after {steps_completed} completed step(s))"


def classify_outcome(outcome: WorkloadOutcome) -> tuple[Outcome, str | None]:
    """The outcome and reason of a trial whose workload returned `outcome`."""
    if outcome.error is not None:
        return "error", outcome.error
    if outcome.failure is not None:
        return "failed", outcome.failure
    return "passed", None

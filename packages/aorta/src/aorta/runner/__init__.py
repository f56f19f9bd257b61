"""B1: run a workload's trials under mitigations in an environment (`run_trials`)."""

from typing import TYPE_CHECKING, Any

from aorta.runner.environ import MitigationConflictError, applied_environ, merge_env
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.reporting import NullReporter, TrialReporter

if TYPE_CHECKING:  # type checkers see the real function; at run time __getattr__ loads it
    from aorta.runner.trials import run_trials

__all__ = [
    "MitigationConflictError",
    "NullReporter",
    "RunRequest",
    "TrialReporter",
    "TrialResult",
    "applied_environ",
    "merge_env",
    "run_trials",
]


def __getattr__(name: str) -> Any:
    # `run_trials` pulls in the child-process, launcher and probe machinery (~50 ms): only on
    # first use, so that commands that merely validate (a recipe --dry-run importing
    # `aorta.runner.environ`) stay within their start-up budget.
    if name == "run_trials":
        from aorta.runner.trials import run_trials

        return run_trials
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

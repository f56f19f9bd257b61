"""B1: run a workload's trials under mitigations in an environment (`run_trials`)."""

from aorta.runner.environ import MitigationConflictError, applied_environ, merge_env
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.reporting import NullReporter, TrialReporter
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

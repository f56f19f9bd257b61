"""B1: run a workload's trials under mitigations in an environment (`run_trials`).

The names below are imported on first use (`toolkit_core.cli.lazy_exports`): every import of a
submodule (`aorta.runner.command.spec` for the CLI's option lists) imports this package first,
and `aorta --help` must not pay for the environment, result models and the trial machinery.
"""

from typing import TYPE_CHECKING

from toolkit_core.cli import lazy_exports

if TYPE_CHECKING:  # type checkers see the real names; at run time __getattr__ loads them
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

__getattr__ = lazy_exports(
    __name__,
    {
        "MitigationConflictError": "aorta.runner.environ",
        "applied_environ": "aorta.runner.environ",
        "merge_env": "aorta.runner.environ",
        "RunRequest": "aorta.runner.models",
        "TrialResult": "aorta.runner.models",
        "NullReporter": "aorta.runner.reporting",
        "TrialReporter": "aorta.runner.reporting",
        "run_trials": "aorta.runner.trials",
    },
)

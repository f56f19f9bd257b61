"""Error types shared across aorta.

`AortaUsageError` and its subclasses mean the *user* asked for something that cannot be
done (unknown name, bad value, missing file). The CLI turns them into one line on stderr and
exit code 2; they never surface as a traceback. The bases and the behaviour they share with the
other tools (exit codes, listing known names, the write errors of `toolkit_core.atomic`) live in
`toolkit_core.errors`.
"""

from __future__ import annotations

from toolkit_core import errors as core
from toolkit_core.errors import OutputExistsError, OutputWriteError

__all__ = [
    "AortaError",
    "AortaUsageError",
    "EnvironmentUnavailableError",
    "OutputExistsError",
    "OutputWriteError",
    "UnknownEnvironmentError",
    "UnknownMitigationError",
    "UnknownNameError",
    "UnknownWorkloadError",
    "WorkloadConfigError",
]


class AortaError(core.ToolkitError):
    """Base class of every error aorta raises on purpose."""


class AortaUsageError(AortaError, core.UsageError):
    """A user mistake: bad input, unknown name, missing file (CLI exit code 2)."""


class UnknownNameError(AortaUsageError, core.UnknownNameError):
    """A name that is not registered; lists the known names and a close match."""


class UnknownMitigationError(UnknownNameError):
    """No mitigation of that name is registered."""

    kind = "mitigation"


class UnknownEnvironmentError(UnknownNameError):
    """No environment of that name is registered."""

    kind = "environment"


class UnknownWorkloadError(UnknownNameError):
    """No workload of that name is registered."""

    kind = "workload"


class WorkloadConfigError(AortaUsageError):
    """A workload parameter (usually an environment variable) has an invalid value."""


class EnvironmentUnavailableError(AortaError):
    """A whole environment cannot run trials (engine down, kind not dispatchable).

    This is a cell-level failure: the triage runner records it as an `error` cell and goes
    on with the other cells.
    """

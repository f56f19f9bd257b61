"""Error types shared across aorta.

`AortaUsageError` and its subclasses mean the *user* asked for something that cannot be
done (unknown name, bad value, missing file). The CLI turns them into one line on stderr and
exit code 2; they never surface as a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AortaError(Exception):
    """Base class of every error aorta raises on purpose."""


class AortaUsageError(AortaError):
    """A user mistake: bad input, unknown name, missing file (CLI exit code 2)."""


class UnknownNameError(AortaUsageError, LookupError):
    """A name that is not registered; lists the known names and a close match."""

    kind = "name"

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        close = difflib.get_close_matches(name, self.known, n=1)
        self.suggestion = close[0] if close else None
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        listing = ", ".join(self.known) if self.known else "(none registered)"
        super().__init__(f"unknown {self.kind} {name!r}{hint} (known: {listing})")


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


class OutputExistsError(AortaUsageError):
    """A result file or run directory already exists; aorta never overwrites results."""


class OutputWriteError(AortaUsageError, OSError):
    """A result file could not be written (disk full, quota, read-only, not a directory).

    Still an `OSError`, so code that tolerates a failed write keeps doing so; uncaught, the
    CLI prints its one line (the path and the reason) and exits 2 instead of a traceback.
    """


class EnvironmentUnavailableError(AortaError):
    """A whole environment cannot run trials (engine down, kind not dispatchable).

    This is a cell-level failure: the triage runner records it as an `error` cell and goes
    on with the other cells.
    """

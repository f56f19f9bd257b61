"""Error types of triton_invariance.

`InvarianceUsageError` and its subclasses mean the *user* asked for something that cannot be
done (bad environment value, missing or unreadable baseline). The CLI turns them into one line
on stderr and exit code 2. `NumericalInvarianceMismatchError` is the one error that means "the
check ran and failed": the compiled kernel no longer matches its committed baseline (exit 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolkit_core import errors as core

if TYPE_CHECKING:
    from triton_invariance.data import InvarianceData


class TritonInvarianceError(core.ToolkitError):
    """Base class of every error triton_invariance raises on purpose."""


class InvarianceUsageError(TritonInvarianceError, core.UsageError):
    """A user mistake: bad configuration, missing or unreadable baseline (CLI exit code 2)."""


class InvarianceConfigError(InvarianceUsageError):
    """An environment variable or argument has a value this package cannot act on."""


class BaselineError(InvarianceUsageError):
    """A baseline file cannot be used; the message names the file and what is wrong."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class BaselineNotFoundError(BaselineError):
    """No baseline file exists for a kernel that is being compared."""


class CorruptBaselineError(BaselineError):
    """A baseline file is not valid JSON or lacks / mistypes a key."""


class BaselineVersionError(BaselineError):
    """A baseline file was written in a format version this package does not read."""


class FingerprintUnavailableError(TritonInvarianceError):
    """A compiled kernel carries no TTGIR to fingerprint (e.g. TRITON_STORE_BINARY_ONLY=1)."""


class NumericalInvarianceMismatchError(TritonInvarianceError):
    """The winner's fingerprint differs from the committed baseline.

    `report` is the full diff report (which component changed, the first differing op);
    `str(error)` is the same text with a header naming the kernel and the baseline file.
    """

    def __init__(
        self,
        kernel_name: str,
        sig_hash: str,
        path: Path,
        baseline: InvarianceData,
        current: InvarianceData,
        report: str,
    ) -> None:
        self.kernel_name = kernel_name
        self.sig_hash = sig_hash
        self.path = path
        self.baseline = baseline
        self.current = current
        self.report = report
        super().__init__(
            f"numerical invariance mismatch for kernel {kernel_name!r} "
            f"(signature {sig_hash}, baseline {path}):\n{report}"
        )


class LaunchScalarsChangedError(TritonInvarianceError):
    """The kernel matches its baseline but was launched with other float scalar arguments than
    the launch that produced the baseline (recorded under TRITON_INVARIANCE_RECORD_SCALARS)."""

    def __init__(self, kernel_name: str, path: Path, changes: list[str]) -> None:
        self.kernel_name = kernel_name
        self.path = path
        self.changes = changes
        super().__init__(
            f"kernel {kernel_name!r} was launched with other float arguments than at commit "
            f"(baseline {path}; runtime values are not part of the compiled kernel): "
            + "; ".join(changes)
        )

"""What the library tells its caller: monitor `Action`s and the `Reporter` they go to.

A leaf of the package (it imports nothing of it), so every layer can report: the CLI prints
what reaches its reporter, a service may log it, the default discards it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Action:
    """A log signal's `action`, collected for downstream tooling (see `drain_actions`)."""

    action: str
    signal: str
    session_id: str
    job: str
    job_id: str | None
    line: str
    at: float

    def describe(self) -> str:
        """The one-line form users see: ``action <event>: job <name> (<slurm id>): <line>``."""
        return f"action {self.action}: job {self.job} ({self.job_id}): {self.line}"


class Reporter(Protocol):
    """Where the library's messages go (the CLI prints them; a service may log them)."""

    def info(self, message: str) -> None:
        """Progress worth showing (a plan's notes, a submission's summary)."""

    def warning(self, message: str) -> None:
        """Something the user should act on (a skipped locked session, a --test-only rejection)."""

    def action(self, action: Action) -> None:
        """A monitor event (lifecycle change, signal match), as soon as its poll ends."""


class NullReporter:
    """Discards everything (the default reporter)."""

    def info(self, message: str) -> None:
        """Discard."""

    def warning(self, message: str) -> None:
        """Discard."""

    def action(self, action: Action) -> None:
        """Discard."""

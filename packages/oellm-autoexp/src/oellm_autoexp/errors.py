"""Error types shared across oellm_autoexp.

`AutoexpUsageError` and its subclasses are user mistakes (bad config, unknown name, missing
file): the CLI prints them as one line on stderr and exits with code 2, never a traceback.
`AutoexpRunError` means the tool did what it was asked and the *run* failed (exit code 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from toolkit_core import errors as core
from toolkit_core.errors import ExitCode
from toolkit_core.text import one_line, shorten

# one_line and shorten are part of this module's API (imported from here across the package).
__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_RUN_FAILED",
    "EXIT_USAGE",
    "AutoexpError",
    "AutoexpRunError",
    "AutoexpUsageError",
    "ConfigError",
    "closest",
    "one_line",
    "shorten",
]

# The names the commands return; the codes themselves are `toolkit_core.errors.ExitCode`.
EXIT_OK = ExitCode.OK
EXIT_RUN_FAILED = ExitCode.RUN_FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


class AutoexpError(core.ToolkitError):
    """Base class of every error oellm_autoexp raises on purpose."""

    # Messages quote config values and log lines: shown as one line, breaks escaped.
    multiline = False


class AutoexpUsageError(AutoexpError, core.UsageError):
    """A user mistake: bad input, unknown name, missing file (CLI exit code 2)."""


class AutoexpRunError(AutoexpError):
    """The requested work was attempted and failed (CLI exit code 1)."""


class OutputWriteError(AutoexpUsageError, OSError):
    """A file could not be written (a full disk, a quota, a read-only or missing folder): one
    line naming it, exit 2. Still an `OSError`, with the `errno`, for callers that catch one."""


class ConfigError(AutoexpUsageError):
    """A bad config value: names the file (if known), the dotted key path and what was expected.

    The message is always one line: `<file>: <key.path>: <what is wrong>`.
    """

    def __init__(
        self, message: str, *, key: str | None = None, file: str | Path | None = None
    ) -> None:
        self.key = key
        self.file = str(file) if file is not None else None
        self.detail = shorten(" ".join(message.split()))  # one line, whatever the source said
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.file, self.key) if p]
        return ": ".join([*parts, self.detail])

    def with_file(self, file: str | Path) -> ConfigError:
        """Return the same error attributed to `file` (used when the loader knows the source)."""
        if self.file is not None:
            return self
        return ConfigError(self.detail, key=self.key, file=file)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The closest known name to `name`, or None (for 'did you mean' hints)."""
    import difflib  # here: only a mistake pays for it (~8 ms at every start-up otherwise)

    hits = difflib.get_close_matches(name, list(known), n=1)
    return hits[0] if hits else None

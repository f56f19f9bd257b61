"""The error base of the three tools and the exit codes their commands return.

Every error a tool raises on purpose derives from `ToolkitError` and carries the exit code its
command ends with: `UsageError` (the user asked for something that cannot be done: bad input,
unknown name, missing file) is one line on stderr and exit 2, never a traceback; any other
`ToolkitError` means the tool did what it was asked and the run failed (exit 1). Each tool
derives its own base from these (`AortaError`, `AutoexpError`, `TritonInvarianceError`), so a
caller can still tell whose error it caught.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar


class ExitCode(enum.IntEnum):
    """What a command's exit status means, the same for all three tools."""

    OK = 0
    RUN_FAILED = 1  # the run happened and failed (a trial failed, a check found a mismatch)
    USAGE = 2  # bad flags, config, recipe or input file: nothing was run
    # 128 + SIGINT, what a shell reports for a command killed by Ctrl-C: scripts and CI that
    # test `$? -eq 130` keep working whether the process died of the signal or caught it.
    INTERRUPTED = 130


class ToolkitError(Exception):
    """Base class of every error the tools raise on purpose (exit code 1 unless overridden)."""

    exit_code: ClassVar[ExitCode] = ExitCode.RUN_FAILED
    # False: the CLI shows the message as one line (line breaks escaped), for messages that
    # quote user values; True: each line of the message is printed as its own error line.
    multiline: ClassVar[bool] = True


class UsageError(ToolkitError):
    """A user mistake: bad input, unknown name, missing file (exit code 2)."""

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE


class UnknownNameError(UsageError, LookupError):
    """A name that is not registered; the message lists the known names and a close match."""

    kind: ClassVar[str] = "name"

    def __init__(self, name: str, known: Iterable[str], *, key: str | None = None) -> None:
        self.name = name
        self.known = sorted(known)
        import difflib  # here: only an error pays for it (~8 ms at every start-up otherwise)

        close = difflib.get_close_matches(name, self.known, n=1)
        self.suggestion = close[0] if close else None
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        listing = ", ".join(self.known) if self.known else "(none registered)"
        prefix = f"{key}: " if key else ""
        super().__init__(f"{prefix}unknown {self.kind} {name!r}{hint} (known: {listing})")


class OutputExistsError(UsageError, FileExistsError):
    """A result file or run directory already exists; results are never overwritten."""


class OutputWriteError(UsageError, OSError):
    """A file could not be written (disk full, quota, read-only, a file where a folder goes).

    Still an `OSError` with `errno` set, so code that tolerates a failed write
    keeps doing so; uncaught, the CLI prints its one line (the path and the reason), exit 2.
    """


class PathError(UsageError):
    """A path cannot be used: a planted symlink, not a regular file, too large, unreadable.

    `path` and `problem` are kept apart so that a tool can re-raise the problem as its own
    error type (naming the config key it came from) without parsing the message.
    """

    def __init__(self, path: Path, problem: str, *, sentence: bool = False) -> None:
        self.path = path
        self.problem = problem
        # A sentence reads "<path> is a symlink ..."; otherwise "<path>: not a regular file".
        super().__init__(f"{path} {problem}" if sentence else f"{path}: {problem}")


class UnsafePathError(PathError, OutputWriteError):
    """A write refused because its path goes through a symbolic link that someone else could
    have planted or swapped (`paths.open_directory`).

    Both a `PathError` (the path and the problem apart) and an `OutputWriteError` with `errno`
    set, so that every caller of the atomic writes reports it as the failed write it is.
    """

    def __init__(self, path: Path, problem: str, error_number: int) -> None:
        super().__init__(path, problem)
        self.errno = error_number


class FileTooLargeError(PathError):
    """A file larger than the limit its reader allows (`size` and `limit` in bytes)."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(path, f"file of {size:,} bytes is larger than {limit:,}")


class MissingFileError(PathError):
    """A file to be read does not exist."""

"""Error types shared across oellm_autoexp.

`AutoexpUsageError` and its subclasses are user mistakes (bad config, unknown name, missing
file): the CLI prints them as one line on stderr and exits with code 2, never a traceback.
`AutoexpRunError` means the tool did what it was asked and the *run* failed (exit code 1).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class AutoexpError(Exception):
    """Base class of every error oellm_autoexp raises on purpose."""

    exit_code = EXIT_RUN_FAILED


class AutoexpUsageError(AutoexpError):
    """A user mistake: bad input, unknown name, missing file (CLI exit code 2)."""

    exit_code = EXIT_USAGE


class AutoexpRunError(AutoexpError):
    """The requested work was attempted and failed (CLI exit code 1)."""

    exit_code = EXIT_RUN_FAILED


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


class UnknownNameError(AutoexpUsageError, LookupError):
    """A name that is not registered; lists the known names and a close match."""

    def __init__(
        self, kind: str, name: str, known: Iterable[str], *, key: str | None = None
    ) -> None:
        self.name = name
        self.known = sorted(known)
        close = difflib.get_close_matches(name, self.known, n=1)
        self.suggestion = close[0] if close else None
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        listing = ", ".join(self.known) if self.known else "(none)"
        prefix = f"{key}: " if key else ""
        super().__init__(f"{prefix}unknown {kind} {name!r}{hint} (known: {listing})")


# An error line quotes user values; a 300 KB name must not become a 300 KB line.
MAX_MESSAGE_CHARS = 1000


# Control characters (C0 but tab, DEL, C1: ESC and OSC sequences included) and the Unicode
# bidi overrides, shown escaped: a job's log line must not drive or forge the terminal.
_CONTROLS = [c for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x09]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_PRINTABLE = str.maketrans(
    {
        **{c: f"\\x{c:02x}" for c in _CONTROLS},
        **{c: f"\\u{c:04x}" for c in _BIDI},
        0x0A: "\\n",
        0x0D: "\\r",
    }
)


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` as one terminal line: line breaks and control characters shown escaped (no
    forged line, no escape sequence), the middle cut when too long."""
    return shorten(text.translate(_PRINTABLE), limit)


def shorten(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text`, or its head and tail around a note of how much was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ...[{len(text) - 2 * keep:,} characters cut]... {text[-keep:]}"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The closest known name to `name`, or None (for 'did you mean' hints)."""
    hits = difflib.get_close_matches(name, list(known), n=1)
    return hits[0] if hits else None

"""The last lines of a command trial's log: why it crashed, where a reader looks first.

A Python crash ends with its exception (`RuntimeError: CUDA error: ...`); a shell script's
with its last message. The tail goes into the errored trial's record (and so into
`cells/<cell>/error.txt`), its last line into the one-line reason the console and matrix.md
show. Bounded: only the end of the file is read, however large the log. Not widened: the tail
is only taken from a log the trial keeps anyway (`keep_logs`), and secrets in it
(`--api-key X`, `TOKEN=...`, URL passwords) are redacted like every other record.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from aorta.instrumentation.redaction import redact_embedded_secrets

__all__ = ["last_line", "log_tail"]

TAIL_LINES: Final = 20
TAIL_BYTES: Final = 8192
LAST_LINE_CHARS: Final = 200
# Colour and cursor escapes (torchtitan, rich, tqdm): noise in a one-line reason.
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean(line: str) -> str:
    # A progress bar redraws itself with \r: what the terminal showed last is after the last \r.
    line = line.rstrip("\r").rsplit("\r", 1)[-1]
    return _CONTROL.sub("", _ANSI.sub("", line)).rstrip()


def log_tail(path: Path | None) -> str | None:
    """The last `TAIL_LINES` non-empty lines of the log at `path` (at most `TAIL_BYTES` read
    from its end), cleaned and redacted; None when there is no log or nothing in it."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read(TAIL_BYTES)
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").split("\n")
    if size > TAIL_BYTES and len(lines) > 1:
        lines = lines[1:]  # the first line was cut by the seek
    kept = [cleaned for cleaned in map(_clean, lines) if cleaned.strip()][-TAIL_LINES:]
    return "\n".join(redact_embedded_secrets(line) for line in kept) or None


def last_line(tail: str | None) -> str | None:
    """The tail's last line, shortened to `LAST_LINE_CHARS` for a one-line reason."""
    if not tail:
        return None
    line = tail.rsplit("\n", 1)[-1].strip()
    if len(line) > LAST_LINE_CHARS:
        line = line[: LAST_LINE_CHARS - 3] + "..."
    return line

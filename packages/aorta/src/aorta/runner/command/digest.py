"""A digest of a command trial's output, taken as it arrives: are two trials copies of one run?

Two trials whose output is byte for byte the same ran the same computation: their different
seeds did not change the run (`aorta.triage.analysis.independence` uses the digest when no loss was
read). The digest is a blake2b of the raw output bytes, kept in bounded memory while the
output is written to the log.

When the command printed a failure, aorta stops it there (`stop_on_failure`) and what the
command still printed after the failure line depends on how fast it was stopped. So the
digest covers the output up to and including the first failure line (without its line end),
never what follows.
Lines are hashed only once the scanner has judged them (the log is written before the chunk
is scanned), which is what lets the digest stop exactly at that line.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Protocol

from aorta.runner.command.scanner import ScanState

# Bytes held back without a line end: past this (an over-long line) they are hashed at once,
# and a failure inside that line can no longer be located (the trial then has no digest).
_MAX_PENDING: Final = 4 << 20
_LINE_END: Final = re.compile(rb"[\r\n]")


class LogSink(Protocol):
    """Where the feed loop writes the raw output (a binary file, or a `DigestingLog`)."""

    def write(self, data: bytes, /) -> object:
        """Write `data`."""
        ...


class DigestingLog:
    """Writes the output to `log` and digests it up to the first failure line of `state`."""

    def __init__(self, log: LogSink, state: ScanState) -> None:
        self._log = log
        self._state = state
        self._hash = hashlib.blake2b(digest_size=16)
        self._hashed = 0
        self._pending = b""  # not hashed yet: the scanner had not judged these bytes
        # "open": hashing; "sealed": the failure line was hashed, nothing more counts;
        # "lost": a failure was seen but its line could not be located (no digest).
        self._state_of_digest = "open"

    def write(self, data: bytes) -> None:
        """Write `data` to the log; digest what the scanner has judged so far."""
        self._log.write(data)
        if self._state_of_digest != "open" or not self._advance(final=False):
            return
        self._pending += data
        if len(self._pending) > _MAX_PENDING and _LINE_END.search(self._pending) is None:
            self._update(self._pending)
            self._pending = b""

    def finish(self) -> str | None:
        """Call once the scanner has seen all output: the hex digest, or None.

        None when there was no output, or when a failure was seen but its line could not be
        located in the held-back bytes (inside an over-long line).
        """
        if self._state_of_digest == "open" and self._advance(final=True):
            self._update(self._pending)
            self._pending = b""
        if self._state_of_digest == "lost" or self._hashed == 0:
            return None
        return self._hash.hexdigest()

    def _update(self, data: bytes) -> None:
        self._hash.update(data)
        self._hashed += len(data)

    def _advance(self, *, final: bool) -> bool:
        """Hash the judged complete lines, or seal the digest at the failure line.

        Returns whether the digest is still open (no failure seen yet).
        """
        failure = self._state.failure
        if failure is None:
            end = max(self._pending.rfind(b"\n"), self._pending.rfind(b"\r")) + 1
            self._update(self._pending[:end])
            self._pending = self._pending[end:]
            return True
        through = _end_of_line_with(self._pending, failure.line.strip(), final=final)
        if through is None:
            self._state_of_digest = "lost"
        else:
            self._update(self._pending[:through])
            self._state_of_digest = "sealed"
        self._pending = b""
        return False


def _end_of_line_with(data: bytes, text: str, *, final: bool) -> int | None:
    """Where the first complete line of `data` that contains `text` ends (its line end not
    included: whether a killed command got to print it is timing too).

    With `final` the unterminated tail counts as a line (the output ended there).
    """
    if not text:
        return None
    start = 0
    ends = [m.start() for m in _LINE_END.finditer(data)]
    if final:
        ends.append(len(data))
    for end in ends:
        if text in data[start:end].decode("utf-8", errors="replace"):
            return end
        start = end + 1
    return None

"""Log signals: regex or substring patterns in job logs that emit named signals.

A signal can carry a restart `mode` and metadata (`error_type`, `subsystem`) that feed the
classification, an `action` the controller collects for downstream tooling
(`MonitorController.drain_actions()`), and/or a `triage` recipe template: a match starts an
aorta triage of the job's own command (once per attempt). `on_match` says what the monitor does
at the poll that sees the line: `record` it (classification only when the job ends), `cancel`
the job (the attempt is classified with the signal's mode, the restart policy decides), or
`restart` it (cancelled and resubmitted at once, within the monitor's `max_restarts`).

Logs are read incrementally from a saved byte offset, so a poll over 10,000 jobs reads only
what was appended since the last poll.

Patterns come from shared configs and are matched against text jobs write, so they run on
RE2 (`google-re2`), a linear-time engine: a catastrophic-backtracking pattern such as
``(a+)+$`` cannot hang `monitor`. RE2 has no backreferences or lookaround (``\\1``,
``(?=...)``); such a pattern is a config error naming the signal.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oellm_autoexp.errors import ConfigError

# At most this much new log text is read per job and poll (a job spewing gigabytes must not
# stall the monitor); the rest is read at the next poll.
MAX_READ_BYTES = 1 << 20

ON_MATCH_RECORD, ON_MATCH_CANCEL, ON_MATCH_RESTART = "record", "cancel", "restart"
_ON_MATCH = (ON_MATCH_RECORD, ON_MATCH_CANCEL, ON_MATCH_RESTART)


@dataclass(frozen=True)
class LogSignal:
    """One pattern and what its match means."""

    name: str
    pattern: str
    regex: bool = True
    mode: str | None = None
    action: str | None = None
    error_type: str | None = None
    subsystem: str | None = None
    # An aorta recipe template: a match starts a triage of the job's own command, once per
    # attempt (monitor.triage_recipe / triage_launch).
    triage: str | None = None
    on_match: str = ON_MATCH_RECORD

    @property
    def acts(self) -> bool:
        """Whether a match ends the running attempt (`on_match` cancel or restart)."""
        return self.on_match != ON_MATCH_RECORD

    def matches(self, line: str) -> bool:
        """Whether `line` contains this signal."""
        if self.regex:
            return _compiled(self.pattern).search(line) is not None
        return self.pattern in line


_CACHE: dict[str, Any] = {}


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The `re2` module and its options, loaded by the first pattern (a plan has none)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print every rejected pattern on stderr itself
    return re2, options


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2 (linear-time matching); raises `re2.error` if unsupported."""
    engine, options = _re2()
    return engine.compile(pattern, options=options)


def _compiled(pattern: str) -> Any:
    found = _CACHE.get(pattern)
    if found is None:
        found = _CACHE[pattern] = compile_pattern(pattern)
    return found


# Pre-registered generic signals: errors, completion and checkpoint publication. Ordered from
# the most to the least specific error, which is the order classification prefers them in.
DEFAULT_SIGNALS: tuple[LogSignal, ...] = (
    # A GPU hardware fault (NVIDIA Xid, ECC) blames the node (monitor.node_health); it comes
    # first because the traceback or NCCL error it causes is only its consequence.
    LogSignal(
        "gpu_hardware",
        r"NVRM: Xid|\bXid \d+\b|uncorrectable ECC error|ECC errors? detected|fallen off the bus",
        mode="crash",
        error_type="gpu_hardware",
        subsystem="node",
    ),
    LogSignal(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|HIP out of memory",
        mode="crash",
        error_type="oom",
        subsystem="cuda",
    ),
    LogSignal(
        "nccl",
        r"NCCL (?:error|WARN .*[Tt]imeout)|ncclInternalError|"
        r"Watchdog caught collective operation timeout",
        mode="crash",
        error_type="nccl",
        subsystem="distributed",
    ),
    LogSignal(
        "exception",
        r"^Traceback \(most recent call last\)",
        mode="crash",
        error_type="exception",
        subsystem="python",
    ),
    LogSignal("nan_loss", r"\bloss\b.*\bnan\b|NaN detected", regex=True, action="nan_loss"),
    LogSignal(
        "checkpoint_saved",
        r"[Ss]aved checkpoint|successfully saved checkpoint",
        action="checkpoint_saved",
    ),
)

_VALID_MODES = {"stall", "crash", "timeout", "success"}


def parse_signals(
    raw: Sequence[Mapping[str, Any]], key: str = "monitoring.log_signals"
) -> list[LogSignal]:
    """Signals from config; a bad entry is a `ConfigError` naming its index and field."""
    out: list[LogSignal] = []
    allowed = set(LogSignal.__dataclass_fields__)
    for index, item in enumerate(raw):
        where = f"{key}[{index}]"
        if not isinstance(item, Mapping):
            raise ConfigError("expected a mapping with name and pattern", key=where)
        unknown = sorted(set(item) - allowed)
        if unknown:
            raise ConfigError(f"unknown key(s) {', '.join(unknown)}", key=where)
        if not item.get("name") or not item.get("pattern"):
            raise ConfigError("needs both 'name' and 'pattern'", key=where)
        triage = item.get("triage")
        if triage is not None and (not isinstance(triage, str) or not triage.strip()):
            raise ConfigError(
                f"expected the path of an aorta recipe template, got {triage!r:.80}",
                key=f"{where}.triage",
            )
        mode = item.get("mode")
        if mode is not None and mode not in _VALID_MODES:
            raise ConfigError(
                f"mode must be one of {sorted(_VALID_MODES)}, got {mode!r}", key=f"{where}.mode"
            )
        on_match = item.get("on_match", ON_MATCH_RECORD)
        if on_match not in _ON_MATCH:
            raise ConfigError(
                f"on_match must be one of {', '.join(_ON_MATCH)}, got {on_match!r:.80}",
                key=f"{where}.on_match",
            )
        if item.get("regex", True):
            try:
                compile_pattern(str(item["pattern"]))
            except _re2()[0].error as exc:  # loaded by compile_pattern
                reason = exc.args[0] if exc.args else exc
                if isinstance(reason, bytes):
                    reason = reason.decode("utf-8", "replace")
                raise ConfigError(
                    f"invalid regex for RE2 (no backreferences or lookaround): {reason}",
                    key=f"{where}.pattern",
                ) from None
        out.append(LogSignal(**{k: item[k] for k in item}))
    return out


@dataclass(frozen=True)
class SignalHit:
    """A signal found in a log line."""

    signal: LogSignal
    line: str


class SignalSet:
    """Signals plus one union regex that decides whether a text can match any of them.

    Built once per session (not per poll): most log text matches no signal, and one regex
    pass over a job's new text is far cheaper than one pass per signal and line.
    """

    def __init__(self, signals: Sequence[LogSignal]) -> None:
        self.signals = tuple(signals)

    @functools.cached_property
    def _parts(self) -> list[str]:
        return [s.pattern if s.regex else _re2()[0].escape(s.pattern) for s in self.signals]

    @functools.cached_property
    def prefilter(self) -> Any:
        """The union of every signal's pattern (compiled at the first scan, not by a plan)."""
        # MULTILINE: ``^``/``$`` match at every line start/end, as they would on one line.
        union = "|".join(f"(?:{p})" for p in self._parts)
        # RE2 has no "(?!)"; a signal-less set gets a pattern that cannot match a line.
        return compile_pattern(f"(?m){union}" if union else r"[^\s\S]")

    @functools.cached_property
    def chunk_safe(self) -> bool:
        """Whether a whole text may be prefiltered at once (no pattern anchors to its ends)."""
        # \A and \Z mean "start/end of the line" per line but "of the text" for a chunk: a
        # pattern with them is checked line by line only.
        return not any("\\A" in p or "\\z" in p for p in self._parts)

    def scan_text(self, text: str) -> list[SignalHit]:
        """`scan` over the lines of `text`, skipping texts no signal can match."""
        if self.chunk_safe and self.prefilter.search(text) is None:
            return []
        return self.scan(text.splitlines())

    def scan(self, lines: Iterable[str]) -> list[SignalHit]:
        """Every (signal, line) match, in log order; a line may match several signals."""
        prefilter = self.prefilter
        return [
            SignalHit(sig, line)
            for line in lines
            if prefilter.search(line)
            for sig in self.signals
            if sig.matches(line)
        ]


def scan(lines: Iterable[str], signals: Sequence[LogSignal]) -> list[SignalHit]:
    """Every (signal, line) match, in log order; a line may match several signals."""
    return SignalSet(signals).scan(lines)


def read_new(path: str | Path, offset: int, *, size: int | None = None) -> tuple[list[str], int]:
    """Complete lines appended to `path` since byte `offset`, and the new offset.

    A trailing partial line is left for the next read. A file that shrank (rotated or
    truncated) is read again from the start. `size`: the caller's fresh stat of the file.
    """
    text, offset = read_new_text(path, offset, size=size)
    return text.splitlines(), offset


def _pread_regular(path: str | Path, offset: int, length: int) -> bytes:
    """`length` bytes at `offset` of `path` if it is a regular file, else nothing.

    os.open + pread: no buffered file object per job and poll (a third of the read cost).
    Non-blocking, and only a regular file is read: a log path that is (or became) a directory,
    FIFO or device reads as "nothing new" instead of crashing or hanging a poll.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, length, offset)
    except OSError:
        return b""
    finally:
        os.close(fd)


def read_new_text(path: str | Path, offset: int, *, size: int | None = None) -> tuple[str, int]:
    """`read_new` as one text (complete lines only); the per-poll form, split only if needed."""
    if size is None:
        try:
            size = os.stat(path).st_size  # noqa: PTH116 (str paths: per job and poll)
        except OSError:
            return "", offset
    if size < offset:
        offset = 0
    if size == offset:
        return "", offset
    data = _pread_regular(path, offset, min(size - offset, MAX_READ_BYTES))
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) < MAX_READ_BYTES:
            return "", offset  # a line still being written: wait for its end
        # A line longer than the window (a tqdm `\r` stream): read it in windows, each cut
        # after its last `\r` if it has one, so the reader never stalls on it.
        cut = data.rfind(b"\r")
        end = cut if cut >= 0 else len(data) - 1
    return data[: end + 1].decode("utf-8", errors="replace"), offset + end + 1

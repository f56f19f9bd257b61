"""Scan a command's output as it arrives, in bounded memory.

The output comes in chunks (whatever one `read` returned). Only complete lines are scanned,
block by block: every pattern runs once over the block (C speed, not a Python loop per line),
so a trial that prints gigabytes costs little. `\\r` counts as a line end (progress bars redraw
with it), and ANSI colour codes are stripped before anything is matched. What is held between
chunks is the unfinished last line, at most `max_line` bytes: a longer line is read in windows
of `max_line` bytes, each overlapping the one before by `LONG_LINE_OVERLAP` bytes (a match
shorter than that is found even across a window edge). The first window is read like any
line; the later ones only by the failure and error patterns (a step line is not megabytes
long, a `loss: nan` after the first MiB of a progress dump is still seen).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from aorta.runner.command.patterns import ScanPattern
from aorta.runner.command.steps import StepEvent, StepParser
from aorta.runner.command.values import is_finite
from aorta.workloads.contract import StepCallback, ignore_step

MAX_LINE_BYTES: Final = 1 << 20
LONG_LINE_OVERLAP: Final = 4096
# CSI sequences (colours, cursor moves) as terminals and rich/colorama loggers print them.
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# A matched line is recorded up to this many characters.
_RECORD_CHARS: Final = 500
_RECORD_BEFORE: Final = 200
# Step times kept per trial; a command that prints more step lines than this (a run of
# millions of iterations) keeps the first ones and counts the rest.
MAX_RECORDED_STEPS: Final = 1_000_000


@dataclass(frozen=True)
class Match:
    """The first line that matched a failure or error pattern (or had a non-finite loss)."""

    pattern: str
    line: str
    # The last step number parsed up to this line, this line included (None: no step yet).
    at_step: int | None


@dataclass
class ScanState:
    """What the output said so far."""

    failure: Match | None = None
    error: Match | None = None
    step_times_ms: list[float] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    steps_seen: int = 0
    last_step: int | None = None
    last_loss: float | None = None
    bytes_seen: int = 0
    # Where the step times came from ("log": printed, "arrival": line arrival), and the
    # format that printed them (None: no step line yet).
    clock: str | None = None
    step_format: str | None = None
    # Loss / grad-norm values read (finite or not), and those printed but unreadable.
    values_read: int = 0
    unreadable: int = 0
    first_unreadable: str | None = None


def _line_at(text: str, pos: int) -> str:
    """The line holding `pos`, as recorded: from its start, or from shortly before `pos` when
    the match lies too far in to be recorded with it (a long line's head says nothing)."""
    start = text.rfind("\n", 0, pos) + 1
    if pos - start > _RECORD_CHARS - _RECORD_BEFORE:
        start = pos - _RECORD_BEFORE
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)][:_RECORD_CHARS]


def _first_match(
    patterns: Sequence[ScanPattern], text: str, lowered: str
) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for pattern in patterns:
        if not pattern.could_match(lowered):
            continue
        match = pattern.regex.search(text)
        if match is not None and (best is None or match.start() < best[0]):
            best = (match.start(), pattern.pattern)
    return best


class OutputScanner:
    """Feed it the raw output; read `state` for failures, errors, steps and losses."""

    def __init__(
        self,
        failure_patterns: Sequence[ScanPattern],
        error_patterns: Sequence[ScanPattern],
        steps: StepParser | None,
        *,
        on_step: StepCallback = ignore_step,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        self.failure_patterns = list(failure_patterns)
        self.error_patterns = list(error_patterns)
        self.steps = steps
        self.on_step = on_step
        self.max_line = max_line
        self.state = ScanState()
        self._carry = b""
        self._in_long_line = False  # the carry continues a line already read by its head
        self._overlap = min(LONG_LINE_OVERLAP, max_line // 2)

    def feed(self, data: bytes, arrival: float) -> None:
        """Take the next chunk of output (arrived at monotonic time `arrival`)."""
        self.state.bytes_seen += len(data)
        buffer = self._carry + data if self._carry else data
        end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        if end >= 0:
            self._carry = buffer[end + 1 :]
            block = buffer[: end + 1]
            if self._in_long_line:  # the tail of a long line: patterns only
                self._in_long_line = False
                first = min(i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0)
                self._scan_patterns(block[: first + 1])
                block = block[first + 1 :]
            if block:
                self._scan(block, arrival)
        else:
            self._carry = buffer
        while len(self._carry) > self.max_line:
            window = self._carry[: self.max_line]
            if self._in_long_line:
                self._scan_patterns(window)
            else:
                self._scan(window + b"\n", arrival)
                self._in_long_line = True
            self._carry = self._carry[self.max_line - self._overlap :]

    def finish(self, arrival: float) -> None:
        """The output ended: scan the last line even without its newline."""
        carry, self._carry = self._carry, b""
        if self._in_long_line:
            self._in_long_line = False
            self._scan_patterns(carry)
        elif carry:
            self._scan(carry + b"\n", arrival)

    def _text(self, block: bytes) -> str:
        text = block.decode("utf-8", errors="replace").replace("\r", "\n")
        return _ANSI.sub("", text) if "\x1b" in text else text

    def _scan_patterns(
        self, block: bytes, *, record: bool = True
    ) -> tuple[str, tuple[int, str] | None]:
        """Match the failure and error patterns and record what they found (a failure only
        with `record`: `_scan` orders it among the step events); return the text and the
        failure found."""
        state = self.state
        text = self._text(block)
        lowered = text.lower()
        failure = (
            _first_match(self.failure_patterns, text, lowered) if state.failure is None else None
        )
        error = _first_match(self.error_patterns, text, lowered) if state.error is None else None
        if error is not None:
            state.error = Match(error[1], _line_at(text, error[0]), state.last_step)
        if failure is not None and record:
            state.failure = Match(failure[1], _line_at(text, failure[0]), state.last_step)
        return text, failure

    def _scan(self, block: bytes, arrival: float) -> None:
        text, failure = self._scan_patterns(block, record=self.steps is None)
        if self.steps is None:
            return
        state = self.state
        events = self.steps.events(text, arrival)
        # A pattern match sorts after a step event that starts on the same line (the event's
        # offset is the line start): the failure then belongs to that step.
        items: list[tuple[int, StepEvent | None]] = list(events)
        if failure is not None:
            items.append((failure[0], None))
        items.sort(key=lambda item: (item[0], item[1] is None))
        reported: StepEvent | None = None
        for pos, event in items:
            if state.failure is not None:
                break  # what a run prints after its failure is not a measurement of it
            if event is None:
                assert failure is not None
                state.failure = Match(failure[1], _line_at(text, pos), state.last_step)
                continue
            if self._record(event):
                reported = event
            self._check_values(event, text, pos)
        if reported is not None:
            # Progress counts step lines from 0 (a display of "step k/steps"), whatever
            # numbering the command prints.
            self.on_step(state.steps_seen - 1, state.last_loss, reported.time_ms or 0.0)

    def _check_values(self, event: StepEvent, text: str, pos: int) -> None:
        """A non-finite loss or grad norm is the failure; an unreadable one is noted."""
        state = self.state
        for present, value, what in (
            (event.has_loss, event.loss, "non-finite loss"),
            (event.has_grad_norm, event.grad_norm, "non-finite grad norm"),
        ):
            if not present:
                continue
            if value is None:  # printed, but not a number aorta can read: unknown
                state.unreadable += 1
                if state.first_unreadable is None:
                    state.first_unreadable = _line_at(text, pos)
                continue
            state.values_read += 1
            if not is_finite(value) and state.failure is None:
                state.failure = Match(what, _line_at(text, pos), state.last_step)

    def _record(self, event: StepEvent) -> bool:
        """Record a step event's loss and time; True when it counted as a timed step."""
        state = self.state
        if event.has_loss and event.loss is not None:
            state.last_loss = event.loss if is_finite(event.loss) else None
            if len(state.losses) < MAX_RECORDED_STEPS:
                state.losses.append(state.last_loss)
        if event.time_ms is None or not self._takes_clock(event):
            return False
        state.steps_seen += 1
        state.last_step = event.step if event.step is not None else state.steps_seen - 1
        # A step whose loss or grad norm is not finite did not complete: its number counts,
        # its time not (as for the in-tree workloads).
        broken = (event.loss is not None and not is_finite(event.loss)) or (
            event.grad_norm is not None and not is_finite(event.grad_norm)
        )
        if not broken and len(state.step_times_ms) < MAX_RECORDED_STEPS:
            state.step_times_ms.append(event.time_ms)
        return True

    def _takes_clock(self, event: StepEvent) -> bool:
        """Whether a timed event counts: printed times win over arrival times, once seen."""
        state = self.state
        if state.clock == event.clock:
            return True
        if state.clock == "log":
            return False  # an arrival-timed line after printed times: its values only
        if state.clock == "arrival":
            # The first printed time: the arrival-timed steps before it are dropped, so a
            # trial's step times are one kind of measurement.
            state.step_times_ms.clear()
            state.steps_seen = 0
        state.clock, state.step_format = event.clock, event.source
        return True

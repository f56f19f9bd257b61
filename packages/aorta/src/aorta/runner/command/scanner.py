"""Scan a command's output as it arrives, in bounded memory.

The output comes in chunks (whatever one `read` returned). Only complete lines are scanned,
block by block: every pattern runs once over the block (C speed, not a Python loop per line),
so a trial that prints gigabytes costs little. `\\r` counts as a line end (progress bars redraw
with it). What is held between chunks is the unfinished last line, at most `max_line` bytes: a
longer line is scanned by its first `max_line` bytes and the rest of it is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from aorta.runner.command.patterns import ScanPattern
from aorta.runner.command.steps import StepEvent, StepParser, is_finite
from aorta.workloads.contract import StepCallback, ignore_step

MAX_LINE_BYTES: Final = 1 << 20
# A matched line is recorded up to this many characters.
_RECORD_CHARS: Final = 500
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


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
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
        self._skipping = False  # inside the rest of an over-long line

    def feed(self, data: bytes, arrival: float) -> None:
        """Take the next chunk of output (arrived at monotonic time `arrival`)."""
        self.state.bytes_seen += len(data)
        if self._skipping:
            end = max(data.find(b"\n"), data.find(b"\r"))
            if end < 0:
                return
            self._skipping = False
            data = data[end + 1 :]
        buffer = self._carry + data if self._carry else data
        end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        if end >= 0:
            self._carry = buffer[end + 1 :]
            self._scan(buffer[: end + 1], arrival)
        else:
            self._carry = buffer
        if len(self._carry) > self.max_line:
            head, self._carry = self._carry[: self.max_line], b""
            self._skipping = True
            self._scan(head + b"\n", arrival)

    def finish(self, arrival: float) -> None:
        """The output ended: scan the last line even without its newline."""
        if self._carry:
            carry, self._carry = self._carry, b""
            self._scan(carry + b"\n", arrival)

    def _scan(self, block: bytes, arrival: float) -> None:
        text = block.decode("utf-8", errors="replace").replace("\r", "\n")
        state = self.state
        lowered = text.lower()
        failure = (
            _first_match(self.failure_patterns, text, lowered) if state.failure is None else None
        )
        error = _first_match(self.error_patterns, text, lowered) if state.error is None else None
        if error is not None:
            state.error = Match(error[1], _line_at(text, error[0]), state.last_step)
        events = self.steps.events(text, arrival) if self.steps is not None else []
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
            if event is not None:
                self._record(event)
                reported = event if event.time_ms is not None else reported
            if event is None and failure is not None:
                state.failure = Match(failure[1], _line_at(text, pos), state.last_step)
            elif event is not None and event.has_loss and not is_finite(event.loss):
                state.failure = Match("non-finite loss", _line_at(text, pos), state.last_step)
        if reported is not None:
            # Progress counts step lines from 0 (a display of "step k/steps"), whatever
            # numbering the command prints.
            self.on_step(state.steps_seen - 1, state.last_loss, reported.time_ms or 0.0)

    def _record(self, event: StepEvent) -> None:
        state = self.state
        if event.has_loss:
            state.last_loss = event.loss if is_finite(event.loss) else None
            if len(state.losses) < MAX_RECORDED_STEPS:
                state.losses.append(state.last_loss)
        if event.time_ms is None:
            return
        state.steps_seen += 1
        # A step whose loss is not finite did not complete: its number counts, its time not
        # (as for the in-tree workloads).
        if event.has_loss and not is_finite(event.loss):
            state.last_step = event.step if event.step is not None else state.steps_seen - 1
            return
        state.last_step = event.step if event.step is not None else state.steps_seen - 1
        if len(state.step_times_ms) < MAX_RECORDED_STEPS:
            state.step_times_ms.append(event.time_ms)

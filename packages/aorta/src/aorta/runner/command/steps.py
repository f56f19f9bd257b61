"""Step lines of a command's output: known formats, a user regex, or a marker timed by arrival.

A parser gets a block of complete lines (with the time the block arrived) and returns the
events in it, each at its character offset: a *step* (a step time, maybe a step number, a
loss and a grad norm) or a line that only carries a loss or grad norm (Hugging Face Trainer
prints its losses on lines of their own).

`step_time` (see `formats.py` for what each format looks like):

* `auto` (the default): every format of `formats.AUTO_FORMATS`, line by line. Step times are
  the ones the log prints (clock `log`); a format that prints none (torchtitan, plain
  `step N loss: X`) is timed by the arrival of its lines (clock `arrival`). Once a printed time
  is seen, the trial's step times are the printed ones only.
* `megatron`, `hf`, `jsonl`: only that format, only printed times (clock `log`).
* `{regex: ..., unit: ms|s}`: a regex with a `time` group, optional `step` and `loss` groups.

`step_marker: REGEX`: each matching line ends a step, timed by arrival.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Protocol

from aorta.runner.command.formats import (
    AUTO_FORMATS,
    PRESET_FORMATS,
    Format,
    Reading,
    formats_named,
)
from aorta.runner.command.spec import AUTO, CommandSpec, StepRegex, compile_pattern
from aorta.runner.command.values import is_finite, parse_number

__all__ = ["StepEvent", "StepParser", "is_finite", "parse_number", "step_parser"]

StepClock = Literal["log", "arrival"]


@dataclass(frozen=True)
class StepEvent:
    """One parsed line: a step (`time_ms` set) or a loss line (`time_ms` None).

    `has_loss` with `loss` None: the line printed a loss that could not be read (unknown, not
    non-finite); likewise `has_grad_norm`. `clock` says where `time_ms` came from, `source`
    names the format that read the line.
    """

    time_ms: float | None
    step: int | None = None
    loss: float | None = None
    has_loss: bool = False
    grad_norm: float | None = None
    has_grad_norm: bool = False
    clock: StepClock = "log"
    source: str | None = None


class StepParser(Protocol):
    """Turns a block of complete lines into (offset, event) pairs, in offset order."""

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """The events in `text`, which arrived at monotonic time `arrival`."""


def _group(match: re.Match[str], name: str) -> str | None:
    return match.group(name) if name in match.re.groupindex else None


class RegexSteps:
    """Steps from a regex with a `time` group (in `unit`), optional `step` and `loss` groups."""

    def __init__(self, pattern: re.Pattern[str], unit: str) -> None:
        self.pattern = pattern
        self.scale = 1000.0 if unit == "s" else 1.0

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        found: list[tuple[int, StepEvent]] = []
        for match in self.pattern.finditer(text):
            seconds = parse_number(match.group("time"))
            if seconds is None:
                continue
            step = _group(match, "step")
            loss = _group(match, "loss")
            found.append(
                (
                    match.start(),
                    StepEvent(
                        seconds * self.scale,
                        int(step) if step and step.isdigit() else None,
                        parse_number(loss) if loss is not None else None,
                        loss is not None,
                        source="regex",
                    ),
                )
            )
        return found


class FormatSteps:
    """Steps from known log formats (`formats.py`): `step_time: auto` and the named presets.

    A step line that printed its time is timed by it (clock `log`). With `arrival` a step
    line that printed none is timed by when its line arrived: the gap since the previous
    such line, divided by the steps between them when both lines number their step (a format
    that logs every 10 steps gives per-step times). Without `arrival` such a line only
    carries its values. A step number a line repeats (a tqdm bar redrawn) is read once, and
    only the bars of the first bar's total count as steps (the Hugging Face Trainer draws
    its evaluation bar like its training bar).
    """

    def __init__(self, formats: tuple[Format, ...], started: float, *, arrival: bool) -> None:
        self.formats = formats
        self.arrival = arrival
        self._last_step: dict[tuple[str, bool], int] = {}
        self._bar_total: dict[str, int] = {}
        self._last_arrival = started
        self._last_arrival_step: int | None = None

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        lowered = text.lower()
        owner: dict[int, str] = {}  # line start -> the format that read it
        readings: list[Reading] = []
        for fmt in self.formats:
            if not any(needle in lowered for needle in fmt.needles):
                continue
            for reading in fmt.read(text):
                if owner.setdefault(reading.pos, fmt.name) == fmt.name:
                    readings.append(reading)
        readings.sort(key=lambda reading: reading.pos)
        found = []
        for reading in readings:
            event = self._event(reading, arrival)
            if event is not None:
                found.append((reading.pos, event))
        return found

    def _event(self, reading: Reading, arrival: float) -> StepEvent | None:
        is_step = reading.is_step
        total = reading.total
        if total is not None and self._bar_total.setdefault(reading.name, total) != total:
            is_step = False  # another bar (an evaluation): its values only
        if is_step and reading.step is not None:
            # Per format and kind of line (timed or not): DeepSpeed prints `step=10` and
            # `steps: 10 ... iter time (s)` for the same step.
            key = (reading.name, reading.time_ms is None)
            if self._last_step.get(key) == reading.step:
                return None  # a redraw of a step already read
            self._last_step[key] = reading.step
        time_ms = reading.time_ms
        clock: StepClock = "log"
        if is_step and time_ms is None:
            if self.arrival:
                time_ms, clock = self._arrival_ms(reading.step, arrival), "arrival"
            else:
                is_step = False
        if not is_step and reading.loss is None and reading.grad_norm is None:
            return None  # a line claimed so that no other format misreads it
        return StepEvent(
            time_ms if is_step else None,
            reading.step,
            parse_number(reading.loss) if reading.loss is not None else None,
            reading.loss is not None,
            grad_norm=parse_number(reading.grad_norm) if reading.grad_norm is not None else None,
            has_grad_norm=reading.grad_norm is not None,
            clock=clock,
            source=reading.name,
        )

    def _arrival_ms(self, step: int | None, arrival: float) -> float:
        elapsed_ms = (arrival - self._last_arrival) * 1000.0
        last_step = self._last_arrival_step
        self._last_arrival, self._last_arrival_step = arrival, step
        if step is not None and last_step is not None and step > last_step:
            return elapsed_ms / (step - last_step)
        return elapsed_ms


class MarkerSteps:
    """`step_marker`: each matching line ends a step; its time is the gap since the last one.

    The first marker is timed from the start of the process (start-up included: the warm-up
    steps are there to drop it). Lines read in one chunk share one arrival time.
    """

    def __init__(self, pattern: re.Pattern[str], started: float) -> None:
        self.pattern = pattern
        self._last = started

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        found: list[tuple[int, StepEvent]] = []
        for match in self.pattern.finditer(text):
            event = StepEvent((arrival - self._last) * 1000.0, clock="arrival", source="marker")
            found.append((match.start(), event))
            self._last = arrival
        return found


def step_parser(spec: CommandSpec, started: float) -> StepParser | None:
    """The parser a spec asks for (fresh state per trial), or None when it asks for none."""
    if isinstance(spec.step_time, StepRegex):
        return RegexSteps(compile_pattern(spec.step_time.regex, "step_time"), spec.step_time.unit)
    if spec.step_time == AUTO:
        # `clock: log` asks for printed times only: an untimed line then only carries values.
        return FormatSteps(AUTO_FORMATS, started, arrival=spec.clock_choice != "log")
    if spec.step_time is not None:
        return FormatSteps(formats_named(PRESET_FORMATS[spec.step_time]), started, arrival=False)
    if spec.step_marker is not None:
        return MarkerSteps(compile_pattern(spec.step_marker, "step_marker"), started)
    return None

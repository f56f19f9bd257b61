"""Step lines of a command's output: presets, a user regex, or a marker timed by arrival.

A parser gets a block of complete lines (with the time the block arrived) and returns the
events in it, each at its character offset: a *step* (a step time, maybe a step number and a
loss) or a *loss* line that is not a step (Hugging Face Trainer prints its losses on lines of
their own).

Presets (`clock: log`: the step time is the number the command printed):

* `megatron`: `iteration 10/ 100 | ... elapsed time per iteration (ms): 412.3 | ... lm loss:
  2.3E+00 |`. One line per `--log-interval` iterations; its time is the interval's mean.
* `hf`: tqdm progress lines of the Hugging Face Trainer / Lightning (`12/100 [00:03<00:20,
  4.20it/s]` or `s/it`; tqdm's smoothed rate) and their loss lines (`{'loss': 2.3, ...}`,
  `train_loss=2.3`). A step is counted when the step number changes.
* `jsonl`: one JSON object per line with `step` and `step_time_ms` (or `step_time_s`) and
  optionally `loss` (`NaN`/`Infinity`/`null` for a non-finite loss); a line with a `loss` but
  no step time is a loss line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from aorta.runner.command.spec import CommandSpec, StepRegex, compile_pattern


@dataclass(frozen=True)
class StepEvent:
    """One parsed line: a step (`time_ms` set) or a loss line (`time_ms` None)."""

    time_ms: float | None
    step: int | None = None
    loss: float | None = None
    has_loss: bool = False


class StepParser(Protocol):
    """Turns a block of complete lines into (offset, event) pairs, in offset order."""

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """The events in `text`, which arrived at monotonic time `arrival`."""


def parse_number(raw: str) -> float | None:
    """A float as logs print it (`2.3E+00`, `nan`, `inf`), None when it is not a number."""
    try:
        return float(raw.strip().strip("'\""))
    except ValueError:
        return None


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
                    ),
                )
            )
        return found


_MEGATRON_LINE: Final = re.compile(
    r"^.*\biteration\s+(?P<step>\d+)\s*/\s*\S+\s*\|.*"
    r"elapsed time per iteration \(ms\):\s*(?P<time>[0-9.]+).*$",
    re.MULTILINE,
)
_MEGATRON_LOSS: Final = re.compile(r"\blm loss:\s*(?P<loss>[^\s|]+)")


class MegatronSteps:
    """The `megatron` preset (see the module docstring)."""

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        found: list[tuple[int, StepEvent]] = []
        if "elapsed time per iteration" not in text:  # skip the slow regex (see ScanPattern)
            return found
        for match in _MEGATRON_LINE.finditer(text):
            loss = _MEGATRON_LOSS.search(match.group(0))
            found.append(
                (
                    match.start(),
                    StepEvent(
                        float(match.group("time")),
                        int(match.group("step")),
                        parse_number(loss.group("loss")) if loss else None,
                        loss is not None,
                    ),
                )
            )
        return found


_TQDM: Final = re.compile(
    r"(?P<step>\d+)/(?P<total>\d+) \[[^\]\n]*?(?P<rate>[0-9.]+)\s?(?P<unit>it/s|s/it)"
)
_HF_LOSS: Final = re.compile(r"(?:'loss':\s*|\btrain_loss=|\bloss=)(?P<loss>[^\s,}\]]+)")


class HfSteps:
    """The `hf` preset (see the module docstring)."""

    def __init__(self) -> None:
        self._last_step = -1

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        found: list[tuple[int, StepEvent]] = []
        if "it/s" not in text and "s/it" not in text and "loss" not in text:
            return found
        for match in _TQDM.finditer(text):
            step = int(match.group("step"))
            rate = parse_number(match.group("rate")) or 0.0
            if step in (self._last_step, 0) or rate <= 0:
                continue  # tqdm redraws one step many times; the first bar has no rate yet
            self._last_step = step
            ms = 1000.0 / rate if match.group("unit") == "it/s" else rate * 1000.0
            found.append((match.start(), StepEvent(ms, step)))
        for match in _HF_LOSS.finditer(text):
            found.append(
                (match.start(), StepEvent(None, None, parse_number(match.group("loss")), True))
            )
        found.sort(key=lambda item: item[0])
        return found


_JSON_LINE: Final = re.compile(r"^\s*\{.*\"step\".*\}\s*$", re.MULTILINE)


def _json_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class JsonlSteps:
    """The `jsonl` preset (see the module docstring)."""

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`."""
        found: list[tuple[int, StepEvent]] = []
        if '"step"' not in text:
            return found
        for match in _JSON_LINE.finditer(text):
            try:
                record = json.loads(match.group(0))
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            ms = _json_number(record.get("step_time_ms"))
            if ms is None:
                seconds = _json_number(record.get("step_time_s"))
                ms = seconds * 1000.0 if seconds is not None else None
            if ms is None and "loss" not in record:
                continue  # a line with neither a step time nor a loss says nothing here
            step = record.get("step")
            has_loss = "loss" in record
            raw_loss = record.get("loss")
            # null is how a strict JSON writer spells a non-finite loss
            loss = math.nan if has_loss and raw_loss is None else _json_number(raw_loss)
            found.append(
                (
                    match.start(),
                    StepEvent(
                        ms,
                        step if isinstance(step, int) and not isinstance(step, bool) else None,
                        loss,
                        has_loss,
                    ),
                )
            )
        return found


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
            found.append((match.start(), StepEvent((arrival - self._last) * 1000.0)))
            self._last = arrival
        return found


_PRESETS: Final[dict[str, Callable[[], StepParser]]] = {
    "megatron": MegatronSteps,
    "hf": HfSteps,
    "jsonl": JsonlSteps,
}


def step_parser(spec: CommandSpec, started: float) -> StepParser | None:
    """The parser a spec asks for (fresh state per trial), or None when it asks for none."""
    if isinstance(spec.step_time, StepRegex):
        return RegexSteps(compile_pattern(spec.step_time.regex, "step_time"), spec.step_time.unit)
    if spec.step_time is not None:
        return _PRESETS[spec.step_time]()
    if spec.step_marker is not None:
        return MarkerSteps(compile_pattern(spec.step_marker, "step_marker"), started)
    return None


def is_finite(value: float | None) -> bool:
    """True for a finite float."""
    return value is not None and math.isfinite(value)

"""Which clock times a command trial's step lines (the workload's `clock:` key).

The step *lines* come from the step parser (`step_time` or `step_marker`); the *clock* decides
what each step's time is:

* `log`: the number the command printed on the line (needs `step_time`);
* `arrival`: the time between the arrival of one step line and the previous one (the first
  from the start of the process), read by aorta;
* `cpu`: the CPU seconds the trial's whole process tree consumed over that same interval
  (`aorta.runner.command.cpu_clock`), immune to the host's load;
* `auto` (default): `log` when the step lines carry printed times, else `arrival`.

An interval clock (arrival, cpu) reports, like Megatron's "elapsed time per iteration", the
time per *iteration*: the interval since the previous step line divided by the iterations it
covers, i.e. by the step-number difference when both lines number their step (a log every 10
iterations), else by 1 per line. Lines read in one chunk arrived together, so they share that
chunk's interval the same way: the mean stays right even when a burst of lines is read at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from aorta.runner.command.cpu_clock import TreeCpu
from aorta.runner.command.process import TrialProcesses
from aorta.runner.command.spec import CommandSpec
from aorta.runner.command.steps import StepEvent, StepParser, step_parser


class IntervalSteps:
    """The step lines of `inner`, each timed by an interval clock since the previous one.

    `read(arrival)` is the clock's reading (seconds) when a chunk that arrived at monotonic
    time `arrival` is parsed; `start` its reading at the start of the trial.
    """

    def __init__(self, inner: StepParser, read: Callable[[float], float], start: float) -> None:
        self.inner = inner
        self.read = read
        self._last = start
        self._last_step: int | None = None

    def _iterations(self, steps: list[int | None]) -> int:
        """Iterations covered by step lines numbered `steps` since the previous step line."""
        total = 0
        for step in steps:
            last = self._last_step
            total += step - last if step is not None and last is not None and step > last else 1
            if step is not None:
                self._last_step = step
        return total

    def events(self, text: str, arrival: float) -> list[tuple[int, StepEvent]]:
        """See `StepParser`: the inner parser's events, step times replaced."""
        found = self.inner.events(text, arrival)
        steps = [event.step for _, event in found if event.time_ms is not None]
        if not steps:
            return found  # the clock is read only for step lines: loss lines cost nothing
        now = max(self.read(arrival), self._last)
        share_ms = (now - self._last) * 1000.0 / self._iterations(steps)
        self._last = now
        return [
            (pos, event if event.time_ms is None else replace(event, time_ms=share_ms))
            for pos, event in found
        ]


@dataclass
class ClockedParser:
    """A trial's step parser on its clock; `attach` the trial's processes once they started."""

    parser: StepParser | None
    cpu: TreeCpu | None = None

    def attach(self, procs: TrialProcesses) -> None:
        """Give the CPU clock (if any) the processes whose CPU time it counts."""
        if self.cpu is not None:
            self.cpu.attach(procs)


def clocked_parser(spec: CommandSpec, started: float) -> ClockedParser:
    """The step parser `spec` asks for, timed by the clock it asks for (fresh per trial).

    `started`: the monotonic time the trial started (the arrival clock's zero).
    """
    parser = step_parser(spec, started)
    if parser is None or spec.clock_choice in ("auto", "log"):
        return ClockedParser(parser)
    if spec.clock_choice == "arrival":
        return ClockedParser(IntervalSteps(parser, lambda arrival: arrival, started))
    cpu = TreeCpu()
    return ClockedParser(IntervalSteps(parser, lambda _arrival: cpu.seconds(), 0.0), cpu)

"""Where each cell's step times came from, and how loaded the host was while wall clocks ran.

A step-time ratio divides two cells' mean step times; it means something only when both were
measured the same way. Each trial's *time source* is named from its record:

* `log (<format>)`: the step times a command printed, read with that log format (`log` when
  the format is not recorded);
* `arrival`: the time between a command's step lines as they reached aorta;
* `cpu`: the CPU time of a command's whole process tree per step (`clock: cpu`);
* `workload <clock>`: an in-tree workload's own clock (e.g. fsdp's `workload wall`,
  `workload cpu`); `undeclared` when a workload did not say.

`log`, `arrival` and `workload wall` are wall clocks: they also measure what the rest of the
machine does. For trials timed by one, the host's 1-minute load average (`HostLoad`, sampled
during each trial) is summed up as a range, and a warning is raised when it moved by more than
half the host's CPUs over the run (at least 1.0): a swing that large can make a cell look
faster or slower than its work.

Pure functions over trial summaries (`cells.TrialSummary` has what is needed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aorta.runner.host_load import HostLoad
from aorta.runner.models import TrialResult

UNDECLARED: Final = "undeclared"
# Sources that do not move with the host's load (CPU time of the measured processes).
CPU_SOURCES: Final = frozenset({"cpu", "workload cpu"})
# The load is "varied a lot" when its range exceeds this fraction of the host's CPUs (and 1.0).
VARIED_FRACTION: Final = 0.5
_VARIED_MIN: Final = 1.0
# Clock and format names come from trial files, which matrix.md prints: plain short names only.
_NAME: Final = re.compile(r"[A-Za-z0-9_.+-]{1,40}")


# The Notes bullet that explains the **Step times from** line of matrix.md.
SOURCES_NOTE: Final = (
    "Step times from says what timed each cell's steps: `log (<format>)` the times the command "
    "printed, read in that format; `arrival` the time between its step lines as they reached "
    "aorta; `cpu` the CPU time of the trial's whole process tree per step (`clock: cpu`: "
    "unmoved by the host's load, blind to GPU and I/O waits); `workload <clock>` an in-tree "
    "workload's own clock. Step-time ratios compare like with like only: a warning says when "
    "cells (or one cell's trials) were timed differently. Host load is the range of the "
    "1-minute load average sampled during the trials timed by a wall clock (log, arrival, "
    "workload wall)."
)


class SourcedTrial(Protocol):
    """What this module needs of a trial (`aorta.triage.analysis.cells.TrialSummary` has it)."""

    @property
    def trial_id(self) -> int:
        """The trial's id."""
        ...

    @property
    def measured(self) -> bool:
        """Whether the trial measured (passed or failed, not an error)."""
        ...

    @property
    def step_times_ms(self) -> tuple[float, ...]:
        """Its post-warm-up step times."""
        ...

    @property
    def time_source(self) -> str | None:
        """Where its step times came from (`time_source`); None: not recorded."""
        ...

    @property
    def host_load(self) -> HostLoad | None:
        """The host's load while it ran; None: not sampled."""
        ...


class SourcedCell(Protocol):
    """What this module needs of a cell (`aorta.triage.analysis.cells.CellStats` has it)."""

    @property
    def name(self) -> str:
        """The cell's name."""
        ...

    @property
    def error(self) -> str | None:
        """Why the whole cell failed; None when it ran."""
        ...

    @property
    def trials(self) -> Sequence[SourcedTrial]:
        """Its trials."""
        ...


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def time_source(result: TrialResult) -> str:
    """The source of one trial's step times (see the module docstring).

    A clock or format name that is not a plain short name (a damaged trial file) reads as
    not recorded.
    """
    clock = _name(result.step_clock)
    if result.command is None:
        return f"workload {clock}" if clock else UNDECLARED
    if clock == "log":
        step_format = _name(result.command.get("step_format"))
        return f"log ({step_format})" if step_format else "log"
    return clock or UNDECLARED


def _timed(cell: SourcedCell) -> list[SourcedTrial]:
    """The trials whose step times enter the cell's statistics."""
    return [t for t in cell.trials if t.measured and t.step_times_ms]


def _source(trial: SourcedTrial) -> str:
    return trial.time_source or UNDECLARED


def cell_sources(cell: SourcedCell) -> tuple[str, ...]:
    """The sources of a cell's timed trials, in order of first use."""
    return tuple(dict.fromkeys(_source(t) for t in _timed(cell)))


def _ids(ids: Sequence[int]) -> str:
    return ("trial " if len(ids) == 1 else "trials ") + ", ".join(str(i) for i in ids)


def source_warnings(cells: Sequence[SourcedCell]) -> list[str]:
    """Warnings: cells timed by different sources, and cells whose own trials mixed sources."""
    sources = {c.name: cell_sources(c) for c in cells if c.error is None}
    sources = {name: found for name, found in sources.items() if found}
    found: list[str] = []
    if len({s for names in sources.values() for s in names}) > 1:
        listed = "; ".join(f"{name}: {', '.join(kinds)}" for name, kinds in sources.items())
        found.append(
            f"cells measured step time with different clocks ({listed}): their step-time "
            "ratios compare different measurements"
        )
    for cell in cells:
        if len(sources.get(cell.name, ())) < 2:
            continue
        by_source: dict[str, list[int]] = {}
        for trial in _timed(cell):
            by_source.setdefault(_source(trial), []).append(trial.trial_id)
        listed = "; ".join(f"{source}: {_ids(ids)}" for source, ids in by_source.items())
        found.append(
            f"cell {cell.name} timed its trials with different clocks ({listed}): its mean "
            "step time mixes different measurements"
        )
    return found


def sources_summary(cells: Sequence[SourcedCell]) -> str | None:
    """One line for matrix.md: each cell's source(s), or the one source of every cell."""
    sources = {c.name: cell_sources(c) for c in cells if c.error is None}
    sources = {name: found for name, found in sources.items() if found}
    if not sources:
        return None
    distinct = set(sources.values())
    if len(distinct) == 1 and len(sources) == len([c for c in cells if c.error is None]):
        return f"{', '.join(next(iter(distinct)))} (every cell)"
    return "; ".join(f"{name}: {', '.join(kinds)}" for name, kinds in sources.items())


@dataclass(frozen=True)
class LoadRange:
    """The host's 1-minute load over the trials timed by a wall clock."""

    low: float
    high: float
    cpus: int | None  # the largest CPU count recorded; None: none recorded
    trials: int
    by_cell: Mapping[str, tuple[float, float]]

    @property
    def varied(self) -> bool:
        """Whether the load moved by more than `VARIED_FRACTION` of the CPUs (and 1.0)."""
        limit = max(_VARIED_MIN, VARIED_FRACTION * self.cpus) if self.cpus else _VARIED_MIN
        return self.high - self.low > limit

    def text(self) -> str:
        """`0.4-3.1 (1-min loadavg over 12 trials timed by a wall clock, 2 CPUs)`, en dash."""
        cpus = f", {self.cpus} CPUs" if self.cpus else ""
        return (
            f"{self.low:.1f}\u2013{self.high:.1f} (1-min loadavg over {self.trials} trial"
            f"{'s' if self.trials != 1 else ''} timed by a wall clock{cpus})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (matrix.json `host_load`)."""
        return {
            "min_1m": self.low,
            "max_1m": self.high,
            "cpus": self.cpus,
            "trials": self.trials,
            "varied": self.varied,
            "by_cell": {name: list(pair) for name, pair in self.by_cell.items()},
        }


def _span(loads: Iterable[HostLoad]) -> tuple[float, float]:
    loads = list(loads)
    return min(x.min_1m for x in loads), max(x.max_1m for x in loads)


def load_range(cells: Sequence[SourcedCell]) -> LoadRange | None:
    """The load range over every measured trial timed by a wall clock that sampled the load."""
    per_cell: dict[str, list[HostLoad]] = {}
    for cell in cells:
        for trial in cell.trials:
            load = trial.host_load
            if trial.measured and load is not None and _source(trial) not in CPU_SOURCES:
                per_cell.setdefault(cell.name, []).append(load)
    if not per_cell:
        return None
    loads = [load for found in per_cell.values() for load in found]
    low, high = _span(loads)
    cpus = [load.cpus for load in loads if load.cpus is not None]
    return LoadRange(
        low=low,
        high=high,
        cpus=max(cpus) if cpus else None,
        trials=len(loads),
        by_cell={name: _span(found) for name, found in per_cell.items()},
    )


def load_warnings(cells: Sequence[SourcedCell]) -> list[str]:
    """A warning when the host's load varied a lot while wall clocks timed the steps."""
    found = load_range(cells)
    if found is None or not found.varied:
        return []
    per_cell = ", ".join(
        f"{name} {low:.1f}\u2013{high:.1f}" for name, (low, high) in found.by_cell.items()
    )
    return [
        f"the host's load varied a lot while wall clocks timed the steps: {found.text()}; per "
        f"cell {per_cell}. Wall-clock step times move with the load, so step-time ratios may "
        "measure it rather than the mitigations: rerun on a quiet host, or time a command "
        "workload by `clock: cpu`"
    ]

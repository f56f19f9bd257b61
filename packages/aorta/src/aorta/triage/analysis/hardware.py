"""Step-time comparability across machines: per-node step times and the different-hardware warning.

Pure functions over the `host` each trial recorded (`aorta.runner.host.TrialHost`). A step-time
ratio compares cells; when their trials ran on different CPU or GPU models it compares the
machines too, and the speed confound it is meant to expose is then suspect. Trials whose
record has no host (written by an aorta before it was recorded) are left out of the check
and say so; a run in which no trial recorded one gets no finding at all.

Choices made here:

- "Hardware" is the CPU model and the GPU models; the node name is not part of it. Several
  nodes of one hardware are a weaker note, not a warning (nodes of one model still differ in
  clocks, thermals and neighbours, but far less than models do).
- A side that is not known (`cpu_model` or `gpu_models` None) is not compared: unknown is not
  evidence of a difference.
- Per node, `mean_step_time_ms` is the mean of the measured trials' mean step times (the
  quantity the cell's ratio is built on) and `median_step_time_ms` the median of their pooled
  step times; errored trials are counted (`errors`) but timed by nothing, as in the cell.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aorta.runner.host import TrialHost

Hardware = tuple[str | None, tuple[str, ...] | None]


class TimedTrial(Protocol):
    """What the breakdown needs of a trial (`aorta.triage.analysis.cells.TrialSummary` has it)."""

    @property
    def host(self) -> TrialHost | None:
        """Where the trial ran; None when not recorded."""
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
    def mean_step_time_ms(self) -> float | None:
        """Mean of its finite step times."""
        ...


@dataclass(frozen=True)
class NodeSteps:
    """One node's share of a cell: its trials and their step times."""

    node: str | None  # None: trials that recorded no host
    cpu_model: str | None
    gpu_models: tuple[str, ...] | None
    trials: int  # measured trials (passed + failed)
    errors: int
    mean_step_time_ms: float | None
    median_step_time_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the floats are finite by construction)."""
        return {
            "node": self.node,
            "cpu_model": self.cpu_model,
            "gpu_models": None if self.gpu_models is None else list(self.gpu_models),
            "trials": self.trials,
            "errors": self.errors,
            "mean_step_time_ms": self.mean_step_time_ms,
            "median_step_time_ms": self.median_step_time_ms,
        }


def node_breakdown(trials: Iterable[TimedTrial]) -> tuple[NodeSteps, ...]:
    """A cell's trials grouped by node (and hardware), in order of each node's first trial."""
    groups: dict[tuple[str | None, Hardware], list[TimedTrial]] = {}
    for trial in trials:
        host = trial.host
        key = (None, (None, None)) if host is None else (host.node, host.hardware)
        groups.setdefault(key, []).append(trial)
    return tuple(_node_steps(node, hardware, group) for (node, hardware), group in groups.items())


def _node_steps(node: str | None, hardware: Hardware, group: list[TimedTrial]) -> NodeSteps:
    measured = [t for t in group if t.measured]
    means = [m for m in (t.mean_step_time_ms for t in measured) if m is not None]
    pooled = [s for t in measured for s in t.step_times_ms if math.isfinite(s)]
    return NodeSteps(
        node=node,
        cpu_model=hardware[0],
        gpu_models=hardware[1],
        trials=len(measured),
        errors=len(group) - len(measured),
        mean_step_time_ms=math.fsum(means) / len(means) if means else None,
        median_step_time_ms=float(statistics.median(pooled)) if pooled else None,
    )


def describe(hardware: Hardware) -> str:
    """`CPU <model>, GPU 8x <model>` (unknown parts say so; `no GPU seen` for none)."""
    cpu, gpus = hardware
    text = f"CPU {cpu if cpu is not None else 'unknown'}"
    if gpus is None:
        return f"{text}, GPU unknown"
    if not gpus:
        return f"{text}, no GPU seen"
    counts = Counter(gpus)
    return f"{text}, GPU " + " + ".join(f"{n}x {name}" for name, n in counts.items())


def _listed(names: Iterable[str]) -> str:
    unique = list(dict.fromkeys(names))
    return ", ".join(unique)


def _common(hosts: Sequence[TrialHost]) -> Hardware | None:
    """The one hardware all `hosts` share (unknown sides not compared); None when they differ."""
    cpus = {h.cpu_model for h in hosts if h.cpu_model is not None}
    gpus = {h.gpu_models for h in hosts if h.gpu_models is not None}
    if len(cpus) > 1 or len(gpus) > 1:
        return None
    return next(iter(cpus), None), next(iter(gpus), None)


def hardware_findings(
    cells: Mapping[str, Sequence[TrialHost | None]],
) -> tuple[list[str], list[str]]:
    """(warnings, notes) about where the cells' measured trials ran.

    `cells` maps each cell name to the hosts of its measured trials. Warning: the cells ran on
    different CPU or GPU models (naming each hardware and its cells). Notes: one hardware but
    several nodes; some trials recorded no host.
    """
    known = [(name, h) for name, hosts in cells.items() for h in hosts if h is not None]
    if not known:
        return [], []
    warnings: list[str] = []
    notes: list[str] = []
    common = _common([h for _, h in known])
    if common is None:
        by_hardware: dict[Hardware, list[str]] = {}
        for name, host in known:
            by_hardware.setdefault(host.hardware, []).append(name)
        listed = "; ".join(
            f"{describe(hw)}: cells {_listed(names)}" for hw, names in by_hardware.items()
        )
        warnings.append(
            f"cells ran on different hardware ({listed}): their step times compare machines as "
            "well as mitigations, so step-time ratios and speed labels are suspect; "
            "matrix.json breaks step times down per node (step_time_by_node)"
        )
    else:
        by_node: dict[str, list[str]] = {}
        for name, host in known:
            by_node.setdefault(host.node, []).append(name)
        if len(by_node) > 1:
            nodes = "; ".join(f"{node} (cells {_listed(names)})" for node, names in by_node.items())
            notes.append(
                f"trials ran on {len(by_node)} nodes of the same hardware ({describe(common)}): "
                f"{nodes}; nodes of one model can still differ in speed, see step_time_by_node "
                "in matrix.json"
            )
    missing = {name: sum(h is None for h in hosts) for name, hosts in cells.items()}
    if any(missing.values()):
        cells_text = ", ".join(f"{name} ({n})" for name, n in missing.items() if n)
        notes.append(
            f"{sum(missing.values())} trial(s) recorded no host (cells {cells_text}; written by "
            "an older aorta): where they ran is unknown and they are left out of the hardware check"
        )
    return warnings, notes


def hardware_summary(hosts: Iterable[TrialHost | None]) -> str | None:
    """One line for the matrix header: the hardware and nodes, or None when none recorded."""
    known = [h for h in hosts if h is not None]
    if not known:
        return None
    nodes = list(dict.fromkeys(h.node for h in known))
    where = f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"
    common = _common(known)
    if common is None:
        return f"mixed (see warnings); {where}"
    return f"{describe(common)}; {where}"

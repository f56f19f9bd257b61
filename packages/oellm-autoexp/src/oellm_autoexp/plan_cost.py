"""What a plan asks SLURM for: GPU-hours (node-hours where no GPUs are requested).

`plan_cost` is a pure function of the plan's per-job sbatch directives: for each job
nodes x GPUs x time limit, where the time limit is the job's ``--time`` (the most it may run,
which is what a cluster reserves and what an allocation is charged against at worst). Jobs
without GPUs are counted in node-hours; jobs without a ``--time`` are listed, not guessed
(the partition default is not known here).

`confirm_cost` is the gate `submit` runs before sbatch: above `scheduler.confirm_above_hours`
it asks, ``--yes`` skips the question, and without a terminal to ask on it refuses (a usage
error) instead of submitting silently.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from oellm_autoexp.errors import AutoexpRunError, AutoexpUsageError, ConfigError
from oellm_autoexp.plan import Plan

_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})")
_COUNT = re.compile(r"(?:[\w.-]+:)?(?P<count>\d+)")  # "4" or "a100:4"
_UNLIMITED = {"unlimited", "infinite", "inf"}


@dataclass(frozen=True)
class JobShape:
    """What one job requests: nodes, GPUs per node (0: none) and its time limit in hours."""

    nodes: int
    gpus_per_node: int
    hours: float | None  # None: no --time directive (the partition default applies)

    @property
    def hours_requested(self) -> float:
        """GPU-hours, or node-hours when the job requests no GPUs (0 without a time limit)."""
        if self.hours is None:
            return 0.0
        return self.nodes * max(self.gpus_per_node, 1) * self.hours


@dataclass(frozen=True)
class PlanCost:
    """The plan's request, by job shape (how many jobs request what)."""

    shapes: tuple[tuple[JobShape, int], ...]

    @property
    def jobs(self) -> int:
        """How many jobs the plan holds."""
        return sum(count for _, count in self.shapes)

    @property
    def gpu_hours(self) -> float:
        """GPU-hours over the jobs that request GPUs."""
        return sum(s.hours_requested * n for s, n in self.shapes if s.gpus_per_node)

    @property
    def node_hours(self) -> float:
        """Node-hours over the jobs that request no GPUs."""
        return sum(s.hours_requested * n for s, n in self.shapes if not s.gpus_per_node)

    @property
    def total_hours(self) -> float:
        """GPU-hours plus the node-hours of GPU-less jobs: what the threshold compares."""
        return self.gpu_hours + self.node_hours

    @property
    def jobs_without_time(self) -> int:
        """Jobs that set no ``--time`` (not counted in the hours)."""
        return sum(n for s, n in self.shapes if s.hours is None)

    def describe(self) -> str:
        """One line: the totals and the shapes they come from."""
        parts = []
        if self.gpu_hours or not self.node_hours:
            parts.append(f"{_hours(self.gpu_hours)} GPU-hours")
        if self.node_hours:
            parts.append(f"{_hours(self.node_hours)} node-hours (jobs without GPUs)")
        terms = [_term(shape, count) for shape, count in self.shapes if shape.hours is not None]
        line = f"requests {' + '.join(parts)}"
        if terms:
            line += f" = {' + '.join(terms)}"
        if self.jobs_without_time:
            line += (
                f"; {self.jobs_without_time} job(s) set no time limit (slurm.sbatch.time) "
                "and are not counted"
            )
        return line


def plan_cost(plan: Plan, *, only: Collection[int] | None = None, copies: int = 1) -> PlanCost:
    """GPU-hours / node-hours the jobs of `plan` request (see module docs).

    `only`: the job indices submitted (`submit --array-subset`); `copies`: how many times each
    is submitted (`submit --chain N`).
    """
    counts: Counter[JobShape] = Counter()
    for job in plan.jobs:
        if only is None or job.index in only:
            counts[job_shape(job.sbatch)] += copies
    return PlanCost(shapes=tuple(counts.items()))


def cost_of_directives(counts: Mapping[tuple[tuple[str, str], ...], int]) -> PlanCost:
    """The cost of jobs counted by their directives (a streamed plan keeps only these counts)."""
    shapes: Counter[JobShape] = Counter()
    for sbatch, jobs in counts.items():
        shapes[job_shape(dict(sbatch))] += jobs
    return PlanCost(shapes=tuple(shapes.items()))


def job_shape(sbatch: Mapping[str, str]) -> JobShape:
    """Nodes, GPUs per node and hours from one job's directives (names without dashes)."""
    nodes = _nodes(sbatch.get("nodes"))
    time = sbatch.get("time")
    hours = None if time is None else time_limit_hours(time)
    return JobShape(nodes=nodes, gpus_per_node=_gpus_per_node(sbatch, nodes), hours=hours)


def time_limit_hours(text: str) -> float | None:
    """SLURM's ``--time`` formats in hours: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.

    None for ``UNLIMITED`` / ``INFINITE``.
    """
    value = str(text).strip()
    if value.lower() in _UNLIMITED:
        return None
    match = _TIME.fullmatch(value)
    if match is None:
        raise ConfigError(
            f"{value!r} is not a SLURM time limit (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)",
            key="slurm.sbatch.time",
        )
    fields = [int(x) for x in match["rest"].split(":")]
    if match["days"] is not None:  # D-H[:M[:S]]
        fields += [0] * (3 - len(fields))
        hours, minutes, seconds = fields
        return int(match["days"]) * 24 + hours + minutes / 60 + seconds / 3600
    if len(fields) == 1:  # M
        return fields[0] / 60
    if len(fields) == 2:  # M:S
        return fields[0] / 60 + fields[1] / 3600
    hours, minutes, seconds = fields
    return hours + minutes / 60 + seconds / 3600


def _nodes(text: str | None) -> int:
    """``--nodes``: N, MIN-MAX or a list of sizes; the largest is what may be allocated."""
    if text is None or not str(text).strip():
        return 1
    numbers = [int(x) for x in re.findall(r"\d+", str(text))]
    if not numbers:
        raise ConfigError(f"{text!r} is not a node count", key="slurm.sbatch.nodes")
    return max(numbers)


def _gpus_per_node(sbatch: Mapping[str, str], nodes: int) -> int:
    """GPUs per node from --gpus (per job), --gpus-per-node, --gres=gpu or --gpus-per-task."""
    if "gpus" in sbatch:
        total = _count(sbatch["gpus"], "gpus")
        return -(-total // nodes)  # spread over the nodes, rounded up
    if "gpus-per-node" in sbatch:
        return _count(sbatch["gpus-per-node"], "gpus-per-node")
    if "gres" in sbatch:
        return _gres_gpus(sbatch["gres"])
    if "gpus-per-task" in sbatch:
        per_task = _count(sbatch["gpus-per-task"], "gpus-per-task")
        if "ntasks-per-node" in sbatch:
            return per_task * _count(sbatch["ntasks-per-node"], "ntasks-per-node")
        tasks = _count(sbatch["ntasks"], "ntasks") if "ntasks" in sbatch else 1
        return -(-(per_task * tasks) // nodes)
    return 0


def _count(text: str, name: str) -> int:
    match = _COUNT.fullmatch(str(text).strip())
    if match is None:
        raise ConfigError(f"{text!r} is not a count ([type:]N)", key=f"slurm.sbatch.{name}")
    return int(match["count"])


def _gres_gpus(text: str) -> int:
    """GPUs in a ``--gres`` list such as ``gpu:4``, ``gpu:a100:4,nvme:1`` or ``gpu``."""
    total = 0
    for item in str(text).split(","):
        name, _, rest = item.strip().partition(":")
        if name != "gpu":
            continue
        count = rest.rpartition(":")[2] if rest else "1"
        total += int(count) if count.isdigit() else 1  # "gpu:a100": one GPU of that type
    return total


def _hours(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _term(shape: JobShape, count: int) -> str:
    gpus = f" x {shape.gpus_per_node} GPU(s)" if shape.gpus_per_node else ""
    assert shape.hours is not None
    return f"{count} job(s) x {shape.nodes} node(s){gpus} x {_hours(shape.hours)} h"


def confirm_cost(
    cost: PlanCost,
    threshold: float | None,
    *,
    assume_yes: bool,
    interactive: bool,
    ask: Callable[[str], bool],
) -> None:
    """Ask before submitting a plan above `threshold` hours; raise if the answer is no.

    `assume_yes`: ``--yes``. `interactive`: stdin is a terminal. `ask`: the question, asked
    only when interactive. Without a terminal and without ``--yes`` it is a usage error
    (exit 2): a script must say ``--yes`` to spend that much.
    """
    check_threshold(threshold)
    if threshold is None or assume_yes or cost.total_hours <= threshold:
        return
    what = f"the plan {cost.describe()}, above scheduler.confirm_above_hours={threshold:g}"
    if not interactive:
        raise AutoexpUsageError(f"{what}; pass --yes to submit it (no terminal to ask on)")
    if not ask(f"{what}. Submit?"):
        raise AutoexpRunError("not submitted (the cost was not confirmed)")


def check_threshold(value: float | None) -> None:
    """`scheduler.confirm_above_hours` must be null or a number >= 0."""
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ConfigError(
            f"expected a number of hours >= 0 or null, got {value!r}",
            key="scheduler.confirm_above_hours",
        )


__all__ = [
    "JobShape",
    "PlanCost",
    "check_threshold",
    "confirm_cost",
    "job_shape",
    "plan_cost",
    "time_limit_hours",
]

"""How many nodes, processes per node and GPUs a job's SLURM settings ask for (pure functions).

The world size a training job will see follows from the directives alone: ``nodes`` times the
processes per node, which is `slurm.distributed.procs_per_node` when set and otherwise the GPUs
per node requested through ``gres`` (``gpu:4``, ``gpu:a100:4``), ``gpus_per_node`` (``4``,
``h100:4``) or ``gpus`` (a total, divided by the nodes). The backend validates its arguments
against that world size at plan time (e.g. Megatron's TP x PP x CP must divide it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oellm_autoexp.errors import ConfigError

# What sbatch accepts as a count: N, MIN-MAX or N,M,... (each at least 1).
NODE_COUNT = re.compile(r"[1-9]\d*(?:-[1-9]\d*)?(?:,[1-9]\d*)*")

if TYPE_CHECKING:
    from oellm_autoexp.backends.base import JobContext
    from oellm_autoexp.config.schema import SlurmConfig

SBATCH_PARAM_PREFIX = "slurm.sbatch."

# `gpu:4`, `gpu:a100:4`, `gpu:4(S:0-1)`; several gres are comma-separated.
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[A-Za-z0-9_.-]+)?:(?P<count>\d+)(?:\([^)]*\))?(?=,|$)")
# `4`, `a100:4` (sbatch --gpus-per-node / --gpus take [type:]count).
_TYPED_COUNT = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?(?P<count>\d+)$")


@dataclass(frozen=True)
class Topology:
    """What one job's directives request; `None` where the directives do not say."""

    nodes: int | None
    tasks_per_node: int | None
    gpus_per_node: int | None

    def world_size(self, procs_per_node: int | None) -> int | None:
        """Processes in the job's world: nodes x (`procs_per_node`, else GPUs per node)."""
        per_node = procs_per_node if procs_per_node is not None else self.gpus_per_node
        if self.nodes is None or per_node is None:
            return None
        return self.nodes * per_node


def topology(sbatch: Mapping[str, Any], *, key: str = "slurm.sbatch") -> Topology:
    """Read nodes, tasks per node and GPUs per node from `sbatch` directives (by config key)."""
    directives = {str(k).replace("-", "_"): v for k, v in sbatch.items() if v is not None}
    nodes = _count(directives.get("nodes"), key=f"{key}.nodes", default=1)
    tasks = _count(directives.get("ntasks_per_node"), key=f"{key}.ntasks_per_node")
    if tasks is None and "ntasks" in directives and nodes is not None:
        total = _count(directives["ntasks"], key=f"{key}.ntasks")
        if total is not None and total % nodes == 0:
            tasks = total // nodes
    gpus = _gpus_per_node(directives, nodes, key=key)
    return Topology(nodes=nodes, tasks_per_node=tasks, gpus_per_node=gpus)


def _count(value: Any, *, key: str, default: int | None = None) -> int | None:
    """A positive count; a range such as ``2-4`` is not a fixed size (None)."""
    if value is None:
        return default
    text = str(value)
    if not isinstance(value, bool) and re.fullmatch(r"[1-9]\d*", text):
        return int(text)
    # A range or list (`2-4`, `2,4`) is valid for sbatch but no fixed size. The renderer checks
    # `--nodes` with the same `NODE_COUNT`, so the two never disagree on what is valid.
    if NODE_COUNT.fullmatch(text):
        return None
    raise ConfigError(f"expected a count of at least 1, got {value!r}", key=key)


def _gpus_per_node(directives: Mapping[str, Any], nodes: int | None, *, key: str) -> int | None:
    if "gpus_per_node" in directives:
        return _typed_count(directives["gpus_per_node"], key=f"{key}.gpus_per_node")
    if "gres" in directives:
        match = _GRES_GPU.search(str(directives["gres"]))
        if match:
            return int(match["count"])
    if "gpus" in directives and nodes is not None:
        total = _typed_count(directives["gpus"], key=f"{key}.gpus")
        if total % nodes:
            raise ConfigError(
                f"{total} GPUs cannot be spread evenly over {nodes} node(s)", key=f"{key}.gpus"
            )
        return total // nodes
    return None


def _typed_count(value: Any, *, key: str) -> int:
    match = _TYPED_COUNT.fullmatch(str(value))
    if match is None:
        raise ConfigError(f"expected [type:]count such as 4 or a100:4, got {value!r}", key=key)
    return int(match["count"])


def job_sbatch(slurm: SlurmConfig, params: Mapping[str, Any]) -> dict[str, Any]:
    """The job's directives: `slurm.sbatch` with its ``slurm.sbatch.*`` sweep values applied."""
    overrides = {
        k[len(SBATCH_PARAM_PREFIX) :]: v
        for k, v in params.items()
        if k.startswith(SBATCH_PARAM_PREFIX)
    }
    return {**slurm.sbatch, **overrides}


class WorldSizes:
    """Each job's world size (memoised per directive set) and the cluster environment."""

    def __init__(self, slurm: SlurmConfig) -> None:
        self.slurm = slurm
        self.procs_per_node = slurm.distributed.procs_per_node
        self.env = {
            str(k): (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in slurm.env.items()
        }
        self._sizes: dict[str, int | None] = {}

    def of(self, params: Mapping[str, Any]) -> int | None:
        """The number of processes the directives of a job with `params` start in one world."""
        marker = sbatch_marker(self.slurm, params)
        if marker not in self._sizes:
            sbatch = job_sbatch(self.slurm, params)
            self._sizes[marker] = topology(sbatch).world_size(self.procs_per_node)
        return self._sizes[marker]


def with_world_sizes(slurm: SlurmConfig, contexts: Sequence[JobContext]) -> list[JobContext]:
    """Each job with the world size its directives imply and the cluster environment."""
    from oellm_autoexp.backends.base import JobContext

    sizes = WorldSizes(slurm)
    return [
        JobContext(
            ctx.job_id,
            ctx.name,
            ctx.index,
            ctx.params,
            ctx.output_dir,
            ctx.project,
            world_size=sizes.of(ctx.params),
            cluster_env=sizes.env,
        )
        for ctx in contexts
    ]


def sbatch_marker(slurm: SlurmConfig, params: Mapping[str, Any]) -> str:
    """A key equal for jobs with equal directives ("" for the jobs no sweep value changes)."""
    if not _sweeps_sbatch(tuple(params)):
        return ""
    return repr(sorted(job_sbatch(slurm, params).items(), key=lambda kv: str(kv[0])))


@functools.lru_cache(maxsize=256)
def _sweeps_sbatch(keys: tuple[str, ...]) -> bool:
    """Whether params with these keys set directives (jobs of a sweep share their key tuple)."""
    return any(k.startswith(SBATCH_PARAM_PREFIX) for k in keys)

"""One distributed world per job: the launch each `slurm.distributed.mode` renders, and the
static check that refuses settings that would start several independent worlds instead.

Modes (``slurm.distributed.mode``):

- ``torchrun``: one SLURM task per node (``ntasks_per_node: 1``) runs the job's command, which
  must start with ``torchrun``; torchrun reads its settings from ``PET_*`` environment variables
  that the script exports: ``PET_NNODES`` (SLURM's node count), ``PET_NPROC_PER_NODE``
  (`procs_per_node`, else the GPUs per node), ``PET_RDZV_BACKEND=c10d``,
  ``PET_RDZV_ENDPOINT=<first node>:<master_port>`` and ``PET_RDZV_ID`` (the SLURM job id), so the
  torchruns of all nodes join one rendezvous.
- ``srun``: one SLURM task per process (``ntasks_per_node`` = processes per node); each task
  gets ``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE`` from SLURM (``SLURM_PROCID``,
  ``SLURM_LOCALID``, ``SLURM_NTASKS``) and ``MASTER_ADDR`` / ``MASTER_PORT`` from the script, which
  is what ``torch.distributed``'s ``env://`` initialisation reads. The command must not be
  torchrun (each task would start a world of its own).
- ``none``: the command is started once per task and forms no world itself (single-process
  jobs; programs that form their own world, e.g. through MPI). A torchrun command on several
  nodes, or several torchruns per node, is refused here: nothing would join them.

The generated lines are fixed text plus validated integers; the job's own values never enter
them. They are prepended to `slurm.prologue`, and the per-task wrapper for ``srun`` goes into the
launch prefix, so every template (built-in or custom) receives them through the variables it
already has.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.slurm.topology import Topology, job_sbatch, sbatch_marker, topology

if TYPE_CHECKING:
    from oellm_autoexp.backends.base import JobContext, LaunchCommand
    from oellm_autoexp.config.schema import SlurmConfig

MODES = ("none", "torchrun", "srun")
KEY = "slurm.distributed"
# torchrun options that the torchrun mode sets through PET_* variables; a command that sets
# them itself would override the rendezvous (e.g. `--standalone` makes each node its own world).
_TORCHRUN_OWNED = (
    "--nnodes",
    "--nproc-per-node",
    "--nproc_per_node",
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "--rdzv-backend",
    "--rdzv_backend",
    "--rdzv-id",
    "--rdzv_id",
    "--master-addr",
    "--master_addr",
    "--master-port",
    "--master_port",
    "--node-rank",
    "--node_rank",
    "--standalone",
)
_MASTER_ADDR = 'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"'
# Runs inside each srun task: SLURM's per-task ids become torch.distributed's env:// variables.
SRUN_TASK_ENV = (
    'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID" WORLD_SIZE="$SLURM_NTASKS"; exec "$@"'
)


def is_torchrun(argv: Sequence[str]) -> bool:
    """Whether `argv` starts torchrun (``torchrun ...`` or ``python -m torch.distributed.run``)."""
    if not argv:
        return False
    if PurePosixPath(argv[0]).name == "torchrun":
        return True
    return len(argv) >= 3 and argv[1] == "-m" and argv[2] == "torch.distributed.run"


def script_procs_per_node(slurm: SlurmConfig) -> int | None:
    """Processes per node the script exports: the setting, else the GPUs `slurm.sbatch` asks."""
    return slurm.distributed.procs_per_node or topology(slurm.sbatch).gpus_per_node


def with_distributed_launch(slurm: SlurmConfig) -> SlurmConfig:
    """`slurm` with the mode's exports prepended to the prologue and its per-task wrapper.

    Called by the renderer, so plan scripts and restart scripts launch alike.
    """
    mode = slurm.distributed.mode
    if mode == "none":
        return slurm
    procs_per_node = script_procs_per_node(slurm)
    port = slurm.distributed.master_port
    lines = [_MASTER_ADDR, f"export MASTER_PORT={port}"]
    if mode == "torchrun":
        lines.append(
            f'export PET_NNODES="$SLURM_JOB_NUM_NODES" PET_NPROC_PER_NODE={procs_per_node} '
            'PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT" '
            'PET_RDZV_ID="$SLURM_JOB_ID"'
        )
        return replace(slurm, prologue=[*lines, *slurm.prologue])
    wrapper = shlex.join(["bash", "-c", SRUN_TASK_ENV, "autoexp-task"])
    return replace(
        slurm,
        prologue=[*lines, *slurm.prologue],
        launcher_cmd=f"{wrapper} {slurm.launcher_cmd}".strip(),
    )


def check_one_world(
    slurm: SlurmConfig, contexts: Sequence[JobContext], launches: Sequence[LaunchCommand]
) -> None:
    """Refuse settings under which a job would not form one world.

    Checked per distinct (directives, command shape); the first problem is a one-line
    `ConfigError` naming the key to change.
    """
    mode = slurm.distributed.mode
    if mode not in MODES:
        raise ConfigError(f"expected one of {', '.join(MODES)}, got {mode!r}", key=f"{KEY}.mode")
    _check_settings(slurm)
    exported = script_procs_per_node(slurm) if mode == "torchrun" else None
    seen: set[tuple[str, bool, tuple[str, ...]]] = set()
    torchrun_by_start: dict[tuple[str, ...], bool] = {}  # the first three words decide
    for ctx, launch in zip(contexts, launches, strict=True):
        start = tuple(launch.argv[:3])
        torchrun = torchrun_by_start.get(start)
        if torchrun is None:
            torchrun = torchrun_by_start[start] = is_torchrun(launch.argv)
        owned = _torchrun_owned(launch.argv) if torchrun else ()
        marker = (sbatch_marker(slurm, ctx.params), torchrun, owned)
        if marker in seen:
            continue
        seen.add(marker)
        sbatch = job_sbatch(slurm, ctx.params)
        topo = topology(sbatch)
        where = f"(job {ctx.name})"
        if mode == "torchrun":
            procs = _check_torchrun(slurm, topo, torchrun, owned, where)
            if procs != exported:
                raise ConfigError(
                    f"job {ctx.name} has {procs} GPUs per node, the script starts {exported} "
                    "processes per node (from slurm.sbatch); set "
                    "slurm.distributed.procs_per_node or do not sweep the GPUs per node",
                    key=f"{KEY}.procs_per_node",
                )
        elif mode == "srun":
            _check_srun(slurm, topo, torchrun, where)
        else:
            _check_none(slurm, topo, torchrun, where)


def _check_settings(slurm: SlurmConfig) -> None:
    procs = slurm.distributed.procs_per_node
    if procs is not None and procs < 1:
        raise ConfigError(f"must be at least 1, got {procs}", key=f"{KEY}.procs_per_node")
    port = slurm.distributed.master_port
    if not 1024 <= port <= 65535:
        raise ConfigError(f"expected a port in 1024-65535, got {port}", key=f"{KEY}.master_port")


def _torchrun_owned(argv: Sequence[str]) -> tuple[str, ...]:
    """The rendezvous options a torchrun command sets itself (before its script)."""
    start = 1 if PurePosixPath(argv[0]).name == "torchrun" else 3
    owned = []
    for token in argv[start:]:
        if not token.startswith("-"):
            break  # the training script: what follows are its own arguments
        name = token.split("=", 1)[0]
        if name in _TORCHRUN_OWNED:
            owned.append(name)
    return tuple(owned)


def _procs_per_node(slurm: SlurmConfig, topo: Topology, where: str) -> int:
    procs = slurm.distributed.procs_per_node or topo.gpus_per_node
    if procs is None:
        raise ConfigError(
            f"cannot tell how many processes a node runs {where}: no GPUs are requested "
            "(slurm.sbatch.gres / gpus_per_node); set slurm.distributed.procs_per_node",
            key=f"{KEY}.procs_per_node",
        )
    return procs


def _needs_srun(slurm: SlurmConfig, topo: Topology, where: str) -> None:
    if not slurm.use_srun and (topo.nodes or 1) > 1:
        raise ConfigError(
            f"{topo.nodes} nodes but slurm.use_srun is false {where}: the batch script runs on "
            "the first node only, so the other nodes would idle",
            key="slurm.use_srun",
        )


def _check_torchrun(
    slurm: SlurmConfig, topo: Topology, torchrun: bool, owned: tuple[str, ...], where: str
) -> int:
    if not torchrun:
        raise ConfigError(
            f"mode torchrun, but the job's command does not start with torchrun {where}; start "
            "it with torchrun (backend launcher) or use mode srun",
            key=f"{KEY}.mode",
        )
    if owned:
        raise ConfigError(
            f"the torchrun command sets {owned[0]} {where}; mode torchrun sets nodes, processes "
            "per node and the rendezvous from the allocation; remove it",
            key="backend.launcher",
        )
    if topo.tasks_per_node not in (None, 1):
        raise ConfigError(
            f"{topo.tasks_per_node} tasks per node would start {topo.tasks_per_node} torchruns "
            f"per node, each its own world {where}; torchrun starts the processes of a node "
            "itself: set ntasks_per_node: 1",
            key="slurm.sbatch.ntasks_per_node",
        )
    _needs_srun(slurm, topo, where)
    return _procs_per_node(slurm, topo, where)


def _check_srun(slurm: SlurmConfig, topo: Topology, torchrun: bool, where: str) -> None:
    if torchrun:
        raise ConfigError(
            f"mode srun starts one task per process, but the command is torchrun {where}: each "
            "task would start a world of its own; run the script directly (e.g. python) or use "
            "mode torchrun",
            key=f"{KEY}.mode",
        )
    if not slurm.use_srun:
        raise ConfigError(
            "mode srun needs slurm.use_srun: true (the tasks are started by srun)",
            key="slurm.use_srun",
        )
    procs = _procs_per_node(slurm, topo, where)
    if topo.tasks_per_node != procs:
        raise ConfigError(
            f"mode srun runs one task per process: expected ntasks_per_node {procs}, got "
            f"{topo.tasks_per_node} {where}",
            key="slurm.sbatch.ntasks_per_node",
        )


def _check_none(slurm: SlurmConfig, topo: Topology, torchrun: bool, where: str) -> None:
    if not torchrun:
        return
    if (topo.nodes or 1) > 1:
        raise ConfigError(
            f"{topo.nodes} nodes each run torchrun without a common rendezvous {where}: "
            f"{topo.nodes} separate worlds; set slurm.distributed.mode: torchrun",
            key=f"{KEY}.mode",
        )
    if slurm.use_srun and topo.tasks_per_node not in (None, 1):
        raise ConfigError(
            f"{topo.tasks_per_node} tasks per node each start torchrun {where}: separate "
            "worlds; set ntasks_per_node: 1 (or slurm.distributed.mode: torchrun)",
            key="slurm.sbatch.ntasks_per_node",
        )

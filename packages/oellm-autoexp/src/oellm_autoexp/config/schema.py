"""The config tree as compoconf dataclasses.

Sections with one shape are plain `ConfigInterface` dataclasses; sections with several possible
implementations (backend, monitoring, restart policies) are typed by their registry
(`BackendInterface.cfgtype`, ...), so YAML selects an implementation with ``class_name`` and
maps straight onto its config class, with no wrapper keys.

Enumerated string fields are plain `str` here and checked in `config.validation`, which gives
a clearer message than a failed `Literal` parse.
"""

# No `from __future__ import annotations`: compoconf resolves a config class's annotations
# (typing.get_type_hints) when it parses one, and each annotation kept as a string is
# compiled then; evaluated here, at import, they cost a config load nothing (issue 26).
from dataclasses import dataclass, field
from typing import Any

from compoconf import ConfigInterface

from oellm_autoexp.backends.base import BackendInterface
from oellm_autoexp.config.interfaces import MonitorInterface, RestartPolicyInterface

Scalar = str | int | float | bool


@dataclass
class ProjectConfig(ConfigInterface):
    """Project metadata: a name and the output root that every artifact and job lives under."""

    name: str
    base_output_dir: str
    # Where session files go; default <base_output_dir>/monitoring_state (spec: visible).
    state_dir: str | None = None
    description: str = ""


@dataclass
class SweepConfig(ConfigInterface):
    """The sweep: `axes` is a product/list tree (see `sweep.expand`), `base` fixed params."""

    axes: Any = field(default_factory=dict)
    base: dict[str, Any] = field(default_factory=dict)
    # Expression(s) over the params that a combination must satisfy to be kept (see
    # `sweep.filter`); a string or a list of strings, checked there (hence Any).
    filter: Any = None
    # str.format template over the job's params (dots -> underscores), job_id, index, project.
    name_template: str = "{project}_{job_id}"
    store_sweep_json: bool = True


@dataclass
class DistributedConfig(ConfigInterface):
    """How the processes of one job form one distributed world (see `slurm.distributed`).

    `mode`: ``none`` (the command is started once per SLURM task and forms no world itself),
    ``torchrun`` (one task per node runs torchrun, which starts `procs_per_node` processes and
    joins the other nodes through a c10d rendezvous on the first node) or ``srun`` (one SLURM
    task per process; RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR come from SLURM).
    """

    mode: str = "none"
    # Processes per node; default: the GPUs per node the directives request.
    procs_per_node: int | None = None
    master_port: int = 29500


@dataclass
class SlurmConfig(ConfigInterface):
    """How jobs become SBATCH scripts. Every cluster-specific piece is a config value."""

    # A built-in template name ("default") or a path to a Jinja2 template file.
    template: str = "default"
    submit_cmd: str = "sbatch"
    # Job arrays by default; per-job scripts when false or when jobs need different directives.
    array: bool = True
    max_array_size: int = 1000
    array_throttle: int | None = None  # `%N`: at most N tasks of an array run at once
    # `#SBATCH --<key>=<value>` directives; underscores in keys become dashes; true = bare flag,
    # null drops a directive inherited from another config.
    sbatch: dict[str, Scalar | None] = field(default_factory=dict)
    # Extra directive strings written verbatim after `#SBATCH ` (e.g. "--exclusive").
    extra_directives: list[str] = field(default_factory=list)
    # Cluster-level environment exported in every script (values are shell-quoted).
    env: dict[str, Scalar] = field(default_factory=dict)
    # Prefix command for the job's command (e.g. a container exec), split like a shell would.
    launcher_cmd: str = ""
    use_srun: bool = True
    srun_args: str = ""
    # Raw shell lines run before the command. Written verbatim: config-author code, never
    # interpolated with sweep values.
    prologue: list[str] = field(default_factory=list)
    # "auto": run `sbatch --test-only` on rendered scripts when sbatch is on PATH.
    test_only: str = "auto"
    distributed: DistributedConfig = field(default_factory=DistributedConfig)


@dataclass
class ContainerConfig(ConfigInterface):
    """Optional container: plan inside it, submit on the host (see the container runner)."""

    image: str | None = None
    runtime: str = "apptainer"
    bind: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)


@dataclass
class SchedulerConfig(ConfigInterface):
    """Submission throttling (applies to `submit` and restarts)."""

    max_jobs: int | None = None
    submit_rate_limit_seconds: float | None = None
    # `submit` asks before queueing a plan that requests more GPU-hours (node-hours for jobs
    # without GPUs) than this; `--yes` skips the question; null never asks.
    confirm_above_hours: float | None = 1000.0


@dataclass
class StageConfig(ConfigInterface):
    """One stage of a multi-stage experiment (see `sweep.stages`): every sweep point runs it.

    `params` are set on top of the point's sweep params (same keys a sweep may set: free
    params, ``backend.*``, ``slurm.sbatch.*``); string values may reference another stage of
    the same point as ``{stages.<name>.<field>}`` (output_dir, checkpoint, name, job_id).
    `after` names the stage this one waits for; `start` says for what: ``completed`` (that
    stage's job succeeded; a SLURM ``afterok`` dependency) or ``checkpoint`` (that stage's
    `checkpoint` file exists; the monitor submits this stage then). `checkpoint` is a template
    over this stage's own job fields (``{output_dir}/ckpt.txt``). `cancel_if_file` cancels
    the stage's job (waiting, queued or running) once that file exists (a template like
    `checkpoint`, which may also reference other stages: ``{stages.train.output_dir}/DIVERGED``).
    """

    name: str
    after: str | None = None
    start: str = "completed"
    params: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None
    cancel_if_file: str | None = None


@dataclass
class RootConfig(ConfigInterface):
    """The whole config. `restart.policies` in YAML is flattened into `restart_policies`."""

    project: ProjectConfig
    backend: BackendInterface.cfgtype  # type: ignore[valid-type]
    sweep: SweepConfig = field(default_factory=SweepConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    monitoring: MonitorInterface.cfgtype | None = None  # type: ignore[valid-type]
    restart_policies: list[RestartPolicyInterface.cfgtype] = field(  # type: ignore[valid-type]
        default_factory=list
    )
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    container: ContainerConfig | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Dotted key -> interpolation resolved per job after its sweep values are applied (filled
    # by the loader for interpolations that depend on swept keys; see `config.derived`).
    derived: dict[str, str] = field(default_factory=dict)
    # Stages of one experiment (train, then cooldown branches, ...); empty: one job per point.
    stages: list[StageConfig] = field(default_factory=list)

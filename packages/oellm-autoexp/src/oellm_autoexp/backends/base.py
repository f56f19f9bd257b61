"""The backend adapter contract: one job's parameters in, one launch command out.

A backend is chosen by config alone: the `backend:` section of the config carries the
`class_name` of a config class registered under `BackendInterface`, and the planner
instantiates it through the compoconf registry (`config.instantiate(BackendInterface)`).
Nothing in the planner names a concrete backend.

Implementations must keep heavy imports (torch, megatron) inside their methods: importing this
package, or planning with another backend, must not import them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from compoconf import ConfigInterface, RegistrableConfigInterface, register_interface

# The per-job fields every template may reference besides the job's params.
JOB_FIELDS = ("job_id", "name", "index", "output_dir", "project")


class JobContext:
    """What a backend knows about one job when it builds its command.

    `params` are the job's sweep values (flat, dotted keys, e.g. ``{"backend.lr": 3e-4}``);
    `output_dir` is the job's own directory under the output root. `world_size` is the number of
    processes the job's SLURM settings start in one distributed world (None when they do not
    say, e.g. no GPUs requested); `cluster_env` the cluster-level environment (`slurm.env`).

    Read-only: the attributes are `Final` for type checkers (`replace` makes a changed copy);
    not enforced at run time, which would double the cost of making one. `output_dir` may be
    given as its text, which must then be the path's normal form (what ``str(Path(text))``
    returns): the planner makes a million contexts whose backend mostly formats the directory
    into argv, and a `Path` and its text per job cost as much as the rest of the context. The
    `Path` is made when a backend first asks for it.
    """

    __slots__ = (
        "_output_path",
        "_output_text",
        "cluster_env",
        "index",
        "job_id",
        "name",
        "params",
        "project",
        "world_size",
    )

    def __init__(
        self,
        job_id: str,
        name: str,
        index: int,
        params: Mapping[str, Any],
        output_dir: Path | str,
        project: str,
        world_size: int | None = None,
        cluster_env: Mapping[str, str] | None = None,
    ) -> None:
        self.job_id: Final = job_id
        self.name: Final = name
        self.index: Final = index
        self.params: Final = params
        self.project: Final = project
        self.world_size: Final = world_size
        self.cluster_env: Final[Mapping[str, str]] = {} if cluster_env is None else cluster_env
        path = None if isinstance(output_dir, str) else output_dir
        self._output_text: Final[str] = str(output_dir)  # a str's own text: no copy
        self._output_path: Path | None = path

    @property
    def output_dir(self) -> Path:
        """The job's own directory under the output root."""
        if self._output_path is None:
            self._output_path = Path(self._output_text)
        return self._output_path

    @property
    def output_dir_text(self) -> str:
        """``str(output_dir)``, without making the `Path`."""
        return self._output_text

    def replace(self, **changes: Any) -> JobContext:
        """A copy with `changes` (keyword names as in the constructor) applied."""
        fields: dict[str, Any] = {
            "job_id": self.job_id,
            "name": self.name,
            "index": self.index,
            "params": self.params,
            "output_dir": self._output_path or self._output_text,
            "project": self.project,
            "world_size": self.world_size,
            "cluster_env": self.cluster_env,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"JobContext has no field {sorted(unknown)[0]!r}")
        return JobContext(**{**fields, **changes})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobContext):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # params is a dict: equal, not hashable

    def __repr__(self) -> str:
        return (
            f"JobContext(job_id={self.job_id!r}, name={self.name!r}, index={self.index!r}, "
            f"params={self.params!r}, output_dir={self._output_text!r}, "
            f"project={self.project!r}, world_size={self.world_size!r})"
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            self.job_id,
            self.name,
            self.index,
            self.params,
            self._output_text,
            self.project,
            self.world_size,
            self.cluster_env,
        )

    def format_fields(self) -> dict[str, Any]:
        """Fields a backend string template may reference: the job's fields plus every param.

        Dotted param keys are also offered with dots replaced by underscores, because
        `str.format` reads ``{backend.lr}`` as attribute access.
        """
        fields: dict[str, Any] = {
            "job_id": self.job_id,
            "name": self.name,
            "index": self.index,
            "output_dir": self._output_text,
            "project": self.project,
        }
        for key, value in self.params.items():
            fields[key] = value
            if "." in key:
                fields[key.replace(".", "_")] = value
        return fields


@dataclass(frozen=True)
class LaunchCommand:
    """The process one job runs: an argv list (never a shell string) and extra environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class BackendConfig(ConfigInterface):
    """Base of every backend config (gives them a common type for annotations)."""


@register_interface
class BackendInterface(RegistrableConfigInterface):
    """A training backend adapter, registered with compoconf.

    Subclasses set ``config_class`` to their `BackendConfig` subclass and are decorated with
    ``@compoconf.register``. The planner streams the sweep: it calls `validate` with each
    batch of up to 1,000 jobs (every job is validated once, in some batch), then
    `build_launch` per job of that batch.
    """

    config: BackendConfig

    def __init__(self, config: BackendConfig, *args: Any, **kwargs: Any) -> None:
        _ = args, kwargs  # RegistrableConfigInterface.__init__ ignores them too
        self.config = config

    def validate(self, jobs: Sequence[JobContext]) -> None:
        """Check the backend config against these jobs' params (one batch of the plan's).

        Raise `oellm_autoexp.errors.ConfigError` naming the key path on a bad value.
        """

    def validation_record(self) -> Mapping[str, Any]:
        """What checked the jobs in `validate` (recorded in plan.json). Default: nothing."""
        return {}

    def build_launch(self, job: JobContext) -> LaunchCommand:
        """The command (argv + env) that runs `job` inside the SBATCH script."""
        raise NotImplementedError

    def restart_overrides(self, job: JobContext, metadata: Mapping[str, Any]) -> Mapping[str, Any]:
        """Params to change when `job` is restarted (e.g. load the latest checkpoint).

        `metadata` is what the monitor knows (mode, error_type, ...). Default: nothing changes.
        """
        _ = job, metadata
        return {}

    def plan_artifacts(self) -> Mapping[str, str]:
        """Files (name -> text) to keep in the plan directory for rebuilding commands later.

        The monitor may run where the plan's tools are missing (plan in a container, monitor
        on the host); what a restart needs to rebuild and validate a command goes here.
        Default: nothing.
        """
        return {}

    def restart_config(self, data: Mapping[str, Any], plan_dir: Path) -> dict[str, Any]:
        """The backend config (dumped) to rebuild restart commands with, given the plan's files.

        Default: the planned config unchanged.
        """
        _ = plan_dir
        return dict(data)

    def postprocess(self, output_dir: Path) -> None:
        """Optional hook run after a job completed (e.g. convert checkpoints). Default: nothing."""
        _ = output_dir


def instantiate_backend(config: BackendConfig) -> BackendInterface:
    """The backend registered for `config` (by its ``class_name``), through compoconf."""
    backend = config.instantiate(BackendInterface)  # type: ignore[no-untyped-call]
    if not isinstance(backend, BackendInterface):
        raise TypeError(f"{type(backend).__name__} does not implement BackendInterface")
    return backend

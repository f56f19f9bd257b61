"""The plan: what will be submitted, job by job and script by script. Pure data.

`build_plan` (in `planning`) produces a `Plan`; the submission and monitoring layers
consume it. Everything here is a frozen dataclass with a JSON form (`to_dict` / `from_dict`)
so a plan survives in `plan.json` and in session files.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ArrayTask:
    """Where a job sits inside a SLURM job array."""

    array_name: str  # the array script's `#SBATCH --job-name`
    task_index: int  # $SLURM_ARRAY_TASK_ID of this job


@dataclass(frozen=True)
class StageLink:
    """Which stage a job belongs to and what it waits for (see `sweep.stages`)."""

    stage: str
    after: str | None = None  # job_id of the earlier stage's job of the same sweep point
    start: str | None = None  # "completed" or "checkpoint" when `after` is set
    start_file: str | None = None  # the earlier job's checkpoint, for start: checkpoint
    checkpoint: str | None = None  # this job's own checkpoint path
    cancel_file: str | None = None  # cancelled once this file exists

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "stage": self.stage,
            "after": self.after,
            "start": self.start,
            "start_file": self.start_file,
            "checkpoint": self.checkpoint,
            "cancel_file": self.cancel_file,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageLink:
        """Inverse of `to_dict`."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return None if value is None else str(value)

        return cls(
            str(data["stage"]),
            text("after"),
            text("start"),
            text("start_file"),
            text("checkpoint"),
            text("cancel_file"),
        )


@dataclass(frozen=True)
class JobPlan:
    """One job of the sweep, fully resolved: command, environment, paths and parameters.

    `log_path` is a SLURM filename pattern (``%j`` for a single job, ``%A``/``%a`` for an array
    task); `resolved_log_path` fills it in once SLURM has assigned a job id.
    """

    job_id: str  # deterministic: blake2b of the canonical params (see sweep.ids)
    name: str
    index: int  # position in the sweep
    params: Mapping[str, Any]
    command: tuple[str, ...]  # argv, never a shell string
    env: Mapping[str, str]
    output_dir: Path
    log_path: str
    script: Path  # the SBATCH script that runs this job
    sbatch: Mapping[str, str]  # the directives of that script (without array/job-name/output)
    array: ArrayTask | None = None
    stage: StageLink | None = None  # None: a config without `stages:`

    def resolved_log_path(self, slurm_job_id: str) -> Path:
        """The log file SLURM writes for this job, given its id (``"123"`` or ``"123_4"``)."""
        from oellm_autoexp.slurm.log_pattern import fill_log_pattern

        if self.array is not None and "_" not in slurm_job_id:
            slurm_job_id = f"{slurm_job_id}_{self.array.task_index}"
        return Path(
            fill_log_pattern(
                self.log_path, slurm_job_id, self.array.array_name if self.array else self.name
            )
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as strings, tuples as lists; `stage` only when set)."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "index": self.index,
            "params": dict(self.params),
            **self.launch_dict(),
        }

    def launch_dict(self) -> dict[str, Any]:
        """`to_dict` after its first four keys (those of a sweep.json entry): how it runs."""
        data = {
            "command": list(self.command),
            "env": dict(self.env),
            "output_dir": str(self.output_dir),
            "log_path": self.log_path,
            "script": str(self.script),
            "sbatch": dict(self.sbatch),
            "array": None
            if self.array is None
            else {"array_name": self.array.array_name, "task_index": self.array.task_index},
        }
        if self.stage is not None:
            data["stage"] = self.stage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobPlan:
        """Inverse of `to_dict`."""
        array = data.get("array")
        stage = data.get("stage")
        return cls(
            job_id=str(data["job_id"]),
            name=str(data["name"]),
            index=int(data["index"]),
            params=dict(data["params"]),
            command=tuple(str(a) for a in data["command"]),
            env={str(k): str(v) for k, v in data["env"].items()},
            output_dir=Path(data["output_dir"]),
            log_path=str(data["log_path"]),
            script=Path(data["script"]),
            sbatch={str(k): str(v) for k, v in data["sbatch"].items()},
            array=None
            if array is None
            else ArrayTask(str(array["array_name"]), int(array["task_index"])),
            stage=None if stage is None else StageLink.from_dict(stage),
        )


@dataclass(frozen=True)
class ScriptPlan:
    """One SBATCH script = one `sbatch` call: a job array or a single job."""

    path: Path
    job_name: str  # `#SBATCH --job-name` in the script
    job_ids: tuple[str, ...]  # JobPlan.job_id in task order (task i runs job_ids[i])
    array_spec: str | None  # e.g. "0-999%8"; None for a single-job script

    def sbatch_argv(self, submit_cmd: str = "sbatch") -> list[str]:
        """The exact command that submits this script (``--parsable`` prints the job id)."""
        return [*shlex.split(submit_cmd), "--parsable", str(self.path)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": str(self.path),
            "job_name": self.job_name,
            "job_ids": list(self.job_ids),
            "array_spec": self.array_spec,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptPlan:
        """Inverse of `to_dict`."""
        spec = data.get("array_spec")
        return cls(
            path=Path(data["path"]),
            job_name=str(data["job_name"]),
            job_ids=tuple(str(j) for j in data["job_ids"]),
            array_spec=None if spec is None else str(spec),
        )


@dataclass(frozen=True)
class Plan:
    """Everything `plan` decided: jobs, scripts, where the artifacts are."""

    project: str
    output_root: Path
    plan_dir: Path  # <output_root>/plans/<plan_id>: config.yaml, sweep.json, plan.json, scripts/
    plan_id: str
    submit_cmd: str
    jobs: tuple[JobPlan, ...]
    scripts: tuple[ScriptPlan, ...]
    warnings: tuple[str, ...] = field(default=())
    # What validated the backend arguments (e.g. Megatron's parser and commit, or a schema file).
    validation: Mapping[str, Any] = field(default_factory=dict)

    def job(self, job_id: str) -> JobPlan:
        """The job with that id (KeyError if none)."""
        for job in self.jobs:
            if job.job_id == job_id:
                return job
        raise KeyError(job_id)

    def sbatch_commands(self) -> list[list[str]]:
        """The exact argv of every `sbatch` call the submission would make, in order."""
        return [script.sbatch_argv(self.submit_cmd) for script in self.scripts]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `plan.json` holds)."""
        return {
            "project": self.project,
            "output_root": str(self.output_root),
            "plan_dir": str(self.plan_dir),
            "plan_id": self.plan_id,
            "submit_cmd": self.submit_cmd,
            "jobs": [job.to_dict() for job in self.jobs],
            "scripts": [script.to_dict() for script in self.scripts],
            "warnings": list(self.warnings),
            "validation": dict(self.validation),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """Inverse of `to_dict` (how session files and `plan.json` are read back)."""
        return cls(
            project=str(data["project"]),
            output_root=Path(data["output_root"]),
            plan_dir=Path(data["plan_dir"]),
            plan_id=str(data["plan_id"]),
            submit_cmd=str(data["submit_cmd"]),
            jobs=tuple(JobPlan.from_dict(j) for j in data["jobs"]),
            scripts=tuple(ScriptPlan.from_dict(s) for s in data["scripts"]),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
            validation=dict(data.get("validation") or {}),
        )

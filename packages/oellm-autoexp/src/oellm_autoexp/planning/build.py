"""The pure build: config -> job contexts -> JobPlans (through the backend registry) -> scripts.

`plan_stream` decides every job, script, path and command, one script at a time (reading only
the template): a `PlanStream` yields `ScriptChunk`s, so a million-job sweep is never held in
memory at once. `build_plan` collects the whole stream into a `PlanResult` (the library's
in-memory plan); `planning.write` writes either form.

Jobs share an array script when they have the same stage and directives. A script is finished
(rendered and yielded) when its array is full and the next job of its group arrives, or when
the sweep ends; scripts are numbered in the order they finish, which is the sweep's order
unless per-job directives interleave groups.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from oellm_autoexp.backends.base import (
    BackendConfig,
    BackendInterface,
    JobContext,
    LaunchCommand,
    instantiate_backend,
)
from oellm_autoexp.backends.per_job import per_job_backends
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.plan import ArrayTask, JobPlan, Plan, ScriptPlan, StageLink
from oellm_autoexp.planning.contexts import JobContexts, Planned
from oellm_autoexp.planning.preflight import (
    SBATCH_PREFIX,
    check_inside,
    check_monitoring,
    check_slurm_settings,
    with_triage_templates,
)
from oellm_autoexp.slurm.distributed import check_one_world
from oellm_autoexp.slurm.render import (
    Renderer,
    ScriptSpec,
    TaskSpec,
    check_extra_directives,
    directive_lines,
)
from oellm_autoexp.sweep.ids import canonical_json, check_name, hex_digest
from oellm_autoexp.sweep.stages import StageJob

PLAN_FORMAT = 1
# Jobs handed to the backend's `validate` (and the per-job checks) at a time.
BATCH = 1000


class JobRow(NamedTuple):
    """What differs between the jobs of one script: a `JobPlan` without the script's shared
    fields (`ScriptChunk` holds those). A tuple, ~5x cheaper to build than a `JobPlan`, for
    plans of a million jobs."""

    job_id: str
    name: str
    sweep_index: int  # `JobPlan.index` (a tuple's `index` is its method)
    params: Mapping[str, Any]
    command: tuple[str, ...]
    env: Mapping[str, str]
    output_dir: str
    stage: StageLink | None


@dataclass(frozen=True)
class ScriptChunk:
    """One rendered script and the jobs it runs (row i is array task i)."""

    script: ScriptPlan
    text: str
    log_path: str  # the jobs' log pattern, shared by the script
    sbatch: Mapping[str, str]  # the script's directives (without array/job-name/output)
    rows: tuple[JobRow, ...]

    def jobs(self, limit: int | None = None) -> tuple[JobPlan, ...]:
        """The rows as `JobPlan`s (the first `limit` of them when given)."""
        script = self.script
        array = script.array_spec is not None
        return tuple(
            JobPlan(
                job_id=row.job_id,
                name=row.name,
                index=row.sweep_index,
                params=row.params,
                command=row.command,
                env=row.env,
                output_dir=Path(row.output_dir),
                log_path=self.log_path,
                script=script.path,
                sbatch=self.sbatch,
                array=ArrayTask(script.job_name, task_index) if array else None,
                stage=row.stage,
            )
            for task_index, row in enumerate(self.rows[:limit])
        )

    @classmethod
    def of_jobs(cls, script: ScriptPlan, text: str, jobs: Sequence[JobPlan]) -> ScriptChunk:
        """The chunk of `script` for `jobs` (its tasks in order, as `build_plan` keeps them)."""
        first = jobs[0] if jobs else None
        return cls(
            script,
            text,
            first.log_path if first else "",
            first.sbatch if first else {},
            tuple(
                JobRow(
                    job.job_id,
                    job.name,
                    job.index,
                    job.params,
                    job.command,
                    job.env,
                    str(job.output_dir),
                    job.stage,
                )
                for job in jobs
            ),
        )


@dataclass(frozen=True)
class PlanResult:
    """A plan plus everything `write_plan` writes."""

    plan: Plan
    scripts: Mapping[Path, str]  # rendered text by path
    sweep: list[dict[str, Any]]  # the sweep.json entries
    config: dict[str, Any]  # dump_config of the RootConfig
    store_sweep_json: bool = True
    # Backend files kept in the plan directory (e.g. the Megatron argument schema), by name.
    artifacts: Mapping[str, str] = field(default_factory=dict)
    combinations: int = 0  # sweep combinations before `sweep.filter` (jobs = those kept)


def output_root(config: RootConfig, *, cwd: Path | None = None) -> Path:
    """`project.base_output_dir` as an absolute, normalised path."""
    base = Path(config.project.base_output_dir).expanduser()
    if not base.is_absolute():
        base = (cwd or Path.cwd()) / base
    return Path(os.path.normpath(base))


class PlanStream:
    """A plan decided script by script: the header now, `chunks()` once, the totals after."""

    def __init__(self, config: RootConfig, *, cwd: Path | None = None) -> None:
        from oellm_autoexp.config.loader import dump_config

        check_name(config.project.name, key="project.name", what="project name")
        self.config = config
        self.project = config.project.name
        self.root = output_root(config, cwd=cwd)
        self.dumped = with_triage_templates(dump_config(config), cwd or Path.cwd())
        self.plan_id = hex_digest(
            canonical_json(
                {"format": PLAN_FORMAT, "root": str(self.root), "config": self.dumped}
            ).encode(),
            6,
        )
        self.plan_dir = self.root / "plans" / self.plan_id
        self.submit_cmd = config.slurm.submit_cmd
        self.store_sweep_json = config.sweep.store_sweep_json
        check_slurm_settings(config)
        self._backend_config: BackendConfig = config.backend
        self._contexts = JobContexts(config, self.root, self.dumped)
        # Made with the first batch, after the jobs' own checks (the order errors appear in).
        self._backend: BackendInterface | None = None
        self._renderer: Renderer | None = None
        self._base_directives: tuple[str, ...] = ()
        self._chunk_no = 0
        self.jobs = 0  # jobs yielded so far (all of them once `chunks()` is exhausted)

    @property
    def combinations(self) -> int:
        """Sweep combinations before `sweep.filter` (complete once `chunks()` is exhausted)."""
        return self._contexts.combinations

    @property
    def backend(self) -> BackendInterface:
        """The config's backend (instantiated with the first batch of jobs)."""
        if self._backend is None:
            check_monitoring(self.config)
            self._backend = instantiate_backend(self._backend_config)
        return self._backend

    @property
    def artifacts(self) -> Mapping[str, str]:
        """The backend's files for the plan directory (see `BackendInterface.plan_artifacts`)."""
        return self.backend.plan_artifacts()

    def validation(self) -> Mapping[str, Any]:
        """What validated the backend arguments (complete once `chunks()` is exhausted)."""
        return self.backend.validation_record()

    def chunks(self) -> Iterator[ScriptChunk]:
        """Every script with its jobs; array scripts in the order they fill up."""
        open_groups: dict[tuple[str | None, tuple[str, ...]], list[_Job]] = {}
        members: dict[tuple[str | None, tuple[str, ...]], int] = {}
        size = self.config.slurm.max_array_size
        for batch in _batches(iter(self._contexts), BATCH):
            for job in self._prepare(batch):
                if not self.config.slurm.array:
                    yield self._chunk([job], as_array=False)
                    continue
                key = (job.stage.stage if job.stage else None, job.directives)
                group = open_groups.setdefault(key, [])
                members[key] = members.get(key, 0) + 1
                if len(group) == size:  # a later job of the group: this array is complete
                    yield self._chunk(group, as_array=True)
                    group = open_groups[key] = []
                group.append(job)
        for key, group in open_groups.items():
            yield self._chunk(group, as_array=members[key] > 1)

    def _prepare(self, batch: list[Planned]) -> list[_Job]:
        """The batch's contexts checked by the backend, with their directives and launches."""
        slurm = self.config.slurm
        contexts = [ctx for ctx, _stage in batch]  # with world sizes (`JobContexts`)
        self.backend.validate(contexts)
        backends = per_job_backends(self._backend_config, self.backend, contexts)
        if self._renderer is None:
            self._base_directives = tuple(
                directive_lines(slurm.sbatch) + check_extra_directives(slurm.extra_directives)
            )
        directives = [self._job_directives(ctx) for ctx in contexts]
        launches = [backends[i].build_launch(ctx) for i, ctx in enumerate(contexts)]
        check_one_world(slurm, contexts, launches)
        if self._renderer is None:
            self._renderer = Renderer(slurm, plan_id=self.plan_id)
        return [
            _Job(ctx, launch, job_directives, stage)
            for ctx, launch, job_directives, (_ctx, stage) in zip(
                contexts, launches, directives, batch, strict=True
            )
        ]

    def _job_directives(self, ctx: JobContext) -> tuple[str, ...]:
        overrides = {
            k[len(SBATCH_PREFIX) :]: v for k, v in ctx.params.items() if k.startswith(SBATCH_PREFIX)
        }
        if not overrides:
            return self._base_directives
        slurm = self.config.slurm
        merged = {**slurm.sbatch, **overrides}
        return tuple(
            directive_lines(merged, key="slurm.sbatch")
            + check_extra_directives(slurm.extra_directives)
        )

    def _chunk(self, jobs: Sequence[_Job], *, as_array: bool) -> ScriptChunk:
        """Render one script for `jobs` (same stage and directives) and build their JobPlans."""
        first = jobs[0]
        log_dir = self.root / "logs"
        if as_array:
            stage = first.stage.stage if first.stage else None
            prefix = f"{self.project}_{stage}" if stage else self.project
            script_name = f"{prefix}_a{self._chunk_no}"
            self._chunk_no += 1
            spec: str | None = f"0-{len(jobs) - 1}"
            throttle = self.config.slurm.array_throttle
            if throttle:
                spec = f"{spec}%{throttle}"
            log_path = str(log_dir / f"{script_name}_%A_%a.out")
        else:
            script_name = first.context.name
            spec = None
            log_path = str(log_dir / f"{script_name}_%j.out")
        path = self.plan_dir / "scripts" / f"{script_name}.sbatch"
        for checked in (path, Path(log_path)):
            check_inside(checked, self.root)
        sbatch = dict(_split_directive(d) for d in first.directives)
        tasks = []
        rows = []
        for task_index, job in enumerate(jobs):
            ctx, launch = job.context, job.launch
            output_dir = ctx.output_dir_text
            tasks.append(
                TaskSpec(task_index, ctx.job_id, ctx.name, output_dir, launch.env, launch.argv)
            )
            rows.append(
                JobRow(
                    ctx.job_id,
                    ctx.name,
                    ctx.index,
                    ctx.params,
                    launch.argv,
                    launch.env,
                    output_dir,
                    None if job.stage is None else _stage_link(job.stage),
                )
            )
        assert self._renderer is not None  # made with the first batch
        text = self._renderer.render(
            ScriptSpec(script_name, log_path, spec, first.directives, tasks)
        )
        script = ScriptPlan(path, script_name, tuple(job.context.job_id for job in jobs), spec)
        self.jobs += len(rows)
        return ScriptChunk(script, text, log_path, sbatch, tuple(rows))

    def header(self, jobs: Sequence[JobPlan], scripts: Sequence[ScriptPlan]) -> Plan:
        """The `Plan` of this stream with `jobs` and `scripts` (all, or what a caller kept)."""
        return Plan(
            project=self.project,
            output_root=self.root,
            plan_dir=self.plan_dir,
            plan_id=self.plan_id,
            submit_cmd=self.submit_cmd,
            jobs=tuple(jobs),
            scripts=tuple(scripts),
            validation=self.validation(),
        )


class _Job(NamedTuple):  # one per job: a tuple is built ~3x faster than a frozen dataclass
    context: JobContext
    launch: LaunchCommand
    directives: tuple[str, ...]
    stage: StageJob | None


def plan_stream(config: RootConfig, *, cwd: Path | None = None) -> PlanStream:
    """The plan of `config`, decided one script at a time (see `PlanStream`)."""
    return PlanStream(config, cwd=cwd)


def build_plan(config: RootConfig, *, cwd: Path | None = None) -> PlanResult:
    """Decide every job and script of `config` and keep them all (nothing is written)."""
    stream = plan_stream(config, cwd=cwd)
    jobs: list[JobPlan] = []
    scripts: list[ScriptPlan] = []
    texts: dict[Path, str] = {}
    for chunk in stream.chunks():
        jobs.extend(chunk.jobs())
        scripts.append(chunk.script)
        texts[chunk.script.path] = chunk.text
    jobs.sort(key=lambda job: job.index)  # interleaved groups finish out of order
    return PlanResult(
        plan=stream.header(jobs, scripts),
        scripts=texts,
        sweep=[sweep_entry(job) for job in jobs],
        config=stream.dumped,
        store_sweep_json=stream.store_sweep_json,
        artifacts=stream.artifacts,
        combinations=stream.combinations,
    )


def sweep_entry(job: JobPlan) -> dict[str, Any]:
    """A job's entry in sweep.json."""
    return {"job_id": job.job_id, "name": job.name, "index": job.index, "params": job.params}


def _batches(items: Iterator[Planned], size: int) -> Iterator[list[Planned]]:
    batch: list[Planned] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _stage_link(job: StageJob) -> StageLink:
    return StageLink(
        job.stage, job.after, job.start, job.start_file, job.checkpoint, job.cancel_file
    )


def _split_directive(directive: str) -> tuple[str, str]:
    name, _, value = directive.lstrip("-").partition("=")
    return name, value

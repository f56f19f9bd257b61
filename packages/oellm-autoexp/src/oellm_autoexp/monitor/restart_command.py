"""The backend's say in a restart: a new script when the backend changes the job's command.

When the monitor decides to restart a job, the session's backend is asked for
`BackendInterface.restart_overrides` (e.g. Megatron: ``--load <save dir>`` once a checkpoint
exists). If it changes any param, the job's launch command is rebuilt through the backend (and
checked as at plan time) and a one-job script is rendered with the plan's template, directives
and log pattern into ``<plan_dir>/scripts/restarts/``; the restart submits that script. The
plan's own scripts are never modified, and no restart script is ever overwritten.

Sessions without a plan (made by hand, or by the standalone monitor) keep their script.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oellm_autoexp.atomic import write_text_atomic
from oellm_autoexp.errors import AutoexpError
from oellm_autoexp.persistence.session import JobRecord, Session

if TYPE_CHECKING:
    from oellm_autoexp.backends.base import JobContext
    from oellm_autoexp.config.schema import RootConfig
    from oellm_autoexp.plan import JobPlan

log = logging.getLogger("oellm_autoexp.monitor")


@dataclasses.dataclass(frozen=True)
class RestartScript:
    """A rewritten script and the params the backend changed for it."""

    path: Path
    overrides: Mapping[str, Any]


class RestartScripts:
    """Builds restart scripts for the jobs of one session (config parsed on first use)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        plan = session.plan
        self._plan_jobs = {job.job_id: job for job in plan.jobs} if plan is not None else {}
        self._root: RootConfig | None = None

    def rewrite(self, job: JobRecord, metadata: Mapping[str, Any]) -> RestartScript | None:
        """A new script for `job`'s next attempt, or None when the backend changes nothing.

        Raises `AutoexpError` (a `ConfigError`) when the backend asked for a change and the
        changed command is invalid: restarting unchanged could start over from scratch.
        """
        planned = self._plan_jobs.get(job.key)
        if planned is None or not self.session.config:
            return None
        from oellm_autoexp.backends.base import JobContext
        from oellm_autoexp.backends.per_job import backend_for_job

        ctx = JobContext(
            job_id=job.key,
            name=job.name,
            index=planned.index,
            params=dict(planned.params),
            output_dir=Path(job.output_dir),
            project=self.session.project,
        )
        try:
            root = self._config()
            backend = backend_for_job(root.backend, ctx)
        except AutoexpError as exc:
            # No backend here (e.g. a plugin installed only where the plan was made): the hook
            # cannot run, and the job restarts as planned, as it would without a hook.
            log.warning("job %s: backend unavailable for the restart hook (%s)", job.name, exc)
            return None
        overrides = dict(backend.restart_overrides(ctx, metadata))
        if not overrides:
            return None
        changed = ctx.replace(params={**ctx.params, **overrides})
        launch = backend.build_launch(changed)
        text = self._render(root, job, planned, changed, launch.argv, launch.env)
        path = self._new_path(job)
        write_text_atomic(path, text, overwrite=True, mode=0o600)
        return RestartScript(path, overrides)

    def _config(self) -> RootConfig:
        """The session's config, its backend set up from the plan's own files (`restart_config`)."""
        if self._root is None:
            from oellm_autoexp.backends.base import instantiate_backend
            from oellm_autoexp.config.loader import parse_config

            source = "the session's config"
            planned = parse_config(self.session.config, source=source)
            plan = self.session.plan
            backend = dict(self.session.config.get("backend") or {})
            if plan is not None:
                backend = instantiate_backend(planned.backend).restart_config(
                    backend, plan.plan_dir
                )
            self._root = parse_config({**self.session.config, "backend": backend}, source=source)
        return self._root

    def _render(
        self,
        root: RootConfig,
        job: JobRecord,
        planned: JobPlan,
        ctx: JobContext,
        argv: tuple[str, ...],
        env: Mapping[str, str],
    ) -> str:
        from oellm_autoexp.slurm.render import Renderer, ScriptSpec, TaskSpec

        # The plan keeps the script's directives as name -> value ("" for a bare flag); a short
        # option ("-p gpu") is kept whole as its name.
        directives = [
            f"--{name}={value}"
            if value
            else (f"-{name}" if name[1:2] in ("", " ") else f"--{name}")
            for name, value in planned.sbatch.items()
        ]
        index = job.array_index if job.array_index is not None else 0
        task = TaskSpec(index, ctx.job_id, ctx.name, str(ctx.output_dir), env, argv)
        spec = ScriptSpec(
            job_name=job.slurm_name,
            log_path=job.log_path,
            array_spec=None if job.array_index is None else str(job.array_index),
            directives=directives,
            tasks=[task],
        )
        plan = self.session.plan
        plan_id = plan.plan_id if plan is not None else ""
        return Renderer(root.slurm, plan_id=plan_id).render(spec)

    def _new_path(self, job: JobRecord) -> Path:
        assert self.session.plan is not None  # a job with a planned entry has a plan
        folder = self.session.plan.plan_dir / "scripts" / "restarts"
        attempt = len(job.attempts)
        path = folder / f"{job.name}.restart{attempt}.sbatch"
        suffix = 0
        while path.exists():  # a resumed monitor re-deciding: never overwrite a script
            suffix += 1
            path = folder / f"{job.name}.restart{attempt}-{suffix}.sbatch"
        return path

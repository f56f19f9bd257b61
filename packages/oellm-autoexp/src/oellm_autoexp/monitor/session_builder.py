"""Turn a written plan into a monitoring session, and run submission + monitoring.

`submit_plan` is what `oellm-autoexp submit` (without --dry-run) calls: it creates the session
file, takes its lock, submits every script through the controller (intent recorded before each
sbatch) and, unless told not to, monitors until every job is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from oellm_autoexp.monitor.controller import MonitorController
from oellm_autoexp.monitor.core import PollReport
from oellm_autoexp.persistence.session import JobRecord, Session, StageState, new_session_id
from oellm_autoexp.persistence.store import STATE_DIR_NAME, SessionStore
from oellm_autoexp.plan import Plan
from oellm_autoexp.reporting import Action
from oellm_autoexp.slurm.client import SlurmClient


def state_dir_for(config: Mapping[str, Any], output_root: Path) -> Path:
    """`project.state_dir` when set, else ``<output_root>/monitoring_state``."""
    project = config.get("project") or {}
    custom = project.get("state_dir") if isinstance(project, Mapping) else None
    return Path(custom) if custom else output_root / STATE_DIR_NAME


def store_for(config: Mapping[str, Any], output_root: Path) -> SessionStore:
    """The session store of `config`; the default one below the output root is created without
    following planted symlinks (a custom `project.state_dir` is the user's own choice)."""
    state_dir = state_dir_for(config, output_root)
    inside = state_dir == output_root / STATE_DIR_NAME
    return SessionStore(state_dir, root=output_root if inside else None)


def _output_paths(templates: list[str], fields: Mapping[str, Any]) -> list[str]:
    return [str(template).format(**fields) for template in templates]


def session_from_plan(
    plan: Plan,
    config: Mapping[str, Any],
    *,
    only: Collection[int] | None = None,
    depends_on: Mapping[str, str] | None = None,
) -> Session:
    """A new session for `plan`; `config` is the dumped resolved config (kept in full).

    `only`: the plan's job indices to include (`submit --array-subset`; default all).
    `depends_on`: job key -> SLURM id its first submission waits for (`submit --chain`).
    """
    monitoring = config.get("monitoring") or {"class_name": "LogMonitor"}
    templates = list(monitoring.get("output_paths") or [])
    session = Session(
        session_id=new_session_id(),
        project=plan.project,
        base_output_dir=str(plan.output_root),
        config=dict(config),
        monitoring={
            "monitor": dict(monitoring),
            "restart_policies": list(config.get("restart_policies") or []),
        },
        plan=plan,
    )
    scripts = {script.path: script for script in plan.scripts}
    for job in plan.jobs:
        if only is not None and job.index not in only:
            continue
        script = scripts[job.script]
        fields = {
            "output_dir": str(job.output_dir),
            "name": job.name,
            "job_id": job.job_id,
            "index": job.index,
            "project": plan.project,
        }
        session.jobs[job.job_id] = JobRecord(
            key=job.job_id,
            name=job.name,
            script=str(job.script),
            slurm_name=script.job_name,
            log_path=job.log_path,
            output_dir=str(job.output_dir),
            array_index=job.array.task_index if job.array is not None else None,
            output_paths=_output_paths(templates, fields),
            time_limit=job.sbatch.get("time"),
            depends_on=(depends_on or {}).get(job.job_id),
        )
        if job.stage is not None:
            link = job.stage
            session.jobs[job.job_id].stage = StageState(
                link.stage, link.after, link.start, link.start_file, link.cancel_file
            )
    return session


def submit_plan(
    plan: Plan,
    config: Mapping[str, Any],
    client: SlurmClient,
    *,
    store: SessionStore | None = None,
    monitor: bool = True,
    sleep: Callable[[float], None] | None = None,
    after_poll: Callable[[Action], None] | None = None,
    only: Collection[int] | None = None,
    depends_on: Mapping[str, str] | None = None,
) -> Session:
    """Create the session, submit every script and (by default) monitor to the end.

    `after_poll`, when given, receives every action (event) each poll produced; `only` and
    `depends_on` as in `session_from_plan`.
    """
    store = store or store_for(config, plan.output_root)
    session = session_from_plan(plan, config, only=only, depends_on=depends_on)
    store.create(session)
    with store.lock(session.session_id):
        controller = MonitorController(client, store, [session])

        def hand_over(_report: PollReport) -> None:
            for action in controller.drain_actions():
                if after_poll is not None:
                    after_poll(action)

        hand_over(controller.poll_once())  # submits everything (intent saved before each sbatch)
        if monitor and controller.active:
            if sleep is None:
                controller.run(after_poll=hand_over)
            else:
                controller.run(sleep=sleep, after_poll=hand_over)
    return session

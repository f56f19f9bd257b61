"""CLI commands of the execution half: `monitor`, `status`, `cleanup` (registered by cli.py).

`submit` (owned by cli.py) calls `run_submit` for a real submission. Every command resolves the
session directory from `--state-dir`, or from CONFIG's project (``<base_output_dir>/
monitoring_state``), or from the current directory's ``monitoring_state``. Library errors are
raised as `AutoexpError` and turned into one line + exit code by `cli.main`.
"""

from __future__ import annotations

import logging
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from oellm_autoexp.errors import EXIT_OK, EXIT_RUN_FAILED, AutoexpUsageError

if TYPE_CHECKING:
    from oellm_autoexp.persistence import Session, SessionStore
    from oellm_autoexp.plan import Plan

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The monitoring_state directory (default: from CONFIG, else ./monitoring_state).",
)


def _setup_logging(verbose: bool) -> None:
    # The event log (transitions, signals, decisions, restarts) is INFO on oellm_autoexp.monitor.
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    logging.getLogger("oellm_autoexp.monitor").setLevel(logging.INFO)


def _store(state_dir: Path | None, config: str | None, overrides: Sequence[str]) -> SessionStore:
    from oellm_autoexp.persistence import SessionStore

    if state_dir is not None:
        return SessionStore(state_dir)
    if config is not None:
        from oellm_autoexp.config.loader import dump_config, load_config
        from oellm_autoexp.monitor.session_builder import state_dir_for
        from oellm_autoexp.orchestrator import output_root

        root = load_config(config, overrides).root
        return SessionStore(state_dir_for(dump_config(root), output_root(root)))
    return SessionStore(Path.cwd() / "monitoring_state")


def _client() -> Any:
    from oellm_autoexp.slurm.real import RealSlurmClient

    return RealSlurmClient()


def run_submit(plan: Plan, config: dict[str, Any], *, monitor: bool) -> int:
    """Submit a written plan for real (what `submit` without --dry-run does); exit code."""
    from oellm_autoexp.monitor.session_builder import submit_plan

    _setup_logging(verbose=True)
    session = submit_plan(plan, config, _client(), monitor=monitor)
    click.echo(f"session {session.session_id}: {len(session.jobs)} job(s) submitted")
    if not monitor:
        click.echo(f"monitor with: oellm-autoexp monitor --monitor-session {session.session_id}")
        return EXIT_OK
    return _exit_code([session])


def _exit_code(sessions: Sequence[Session]) -> int:
    failed = [j for s in sessions for j in s.jobs.values() if j.state == "failed"]
    return EXIT_RUN_FAILED if failed else EXIT_OK


@click.command("monitor")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option("--monitor-session", "session_id", default=None, help="Monitor this session id.")
@click.option("--monitor-all", is_flag=True, help="Monitor every active session.")
@_state_dir_option
@click.option("--once", is_flag=True, help="Poll once and exit (for cron-style use).")
@click.option("--quiet", is_flag=True, help="Only warnings (the event log is INFO).")
def monitor_command(
    config: str | None,
    overrides: tuple[str, ...],
    session_id: str | None,
    monitor_all: bool,
    state_dir: Path | None,
    once: bool,
    quiet: bool,
) -> int:
    """Drive submitted sessions to the end: poll, classify, restart by policy, resume-safe.

    With CONFIG and neither option: the active sessions of that config's project.
    """
    from contextlib import ExitStack

    from oellm_autoexp.monitor import MonitorController
    from oellm_autoexp.persistence import SessionLockedError

    if session_id and monitor_all:
        raise AutoexpUsageError("use either --monitor-session or --monitor-all, not both")
    if not session_id and not monitor_all and config is None:
        raise AutoexpUsageError("give --monitor-session ID, --monitor-all, or a CONFIG")
    _setup_logging(verbose=not quiet)
    store = _store(state_dir, config, overrides)
    ids = [session_id] if session_id else store.ids()
    with ExitStack() as stack:
        sessions = []
        for sid in ids:
            session = store.load(sid)
            if not session_id and not session.active:
                continue
            try:
                stack.enter_context(store.lock(sid))
            except SessionLockedError as exc:
                if session_id:
                    raise
                click.echo(f"skipping: {exc}", err=True)
                continue
            # Re-read under the lock: the previous holder may have written since.
            sessions.append(store.load(sid))
        if not sessions:
            click.echo(f"no active sessions in {store.state_dir}")
            return EXIT_OK
        controller = MonitorController(_client(), store, sessions)
        if once:
            controller.poll_once()
        else:
            controller.run()
        for action in controller.drain_actions():
            click.echo(f"action {action.action}: job {action.job} ({action.job_id}): {action.line}")
    _print_status(sessions)
    return _exit_code(sessions)


@click.command("status")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option(
    "--job", "job_name", default=None, help="Also ask SLURM (scontrol show job) about this job."
)
@_state_dir_option
def status_command(
    config: str | None,
    overrides: tuple[str, ...],
    session_id: str | None,
    job_name: str | None,
    state_dir: Path | None,
) -> int:
    """Table of every job of every session (as last recorded by a monitor)."""
    store = _store(state_dir, config, overrides)
    ids = [session_id] if session_id else store.ids()
    if not ids:
        click.echo(f"no sessions in {store.state_dir}")
        return EXIT_OK
    sessions = [store.load(sid) for sid in ids]
    _print_status(sessions)
    if job_name is not None:
        _print_job_details(sessions, job_name)
    return EXIT_OK


def _print_job_details(sessions: Sequence[Session], job_name: str) -> None:
    """SLURM's own view of the job's latest attempt (one scontrol call)."""
    jobs = [j for s in sessions for j in s.jobs.values() if job_name in (j.name, j.job_id)]
    if not jobs:
        raise AutoexpUsageError(f"no job named {job_name!r} in the listed sessions")
    job = jobs[-1]
    slurm_id = job.job_id or (job.attempts[-1]["job_id"] if job.attempts else None)
    if slurm_id is None:
        click.echo(f"{job.name}: not submitted yet")
        return
    details = _client().show(str(slurm_id))
    wanted = ("JobId", "JobState", "Reason", "ExitCode", "RunTime", "TimeLimit", "StdOut")
    for key in wanted:
        if key in details:
            click.echo(f"{key}: {details[key]}")


def _print_status(sessions: Sequence[Session]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)
    table = Table(show_edge=False, pad_edge=False)
    for column in ("session", "job", "slurm id", "state", "slurm state", "restarts", "outcome"):
        table.add_column(column, overflow="fold")
    for session in sessions:
        for job in session.jobs.values():
            last_id = job.job_id or (job.attempts[-1]["job_id"] if job.attempts else "-")
            restarts = ",".join(f"{m}={n}" for m, n in sorted(job.restarts.items())) or "0"
            outcome = ""
            if job.outcome:
                outcome = f"{job.outcome.get('mode')}/{job.outcome.get('error_type') or '-'}"
            table.add_row(
                session.session_id,
                job.name,
                str(last_id),
                job.state,
                job.slurm_state or "-",
                restarts,
                outcome,
            )
    console.print(table)


@click.command("cleanup")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option("--session", "session_id", default=None, help="Only this session.")
@_state_dir_option
@click.option("--cancel/--no-cancel", default=True, help="scancel the session's live jobs.")
@click.option("--archive/--no-archive", default=True, help="Pack the job logs into a tar.gz.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def cleanup_command(
    config: str | None,
    overrides: tuple[str, ...],
    session_id: str | None,
    state_dir: Path | None,
    cancel: bool,
    archive: bool,
    yes: bool,
) -> int:
    """Cancel a session's live jobs and archive its logs (asks first unless --yes)."""
    from oellm_autoexp.monitor.controller import resolve_log_path

    store = _store(state_dir, config, overrides)
    ids = [session_id] if session_id else store.ids()
    for sid in ids:
        with store.lock(sid):
            session = store.load(sid)
            live = [j.job_id for j in session.jobs.values() if j.job_id and not j.finished]
            logs: list[Path] = []
            for job in session.jobs.values():
                job_ids = [a["job_id"] for a in job.attempts] + ([job.job_id] if job.job_id else [])
                for jid in job_ids:
                    path = resolve_log_path(job.log_path, str(jid), job.slurm_name)
                    if path.exists():
                        logs.append(path)
            what = []
            if cancel and live:
                what.append(f"cancel {len(live)} job(s)")
            if archive and logs:
                what.append(f"archive {len(logs)} log file(s)")
            if not what:
                click.echo(f"session {sid}: nothing to do")
                continue
            if not yes:
                click.confirm(f"session {sid}: {' and '.join(what)}?", abort=True)
            if cancel and live:
                _client().cancel(live)
                for job in session.jobs.values():
                    if job.job_id in live:
                        job.state, job.next_submit_at = "failed", None
                        job.outcome = {
                            "mode": "crash",
                            "error_type": "cancelled",
                            "decision": "cancelled by cleanup",
                        }
                        job.job_id = None
                session.status = "finished"
                store.save(session)
                click.echo(f"session {sid}: cancelled {', '.join(live)}")
            if archive and logs:
                target = _archive(Path(session.base_output_dir), sid, logs)
                click.echo(f"session {sid}: logs archived to {target}")
    return EXIT_OK


def _archive(base: Path, session_id: str, logs: Sequence[Path]) -> Path:
    """Pack `logs` into a new ``archive/<session>-<UTC time>.tar.gz`` (never overwritten)."""
    folder = base / "archive"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = folder / f"{session_id}-{stamp}.tar.gz"
    suffix = 0
    while target.exists():  # two cleanups in one second: never overwrite an archive
        suffix += 1
        target = folder / f"{session_id}-{stamp}-{suffix}.tar.gz"
    partial = target.with_suffix(".partial")
    with tarfile.open(partial, "x:gz") as tar:
        for path in logs:
            tar.add(path, arcname=path.name)
    partial.rename(target)
    return target


def register_commands(group: click.Group) -> None:
    """Add `monitor`, `status` and `cleanup` to the `oellm-autoexp` group."""
    for command in (monitor_command, status_command, cleanup_command):
        group.add_command(command)

"""CLI commands of the execution half: `monitor`, `status`, `cleanup` (main.py loads them lazily).

`submit` (owned by main.py) calls `run_submit` for a real submission. Every command resolves the
session directory from `--state-dir`, or from CONFIG's project (``<base_output_dir>/
monitoring_state``), or from the current directory's ``monitoring_state``. Library errors are
raised as `AutoexpError` and turned into one line + exit code by `cli.main`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from oellm_autoexp.errors import EXIT_OK, EXIT_RUN_FAILED, AutoexpUsageError, one_line

if TYPE_CHECKING:
    from oellm_autoexp.api import JobStatus
    from oellm_autoexp.monitor.standalone import MonitorFile
    from oellm_autoexp.persistence import Session, SessionStore
    from oellm_autoexp.planning import PlanResult

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The monitoring_state directory (default: from CONFIG, else ./monitoring_state).",
)


# Longer than an error line: an event line may quote a whole log line.
_MAX_LINE = 4000


class _OneLineFormatter(logging.Formatter):
    """Log records as single escaped lines: they quote jobs' logs (`errors.one_line`)."""

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record), limit=_MAX_LINE)


def _setup_logging(verbose: bool) -> None:
    # The event log (transitions, signals, decisions, restarts) is INFO on oellm_autoexp.monitor.
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLineFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    logging.getLogger("oellm_autoexp.monitor").setLevel(
        logging.INFO if verbose else logging.WARNING
    )


def _store(
    state_dir: Path | None,
    config: str | None,
    overrides: Sequence[str],
    *,
    allow_shared_writable: bool = False,
) -> SessionStore:
    """The sessions' store. Its sessions submit with CONFIG's `slurm.submit_cmd`, or without a
    CONFIG with this machine's default (`sbatch`), never with the command their files record:
    execution settings never come from state (`persistence.trust`)."""
    from oellm_autoexp.config.schema import SlurmConfig
    from oellm_autoexp.persistence import SessionStore

    if config is None:
        store = SessionStore(state_dir or Path.cwd() / "monitoring_state")
        store.submit_cmd = SlurmConfig.submit_cmd
    else:
        from oellm_autoexp.api import store_for_config
        from oellm_autoexp.config.loader import dump_config, load_config
        from oellm_autoexp.planning import output_root

        root = load_config(config, overrides).root
        if state_dir is not None:
            store = SessionStore(state_dir)
        else:
            store = store_for_config(dump_config(root), output_root(root))
        store.submit_cmd = root.slurm.submit_cmd
    store.allow_shared_writable = allow_shared_writable
    return store


_allow_shared_option = click.option(
    "--allow-shared-writable",
    is_flag=True,
    help="Act on session files another user owns or others can write (they could change what "
    "the monitor submits; see docs/security.md).",
)


def _client() -> Any:
    from oellm_autoexp.slurm.real import RealSlurmClient

    return RealSlurmClient()


# `status` asks SLURM once, without the monitor's retries: it is a question at the terminal.
STATUS_QUERY_TIMEOUT_S = 15.0


def _status_client() -> Any:
    from oellm_autoexp.slurm.commands import RetryPolicy
    from oellm_autoexp.slurm.real import RealSlurmClient

    return RealSlurmClient(retry=RetryPolicy(attempts=1, timeout_s=STATUS_QUERY_TIMEOUT_S))


class ClickReporter:
    """The library's reporter for the terminal: info on stdout, warnings on stderr."""

    def info(self, message: str) -> None:
        """One line on stdout."""
        click.echo(one_line(message, limit=_MAX_LINE))

    def warning(self, message: str) -> None:
        """One line on stderr."""
        click.echo(one_line(message, limit=_MAX_LINE), err=True)

    def action(self, action: Any) -> None:
        """An `action ...` line per monitor event (its log line escaped: `one_line`)."""
        click.echo(one_line(action.describe(), limit=_MAX_LINE))


def run_submit(
    result: PlanResult,
    *,
    monitor: bool,
    array_subset: str | None = None,
    chain: int = 1,
    local: bool = False,
    if_active: str = "refuse",
) -> int:
    """Submit a written plan for real (what `submit` without --dry-run does); exit code.

    `local`: run the jobs here instead (`LocalClient`), polling at least every second; an
    earlier local session's processes died with its command, so it is never attached to.
    `if_active`: what to do when an earlier session of the plan is active (`api.submit`).
    """
    from oellm_autoexp import api

    _setup_logging(verbose=True)
    sleep = None
    if local:
        import time

        from oellm_autoexp.slurm.local import LocalClient

        client: Any = LocalClient()
        sleep = lambda seconds: time.sleep(min(seconds, 1.0))  # noqa: E731
    else:
        client = _client()
    try:
        submitted = api.submit(
            result,
            client,
            reporter=ClickReporter(),
            monitor=monitor,
            sleep=sleep,
            array_subset=array_subset,
            chain=chain,
            if_active="new" if local else if_active,
        )
    finally:
        if local:  # an interrupted local run leaves no orphans
            client.close()
    session = submitted.session
    if not submitted.complete and not submitted.attached:
        # SLURM did not answer (sbatch timed out and squeue could not tell whether it queued):
        # the intents are on disk and the next monitor resolves them, never submitting twice.
        return EXIT_RUN_FAILED
    if not monitor:
        how = (
            f"--monitor-session {session.session_id}" if not submitted.chained else "--monitor-all"
        )
        click.echo(f"monitor with: oellm-autoexp monitor {how}")
        return EXIT_OK
    return api.exit_code([session, *submitted.chained])


@click.command("monitor")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option("--monitor-session", "session_id", default=None, help="Monitor this session id.")
@click.option("--monitor-all", is_flag=True, help="Monitor every active session.")
@click.option(
    "--job",
    "job_name",
    default=None,
    help="With CONFIG: monitor until this job (name or SLURM id) is finished.",
)
@_state_dir_option
@_allow_shared_option
@click.option("--once", is_flag=True, help="Poll once and exit (for cron-style use).")
@click.option("--quiet", is_flag=True, help="Only warnings (the event log is INFO).")
def monitor_command(
    config: str | None,
    overrides: tuple[str, ...],
    session_id: str | None,
    monitor_all: bool,
    job_name: str | None,
    state_dir: Path | None,
    allow_shared_writable: bool,
    once: bool,
    quiet: bool,
) -> int:
    """Drive submitted sessions to the end: poll, classify, restart by policy, resume-safe.

    CONFIG is an experiment config (its project's active sessions are monitored) or a
    MONITOR.yaml (a top-level `watch:` list): standalone watching and alerting of jobs and
    logs submitted elsewhere, with events dispatched to the configured `actions`.
    """
    if session_id and monitor_all:
        raise AutoexpUsageError("use either --monitor-session or --monitor-all, not both")
    if not session_id and not monitor_all and config is None:
        raise AutoexpUsageError("give --monitor-session ID, --monitor-all, or a CONFIG")
    if job_name is not None and config is None:
        raise AutoexpUsageError("--job needs a CONFIG (the experiment the job belongs to)")
    _setup_logging(verbose=not quiet)
    spec = _monitor_file(config) if config is not None else None
    if spec is not None:
        if overrides or session_id or monitor_all or job_name or state_dir:
            raise AutoexpUsageError(
                f"{config}: a MONITOR.yaml takes no overrides, --monitor-session, --monitor-all, "
                "--job or --state-dir (set state_dir: in the file)"
            )
        return _monitor_standalone(spec, once=once, shared=allow_shared_writable)
    store = _store(state_dir, config, overrides, allow_shared_writable=allow_shared_writable)
    return _monitor_sessions(store, session_id, job_name, once=once)


def _monitor_sessions(
    store: SessionStore, session_id: str | None, job_name: str | None, *, once: bool
) -> int:
    from oellm_autoexp import api

    ids = [session_id] if session_id else None
    run = api.monitor_once if once else api.monitor_until_done
    result = run(store, _client(), session_ids=ids, job=job_name, reporter=ClickReporter())
    if not result.sessions:
        click.echo(f"no active sessions in {store.state_dir}")
        return EXIT_OK
    rows = api.status(store, session_ids=[s.session_id for s in result.sessions])
    if result.focus:
        wanted = {j.name for j in result.focus}
        rows = [row for row in rows if row.name in wanted]
    _print_status(rows)
    _print_exclusions(result.sessions)
    _print_triages(result.sessions)
    return api.exit_code(result)


def _monitor_file(config: str) -> MonitorFile | None:
    """The parsed MONITOR.yaml when CONFIG is one; None for an experiment config.

    A YAML file is a MONITOR.yaml when it has a top-level `watch:` and an experiment config
    when it has one of `EXPERIMENT_KEYS`; anything else is one usage error. A name that is not
    a file is left to the config loader (a config name of the Hydra tree).
    """
    path = Path(config)
    if not path.is_file():
        return None
    from oellm_autoexp.config.yaml_text import read_yaml
    from oellm_autoexp.errors import ConfigError
    from oellm_autoexp.monitor.standalone import is_monitor_file, parse_monitor_file

    data = read_yaml(path)
    if is_monitor_file(data):
        return parse_monitor_file(data, path)
    if isinstance(data, dict) and data.keys() & EXPERIMENT_KEYS:
        return None
    found = ", ".join(sorted(map(str, data))) if isinstance(data, dict) else type(data).__name__
    raise ConfigError(
        "neither a MONITOR.yaml (top-level 'watch:') nor an experiment config (top-level "
        f"'project:' or 'defaults:'); found: {found or 'nothing'}",
        file=path,
    )


# Top-level keys that make a YAML file an experiment config (see `_monitor_file`).
EXPERIMENT_KEYS = frozenset({"project", "defaults", "backend", "sweep", "slurm"})


def _monitor_standalone(spec: MonitorFile, *, once: bool, shared: bool = False) -> int:
    from oellm_autoexp import api
    from oellm_autoexp.monitor.standalone import run_monitor_file

    store, session = run_monitor_file(
        spec, _client(), reporter=ClickReporter(), once=once, allow_shared_writable=shared
    )
    _print_status(api.status(store, session_ids=[session.session_id]))
    return api.exit_code([session])


@click.command("status")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option(
    "--config",
    "config_option",
    default=None,
    help="The experiment config whose sessions to list (same as the CONFIG argument).",
)
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option(
    "--job", "job_name", default=None, help="Also ask SLURM (scontrol show job) about this job."
)
@click.option(
    "--offline",
    is_flag=True,
    help="Show the recorded SLURM states only; do not ask squeue/sacct.",
)
@_state_dir_option
@_allow_shared_option
def status_command(
    config: str | None,
    overrides: tuple[str, ...],
    config_option: str | None,
    session_id: str | None,
    job_name: str | None,
    offline: bool,
    state_dir: Path | None,
    allow_shared_writable: bool,
) -> int:
    """Table of every job of every session, as recorded by the monitor.

    The SLURM state of each job not recorded as ended is asked from SLURM (one squeue, and sacct
    where accounting exists), so a job that ended or was cancelled while no monitor ran shows
    what SLURM says now; --offline shows the records alone.
    """
    if config is not None and config_option is not None:
        raise AutoexpUsageError("give the config once: as CONFIG or as --config")
    config = config or config_option
    spec = _monitor_file(config) if config is not None and state_dir is None else None
    if spec is not None:  # a MONITOR.yaml: the one session it keeps
        from oellm_autoexp.monitor.standalone import store_for

        store = store_for(spec, allow_shared_writable=allow_shared_writable)
        ids = [session_id or spec.session_id]
    else:
        store = _store(state_dir, config, overrides, allow_shared_writable=allow_shared_writable)
        ids = [session_id] if session_id else store.ids()
    if not ids:
        click.echo(f"no sessions in {store.state_dir}")
        return EXIT_OK
    from oellm_autoexp import api
    from oellm_autoexp.provenance import provenance_path

    # A corrupt session file is reported once (stderr) and the healthy ones are shown.
    sessions = (
        [store.load(sid) for sid in ids]
        if session_id
        else store.load_readable(ids, lambda exc: click.echo(f"skipping: {exc}", err=True))
    )
    rows = api.status(
        store,
        session_ids=[s.session_id for s in sessions],
        reporter=ClickReporter(),
        client=None if offline else _status_client(),
    )
    _print_status(rows)
    for session in sessions:  # where each session's plan came from
        record = provenance_path(session.plan.plan_dir) if session.plan else None
        if record is not None:
            click.echo(f"session {session.session_id}: provenance {record}")
    _print_exclusions(sessions)
    _print_triages(sessions)
    if job_name is not None:
        _print_job_details(sessions, job_name)
    return EXIT_OK


def _print_exclusions(sessions: Sequence[Session]) -> None:
    """The nodes each session's submissions avoid after node-level failures (node_health)."""
    for session in sessions:
        if session.excluded_nodes:
            nodes = ",".join(session.excluded_nodes)
            click.echo(f"session {session.session_id}: excluded nodes {nodes}")


def _print_triages(sessions: Sequence[Session]) -> None:
    """The triages that `triage:` log signals started (or could not start), per job."""
    from oellm_autoexp.monitor.triage_launch import describe

    for session in sessions:
        for job in session.jobs.values():
            for event in job.triages:
                click.echo(f"session {session.session_id}: job {job.name}: {describe(event)}")


def _print_job_details(sessions: Sequence[Session], job_name: str) -> None:
    """SLURM's own view of the job's latest attempt (one scontrol call)."""
    from oellm_autoexp.persistence.session import find_jobs

    jobs = find_jobs(sessions, job_name)
    if not jobs:
        raise AutoexpUsageError(f"no job named {job_name!r} in the listed sessions")
    job = jobs[-1]
    slurm_id = job.last_slurm_id
    if slurm_id is None:
        click.echo(f"{job.name}: not submitted yet")
        return
    details = _client().show(slurm_id)
    wanted = ("JobId", "JobState", "Reason", "ExitCode", "RunTime", "TimeLimit", "StdOut")
    for key in wanted:
        if key in details:
            click.echo(f"{key}: {details[key]}")


def _print_status(rows: Sequence[JobStatus]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)
    table = Table(show_edge=False, pad_edge=False)
    staged = any(row.stage for row in rows)
    columns = ("session", "job", *(("stage",) if staged else ()), "slurm id", "state")
    for column in (*columns, "slurm state", "restarts", "outcome"):
        table.add_column(column, overflow="fold")
    for row in rows:
        restarts = ",".join(f"{m}={n}" for m, n in sorted(row.restarts.items())) or "0"
        outcome = f"{row.outcome_mode}/{row.outcome_error_type or '-'}" if row.outcome_mode else ""
        slurm_state = row.slurm_state or "-"
        if row.slurm_state_source == "gone":
            slurm_state = f"gone (last seen {slurm_state})"
        cells = (
            row.session_id,
            row.name,
            *((row.stage or "-",) if staged else ()),
            row.slurm_id or "-",
            row.state,
            slurm_state,
            restarts,
            outcome,
        )
        table.add_row(*(Text(cell) for cell in cells))  # values are data, never Rich markup
    console.print(table)


@click.command("cleanup")
@click.argument("config", required=False)
@click.argument("overrides", nargs=-1)
@click.option("--session", "session_id", default=None, help="Only this session.")
@_state_dir_option
@_allow_shared_option
@click.option("--cancel/--no-cancel", default=True, help="scancel the session's live jobs.")
@click.option("--archive/--no-archive", default=True, help="Pack the job logs into a tar.gz.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def cleanup_command(
    config: str | None,
    overrides: tuple[str, ...],
    session_id: str | None,
    state_dir: Path | None,
    allow_shared_writable: bool,
    cancel: bool,
    archive: bool,
    yes: bool,
) -> int:
    """Cancel a session's live jobs and archive its logs (asks first unless --yes)."""
    from oellm_autoexp.persistence.archive import archive_logs

    store = _store(state_dir, config, overrides, allow_shared_writable=allow_shared_writable)
    ids = [session_id] if session_id else store.ids()
    for sid in ids:
        with store.lock(sid):
            session = store.load(sid)
            live = session.live_job_ids()
            logs = session.log_files()
            what = []
            if cancel and live:
                what.append(f"cancel {len(live)} job(s)")
            if archive and logs:
                what.append(f"archive {len(logs)} log file(s)")
            if not what:
                click.echo(f"session {sid}: nothing to do")
                continue
            if not yes and not _confirm(f"session {sid}: {' and '.join(what)}?"):
                click.echo(f"session {sid}: declined; nothing cancelled or archived")
                continue
            if cancel and live:
                _client().cancel(live)
                session.mark_cancelled(live, "cancelled by cleanup", time.time())
                store.save(session)
                click.echo(f"session {sid}: cancelled {', '.join(live)}")
            if archive and logs:
                target = archive_logs(Path(session.base_output_dir), sid, logs)
                click.echo(f"session {sid}: logs archived to {target}")
    return EXIT_OK


def _confirm(question: str) -> bool:
    """Ask on the terminal; no terminal to answer (stdin closed) is a usage error."""
    try:
        return click.confirm(question, default=False)
    except click.exceptions.Abort:
        raise AutoexpUsageError(
            "cleanup needs a yes/no answer and stdin gave none; pass --yes to skip the question"
        ) from None

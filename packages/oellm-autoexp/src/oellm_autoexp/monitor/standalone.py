"""`oellm-autoexp monitor MONITOR.yaml`: watch jobs and logs with only a monitoring config.

A MONITOR.yaml is told from an experiment config by its top-level ``watch:`` list::

    monitoring:                 # the LogMonitor settings of an experiment config
      termination_str: TRAINING DONE
      inactivity_threshold_seconds: 900
      log_signals: [{name: loss_spike, pattern: "loss [0-9]{3,}"}]
    watch:                      # what to watch: a SLURM job and/or a log
      - {name: gpt-7b, job_id: "4711", log: /runs/gpt/logs/gpt_%j.out}
      - {name: eval, log: /runs/eval/eval.log, output_paths: [/runs/eval/metrics.jsonl]}
    actions:                    # optional: event name -> shell command
      checkpoint_saved: "/opt/tools/convert.sh {job} {line}"
      run_ended: 'echo "$AUTOEXP_JOB ended: $AUTOEXP_LINE" >> /runs/ended.txt'
    state_dir: /runs/monitoring_state   # optional; default: monitoring_state next to the file

Every lifecycle change (``run_pending``, ``run_running``, ``run_stalled``, ``run_completed``,
``run_failed``, and ``run_ended`` with the classified mode when a SLURM job ends), the completion
marker (``completion_marker``: the `termination_str` line) and every signal match (the
pre-registered ``oom``, ``nccl``, ``exception``, ``nan_loss``, ``checkpoint_saved`` and the
configured ones) is an event; an event with an entry under ``actions`` runs that command. The
event's values reach the command only through the environment (``$AUTOEXP_JOB``,
``$AUTOEXP_LINE``, ...; a ``{line}`` placeholder is rewritten into a reference to
``$AUTOEXP_LINE``), never as shell source: see `shell_fields`. Nothing is ever submitted or
restarted: the watched jobs were submitted by someone else. State (log offsets, job states) is
kept in a session file whose id derives from the file's path, so running the same MONITOR.yaml
again resumes without firing the same events twice.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor.shell_fields import (
    ACTION_FIELDS,
    TERMINATION_FIELDS,
    check_command_template,
    run_with_fields,
)
from oellm_autoexp.persistence.intents import (
    ALREADY_CLAIMED_EXIT,
    CLAIM_PREFIX,
    PENDING,
    STARTED,
    Intent,
    Receipts,
)
from oellm_autoexp.persistence.session import JobRecord, Session
from oellm_autoexp.persistence.store import STATE_DIR_NAME, SessionNotFoundError, SessionStore

if TYPE_CHECKING:
    from oellm_autoexp.reporting import Reporter
    from oellm_autoexp.slurm.client import SlurmClient

log = logging.getLogger("oellm_autoexp.monitor")

MONITOR_KEYS = frozenset({"monitoring", "watch", "actions", "state_dir"})
WATCH_KEYS = frozenset({"name", "job_id", "log", "output_paths"})
# An action command that hangs must not hang the monitor.
ACTION_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WatchEntry:
    """One thing to watch: a SLURM job (with its log) or a log alone."""

    name: str
    log: str
    job_id: str | None = None
    output_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class MonitorFile:
    """A parsed MONITOR.yaml."""

    path: Path
    monitoring: dict[str, Any]
    watch: tuple[WatchEntry, ...]
    actions: dict[str, str] = field(default_factory=dict)
    state_dir: Path | None = None

    @property
    def session_id(self) -> str:
        """Stable per file path: the same MONITOR.yaml resumes the same session."""
        digest = hashlib.blake2b(str(self.path.resolve()).encode(), digest_size=4).hexdigest()
        return f"m{digest[:7]}"


def is_monitor_file(data: Any) -> bool:
    """Whether parsed YAML is a MONITOR.yaml (a mapping with a top-level ``watch``)."""
    return isinstance(data, Mapping) and "watch" in data


def parse_monitor_file(data: Mapping[str, Any], path: Path) -> MonitorFile:
    """Validate a MONITOR.yaml; a bad entry is a `ConfigError` naming the file and key path."""
    unknown = sorted(set(data) - MONITOR_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown top-level key(s) {', '.join(unknown)} (a MONITOR.yaml has "
            f"{', '.join(sorted(MONITOR_KEYS))})",
            file=path,
        )
    monitoring = data.get("monitoring") or {}
    if not isinstance(monitoring, Mapping):
        raise ConfigError("expected a mapping of LogMonitor settings", key="monitoring", file=path)
    if "restart_policies" in monitoring:
        raise ConfigError(
            "a MONITOR.yaml never resubmits (it has no scripts); restart policies belong in "
            "an experiment config",
            key="monitoring.restart_policies",
            file=path,
        )
    raw_watch = data.get("watch")
    if not isinstance(raw_watch, list) or not raw_watch:
        raise ConfigError("expected a non-empty list of jobs/logs to watch", key="watch", file=path)
    watch = tuple(_watch_entry(item, f"watch[{i}]", path) for i, item in enumerate(raw_watch))
    names = [entry.name for entry in watch]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise ConfigError(f"name {duplicate!r} is used twice", key="watch", file=path)
    actions = data.get("actions") or {}
    if not isinstance(actions, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in actions.items()
    ):
        raise ConfigError("expected a mapping of event name -> command", key="actions", file=path)
    for name, command in actions.items():
        check_command_template(command, ACTION_FIELDS, key=f"actions.{name}", file=path)
    signals = monitoring.get("log_signals")
    for index, signal in enumerate(signals if isinstance(signals, list) else []):
        if isinstance(signal, Mapping) and signal.get("triage") is not None:
            raise ConfigError(
                "a watched log has no planned command to triage; use triage: in an experiment "
                "config's monitoring",
                key=f"monitoring.log_signals[{index}].triage",
                file=path,
            )
        if isinstance(signal, Mapping) and signal.get("on_match") == "restart":
            raise ConfigError(
                "a watched job has no script to resubmit; use on_match: cancel here, or restart "
                "in an experiment config's monitoring",
                key=f"monitoring.log_signals[{index}].on_match",
                file=path,
            )
    termination_cmd = monitoring.get("termination_cmd")
    if isinstance(termination_cmd, str):
        check_command_template(
            termination_cmd, TERMINATION_FIELDS, key="monitoring.termination_cmd", file=path
        )
    state_dir = data.get("state_dir")
    base = path.parent
    return MonitorFile(
        path=path,
        monitoring={"class_name": "LogMonitor", "emit_events": True, **dict(monitoring)},
        watch=watch,
        actions=dict(actions),
        state_dir=(base / str(state_dir)) if state_dir else None,
    )


def _watch_entry(item: Any, key: str, path: Path) -> WatchEntry:
    if not isinstance(item, Mapping):
        raise ConfigError("expected a mapping with name and log", key=key, file=path)
    # str(): YAML keys may be ints or null, which do not sort with strings.
    unknown = sorted(map(str, set(item) - WATCH_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(WATCH_KEYS))})",
            key=key,
            file=path,
        )
    name, log_path = item.get("name"), item.get("log")
    if not isinstance(name, str) or not name:
        raise ConfigError("expected a non-empty string", key=f"{key}.name", file=path)
    if not isinstance(log_path, str) or not log_path:
        raise ConfigError("expected the path of the job's log", key=f"{key}.log", file=path)
    if Path(log_path).is_dir():
        raise ConfigError(
            f"{log_path!r} is a directory; expected the job's log file", key=f"{key}.log", file=path
        )
    job_id = item.get("job_id")
    if job_id is not None:
        job_id = str(job_id)
        base, _, task = job_id.partition("_")
        if not base.isdigit() or (task and not task.isdigit()) or job_id.count("_") > 1:
            raise ConfigError(
                f"expected a SLURM job id such as 4711 or 4711_3 (array task), got {job_id!r}",
                key=f"{key}.job_id",
                file=path,
            )
    elif "%" in log_path.replace("%%", ""):
        raise ConfigError(
            f"{log_path!r} has SLURM % patterns, which need a job_id to be filled in",
            key=f"{key}.log",
            file=path,
        )
    outputs = item.get("output_paths") or []
    if not isinstance(outputs, list) or not all(isinstance(p, str) for p in outputs):
        raise ConfigError("expected a list of paths", key=f"{key}.output_paths", file=path)
    return WatchEntry(name, log_path, job_id, tuple(outputs))


def _record(entry: WatchEntry) -> JobRecord:
    task = entry.job_id.partition("_")[2] if entry.job_id else ""
    try:
        return JobRecord(
            key=entry.name,
            name=entry.name,
            script="",  # never submitted (see `_log_only` and `_due` in the controller)
            slurm_name=entry.name,
            log_path=entry.log,
            output_dir=str(Path(entry.log).parent),
            array_index=int(task) if task else None,
            output_paths=list(entry.output_paths),
            job_id=entry.job_id,
        )
    except ValueError as exc:  # e.g. %j in an array task's log
        raise ConfigError(str(exc), key="watch") from None


def store_for(spec: MonitorFile, *, allow_shared_writable: bool = False) -> SessionStore:
    """Where this MONITOR.yaml's session lives (`state_dir`, else next to the file)."""
    return SessionStore(
        spec.state_dir or spec.path.parent / STATE_DIR_NAME,
        allow_shared_writable=allow_shared_writable,
    )


def open_session(spec: MonitorFile, store: SessionStore) -> Session:
    """The session of this MONITOR.yaml (call under its lock): resumed if it exists, else new.

    A resumed session keeps the state of entries whose name, job id and log are unchanged;
    entries added to the file start fresh, entries removed from it are dropped.
    """
    fresh = Session(
        session_id=spec.session_id,
        project=spec.path.stem,
        base_output_dir=str(spec.path.parent),
        config={"monitor_file": str(spec.path.resolve())},
        monitoring={"monitor": spec.monitoring, "restart_policies": []},
    )
    try:
        old = store.load(spec.session_id)
    except SessionNotFoundError:
        old = None
    for entry in spec.watch:
        record = _record(entry)
        previous = old.jobs.get(entry.name) if old is not None else None
        if previous is not None and _same_target(previous, record):
            # Only what was observed carries over: this monitor plans nothing, so a `script`
            # in the state file was planted there and is never submitted.
            record = replace(previous, script="")
        fresh.jobs[record.key] = record
    if old is not None:
        fresh.created_at = old.created_at
        fresh.intents = old.intents  # actions recorded, not yet (or not wholly) run
    store.save(fresh)
    return fresh


def _same_target(old: JobRecord, new: JobRecord) -> bool:
    first_id = old.attempts[0].job_id if old.attempts else old.job_id
    return (old.log_path, old.output_paths, first_id) == (
        new.log_path,
        new.output_paths,
        new.job_id,
    )


class ActionDispatcher:
    """Runs the configured command of each recorded intent once (values in the environment),
    logs the outcome (`persistence.intents`: exactly once across crashes)."""

    def __init__(self, commands: Mapping[str, str]) -> None:
        self.commands = dict(commands)
        self.ran = 0

    def run_intents(self, session: Session, store: SessionStore) -> None:
        """Run every pending intent of `session` in order, and settle those a crash cut short.

        Each is marked started (saved) before its command runs and removed (saved) after. The
        command's shell first claims its receipt with O_EXCL (`persistence.intents`), so
        after a crash a started intent with a receipt ran (not repeated) and one without is
        run now, by a shell that runs the command only if the killed monitor's shell did not
        claim it first: none is lost or run twice.
        """
        receipts = Receipts(store.state_dir, session.session_id)
        for intent in session.intents:
            if intent.state != STARTED:
                continue
            if receipts.exists(intent.intent_id):
                log.warning(
                    "action %s for job %s: the monitor stopped while it ran; not repeated",
                    intent.action,
                    intent.job,
                )
            else:
                intent.state = PENDING  # stopped before its command started: run it
        before = len(session.intents)
        session.intents = [
            i for i in session.intents if i.state == PENDING and i.action in self.commands
        ]
        if len(session.intents) != before:
            store.save(session)
        receipts.forget_settled({i.intent_id for i in session.intents})
        while session.intents:
            intent = session.intents[0]
            intent.state = STARTED
            store.save(session)
            self._run(self.commands[intent.action], intent, session.session_id, receipts)
            session.intents.pop(0)
            store.save(session)

    def _run(self, command: str, intent: Intent, session_id: str, receipts: Receipts) -> None:
        fields = {
            "job": intent.job,
            "job_id": intent.job_id or "",
            "event": intent.action,
            "signal": intent.signal,
            "line": intent.line,
            "session": session_id,
            "receipt": receipts.path(intent.intent_id),
        }
        self.ran += 1
        try:
            done = run_with_fields(
                f"{CLAIM_PREFIX}{command}",
                ACTION_FIELDS,
                fields,
                timeout=ACTION_TIMEOUT_S,
            )
        except (ValueError, OSError, subprocess.TimeoutExpired) as exc:
            log.warning("action %s for job %s failed to run: %s", intent.action, intent.job, exc)
            return
        if done.returncode == ALREADY_CLAIMED_EXIT and fields["receipt"] in done.stderr:
            log.warning(
                "action %s for job %s: launched by a monitor that was stopped; not repeated",
                intent.action,
                intent.job,
            )
            return
        level = logging.INFO if done.returncode == 0 else logging.WARNING
        log.log(
            level,
            "action %s for job %s: exit %d%s",
            intent.action,
            intent.job,
            done.returncode,
            f" ({done.stderr.strip()[:200]})" if done.returncode else "",
        )


def run_monitor_file(
    spec: MonitorFile,
    client: SlurmClient,
    *,
    reporter: Reporter,
    once: bool,
    allow_shared_writable: bool = False,
) -> tuple[SessionStore, Session]:
    """Watch what `spec` lists (one poll, or until every entry is finished) under its lock.

    Each poll's events go to `reporter.action` and then to the configured actions.
    """
    from oellm_autoexp.monitor.controller import MonitorController

    store = store_for(spec, allow_shared_writable=allow_shared_writable)
    dispatcher = ActionDispatcher(spec.actions)
    with store.lock(spec.session_id):
        session = open_session(spec, store)
        controller = MonitorController(client, store, [session], journal_actions=True)
        dispatcher.run_intents(session, store)  # what a stopped monitor left pending

        def after_poll(_report: object) -> None:
            for action in controller.drain_actions():
                reporter.action(action)
            dispatcher.run_intents(session, store)

        if once:
            after_poll(controller.poll_once())
        else:
            controller.run(after_poll=after_poll)
    return store, session

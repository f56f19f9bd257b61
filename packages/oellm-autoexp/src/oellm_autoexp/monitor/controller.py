"""The monitor loop: submit, poll, classify, decide, restart, persist.

One `MonitorController` drives any number of sessions with **one** `query` per poll for all of
their jobs. Every state change is written to the session file before the next SLURM call that
depends on it; in particular a submission is recorded as an intent (`submit_token`, also passed
to sbatch as the job comment) before sbatch runs and as a job id after, so a monitor killed at
any point resumes without losing or duplicating a job (`reconcile`).

Every transition, signal, decision and restart is logged at INFO on ``oellm_autoexp.monitor``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oellm_autoexp.errors import AutoexpError
from oellm_autoexp.monitor.classify import (
    Classification,
    classify_end,
    classify_stall,
    signal_classification,
    succeeded,
)
from oellm_autoexp.monitor.log_signals import ON_MATCH_RESTART, SignalHit, read_new_text
from oellm_autoexp.monitor.node_exclusions import (
    add_project_exclusions,
    load_project_exclusions,
    merged_nodes,
    queued_job_ids,
)
from oellm_autoexp.monitor.node_health import (
    decide_exclusions,
    exclude_argument,
    node_level_failure,
)
from oellm_autoexp.monitor.policies import RestartContext, policy_for
from oellm_autoexp.monitor.restart_command import RestartScripts
from oellm_autoexp.monitor.settings import MonitorSettings, load_settings
from oellm_autoexp.monitor.shell_fields import TERMINATION_FIELDS, run_with_fields
from oellm_autoexp.monitor.stages import gate as stage_gate
from oellm_autoexp.monitor.stages import relink as relink_stages
from oellm_autoexp.monitor.stages import stage_dependency
from oellm_autoexp.monitor.states import Mode, MonitorState, monitor_state_of
from oellm_autoexp.monitor.triage_launch import TriageRequest, describe, launch_triage
from oellm_autoexp.monitor.triage_recipe import job_command
from oellm_autoexp.persistence.intents import record_intents
from oellm_autoexp.persistence.session import Attempt, JobRecord, Outcome, Session, TriageEvent
from oellm_autoexp.persistence.store import SessionStore
from oellm_autoexp.slurm.client import (
    JobInfo,
    SlurmClient,
    SlurmCommandError,
    SlurmNotInstalledError,
    SubmissionError,
    SubmitRequest,
)
from oellm_autoexp.slurm.log_pattern import fill_log_pattern

log = logging.getLogger("oellm_autoexp.monitor")

# Log offsets and activity marks alone are saved at most this often (a 10,000-job session is
# ~7 MiB); every state change is saved at once. After a crash, a resumed monitor re-reads at
# most this much log, and the activity clock restarts at resume.
ACTIVITY_SAVE_S = 300.0
# Submission rounds per poll: each round can release the next stage (stage chains are short).
MAX_STAGE_ROUNDS = 16


@dataclass(frozen=True)
class Action:
    """A log signal's `action`, collected for downstream tooling (see `drain_actions`)."""

    action: str
    signal: str
    session_id: str
    job: str
    job_id: str | None
    line: str
    at: float

    def describe(self) -> str:
        """The one-line form users see: ``action <event>: job <name> (<slurm id>): <line>``."""
        return f"action {self.action}: job {self.job} ({self.job_id}): {self.line}"


@dataclass
class PollReport:
    """What one poll did (for the CLI, the event log and the benchmark)."""

    jobs_polled: int = 0
    slurm_calls: int = 0
    submitted: int = 0
    restarts_scheduled: int = 0
    signals: int = 0  # log signal matches found in this poll
    states: dict[str, int] = field(default_factory=dict)
    slurm_error: str | None = None


def resolve_log_path(template: str, job_id: str, slurm_name: str) -> Path:
    """SLURM's filename pattern (%A %a %j %x %%) filled in for `job_id` (``123`` or ``123_4``)."""
    return Path(fill_log_pattern(template, job_id, slurm_name))


def array_spec(indices: Iterable[int]) -> str:
    """Compact SLURM array spec for task indices: [0,1,2,5] -> ``0-2,5``."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


def _submit_cmd(session: Session) -> str:
    """The session's `slurm.submit_cmd` (what the dry run showed), default ``sbatch``."""
    slurm = session.config.get("slurm")
    command = slurm.get("submit_cmd") if isinstance(slurm, dict) else None
    return str(command) if command else "sbatch"


def _array_throttle(session: Session) -> str:
    """``%N`` of the session's `slurm.array_throttle`, else "".

    sbatch's ``--array`` on the command line replaces the script's ``#SBATCH --array``, so the
    throttle has to travel with every (re)submission, not only in the rendered script.
    """
    slurm = session.config.get("slurm")
    limit = slurm.get("array_throttle") if isinstance(slurm, dict) else None
    return f"%{limit}" if isinstance(limit, int) and not isinstance(limit, bool) else ""


@dataclass
class _Runtime:
    session: Session
    settings: MonitorSettings
    dirty: bool = False  # a state changed: save before the next SLURM call
    touched: bool = False  # only log offsets / activity marks moved: save now and then
    saved_at: float = 0.0
    restart_scripts: RestartScripts = field(init=False)

    def __post_init__(self) -> None:
        self.restart_scripts = RestartScripts(self.session)


class MonitorController:
    """Drives sessions to completion against one `SlurmClient`."""

    def __init__(
        self,
        client: SlurmClient,
        store: SessionStore,
        sessions: Sequence[Session],
        *,
        clock: Callable[[], float] = time.time,
        start_triage: Callable[[TriageRequest], TriageEvent] = launch_triage,
        journal_actions: bool = False,
    ) -> None:
        self.client = client
        # Actions are written into the session as intents with the log offset that produced
        # them (`persistence.intents`), for a caller that runs them (the standalone monitor).
        self.journal_actions = journal_actions
        self._journaled = 0  # how many of `_actions` are recorded as intents
        self.store = store
        self.clock = clock
        self.start_triage = start_triage  # the `triage:` action (a test passes a recorder)
        self._runtimes = [_Runtime(s, load_settings(s.monitoring)) for s in sessions]
        self._actions: list[Action] = []
        self._signal_hits = 0
        self._log_paths: dict[str, str] = {}  # SLURM id -> its resolved log path
        self._resubmit_now = False  # an `on_match: restart` scheduled a restart in this poll

    # -- public API -----------------------------------------------------------------------
    @property
    def sessions(self) -> list[Session]:
        """The sessions this controller drives."""
        return [rt.session for rt in self._runtimes]

    @property
    def active(self) -> bool:
        """Whether any job of any session still needs monitoring."""
        return self._any_active()

    def _any_active(self) -> bool:
        return any(rt.session.active for rt in self._runtimes)

    def drain_actions(self) -> list[Action]:
        """Actions collected from log signals since the last call (and forget them)."""
        out, self._actions = self._actions, []
        self._journaled = 0
        return out

    def poll_once(self) -> PollReport:
        """One round: reconcile, submit what is due, one squeue, classify, decide, save."""
        before = sum(self.client.calls.values())
        report = PollReport()
        self._signal_hits = 0
        now = self.clock()
        try:
            self._reconcile(now)
            self._relink_stages(now)
            report.submitted = self._submit_due(now)
            report.restarts_scheduled = self._observe(now, report)
            if self._resubmit_now:  # `on_match: restart`: resubmitted in the poll that cancelled
                self._resubmit_now = False
                report.submitted += self._submit_due(now)
        except SlurmCommandError as exc:
            # No news is not bad news: job states stay as they were, the next poll retries.
            report.slurm_error = str(exc)
            log.warning("SLURM did not answer this poll (%s); job states unchanged", exc)
        finally:
            self._save_dirty()
        report.slurm_calls = sum(self.client.calls.values()) - before
        report.signals = self._signal_hits
        for rt in self._runtimes:
            for job in rt.session.jobs.values():
                report.states[job.state] = report.states.get(job.state, 0) + 1
            if not rt.session.active and rt.session.status != "finished":
                rt.session.status = "finished"
                self.store.save(rt.session)
                log.info("session %s: all jobs finished", rt.session.session_id)
        log.info(
            "poll: %d jobs polled, states %s, %d signals, %d submitted, %d restarts scheduled, "
            "%d SLURM calls",
            report.jobs_polled,
            dict(sorted(report.states.items())),
            report.signals,
            report.submitted,
            report.restarts_scheduled,
            report.slurm_calls,
        )
        return report

    def run(
        self,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_polls: int | None = None,
        after_poll: Callable[[PollReport], None] | None = None,
        until: Callable[[], bool] | None = None,
    ) -> int:
        """Poll until every job finished, `until()` holds, or `max_polls`; the number of polls.

        `after_poll` sees each poll's report (e.g. to dispatch `drain_actions()` at once).
        The interval is the smallest `poll_interval_seconds` of the sessions, shortened when a
        restart is due sooner, and doubled (up to 8x) while SLURM keeps failing to answer.
        """
        polls, failures = 0, 0

        def done() -> bool:
            return not self._any_active() or (until is not None and until())

        while not done() and (max_polls is None or polls < max_polls):
            report = self.poll_once()
            polls += 1
            if after_poll is not None:
                after_poll(report)
            failures = failures + 1 if report.slurm_error else 0
            if done():
                break
            sleep(self._interval(failures))
        return polls

    # -- submission -----------------------------------------------------------------------
    def _interval(self, failures: int) -> float:
        base = float(min(rt.settings.config.poll_interval_seconds for rt in self._runtimes))
        base *= 2 ** min(failures, 3)
        due = [
            job.next_submit_at
            for rt in self._runtimes
            for job in rt.session.jobs.values()
            if job.next_submit_at is not None
        ]
        if due:
            base = min(base, max(min(due) - self.clock(), 0.0) + 0.01)
        return float(max(base, 0.01))

    def _reconcile(self, now: float) -> None:
        """Resolve submissions whose sbatch may or may not have happened (one squeue)."""
        open_tokens = {
            job.submit_token: (rt, job)
            for rt in self._runtimes
            for job in rt.session.jobs.values()
            if job.submit_token is not None and job.job_id is None
        }
        if not open_tokens:
            return
        found = self.client.find_by_comment({t for t in open_tokens if t})
        for rt in self._runtimes:
            for job in rt.session.jobs.values():
                token = job.submit_token
                if token is None or job.job_id is not None:
                    continue
                hits = found.get(token, [])
                base = _base_id(hits)
                if base is not None:
                    job.job_id = base if job.array_index is None else f"{base}_{job.array_index}"
                    job.submitted_at = job.submitted_at or now
                    log.info(
                        "job %s: submission %s found in SLURM as %s (adopted, not resubmitted)",
                        job.name,
                        token,
                        job.job_id,
                    )
                else:
                    log.info(
                        "job %s: submission %s never reached SLURM; it will be submitted",
                        job.name,
                        token,
                    )
                    # Due in this very poll (`now`), not one poll later.
                    job.next_submit_at = job.next_submit_at or now
                job.submit_token = None
                rt.dirty = True

    def _due(self, job: JobRecord, now: float) -> bool:
        if job.job_id is not None or job.submit_token is not None:
            return False
        if job.finished or not job.script:  # a watched job without a script is never submitted
            return False
        never = not job.attempts and job.next_submit_at is None
        return never or (job.next_submit_at is not None and job.next_submit_at <= now)

    def _submit_due(self, now: float) -> int:
        """Submit every due job: array tasks of one script (and time limit) in one sbatch.

        All intents of this round are saved in one write before the first sbatch, and all
        job ids in one write after the last: a crash anywhere in between leaves tokens that
        `_reconcile` resolves against squeue, so two writes per round suffice at any size.
        """
        batches = self._batches(now)
        submitted = 0
        # Later stages become due once the earlier stage's job has an id: a few rounds.
        for _round in range(MAX_STAGE_ROUNDS):
            if not batches:
                break
            submitted += self._submit_batches(batches, now)
            batches = self._batches(now)
        return submitted

    def _submit_batches(
        self, batches: list[tuple[_Runtime, list[JobRecord], str]], now: float
    ) -> int:
        self._save_dirty()  # the intents are on disk before any sbatch runs
        submitted = 0
        try:
            for index, (rt, jobs, token) in enumerate(batches):
                rt.dirty = True
                try:
                    submitted += self._submit_group(rt, jobs, token, now)
                except (SubmissionError, SlurmNotInstalledError) as exc:
                    # sbatch refused (or is missing): certain that this batch is not queued.
                    for job in jobs:
                        job.submit_token = None
                    if isinstance(exc, SlurmNotInstalledError) or self._fail_rejected(jobs, exc):
                        # A first submission failed: stop; the later batches were not sent.
                        for _rt, later, _token in batches[index + 1 :]:
                            for job in later:
                                job.submit_token = None
                        raise
        finally:
            self._save_dirty()
        return submitted

    def _batches(self, now: float) -> list[tuple[_Runtime, list[JobRecord], str]]:
        """Due jobs grouped into sbatch calls, each with a fresh submission token set."""
        batches: list[tuple[_Runtime, list[JobRecord], str]] = []
        for rt in self._runtimes:
            groups: dict[tuple[Any, ...], list[JobRecord]] = {}
            for job in rt.session.jobs.values():
                if self._due(job, now) and self._released(rt, job):
                    # A single-job script is one call per job.
                    name = job.slurm_name if job.array_index is not None else job.key
                    after = _dependency_of(job)
                    key = (job.script, name, job.time_limit, after, tuple(sorted(job.env.items())))
                    groups.setdefault(key, []).append(job)
            for jobs in groups.values():
                token = f"autoexp-{rt.session.session_id}-{uuid.uuid4().hex[:12]}"
                for job in jobs:
                    job.submit_token = token
                batches.append((rt, jobs, token))
                rt.dirty = True
        return batches

    def _released(self, rt: _Runtime, job: JobRecord) -> bool:
        """A later stage's start condition (monitor.stages); records what it will wait for."""
        stage = job.stage
        if stage is None or stage.after is None or job.attempts:
            return True
        verdict = stage_gate(job, rt.session.jobs.get(stage.after), os.path.exists)
        stage.after_slurm_id = verdict.after_id
        return verdict.go

    def _relink_stages(self, now: float) -> None:
        """Hold, resubmit or fail later-stage jobs whose earlier stage restarted or failed."""
        to_cancel: list[str] = []
        for rt in self._runtimes:
            cancel, changed = relink_stages(rt.session.jobs, os.path.exists, self._set_state, now)
            rt.dirty = rt.dirty or changed > 0
            to_cancel += cancel
        if to_cancel:
            self._save_dirty()  # decided on disk first, as for stalled jobs
            log.info(
                "cancelling later-stage jobs %s (earlier stage restarted or failed)", to_cancel
            )
            self.client.cancel(to_cancel)

    def _fail_rejected(self, jobs: list[JobRecord], exc: SubmissionError) -> bool:
        """Mark rejected restarts failed; True when a first submission was rejected."""
        initial = False
        for job in jobs:
            if not job.attempts:
                initial = True
                continue
            self._set_state(job, MonitorState.FAILED, f"resubmission rejected: {exc}")
            job.next_submit_at = None
            job.outcome = Outcome("crash", "submit_failed", f"resubmission rejected: {exc}")
        return initial

    @staticmethod
    def _user_exclude(rt: _Runtime) -> Any:
        """``slurm.sbatch.exclude`` of the session's config (kept in front of auto-exclusions)."""
        slurm = rt.session.config.get("slurm") or {}
        return (slurm.get("sbatch") or {}).get("exclude")

    def _excluded(self, rt: _Runtime, project: list[str] | None = None) -> list[str]:
        """The session's excluded nodes, then the project's (earlier sessions'), bounded."""
        if project is None:
            project = load_project_exclusions(self.store.state_dir)
        nodes = merged_nodes(rt.session.excluded_nodes, project)
        return nodes[: max(rt.settings.config.max_excluded_nodes, len(rt.session.excluded_nodes))]

    def _share_exclusions(self, added: list[str]) -> None:
        """Keep new exclusions for the project, and push them into jobs still queued."""
        project = add_project_exclusions(self.store.state_dir, added)
        for rt in self._runtimes:
            queued = queued_job_ids(rt.session.jobs.values())
            exclude = exclude_argument(self._user_exclude(rt), self._excluded(rt, project))
            if queued and exclude:
                updated = self.client.exclude_nodes(queued, exclude)
                log.warning(
                    "session %s: queued job(s) %s now exclude %s (scontrol update)",
                    rt.session.session_id,
                    ", ".join(updated) or "none (all started meanwhile)",
                    exclude,
                )

    def _submit_group(self, rt: _Runtime, jobs: list[JobRecord], token: str, now: float) -> int:
        first = jobs[0]
        extra: list[str] = []
        if first.time_limit:
            extra.append(f"--time={first.time_limit}")
        exclude = exclude_argument(self._user_exclude(rt), self._excluded(rt))
        if exclude:
            extra.append(f"--exclude={exclude}")
        after = _dependency_of(first)
        if after:
            extra.append(f"--dependency={after}")
        if first.env:
            pairs = ",".join(f"{k}={v}" for k, v in sorted(first.env.items()))
            extra.append(f"--export=ALL,{pairs}")
        array = None
        if first.array_index is not None:
            array = array_spec(job.array_index for job in jobs if job.array_index is not None)
            array += _array_throttle(rt.session)
        request = SubmitRequest(
            script=Path(first.script),
            job_name=first.slurm_name,
            array=array,
            comment=token,
            extra_args=tuple(extra),
            submit_cmd=_submit_cmd(rt.session),
        )
        base = self.client.submit(request)
        for job in jobs:
            new_id = base if job.array_index is None else f"{base}_{job.array_index}"
            old_id = job.attempts[-1].job_id if job.attempts else None
            job.job_id, job.submit_token, job.submitted_at = new_id, None, now
            job.next_submit_at, job.slurm_state, job.last_activity = None, None, None
            job.log_offset, job.file_marks, job.signals = 0, {}, []
            self._set_state(job, MonitorState.PENDING, f"submitted as {new_id}")
            if old_id is not None:
                log.info("job %s: restarted %s -> %s", job.name, old_id, new_id)
            else:
                log.info("job %s: submitted as %s", job.name, new_id)
        return len(jobs)

    # -- observation ----------------------------------------------------------------------
    def _observe(self, now: float, report: PollReport) -> int:
        watched, log_only = [], []
        for rt in self._runtimes:
            for job in rt.session.jobs.values():
                if job.finished:
                    continue
                if job.job_id is not None:
                    watched.append((rt, job))
                elif _log_only(job):
                    log_only.append((rt, job))
        report.jobs_polled = len(watched) + len(log_only)
        for rt, job in log_only:
            self._observe_log_only(rt, job, now)
        if not watched:
            return 0
        answer = self.client.query([job.job_id for _, job in watched if job.job_id])
        to_cancel: list[str] = []
        scheduled = 0
        for rt, job in watched:
            assert job.job_id is not None
            info = answer.jobs.get(job.job_id)
            gone = job.job_id in answer.unknown
            if info is None and not gone:
                continue
            before_id = job.job_id
            before = (job.state, job.slurm_state, len(job.signals), len(job.attempts))
            scheduled += self._observe_job(rt, job, info, gone, now, to_cancel)
            if (job.state, job.slurm_state, len(job.signals), len(job.attempts)) != before:
                rt.dirty = True
                self._after_observation(rt, job, before[0], before[3], now, before_id)
            else:
                rt.touched = True
        if to_cancel:
            # The stall and signal decisions are on disk first: a resumed monitor must not
            # mistake these cancellations for someone else's scancel.
            self._save_dirty()
            log.info(
                "cancelling jobs %s (stalled, or on_match of a log signal)", ", ".join(to_cancel)
            )
            self.client.cancel(to_cancel)
        return scheduled

    def _observe_log_only(self, rt: _Runtime, job: JobRecord, now: float) -> None:
        """A watched log without a SLURM job: pending until it appears, then by activity."""
        state, signals = job.state, len(job.signals)
        marker, _acting = self._read_logs(rt, job, now)  # no SLURM job: nothing to cancel
        if marker or (job.signals and succeeded(self._attempt_signals(rt, job))):
            job.outcome = Outcome("success", decision="completion marker")
            self._set_state(job, MonitorState.COMPLETED, "completion marker in the log")
        elif job.last_activity is not None:  # else the log does not exist yet
            idle = now - job.last_activity
            if idle > rt.settings.config.inactivity_threshold_seconds:
                self._set_state(job, MonitorState.STALLED, f"idle {idle:.0f} s")
            else:
                self._set_state(job, MonitorState.RUNNING, "log activity")
        self._after_observation(rt, job, state, len(job.attempts), now)
        if (job.state, len(job.signals)) != (state, signals):
            rt.dirty = True
        else:
            rt.touched = True

    def _after_observation(
        self,
        rt: _Runtime,
        job: JobRecord,
        old_state: str,
        old_attempts: int,
        now: float,
        job_id: str | None = None,
    ) -> None:
        """Lifecycle events (``run_<state>``, ``run_ended``) as actions, when configured."""
        if not rt.settings.config.emit_events:
            return
        events = []
        if job.state != old_state:
            events.append((f"run_{job.state}", f"{old_state} -> {job.state}"))
        if len(job.attempts) > old_attempts:
            last = job.attempts[-1]
            events.append(
                (
                    "run_ended",
                    f"mode={last.mode} error_type={last.metadata.get('error_type') or '-'} "
                    f"slurm_state={last.slurm_state or '-'}",
                )
            )
        for action, line in events:
            self._actions.append(
                Action(action, "lifecycle", rt.session.session_id, job.name, job_id, line, now)
            )

    def _observe_job(
        self,
        rt: _Runtime,
        job: JobRecord,
        info: JobInfo | None,
        gone: bool,
        now: float,
        to_cancel: list[str],
    ) -> int:
        """Update one job from SLURM's answer and its files; 1 if a restart was scheduled."""
        assert job.job_id is not None
        if info is not None and info.state != job.slurm_state:
            log.info(
                "job %s (%s): SLURM state %s -> %s%s",
                job.name,
                job.job_id,
                job.slurm_state or "SUBMITTED",
                info.state,
                f" (reason {info.reason})" if info.reason not in ("", "None") else "",
            )
            job.slurm_state = info.state
        marker, acting = self._read_logs(rt, job, now)
        ended = gone or (info is not None and info.terminal)
        if acting is not None and not ended:
            return self._act_on_signal(rt, job, acting, info, now, to_cancel)
        if ended:
            config = rt.settings.config
            signals = self._attempt_signals(rt, job)
            if not marker and config.termination_cmd and not succeeded(signals):
                marker = termination_cmd_succeeds(config.termination_cmd, job)
            cls = classify_end(
                info,
                signals,
                completed_marker=marker,
                marker_required=bool(config.termination_str or config.termination_cmd),
            )
            if info is not None and info.nodes:  # where it ran: flaky-node accounting
                cls = Classification(cls.mode, {**cls.metadata, "nodes": info.nodes})
            forced = None
            if acting is not None and acting.signal.on_match == ON_MATCH_RESTART:
                forced = acting.signal.name
            return self._finish_attempt(rt, job, cls, now, restart_on=forced)
        assert info is not None
        state = monitor_state_of(info.state)
        if state is MonitorState.RUNNING:
            if job.last_activity is None:
                job.last_activity = now
            idle = now - job.last_activity
            threshold = rt.settings.config.inactivity_threshold_seconds
            if idle > threshold:
                self._set_state(job, MonitorState.STALLED, f"idle {idle:.0f} s")
                to_cancel.append(job.job_id)
                return self._finish_attempt(rt, job, classify_stall(idle, threshold), now)
        self._set_state(job, state, info.state)
        return 0

    def _act_on_signal(
        self,
        rt: _Runtime,
        job: JobRecord,
        hit: SignalHit,
        info: JobInfo | None,
        now: float,
        to_cancel: list[str],
    ) -> int:
        """`on_match: cancel|restart`: end the running attempt now, classified as the signal
        says; the job is cancelled with this poll's other cancellations (one scancel)."""
        assert job.job_id is not None
        sig = hit.signal
        to_cancel.append(job.job_id)
        log.info(
            "job %s (%s): cancelling at log signal %s (on_match %s)",
            job.name,
            job.job_id,
            sig.name,
            sig.on_match,
        )
        base: dict[str, Any] = {
            "slurm_state": info.state if info is not None else job.slurm_state,
            "reason": f"cancelled by the monitor at signal {sig.name} (on_match {sig.on_match})",
            "line": hit.line.strip()[:200],
        }
        if info is not None and info.nodes:
            base["nodes"] = info.nodes
        cls = signal_classification(sig, base)
        forced = sig.name if sig.on_match == ON_MATCH_RESTART else None
        return self._finish_attempt(rt, job, cls, now, restart_on=forced)

    def _attempt_signals(self, rt: _Runtime, job: JobRecord) -> list[Any]:
        seen = set(job.signals)
        return [sig for sig in rt.settings.ranked if sig.name in seen]

    def _watched_files(self, job: JobRecord) -> list[str]:
        # Plain strings, not Path objects: this runs for every job on every poll.
        if job.job_id is None:  # a watched log without a SLURM job: a plain path
            return [job.log_path, *job.output_paths]
        log_path = self._log_paths.get(job.job_id)
        if log_path is None:  # resolved once per SLURM id, not once per poll
            log_path = fill_log_pattern(job.log_path, job.job_id, job.slurm_name)
            self._log_paths[job.job_id] = log_path
        return [log_path, *job.output_paths]

    def _read_logs(self, rt: _Runtime, job: JobRecord, now: float) -> tuple[bool, SignalHit | None]:
        """Scan new log lines for signals, note file activity.

        Returns whether the completion marker was seen (in this attempt), and the first new
        match of a signal whose `on_match` ends the attempt, if any.
        """
        files = self._watched_files(job)
        log_size = -1
        marks = job.file_marks
        for path in files:
            try:
                stat = os.stat(path)  # noqa: PTH116 (str paths: per job and poll)
            except OSError:
                continue
            if path is files[0]:
                log_size = stat.st_size
            # Activity is a change seen between polls, timed by the monitor's clock: no
            # dependence on the compute nodes' clocks or on the filesystem's mtime precision.
            mark = marks.get(path)
            if mark is None or mark[0] != stat.st_size or mark[1] != stat.st_mtime:
                marks[path] = [float(stat.st_size), stat.st_mtime]
                job.last_activity = now
        text = ""
        if log_size >= 0 and log_size != job.log_offset:
            text, job.log_offset = read_new_text(files[0], job.log_offset, size=log_size)
        marker = "completed" in job.signals
        if not text:
            return marker, None
        term = rt.settings.config.termination_str
        if term and term in text:
            if not marker:
                job.signals.append("completed")
                log.info("job %s (%s): signal completed (mode=success)", job.name, job.job_id)
                if rt.settings.config.emit_events:
                    line = next(ln for ln in text.splitlines() if term in ln)
                    self._actions.append(
                        Action(
                            "completion_marker",
                            "completed",
                            rt.session.session_id,
                            job.name,
                            job.job_id,
                            line.strip(),
                            now,
                        )
                    )
            marker = True
        acting = None
        for hit in rt.settings.signal_set.scan_text(text):
            self._on_signal(rt, job, hit, now)
            if acting is None and hit.signal.acts:
                acting = hit
        return marker, acting

    def _on_signal(self, rt: _Runtime, job: JobRecord, hit: SignalHit, now: float) -> None:
        """Record one signal match: on the job, in the event log, as actions, its triage."""
        self._signal_hits += 1
        sig = hit.signal
        if sig.name not in job.signals:
            job.signals.append(sig.name)
        log.info(
            "job %s (%s): signal %s (mode=%s, action=%s)%s: %s",
            job.name,
            job.job_id,
            sig.name,
            sig.mode,
            sig.action,
            f" on_match {sig.on_match}" if sig.acts else "",
            hit.line.strip()[:200],
        )
        if sig.action or rt.settings.config.emit_events:
            self._actions.append(
                Action(
                    sig.action or sig.name,
                    sig.name,
                    rt.session.session_id,
                    job.name,
                    job.job_id,
                    hit.line.strip(),
                    now,
                )
            )
        if sig.triage is not None:
            self._triage(rt, job, sig.name, sig.triage, hit.line.strip(), now)

    def _triage(
        self, rt: _Runtime, job: JobRecord, signal: str, template: str, line: str, now: float
    ) -> None:
        """Start the signal's triage unless this attempt already has one (started or refused).

        Recorded on the job (saved with this poll, under the session lock) and reported as a
        ``triage_started`` / ``triage_failed`` action; the monitor does not wait for aorta.
        """
        attempt = job.job_id
        if attempt is None or any(event.attempt == attempt for event in job.triages):
            return
        session = rt.session
        event = self.start_triage(
            TriageRequest(
                attempt=attempt,
                signal=signal,
                line=line[:500],
                at=now,
                template=template,
                job_output_dir=job.output_dir,
                output_root=session.base_output_dir,
                command=job_command(session.plan, session.config, job.key, job.env),
            )
        )
        job.triages.append(event)
        rt.dirty = True
        text = describe(event)
        if event.error is None:
            log.info("job %s (%s): %s", job.name, attempt, text)
        else:
            log.warning("job %s (%s): %s", job.name, attempt, text)
        action = "triage_started" if event.error is None else "triage_failed"
        self._actions.append(
            Action(action, signal, session.session_id, job.name, attempt, text, now)
        )

    # -- decisions ------------------------------------------------------------------------
    def _finish_attempt(
        self,
        rt: _Runtime,
        job: JobRecord,
        cls: Classification,
        now: float,
        *,
        restart_on: str | None = None,
    ) -> int:
        """Record the ended attempt and decide: done, failed, or a restart (scheduled).

        `restart_on`: the name of an `on_match: restart` signal the attempt logged; it restarts
        the job at once, instead of the policy and its backoff, within `max_restarts`.
        """
        job.attempts.append(
            Attempt(
                job_id=str(job.job_id),
                slurm_state=job.slurm_state,
                mode=str(cls.mode),
                metadata=cls.metadata,
                ended_at=now,
                signals=list(job.signals),
            )
        )
        log.info("job %s (%s): classified %s %s", job.name, job.job_id, cls.mode, cls.metadata)
        job.job_id = None
        if node_level_failure(cls.metadata):
            self._update_exclusions(rt)
        if cls.mode is Mode.SUCCESS:
            job.outcome = Outcome.of("success", cls.metadata)
            self._set_state(job, MonitorState.COMPLETED, "success")
            return 0
        mode = str(cls.mode)
        settings = rt.settings
        attempt = job.restarts.get(mode, 0)
        total = sum(job.restarts.values())
        policy = policy_for(settings.policies, mode)
        decider = f"on_match of {restart_on}" if restart_on else type(policy).__name__
        if total >= settings.config.max_restarts and (policy or restart_on):
            action, reason, time_limit = (
                "stop",
                f"global restart cap reached ({total}/{settings.config.max_restarts})",
                None,
            )
        elif restart_on is not None:
            action, reason = "restart", f"log signal {restart_on} has on_match restart"
            time_limit = None
        elif policy is None:
            action, reason, time_limit = "stop", f"no restart policy for mode {mode}", None
        else:
            decision = policy.decide(
                RestartContext(
                    mode, dict(cls.metadata), attempt, job.time_limit, job.name, job.output_dir
                )
            )
            action, reason, time_limit = decision.action, decision.reason, decision.time_limit
            if decision.restart:
                job.env.update(decision.env)
        log.info(
            "job %s: policy %s decided %s (reason: %s; attempt %d for %s, %d restarts total)",
            job.name,
            decider if (policy or restart_on) else "none",
            action,
            reason,
            attempt + 1,
            mode,
            total,
        )
        if action == "restart":
            action, reason = self._rewrite_for_restart(rt, job, cls, reason)
        if action != "restart":
            job.outcome = Outcome.of(mode, cls.metadata, reason)
            self._set_state(job, MonitorState.FAILED, reason)
            job.next_submit_at = None
            return 0
        job.restarts[mode] = attempt + 1
        if time_limit:
            job.time_limit = time_limit
        if restart_on is not None:
            job.next_submit_at = now
            self._resubmit_now = True
        else:
            job.next_submit_at = now + settings.backoff(total)
        job.outcome = None
        self._set_state(job, MonitorState.PENDING, f"restart scheduled: {reason}")
        return 1

    def _update_exclusions(self, rt: _Runtime) -> None:
        """Re-decide the session's excluded nodes after a node-level failure (node_health)."""
        session, cfg = rt.session, rt.settings.config
        decision = decide_exclusions(
            (a.metadata for j in session.jobs.values() for a in j.attempts),
            session.excluded_nodes,
            after=cfg.exclude_nodes_after,
            limit=cfg.max_excluded_nodes,
        )
        if decision.added:
            session.excluded_nodes = decision.nodes
            rt.dirty = True
            log.warning(
                "session %s: excluding node(s) %s from later submissions (%d node-level "
                "failure(s) each); excluded now: %s",
                session.session_id,
                ", ".join(decision.added),
                cfg.exclude_nodes_after,
                ",".join(decision.nodes),
            )
            self._share_exclusions(decision.added)
        if decision.over_limit:
            log.warning(
                "session %s: node(s) %s failed %d times but the exclusion list is full "
                "(monitoring.max_excluded_nodes=%d); not excluded",
                session.session_id,
                ", ".join(decision.over_limit),
                cfg.exclude_nodes_after,
                cfg.max_excluded_nodes,
            )

    def _rewrite_for_restart(
        self, rt: _Runtime, job: JobRecord, cls: Classification, reason: str
    ) -> tuple[str, str]:
        """Let the backend change the restarted command (a new script); the final action."""
        try:
            rewritten = rt.restart_scripts.rewrite(job, {"mode": str(cls.mode), **cls.metadata})
        except AutoexpError as exc:
            # Restarting the unchanged command could start over and overwrite checkpoints.
            why = f"restart command could not be built: {exc}"
            log.error("job %s: %s; not restarting", job.name, why)
            return "stop", why
        if rewritten is None:
            return "restart", reason
        changes = ", ".join(f"{k}={v}" for k, v in sorted(rewritten.overrides.items()))
        log.info(
            "job %s: backend changed %s for the restart; script %s",
            job.name,
            changes,
            rewritten.path,
        )
        job.script = str(rewritten.path)
        return "restart", f"{reason}; {changes}"

    def _set_state(self, job: JobRecord, state: MonitorState, detail: str) -> None:
        if job.state == state:
            return
        log.info("job %s: %s -> %s (%s)", job.name, job.state.value, state.value, detail)
        job.record_transition(self.clock(), job.state.value, state.value, detail)
        job.state = state

    def _save_dirty(self) -> None:
        if self.journal_actions:
            fresh, self._journaled = self._actions[self._journaled :], len(self._actions)
            for rt in self._runtimes:
                if record_intents(rt.session.intents, rt.session.session_id, fresh):
                    rt.dirty = True
        now = self.clock()
        for rt in self._runtimes:
            if rt.dirty or (rt.touched and now - rt.saved_at >= ACTIVITY_SAVE_S):
                self.store.save(rt.session)
                rt.dirty = rt.touched = False
                rt.saved_at = now


# A termination command that hangs must not hang the monitor.
TERMINATION_CMD_TIMEOUT_S = 120.0


def termination_cmd_succeeds(command: str, job: JobRecord) -> bool:
    """Run `monitoring.termination_cmd` for a finished job; exit 0 means the run completed.

    ``{output_dir}``, ``{name}``, ``{job_id}`` and ``{log}`` read ``$AUTOEXP_OUTPUT_DIR``,
    ``$AUTOEXP_NAME``, ``$AUTOEXP_JOB_ID`` and ``$AUTOEXP_LOG`` (values never enter the shell
    source; see `shell_fields`). A timeout or a command that cannot start counts as "not
    completed" and is logged.
    """
    job_id = str(job.job_id)
    fields = {
        "output_dir": job.output_dir,
        "name": job.name,
        "job_id": job_id,
        "log": fill_log_pattern(job.log_path, job_id, job.slurm_name),
    }
    try:
        done = run_with_fields(
            command, TERMINATION_FIELDS, fields, timeout=TERMINATION_CMD_TIMEOUT_S
        )
    except (ValueError, OSError, subprocess.TimeoutExpired) as exc:  # ValueError: bad template
        log.warning("job %s: termination_cmd failed to run (%s)", job.name, exc)
        return False
    log.info("job %s: termination_cmd exited %d", job.name, done.returncode)
    return done.returncode == 0


def _log_only(job: JobRecord) -> bool:
    """A watched log with no SLURM job behind it (standalone monitor): never submitted."""
    return not job.script and job.job_id is None and not job.attempts


def _dependency_of(job: JobRecord) -> str | None:
    """A first submission's ``--dependency``: the previous chain link (`submit --chain`,
    afterany; array tasks wait for the whole previous array, as one sbatch carries one
    dependency for all of its tasks) and the earlier stage's job (afterok, monitor.stages)."""
    if job.attempts:
        return None
    parts = []
    if job.depends_on is not None:
        chain = job.depends_on.split("_")[0] if job.array_index is not None else job.depends_on
        parts.append(f"afterany:{chain}")
    stage = stage_dependency(job)
    if stage:
        parts.append(stage)
    return ",".join(parts) or None


def _base_id(hits: list[JobInfo]) -> str | None:
    for info in hits:
        if info.array_job_id:
            return info.array_job_id
        return info.job_id.split("_")[0]
    return None

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
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oellm_autoexp.monitor.classify import Classification, classify_end, classify_stall
from oellm_autoexp.monitor.log_signals import read_new, scan
from oellm_autoexp.monitor.policies import RestartContext, policy_for
from oellm_autoexp.monitor.settings import MonitorSettings, load_settings
from oellm_autoexp.monitor.states import Mode, MonitorState, monitor_state_of
from oellm_autoexp.persistence.session import JobRecord, Session
from oellm_autoexp.persistence.store import SessionStore
from oellm_autoexp.slurm.client import (
    JobInfo,
    SlurmClient,
    SlurmCommandError,
    SlurmNotInstalledError,
    SubmissionError,
    SubmitRequest,
)

log = logging.getLogger("oellm_autoexp.monitor")


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


@dataclass
class PollReport:
    """What one poll did (for the CLI, the event log and the benchmark)."""

    jobs_polled: int = 0
    slurm_calls: int = 0
    submitted: int = 0
    restarts_scheduled: int = 0
    states: dict[str, int] = field(default_factory=dict)
    slurm_error: str | None = None


def resolve_log_path(template: str, job_id: str, slurm_name: str) -> Path:
    """SLURM's filename pattern (%A %a %j %x %%) filled in for `job_id` (``123`` or ``123_4``)."""
    base, _, task = job_id.partition("_")
    text = template.replace("%%", "\0")
    for key, value in (("%A", base), ("%a", task), ("%j", base), ("%x", slurm_name)):
        text = text.replace(key, value)
    return Path(text.replace("\0", "%"))


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


@dataclass
class _Runtime:
    session: Session
    settings: MonitorSettings
    dirty: bool = False


class MonitorController:
    """Drives sessions to completion against one `SlurmClient`."""

    def __init__(
        self,
        client: SlurmClient,
        store: SessionStore,
        sessions: Sequence[Session],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.store = store
        self.clock = clock
        self._runtimes = [_Runtime(s, load_settings(s.monitoring)) for s in sessions]
        self._actions: list[Action] = []

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
        return out

    def poll_once(self) -> PollReport:
        """One round: reconcile, submit what is due, one squeue, classify, decide, save."""
        before = sum(self.client.calls.values())
        report = PollReport()
        now = self.clock()
        try:
            self._reconcile()
            report.submitted = self._submit_due(now)
            report.restarts_scheduled = self._observe(now, report)
        except SlurmCommandError as exc:
            # No news is not bad news: job states stay as they were, the next poll retries.
            report.slurm_error = str(exc)
            log.warning("SLURM did not answer this poll (%s); job states unchanged", exc)
        finally:
            self._save_dirty()
        report.slurm_calls = sum(self.client.calls.values()) - before
        for rt in self._runtimes:
            for job in rt.session.jobs.values():
                report.states[job.state] = report.states.get(job.state, 0) + 1
            if not rt.session.active and rt.session.status != "finished":
                rt.session.status = "finished"
                self.store.save(rt.session)
                log.info("session %s: all jobs finished", rt.session.session_id)
        log.info(
            "poll: %d jobs polled, states %s, %d submitted, %d restarts scheduled, %d SLURM calls",
            report.jobs_polled,
            dict(sorted(report.states.items())),
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
    ) -> int:
        """Poll until every job finished (or `max_polls`); returns the number of polls.

        The interval is the smallest `poll_interval_seconds` of the sessions, shortened when a
        restart is due sooner, and doubled (up to 8x) while SLURM keeps failing to answer.
        """
        polls, failures = 0, 0
        while self._any_active() and (max_polls is None or polls < max_polls):
            report = self.poll_once()
            polls += 1
            failures = failures + 1 if report.slurm_error else 0
            if not self._any_active():
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

    def _reconcile(self) -> None:
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
                    job.submitted_at = job.submitted_at or self.clock()
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
                    job.next_submit_at = job.next_submit_at or self.clock()
                job.submit_token = None
                rt.dirty = True

    def _due(self, job: JobRecord, now: float) -> bool:
        if job.job_id is not None or job.submit_token is not None:
            return False
        if job.finished:
            return False
        never = not job.attempts and job.next_submit_at is None
        return never or (job.next_submit_at is not None and job.next_submit_at <= now)

    def _submit_due(self, now: float) -> int:
        submitted = 0
        for rt in self._runtimes:
            groups: dict[tuple[str, str, str | None], list[JobRecord]] = {}
            for job in rt.session.jobs.values():
                if self._due(job, now):
                    # Array tasks of one script (and time limit) share one sbatch call;
                    # a single-job script is one call per job.
                    if job.array_index is not None:
                        key = (job.script, job.slurm_name, job.time_limit)
                    else:
                        key = (job.script, job.key, job.time_limit)
                    groups.setdefault(key, []).append(job)
            for jobs in groups.values():
                submitted += self._submit_group(rt, jobs, now)
        return submitted

    def _submit_group(self, rt: _Runtime, jobs: list[JobRecord], now: float) -> int:
        session, first = rt.session, jobs[0]
        token = f"autoexp-{session.session_id}-{uuid.uuid4().hex[:12]}"
        for job in jobs:
            job.submit_token = token
        # The intent is on disk before sbatch runs (see module doc).
        self.store.save(session)
        extra: list[str] = []
        if first.time_limit:
            extra.append(f"--time={first.time_limit}")
        array = None
        if first.array_index is not None:
            array = array_spec(job.array_index for job in jobs if job.array_index is not None)
        request = SubmitRequest(
            script=Path(first.script),
            job_name=first.slurm_name,
            array=array,
            comment=token,
            extra_args=tuple(extra),
        )
        try:
            base = self.client.submit(request)
        except SlurmNotInstalledError:
            # Certain that nothing was submitted: drop the intent, keep the file consistent.
            for job in jobs:
                job.submit_token = None
            self.store.save(session)
            raise
        except SubmissionError as exc:
            for job in jobs:
                job.submit_token = None
                if not job.attempts:
                    continue
                self._set_state(job, MonitorState.FAILED, f"resubmission rejected: {exc}")
                job.next_submit_at = None
                job.outcome = {"mode": "crash", "error_type": "submit_failed", "reason": str(exc)}
            self.store.save(session)
            if any(not job.attempts for job in jobs):
                raise
            return 0
        for job in jobs:
            new_id = base if job.array_index is None else f"{base}_{job.array_index}"
            old_id = job.attempts[-1]["job_id"] if job.attempts else None
            job.job_id, job.submit_token, job.submitted_at = new_id, None, now
            job.next_submit_at, job.slurm_state, job.last_activity = None, None, None
            job.log_offset, job.file_marks, job.signals = 0, {}, []
            self._set_state(job, MonitorState.PENDING, f"submitted as {new_id}")
            if old_id is not None:
                log.info("job %s: restarted %s -> %s", job.name, old_id, new_id)
            else:
                log.info("job %s: submitted as %s", job.name, new_id)
        self.store.save(session)
        return len(jobs)

    # -- observation ----------------------------------------------------------------------
    def _observe(self, now: float, report: PollReport) -> int:
        watched = [
            (rt, job)
            for rt in self._runtimes
            for job in rt.session.jobs.values()
            if job.job_id is not None and not job.finished
        ]
        report.jobs_polled = len(watched)
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
            rt.dirty = True
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
            marker = self._read_logs(rt, job, now)
            if gone or (info is not None and info.terminal):
                cls = classify_end(
                    info,
                    self._attempt_signals(rt, job),
                    completed_marker=marker,
                    marker_required=bool(rt.settings.config.termination_str),
                )
                scheduled += self._finish_attempt(rt, job, cls, now)
                continue
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
                    scheduled += self._finish_attempt(rt, job, classify_stall(idle, threshold), now)
                    continue
            self._set_state(job, state, info.state)
        if to_cancel:
            log.info("cancelling stalled jobs %s", ", ".join(to_cancel))
            self.client.cancel(to_cancel)
        return scheduled

    def _attempt_signals(self, rt: _Runtime, job: JobRecord) -> list[Any]:
        seen = set(job.signals)
        return [sig for sig in rt.settings.signals if sig.name in seen]

    def _watched_files(self, job: JobRecord) -> list[Path]:
        assert job.job_id is not None
        files = [resolve_log_path(job.log_path, job.job_id, job.slurm_name)]
        files += [Path(p) for p in job.output_paths]
        return files

    def _read_logs(self, rt: _Runtime, job: JobRecord, now: float) -> bool:
        """Scan new log lines for signals, note file activity; True if the marker was seen."""
        files = self._watched_files(job)
        for path in files:
            try:
                stat = path.stat()
            except OSError:
                continue
            mark = [float(stat.st_size), stat.st_mtime]
            # Activity is a change seen between polls, timed by the monitor's clock: no
            # dependence on the compute nodes' clocks or on the filesystem's mtime precision.
            if job.file_marks.get(str(path)) != mark:
                job.file_marks[str(path)] = mark
                job.last_activity = now
        lines, job.log_offset = read_new(files[0], job.log_offset)
        marker = "completed" in job.signals
        if not lines:
            return marker
        term = rt.settings.config.termination_str
        if term and any(term in line for line in lines):
            if not marker:
                job.signals.append("completed")
                log.info("job %s (%s): signal completed (mode=success)", job.name, job.job_id)
            marker = True
        for hit in scan(lines, rt.settings.signals):
            sig = hit.signal
            if sig.name not in job.signals:
                job.signals.append(sig.name)
            log.info(
                "job %s (%s): signal %s (mode=%s, action=%s): %s",
                job.name,
                job.job_id,
                sig.name,
                sig.mode,
                sig.action,
                hit.line.strip()[:200],
            )
            if sig.action:
                self._actions.append(
                    Action(
                        sig.action,
                        sig.name,
                        rt.session.session_id,
                        job.name,
                        job.job_id,
                        hit.line.strip(),
                        now,
                    )
                )
        return marker

    # -- decisions ------------------------------------------------------------------------
    def _finish_attempt(self, rt: _Runtime, job: JobRecord, cls: Classification, now: float) -> int:
        job.attempts.append(
            {
                "job_id": job.job_id,
                "slurm_state": job.slurm_state,
                "mode": str(cls.mode),
                "metadata": cls.metadata,
                "ended_at": now,
                "signals": list(job.signals),
            }
        )
        log.info("job %s (%s): classified %s %s", job.name, job.job_id, cls.mode, cls.metadata)
        job.job_id = None
        if cls.mode is Mode.SUCCESS:
            job.outcome = {"mode": "success", **cls.metadata}
            self._set_state(job, MonitorState.COMPLETED, "success")
            return 0
        mode = str(cls.mode)
        settings = rt.settings
        attempt = job.restarts.get(mode, 0)
        total = sum(job.restarts.values())
        policy = policy_for(settings.policies, mode)
        if policy is None:
            action, reason, time_limit = "stop", f"no restart policy for mode {mode}", None
        elif total >= settings.config.max_restarts:
            action, reason, time_limit = (
                "stop",
                f"global restart cap reached ({total}/{settings.config.max_restarts})",
                None,
            )
        else:
            decision = policy.decide(
                RestartContext(mode, dict(cls.metadata), attempt, job.time_limit)
            )
            action, reason, time_limit = decision.action, decision.reason, decision.time_limit
        log.info(
            "job %s: policy %s decided %s (reason: %s; attempt %d for %s, %d restarts total)",
            job.name,
            type(policy).__name__ if policy else "none",
            action,
            reason,
            attempt + 1,
            mode,
            total,
        )
        if action != "restart":
            job.outcome = {"mode": mode, **cls.metadata, "decision": reason}
            self._set_state(job, MonitorState.FAILED, reason)
            job.next_submit_at = None
            return 0
        job.restarts[mode] = attempt + 1
        if time_limit:
            job.time_limit = time_limit
        job.next_submit_at = now + settings.backoff(total)
        job.outcome = None
        self._set_state(job, MonitorState.PENDING, f"restart scheduled: {reason}")
        return 1

    def _set_state(self, job: JobRecord, state: MonitorState, detail: str) -> None:
        if job.state == state.value:
            return
        log.info("job %s: %s -> %s (%s)", job.name, job.state, state.value, detail)
        job.record_transition(self.clock(), job.state, state.value, detail)
        job.state = state.value

    def _save_dirty(self) -> None:
        for rt in self._runtimes:
            if rt.dirty:
                self.store.save(rt.session)
                rt.dirty = False


def _base_id(hits: list[JobInfo]) -> str | None:
    for info in hits:
        if info.array_job_id:
            return info.array_job_id
        return info.job_id.split("_")[0]
    return None

"""Observation: one squeue for all jobs, their logs and output files, signals and stalls.

Every transition and signal is logged at INFO on ``oellm_autoexp.monitor``; an ended attempt
goes to `decision`.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from oellm_autoexp.monitor.classify import (
    Classification,
    classify_end,
    classify_stall,
    signal_classification,
    succeeded,
)
from oellm_autoexp.monitor.core import PollReport, SessionRuntime
from oellm_autoexp.monitor.decision import Decisions
from oellm_autoexp.monitor.log_signals import ON_MATCH_RESTART, SignalHit, read_new_text
from oellm_autoexp.monitor.shell_fields import TERMINATION_FIELDS, run_with_fields
from oellm_autoexp.monitor.triage_launch import TriageRequest, describe
from oellm_autoexp.monitor.triage_recipe import job_command
from oellm_autoexp.persistence.session import JobRecord, Outcome
from oellm_autoexp.persistence.states import MonitorState, monitor_state_of
from oellm_autoexp.reporting import Action
from oellm_autoexp.slurm.client import JobInfo
from oellm_autoexp.slurm.log_pattern import fill_log_pattern

log = logging.getLogger("oellm_autoexp.monitor")


def resolve_log_path(template: str, job_id: str, slurm_name: str) -> Path:
    """SLURM's filename pattern (%A %a %j %x %%) filled in for `job_id` (``123`` or ``123_4``)."""
    return Path(fill_log_pattern(template, job_id, slurm_name))


class Observation(Decisions):
    """Reading SLURM's answer and each job's files: states, activity, stalls, log signals."""

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

    def _observe_log_only(self, rt: SessionRuntime, job: JobRecord, now: float) -> None:
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
        rt: SessionRuntime,
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
        rt: SessionRuntime,
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
        rt: SessionRuntime,
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

    def _attempt_signals(self, rt: SessionRuntime, job: JobRecord) -> list[Any]:
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

    def _read_logs(
        self, rt: SessionRuntime, job: JobRecord, now: float
    ) -> tuple[bool, SignalHit | None]:
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

    def _on_signal(self, rt: SessionRuntime, job: JobRecord, hit: SignalHit, now: float) -> None:
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
        self, rt: SessionRuntime, job: JobRecord, signal: str, template: str, line: str, now: float
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

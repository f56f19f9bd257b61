"""The monitor loop: submit, poll, classify, decide, restart, persist.

One `MonitorController` drives any number of sessions with **one** `query` per poll for all of
their jobs. Every state change is written to the session file before the next SLURM call that
depends on it; in particular a submission is recorded as an intent (`submit_token`, also passed
to sbatch as the job comment) before sbatch runs and as a job id after, so a monitor killed at
any point resumes without losing or duplicating a job (`reconcile`).

The controller is built in layers, one module each: `core` (shared state) <- `submission` <-
`decision` <- `observation` <- this module (the poll and the loop). Every transition, signal,
decision and restart is logged at INFO on ``oellm_autoexp.monitor``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from oellm_autoexp.monitor.core import PollReport
from oellm_autoexp.monitor.observation import Observation
from oellm_autoexp.persistence.session import Session
from oellm_autoexp.reporting import Action
from oellm_autoexp.slurm.client import SlurmCommandError

log = logging.getLogger("oellm_autoexp.monitor")


class MonitorController(Observation):
    """Drives sessions to completion against one `SlurmClient`."""

    # -- public API -----------------------------------------------------------------------
    @property
    def sessions(self) -> list[Session]:
        """The sessions this controller drives."""
        return [rt.session for rt in self._runtimes]

    @property
    def active(self) -> bool:
        """Whether any job of any session still needs monitoring."""
        return self._any_active()

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

"""The monitor controller's shared state: sessions at runtime, the poll report, state writes.

The controller is one class built in layers, each in its own module and each using only the
layers below it: `core` (this) <- `submission` (sbatch, reconcile, exclusions) <- `decision`
(an ended attempt: done, failed or restarted) <- `observation` (squeue, logs, signals) <-
`controller` (the poll and the loop).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from oellm_autoexp.monitor.restart_command import RestartScripts
from oellm_autoexp.monitor.settings import MonitorSettings, load_settings
from oellm_autoexp.monitor.triage_launch import TriageRequest, launch_triage
from oellm_autoexp.persistence.intents import record_intents
from oellm_autoexp.persistence.session import JobRecord, Session, TriageEvent
from oellm_autoexp.persistence.states import MonitorState
from oellm_autoexp.persistence.store import SessionStore
from oellm_autoexp.reporting import Action
from oellm_autoexp.slurm.client import SlurmClient

log = logging.getLogger("oellm_autoexp.monitor")


# Log offsets and activity marks alone are saved at most this often (a 10,000-job session is
# ~7 MiB); every state change is saved at once. After a crash, a resumed monitor re-reads at
# most this much log, and the activity clock restarts at resume.
ACTIVITY_SAVE_S = 300.0


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


@dataclass
class SessionRuntime:
    """One session while it is driven: its settings, restart scripts and what awaits a save."""

    session: Session
    settings: MonitorSettings
    dirty: bool = False  # a state changed: save before the next SLURM call
    touched: bool = False  # only log offsets / activity marks moved: save now and then
    saved_at: float = 0.0
    restart_scripts: RestartScripts = field(init=False)

    def __post_init__(self) -> None:
        self.restart_scripts = RestartScripts(self.session)


class ControllerCore:
    """What every part of the controller shares: the SLURM client, the store, one runtime per
    session, the collected actions, and the two writes they all use (a job's state, a save)."""

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
        self._runtimes = [SessionRuntime(s, load_settings(s.monitoring)) for s in sessions]
        self._actions: list[Action] = []
        self._signal_hits = 0
        self._log_paths: dict[str, str] = {}  # SLURM id -> its resolved log path
        self._resubmit_now = False  # an `on_match: restart` scheduled a restart in this poll

    def _any_active(self) -> bool:
        return any(rt.session.active for rt in self._runtimes)

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

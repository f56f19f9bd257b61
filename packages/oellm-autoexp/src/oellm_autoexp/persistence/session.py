"""The session model: what a monitor needs to drive a submission to its end, as plain data.

A session holds the full resolved config (for reproducibility and `dump-config`), the monitor
settings, and one `JobRecord` per planned job. A job record carries both the current SLURM
attempt and the submission intent: `submit_token` is set and saved *before* sbatch runs and
`job_id` right after, so a monitor killed between the two finds the token on resume and asks
SLURM (by job comment) whether that sbatch went through.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from oellm_autoexp.persistence.intents import Intent, intents_from_list
from oellm_autoexp.persistence.states import MonitorState
from oellm_autoexp.plan import Plan
from toolkit_core.timestamps import iso_stamp, utc_now

SESSION_FORMAT = "oellm-autoexp-session"
SESSION_VERSION = 1
# Enough transitions per job to explain the last few attempts; the rest is in the event log.
MAX_TRANSITIONS = 50


def new_session_id() -> str:
    """An 8-character id (the prefix of a random UUID), as the spec asks."""
    return uuid.uuid4().hex[:8]


def utc_now_iso() -> str:
    """The current time as an ISO-8601 UTC string (session timestamps)."""
    return iso_stamp(utc_now())


@dataclass
class Attempt:
    """One finished SLURM attempt of a job: its id, how it ended, and how it was classified."""

    job_id: str
    slurm_state: str | None
    mode: str  # a `Mode` value: success, crash, timeout, stall
    metadata: dict[str, Any]  # the classification's details (error_type, reason, exit_code, ...)
    ended_at: float
    signals: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the session file's `attempts` entries)."""
        return {
            "job_id": self.job_id,
            "slurm_state": self.slurm_state,
            "mode": self.mode,
            "metadata": self.metadata,
            "ended_at": self.ended_at,
            "signals": self.signals,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        """Inverse of `to_dict`; raises KeyError/TypeError on a malformed entry."""
        return cls(
            job_id=str(data["job_id"]),
            slurm_state=data.get("slurm_state"),
            mode=str(data["mode"]),
            metadata=dict(data.get("metadata") or {}),
            ended_at=float(data["ended_at"]),
            signals=list(data.get("signals") or []),
        )


@dataclass
class Outcome:
    """How a job ended for good: its mode, error type, the decision that ended it, details.

    Stored flat in the session file (``{"mode": ..., "error_type": ..., "decision": ...,
    **details}``), as the classification metadata it comes from.
    """

    mode: str
    error_type: str | None = None
    decision: str | None = None  # why no (further) restart, or what marked success
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, mode: str, metadata: Mapping[str, Any], decision: str | None = None) -> Outcome:
        """An outcome from a classification's mode and metadata."""
        details = {k: v for k, v in metadata.items() if k != "error_type"}
        return cls(mode, metadata.get("error_type"), decision, details)

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON form (None fields left out)."""
        head: dict[str, Any] = {"mode": self.mode}
        if self.error_type is not None:
            head["error_type"] = self.error_type
        if self.decision is not None:
            head["decision"] = self.decision
        return {**self.details, **head}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        """Inverse of `to_dict`."""
        rest = {k: v for k, v in data.items() if k not in ("mode", "error_type", "decision")}
        return cls(str(data["mode"]), data.get("error_type"), data.get("decision"), rest)


@dataclass
class StageState:
    """A job's stage in a multi-stage run and what its start waits for (monitor.stages)."""

    name: str
    after: str | None = None  # key of the earlier stage's job of the same sweep point
    start: str | None = None  # "completed" / "checkpoint" when `after` is set
    start_file: str | None = None  # the checkpoint file `start: checkpoint` waits for
    cancel_file: str | None = None  # `cancel_if_file`: the job is cancelled once it exists
    after_slurm_id: str | None = None  # the SLURM id its queued submission depends on

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the session file's `stage` of a job)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageState:
        """Inverse of `to_dict`; unknown keys are an error (a foreign or newer file)."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise KeyError(f"stage: unexpected key(s) {', '.join(extra)}")
        text = {k: None if v is None else str(v) for k, v in data.items() if k != "name"}
        return cls(str(data["name"]), **text)


@dataclass
class TriageEvent:
    """A `triage:` log-signal action for one attempt: what matched and what was started.

    At most one per SLURM attempt (`attempt`, the job id that logged the signal): a restarted
    monitor that reads the same line again finds this record and starts nothing. `pid` is set
    when aorta was started; `error` says why it was not.
    """

    attempt: str  # the SLURM id of the attempt whose log matched
    signal: str
    line: str
    at: float
    template: str
    directory: str | None = None  # <job output>/triage/<attempt>: recipe, log, aorta's output
    recipe: str | None = None  # the generated recipe
    output_dir: str | None = None  # aorta's --output-dir; the run directory is created below it
    log: str | None = None  # aorta's stdout and stderr
    pid: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the job record's `triages` entries)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TriageEvent:
        """Inverse of `to_dict`; raises KeyError/TypeError on a malformed entry."""
        extra = sorted(set(data) - {f.name for f in fields(cls)})
        if extra:
            raise KeyError(f"triages: unexpected key(s) {', '.join(extra)}")
        pid = data.get("pid")
        return cls(**{**data, "at": float(data["at"]), "pid": None if pid is None else int(pid)})


@dataclass
class JobRecord:
    """One planned job across all its SLURM attempts.

    `state` is the monitor's view (pending, running, stalled, failed, completed); `slurm_state`
    the last state SLURM reported for `job_id`. A job waiting to be (re)submitted has no
    `job_id` and a `next_submit_at`.
    """

    key: str
    name: str
    script: str
    slurm_name: str
    log_path: str
    output_dir: str
    array_index: int | None = None
    output_paths: list[str] = field(default_factory=list)
    time_limit: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # exported to restarts (--export)
    # `submit --chain`: the SLURM id of the previous link's job; the first submission waits for
    # it to end (``--dependency=afterany``), restarts do not.
    depends_on: str | None = None
    # Multi-stage runs (see monitor.stages); one field, not six: past ~30 attributes CPython
    # stops sharing instance-dict keys, which doubled a 10,000-job session's memory.
    stage: StageState | None = None
    state: MonitorState = MonitorState.PENDING
    slurm_state: str | None = None
    job_id: str | None = None
    submit_token: str | None = None
    submitted_at: float | None = None
    next_submit_at: float | None = None
    last_activity: float | None = None
    restarts: dict[str, int] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    file_marks: dict[str, list[float]] = field(default_factory=dict)
    log_offset: int = 0
    signals: list[str] = field(default_factory=list)
    outcome: Outcome | None = None
    # `triage:` actions started (or refused) for this job's attempts, oldest first.
    triages: list[TriageEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.array_index is not None and "%j" in self.log_path:
            from oellm_autoexp.slurm.log_pattern import array_log_template_error

            problem = array_log_template_error(self.log_path)
            if problem is not None:
                raise ValueError(f"job {self.name}: {problem}")

    @property
    def finished(self) -> bool:
        """Completed or failed for good (no restart pending)."""
        done = self.state in (MonitorState.COMPLETED, MonitorState.FAILED)
        return done and self.next_submit_at is None

    @property
    def last_slurm_id(self) -> str | None:
        """The current attempt's SLURM id, else the last finished attempt's (None: never ran)."""
        if self.job_id:
            return self.job_id
        return self.attempts[-1].job_id if self.attempts else None

    def known_as(self, wanted: str) -> bool:
        """Whether `wanted` is this job's name, key or the SLURM id of any of its attempts."""
        ids = {self.name, self.key, self.job_id, *(a.job_id for a in self.attempts)}
        return wanted in ids

    def record_transition(self, at: float, old: str, new: str, detail: str = "") -> None:
        """Append a transition, keeping the most recent `MAX_TRANSITIONS`."""
        self.transitions.append({"at": at, "from": old, "to": new, "detail": detail})
        del self.transitions[:-MAX_TRANSITIONS]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (shallow apart from the typed attempts and outcome)."""
        data = {name: getattr(self, name) for name in _JOB_FIELDS}
        data["state"] = self.state.value
        data["attempts"] = [attempt.to_dict() for attempt in self.attempts]
        data["outcome"] = None if self.outcome is None else self.outcome.to_dict()
        data["stage"] = None if self.stage is None else self.stage.to_dict()
        data["triages"] = [event.to_dict() for event in self.triages]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRecord:
        """Inverse of `to_dict`; unknown keys or states are an error (a foreign or newer file)."""
        extra = sorted(set(data) - set(_JOB_FIELDS))
        if extra:
            raise KeyError(f"unexpected key(s) {', '.join(extra)}")
        typed = dict(data)
        typed["state"] = MonitorState(data.get("state", "pending"))
        typed["attempts"] = [Attempt.from_dict(a) for a in data.get("attempts") or []]
        outcome = data.get("outcome")
        typed["outcome"] = None if outcome is None else Outcome.from_dict(outcome)
        stage = data.get("stage")
        typed["stage"] = None if stage is None else StageState.from_dict(stage)
        typed["triages"] = [TriageEvent.from_dict(t) for t in data.get("triages") or []]
        return cls(**typed)


def find_jobs(sessions: Iterable[Session], wanted: str) -> list[JobRecord]:
    """The jobs of `sessions` known as `wanted` (name, key or SLURM id; see `known_as`)."""
    return [job for session in sessions for job in session.jobs.values() if job.known_as(wanted)]


@dataclass(frozen=True)
class SlurmView:
    """The session config's `slurm:` settings that travel with every (re)submission."""

    submit_cmd: str = "sbatch"  # what the dry run showed
    # ``%N`` of `slurm.array_throttle`, else "": sbatch's ``--array`` on the command line
    # replaces the script's ``#SBATCH --array``, so the throttle goes with every submission.
    array_throttle: str = ""
    exclude: Any = None  # `slurm.sbatch.exclude`, kept in front of automatic exclusions

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> SlurmView:
        """The view of a dumped config (anything missing or malformed: the default)."""
        slurm = config.get("slurm")
        if not isinstance(slurm, Mapping):
            return cls()
        command = slurm.get("submit_cmd")
        limit = slurm.get("array_throttle")
        sbatch = slurm.get("sbatch")
        return cls(
            submit_cmd=str(command) if command else "sbatch",
            array_throttle=f"%{limit}"
            if isinstance(limit, int) and not isinstance(limit, bool)
            else "",
            exclude=sbatch.get("exclude") if isinstance(sbatch, Mapping) else None,
        )


# Field names in declaration order; `asdict` deep-copies and is 10x slower on 10,000 jobs.
_JOB_FIELDS = tuple(f.name for f in fields(JobRecord))


@dataclass
class Session:
    """A monitoring session: config, settings and job records (see module doc)."""

    session_id: str
    project: str
    base_output_dir: str
    created_at: str = field(default_factory=utc_now_iso)
    config: dict[str, Any] = field(default_factory=dict)
    monitoring: dict[str, Any] = field(default_factory=dict)
    plan: Plan | None = None  # None: jobs watched without a plan (a MONITOR.yaml)
    jobs: dict[str, JobRecord] = field(default_factory=dict)
    status: str = "active"
    # Nodes later submissions avoid (`sbatch --exclude`), decided by monitor.node_health.
    excluded_nodes: list[str] = field(default_factory=list)
    # Actions recorded before they run (`persistence.intents`): exactly once across crashes.
    intents: list[Intent] = field(default_factory=list)

    @property
    def slurm(self) -> SlurmView:
        """What every (re)submission of this session takes from its config's `slurm:`."""
        return SlurmView.of(self.config)

    @property
    def active(self) -> bool:
        """Whether any job still needs the monitor."""
        return any(not job.finished for job in self.jobs.values())

    def live_job_ids(self) -> list[str]:
        """SLURM ids of the jobs that are queued or running."""
        return [j.job_id for j in self.jobs.values() if j.job_id and not j.finished]

    def mark_cancelled(self, job_ids: Iterable[str], decision: str, now: float) -> None:
        """Record the jobs with `job_ids` as cancelled (scancel was sent at `now`): each one's
        attempt is kept with its SLURM id, the job failed, the session finished."""
        wanted = set(job_ids)
        for job in self.jobs.values():
            if job.job_id in wanted:
                metadata = {"error_type": "cancelled", "subsystem": "user", "reason": decision}
                job.attempts.append(
                    Attempt(job.job_id, "CANCELLED", "crash", metadata, now, list(job.signals))
                )
                job.record_transition(now, job.state.value, MonitorState.FAILED.value, decision)
                job.state, job.next_submit_at, job.job_id = MonitorState.FAILED, None, None
                job.slurm_state = "CANCELLED"
                job.outcome = Outcome("crash", "cancelled", decision)
        self.status = "finished"

    def log_files(self) -> list[Path]:
        """The existing SLURM log files of every attempt of every job."""
        from oellm_autoexp.slurm.log_pattern import fill_log_pattern

        logs: list[Path] = []
        for job in self.jobs.values():
            job_ids = [a.job_id for a in job.attempts] + ([job.job_id] if job.job_id else [])
            for jid in job_ids:
                path = Path(fill_log_pattern(job.log_path, str(jid), job.slurm_name))
                if path.exists():
                    logs.append(path)
        return logs

    def to_dict(self) -> dict[str, Any]:
        """The session file's content."""
        return {
            "format": SESSION_FORMAT,
            "version": SESSION_VERSION,
            "session_id": self.session_id,
            "project": self.project,
            "created_at": self.created_at,
            "base_output_dir": self.base_output_dir,
            "status": self.status,
            "config": self.config,
            "monitoring": self.monitoring,
            "plan": self.plan.to_dict() if self.plan is not None else {},
            "jobs": [job.to_dict() for job in self.jobs.values()],
            "excluded_nodes": self.excluded_nodes,
            "intents": [intent.to_dict() for intent in self.intents],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        """Read a session file's content; raises KeyError/TypeError/ValueError on bad data."""
        jobs: dict[str, JobRecord] = {}
        for index, raw in enumerate(data["jobs"]):
            try:
                job = JobRecord.from_dict(raw)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"jobs[{index}]: {exc}") from None
            jobs[job.key] = job
        return cls(
            session_id=str(data["session_id"]),
            project=str(data["project"]),
            base_output_dir=str(data["base_output_dir"]),
            created_at=str(data["created_at"]),
            config=dict(data.get("config") or {}),
            monitoring=dict(data.get("monitoring") or {}),
            plan=_plan_of(data.get("plan")),
            jobs=jobs,
            status=str(data.get("status", "active")),
            excluded_nodes=[str(n) for n in data.get("excluded_nodes") or []],
            intents=intents_from_list(data.get("intents")),
        )


def _plan_of(raw: Any) -> Plan | None:
    """A session file's plan (`{}`: none); malformed content raises ValueError, naming it."""
    if not raw:
        return None
    try:
        return Plan.from_dict(raw)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"plan: {type(exc).__name__} {exc}") from None

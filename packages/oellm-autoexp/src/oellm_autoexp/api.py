"""The public Python API: plan, submit, monitor, status, cancel — the CLI is a shell over these.

Another package (aorta's SLURM executor) drives oellm-autoexp through these functions with its
own `SlurmClient` (real, fake, or its own) and its own `Reporter`; nothing here prints. Every
function raises `AutoexpError` subclasses for failures (`exit_code` says which kind).

    result = plan("experiment.yaml", ["sweep=lr_grid"])            # artifacts written
    submitted = submit(result, client, reporter=my_reporter)         # session created, queued
    store = submitted.store
    monitor_until_done(store, client, reporter=my_reporter)          # restarts by policy
    rows = status(store)                                             # one JobStatus per job
    cancel(store, client, session_ids=[submitted.session.session_id])
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oellm_autoexp.api_plan import plan, plan_streamed
from oellm_autoexp.errors import EXIT_OK, EXIT_RUN_FAILED, AutoexpUsageError, one_line
from oellm_autoexp.reporting import NullReporter, Reporter

if TYPE_CHECKING:
    from oellm_autoexp.monitor.controller import MonitorController
    from oellm_autoexp.persistence import Session, SessionStore
    from oellm_autoexp.persistence.session import JobRecord
    from oellm_autoexp.plan import Plan
    from oellm_autoexp.planning import PlanResult
    from oellm_autoexp.slurm.client import SlurmClient


@dataclass(frozen=True)
class SubmitResult:
    """A submitted plan: its session, where it is stored, and how many jobs SLURM confirmed."""

    session: Session
    store: SessionStore
    confirmed: int
    # `chain=N`: the later links' sessions (each waits for the one before: afterany).
    chained: tuple[Session, ...] = ()
    # `if_active="attach"` found an active session of the same plan: nothing was submitted.
    attached: bool = False

    @property
    def complete(self) -> bool:
        """Whether SLURM confirmed every job (else the next monitor resolves the rest)."""
        return self.confirmed == len(self.session.jobs)


@dataclass(frozen=True)
class MonitorResult:
    """The sessions one monitor call drove, and the jobs it focused on (`job=`), if any."""

    sessions: list[Session]
    focus: list[JobRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether a (focused) job ended failed."""
        from oellm_autoexp.persistence.states import MonitorState

        jobs = self.focus or [j for s in self.sessions for j in s.jobs.values()]
        return any(j.state is MonitorState.FAILED for j in jobs)


@dataclass(frozen=True)
class JobStatus:
    """One row of `status`: a job as its session last recorded it."""

    session_id: str
    name: str
    slurm_id: str | None  # the current attempt's, else the last one's
    state: str
    slurm_state: str | None
    restarts: Mapping[str, int]
    outcome_mode: str | None
    outcome_error_type: str | None
    stage: str | None = None  # the job's stage in a multi-stage config
    # Where `slurm_state` comes from: "record" (the session file), "slurm" (asked now), or
    # "gone" (asked now: SLURM no longer knows the id; `slurm_state` is the recorded one).
    slurm_state_source: str = "record"


# `submit(if_active=...)`: what to do when an earlier session of the same plan is active.
IF_ACTIVE_REFUSE, IF_ACTIVE_ATTACH, IF_ACTIVE_NEW = "refuse", "attach", "new"
IF_ACTIVE = (IF_ACTIVE_REFUSE, IF_ACTIVE_ATTACH, IF_ACTIVE_NEW)


def store_for_config(config: Mapping[str, Any], output_root: Path) -> SessionStore:
    """The session store of a plan's project (`project.state_dir`, else under the output root)."""
    from oellm_autoexp.monitor.session_builder import store_for

    return store_for(config, output_root)


def submit(
    planned: PlanResult | Plan,
    client: SlurmClient,
    *,
    config: Mapping[str, Any] | None = None,
    reporter: Reporter | None = None,
    monitor: bool = False,
    sleep: Callable[[float], None] | None = None,
    array_subset: str | None = None,
    chain: int = 1,
    if_active: str = IF_ACTIVE_REFUSE,
) -> SubmitResult:
    """Create a session for a written plan and submit every script through `client`.

    `planned` is `plan`'s result, or a `Plan` read back from ``plan.json`` together with its
    dumped resolved `config` (``config.yaml``), as the container runner does on the host.

    Each job's intent is saved before its sbatch, so a crash or an unanswered sbatch never
    loses or duplicates a job (`SubmitResult.confirmed` counts what SLURM confirmed). With
    `monitor=True` it then monitors until every job is finished (`sleep` between polls).

    `array_subset` (``"3,5-7"``, the plan's job indices) submits only those jobs, as one array
    per script. `chain=N` submits the (selected) jobs N times, each submission a session of its
    own whose jobs wait for the previous submission's job to end (``--dependency=afterany``):
    a long run split into time-limited pieces that resume from their checkpoints.

    `if_active` says what happens when an earlier session of the same plan (same plan id) is
    still active with unfinished jobs among those to submit: ``"refuse"`` (an
    `AutoexpUsageError` naming it; nothing submitted), ``"attach"`` (submit nothing; return
    that session, monitored to its end with `monitor=True`), ``"new"`` (submit anyway).
    """
    from oellm_autoexp.monitor.session_builder import submit_plan
    from oellm_autoexp.plan import Plan
    from oellm_autoexp.submit_options import check_chain, parse_subset

    if isinstance(planned, Plan):
        if config is None:
            raise AutoexpUsageError("submit: a Plan needs its resolved config (config=...)")
        the_plan, the_config = planned, config
    else:
        the_plan, the_config = planned.plan, planned.config
    links = check_chain(chain)
    only = None
    if array_subset is not None:
        only = parse_subset(array_subset, [job.index for job in the_plan.jobs])
    say = reporter or NullReporter()
    store = store_for_config(the_config, the_plan.output_root)
    wanted = {job.job_id for job in the_plan.jobs if only is None or job.index in only}
    earlier = _earlier_sessions(store, the_plan.plan_id, wanted, if_active, say)
    if earlier:
        return _attach(store, client, earlier, say, monitor=monitor, sleep=sleep)
    sessions: list[Session] = []
    depends_on: dict[str, str] | None = None
    for link in range(links):
        session = submit_plan(
            the_plan,
            the_config,
            client,
            store=store,
            monitor=monitor and links == 1,
            sleep=sleep,
            after_poll=say.action,
            only=only,
            depends_on=depends_on,
        )
        sessions.append(session)
        depends_on = {k: j.job_id for k, j in session.jobs.items() if j.job_id is not None}
        if link + 1 < links and len(depends_on) < len(session.jobs):
            say.warning(
                f"session {session.session_id}: not every job was confirmed submitted; "
                f"the chain stops after {link + 1} of {links} submission(s)"
            )
            break
        if links > 1:
            after = f" (after {sessions[-2].session_id}, afterany)" if link else ""
            say.info(f"chain {link + 1}/{links}: session {session.session_id}{after}")
    if monitor and links > 1:
        monitor_until_done(
            store, client, session_ids=[s.session_id for s in sessions], reporter=say, sleep=sleep
        )
        sessions = [store.load(s.session_id) for s in sessions]
    session = sessions[0]
    confirmed = sum(1 for j in session.jobs.values() if j.job_id is not None or j.attempts)
    outcome = SubmitResult(session, store, confirmed, tuple(sessions[1:]))
    if outcome.complete:
        say.info(f"session {session.session_id}: {len(session.jobs)} job(s) submitted")
    else:
        say.warning(
            f"session {session.session_id}: {confirmed} of {len(session.jobs)} job(s) confirmed "
            "submitted; SLURM did not answer for the rest. Resolve with: oellm-autoexp monitor "
            f"--monitor-session {session.session_id}"
        )
    return outcome


def earlier_submission(
    planned: PlanResult,
    *,
    array_subset: str | None = None,
    if_active: str = IF_ACTIVE_REFUSE,
    reporter: Reporter | None = None,
) -> list[Session]:
    """The active sessions `submit(planned, ..., if_active=...)` would attach to (none: it
    submits); raises its refusal for ``"refuse"``. Lets a caller refuse before asking anything."""
    from oellm_autoexp.submit_options import parse_subset

    the_plan = planned.plan
    only = None
    if array_subset is not None:
        only = parse_subset(array_subset, [job.index for job in the_plan.jobs])
    wanted = {job.job_id for job in the_plan.jobs if only is None or job.index in only}
    store = store_for_config(planned.config, the_plan.output_root)
    return _earlier_sessions(store, the_plan.plan_id, wanted, if_active, reporter or NullReporter())


def active_sessions_of(
    store: SessionStore, plan_id: str, job_keys: set[str], reporter: Reporter | None = None
) -> list[Session]:
    """The active sessions in `store` of plan `plan_id` with an unfinished job in `job_keys`
    (oldest first): submitting those jobs again would queue them twice."""
    say = reporter or NullReporter()
    found = []
    for session in store.load_readable(store.ids(), lambda exc: say.warning(f"skipping: {exc}")):
        if (
            session.status != "active"
            or (session.plan.plan_id if session.plan else None) != plan_id
        ):
            continue
        if any(not job.finished for key, job in session.jobs.items() if key in job_keys):
            found.append(session)
    return sorted(found, key=lambda s: s.created_at)


def _earlier_sessions(
    store: SessionStore, plan_id: str, job_keys: set[str], if_active: str, say: Reporter
) -> list[Session]:
    """The active sessions to attach to (none: submit); raises for ``"refuse"``."""
    if if_active not in IF_ACTIVE:
        raise AutoexpUsageError(f"if_active must be one of {', '.join(IF_ACTIVE)}: {if_active!r}")
    if if_active == IF_ACTIVE_NEW:
        return []
    earlier = active_sessions_of(store, plan_id, job_keys, say)
    if earlier and if_active == IF_ACTIVE_REFUSE:
        ids = ", ".join(s.session_id for s in earlier)
        unfinished = sum(1 for s in earlier for j in s.jobs.values() if not j.finished)
        raise AutoexpUsageError(
            f"plan {plan_id} is already submitted: session {ids} is active ({unfinished} "
            "unfinished job(s)); --attach monitors it, --new-session submits the jobs again"
        )
    return earlier


def _attach(
    store: SessionStore,
    client: SlurmClient,
    earlier: list[Session],
    say: Reporter,
    *,
    monitor: bool,
    sleep: Callable[[float], None] | None,
) -> SubmitResult:
    """`if_active="attach"`: the earlier sessions instead of a new submission."""
    ids = [s.session_id for s in earlier]
    say.info(f"attached to session {', '.join(ids)} of the same plan; nothing submitted")
    if monitor:
        monitor_until_done(store, client, session_ids=ids, reporter=say, sleep=sleep)
        earlier = [store.load(sid) for sid in ids]
    first = earlier[0]
    confirmed = sum(1 for j in first.jobs.values() if j.job_id is not None or j.attempts)
    return SubmitResult(first, store, confirmed, tuple(earlier[1:]), attached=True)


def monitor_once(
    store: SessionStore,
    client: SlurmClient,
    *,
    session_ids: Sequence[str] | None = None,
    job: str | None = None,
    reporter: Reporter | None = None,
    clock: Callable[[], float] | None = None,
) -> MonitorResult:
    """One poll of the active sessions in `store` (or of `session_ids`): submit, observe, decide.

    `clock` replaces `time.time` (a test's fake clock, shared with a fake SLURM client).
    """
    return _monitor(store, client, session_ids, job, reporter, once=True, sleep=None, clock=clock)


def monitor_until_done(
    store: SessionStore,
    client: SlurmClient,
    *,
    session_ids: Sequence[str] | None = None,
    job: str | None = None,
    reporter: Reporter | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> MonitorResult:
    """Poll until every job of the sessions (or the job named `job`) is finished.

    `job` is a job name, key or SLURM id; only the sessions holding it are monitored. A session
    locked by another monitor is skipped with a warning, unless it was asked for by id or job.
    `sleep` waits between polls and `clock` tells the time (defaults: `time.sleep`, `time.time`).
    """
    return _monitor(store, client, session_ids, job, reporter, once=False, sleep=sleep, clock=clock)


def _monitor(
    store: SessionStore,
    client: SlurmClient,
    session_ids: Sequence[str] | None,
    job: str | None,
    reporter: Reporter | None,
    *,
    once: bool,
    sleep: Callable[[float], None] | None,
    clock: Callable[[], float] | None,
) -> MonitorResult:
    import time

    from oellm_autoexp.monitor.controller import MonitorController
    from oellm_autoexp.persistence.session import find_jobs

    say = reporter or NullReporter()
    explicit = bool(session_ids) or job is not None
    ids = list(session_ids) if session_ids else store.ids()
    if job is not None:
        readable = store.load_readable(ids, lambda exc: say.warning(f"skipping: {exc}"))
        ids = [session.session_id for session in readable if find_jobs([session], job)]
        if not ids:
            raise AutoexpUsageError(f"no job named {job!r} in the sessions in {store.state_dir}")
    with _locked_sessions(store, ids, say, explicit=explicit, active_only=not session_ids) as (
        sessions
    ):
        if not sessions:
            return MonitorResult([])
        controller = MonitorController(client, store, sessions, clock=clock or time.time)
        focus = find_jobs(sessions, job) if job is not None else []
        _drive(controller, say, once=once, sleep=sleep, focus=focus)
    return MonitorResult(sessions, focus)


def _drive(
    controller: MonitorController,
    say: Reporter,
    *,
    once: bool,
    sleep: Callable[[float], None] | None,
    focus: Sequence[JobRecord] = (),
) -> None:
    """Poll once or until done, handing each poll's actions to the reporter at once."""
    import time

    def after_poll(_report: object) -> None:
        for action in controller.drain_actions():
            say.action(action)

    if once:
        after_poll(controller.poll_once())
        return
    until = (lambda: all(j.finished for j in focus)) if focus else None
    controller.run(after_poll=after_poll, until=until, sleep=sleep or time.sleep)


@contextlib.contextmanager
def _locked_sessions(
    store: SessionStore, ids: Sequence[str], say: Reporter, *, explicit: bool, active_only: bool
) -> Iterator[list[Session]]:
    """Lock and (re-)read the sessions; skip inactive ones and, unless explicit, locked ones."""
    from oellm_autoexp.persistence import SessionLockedError
    from oellm_autoexp.persistence.store import SessionCorruptError

    with contextlib.ExitStack() as stack:
        sessions = []
        locked: list[SessionLockedError] = []
        for sid in ids:
            try:
                if active_only and not store.load(sid).active:
                    continue
                stack.enter_context(store.lock(sid))
                # Re-read under the lock: the previous holder may have written since.
                sessions.append(store.load(sid))
            except SessionLockedError as exc:
                if explicit:
                    raise
                locked.append(exc)
            except SessionCorruptError as exc:
                if explicit:
                    raise
                say.warning(f"skipping a corrupt session file: {exc}")
        if not sessions and locked:  # nothing to do because another monitor has it all
            raise locked[0]  # one line: the error alone, no "skipping" before it
        for refusal in locked:
            say.warning(f"skipping: {refusal}")
        yield sessions


def status(
    store: SessionStore,
    *,
    session_ids: Sequence[str] | None = None,
    reporter: Reporter | None = None,
    client: SlurmClient | None = None,
) -> list[JobStatus]:
    """Every job of the sessions in `store` (or of `session_ids`), as last recorded.

    With a `client`, the SLURM state of every job whose record is not final (queued, running,
    or last seen so) is asked in one `query` (one squeue, and sacct where accounting exists),
    so a job cancelled or ended while no monitor ran shows what SLURM says now. Nothing is
    written: the records change only under a monitor. If SLURM does not answer, the recorded
    states are listed with one warning. A session file that cannot be read is reported (a
    warning) and the others are listed.
    """
    say = reporter or NullReporter()
    rows = []
    sessions = (
        [store.load(sid) for sid in session_ids]
        if session_ids is not None
        else store.load_readable(store.ids(), lambda exc: say.warning(f"skipping: {exc}"))
    )
    for session in sessions:
        for job in session.jobs.values():
            rows.append(
                JobStatus(
                    session_id=session.session_id,
                    name=job.name,
                    slurm_id=job.last_slurm_id,
                    state=job.state.value,
                    slurm_state=job.slurm_state,
                    restarts=dict(job.restarts),
                    outcome_mode=job.outcome.mode if job.outcome else None,
                    outcome_error_type=job.outcome.error_type if job.outcome else None,
                    stage=job.stage.name if job.stage else None,
                )
            )
    return rows if client is None else _reconciled(rows, client, say)


def _reconciled(rows: list[JobStatus], client: SlurmClient, say: Reporter) -> list[JobStatus]:
    """`rows` with SLURM's current state of each job whose recorded state is not final."""
    import dataclasses

    from oellm_autoexp.errors import AutoexpError
    from oellm_autoexp.slurm.client import TERMINAL_STATES

    ask = sorted({r.slurm_id for r in rows if r.slurm_id and r.slurm_state not in TERMINAL_STATES})
    if not ask:
        return rows
    try:
        answer = client.query(ask)
    except AutoexpError as exc:  # no squeue, no controller: the records are all there is
        say.warning(f"SLURM did not answer ({one_line(str(exc))}); showing the recorded states")
        return rows
    out = []
    for row in rows:
        info = answer.jobs.get(row.slurm_id or "")
        if info is not None:
            out.append(dataclasses.replace(row, slurm_state=info.state, slurm_state_source="slurm"))
        elif row.slurm_id in answer.unknown:
            out.append(dataclasses.replace(row, slurm_state_source="gone"))
        else:
            out.append(row)
    return out


def cancel(
    store: SessionStore,
    client: SlurmClient,
    *,
    session_ids: Sequence[str] | None = None,
    reporter: Reporter | None = None,
    reason: str = "cancelled",
) -> list[str]:
    """`scancel` the live jobs of the sessions and mark them failed (cancelled); their ids.

    `reason` becomes the jobs' outcome `decision` (the CLI's cleanup says "cancelled by cleanup").
    """
    say = reporter or NullReporter()
    cancelled: list[str] = []
    for sid in list(session_ids) if session_ids else store.ids():
        with store.lock(sid):
            session = store.load(sid)
            live = session.live_job_ids()
            if not live:
                continue
            client.cancel(live)
            session.mark_cancelled(live, reason, time.time())
            store.save(session)
            say.info(f"session {sid}: cancelled {', '.join(live)}")
            cancelled.extend(live)
    return cancelled


def exit_code(result: MonitorResult | Sequence[Session]) -> int:
    """The run's exit code: 1 when a (focused) job failed, else 0."""
    if isinstance(result, MonitorResult):
        return EXIT_RUN_FAILED if result.failed else EXIT_OK
    return exit_code(MonitorResult(list(result)))


__all__ = [
    "JobStatus",
    "MonitorResult",
    "NullReporter",
    "Reporter",
    "SubmitResult",
    "cancel",
    "exit_code",
    "monitor_once",
    "monitor_until_done",
    "plan",
    "plan_streamed",
    "status",
    "store_for_config",
    "submit",
]

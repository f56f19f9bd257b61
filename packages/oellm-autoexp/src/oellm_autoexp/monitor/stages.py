"""Start conditions of later stages, as the monitor sees them (see `sweep.stages`).

SLURM enforces ``start: completed``: a later stage's job is submitted as soon as the earlier
stage's job has a SLURM id, with ``--dependency=afterok:<that id>``. Two things SLURM cannot
know are decided here, once per poll:

- a restart of the earlier job gets a new SLURM id, and ``afterok`` on the failed attempt can
  never be satisfied: a later job still pending on it is cancelled and held, and resubmitted
  against the restarted job (`relink`); once the earlier stage failed for good, the later one
  is cancelled and failed with the reason;
- ``start: checkpoint`` waits for a file, which the monitor checks before it submits.

`gate` is pure; `relink` changes job records and returns the SLURM ids to cancel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from oellm_autoexp.persistence.session import Attempt, JobRecord, Outcome, StageState
from oellm_autoexp.persistence.states import MonitorState
from oellm_autoexp.sweep.stages import START_CHECKPOINT, START_COMPLETED

log = logging.getLogger("oellm_autoexp.monitor")
# SLURM states in which a waiting later-stage job can still be cancelled and resubmitted
# without losing work (None: submitted, not yet seen by a query).
_NOT_STARTED = (None, "PENDING")


@dataclass(frozen=True)
class Gate:
    """Whether a later-stage job may be submitted now, and on what it then depends."""

    go: bool
    after_id: str | None = None  # SLURM id for --dependency=afterok (None: no dependency)
    fail: str | None = None  # why its start condition can never hold


def gate(job: JobRecord, upstream: JobRecord | None, exists: Callable[[str], bool]) -> Gate:
    """The start condition of `job` given its earlier stage's record (None: not submitted
    with it, e.g. ``--array-subset``) and a file-existence check."""
    stage = job.stage
    if stage is None or stage.after is None:
        return Gate(True)
    if stage.start == START_CHECKPOINT:
        return _checkpoint_gate(stage, upstream, exists)
    return _completed_gate(upstream)


def _checkpoint_gate(
    stage: StageState, upstream: JobRecord | None, exists: Callable[[str], bool]
) -> Gate:
    if stage.start_file and exists(stage.start_file):
        return Gate(True)
    if upstream is None or upstream.finished:
        whose = f"stage job {upstream.name}" if upstream else "the earlier stage"
        return Gate(False, fail=f"{whose} ended without writing {stage.start_file}")
    return Gate(False)


def _completed_gate(upstream: JobRecord | None) -> Gate:
    if upstream is None:  # not part of this submission: nothing to wait for
        return Gate(True)
    if upstream.finished:
        if upstream.state is MonitorState.COMPLETED:
            return Gate(True)
        return Gate(False, fail=f"stage job {upstream.name} failed: {_why(upstream)}")
    # No id yet (not submitted, or a restart is pending): nothing to depend on yet.
    return Gate(upstream.job_id is not None, after_id=upstream.job_id)


def _why(job: JobRecord) -> str:
    if job.outcome is None:
        return "no outcome recorded"
    return job.outcome.decision or job.outcome.error_type or job.outcome.mode


def waits_on_stage(job: JobRecord) -> bool:
    """Whether `job`'s next submission carries a stage dependency (first submissions only)."""
    stage = job.stage
    if stage is None or job.attempts:
        return False
    return stage.start == START_COMPLETED and stage.after_slurm_id is not None


def stage_dependency(job: JobRecord) -> str | None:
    """The ``--dependency`` term of a later stage's first submission, or None.

    An array task whose earlier job is the task with the same index of one array waits with
    ``aftercorr:<array>`` (the same condition as ``afterok`` on that task), so a whole stage
    of a sweep is one sbatch; any other job waits with ``afterok:<id>``.
    """
    if job.stage is None or not waits_on_stage(job):
        return None
    upstream = str(job.stage.after_slurm_id)
    base, _, task = upstream.partition("_")
    if job.array_index is not None and task == str(job.array_index):
        return f"aftercorr:{base}"
    return f"afterok:{upstream}"


def relink(
    jobs: Mapping[str, JobRecord],
    exists: Callable[[str], bool],
    set_state: Callable[[JobRecord, MonitorState, str], None],
    now: float,
) -> tuple[list[str], int]:
    """Cancel, hold or fail stage jobs whose conditions changed since the last poll.

    Returns the SLURM ids to cancel and how many job records changed.

    A job whose `cancel_file` exists is cancelled (queued or running) and failed. A job
    queued with ``afterok`` on an earlier attempt that ended unsuccessfully is cancelled while
    it has not started: held (resubmitted by the next `gate` against the restart) or, when the
    earlier stage failed for good, failed. An unsubmitted job whose condition can never hold is
    failed. A job SLURM already started is left alone (SLURM saw an exit code 0 that the
    monitor classified otherwise, e.g. a missing completion marker).
    """
    to_cancel: list[str] = []
    changed = 0
    for job in jobs.values():
        stage = job.stage
        if stage is None or job.finished or job.submit_token:
            continue
        if stage.cancel_file and exists(stage.cancel_file):
            to_cancel += _end(job, f"cancelled: {stage.cancel_file} exists", set_state, now)
            changed += 1
            continue
        if stage.after is None or job.attempts:
            continue
        upstream = jobs.get(stage.after)
        if job.job_id is None:
            verdict = gate(job, upstream, exists)
            if verdict.fail:
                _end(job, f"not started: {verdict.fail}", set_state, now)
                changed += 1
            continue
        superseded = _superseded(job, upstream)
        if superseded is None or upstream is None:
            continue
        changed += 1
        if job.slurm_state not in _NOT_STARTED:
            stage.after_slurm_id = None  # SLURM started it: nothing left to re-link
            continue
        if upstream.finished:
            reason = f"not started: stage job {upstream.name} failed: {_why(upstream)}"
            to_cancel += _end(job, reason, set_state, now)
            continue
        detail = (
            f"held: {job.job_id} waited for {superseded} of {upstream.name}, which is being "
            "restarted; cancelled, resubmitted after the restart"
        )
        log.info("job %s: %s", job.name, detail)
        to_cancel.append(str(job.job_id))
        job.job_id, job.slurm_state, stage.after_slurm_id = None, None, None
        job.record_transition(now, job.state.value, MonitorState.PENDING.value, detail)
        job.state = MonitorState.PENDING
    return to_cancel, changed


def _superseded(job: JobRecord, upstream: JobRecord | None) -> str | None:
    """The earlier attempt `job` is queued on (afterok), if it ended unsuccessfully."""
    if job.stage is None or not waits_on_stage(job) or upstream is None:
        return None
    ended = [a for a in upstream.attempts if a.job_id == job.stage.after_slurm_id]
    if not ended or ended[-1].mode == "success":
        return None
    return ended[-1].job_id


def _end(
    job: JobRecord,
    decision: str,
    set_state: Callable[[JobRecord, MonitorState, str], None],
    now: float,
) -> list[str]:
    """Fail `job` for a stage condition; the SLURM id to cancel, if it was queued or running.

    A cancelled submission is kept as the job's last attempt (status shows its SLURM id).
    """
    queued = job.job_id
    if queued is not None:
        job.attempts.append(
            Attempt(queued, "CANCELLED", "crash", {"error_type": "stage_condition"}, now)
        )
    job.job_id, job.next_submit_at = None, None
    if job.stage is not None:
        job.stage.after_slurm_id = None
    job.slurm_state = "CANCELLED" if queued is not None else None
    job.outcome = Outcome("crash", "stage_condition", decision)
    set_state(job, MonitorState.FAILED, decision)
    return [queued] if queued is not None else []


__all__ = ["Gate", "gate", "relink", "stage_dependency", "waits_on_stage"]

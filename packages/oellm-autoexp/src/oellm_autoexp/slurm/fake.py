"""A scripted SLURM for fault-injection tests and benchmarks (the spec's fake_slurm_backend).

Time is a `FakeClock` the test advances; every job follows a `Timeline` (how long it pends and
runs, how it ends, what it writes to its log and when it stops writing). Nothing runs: at each
`query` the fake works out every job's state from the clock and appends the log lines that are
due. Command failures are injected with `fail_next`. It answers through the same
`SlurmClient` interface as the real commands, and counts its calls the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oellm_autoexp.slurm.client import (
    JobInfo,
    QueryResult,
    SlurmClient,
    SlurmCommandError,
    SubmissionError,
    SubmitRequest,
    dependency_targets,
    expand_array_spec,
)


class FakeClock:
    """A monotonic clock the test moves by hand; the monitor reads the same clock."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward (the monitor's `sleep` may be bound to this)."""
        self.now += seconds


@dataclass(frozen=True)
class Timeline:
    """What one job (or array task) does once submitted.

    The job pends `pending_s`, then runs; while running it appends `heartbeat` to `log_path`
    every `log_every_s` seconds until `stall_after_s` (then it keeps RUNNING but writes
    nothing: a hang). `log_lines` are (seconds after start, text) written once each. After
    `run_s` it ends in `end_state` with `exit_code` and `reason`. `run_s=None` runs until
    cancelled. It runs on `nodes` (a SLURM hostlist: a scripted bad node for node tests).
    """

    pending_s: float = 0.0
    run_s: float | None = 10.0
    end_state: str = "COMPLETED"
    exit_code: int = 0
    reason: str = "None"
    log_path: Path | None = None
    log_every_s: float | None = 1.0
    heartbeat: str = "step ok"
    stall_after_s: float | None = None
    log_lines: Sequence[tuple[float, str]] = ()
    nodes: str = "node001"


# Decides the timeline of each new job or task: (request, its display id such as "1000" or
# "1000_3", attempt number of this job name and task, starting at 0) -> Timeline.
TimelineFactory = Callable[[SubmitRequest, str, int], Timeline]


@dataclass
class _FakeJob:
    key: str
    request: SubmitRequest
    timeline: Timeline
    submitted_at: float
    array_job_id: str | None
    task: int | None
    cancelled_at: float | None = None
    written_until: float = -1.0
    lines_done: set[int] = field(default_factory=set)
    # `--dependency` terms as SLURM reads them: (afterok|afterany|aftercorr, the job waited for).
    after: tuple[tuple[str, _FakeJob], ...] = ()
    excluded: str | None = None  # set by `scontrol update ... ExcNodeList=` (exclude_nodes)

    def started_at(self) -> float | None:
        """When it starts: after `pending_s` and after its dependencies allow (None: not yet
        known, or never, as SLURM's DependencyNeverSatisfied)."""
        start = self.submitted_at + self.timeline.pending_s
        for kind, other in self.after:
            end = other.ended_at()
            if end is None or (kind != "afterany" and not other.ended_ok()):
                return None
            start = max(start, end)
        return start

    def ended_ok(self) -> bool:
        """Whether it ended (or will end) COMPLETED with exit code 0 (afterok's condition)."""
        end, tl = self.ended_at(), self.timeline
        cancelled = self.cancelled_at is not None and end == self.cancelled_at
        return (
            end is not None and not cancelled and tl.end_state == "COMPLETED" and not tl.exit_code
        )

    def ended_at(self) -> float | None:
        run_end = None
        started = self.started_at()
        if self.timeline.run_s is not None and started is not None:
            run_end = started + self.timeline.run_s
        if self.cancelled_at is not None and (run_end is None or self.cancelled_at < run_end):
            return self.cancelled_at
        return run_end

    def info(self, now: float) -> JobInfo:
        end = self.ended_at()
        started = self.started_at()
        start = float("inf") if started is None else started
        if end is not None and now >= end:
            if self.cancelled_at is not None and end == self.cancelled_at:
                state, code, reason = "CANCELLED", 0, "None"
            else:
                tl = self.timeline
                state, code, reason = tl.end_state, tl.exit_code, tl.reason
        elif now >= start:
            state, code, reason = "RUNNING", None, "None"
        else:
            state, code, reason = "PENDING", None, "Dependency" if self.after else "Priority"
        return JobInfo(
            job_id=self.key,
            state=state,
            reason=reason,
            name=self.request.job_name,
            comment=self.request.comment or "",
            exit_code=code,
            start_time=start if now >= start else None,
            end_time=end if end is not None and now >= end else None,
            array_job_id=self.array_job_id,
            array_task_id=self.task,
            nodes=self.timeline.nodes if now >= start else "",
        )


def _submitted_exclude(request: SubmitRequest) -> str | None:
    """The ``--exclude=`` a submission asked for (the last one wins, as in sbatch)."""
    given = [a.split("=", 1)[1] for a in request.extra_args if a.startswith("--exclude=")]
    return given[-1] if given else None


class FakeSlurmClient(SlurmClient):
    """The fake cluster. `forget_after_s` mimics MinJobAge (None: finished jobs stay visible)."""

    def __init__(
        self,
        clock: FakeClock,
        timelines: TimelineFactory | None = None,
        *,
        forget_after_s: float | None = None,
        first_job_id: int = 1000,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.timelines: TimelineFactory = timelines or (lambda _req, _task, _n: Timeline())
        self.forget_after_s = forget_after_s
        self.jobs: dict[str, _FakeJob] = {}
        self.submissions: list[tuple[str, SubmitRequest]] = []
        self.fail_next: dict[str, int] = {}
        self.reject_submit: str | None = None
        self._ids = itertools.count(first_job_id)
        self._attempts: dict[str, int] = {}

    # -- fault injection -------------------------------------------------------------------
    def _maybe_fail(self, command: str) -> None:
        self.calls[command] += 1
        if self.fail_next.get(command, 0) > 0:
            self.fail_next[command] -= 1
            raise SlurmCommandError(f"{command} failed 4 times; last: timed out after 30 s")

    def user_scancel(self, job_id: str) -> None:
        """A person runs `scancel` (not counted as a monitor call)."""
        self.jobs[job_id].cancelled_at = self.clock()

    # -- SlurmClient ----------------------------------------------------------------------
    def submit(self, request: SubmitRequest) -> str:
        self._maybe_fail("sbatch")
        if self.reject_submit is not None:
            raise SubmissionError(f"sbatch rejected {request.script}: {self.reject_submit}")
        base = str(next(self._ids))
        now = self.clock()
        tasks: list[int | None] = (
            list(expand_array_spec(request.array)) if request.array else [None]
        )
        for task in tasks:
            attempt_key = f"{request.job_name}#{task}"
            attempt = self._attempts.get(attempt_key, 0)
            self._attempts[attempt_key] = attempt + 1
            key = base if task is None else f"{base}_{task}"
            self.jobs[key] = _FakeJob(
                key=key,
                request=request,
                timeline=self.timelines(request, key, attempt),
                submitted_at=now,
                array_job_id=base if task is not None else None,
                task=task,
                after=tuple(dependency_targets(request.extra_args, task, self.jobs)),
            )
        self.submissions.append((base, request))
        return base

    def _visible(self, job: _FakeJob, now: float) -> bool:
        end = job.ended_at()
        if self.forget_after_s is None or end is None or now < end:
            return True
        return now - end < self.forget_after_s

    def query(self, job_ids: Iterable[str]) -> QueryResult:
        self._maybe_fail("squeue")
        now = self.clock()
        self.write_logs()
        result = QueryResult()
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is not None and self._visible(job, now):
                result.jobs[job_id] = job.info(now)
            else:
                result.unknown.add(job_id)
        return result

    def find_by_comment(self, comments: Iterable[str]) -> dict[str, list[JobInfo]]:
        self._maybe_fail("squeue")
        wanted, now = set(comments), self.clock()
        found: dict[str, list[JobInfo]] = {}
        for job in self.jobs.values():
            if job.request.comment in wanted and self._visible(job, now):
                found.setdefault(job.request.comment or "", []).append(job.info(now))
        return found

    def cancel(self, job_ids: Iterable[str]) -> None:
        self._maybe_fail("scancel")
        now = self.clock()
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is not None and (job.ended_at() is None or now < (job.ended_at() or 0)):
                job.cancelled_at = now

    def exclude_nodes(self, job_ids: Iterable[str], nodes: str) -> list[str]:
        updated = []
        now = self.clock()
        for job_id in sorted(set(job_ids)):
            self._maybe_fail("scontrol")
            job = self.jobs.get(job_id)
            if job is not None and job.info(now).state == "PENDING":
                job.excluded = nodes
                updated.append(job_id)
        return updated

    def show(self, job_id: str) -> Mapping[str, str]:
        self._maybe_fail("scontrol")
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmCommandError(f"scontrol show job {job_id}: Invalid job id specified")
        info = job.info(self.clock())
        return {
            "JobId": info.job_id,
            "JobState": info.state,
            "Reason": info.reason,
            "JobName": info.name,
            "Comment": info.comment,
            "ExcNodeList": job.excluded or _submitted_exclude(job.request) or "(null)",
        }

    # -- log writing ----------------------------------------------------------------------
    def write_logs(self) -> None:
        """Append every log line that is due by now (heartbeats and scripted lines)."""
        now = self.clock()
        for job in self.jobs.values():
            tl = job.timeline
            if tl.log_path is None:
                continue
            start = job.started_at()
            if start is None or now < start:
                continue
            end = job.ended_at()
            upto = now if end is None else min(now, end)
            lines: list[str] = []
            if tl.log_every_s:
                quiet_from = start + tl.stall_after_s if tl.stall_after_s is not None else upto
                last = min(upto, quiet_from)
                if last > job.written_until:
                    lines.append(tl.heartbeat)
                    job.written_until = last
            for index, (offset, text) in enumerate(tl.log_lines):
                if index not in job.lines_done and start + offset <= upto:
                    job.lines_done.add(index)
                    lines.append(text)
            if lines:
                tl.log_path.parent.mkdir(parents=True, exist_ok=True)
                with tl.log_path.open("a", encoding="utf-8") as handle:
                    handle.write("".join(f"{line}\n" for line in lines))

"""Submission: due jobs to sbatch calls, with crash-safe intents (`submit_token`).

A submission is recorded as an intent (`submit_token`, also passed to sbatch as the job
comment) before sbatch runs and as a job id after, so a monitor killed at any point resumes
without losing or duplicating a job (`_reconcile`).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from oellm_autoexp.monitor.core import ControllerCore, SessionRuntime
from oellm_autoexp.monitor.node_exclusions import (
    add_project_exclusions,
    load_project_exclusions,
    merged_nodes,
    queued_job_ids,
)
from oellm_autoexp.monitor.node_health import exclude_argument
from oellm_autoexp.monitor.stages import gate as stage_gate
from oellm_autoexp.monitor.stages import relink as relink_stages
from oellm_autoexp.monitor.stages import stage_dependency
from oellm_autoexp.persistence.session import JobRecord, Outcome
from oellm_autoexp.persistence.states import MonitorState
from oellm_autoexp.slurm.client import (
    JobInfo,
    SlurmNotInstalledError,
    SubmissionError,
    SubmitRequest,
)

log = logging.getLogger("oellm_autoexp.monitor")

# Submission rounds per poll: each round can release the next stage (stage chains are short).
MAX_STAGE_ROUNDS = 16


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


class Submission(ControllerCore):
    """Submitting due jobs (intent saved before sbatch, ids after), reconciling submissions a
    crash left open, stage gates, and the node exclusions every submission carries."""

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
        self, batches: list[tuple[SessionRuntime, list[JobRecord], str]], now: float
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

    def _batches(self, now: float) -> list[tuple[SessionRuntime, list[JobRecord], str]]:
        """Due jobs grouped into sbatch calls, each with a fresh submission token set."""
        batches: list[tuple[SessionRuntime, list[JobRecord], str]] = []
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

    def _released(self, rt: SessionRuntime, job: JobRecord) -> bool:
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

    def _excluded(self, rt: SessionRuntime, project: list[str] | None = None) -> list[str]:
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
            exclude = exclude_argument(rt.session.slurm.exclude, self._excluded(rt, project))
            if queued and exclude:
                updated = self.client.exclude_nodes(queued, exclude)
                log.warning(
                    "session %s: queued job(s) %s now exclude %s (scontrol update)",
                    rt.session.session_id,
                    ", ".join(updated) or "none (all started meanwhile)",
                    exclude,
                )

    def _submit_group(
        self, rt: SessionRuntime, jobs: list[JobRecord], token: str, now: float
    ) -> int:
        first = jobs[0]
        extra: list[str] = []
        if first.time_limit:
            extra.append(f"--time={first.time_limit}")
        exclude = exclude_argument(rt.session.slurm.exclude, self._excluded(rt))
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
            array += rt.session.slurm.array_throttle
        request = SubmitRequest(
            script=Path(first.script),
            job_name=first.slurm_name,
            array=array,
            comment=token,
            extra_args=tuple(extra),
            submit_cmd=rt.session.slurm.submit_cmd,
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

"""Decisions: an ended attempt is recorded and becomes done, failed, or a scheduled restart.

Restart policies (`policies`), the global cap, `on_match: restart` signals, node exclusions
after node-level failures, and the backend's rewritten restart command meet here.
"""

from __future__ import annotations

import logging

from oellm_autoexp.errors import AutoexpError
from oellm_autoexp.monitor.classify import Classification
from oellm_autoexp.monitor.core import SessionRuntime
from oellm_autoexp.monitor.node_health import decide_exclusions, node_level_failure
from oellm_autoexp.monitor.policies import RestartContext, policy_for
from oellm_autoexp.monitor.submission import Submission
from oellm_autoexp.persistence.session import Attempt, JobRecord, Outcome
from oellm_autoexp.persistence.states import Mode, MonitorState

log = logging.getLogger("oellm_autoexp.monitor")


class Decisions(Submission):
    """What happens after an attempt ended: success, failure, or a restart by policy."""

    def _finish_attempt(
        self,
        rt: SessionRuntime,
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

    def _update_exclusions(self, rt: SessionRuntime) -> None:
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
        self, rt: SessionRuntime, job: JobRecord, cls: Classification, reason: str
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

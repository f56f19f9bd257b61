"""`run_trials` for a command workload: one fresh process group per trial, same contract.

Each trial renders the command (`{seed}`, `{trial_id}`, `{steps}`, `{output_dir}`, `{cell}`),
runs it with the launcher's environment, then the trial's seed variables (`AORTA_SEED`,
`PYTHONHASHSEED`), then the mitigations' variables, then `extra_env` on top, and writes the
same `trial_<id>.json` as any workload. `{output_dir}` is the trial's own directory
`trial_<id>/` next to the JSON; the output goes to `trial_<id>.log`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from aorta.atomic import write_json_atomic
from aorta.errors import AortaUsageError
from aorta.instrumentation.locate_record import LOCATE_DIR_VAR, read_locate_dir
from aorta.instrumentation.redaction import redact_argv, redact_embedded_secrets, redact_environ
from aorta.runner.command.logtail import last_line, log_tail
from aorta.runner.command.scanner import Match
from aorta.runner.command.spec import CommandSpec, check_placeholders, render_argv
from aorta.runner.command.trial import CommandTrialOutcome, run_command_trial
from aorta.runner.environ import merge_env, with_seed
from aorta.runner.host import collect_host
from aorta.runner.in_process import utc_timestamp
from aorta.runner.models import Execution, RunRequest, TrialResult
from aorta.runner.ownership import owning_trial
from aorta.runner.reporting import TrialReporter, step_hook
from aorta.runner.resolve import request_mitigations


def trial_directory(request: RunRequest, trial_id: int) -> Path:
    """The trial's `{output_dir}`: `trial_<id>/` next to its JSON."""
    return request.output_dir / f"trial_{trial_id}"


def locate_directory(request: RunRequest, trial_id: int) -> Path:
    """A fresh directory for this attempt's locate records (`AORTA_LOCATE_DIR`).

    Fresh per attempt, next to the trial's JSON: a resumed trial never merges the records
    an interrupted attempt left behind.
    """
    request.output_dir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"trial_{trial_id}.locate.", dir=request.output_dir))


def trial_argv(request: RunRequest, trial_id: int) -> list[str]:
    """The argv trial `trial_id` of a command request runs: the command, then the cell's
    `command_args`, with every placeholder filled (`--dry-run` shows it for trial 0)."""
    spec = request.command
    assert spec is not None  # a command request
    values = {
        "seed": request.trial_seed(trial_id),
        "trial_id": trial_id,
        "steps": request.steps,
        "output_dir": str(trial_directory(request, trial_id).resolve()),
        "cell": request.cell,
    }
    return render_argv([*spec.command, *request.command_args], values)


def _match_record(match: Match | None) -> dict[str, Any] | None:
    """A matched log line as recorded: a secret the job printed is redacted like its log."""
    if match is None:
        return None
    return {**asdict(match), "line": redact_embedded_secrets(match.line)}


def command_record(out: CommandTrialOutcome) -> dict[str, Any]:
    """The `command` field of a command trial's JSON."""
    return {
        "argv": redact_argv(out.argv),  # a secret passed as `--hf-token X` stays out
        "returncode": out.returncode,
        "stopped": out.stopped,
        "signal_needed": out.signal_needed,
        "failure_match": _match_record(out.failure),
        "error_match": _match_record(out.error),
        "clock": out.clock,
        "step_format": out.step_format,
        "warnings": out.warnings,
        "steps_seen": out.steps_seen,
        "last_step": out.last_step,
        "log": out.log_path.name if out.log_path is not None else None,
        "artifacts": out.artifacts,
        "output_bytes": out.output_bytes,
        # Trials with identical output are copies of one run (`aorta.triage.analysis.independence`).
        "log_digest": out.log_digest,
    }


def _check_request(request: RunRequest) -> CommandSpec:
    spec = request.command
    assert spec is not None  # only command requests are opened here
    environment = request.environment_name
    if environment != "local":
        raise AortaUsageError(
            f"environment {environment!r}: command workloads run in the local environment "
            "only (put the container or venv in the command itself)"
        )
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise AortaUsageError(
            "command workloads are launched by aorta; do not run aorta itself under torchrun "
            "(put torchrun in the command)"
        )
    check_placeholders(request.command_args, "command_args")
    return spec


@dataclass
class CommandTrialSession:
    """A command workload's request, checked once; each `run` is one fresh process group."""

    request: RunRequest
    spec: CommandSpec
    reporter: TrialReporter
    trial_env: dict[str, str]  # the cell's variables; each trial adds its seed's (`with_seed`)
    process_env: dict[str, str]

    @property
    def execution(self) -> Execution:
        """A command always runs in its own process."""
        return "child_process"

    def run(self, trial_id: int) -> TrialResult:
        """Run trial `trial_id` of the command and write its `trial_<id>.json`."""
        request, reporter = self.request, self.reporter
        seed = request.trial_seed(trial_id)
        reporter.trial_started(request, trial_id, seed)
        env = with_seed(self.trial_env, seed)
        locate_dir = locate_directory(request, trial_id) if request.locate else None
        if locate_dir is not None:
            env[LOCATE_DIR_VAR] = str(locate_dir)
        started_at = utc_timestamp()
        with owning_trial(request.output_dir, trial_id) as owner:
            out = run_command_trial(
                self.spec,
                trial_argv(request, trial_id),
                {**self.process_env, **env},
                log_path=request.output_dir / f"trial_{trial_id}.log",
                trial_dir=trial_directory(request, trial_id),
                steps=request.steps,
                on_step=step_hook(reporter, trial_id),
                owner=owner,
            )
            result = self._result(request, trial_id, env, started_at, out)
            if locate_dir is not None:
                result = replace(result, first_nonfinite=read_locate_dir(locate_dir))
            write_json_atomic(request.trial_path(trial_id), result.to_dict())
        reporter.trial_finished(result)
        return result

    def _result(
        self,
        request: RunRequest,
        trial_id: int,
        env: dict[str, str],
        started_at: str,
        out: CommandTrialOutcome,
    ) -> TrialResult:
        reason, tail = out.reason, None
        if out.outcome == "error":
            # Why it crashed is in the log's last lines: the tail goes where a traceback goes
            # (error.txt), its last line into the one-line reason.
            tail = log_tail(out.log_path)
            last = last_line(tail)
            if reason is not None and last is not None and last not in reason:
                reason = f"{reason}; last output: {last}"
        return TrialResult(
            trial_id=trial_id,
            workload=request.workload,
            mitigations=request.mitigations,
            environment=request.environment_name,
            seed=request.trial_seed(trial_id),
            steps=request.steps,
            passed=out.outcome == "passed",
            outcome=out.outcome,
            # The reason quotes the matched or last log line: redacted like the log tail.
            failure=redact_embedded_secrets(reason) if reason is not None else None,
            traceback=tail,
            step_times_ms=out.step_times_ms,
            warmup_steps=out.warmup_steps,
            losses=out.losses,
            wall_clock_sec=out.wall_clock_sec,
            started_at=started_at,
            # Recorded, never re-applied: a recipe's extra_env may carry a secret.
            env_applied=redact_environ(env),
            env_snapshot={},
            observed={},
            execution="child_process",
            step_clock=out.clock,
            failed_at_step=out.failure.at_step if out.failure is not None else None,
            command=command_record(out),
            # The driver imports no torch, so the GPU tools name the node's GPUs.
            host=collect_host(self.process_env, ask_gpu_tools=True),
            host_load=out.host_load,
        )


def open_command_trials(request: RunRequest, reporter: TrialReporter) -> CommandTrialSession:
    """Check a command workload's request once (see `aorta.runner.open_trials`)."""
    spec = _check_request(request)
    mitigations = request_mitigations(request)
    trial_env = merge_env(mitigations, request.extra_env)
    request.output_dir.mkdir(parents=True, exist_ok=True)
    return CommandTrialSession(
        request=request,
        spec=spec,
        reporter=reporter,
        trial_env=trial_env,
        process_env={**os.environ, **trial_env},
    )

"""`SlurmClient` over the real SLURM commands.

One poll = one ``squeue --json --states=all --me`` for every job of every session (plus at most
one ``sacct`` for ids squeue has already forgotten, when accounting is available). The JSON
layout differs between SLURM releases (22.05 prints plain numbers and state strings, 23.02+
wraps numbers in ``{"set", "infinite", "number"}`` and states in lists); `parse_squeue_json`
reads both.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oellm_autoexp.slurm.client import (
    JobInfo,
    QueryResult,
    SlurmClient,
    SlurmCommandError,
    SubmissionError,
    SubmitRequest,
    expand_array_spec,
)
from oellm_autoexp.slurm.commands import CommandResult, RetryPolicy, resolve, run_command

log = logging.getLogger(__name__)

# stderr fragments of failures that say nothing about the job itself (controller busy or down).
_TRANSIENT = re.compile(
    r"socket timed out|unable to contact slurm controller|connection refused|"
    r"temporarily unavailable|try again|slurm_persist_conn|communication|"
    r"resource temporarily|timed out|zero bytes were transmitted",
    re.IGNORECASE,
)


def _transient(result: CommandResult) -> bool:
    return bool(_TRANSIENT.search(result.stderr))


def _number(value: Any) -> int | None:
    """An integer from 22.05 (plain) or 23.02+ (``{"set", "infinite", "number"}``) JSON."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _state(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else "UNKNOWN"
    return str(value or "UNKNOWN").split()[0]


def _exit(value: Any) -> tuple[int | None, int | None]:
    """(return code, signal) from a job's ``exit_code`` field."""
    if isinstance(value, dict) and "return_code" in value:
        sig = value.get("signal", {})
        sig_id = sig.get("id") if isinstance(sig, dict) else None
        return _number(value.get("return_code")), _number(sig_id)
    # 22.05 prints the raw wait status: return code in the high byte, signal in the low bits.
    status = _number(value)
    if status is None:
        return None, None
    return status >> 8, (status & 0x7F) or None


def _record(raw: Mapping[str, Any], job_id: str, task: int | None) -> JobInfo:
    code, sig = _exit(raw.get("exit_code"))
    limit = _number(raw.get("time_limit"))
    start, end = _number(raw.get("start_time")), _number(raw.get("end_time"))
    array_id = _number(raw.get("array_job_id"))
    return JobInfo(
        job_id=job_id,
        state=_state(raw.get("job_state")),
        reason=str(raw.get("state_reason") or ""),
        name=str(raw.get("name") or ""),
        comment=str(raw.get("comment") or ""),
        exit_code=code,
        signal=sig,
        time_limit_s=None if limit is None else limit * 60,
        start_time=float(start) if start else None,
        end_time=float(end) if end else None,
        array_job_id=str(array_id) if array_id else None,
        array_task_id=task,
        nodes=str(raw.get("nodes") or ""),
    )


def parse_squeue_json(text: str) -> dict[str, JobInfo]:
    """Every job and array task in ``squeue --json`` output, keyed by display id (``A_T``).

    A collapsed record of still-pending array tasks (``array_task_string`` = ``"4-7"``) yields one
    PENDING record per task.
    """
    data = json.loads(text)
    jobs: dict[str, JobInfo] = {}
    for raw in data.get("jobs", []):
        array_id = _number(raw.get("array_job_id"))
        task = _number(raw.get("array_task_id"))
        if array_id and task is not None:
            key = f"{array_id}_{task}"
            jobs[key] = _record(raw, key, task)
        elif array_id and raw.get("array_task_string"):
            for pending in expand_array_spec(str(raw["array_task_string"])):
                key = f"{array_id}_{pending}"
                jobs.setdefault(key, _record(raw, key, pending))
        else:
            key = str(_number(raw.get("job_id")))
            jobs[key] = _record(raw, key, None)
    return jobs


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """``sacct -X -n -P -o JobID,State,ExitCode,Timelimit,Comment,NodeList`` rows by job id."""
    jobs: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        job_id, state, exit_text = parts[0], parts[1], parts[2]
        code_text, _, sig_text = exit_text.partition(":")
        jobs[job_id] = JobInfo(
            job_id=job_id,
            state=_state(state),
            reason=" ".join(state.split()[1:]),
            comment=parts[4] if len(parts) > 4 else "",
            nodes=parts[5] if len(parts) > 5 else "",
            exit_code=int(code_text) if code_text.isdigit() else None,
            signal=int(sig_text) if sig_text.isdigit() and int(sig_text) else None,
        )
    return jobs


def parse_scontrol(text: str) -> dict[str, str]:
    """``scontrol show job -o`` output as a dict (the first record)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return dict(re.findall(r"(\S+?)=(\S*)", line))


class RealSlurmClient(SlurmClient):
    """The SLURM commands, each with a timeout and retries (see `RetryPolicy`)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        use_sacct: bool | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.env = dict(env) if env is not None else dict(os.environ)
        self.retry = retry or RetryPolicy()
        # None: use sacct when installed, and stop after the first "accounting disabled" answer.
        self.use_sacct = use_sacct
        self.sleep = sleep

    def _bin(self, name: str) -> str:
        return resolve(name, self.env)

    def _run(self, name: str, *args: str, retry_if: Any = _transient) -> CommandResult:
        """One SLURM command with the client's retry policy (`retry_if` None: retry all)."""
        self.calls[name] += 1
        return run_command(
            [self._bin(name), *args],
            retry=self.retry,
            env=self.env,
            retry_if=retry_if,
            sleep=self.sleep,
        )

    def submit(self, request: SubmitRequest) -> str:
        """``sbatch --parsable``; a refused script raises `SubmissionError` with sbatch's stderr.

        When sbatch times out, the job may still have been queued: before trying again, the
        request's comment token is looked up in squeue and a job found there is adopted.
        """
        args = ["--parsable", f"--job-name={request.job_name}"]
        if request.array:
            args.append(f"--array={request.array}")
        if request.comment:
            args.append(f"--comment={request.comment}")
        args += [*request.extra_args, str(request.script)]
        single = RetryPolicy(
            attempts=1, timeout_s=self.retry.timeout_s, backoff_s=self.retry.backoff_s
        )
        tokens = shlex.split(request.submit_cmd) or ["sbatch"]
        sbatch = [resolve(tokens[0], self.env), *tokens[1:]]
        for delay in [*self.retry.delays(), None]:
            self.calls["sbatch"] += 1
            try:
                # One attempt; a non-zero exit comes back as a result (judged below), only a
                # timeout raises.
                result = run_command(
                    [*sbatch, *args], retry=single, env=self.env, retry_if=lambda _r: False
                )
            except SlurmCommandError as exc:  # timeout: maybe submitted, maybe not
                failure = str(exc)
                if request.comment:
                    found = self.find_by_comment([request.comment]).get(request.comment)
                    if found:
                        return found[0].array_job_id or found[0].job_id.split("_")[0]
            else:
                if result.returncode == 0:
                    return result.stdout.strip().split(";")[0]
                failure = result.stderr.strip() or result.stdout.strip()
                if not _transient(result):
                    raise SubmissionError(
                        f"sbatch rejected {request.script}: {' '.join(failure.split())}"
                    )
            if delay is None:
                break
            log.warning("sbatch failed transiently (%s); retrying in %.1f s", failure, delay)
            self.sleep(delay)
        raise SubmissionError(f"sbatch failed for {request.script}: {' '.join(failure.split())}")

    def _squeue_all(self) -> dict[str, JobInfo]:
        # Any failure of a read-only query is worth retrying (retry_if=None).
        result = self._run("squeue", "--json", "--states=all", "--me", retry_if=None)
        try:
            return parse_squeue_json(result.stdout)
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise SlurmCommandError(f"squeue --json printed unreadable output: {exc}") from None

    def query(self, job_ids: Iterable[str]) -> QueryResult:
        wanted = set(job_ids)
        known = self._squeue_all()
        result = QueryResult(jobs={k: v for k, v in known.items() if k in wanted})
        missing = wanted - result.jobs.keys()
        if missing and self._sacct_enabled():
            result.jobs.update(self._sacct(missing))
            missing -= result.jobs.keys()
        result.unknown = missing
        return result

    def _sacct_enabled(self) -> bool:
        if self.use_sacct is None:
            self.use_sacct = shutil.which("sacct", path=self.env.get("PATH")) is not None
        return bool(self.use_sacct)

    def _sacct(self, job_ids: set[str]) -> dict[str, JobInfo]:
        args = ["-X", "-n", "-P", "-o", "JobID,State,ExitCode,Timelimit,Comment,NodeList"]
        try:
            result = self._run("sacct", *args, "-j", ",".join(sorted(job_ids)), retry_if=_transient)
        except SlurmCommandError as exc:
            log.warning("sacct unavailable (%s); finished jobs are read from squeue only", exc)
            return {}
        if result.returncode != 0:
            # "Slurm accounting storage is disabled": no slurmdbd; stop asking.
            log.info("sacct answered %r; not using sacct", result.stderr.strip())
            self.use_sacct = False
            return {}
        return {k: v for k, v in parse_sacct(result.stdout).items() if k in job_ids}

    def find_by_comment(self, comments: Iterable[str]) -> dict[str, list[JobInfo]]:
        wanted = set(comments)
        found: dict[str, list[JobInfo]] = {}
        for info in self._squeue_all().values():
            if info.comment in wanted:
                found.setdefault(info.comment, []).append(info)
        return found

    def cancel(self, job_ids: Iterable[str]) -> None:
        ids = sorted(set(job_ids))
        if ids:
            # A job that already ended makes scancel exit non-zero; that is not an error here.
            self._run("scancel", *ids, retry_if=_transient)

    def exclude_nodes(self, job_ids: Iterable[str], nodes: str) -> list[str]:
        # One `scontrol update` per job: SLURM refuses the whole call when one of several ids
        # started meanwhile ("Job is no longer pending execution"), which is expected here.
        updated = []
        for job_id in sorted(set(job_ids)):
            result = self._run(
                "scontrol", "update", f"JobId={job_id}", f"ExcNodeList={nodes}", retry_if=_transient
            )
            if result.returncode == 0:
                updated.append(job_id)
        return updated

    def show(self, job_id: str) -> Mapping[str, str]:
        result = self._run("scontrol", "show", "job", "-o", job_id, retry_if=_transient)
        if result.returncode != 0:
            raise SlurmCommandError(f"scontrol show job {job_id}: {result.stderr.strip()}")
        return parse_scontrol(result.stdout)

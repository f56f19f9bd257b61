"""Run one SLURM command with a timeout, retrying transient failures with backoff.

SLURM commands fail transiently on busy clusters (slurmctld not responding, socket timeouts).
Every call here has a timeout; a non-zero exit or a timeout is retried with exponential backoff,
and only after the last attempt does the caller see an error. Callers decide what a final
failure means; for polling it means "no news", never "job failed".
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from oellm_autoexp.slurm.client import SlurmCommandError, SlurmNotInstalledError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry one command."""

    attempts: int = 4
    timeout_s: float = 30.0
    backoff_s: float = 1.0
    backoff_factor: float = 2.0
    max_backoff_s: float = 30.0

    def delays(self) -> list[float]:
        """The sleeps between attempts (one fewer than `attempts`)."""
        out, delay = [], self.backoff_s
        for _ in range(max(self.attempts - 1, 0)):
            out.append(min(delay, self.max_backoff_s))
            delay *= self.backoff_factor
        return out


@dataclass(frozen=True)
class CommandResult:
    """What a finished command printed."""

    stdout: str
    stderr: str
    returncode: int


def resolve(program: str, env: Mapping[str, str] | None = None) -> str:
    """The full path of a SLURM program, or `SlurmNotInstalledError` naming it."""
    path = shutil.which(program, path=(env or {}).get("PATH"))
    if path is None:
        raise SlurmNotInstalledError(
            f"SLURM is not installed here: {program!r} is not on PATH "
            "(run on a SLURM login node, or use the fake backend for a dry run)"
        )
    return path


def run_command(
    argv: Sequence[str],
    *,
    retry: RetryPolicy,
    env: Mapping[str, str] | None = None,
    retry_if: Callable[[CommandResult], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> CommandResult:
    """Run `argv`; retry on timeout or non-zero exit (or when `retry_if` says so).

    Returns the first successful result. A non-zero exit that `retry_if` rejects is returned
    at once (sbatch refusing a bad script is final, not transient). After the last attempt a
    `SlurmCommandError` names the command and its last stderr.
    """
    delays = retry.delays()
    last = ""
    for attempt in range(retry.attempts):
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=retry.timeout_s,
                env=dict(env) if env is not None else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            last = f"timed out after {retry.timeout_s:g} s"
        except FileNotFoundError:
            raise SlurmNotInstalledError(
                f"SLURM is not installed here: {argv[0]!r} not found"
            ) from None
        else:
            result = CommandResult(done.stdout, done.stderr, done.returncode)
            if done.returncode == 0:
                return result
            if retry_if is not None and not retry_if(result):
                return result
            last = f"exit {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
        if attempt < len(delays):
            log.warning(
                "%s failed (%s); retry %d/%d in %.1f s",
                argv[0].rsplit("/", 1)[-1],
                last,
                attempt + 1,
                retry.attempts - 1,
                delays[attempt],
            )
            sleep(delays[attempt])
    raise SlurmCommandError(
        f"{' '.join(argv[:2])} failed {retry.attempts} times; last: {' '.join(last.split())}"
    )

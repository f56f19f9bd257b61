"""Every SLURM command has a timeout and is retried with backoff; final failures are typed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oellm_autoexp.slurm.client import SlurmCommandError, SlurmNotInstalledError
from oellm_autoexp.slurm.commands import CommandResult, RetryPolicy, resolve, run_command


def _flaky(tmp_path: Path, failures: int, *, stderr: str = "Socket timed out") -> list[str]:
    """A real program that fails `failures` times (counter in a file), then prints ok."""
    counter = tmp_path / "count"
    script = tmp_path / "flaky.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n"
        f'if [ "$n" -lt {failures} ]; then echo "{stderr}" >&2; exit 1; fi\n'
        "echo ok\n"
    )
    script.chmod(0o755)
    return [str(script)]


def test_transient_failures_are_retried_with_growing_backoff(tmp_path: Path) -> None:
    sleeps: list[float] = []
    retry = RetryPolicy(attempts=4, timeout_s=5, backoff_s=0.5, backoff_factor=2)
    result = run_command(_flaky(tmp_path, 2), retry=retry, sleep=sleeps.append)
    assert result.stdout.strip() == "ok"
    assert sleeps == [0.5, 1.0]
    assert (tmp_path / "count").read_text().strip() == "3"


def test_a_command_that_keeps_failing_raises_after_the_last_attempt(tmp_path: Path) -> None:
    sleeps: list[float] = []
    retry = RetryPolicy(attempts=3, timeout_s=5, backoff_s=1, max_backoff_s=1.5)
    with pytest.raises(SlurmCommandError, match=r"failed 3 times; last: exit 1: Socket timed out"):
        run_command(_flaky(tmp_path, 10), retry=retry, sleep=sleeps.append)
    assert sleeps == [1, 1.5]


def test_a_hung_command_is_killed_at_its_timeout_and_retried(tmp_path: Path) -> None:
    retry = RetryPolicy(attempts=2, timeout_s=0.3, backoff_s=0)
    with pytest.raises(SlurmCommandError, match=r"timed out after 0\.3 s"):
        run_command(["sleep", "5"], retry=retry, sleep=lambda _s: None)


def test_a_final_error_is_not_retried_when_retry_if_rejects_it(tmp_path: Path) -> None:
    calls: list[float] = []

    def transient(result: CommandResult) -> bool:
        return "timed out" in result.stderr

    result = run_command(
        _flaky(tmp_path, 5, stderr="Invalid partition name"),
        retry=RetryPolicy(attempts=4),
        retry_if=transient,
        sleep=calls.append,
    )
    assert result.returncode == 1
    assert "Invalid partition name" in result.stderr
    assert calls == []


def test_missing_slurm_is_a_usage_error_naming_the_program() -> None:
    with pytest.raises(SlurmNotInstalledError, match="'sbatch' is not on PATH") as info:
        resolve("sbatch", {"PATH": os.devnull})
    assert info.value.exit_code == 2

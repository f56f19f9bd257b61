"""The `-- CMD` of `aorta run` and `aorta triage run --mode matrix`: a command workload.

Everything after `--` is the command (argv, never a shell); three options carry the settings
a flag-mode user most needs. The full set (patterns, artifacts, log retention, ...) is in a
recipe's `workload:` mapping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

STEP_TIME_CHOICES = ("megatron", "hf", "jsonl")


def command_options(func: F) -> F:
    """Add `COMMAND...` (after `--`) and --step-time / --hang-after / --trial-timeout."""
    func = click.argument("command", nargs=-1, type=click.UNPROCESSED)(func)
    func = click.option(
        "--trial-timeout",
        type=click.FloatRange(min=0, min_open=True),
        help="Command workloads: seconds per trial before SIGTERM/SIGKILL (error 'timeout').",
    )(func)
    func = click.option(
        "--hang-after",
        type=click.FloatRange(min=0, min_open=True),
        help="Command workloads: seconds without output that make a trial an error 'hang'.",
    )(func)
    func = click.option(
        "--step-time",
        type=click.Choice(STEP_TIME_CHOICES),
        help="Command workloads: the step-line format to time steps and read losses from.",
    )(func)
    return func


def command_mapping(
    command: tuple[str, ...],
    step_time: str | None,
    hang_after: float | None,
    trial_timeout: float | None,
) -> dict[str, Any] | None:
    """The command workload mapping the flags describe; None when no command was given.

    The settings without a command are a usage error (they would be silently ignored).
    """
    settings = {"step_time": step_time, "hang_after": hang_after, "timeout": trial_timeout}
    given = {key: value for key, value in settings.items() if value is not None}
    if not command:
        if given:
            flag = {"step_time": "--step-time", "hang_after": "--hang-after"}.get(
                next(iter(given)), "--trial-timeout"
            )
            raise click.UsageError(f"{flag}: only for a command workload (-- CMD ...)")
        return None
    return {"command": list(command), **given}

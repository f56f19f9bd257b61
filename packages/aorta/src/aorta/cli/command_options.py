"""The `-- CMD` of `aorta run` and `aorta triage run --mode matrix`: a command workload.

Everything after `--` is the command (argv, never a shell); the options below carry the
settings a recipe's `workload:` mapping has for it (`aorta.runner.command.flags` builds and
validates that mapping). The rest (error patterns, artifacts, exit codes, ...) is recipe-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from aorta.runner.command.spec import KEEP_LOGS, STEP_PRESETS, TIME_UNITS

F = TypeVar("F", bound=Callable[..., Any])


def command_options(func: F) -> F:
    """Add `COMMAND...` (after `--`) and the command workload options.

    The callback receives them as `command` plus the keyword arguments that
    `aorta.runner.command.flags.command_mapping` takes.
    """
    options = [
        click.argument("command", nargs=-1, type=click.UNPROCESSED),
        click.option(
            "--trial-timeout",
            type=click.FloatRange(min=0, min_open=True),
            help="Command workloads: seconds per trial before SIGTERM/SIGKILL (error 'timeout').",
        ),
        click.option(
            "--hang-after",
            type=click.FloatRange(min=0, min_open=True),
            help="Command workloads: seconds without output that make a trial an error 'hang'.",
        ),
        click.option(
            "--keep-logs",
            metavar="|".join(KEEP_LOGS),
            help="Command workloads: which trials keep trial_<id>.log (default: failed, every "
            "trial that did not pass).",
        ),
        click.option(
            "--cwd",
            metavar="DIR",
            help="Command workloads: the directory the command runs in (recorded absolute).",
        ),
        click.option(
            "--failure-pattern",
            multiple=True,
            metavar="REGEX",
            help="Command workloads: an output line matching REGEX makes the trial failed; "
            "added to the default patterns. Repeatable.",
        ),
        click.option(
            "--step-time-unit",
            metavar="|".join(TIME_UNITS),
            help="Command workloads, with a --step-time regex: the unit of its time group "
            "(default ms).",
        ),
        click.option(
            "--step-time",
            metavar="PRESET|REGEX",
            help="Command workloads: how to read step times and losses: a preset name "
            f"({', '.join(STEP_PRESETS)}), or a regex with a (?P<time>...) group (and optional "
            "step, loss groups).",
        ),
    ]
    for option in options:
        func = option(func)
    return func

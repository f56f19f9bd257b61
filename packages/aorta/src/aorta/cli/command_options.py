"""The `-- CMD` of `aorta run` and `aorta triage run --mode matrix`: a command workload.

Everything after `--` is the command (argv, never a shell); the options below carry the
settings a recipe's `workload:` mapping has for it (`aorta.runner.command.flags` builds and
validates that mapping). The rest (error patterns, artifacts, exit codes, ...) is recipe-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from aorta.runner.command.flags import COMMAND_FLAGS

F = TypeVar("F", bound=Callable[..., Any])


def command_options(func: F) -> F:
    """Add `COMMAND...` (after `--`) and the command workload options.

    The callback receives them as `command` plus the keyword arguments that
    `aorta.runner.command.flags.command_mapping` takes; the options are built from its
    `COMMAND_FLAGS`, their one declaration.
    """
    kinds: dict[str, dict[str, Any]] = {
        "seconds": {"type": click.FloatRange(min=0, min_open=True)},
        "text": {},
        "repeat": {"multiple": True},
    }
    func = click.argument("command", nargs=-1, type=click.UNPROCESSED)(func)
    # click lists options in the order of their decorators, the innermost first.
    for flag in reversed(COMMAND_FLAGS):
        func = click.option(flag.name, metavar=flag.metavar, help=flag.help, **kinds[flag.kind])(
            func
        )
    return func

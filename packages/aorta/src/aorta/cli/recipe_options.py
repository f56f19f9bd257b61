"""Flag mode's recipe options (`aorta triage run --mode matrix`), built from the recipe's fields.

The names, types, defaults and help of these options come from `aorta.triage.recipe.fields`,
the one declaration the file and resolved readers derive their keys from too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from aorta.triage.recipe.fields import Flag, recipe_flags

F = TypeVar("F", bound=Callable[..., Any])


def _option(flag: Flag) -> Callable[[F], F]:
    if flag.kind == "switch":
        return click.option(flag.name, is_flag=True, default=flag.default, help=flag.help)
    types: dict[str, Any] = {
        "text": None,
        "count": click.IntRange(min=1),
        "number": float,
        "choice": click.Choice(list(flag.choices)),
    }
    return click.option(
        flag.name,
        type=types[flag.kind],
        default=flag.default,
        show_default=flag.default is not None,
        help=flag.help,
    )


def recipe_flag_options(func: F) -> F:
    """Add every flag-mode recipe option, in the order the fields declare them."""
    # click lists options in the order of their decorators, the innermost first.
    for flag in reversed(recipe_flags()):
        func = _option(flag)(func)
    return func


def recipe_flag_params() -> tuple[str, ...]:
    """The parameter names of the flag-mode recipe options (`confound_threshold`, ...)."""
    return tuple(flag.param for flag in recipe_flags())

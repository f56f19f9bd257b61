"""Checks of recipe values: one-line errors `<file>: <key path>: expected ..., got ...`.

`Where` says where a value came from (a recipe file, a run directory's file, or flags with the
flag name as the key path) and raises the error; `Problems` collects several before raising.
A leaf of the recipe package: the readers (`validation`, `serialisation`, `executor`) and
flag mode all check through here.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from aorta.errors import AortaUsageError, UnknownNameError
from aorta.triage.analysis.adaptive_base import ADAPTIVE_RULES, DEFAULT_ADAPTIVE_RULE
from aorta.triage.analysis.confound import alpha_problem, threshold_problem
from aorta.triage.errors import RecipeCellError, RecipeProblemsError, RecipeSchemaError
from aorta.triage.names import NO_TICKET, safe_name_problem
from aorta.triage.recipe.limits import count_limit
from aorta.triage.recipe.model import ORDERS, AdaptiveSettings, Order

_MAX_REPR = 80
_STOP_AFTER_KEYS = ("failures",)
_ADAPTIVE_KEYS = ("max_trials", "rule")
T = TypeVar("T")


_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxlevel = 2
_BOUNDED_REPR.maxstring = _MAX_REPR
_BOUNDED_REPR.maxother = _MAX_REPR


def _short(value: object) -> str:
    # repr() escapes newlines and control characters, which keeps every message on one line;
    # the bounded reprlib variant never renders more than a few elements of a huge value.
    text = _BOUNDED_REPR.repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _describe(value: object) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        kind = {dict: "a mapping", list: "a list", bool: "a boolean"}.get(type(value), "null")
        return f"{kind} {_short(value)}" if value is not None else "null"
    return _short(value)


class Problems:
    """Collects the one-line errors of independent checks, so a recipe reports all at once."""

    def __init__(self) -> None:
        self.found: list[AortaUsageError] = []

    def attempt(self, check: Callable[[], T]) -> T | None:
        """`check()`, or None after recording the usage error it raised."""
        try:
            return check()
        except AortaUsageError as exc:
            self.found.append(exc)
            return None

    def raise_if_any(self) -> None:
        """Raise the one problem found as it is, several as one `RecipeProblemsError`."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise RecipeProblemsError(self.found)


@dataclass(frozen=True)
class Where:
    """Where values come from: a recipe file (prefix) or flags (no prefix)."""

    label: str | None

    def at(self, path: str) -> str:
        return f"{self.label}: {path}" if self.label else path

    def fail(
        self, path: str, expected: str, value: object = ..., *, cell: bool = False
    ) -> NoReturn:
        got = "" if value is ... else f", got {_describe(value)}"
        error = RecipeCellError if cell else RecipeSchemaError
        raise error(f"{self.at(path)}: {expected}{got}")

    def unknown(
        self, error: type[UnknownNameError], path: str, name: str, known: Sequence[str]
    ) -> NoReturn:
        # Keep the registry's error type (callers catch UnknownMitigationError etc.) but put
        # the file and key path in front of its one-line message.
        # A 300 KB name is shown shortened: one line means a readable line.
        shown = name if len(name) <= _MAX_REPR else name[: _MAX_REPR - 3] + "..."
        exc = error(shown, known)
        exc.args = (f"{self.at(path)}: {exc}",)
        raise exc


def join_path(path: str, key: str | int) -> str:
    """`path` extended by a mapping key (`a.b`) or a list index (`a[1]`)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check_keys(
    where: Where, path: str, data: Mapping[Any, Any], allowed: Sequence[str], what: str
) -> None:
    """Refuse any key of `data` outside `allowed`."""
    for key in data:
        if key not in allowed:
            where.fail(
                join_path(path, str(key)) if path else str(key),
                f"unknown key {_short(key)} in {what} (allowed: {', '.join(allowed)})",
            )


def require(where: Where, path: str, data: Mapping[Any, Any], key: str) -> object:
    """`data[key]`, or a "required key is missing" error."""
    if key not in data:
        where.fail(join_path(path, key), "required key is missing")
    return data[key]


def positive_int(where: Where, path: str, value: object) -> int:
    """`value` as a positive int; booleans are refused."""
    # bool is an int subclass in Python; `trials: yes` must not become 1 trial.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        where.fail(path, "expected a positive integer", value)
    # Checked here, before a runner allocates per-trial state for `trials: 10**21`.
    limit = count_limit(path.rsplit(".", 1)[-1].lstrip("-"))
    if limit is not None and value > limit[0]:
        where.fail(path, f"expected at most {limit[0]} (raise it with {limit[1]})", value)
    return value


def order_mode(where: Where, path: str, value: object) -> Order:
    """`value` if it is one of the order modes."""
    for order in ORDERS:
        if value == order:
            return order
    where.fail(path, f"expected one of {', '.join(ORDERS)}", value)


def order_seed(where: Where, path: str, value: object) -> int:
    """A seed for the per-round cell order: an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        where.fail(path, "expected an integer >= 0", value)
    return value


def stop_after_failures(where: Where, path: str, value: object) -> int | None:
    """`stop_after: {failures: K}` -> K; `stop_after: null` (a cell opting out) -> None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        where.fail(path, "expected a mapping {failures: <positive integer>} or null", value)
    check_keys(where, path, value, _STOP_AFTER_KEYS, "stop_after")
    return positive_int(where, join_path(path, "failures"), require(where, path, value, "failures"))


def adaptive_settings(where: Where, path: str, value: object) -> AdaptiveSettings | None:
    """`adaptive: {max_trials: N, rule: R}` -> its settings (`rule` absent: the default);
    absent or null -> None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        where.fail(path, "expected a mapping {max_trials: <positive integer>} or null", value)
    check_keys(where, path, value, _ADAPTIVE_KEYS, "adaptive")
    key = join_path(path, "max_trials")
    max_trials = positive_int(where, key, require(where, path, value, "max_trials"))
    rule = adaptive_rule_name(
        where, join_path(path, "rule"), value.get("rule", DEFAULT_ADAPTIVE_RULE)
    )
    return AdaptiveSettings(max_trials, rule)


def adaptive_rule_name(where: Where, path: str, value: object) -> str:
    """`value` if it names an adaptive rule (`curtailment`, `alpha-spending`)."""
    if value not in ADAPTIVE_RULES:
        where.fail(path, f"expected one of {', '.join(ADAPTIVE_RULES)}", value)
    return str(value)


def adaptive_conflict(
    adaptive: AdaptiveSettings | None, order: str, stop_after: bool, trials: Sequence[int]
) -> tuple[str, str] | None:
    """Why an adaptive recipe cannot run as asked, as (key path, expectation); None if it can.

    Adaptive trials run round by round (interleaved) and are the stopping rule themselves:
    a `stop_after` rule or a cell with another trial count would contradict it.
    """
    if adaptive is None:
        return None
    if order != "interleaved":
        return "order", "adaptive trials need order: interleaved (they run round by round)"
    if stop_after:
        return "stop_after", "choose one stopping rule: adaptive or stop_after, not both"
    if any(n != adaptive.max_trials for n in trials):
        return (
            "trials",
            f"with adaptive, every cell's trials is adaptive.max_trials ({adaptive.max_trials})",
        )
    return None


def boolean(where: Where, path: str, value: object) -> bool:
    """`value` if it is a YAML/JSON boolean (no truthy strings or numbers)."""
    if not isinstance(value, bool):
        where.fail(path, "expected true or false", value)
    return value


def string(where: Where, path: str, value: object) -> str:
    """`value` if it is a string (YAML scalars such as dates are refused, not converted)."""
    if not isinstance(value, str):
        where.fail(path, "expected a string (quote it in YAML)", value)
    return value


def safe_name(where: Where, path: str, value: object) -> str:
    """`value` if it can be a directory name (`names.safe_name_problem`)."""
    name = string(where, path, value)
    problem = safe_name_problem(name)
    if problem:
        where.fail(path, problem, name)
    return name


def ticket_name(where: Where, path: str, value: object) -> str:
    """`value` if it can be a ticket (a safe name other than the no-ticket folder)."""
    ticket = safe_name(where, path, value)
    if ticket == NO_TICKET:
        # The folder of ticket-less runs: a ticket of that name would mix with them.
        where.fail(
            path, f"expected a ticket other than {NO_TICKET!r} (omit the key instead)", value
        )
    return ticket


def _checked_number(
    where: Where, path: str, value: object, problem_of: Callable[[object], str | None]
) -> float:
    problem = problem_of(value)
    if problem:
        where.fail(path, problem, value)
    assert isinstance(value, (int, float))  # for mypy: problem_of checked it
    return float(value)


def valid_alpha(where: Where, path: str, value: object) -> float:
    """A validated significance level (see `confound.alpha_problem`)."""
    return _checked_number(where, path, value, alpha_problem)


def valid_threshold(where: Where, path: str, value: object) -> float:
    """A validated confound threshold (see `confound.threshold_problem`)."""
    return _checked_number(where, path, value, threshold_problem)

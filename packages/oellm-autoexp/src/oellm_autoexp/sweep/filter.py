"""`sweep.filter`: drop sweep combinations with small expressions over their params.

An expression such as ``lr * batch <= 0.5`` or ``model.hidden >= 512 and opt != "sgd"`` is
parsed with `ast` and checked against a whitelist before anything is evaluated; the evaluator
below walks that tree itself. Python's `eval` never sees the text, so a config cannot call
functions, read attributes of objects, import, index or build comprehensions.

Allowed: numbers, strings, booleans, null/None; param names (dotted keys as written in the
sweep, e.g. ``model.hidden``); ``+ - * / // % **`` on numbers; unary ``-``, ``+`` and ``not``;
comparisons (chained too) including ``in`` / ``not in`` against a literal list or tuple;
``and`` / ``or``; ``x if cond else y``. Each expression must evaluate to true or false.
Several expressions (a YAML list) must all hold.

`evaluate_expression` runs the same checked evaluator for the ``oc.eval`` resolver, which also
admits calls of a few pure conversions by bare name (`CALLS`: ``int(x)``, ``round(x, 2)``,
``min(a, b)``...), because upstream configs compute step counts with them. No other call, no
attribute, no keyword argument, no name other than those is accepted there either.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oellm_autoexp.errors import ConfigError

FILTER_KEY = "sweep.filter"
# `2 ** 10 ** 10` would run for minutes: integer powers may produce at most this many bits.
MAX_POWER_BITS = 4096
MAX_CALL_TEXT = 4096

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
# YAML spellings of the constants, as a param value would be written in the sweep.
_NAMED_CONSTANTS = {"true": True, "false": False, "null": None, "True": True, "False": False}
# Pure functions `oc.eval` may call by bare name; the filter admits none.
CALLS: dict[str, Callable[..., Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "round": round,
    "abs": abs,
    "min": min,
    "max": max,
}


@dataclass(frozen=True)
class SweepFilter:
    """One checked expression; `keep(params)` says whether a combination stays."""

    text: str
    key: str
    tree: ast.expr
    names: frozenset[str]

    def keep(self, params: Mapping[str, Any], *, index: int) -> bool:
        """Evaluate for one combination (`index` is only for error messages)."""
        try:
            result = _evaluate(self.tree, params)
        except _EvalError as exc:
            raise ConfigError(
                f"{exc} in combination {index} ({_describe(params)}) of {self.text!r}",
                key=self.key,
            ) from None
        if not isinstance(result, bool):
            raise ConfigError(
                f"{self.text!r} gives {result!r} for combination {index}, expected true or "
                "false (write a comparison, e.g. 'lr * batch <= 0.5')",
                key=self.key,
            )
        return result


class _EvalError(Exception):
    """A failure while evaluating (type mismatch, division by zero, missing param)."""


def compile_filters(raw: str | Sequence[str] | None, known: set[str]) -> list[SweepFilter]:
    """The checked expressions of `sweep.filter` (a string, a list of strings, or null).

    `known`: every param name set by at least one combination; a name outside it is a typo.
    """
    if raw is None:
        return []
    if isinstance(raw, str):
        return [compile_filter(raw, known, key=FILTER_KEY)]
    if not isinstance(raw, Sequence):
        raise ConfigError(
            f"expected an expression string or a list of them, got {type(raw).__name__}",
            key=FILTER_KEY,
        )
    filters = []
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            raise ConfigError(
                f"expected an expression string, got {type(item).__name__} {item!r}",
                key=f"{FILTER_KEY}[{i}]",
            )
        filters.append(compile_filter(item, known, key=f"{FILTER_KEY}[{i}]"))
    return filters


def _parse_checked(text: str, *, key: str, calls: frozenset[str]) -> tuple[ast.expr, set[str]]:
    """The checked syntax tree of `text` and the names it uses; errors name `key`."""
    if not text.strip():
        raise ConfigError("empty expression", key=key)
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ConfigError(f"not a valid expression {text!r}: {exc.msg}", key=key) from None
    names: set[str] = set()
    _check(tree, names, key=key, text=text, calls=calls)
    return tree, names


def compile_filter(text: str, known: set[str], *, key: str = FILTER_KEY) -> SweepFilter:
    """Parse and check one expression (see module docs); errors name `key`."""
    tree, names = _parse_checked(text, key=key, calls=frozenset())
    unknown = sorted(names - known - set(_NAMED_CONSTANTS))
    if unknown:
        listing = ", ".join(sorted(known)) or "(none)"
        raise ConfigError(
            f"{text!r} uses {unknown[0]!r}, which is not a sweep param (params: {listing})",
            key=key,
        )
    return SweepFilter(text=text, key=key, tree=tree, names=frozenset(names & known))


def filter_points(
    raw: str | Sequence[str] | None, points: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The combinations of `points` that `sweep.filter` (`raw`) keeps, in order."""
    known = {key for point in points for key in point}
    return list(filtered(compile_filters(raw, known), [dict(point) for point in points]))


def filtered(
    filters: Sequence[SweepFilter], points: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """The combinations every filter keeps, in order, one at a time (a sweep is streamed).

    A filter that keeps nothing is a config error: an empty plan is never what was meant.
    """
    if not filters:  # no `sweep.filter`: no per-point test to run
        yield from points
        return
    total = kept = 0
    for total, point in enumerate(points, 1):
        if all(f.keep(point, index=total - 1) for f in filters):
            kept += 1
            yield point
    if filters and not kept:
        raise ConfigError(
            f"keeps none of the {total} combinations; loosen the expression", key=FILTER_KEY
        )


def evaluate_expression(text: str, *, key: str) -> Any:
    """The value of a literal expression (``oc.eval``): checked like a filter, plus `CALLS`.

    Its `${...}` interpolations are already resolved, so it names no params; errors name `key`.
    """
    text = str(text)
    tree, names = _parse_checked(text, key=key, calls=frozenset(CALLS))
    unknown = sorted(names - set(_NAMED_CONSTANTS))
    if unknown:
        raise ConfigError(
            f"{text!r} uses the name {unknown[0]!r}; only literals, arithmetic and calls of "
            f"{', '.join(sorted(CALLS))} are allowed",
            key=key,
        )
    try:
        return _evaluate(tree, {})
    except _EvalError as exc:
        raise ConfigError(f"{exc} in {text!r}", key=key) from None


def _check(
    node: ast.AST, names: set[str], *, key: str, text: str, calls: frozenset[str] = frozenset()
) -> None:
    """Reject anything outside the whitelist; collect the param names used.

    `calls`: the names of `CALLS` that may be called (positional arguments only).
    """
    dotted = _dotted_name(node)
    if dotted is not None:
        names.add(dotted)
        return
    if isinstance(node, ast.Constant):
        if node.value is not None and not isinstance(node.value, int | float | str | bool):
            raise ConfigError(f"{text!r}: constant {node.value!r} is not allowed", key=key)
        return
    children: list[ast.AST]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        children = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        children = [node.operand]
    elif isinstance(node, ast.BoolOp):
        children = list(node.values)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        children = [node.left, *node.comparators]
    elif isinstance(node, ast.IfExp):
        children = [node.test, node.body, node.orelse]
    elif isinstance(node, ast.List | ast.Tuple):
        children = list(node.elts)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in calls
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    ):
        children = list(node.args)
    else:
        snippet = ast.get_source_segment(text.strip(), node) or type(node).__name__
        allowed = f"calls of {', '.join(sorted(calls))}" if calls else "sweep param names"
        raise ConfigError(
            f"{text!r}: {snippet!r} is not allowed (only arithmetic, comparisons, and/or/not, "
            f"literals and {allowed})",
            key=key,
        )
    for child in children:
        _check(child, names, key=key, text=text, calls=calls)


def _dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a plain name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _evaluate(node: ast.AST, params: Mapping[str, Any]) -> Any:
    dotted = _dotted_name(node)
    if dotted is not None:
        if dotted in params:
            return params[dotted]
        if dotted in _NAMED_CONSTANTS:
            return _NAMED_CONSTANTS[dotted]
        raise _EvalError(f"param {dotted!r} is not set")
    handler = _HANDLERS.get(type(node))
    if handler is None:  # unreachable after `_check`; kept so a gap there cannot run code
        raise _EvalError(f"unexpected {type(node).__name__}")
    return handler(node, params)


def _constant(node: Any, _params: Mapping[str, Any]) -> Any:
    return node.value


def _bool_op(node: Any, params: Mapping[str, Any]) -> Any:
    want_all = isinstance(node.op, ast.And)
    value: Any = want_all
    for item in node.values:
        value = _evaluate(item, params)
        if bool(value) != want_all:  # short-circuit like Python
            return value
    return value


def _unary(node: Any, params: Mapping[str, Any]) -> Any:
    return _apply(_UNARY[type(node.op)], _evaluate(node.operand, params))


def _binary(node: Any, params: Mapping[str, Any]) -> Any:
    left, right = _evaluate(node.left, params), _evaluate(node.right, params)
    # Arithmetic on numbers only: `"x" * 10**9` would allocate a gigabyte.
    for operand in (left, right):
        if not isinstance(operand, int | float):
            raise _EvalError(f"arithmetic needs numbers, got {operand!r}")
    if isinstance(node.op, ast.Pow) and _huge_power(left, right):
        raise _EvalError(f"{left!r} ** {right!r} is too large")
    return _apply(_BINARY[type(node.op)], left, right)


def _compare(node: Any, params: Mapping[str, Any]) -> bool:
    left = _evaluate(node.left, params)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(comparator, params)
        if not _apply(_COMPARE[type(op)], left, right):
            return False
        left = right
    return True


def _if_else(node: Any, params: Mapping[str, Any]) -> Any:
    chosen = node.body if _evaluate(node.test, params) else node.orelse
    return _evaluate(chosen, params)


def _sequence(node: Any, params: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(_evaluate(item, params) for item in node.elts)


def _call(node: Any, params: Mapping[str, Any]) -> Any:
    # Only names in the fixed `CALLS` table are looked up, never the builtins themselves.
    function = CALLS.get(node.func.id) if isinstance(node.func, ast.Name) else None
    if function is None or node.keywords:  # unreachable after `_check`
        raise _EvalError(f"unexpected call {ast.dump(node.func)}")
    args = [_evaluate(arg, params) for arg in node.args]
    for arg in args:  # int("9" * 10**6) and friends: conversions of text stay small
        if isinstance(arg, str) and len(arg) > MAX_CALL_TEXT:
            raise _EvalError(f"a text argument of {len(arg)} characters is too long")
    return _apply(function, *args)


_HANDLERS: dict[type[ast.AST], Callable[[Any, Mapping[str, Any]], Any]] = {
    ast.Constant: _constant,
    ast.BoolOp: _bool_op,
    ast.UnaryOp: _unary,
    ast.BinOp: _binary,
    ast.Compare: _compare,
    ast.IfExp: _if_else,
    ast.List: _sequence,
    ast.Tuple: _sequence,
    ast.Call: _call,
}


def _huge_power(base: int | float, exponent: int | float) -> bool:
    if not isinstance(base, int) or not isinstance(exponent, int) or abs(base) < 2:
        return False
    return abs(base).bit_length() * exponent > MAX_POWER_BITS


def _apply(function: Callable[..., Any], *args: Any) -> Any:
    try:
        return function(*args)
    except ZeroDivisionError:
        raise _EvalError("division by zero") from None
    except (TypeError, ValueError, OverflowError) as exc:
        shown = ", ".join(f"{a!r}" for a in args)
        raise _EvalError(f"cannot apply it to {shown} ({exc})") from None


def _describe(params: Mapping[str, Any]) -> str:
    text = " ".join(f"{k}={v!r}" for k, v in params.items())
    return text if len(text) <= 120 else text[:117] + "..."

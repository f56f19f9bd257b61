"""OmegaConf resolvers for derived values in configs: ``${oc.mul:${a},2}``, ``${oc.cdivi:...}``.

The names follow the resolvers megatron-train and upstream oellm-autoexp registered (`oc.mul`,
`oc.muli`, `oc.add`, ..., and the text/list helpers in `resolvers_text`), so configs written for
them keep working. Unlike upstream, a non-numeric argument is an error (a config typo must not
silently turn into 0 or 1), and `oc.eval` runs the checked evaluator of `sweep.filter`, never
Python's `eval`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from oellm_autoexp.config.resolvers_text import TEXT_RESOLVERS


def _num(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"oc.{name}: expected a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"oc.{name}: expected a number, got {value!r}") from None


def _int(value: Any, name: str) -> int:
    number = _num(value, name)
    if number != int(number):
        raise ValueError(f"oc.{name}: expected an integer, got {value!r}")
    return int(number)


def mul(*args: Any) -> float:
    """Product of the arguments as float."""
    return math.prod(_num(a, "mul") for a in args)


def muli(*args: Any) -> int:
    """Product of the arguments as int."""
    return math.prod(_int(a, "muli") for a in args)


def add(*args: Any) -> float:
    """Sum of the arguments as float."""
    return sum(_num(a, "add") for a in args)


def addi(*args: Any) -> int:
    """Sum of the arguments as int."""
    return sum(_int(a, "addi") for a in args)


def sub(lhs: Any, rhs: Any) -> float:
    """lhs - rhs as float."""
    return _num(lhs, "sub") - _num(rhs, "sub")


def subi(lhs: Any, rhs: Any) -> int:
    """lhs - rhs as int."""
    return _int(lhs, "subi") - _int(rhs, "subi")


def div(lhs: Any, rhs: Any) -> float:
    """lhs / rhs as float (division by zero is an error)."""
    denominator = _num(rhs, "div")
    if denominator == 0:
        raise ValueError(f"oc.div: division of {lhs!r} by zero")
    return _num(lhs, "div") / denominator


def divi(lhs: Any, rhs: Any) -> int:
    """lhs // rhs as int."""
    denominator = _int(rhs, "divi")
    if denominator == 0:
        raise ValueError(f"oc.divi: division of {lhs!r} by zero")
    return _int(lhs, "divi") // denominator


def cdivi(lhs: Any, rhs: Any) -> int:
    """Ceiling division lhs / rhs as int (e.g. steps from tokens)."""
    denominator = _int(rhs, "cdivi")
    if denominator == 0:
        raise ValueError(f"oc.cdivi: division of {lhs!r} by zero")
    return -(-_int(lhs, "cdivi") // denominator)


def sqrt(value: Any) -> float:
    """Square root."""
    return math.sqrt(_num(value, "sqrt"))


def mul_round_int(a: Any, b: Any, multiple: Any) -> int:
    """a * b rounded to the nearest multiple of `multiple` (e.g. a batch size)."""
    step = _num(multiple, "mul_round_int")
    return int(round(_num(a, "mul_round_int") * _num(b, "mul_round_int") / step) * step)


def to_int(value: Any) -> int:
    """int(value), for booleans and numeric strings."""
    if isinstance(value, bool):
        return int(value)
    return _int(value, "int")


def concat(lhs: Any, rhs: Any) -> Any:
    """lhs + rhs (strings or lists)."""
    if isinstance(lhs, Sequence) and not isinstance(lhs, str):
        return [*lhs, *rhs]
    return lhs + rhs


def length(value: Any) -> int:
    """len(value)."""
    return len(value)


def if_(condition: Any, then: Any, otherwise: Any) -> Any:
    """`then` when condition is truthy, else `otherwise` (the text ``false`` is false: upstream)."""
    if isinstance(condition, str) and condition.strip().lower() == "false":
        return otherwise
    return then if condition else otherwise


def dict_merge(*mappings: Any) -> dict[str, Any]:
    """Merge mappings left to right (later keys win)."""
    merged: dict[str, Any] = {}
    for mapping in mappings:
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            raise ValueError(f"oc.dict_merge: expected a mapping, got {mapping!r}")
        merged.update(mapping)
    return merged


RESOLVERS: dict[str, Callable[..., Any]] = {
    **TEXT_RESOLVERS,
    "oc.mul": mul,
    "oc.muli": muli,
    "oc.add": add,
    "oc.addi": addi,
    "oc.sub": sub,
    "oc.subi": subi,
    "oc.div": div,
    "oc.divi": divi,
    "oc.cdivi": cdivi,
    "oc.sqrt": sqrt,
    "oc.mul_round_int": mul_round_int,
    "oc.int": to_int,
    "oc.concat": concat,
    "oc.len": length,
    "oc.if": if_,
    "oc.dict_merge": dict_merge,
}


@functools.cache
def register_resolvers() -> None:
    """Register every resolver with OmegaConf once per process (idempotent).

    `oc.eval` is the checked evaluator of `sweep.filter` (literals, arithmetic, comparisons and
    a few pure conversions): a YAML file can compute a number with it, never run code.
    `oc.timestring` is not cached by OmegaConf but by its own function, so every config loaded
    in one process sees the same time, as upstream.
    """
    from omegaconf import OmegaConf

    for name, function in RESOLVERS.items():
        OmegaConf.register_new_resolver(name, function, replace=True)

"""Upstream's lenient arithmetic resolvers, in force only while an upstream config is resolved.

Ours refuse what upstream's accept silently: ``${oc.muli:512,3.2}`` is 1536 upstream (each
argument truncated by ``int()``), an error here; a non-numeric argument is skipped upstream
(contributing nothing to a sum, or 1 to a product). A migrated config must hold the values
upstream's jobs really ran with, so `upstream_arithmetic()` swaps these in while migrating,
records every argument it truncated or skipped (one note each), and restores ours after.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

from oellm_autoexp.config.resolvers import RESOLVERS


class _Lenient:
    """The lenient resolvers plus what they silently changed."""

    def __init__(self) -> None:
        self.changed: list[str] = []

    def _as(self, kind: type, value: Any, name: str) -> Any:
        try:
            converted = kind(value)
        except (TypeError, ValueError):
            self.changed.append(f"oc.{name} skipped the non-number {value!r}")
            return None
        if kind is int and isinstance(value, float | str) and str(value) != str(converted):
            self.changed.append(f"oc.{name} truncated {value!r} to {converted}")
        return converted

    def _numbers(self, kind: type, args: tuple[Any, ...], name: str) -> list[Any]:
        return [n for n in (self._as(kind, a, name) for a in args) if n is not None]

    def table(self) -> dict[str, Callable[..., Any]]:
        def mul(*args: Any) -> float:
            return math.prod(self._numbers(float, args, "mul"), start=1.0)

        def muli(*args: Any) -> int:
            return int(math.prod(self._numbers(int, args, "muli"), start=1))

        def add(*args: Any) -> float:
            return sum(self._numbers(float, args, "add"), start=0.0)

        def addi(*args: Any) -> int:
            return int(sum(self._numbers(int, args, "addi"), start=0))

        def sub(lhs: Any, rhs: Any) -> float:
            pair = self._numbers(float, (lhs, rhs), "sub")
            return pair[0] - pair[1] if len(pair) == 2 else 0.0

        def subi(lhs: Any, rhs: Any) -> int:
            pair = self._numbers(int, (lhs, rhs), "subi")
            return pair[0] - pair[1] if len(pair) == 2 else 0

        def divi(lhs: Any, rhs: Any) -> int:
            pair = self._numbers(int, (lhs, rhs), "divi")
            return pair[0] // pair[1] if len(pair) == 2 and pair[1] else 0

        def cdivi(lhs: Any, rhs: Any) -> int:
            pair = self._numbers(int, (lhs, rhs), "cdivi")
            return -(-pair[0] // pair[1]) if len(pair) == 2 and pair[1] else 0

        def to_int(value: Any) -> int:
            number = self._as(int, value, "int")
            return int(bool(value)) if number is None else number

        return {
            "oc.mul": mul,
            "oc.muli": muli,
            "oc.add": add,
            "oc.addi": addi,
            "oc.sub": sub,
            "oc.subi": subi,
            "oc.divi": divi,
            "oc.cdivi": cdivi,
            "oc.int": to_int,
        }


@contextlib.contextmanager
def upstream_arithmetic() -> Iterator[list[str]]:
    """Upstream's arithmetic resolvers while the block runs; yields the list of changes."""
    from omegaconf import OmegaConf

    from oellm_autoexp.config.resolvers import register_resolvers

    register_resolvers()
    lenient = _Lenient()
    table = lenient.table()
    for name, function in table.items():
        OmegaConf.register_new_resolver(name, function, replace=True)
    try:
        yield lenient.changed
    finally:
        for name in table:
            OmegaConf.register_new_resolver(name, RESOLVERS[name], replace=True)

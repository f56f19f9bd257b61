"""Hydra-like sweep expansion: product over mapping entries, union over lists (nested).

The `sweep.axes` tree:

- a **mapping** is the Cartesian product of its entries, in key order;
- an entry ``key: [v1, v2]`` with scalar (or list) values is an axis of `key`;
- an entry ``key: {sub: ...}`` nests: its keys become ``key.sub`` (dotted param keys);
- an entry ``label: [{...}, {...}]`` whose values are mappings is a *union* of alternatives
  (the label names the group and is not a param); each alternative is expanded recursively,
  so values inside it that are lists are product-expanded too;
- a **list** at node position (e.g. the whole `axes`) is the union of its elements' expansions;
- a scalar entry ``key: v`` is fixed; to sweep list-valued params write ``key: [[1, 2], [3]]``.

Within one axis all values must be of one kind (numbers, strings, booleans or lists; null may
mix with any): ``lr: [1e-4, "3e-4"]`` is a config error naming ``sweep.axes.lr[1]``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from oellm_autoexp.errors import ConfigError

Point = dict[str, Any]
_KEY = re.compile(r"[A-Za-z_][\w-]*(\.[\w-]+)*")


def kind_of(value: Any) -> str:
    """The type family a sweep value belongs to, for mixed-type checks."""
    # bool before number: bool is an int subclass, but True in a float axis is a mistake.
    for kind, types in _KINDS:
        if isinstance(value, types):
            return kind
    return "null" if value is None else type(value).__name__


_KINDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("bool", bool),
    ("number", (int, float)),
    ("str", str),
    ("list", (list, tuple)),
    ("mapping", Mapping),
)


def expand(axes: Any, *, path: str = "sweep.axes") -> list[Point]:
    """All sweep points of `axes` (see module docs), in deterministic order."""
    return list(iter_points(axes, path=path))


def iter_points(axes: Any, *, path: str = "sweep.axes") -> Iterator[Point]:
    """The points of `expand`, one at a time: memory holds each axis, never their product.

    The number of points is counted first (without building them): more than MAX_JOBS is a
    config error before any memory is spent on them. Malformed axes are reported at once,
    before the first point.
    """
    from oellm_autoexp.limits import limit, limit_hint

    total = count_points(axes)
    if total > limit("MAX_JOBS"):
        raise ConfigError(
            f"the sweep has {_magnitude(total)} combinations, more than the "
            + limit_hint("MAX_JOBS"),
            key=path,
        )
    if axes is None:
        return iter([{}])
    if isinstance(axes, Mapping):
        return _product(_factors(axes, prefix="", path=path))
    if isinstance(axes, list):
        alternatives = [_factors(item, prefix="", path=p) for item, p in _alternatives(axes, path)]
        return itertools.chain.from_iterable(_product(f) for f in alternatives)
    raise ConfigError(f"expected a mapping or a list, got {kind_of(axes)} {axes!r}", key=path)


def param_keys(axes: Any, *, prefix: str = "") -> set[str]:
    """Every param name some point of `axes` sets (what `sweep.filter` may name), unexpanded."""
    keys: set[str] = set()
    if isinstance(axes, list):
        for item in axes:
            keys |= param_keys(item, prefix=prefix)
    elif isinstance(axes, Mapping):
        for raw_key, value in axes.items():
            full = f"{prefix}{raw_key}"
            if isinstance(value, Mapping):
                keys |= param_keys(value, prefix=f"{full}.")
            elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                keys |= param_keys(value, prefix=prefix)
            else:
                keys.add(full)
    return keys


def count_points(axes: Any) -> int:
    """How many points `expand(axes)` yields (malformed parts count 1: `expand` reports them)."""
    if isinstance(axes, Mapping):
        total = 1
        for value in axes.values():
            total *= _count_entry(value)
        return total
    if isinstance(axes, list):
        return sum(count_points(item) for item in axes if isinstance(item, Mapping)) or 1
    return 1


def _count_entry(value: Any) -> int:
    if isinstance(value, Mapping):
        return count_points(value)
    if isinstance(value, list):
        if value and all(isinstance(v, Mapping) for v in value):
            return sum(count_points(v) for v in value)
        return max(len(value), 1)
    return 1


def _magnitude(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


def _alternatives(items: list[Any], path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigError(
                f"expected a mapping (one alternative), got {kind_of(item)} {item!r}",
                key=f"{path}[{i}]",
            )
        yield item, f"{path}[{i}]"


def _union(items: list[Any], *, prefix: str, path: str) -> list[Point]:
    points: list[Point] = []
    for item, where in _alternatives(items, path):
        points.extend(_product(_factors(item, prefix=prefix, path=where)))
    return points


def _factors(node: Mapping[str, Any], *, prefix: str, path: str) -> list[list[Point]]:
    """One list of partial points per key of `node` (checked now); the points are their product."""
    factors: list[list[Point]] = []
    for raw_key, value in node.items():
        key = str(raw_key)
        here = f"{path}.{key}"
        if not _KEY.fullmatch(key):
            raise ConfigError("not a valid param key (letters, digits, _ and -, dotted)", key=here)
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            factors.append(list(_product(_factors(value, prefix=f"{full}.", path=here))))
        elif isinstance(value, list):
            factors.append(_axis(full, value, prefix=prefix, path=here))
        else:
            factors.append([{full: value}])
    return factors


def _product(factors: list[list[Point]]) -> Iterator[Point]:
    for combo in itertools.product(*factors):
        merged: Point = {}
        for part in combo:
            merged.update(part)
        yield merged


def _axis(key: str, values: list[Any], *, prefix: str, path: str) -> list[Point]:
    if not values:
        raise ConfigError("empty axis: give at least one value", key=path)
    kinds = {kind_of(v) for v in values}
    if "mapping" in kinds:
        if kinds != {"mapping"}:
            raise ConfigError(
                "mixes mappings (alternatives) with plain values; use one or the other", key=path
            )
        return _union(values, prefix=prefix, path=path)
    _check_one_kind(values, path=path)
    return [{key: v} for v in values]


def _check_one_kind(values: list[Any], *, path: str) -> None:
    first_kind: str | None = None
    first_index = 0
    for i, value in enumerate(values):
        kind = kind_of(value)
        if kind == "null":
            continue
        if first_kind is None:
            first_kind, first_index = kind, i
        elif kind != first_kind:
            raise ConfigError(
                f"mixed types in sweep values: {value!r} is {kind} but "
                f"{values[first_index]!r} at [{first_index}] is {first_kind}",
                key=f"{path}[{i}]",
            )


def check_param_kinds(points: Iterable[Point]) -> None:
    """Each param must have values of one kind across every point (and branch) of the sweep."""
    for _point in checked_kinds(points):
        pass


def checked_kinds(points: Iterable[Point]) -> Iterator[Point]:
    """`points` passed through one at a time, checked as `check_param_kinds` checks them."""
    seen: dict[str, tuple[str, Any, int]] = {}
    known: set[tuple[str, type]] = set()  # (key, type) pairs already found consistent
    for index, point in enumerate(points):
        for key, value in point.items():
            if (key, type(value)) in known:
                continue
            kind = kind_of(value)
            if kind == "null":
                continue
            previous = seen.get(key)
            if previous is None:
                seen[key] = (kind, value, index)
            elif previous[0] != kind:
                raise ConfigError(
                    f"mixed types in sweep: job {index} sets {value!r} ({kind}) but job "
                    f"{previous[2]} sets {previous[1]!r} ({previous[0]})",
                    key=f"sweep param {key}",
                )
            known.add((key, type(value)))
        yield point

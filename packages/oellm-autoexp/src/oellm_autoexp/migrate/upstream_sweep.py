"""Upstream oellm-autoexp's composable sweep (`type` / `groups` / `params` / `configs`), expanded.

Upstream's semantics, re-implemented from its documentation and behaviour:

- a group holds exactly one of ``groups`` (nested groups, combined by the group's own `type`),
  ``params`` (the Cartesian product of its value lists, keys in order) or ``configs`` (a list:
  each entry is one point, or a nested group of its own);
- a group's ``defaults`` are set under every point it yields (a point's own value wins);
- ``type: product`` (the default) combines the sibling groups' points as a Cartesian product,
  later groups overriding earlier ones on a shared key, except keys in ``list_composition``,
  whose values accumulate into a list; ``type: list`` concatenates them;
- ``filter`` on a group of type product (and ``sweep.filter``) is kept with each point it
  covers: a boolean, or an interpolation the caller resolves in the job's own config.

Pure functions over plain data; resolving the points into configs is `translate`'s job.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oellm_autoexp.errors import ConfigError

_KINDS = ("groups", "params", "configs")


@dataclass(frozen=True)
class UpstreamPoint:
    """One expanded point: its params (dotted keys, upstream spelling) and the filters on it."""

    params: dict[str, Any]
    filters: tuple[Any, ...] = field(default_factory=tuple)


def expand_upstream_sweep(
    sweep: Mapping[str, Any] | None, *, key: str = "sweep"
) -> list[UpstreamPoint]:
    """The points of an upstream `sweep:` section, in upstream's order (before filtering)."""
    if not sweep:
        return [UpstreamPoint(params={})]
    if not isinstance(sweep, Mapping):
        raise ConfigError(f"expected a mapping, got {type(sweep).__name__}", key=key)
    base = dict(sweep.get("base_values") or {})
    top_filter = sweep.get("filter", True)
    groups = sweep.get("groups")
    kind = sweep.get("type")
    if not groups or kind is None:
        points = [UpstreamPoint(params=base)]
    else:
        accumulate = frozenset(sweep.get("list_composition") or [])
        points = _expand(str(kind), _group_list(groups, f"{key}.groups"), base, accumulate, key)
    if top_filter is True or top_filter is None:
        return points
    return [UpstreamPoint(p.params, (top_filter, *p.filters)) for p in points]


def _group_list(value: Any, key: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError(f"expected a list of groups, got {type(value).__name__}", key=key)
    for i, group in enumerate(value):
        if not isinstance(group, Mapping):
            raise ConfigError(f"expected a group mapping, got {group!r:.60}", key=f"{key}[{i}]")
    return list(value)


def _expand(
    kind: str,
    groups: list[Mapping[str, Any]],
    base: dict[str, Any],
    accumulate: frozenset[str],
    key: str,
) -> list[UpstreamPoint]:
    if kind not in ("product", "list"):
        raise ConfigError(
            f"unknown sweep type {kind!r}; expected product or list", key=f"{key}.type"
        )
    if not groups:
        return [UpstreamPoint(params=dict(base))]
    per_group = [
        _expand_one(group, base, accumulate, f"{key}.groups[{i}]") for i, group in enumerate(groups)
    ]
    if kind == "list":
        return [point for points in per_group for point in points]
    if len(per_group) == 1:
        return per_group[0]
    return [_merge(combo, accumulate) for combo in itertools.product(*per_group)]


def _expand_one(
    group: Mapping[str, Any], base: dict[str, Any], accumulate: frozenset[str], key: str
) -> list[UpstreamPoint]:
    present = [kind for kind in _KINDS if kind in group]
    if not present:
        raise ConfigError("a group needs 'groups', 'params' or 'configs'", key=key)
    defaults = group.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ConfigError(f"expected a mapping, got {defaults!r:.60}", key=f"{key}.defaults")
    inner_base = {**base, **defaults}
    kind = str(group.get("type", "product"))
    if present[0] == "groups":
        points = _expand(
            kind, _group_list(group["groups"], f"{key}.groups"), inner_base, accumulate, key
        )
    elif present[0] == "params":
        points = [
            UpstreamPoint({**inner_base, **combo}) for combo in _product(group["params"], key)
        ]
    else:
        points = []
        configs = group["configs"]
        if not isinstance(configs, Sequence) or isinstance(configs, str):
            raise ConfigError("expected a list of configs", key=f"{key}.configs")
        for i, entry in enumerate(configs):
            if not isinstance(entry, Mapping):
                raise ConfigError(
                    f"expected a mapping, got {entry!r:.60}", key=f"{key}.configs[{i}]"
                )
            if any(kind_ in entry for kind_ in _KINDS):
                points += _expand("list", [entry], inner_base, accumulate, f"{key}.configs[{i}]")
            else:
                points.append(UpstreamPoint({**inner_base, **entry}))
    if kind == "product" and "filter" in group:
        return [UpstreamPoint(p.params, (*p.filters, group["filter"])) for p in points]
    return points


def _product(params: Any, key: str) -> list[dict[str, Any]]:
    if not isinstance(params, Mapping):
        raise ConfigError(
            f"expected a mapping of key -> values, got {params!r:.60}", key=f"{key}.params"
        )
    axes = []
    for name, values in params.items():
        if isinstance(values, str) or not isinstance(values, Sequence):
            raise ConfigError(
                f"expected a list of values, got {values!r:.60} (upstream iterates it)",
                key=f"{key}.params.{name}",
            )
        axes.append([(name, value) for value in values])
    return [dict(combo) for combo in itertools.product(*axes)]


def _merge(combo: Sequence[UpstreamPoint], accumulate: frozenset[str]) -> UpstreamPoint:
    params: dict[str, Any] = {}
    filters: list[Any] = []
    for point in combo:
        for name, value in point.params.items():
            if name in accumulate:
                items = params.setdefault(name, [])
                items.extend(value if isinstance(value, list) else [value])
            else:
                params[name] = value
        filters.extend(point.filters)
    return UpstreamPoint(params, tuple(filters))

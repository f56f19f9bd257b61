"""Text, list and comparison resolvers that upstream oellm-autoexp configs use.

Same names and results as upstream's (`oc.join`, `oc.split`, `oc.slice`, `oc.tmpl`, the
`oc.map*` family, `oc.eq` ... `oc.geq`, `oc.slurmtime`, `oc.timestring`, `oc.pad_iter`,
`oc.eval`, `oc.mapeval`, `oc.exclude_nodes`), so an upstream config resolves to the same
values here. The templates use ``%`` (``%k`` / ``%v`` for mappings) as the placeholder, as
upstream does.
`oc.eval` differs on purpose: it runs the checked evaluator of `sweep.filter` (see
`sweep.filter.evaluate_expression`), never Python's `eval`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from oellm_autoexp.errors import ConfigError


def _items(value: Any, name: str) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"oc.{name}: expected a list, got {value!r}")
    return list(value)


def _mapping(value: Any, name: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"oc.{name}: expected a mapping, got {value!r}")
    return value


def join(separator: Any, values: Any) -> str:
    """The values as text, joined by `separator`."""
    return str(separator).join(str(v) for v in _items(values, "join"))


def split(text: Any, separator: Any) -> list[str]:
    """`text` split at every `separator`."""
    return str(text).split(str(separator))


def slice_(value: Any, start: Any, end: Any) -> Any:
    """value[start:end] (a list or a text)."""
    if not isinstance(value, str | Sequence):
        raise ValueError(f"oc.slice: expected a list or text, got {value!r}")
    return value[int(start) : int(end)]


def tmpl(template: Any, value: Any) -> str:
    """`template` with every ``%`` replaced by `value`."""
    return str(template).replace("%", str(value))


def map_tmpl(template: Any, values: Any) -> list[str]:
    """`oc.tmpl` for each value."""
    return [tmpl(template, v) for v in _items(values, "maptmpl")]


def map_key_tmpl(key: Any, template: Any, values: Any) -> list[dict[str, str]]:
    """``{key: template % value}`` for each value."""
    return [{str(key): tmpl(template, v)} for v in _items(values, "mapkeytmpl")]


def map_key_val_tmpl(template: Any, mapping: Any) -> list[str]:
    """`template` with ``%k`` / ``%v`` replaced, for each entry of the mapping."""
    return [
        str(template).replace("%k", str(k)).replace("%v", str(v))
        for k, v in _mapping(mapping, "mapkeyvaltmpl").items()
    ]


def map_val_tmpl(template: Any, mapping: Any) -> dict[str, str]:
    """The mapping with each value ``v`` replaced by `template` with ``%v`` -> v."""
    return {
        str(k): str(template).replace("%v", str(v))
        for k, v in _mapping(mapping, "mapvaltmpl").items()
    }


def map_extract_key(key: Any, entries: Any) -> list[Any]:
    """The value of `key` in each mapping of the list."""
    return [_mapping(entry, "mapextractkey")[key] for entry in _items(entries, "mapextractkey")]


def map_cond_tmpl(pattern: Any, if_match: Any, otherwise: Any, values: Any) -> list[str]:
    """`if_match` for values where the regex `pattern` matches at the start, else `otherwise`."""
    regex = re.compile(str(pattern))
    return [
        tmpl(if_match if regex.match(str(v)) else otherwise, v)
        for v in _items(values, "mapcondtmpl")
    ]


def eval_(text: Any) -> Any:
    """The value of a literal expression, computed by the checked evaluator (no Python eval)."""
    from oellm_autoexp.sweep.filter import evaluate_expression

    try:
        return evaluate_expression(str(text), key="oc.eval")
    except ConfigError as exc:
        raise ValueError(f"oc.eval: {exc.detail}") from None


def map_eval(values: Any) -> list[Any]:
    """`oc.eval` for each value."""
    return [eval_(v) for v in _items(values, "mapeval")]


def _comparison(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def resolver(a: Any, b: Any) -> bool:
        try:
            return compare(a, b)
        except TypeError:
            raise ValueError(f"oc.{name}: cannot compare {a!r} with {b!r}") from None

    resolver.__doc__ = f"oc.{name}: the comparison of its two arguments."
    return resolver


def slurmtime(seconds: Any) -> str:
    """Seconds as SLURM's ``days-hours:minutes:seconds`` (unpadded, as upstream writes it)."""
    total = int(seconds)
    if total < 0:
        raise ValueError(
            f"oc.slurmtime: expected a non-negative number of seconds, got {seconds!r}"
        )
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours}:{minutes}:{secs}"


@functools.cache
def timestring() -> str:
    """UTC time of the first call in this process, ``YYYYmmdd_HHMMSS_mmm`` (then fixed)."""
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S_%f")[:-3]


def pad_iter(step: Any) -> str:
    """A checkpoint step as Megatron's directory name, ``iter_0001000``."""
    return f"iter_{int(step):07d}"


MAX_EXCLUDE_FILE_BYTES = 1 << 20


def exclude_nodes(path: Any, separator: Any = ",") -> str | None:
    """The node names in a node-list file, joined for ``--exclude`` (None: no file or no node).

    One or more names per line (comma- or space-separated), ``#`` starts a comment line, each
    name once in first-seen order. Read on every resolution, as upstream: a monitor may grow it.
    """
    from pathlib import Path

    from oellm_autoexp.safe_paths import read_regular_text

    target = Path(str(path)).expanduser()
    if not target.exists():
        return None
    try:
        text = read_regular_text(target, max_bytes=MAX_EXCLUDE_FILE_BYTES)
    except ConfigError as exc:
        raise ValueError(f"oc.exclude_nodes: {exc}") from None
    names: dict[str, None] = {}
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        names.update(dict.fromkeys(n for n in re.split(r"[,\s]+", line) if n))
    return str(separator).join(names) or None


TEXT_RESOLVERS: dict[str, Callable[..., Any]] = {
    "oc.join": join,
    "oc.split": split,
    "oc.slice": slice_,
    "oc.tmpl": tmpl,
    "oc.maptmpl": map_tmpl,
    "oc.mapkeytmpl": map_key_tmpl,
    "oc.mapkeyvaltmpl": map_key_val_tmpl,
    "oc.mapvaltmpl": map_val_tmpl,
    "oc.mapextractkey": map_extract_key,
    "oc.mapcondtmpl": map_cond_tmpl,
    "oc.eval": eval_,
    "oc.mapeval": map_eval,
    "oc.eq": _comparison("eq", lambda a, b: a == b),
    "oc.neq": _comparison("neq", lambda a, b: a != b),
    "oc.lt": _comparison("lt", lambda a, b: a < b),
    "oc.gt": _comparison("gt", lambda a, b: a > b),
    "oc.leq": _comparison("leq", lambda a, b: a <= b),
    "oc.geq": _comparison("geq", lambda a, b: a >= b),
    "oc.slurmtime": slurmtime,
    "oc.timestring": timestring,
    "oc.pad_iter": pad_iter,
    "oc.exclude_nodes": exclude_nodes,
}

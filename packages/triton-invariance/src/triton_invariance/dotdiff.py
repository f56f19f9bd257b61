"""Name the matrix-multiply op whose attributes changed, for the DAG line of a diff report.

An `input_precision` change (`tl.dot(..., input_precision="ieee")`) rewrites most of a kernel:
other layouts, no shared-memory pipelining, sometimes another op (`ttng.warp_group_dot` becomes
`tt.dot`). The first differing op in program order is then an unrelated constant; the dot and
its changed attribute are what the developer changed. Pure text functions over canonical op
lines (`InvarianceData.ops`).
"""

from __future__ import annotations

import re
from typing import Final

# Ops that multiply matrices, by dialect: Triton's, NVIDIA's (Hopper / Blackwell), AMD's.
_DOT_OPS: Final = frozenset(
    {
        "tt.dot",
        "tt.dot_scaled",
        "ttng.warp_group_dot",
        "ttng.tc_gen5_mma",
        "ttng.tc_gen5_mma_scaled",
    }
)
_OP_NAME = re.compile(r"^\s*(?:[%\w#:, ]+ = )?\"?([a-z_]+\.[\w.]+)")
_ATTR = re.compile(r"\b([A-Za-z_]\w*) = ([\w.\-]+)")
# `inputPrecision` is printed as a keyword by tt.dot and as the enum's integer by the NVIDIA
# ops; tt.dot's printer omits the default, IEEE (TF32 = 0, TF32x3 = 1, IEEE = 2).
_PRECISION_CODES: Final = {"0": "tf32", "1": "tf32x3", "2": "ieee"}
_DEFAULTS: Final = {"tt.dot": {"inputPrecision": "ieee"}}


def _dot(line: str) -> tuple[str, dict[str, str]] | None:
    m = _OP_NAME.match(line)
    if m is None or m.group(1) not in _DOT_OPS:
        return None
    name = m.group(1)
    attrs = dict(_DEFAULTS.get(name, {}))
    for key, value in _ATTR.findall(line[m.end() :]):
        attrs[key] = _PRECISION_CODES.get(value, value) if key == "inputPrecision" else value
    return name, attrs


def _describe(name: str, attrs: dict[str, str]) -> str:
    shown = ", ".join(f"{k} {v}" for k, v in sorted(attrs.items()))
    return f"`{name}`" + (f" ({shown})" if shown else "")


def dot_difference(before: tuple[str, ...], after: tuple[str, ...]) -> str | None:
    """`dot op k: ...` for the first matrix multiply whose op or attributes differ, or None."""
    mine = [d for d in map(_dot, before) if d is not None]
    theirs = [d for d in map(_dot, after) if d is not None]
    for k, ((name_a, attrs_a), (name_b, attrs_b)) in enumerate(zip(mine, theirs, strict=False)):
        if (name_a, attrs_a) == (name_b, attrs_b):
            continue
        changed = [
            f"{key} {attrs_a.get(key, 'unset')} -> {attrs_b.get(key, 'unset')}"
            for key in sorted(attrs_a.keys() | attrs_b.keys())
            if attrs_a.get(key) != attrs_b.get(key)
        ]
        if name_a != name_b:
            return f"dot {k}: {_describe(name_a, attrs_a)} -> {_describe(name_b, attrs_b)}"
        return f"dot {k} `{name_a}`: {'; '.join(changed)}"
    if len(mine) != len(theirs):
        return f"{len(mine)} -> {len(theirs)} dot ops"
    return None

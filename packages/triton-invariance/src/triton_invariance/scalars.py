"""Float scalar arguments of kernel launches (`--triton-invariance-record-scalars`,
`TRITON_INVARIANCE_RECORD_SCALARS=1`).

A runtime scalar (an `eps` or a scale passed at launch) is not part of the compiled kernel, so a
changed value leaves every fingerprint as it was. The pytest gate can record the float scalars
of each kernel variant's launches next to its baseline and report a change; the
environment-variable hooks do the same for the launch that produced a baseline. Integers are left
out: they are sizes, strides and offsets, which legitimately vary with the data.

`on_launch` wraps `triton.runtime.jit.JITFunction.run` (Triton's launch path for `@triton.jit`
kernels, also under the autotuner and heuristics) while the block runs; it imports Triton.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

# position -> (argument name, the value's repr)
Scalars = dict[int, tuple[str, str]]


def float_scalars(
    arg_names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Scalars:
    """The float arguments of one launch by position (names are for display only)."""
    values = dict(zip(arg_names, args, strict=False))
    values.update((k, v) for k, v in kwargs.items() if k in arg_names)
    return {
        i: (name, repr(values[name]))
        for i, name in enumerate(arg_names)
        if isinstance(values.get(name), float)
    }


@contextlib.contextmanager
def on_launch(callback: Callable[[str, Scalars], None]) -> Iterator[None]:
    """Call `callback(kernel_hash, scalars)` after every launch inside the block."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    @functools.wraps(original)
    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        kernel = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if kernel is not None and not warmup:
            callback(str(kernel.hash), float_scalars(self.arg_names, args, kwargs))
        return kernel

    JITFunction.run = run
    try:
        yield
    finally:
        if JITFunction.run is run:
            JITFunction.run = original


def scalar_changes(
    recorded: Mapping[str, Any], seen: Mapping[int, tuple[str, set[str]]]
) -> list[str]:
    """`#4 eps: 1e-05 -> 1e-06` for each position whose set of launch values differs.

    `recorded` is a baseline's `launch_scalars` ({"#4": {"name": "eps", "values": [...]}}).
    """
    changes = []
    positions = {int(k.lstrip("#")) for k in recorded if k.lstrip("#").isdigit()} | set(seen)
    for pos in sorted(positions):
        before = recorded.get(f"#{pos}", {})
        old = sorted(before.get("values", [])) if isinstance(before, Mapping) else []
        name, new_values = seen.get(pos, (str(before.get("name", "?")), set()))
        new = sorted(new_values)
        if old != new:
            shown_old = ", ".join(old) or "not recorded"
            shown_new = ", ".join(new) or "not launched with a float"
            changes.append(f"#{pos} {name}: {shown_old} -> {shown_new}")
    return changes


def one_launch(scalars: Scalars) -> dict[int, tuple[str, set[str]]]:
    """One launch's scalars in the form `scalar_changes` and `to_record` take (a set of values
    per position, as a session that saw several launches has)."""
    return {pos: (name, {value}) for pos, (name, value) in scalars.items()}


def to_record(seen: Mapping[int, tuple[str, set[str]]]) -> dict[str, Any]:
    """The baseline's `launch_scalars` entry for what a session saw."""
    return {
        f"#{pos}": {"name": name, "values": sorted(v)} for pos, (name, v) in sorted(seen.items())
    }

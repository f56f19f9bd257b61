"""Did a mitigation act? Compare the settings a cell's trials observed with the baseline's.

A workload records in `observed` the settings in effect inside each trial (torch's flags, the
measured float32 matmul precision, its own configuration, ...). A mitigation whose variables
nothing reads leaves all of them as they are in the baseline: the matrix says so ("no
observable effect") instead of letting a cell read as a verdict on a change that never
happened. Pure functions; no I/O.

What counts as a setting of a cell:

- a value every trial of the cell recorded identically (a value that differs from trial to
  trial, such as a process id, is a measurement, not a setting);
- not a list (lists are per-step series such as grad norms);
- not the echo of a variable the cell or the baseline sets itself (`HSA_XNACK` reading "1" in
  the xnack cell only shows the variable arrived, not that anything read it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ObservedSettings",
    "compared_settings",
    "observed_differences",
    "observed_settings",
]


@dataclass(frozen=True)
class ObservedSettings:
    """The settings a cell's trials agree on, and the keys left out of any comparison."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    excluded: frozenset[str] = frozenset()


def observed_settings(
    observed: Sequence[Mapping[str, Any]], env_keys: Iterable[str]
) -> ObservedSettings | None:
    """The settings of one cell from its trials' `observed` dicts; None if none recorded any.

    `env_keys` are the variables the cell's trials had applied (their echoes are excluded).
    """
    recorded = [o for o in observed if o]
    if not recorded:
        return None
    excluded = set(env_keys)
    settings: dict[str, Any] = {}
    keys = {key for o in recorded for key in o}
    for key in sorted(keys - excluded):
        values = [o.get(key) for o in recorded]
        if any(isinstance(v, list) for v in values) or any(v != values[0] for v in values):
            excluded.add(key)
        else:
            settings[key] = values[0]
    return ObservedSettings(settings, frozenset(excluded))


def compared_settings(cell: ObservedSettings, baseline: ObservedSettings) -> frozenset[str]:
    """The setting keys `cell` and `baseline` are compared on: all, minus what either excludes."""
    keys = set(cell.settings) | set(baseline.settings)
    return frozenset(keys - cell.excluded - baseline.excluded)


def observed_differences(
    cell: ObservedSettings | None, baseline: ObservedSettings | None
) -> tuple[str, ...] | None:
    """The setting keys whose values differ between `cell` and `baseline`, sorted.

    Empty: no observable effect. None: nothing to compare (either side recorded nothing). Keys
    either side excludes are not compared; a key only one side recorded is a difference.
    """
    if cell is None or baseline is None:
        return None
    missing = object()
    return tuple(
        sorted(
            key
            for key in compared_settings(cell, baseline)
            if cell.settings.get(key, missing) != baseline.settings.get(key, missing)
        )
    )

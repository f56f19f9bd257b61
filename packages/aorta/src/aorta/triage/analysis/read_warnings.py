"""What reading the trials' logs could not vouch for, as one warning per cell and kind.

A command trial records its read warnings (`command["warnings"]`: unreadable loss values,
no loss read at all; see `aorta.runner.command.trial.read_warnings`). The matrix states each
distinct one once per cell, with the trials it concerns, so a verdict is never silently
built on a log aorta could not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def trial_read_warnings(command: dict[str, Any] | None) -> tuple[str, ...]:
    """A trial record's read warnings (none for an in-tree workload or an older record)."""
    warnings = (command or {}).get("warnings") or ()
    return tuple(str(w) for w in warnings)


def cell_read_warnings(cell: str, trials: Iterable[tuple[int, Sequence[str]]]) -> list[str]:
    """`cell C, trial(s) 0, 2: WARNING` for each distinct warning of the cell's trials."""
    by_warning: dict[str, list[int]] = {}
    for trial_id, warnings in trials:
        for warning in warnings:
            by_warning.setdefault(warning, []).append(trial_id)
    return [
        f"cell {cell}, trial(s) {', '.join(str(t) for t in ids)}: {warning}"
        for warning, ids in by_warning.items()
    ]

"""matrix.md's "Where failures start" section and its node banner (rendering only).

Built from the matrix's trial summaries: per cell with failing trials, their first failing
steps (`onset.onset_summary`) and, for a run with `locate: true`, the most common first
non-finite location among them (`onset.location_summary`); and the banner of
`nodes.node_banner` when failures concentrate on a node.
"""

from __future__ import annotations

from collections.abc import Sequence

from aorta.triage.analysis.matrix import Matrix
from aorta.triage.analysis.nodes import node_banner, node_rates
from aorta.triage.analysis.onset import location_summary, onset_summary

__all__ = ["node_warning", "onset_section"]


def onset_section(matrix: Matrix, locate: bool) -> list[str]:
    """The section's lines (empty when no cell has a failing trial)."""
    headers = ["Cell", "Failed", "First failing step"] + (["First non-finite"] if locate else [])
    rows: list[Sequence[str]] = []
    for row in matrix.rows:
        failing = [t for t in row.stats.trials if t.outcome == "failed"]
        if not failing:
            continue
        measured = sum(1 for t in row.stats.trials if t.measured)
        cells = [
            row.name,
            f"{len(failing)} / {measured}",
            onset_summary([t.failed_at_step for t in failing]) or "",
        ]
        if locate:
            where = location_summary([t.first_nonfinite for t in failing])
            cells.append(where or "not recorded")
        rows.append(cells)
    if not rows:
        return []
    lines = ["## Where failures start", ""]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines.extend("| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows)
    return [*lines, ""]


def node_warning(matrix: Matrix, alpha: float) -> str | None:
    """The banner text when failures concentrate on a node (trials that recorded one)."""
    pairs = [
        (None if t.host is None else t.host.node, t.outcome)
        for row in matrix.rows
        for t in row.stats.trials
    ]
    return node_banner(node_rates(pairs), alpha)

"""Per-cell Triton kernel fingerprints and which kernels a cell changed vs the baseline.

Pure functions over the `{kernel_name: fingerprint}` maps that trials record with
`fingerprint_kernels: true` (see `aorta.runner.in_process`). Nothing here imports Triton or
triton-invariance: a matrix is rebuilt (re-analysis, resume) on machines without either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["MIXED_PREFIX", "cell_fingerprints", "kernels_changed"]

# A kernel whose trials in one cell compiled differently (should not happen: same settings,
# fresh processes) gets this marker plus every distinct fingerprint, so it never equals the
# baseline's single value by accident and the disagreement stays visible in matrix.json.
MIXED_PREFIX = "mixed:"


def cell_fingerprints(
    per_trial: Iterable[Mapping[str, str] | None],
) -> dict[str, str] | None:
    """One `{kernel: fingerprint}` for a cell from its trials' maps (None: none recorded).

    The union over trials: a kernel every recording trial compiled alike keeps its fingerprint;
    one they compiled differently gets `mixed:<fp>,<fp>...` (sorted).
    """
    recorded = [fp for fp in per_trial if fp is not None]
    if not recorded:
        return None
    seen: dict[str, set[str]] = {}
    for fingerprints in recorded:
        for name, value in fingerprints.items():
            seen.setdefault(name, set()).add(value)
    return {
        name: next(iter(values)) if len(values) == 1 else MIXED_PREFIX + ",".join(sorted(values))
        for name, values in sorted(seen.items())
    }


def kernels_changed(
    cell: Mapping[str, str] | None, baseline: Mapping[str, str] | None
) -> tuple[str, ...] | None:
    """Sorted names of kernels whose fingerprint differs from the baseline's, or that only one
    side compiled; None when either side recorded no fingerprints (nothing to compare)."""
    if cell is None or baseline is None:
        return None
    names = cell.keys() | baseline.keys()
    return tuple(sorted(n for n in names if cell.get(n) != baseline.get(n)))

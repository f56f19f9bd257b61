"""The committed baseline a new kernel variant most likely replaced, and what differs.

A constexpr, `num_warps` or block-size change files a variant under a new key, so a compare finds
no baseline for it. Instead of a bare "missing", the report names the closest baseline of the same
kernel -- same argument dtypes first, then the fewest differing settings and components -- and
says what changed. Pure functions over `Baseline` records; no Triton import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from triton_invariance.data import InvarianceData
from triton_invariance.storage import Baseline


@dataclass(frozen=True)
class Nearest:
    """The closest baseline and the differences from it, one readable item each."""

    baseline: Baseline
    differences: tuple[str, ...]

    def describe(self) -> str:
        """`nearest baseline X differs in: ...` (one line, then the diff report indented)."""
        what = "; ".join(self.differences) or "nothing recorded (same settings, same fingerprint)"
        return (
            f"nearest baseline {self.baseline.kernel_name}_{self.baseline.signature_hash}: {what}"
        )


def setting_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """`name: old -> new` for every key whose value differs (absent shown as `unset`)."""
    return [
        f"{k}: {before.get(k, 'unset')} -> {after.get(k, 'unset')}"
        for k in sorted(before.keys() | after.keys())
        if before.get(k) != after.get(k)
    ]


def _settings(config: Mapping[str, Any], specialization: Mapping[str, Any]) -> dict[str, Any]:
    return {**specialization, **config}


def nearest_baseline(
    current: InvarianceData,
    config: Mapping[str, Any],
    specialization: Mapping[str, Any],
    candidates: Iterable[Baseline],
) -> Nearest | None:
    """The candidate of `current.kernel_name` closest to the current variant, or None."""
    now = _settings(config, specialization)
    best: tuple[tuple[int, int, int], Baseline, list[str]] | None = None
    for b in candidates:
        if b.kernel_name != current.kernel_name:
            continue
        settings = setting_differences(_settings(b.config, b.specialization), now)
        changed = b.invariance.changed_components(current)
        rank = (
            int(b.invariance.dtype_signature != current.dtype_signature),
            len(settings),
            len(changed),
        )
        if best is None or rank < best[0]:
            best = (
                rank,
                b,
                settings + [f"changed components: {', '.join(changed)}"] * bool(changed),
            )
    if best is None:
        return None
    return Nearest(best[1], tuple(best[2]))

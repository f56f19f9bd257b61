"""Comparing a fingerprint with its committed baseline: a match, or an error that says why not.

The verdict of a COMPARE run: the baseline under the current key (or an older key, with a note
on re-keying it), the diff report on a mismatch (with whether only the autotuner's choice
changed), the nearest baseline of the same kernel when none was committed, identical compiled
code when only the compile options differ, and changed launch scalars after a match. Reads
baselines through `storage`; writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from triton_invariance.data import InvarianceData
from triton_invariance.errors import (
    BaselineNotFoundError,
    LaunchScalarsChangedError,
    NumericalInvarianceMismatchError,
)
from triton_invariance.nearest import nearest_baseline
from triton_invariance.scalars import scalar_changes
from triton_invariance.storage import (
    Baseline,
    baseline_path,
    find_baseline,
    list_baselines,
    usable_baselines,
)
from triton_invariance.trust import refuse_shared_baselines
from triton_invariance.verdict import identical_code_note


def compare_and_report(
    kernel_name: str,
    sig_hash: str,
    current: InvarianceData,
    *,
    config_hash: str | None = None,
    alternatives: Mapping[str, InvarianceData] | None = None,
    base: str | os.PathLike[str] | None = None,
    notes: list[str] | None = None,
    fallbacks: Sequence[tuple[str, str]] = (),
    config: Mapping[str, Any] | None = None,
    specialization: Mapping[str, Any] | None = None,
    asm_digest: str | None = None,
    launch_scalars: Mapping[int, tuple[str, set[str]]] | None = None,
) -> bool:
    """Compare `current` with the committed baseline; True on a match.

    Raises `BaselineNotFoundError` when nothing was committed and
    `NumericalInvarianceMismatchError` (with the diff report) on a mismatch. `alternatives`
    (config hash -> fingerprint of the other variants compiled in this run) lets the report say
    whether only the autotuner's choice changed: when the baseline's own config still compiles
    to the baseline fingerprint, the code is numerically unchanged and a different config won.
    What the comparison could not check (a component only one side recorded) is appended to
    `notes` when given. Without a baseline under `sig_hash`, the first of `fallbacks` (signature
    hash, why it was filed there: e.g. the argument-name-keyed hash of earlier releases) that has
    one is used, with a note saying how to re-key it.
    With no baseline at all, the error names the nearest committed baseline of the same kernel
    (`config` / `specialization` are the current variant's, for saying what differs). When
    only the compile options differ and `asm_digest` equals the baseline's recorded one, the
    compiled code is the same: a match, with a note saying so. `launch_scalars` (the float
    arguments of this run's launch, see `scalars`) is compared with the baseline's recorded ones
    after a match: a change raises `LaunchScalarsChangedError`.
    """
    path = baseline_path(kernel_name, sig_hash, base)
    found = find_baseline(kernel_name, sig_hash, fallbacks, base)
    baseline = None
    if found is not None:
        refuse_shared_baselines(found.path.parent, [found.path])
        baseline, path = found.baseline, found.path
        if found.note is not None and notes is not None:
            notes.append(found.note)
    if baseline is None:
        raise BaselineNotFoundError(
            path,
            f"no baseline for kernel {kernel_name!r} (signature {sig_hash}); commit one with "
            f"TRITON_INVARIANCE_COMMIT=1"
            + _nearest_text(current, config or {}, specialization or {}, base),
        )
    if notes is not None:
        notes.extend(baseline.invariance.comparison_notes(current))

    same_code = None
    if not baseline.invariance.matches(current):
        same_code = identical_code_note(
            baseline.invariance, baseline.recorded.get("asm_digest"), current, asm_digest
        )
    if baseline.invariance.matches(current) or same_code is not None:
        if same_code is not None and notes is not None:
            notes.append(same_code)
        _check_launch_scalars(kernel_name, path, baseline, launch_scalars)
        return True
    report = baseline.invariance.diff_report(current)
    if config_hash is not None and config_hash != baseline.config_hash:
        report += (
            f"\n  config_hash: the autotuner picked config {config_hash}, the baseline was "
            f"committed for config {baseline.config_hash} ({_describe(baseline.config)})"
        )
        same_config = (alternatives or {}).get(baseline.config_hash)
        if same_config is not None and baseline.invariance.matches(same_config):
            report += (
                "\n  note: the baseline's config still compiles to the baseline fingerprint in "
                "this run: the kernel code is numerically unchanged, only the winner changed"
            )
        elif same_config is not None:
            # The winner changed AND the code did: the diff above mixes the two (its first
            # difference is often a block-size constant). The baseline's own config, compiled in
            # this run, isolates the code change.
            report += (
                "\n  the baseline's config, compiled in this run, differs from the baseline "
                "too: the kernel code changed, not only the winner. Same config, before -> "
                "now:\n" + _indented(baseline.invariance.diff_report(same_config))
            )
    raise NumericalInvarianceMismatchError(
        kernel_name, sig_hash, path, baseline.invariance, current, report
    )


def _check_launch_scalars(
    kernel_name: str,
    path: Path,
    baseline: Baseline,
    launch_scalars: Mapping[int, tuple[str, set[str]]] | None,
) -> None:
    """Raise `LaunchScalarsChangedError` when the baseline recorded launch scalars and this
    launch's differ (nothing to compare when either side did not record them)."""
    recorded = baseline.recorded.get("launch_scalars")
    if launch_scalars is None or not isinstance(recorded, dict):
        return
    changes = scalar_changes(recorded, launch_scalars)
    if changes:
        raise LaunchScalarsChangedError(kernel_name, path, changes)


def _nearest_text(
    current: InvarianceData,
    config: Mapping[str, Any],
    specialization: Mapping[str, Any],
    base: str | os.PathLike[str] | None,
) -> str:
    """`; nearest baseline ...` and its diff report, or "" when the kernel has no baseline."""
    same_kernel = [
        p for p in list_baselines(base) if p.stem.rsplit("_", 1)[0] == current.kernel_name
    ]
    candidates = usable_baselines(same_kernel)
    near = nearest_baseline(current, config, specialization, candidates)
    if near is None:
        return ""
    return f"; {near.describe()}\n{near.baseline.invariance.diff_report(current)}"


def _indented(report: str) -> str:
    return "\n".join(f"    {line}" for line in report.splitlines())


def _describe(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) or "no recorded config"

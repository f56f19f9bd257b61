"""The triage matrix: every cell judged against the baseline (ratios, labels, evidence).

Pure: `build_matrix` takes the cells `cells.aggregate_cell` built and returns a `Matrix`
(`Matrix.to_dict()` is strict JSON); the report layer renders it. The aggregation choices
are listed in `aorta.triage.analysis.cells`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aorta.triage.analysis import confound, independence, stats, window
from aorta.triage.analysis.cells import (
    DEFAULT_CONFIDENCE,
    NOT_RUN,
    NOT_RUN_TEXT,
    CellStats,
    json_float,
)
from aorta.triage.analysis.fingerprints import kernels_changed
from aorta.triage.analysis.hardware import hardware_findings
from aorta.triage.analysis.observed import (
    compared_settings,
    observed_differences,
)
from aorta.triage.analysis.read_warnings import cell_read_warnings
from aorta.triage.analysis.step_sources import (
    load_warnings,
    source_warnings,
)

__all__ = [
    "Matrix",
    "MatrixRow",
    "build_matrix",
    "executions",
]

_SIZING_POWER = 0.8  # power behind the "more trials needed" note


@dataclass(frozen=True)
class MatrixRow:
    """One matrix row: a cell's stats plus everything judged against the baseline."""

    stats: CellStats
    is_baseline: bool
    step_time_ratio: float | None
    confound: str
    nan_rate_ci: tuple[float, float] | None
    fisher_p: float | None  # raw two-sided Fisher exact p (`p_value` in matrix.json)
    step_time_ratio_ci: tuple[float, float] | None
    # Observed settings that differ from the baseline's: () = no observable effect, None = not
    # comparable (baseline row, errored cell, or a side that recorded no settings).
    observed_differences: tuple[str, ...] | None = None
    # Kernels whose fingerprint differs from the baseline cell's; None: nothing to compare.
    kernels_changed: tuple[str, ...] | None = None
    # False when the cell's (or the baseline's) trials are copies of one run: no p-value then.
    independent: bool = True
    # The steps the ratio compares, [first, last] in the cell's numbering (`window`).
    step_window: tuple[int, int] | None = None
    # `fisher_p` Holm-adjusted across the matrix's compared cells: what the labels use.
    p_adjusted: float | None = None
    # Interval of the baseline's failure rate minus this cell's (`stats.rate_difference_interval`).
    failure_drop_ci: tuple[float, float] | None = None

    @property
    def name(self) -> str:
        """The cell's name (the row label)."""
        return self.stats.name

    def significant(self, alpha: float) -> bool:
        """Whether the cell's failure count differs from the baseline's at family-wise `alpha`.

        Judged by the Holm-adjusted p-value, as the labels are.
        """
        return self.p_adjusted is not None and self.p_adjusted < alpha

    def to_dict(self, alpha: float) -> dict[str, Any]:
        """Strict-JSON-ready dict: the cell's stats plus ratio, confound and evidence."""
        data = self.stats.to_dict()
        data.update(
            {
                "is_baseline": self.is_baseline,
                "step_time_ratio": json_float(self.step_time_ratio),
                "confound": self.confound,
                "nan_rate_ci": _json_interval(self.nan_rate_ci),
                "p_value": json_float(self.fisher_p),
                "p_adjusted": json_float(self.p_adjusted),
                "significant": self.significant(alpha),
                "failure_drop_ci": _json_interval(self.failure_drop_ci),
                "step_time_ratio_ci": _json_interval(self.step_time_ratio_ci),
                "observed_differences": (
                    None if self.observed_differences is None else list(self.observed_differences)
                ),
                "independent": self.independent,
                "step_window": None if self.step_window is None else list(self.step_window),
            }
        )
        if self.kernels_changed is not None:
            data["kernels_changed"] = list(self.kernels_changed)
            data["kernels_changed_count"] = len(self.kernels_changed)
        return data


def _json_interval(interval: tuple[float, float] | None) -> list[float | None] | None:
    return None if interval is None else [json_float(interval[0]), json_float(interval[1])]


@dataclass(frozen=True)
class Matrix:
    """The whole triage matrix: rows in input order, plus warnings and statistical notes.

    `warnings` are problems a reader must see first (baseline failed, cells errored, fewer
    trials than requested); `notes` are statistical remarks (e.g. "more trials needed ...").
    """

    baseline: str
    threshold: float
    confidence: float
    alpha: float
    rows: tuple[MatrixRow, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # The drop `no effect` must rule out, as a fraction of the baseline's failure rate.
    smallest_cure: float = confound.DEFAULT_SMALLEST_CURE

    def row(self, name: str) -> MatrixRow:
        """The row of cell `name`; `KeyError` if there is none."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    @property
    def baseline_row(self) -> MatrixRow:
        """The baseline cell's row."""
        return self.row(self.baseline)

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-ready dict (`json.dumps(..., allow_nan=False)` accepts it)."""
        return {
            "baseline": self.baseline,
            "baseline_mean_step_time_ms": json_float(self.baseline_row.stats.mean_step_time_ms),
            "threshold": self.threshold,
            "confidence": self.confidence,
            "alpha": self.alpha,
            "smallest_cure": self.smallest_cure,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "cells": [row.to_dict(self.alpha) for row in self.rows],
        }


def _step_window(cell: CellStats, base: CellStats) -> window.StepWindow | None:
    """The steps both cells reached, with each measured trial's mean over them (`window`)."""
    if cell.error is not None or base.error is not None:
        return None

    def timed(stats: CellStats) -> list[window.TimedTrial]:
        return [
            window.TimedTrial(t.trial_id, t.warmup_steps, t.step_times_ms)
            for t in stats.trials
            if t.measured
        ]

    return window.common_window(timed(cell), timed(base))


def _consistency_warnings(cells: Sequence[CellStats]) -> list[str]:
    """Cells whose step times are not the same kind of measurement cannot be compared."""
    ran = [c for c in cells if c.error is None and c.trials]
    found = source_warnings(ran)
    executions = {t.execution for c in ran for t in c.trials}
    if len(executions) > 1:
        found.append(
            "trials ran both in this process and in child processes: a warm parent process "
            "and cold children do not time alike, so step-time ratios across them mislead"
        )
    return found


def executions(cells: Sequence[CellStats]) -> tuple[str, ...]:
    """How the trials of `cells` ran (`in_process`, `child_process`), sorted."""
    return tuple(sorted({t.execution for c in cells for t in c.trials}))


def _evidence_counts(cell: CellStats) -> tuple[int, int]:
    """(failed, measured) as the interval and the test count them: each set of copies once."""
    return independence.evidence_counts(cell.independence, cell.failed_count, cell.measured_count)


def _not_independent(cell: CellStats, base: CellStats, *, is_baseline: bool) -> str | None:
    """Why the cell's failure evidence is not independent (its label's text), or None."""
    return independence.not_independent_reason(
        cell.independence, base.independence, is_baseline=is_baseline
    )


def _nan_rate_ci(cell: CellStats, confidence: float) -> tuple[float, float] | None:
    """The Wilson interval of the cell's failure rate; None for copies of one run (no sample)."""
    if cell.error is not None or (cell.independence and cell.independence.all_copies):
        return None
    failed, measured = _evidence_counts(cell)
    return stats.wilson_interval(failed, measured, confidence) if measured > 0 else None


def _fisher_p(cell: CellStats, base: CellStats) -> float | None:
    """The cell's two-sided Fisher p against the baseline; None when there is nothing to test.

    Nothing to test: an errored side, no measured trial, or trials (the cell's or the
    baseline's) that are copies of one run.
    """
    if cell.error is not None or base.error is not None:
        return None
    if _not_independent(cell, base, is_baseline=False) is not None:
        return None
    failed, measured = _evidence_counts(cell)
    base_failed, base_measured = _evidence_counts(base)
    if measured == 0 or base_measured == 0:
        return None
    return stats.fisher_p_value(failed, measured, base_failed, base_measured)


def _trials_needed(
    cell: CellStats, base: CellStats, alpha: float, smallest_cure: float
) -> int | None:
    """Trials per cell that would settle an open failure verdict (`confound` module docstring).

    Sized for a drop from the baseline's rate by the observed drop or by the smallest cure
    worth finding, whichever is larger: with that many trials such a drop shows at `alpha`
    with 80 % power, and where there is none, the interval of the drop then rules out the
    smallest cure with at least about that probability too (its half-width is smaller than
    the drop the test is sized for).
    """
    if cell.nan_rate is None or base.nan_rate is None:
        return None
    drop = max(base.nan_rate - cell.nan_rate, smallest_cure * base.nan_rate)
    return stats.trials_needed(
        base.nan_rate, base.nan_rate - drop, alpha=alpha, power=_SIZING_POWER
    )


def _no_failure_warning(base: CellStats) -> list[str]:
    """The banner for a baseline that ran and never failed: nothing for a cell to cure."""
    if base.error is not None or base.measured_count == 0 or base.failed_count > 0:
        return []
    return [
        f"Baseline did not reproduce the failure (0 of {base.measured_count} trials failed): "
        "no cell can show a cure."
    ]


def _holm_note(family: int, alpha: float) -> list[str]:
    if family < 2:
        return []
    return [
        f"p-values are Holm-Bonferroni adjusted over the {family} cells compared with the "
        f"baseline (`p_adjusted`; raw: `p_value`); labels use the adjusted value, alpha "
        f"{alpha:g} family-wise"
    ]


def _pct(rate: float) -> str:
    # 0.5 -> "50%", 0.125 -> "12.5%", 1/3 -> "33.3%": enough precision for a sizing note.
    return f"{rate * 100:.3g}%"


def _cell_warnings(cell: CellStats, *, is_baseline: bool) -> list[str]:
    """Per-cell problems a reader must see (the baseline's own are reported separately)."""
    if cell.error is not None and not is_baseline:
        happened = NOT_RUN_TEXT if cell.error == NOT_RUN else f"failed: {cell.error}"
        return [f"cell {cell.name} {happened}"]
    if cell.error is not None:
        return []
    found: list[str] = []
    if cell.error_count:
        found.append(
            f"cell {cell.name}: {cell.error_count} trial(s) errored and are left out of its "
            f"failure rate (first: {cell.errors[0]})"
        )
    if cell.trials_run < cell.trials_requested and not cell.stopped_early:
        found.append(
            f"cell {cell.name} ran {cell.trials_run} of {cell.trials_requested} requested trials"
        )
    if cell.mean_step_time_ms is None and not is_baseline:
        found.append(f"cell {cell.name} recorded no step times: its ratio is n/a")
    found.extend(
        cell_read_warnings(cell.name, ((t.trial_id, t.read_warnings) for t in cell.trials))
    )
    return found


def _sizing_note(
    rows: Sequence[MatrixRow], base: CellStats, alpha: float, sizing_alpha: float
) -> str | None:
    """The "more trials needed" note, when no comparable cell differs significantly."""
    if base.error is not None or base.nan_rate is None or base.failed_count == 0:
        # Already a warning: no baseline rate to compare against, or no failure to cure.
        return None
    comparable = [
        r
        for r in rows
        if not r.is_baseline
        and r.stats.error is None
        and r.stats.nan_rate is not None
        and r.independent
    ]
    if not comparable or any(r.significant(alpha) for r in comparable):
        return None
    base_rate = base.nan_rate

    def gap(row: MatrixRow) -> float:
        assert row.stats.nan_rate is not None  # filtered above
        return abs(row.stats.nan_rate - base_rate)

    widest = max(comparable, key=gap)  # first of equals: input order
    cell_rate = widest.stats.nan_rate
    assert cell_rate is not None
    needed = stats.trials_needed(base_rate, cell_rate, alpha=sizing_alpha, power=_SIZING_POWER)
    if needed is None:
        return (
            f"no cell's failure rate differs from the baseline's ({_pct(base_rate)} of "
            f"{base.measured_count} trials): no observed difference to size more trials from"
        )
    return (
        f"more trials needed: {needed} trials per cell would detect a change from "
        f"{_pct(base_rate)} to {_pct(cell_rate)} (largest observed difference, cell "
        f"{widest.name}; two-sided alpha {sizing_alpha:.3g}, {_SIZING_POWER:.0%} power); no cell "
        f"differs significantly from the baseline (Fisher exact p >= {alpha:g}, adjusted)"
    )


def _check_arguments(
    names: Sequence[str], baseline: str, threshold: float, alpha: float, smallest_cure: float
) -> None:
    """Raise `ValueError` for arguments `build_matrix` cannot judge with (caller bugs)."""
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)  # linear
    if duplicates:
        raise ValueError(f"duplicate cell names: {', '.join(duplicates)}")
    if baseline not in names:
        raise ValueError(f"baseline cell {baseline!r} is not among the cells: {', '.join(names)}")
    problem = confound.threshold_problem(threshold)
    if problem:
        raise ValueError(f"threshold: {problem}, got {threshold!r}")
    problem = confound.alpha_problem(alpha)
    if problem:
        raise ValueError(f"alpha: {problem}, got {alpha!r}")
    if not 0.0 < smallest_cure <= 1.0:
        raise ValueError(f"smallest_cure: expected a fraction in (0, 1], got {smallest_cure!r}")


def _matrix_warnings(cells: Sequence[CellStats], base: CellStats) -> tuple[list[str], list[str]]:
    """(warnings, notes) about the whole matrix: its baseline, clocks, copies, hardware, load."""
    warnings = _no_failure_warning(base)
    if base.error == NOT_RUN:
        warnings.append(f"baseline cell {base.name} {NOT_RUN_TEXT}: ratios are n/a")
    elif base.error is not None:
        warnings.append(f"baseline cell {base.name} failed: ratios are n/a ({base.error})")
    elif base.mean_step_time_ms is None:
        warnings.append(f"baseline cell {base.name} recorded no step times: ratios are n/a")
    warnings.extend(_consistency_warnings(cells))
    warnings.extend(
        independence.copies_warnings([(c.name, c.independence) for c in cells], base.name)
    )
    hardware_warnings, hardware_notes = hardware_findings(
        {c.name: [t.host for t in c.trials if t.measured] for c in cells}
    )
    warnings.extend(hardware_warnings)
    warnings.extend(load_warnings(cells))
    return warnings, hardware_notes


def build_matrix(
    cells: Sequence[CellStats],
    *,
    baseline: str,
    threshold: float = confound.DEFAULT_CONFOUND_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    alpha: float = confound.DEFAULT_ALPHA,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
    paired: bool = False,
    smallest_cure: float = confound.DEFAULT_SMALLEST_CURE,
) -> Matrix:
    """Judge every cell against the `baseline` cell: ratio, confound label, evidence, notes.

    Per cell: `step_time_ratio` (pooled mean over the baseline's), the Confound label
    (`confound.classify`), a Wilson interval of the failure rate at `confidence`, a
    two-sided Fisher exact p-value of its failures vs the baseline's, Holm-adjusted across the
    compared cells (`stats.holm_adjust`; labels and `significant` use the adjusted value, so
    `alpha` is family-wise), an interval of the drop in failure rate, and a bootstrap interval of
    the ratio. `smallest_cure` (a fraction of the baseline's failure rate) is the drop that
    `no effect` must rule out. A baseline that ran and never failed gets a warning first. With
    `paired` (the cells ran interleaved: trial k of every cell in round k) the ratio and its
    interval are computed round by round over the rounds both cells ran (`stats.paired_ratio`,
    `stats.bootstrap_ratio_interval(paired=True)`). Errored cells keep their rows. An errored
    (or timing-less) baseline never aborts: ratios become None and a warning says so. Raises
    `ValueError` for duplicate cell names, an unknown `baseline`, or an invalid `threshold`
    (`confound.threshold_problem`) — caller bugs, not run outcomes.
    """
    names = [c.name for c in cells]
    _check_arguments(names, baseline, threshold, alpha, smallest_cure)
    base = cells[names.index(baseline)]
    warnings, hardware_notes = _matrix_warnings(cells, base)

    # A matrix is many tests: every compared cell's p first, then adjusted as one family.
    p_values = [None if c.name == baseline else _fisher_p(c, base) for c in cells]
    adjusted = stats.holm_adjust(p_values)
    family = sum(p is not None for p in p_values)
    sizing_alpha = alpha / max(1, family)  # Bonferroni: the level the most-tested cell faces
    rows: list[MatrixRow] = []
    for cell, fisher_p, p_adjusted in zip(cells, p_values, adjusted, strict=True):
        is_base = cell.name == baseline
        warnings.extend(_cell_warnings(cell, is_baseline=is_base))
        steps = _step_window(cell, base)
        ratio = window.window_ratio(steps)
        pairs = window.paired_means(steps) if paired and steps is not None else None
        if pairs is not None:
            ratio = stats.paired_ratio(*pairs)
        not_independent = _not_independent(cell, base, is_baseline=is_base)
        nan_ci = _nan_rate_ci(cell, confidence)
        drop_ci = (
            stats.rate_difference_interval(
                *_evidence_counts(base), *_evidence_counts(cell), confidence
            )
            if fisher_p is not None
            else None
        )
        ratio_ci: tuple[float, float] | None = None
        # `steps` is None when either cell errored.
        if not is_base and steps is not None and ratio is not None:
            ratio_ci = stats.bootstrap_ratio_interval(
                *(pairs or (list(steps.cell_means.values()), list(steps.base_means.values()))),
                paired=pairs is not None,
                confidence=confidence,
                resamples=bootstrap_resamples,
                seed=seed,
            )
        label = confound.classify(
            is_baseline=is_base,
            error=cell.error,
            evidence=confound.Evidence(
                ratio=ratio,
                ratio_ci=ratio_ci,
                confidence=confidence,
                nan_rate=cell.nan_rate,
                baseline_nan_rate=base.nan_rate,
                p_adjusted=p_adjusted,
                drop_upper=None if drop_ci is None else drop_ci[1],
                trials_needed=_trials_needed(cell, base, sizing_alpha, smallest_cure),
                not_independent=not_independent,
            ),
            threshold=threshold,
            alpha=alpha,
            smallest_cure=smallest_cure,
        )
        rows.append(
            MatrixRow(
                stats=cell,
                is_baseline=is_base,
                step_time_ratio=ratio,
                confound=label,
                nan_rate_ci=nan_ci,
                fisher_p=fisher_p,
                step_time_ratio_ci=ratio_ci,
                observed_differences=(
                    None if is_base else observed_differences(cell.observed, base.observed)
                ),
                kernels_changed=kernels_changed(cell.kernel_fingerprints, base.kernel_fingerprints),
                independent=not_independent is None,
                step_window=None if steps is None else (steps.first, steps.last),
                p_adjusted=p_adjusted,
                failure_drop_ci=drop_ci,
            )
        )

    note = _sizing_note(rows, base, alpha, sizing_alpha)
    notes = [note] if note is not None else []
    notes.extend(_holm_note(family, alpha))
    # A cell whose compiled kernels changed did act, whatever its observed settings say.
    notes.extend(
        _no_effect_note(row, base)
        for row in rows
        if row.observed_differences == () and not row.kernels_changed
    )
    notes.extend(hardware_notes)
    return Matrix(
        baseline=baseline,
        threshold=threshold,
        confidence=confidence,
        alpha=alpha,
        rows=tuple(rows),
        warnings=tuple(warnings),
        notes=tuple(notes),
        smallest_cure=smallest_cure,
    )


def _no_effect_note(row: MatrixRow, base: CellStats) -> str:
    assert row.stats.observed is not None and base.observed is not None  # differences == ()
    count = len(compared_settings(row.stats.observed, base.observed))
    return (
        f"no observable effect: cell {row.name} left every setting its trials observed "
        f"({count} compared) identical to baseline {base.name}'s; its mitigations' variables "
        "are probably not read here, so its row says nothing about them"
    )

"""One cell's trials aggregated: `TrialSummary`, `CellStats`, `aggregate_cell`, `error_cell`.

Pure functions over `TrialResult` objects: no I/O, no registry, no CLI. The runner calls
`aggregate_cell` (or `error_cell` when a whole cell failed) once per cell; `matrix.build_matrix`
then judges the cells against the baseline.

Aggregation choices the spec leaves open, made here:

- Trials have an outcome: passed, failed (the failure under study fired) or error (the trial
  could not measure; see `aorta.runner.outcome`). Errored trials are counted on their own
  (`error_count`, each reason in `errors`) and left out of the failure rate, the Wilson and
  Fisher evidence and the step-time statistics: they say nothing about the failure. A cell
  whose trials all errored is an errored cell whose reason is the first trial's.
- Step-time statistics pool every post-warm-up step time of every measured trial in the cell
  (passed or failed): a failing trial's steps were still executed at that speed. Non-finite step
  times are left out of the statistics (one NaN would poison every mean) but kept in the raw data.
- `std_step_time_ms` is the sample standard deviation (ddof=1); None with fewer than 2 samples.
  Percentiles use numpy's default linear interpolation (`stats.percentile`, without numpy).
- `nan_rate = failed_count / (passed_count + failed_count)` (measured trials, so one failing
  trial of 8 is 1/8, not 1/7 and not "cell failed"); None when no trial measured.
- Trials that are copies of one run (identical loss traces or logs) are not independent
  samples (`aorta.triage.analysis.independence`): counted once in the failure-rate interval and the
  Fisher test, and a cell of nothing but copies gets neither.
- A cell whose `run_trials` returned no results at all is marked errored ("no trial results"):
  there is nothing to judge it by, and `error` keeps its row in the matrix.
- `mean_step_time_ms` is the mean of the measured trials' mean step times. `step_time_ratio`
  compares the same work: each trial's mean over the step window both cells reached
  (`aorta.triage.analysis.window`; recorded per row as `step_window`), the mean of those, cell over
  baseline: the same quantity the bootstrap interval resamples (a ratio of pooled steps could
  disagree with it when trials differ in length). The baseline's own ratio is 1.0. It is None
  (rendered `n/a`) when the baseline errored or recorded no step times, or when the cell
  itself errored or recorded none.
- The bootstrap interval of the ratio resamples per-trial mean step times, not individual steps:
  trials are the independent units (steps within one trial are correlated), so resampling steps
  would report a falsely narrow interval. Every cell uses the same seed, so adding or reordering
  cells never changes another cell's interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aorta.runner.host import TrialHost
from aorta.runner.host_load import HostLoad
from aorta.runner.models import Outcome, TrialResult
from aorta.triage.analysis import independence, stats
from aorta.triage.analysis.fingerprints import cell_fingerprints
from aorta.triage.analysis.hardware import NodeSteps, node_breakdown
from aorta.triage.analysis.independence import Independence
from aorta.triage.analysis.observed import (
    ObservedSettings,
    observed_settings,
)
from aorta.triage.analysis.read_warnings import trial_read_warnings
from aorta.triage.analysis.step_sources import (
    cell_sources,
    time_source,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "NOT_RUN",
    "NOT_RUN_TEXT",
    "CellStats",
    "TrialSummary",
    "aggregate_cell",
    "error_cell",
    "json_float",
]

DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class TrialSummary:
    """What the matrix keeps of one trial: identity, outcome and its raw step times."""

    trial_id: int
    seed: int
    passed: bool
    failure: str | None
    failed_at_step: int | None
    step_times_ms: tuple[float, ...]
    wall_clock_sec: float
    env_applied: Mapping[str, str] = field(default_factory=dict)
    execution: str = "in_process"  # in_process / child_process
    step_clock: str | None = None  # what its step times measure; None: not declared
    # Where its step times came from (`step_sources.time_source`), the host's load meanwhile.
    time_source: str | None = None
    host_load: HostLoad | None = None
    outcome: Outcome = "passed"
    host: TrialHost | None = None  # where it ran; None: not recorded (an older trial file)
    read_warnings: tuple[str, ...] = ()  # what reading its log could not vouch for
    warmup_steps: int = 0  # steps before `step_times_ms` began (left out as warm-up)
    # Where its first non-finite value appeared (`locate: true`); None: not asked.
    first_nonfinite: Mapping[str, Any] | None = None

    @property
    def measured(self) -> bool:
        """Whether the trial measured the failure (passed or failed, not an error)."""
        return self.outcome != "error"

    @property
    def mean_step_time_ms(self) -> float | None:
        """Mean of this trial's finite step times; None when it recorded none."""
        finite = _finite(self.step_times_ms)
        return math.fsum(finite) / len(finite) if finite else None


@dataclass(frozen=True)
class CellStats:
    """One cell's aggregated trials (or, with `error` set, a cell that failed as a whole)."""

    name: str
    trials_requested: int
    trials_run: int
    passed_count: int
    failed_count: int
    nan_rate: float | None
    mean_step_time_ms: float | None
    std_step_time_ms: float | None
    p50_step_time_ms: float | None
    p99_step_time_ms: float | None
    mean_wall_clock_sec: float | None
    failures: tuple[str, ...] = ()
    trials: tuple[TrialSummary, ...] = ()
    error: str | None = None
    # The settings the trials observed (see `aorta.triage.analysis.observed`); None: none recorded.
    observed: ObservedSettings | None = None
    # The cell's stop rule: stop once this many trials failed (`trials_requested` is the most
    # it runs); None: it runs every requested trial.
    stop_after_failures: int | None = None

    @property
    def stopped_early(self) -> bool:
        """Whether the cell ended at its stop rule, before running every requested trial."""
        limit = self.stop_after_failures
        return (
            limit is not None
            and self.failed_count >= limit
            and self.trials_run < self.trials_requested
        )

    error_count: int = 0  # trials with outcome `error` (not in passed/failed)
    errors: tuple[str, ...] = ()  # `trial <id>: <reason>` of each of them
    # `{kernel: fingerprint}` over the measured trials (`fingerprints.cell_fingerprints`);
    # None when no trial recorded any (the recipe did not ask for them).
    kernel_fingerprints: Mapping[str, str] | None = None
    # Which measured trials are copies of one run (`aorta.triage.analysis.independence`); None: an
    # errored cell (nothing was judged).
    independence: Independence | None = None

    @property
    def measured_count(self) -> int:
        """Trials that measured the failure: passed + failed (errors excluded)."""
        return self.passed_count + self.failed_count

    @property
    def step_times_ms(self) -> tuple[float, ...]:
        """Every measured trial's post-warm-up step times, pooled in trial order (unfiltered)."""
        return tuple(t for trial in self.trials if trial.measured for t in trial.step_times_ms)

    @property
    def step_time_by_node(self) -> tuple[NodeSteps, ...]:
        """The cell's trials and step times per node (`hardware.node_breakdown`)."""
        return node_breakdown(self.trials)

    @property
    def per_trial_mean_step_time_ms(self) -> tuple[float, ...]:
        """Mean step time of each measured trial that recorded any (the bootstrap's unit)."""
        means = (trial.mean_step_time_ms for trial in self.trials if trial.measured)
        return tuple(m for m in means if m is not None)

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-ready dict (non-finite floats become None)."""
        data = self._stats_dict()
        if self.kernel_fingerprints is not None:  # only runs that asked for them carry the key
            data["kernel_fingerprints"] = dict(self.kernel_fingerprints)
        data["independence"] = None if self.independence is None else self.independence.to_dict()
        return data

    def _stats_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "error": self.error,
            "trials_requested": self.trials_requested,
            "trials_run": self.trials_run,
            "stop_after_failures": self.stop_after_failures,
            "stopped_early": self.stopped_early,
            "passed_count": self.passed_count,
            "failed_count": self.failed_count,
            "error_count": self.error_count,
            "errors": list(self.errors),
            "nan_rate": json_float(self.nan_rate),
            "mean_step_time_ms": json_float(self.mean_step_time_ms),
            "std_step_time_ms": json_float(self.std_step_time_ms),
            "p50_step_time_ms": json_float(self.p50_step_time_ms),
            "p99_step_time_ms": json_float(self.p99_step_time_ms),
            "mean_wall_clock_sec": json_float(self.mean_wall_clock_sec),
            "per_trial_mean_step_time_ms": [
                json_float(m) for m in self.per_trial_mean_step_time_ms
            ],
            "step_time_by_node": [n.to_dict() for n in self.step_time_by_node],
            "failures": list(self.failures),
            "time_sources": list(cell_sources(self)),
            "trials": [
                {
                    "trial_id": t.trial_id,
                    "seed": t.seed,
                    "outcome": t.outcome,
                    "passed": t.passed,
                    "failure": t.failure,
                    "failed_at_step": t.failed_at_step,
                    "wall_clock_sec": json_float(t.wall_clock_sec),
                    "mean_step_time_ms": json_float(t.mean_step_time_ms),
                    "env_applied": dict(t.env_applied),
                    "execution": t.execution,
                    "step_clock": t.step_clock,
                    "step_times_ms": [json_float(s) for s in t.step_times_ms],
                    "host": None if t.host is None else t.host.to_dict(),
                    "time_source": t.time_source,
                    "host_load": None if t.host_load is None else t.host_load.to_dict(),
                    "first_nonfinite": None
                    if t.first_nonfinite is None
                    else dict(t.first_nonfinite),
                }
                for t in self.trials
            ],
        }


def _finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if math.isfinite(v)]


def json_float(value: float | None) -> float | None:
    # Strict JSON has no NaN / Infinity; None says "no value" honestly.
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _failure_reason(result: TrialResult) -> str:
    reason = result.failure or "failed (no reason recorded)"
    return f"trial {result.trial_id}: {reason}"


def _error_reason(result: TrialResult) -> str:
    return f"trial {result.trial_id}: {result.failure or 'error (no reason recorded)'}"


# The error of a cell an interrupted run never reached: it did not fail, it did not run.
NOT_RUN = "not run: the run was interrupted before this cell"
NOT_RUN_TEXT = "was not run (the run was interrupted before it)"


def error_cell(name: str, reason: str, *, trials_requested: int = 0) -> CellStats:
    """A cell that failed as a whole (e.g. its docker image could not be pulled).

    It keeps its row in the matrix (labelled `error`) with no counts or timings.
    """
    return CellStats(
        name=name,
        trials_requested=trials_requested,
        trials_run=0,
        passed_count=0,
        failed_count=0,
        nan_rate=None,
        mean_step_time_ms=None,
        std_step_time_ms=None,
        p50_step_time_ms=None,
        p99_step_time_ms=None,
        mean_wall_clock_sec=None,
        error=reason,
    )


def aggregate_cell(
    name: str,
    results: Sequence[TrialResult],
    *,
    trials_requested: int,
    stop_after_failures: int | None = None,
) -> CellStats:
    """Aggregate one cell's trial results into counts, failure rate and step-time statistics.

    Each trial counts on its own: one failing trial of 8 gives 7 passed / 1 failed; errored
    trials are counted apart and judged by nothing. See the module docstring for the pooling,
    std and percentile conventions. An empty `results` gives an errored cell (there is nothing
    to aggregate), and so does a cell whose trials all errored (reason: the first error's).
    """
    if not results:
        return error_cell(
            name,
            f"no trial results ({trials_requested} requested)",
            trials_requested=trials_requested,
        )
    ordered = sorted(results, key=lambda r: r.trial_id)
    trials = tuple(
        TrialSummary(
            trial_id=r.trial_id,
            seed=r.seed,
            passed=r.passed,
            failure=r.failure,
            failed_at_step=r.failed_at_step,
            step_times_ms=tuple(float(t) for t in r.step_times_ms),
            wall_clock_sec=float(r.wall_clock_sec),
            env_applied=dict(r.env_applied),
            execution=r.execution,
            step_clock=r.step_clock,
            time_source=time_source(r),
            host_load=r.host_load,
            outcome=r.outcome,
            host=r.host,
            read_warnings=trial_read_warnings(r.command),
            warmup_steps=r.warmup_steps,
            first_nonfinite=r.first_nonfinite,
        )
        for r in ordered
    )
    measured = [r for r in ordered if not r.errored]
    errors = tuple(_error_reason(r) for r in ordered if r.errored)
    passed = sum(1 for r in measured if r.passed)
    failed = len(measured) - passed
    pooled = _finite(t for r in measured for t in r.step_times_ms)
    trial_means = [m for m in (t.mean_step_time_ms for t in trials if t.measured) if m is not None]
    walls = _finite(r.wall_clock_sec for r in measured)
    has_times = bool(pooled)
    return CellStats(
        name=name,
        trials_requested=trials_requested,
        trials_run=len(ordered),
        passed_count=passed,
        failed_count=failed,
        nan_rate=failed / len(measured) if measured else None,
        # The mean of the trials' means: the quantity the ratio and its interval are built on.
        mean_step_time_ms=math.fsum(trial_means) / len(trial_means) if trial_means else None,
        std_step_time_ms=stats.sample_std(pooled) if len(pooled) > 1 else None,
        p50_step_time_ms=stats.percentile(pooled, 50) if has_times else None,
        p99_step_time_ms=stats.percentile(pooled, 99) if has_times else None,
        mean_wall_clock_sec=math.fsum(walls) / len(walls) if walls else None,
        failures=tuple(_failure_reason(r) for r in measured if not r.passed),
        trials=trials,
        observed=observed_settings(
            [r.observed for r in ordered], {key for r in ordered for key in r.env_applied}
        ),
        stop_after_failures=stop_after_failures,
        # Every trial errored: nothing was measured, and the row says why.
        error=None if measured else f"all {len(ordered)} trial(s) errored; first: {errors[0]}",
        error_count=len(errors),
        errors=errors,
        kernel_fingerprints=cell_fingerprints(r.kernel_fingerprints for r in measured),
        independence=independence.judge(measured) if measured else None,
    )

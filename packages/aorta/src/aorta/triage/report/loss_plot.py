"""matrix.png's loss panel: the loss traces of the baseline's failing and passing trials.

Drawn only when some baseline trial recorded losses (in-process workloads report them, a
command workload's log may carry them). Passing trials in grey, failing ones in red, each
failing trace ending at its last finite loss with a cross: where the baseline's failures
leave the passing trials' path, and whether they blow up or jump. Non-finite values (NaN,
inf, or None where a value could not be read) break the line rather than squashing the scale.
"""

from __future__ import annotations

import math
from typing import Any

from aorta.triage.analysis.matrix import Matrix, MatrixRow

__all__ = ["baseline_with_losses", "draw_baseline_losses"]

_PASSED = "#8c8c8c"
_FAILED = "#c44e52"
_MIN_TRACE = 2


def _finite_trace(losses: tuple[float | None, ...]) -> list[float]:
    return [v if v is not None and math.isfinite(v) else math.nan for v in losses]


def baseline_with_losses(matrix: Matrix) -> MatrixRow | None:
    """The baseline row when one of its trials recorded a trace (two finite losses or more:
    a single value shows no path); else None."""
    row = matrix.baseline_row
    for trial in row.stats.trials:
        if sum(not math.isnan(v) for v in _finite_trace(trial.losses)) >= _MIN_TRACE:
            return row
    return None


def draw_baseline_losses(ax: Any, row: MatrixRow) -> None:
    """Every measured baseline trial's loss trace on `ax` (step on x, loss on y)."""
    drawn: set[str] = set()
    for trial in row.stats.trials:
        trace = _finite_trace(trial.losses)
        if not trial.measured or not trace:
            continue
        failed = trial.outcome == "failed"
        label = "failed" if failed else "passed"
        steps = list(range(1, len(trace) + 1))
        ax.plot(
            steps,
            trace,
            color=_FAILED if failed else _PASSED,
            linewidth=1.0,
            alpha=0.9 if failed else 0.6,
            label=None if label in drawn else f"{label} trial",
        )
        drawn.add(label)
        last = max((i for i, v in enumerate(trace) if not math.isnan(v)), default=None)
        if failed and last is not None:
            ax.plot([steps[last]], [trace[last]], marker="x", color=_FAILED, markersize=6)
    ax.set_xlabel("step", fontsize=9)
    ax.set_ylabel("loss", fontsize=9)
    ax.set_title(f"Baseline loss per trial ({row.name})", fontsize=10)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="best")

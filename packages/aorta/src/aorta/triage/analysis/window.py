"""Timing the same work: compare step times over the steps both cells reached.

A failing trial stops early. Comparing a baseline whose trials fail after 14 steps with a cell
whose trials run 30 compares different work: warm-up effects, learning-rate schedules and
growing caches make late steps differ from early ones. So a cell's step times are compared
with the baseline's over a common window of steps. Pure functions; no I/O.

The rule (docs/triage.md, "Timing the same work"): the window is the first `L` timed steps
after warm-up of every trial, where `L` is the fewest timed post-warm-up steps that any
measured trial of either cell recorded (a trial that recorded none adds no time and does not
shorten the window). Each trial's mean step time is its mean over the window (non-finite step
times left out); the step-time ratio and its bootstrap interval are built from those means.
The window is recorded in the cell's numbering: steps `warm-up + 1` through `warm-up + L`,
counted from 1 (timed steps: a framework that logs every k iterations times log lines).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["StepWindow", "TimedTrial", "common_window", "paired_means", "window_ratio"]


@dataclass(frozen=True)
class TimedTrial:
    """One measured trial's timing: its warm-up length and its post-warm-up step times."""

    trial_id: int
    warmup_steps: int
    step_times_ms: Sequence[float]


@dataclass(frozen=True)
class StepWindow:
    """The steps a cell and its baseline are compared over, and each trial's mean over them."""

    length: int  # timed steps after warm-up in the window
    first: int  # first step of the window, counted from 1 with the warm-up (cell's numbering)
    last: int
    cell_means: Mapping[int, float]  # trial id -> mean step time over the window
    base_means: Mapping[int, float]


def _window_mean(times: Sequence[float], length: int) -> float | None:
    finite = [float(t) for t in times[:length] if math.isfinite(t)]
    return math.fsum(finite) / len(finite) if finite else None


def _means(trials: Sequence[TimedTrial], length: int) -> dict[int, float]:
    means = {t.trial_id: _window_mean(t.step_times_ms, length) for t in trials}
    return {trial_id: mean for trial_id, mean in means.items() if mean is not None}


def common_window(cell: Sequence[TimedTrial], base: Sequence[TimedTrial]) -> StepWindow | None:
    """The window both sides reached (module docstring); None when a side has no timed step."""
    cell_timed = [t for t in cell if t.step_times_ms]
    base_timed = [t for t in base if t.step_times_ms]
    if not cell_timed or not base_timed:
        return None
    length = min(len(t.step_times_ms) for t in (*cell_timed, *base_timed))
    cell_means, base_means = _means(cell_timed, length), _means(base_timed, length)
    if not cell_means or not base_means:
        return None  # every step time in the window is non-finite
    warmup = max(t.warmup_steps for t in cell_timed)
    return StepWindow(length, warmup + 1, warmup + length, cell_means, base_means)


def window_ratio(window: StepWindow | None) -> float | None:
    """Mean of the cell's window means over the baseline's; None without a positive baseline."""
    if window is None:
        return None
    base = math.fsum(window.base_means.values()) / len(window.base_means)
    if base <= 0.0:
        return None
    return (math.fsum(window.cell_means.values()) / len(window.cell_means)) / base


def paired_means(window: StepWindow) -> tuple[list[float], list[float]]:
    """Window means of the rounds (trial ids) both sides have one for, in round order."""
    rounds = sorted(set(window.cell_means) & set(window.base_means))
    return [window.cell_means[r] for r in rounds], [window.base_means[r] for r in rounds]
